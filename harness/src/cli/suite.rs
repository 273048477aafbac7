//! `splitbrain suite`: run a declared verification matrix (a suite file or a built-in
//! suite), judge every cell against its expectation and print the detection table.
//!
//! Exit codes: 0 every cell met its expectation; 1 some cell did not (failing cells first);
//! 2 a bad suite file or option; 4 the harness could not run (every failing cell failed
//! only because its runs could not run, or the suite was interrupted).

use super::test::run_blocking;
use super::{usage, EXIT_COULD_NOT_RUN};
use crate::check_options::CheckOptions;
use crate::run::entry::resolve;
use crate::run::spec::TestSpec;
use crate::suite::{
    evidence_points, history_times, judge_run, junit_xml, markdown, parse_suite, terminal_table,
    time_to_detect, Cell, CellReport, RunReport, Suite, SuiteReport, BUILT_IN,
};
use anyhow::Context;
use clap::Args;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub(crate) struct SuiteArgs {
    /// A built-in suite (`quick`, `full`) or a suite file (TOML).
    suite: String,
    /// Run every cell with these seeds instead of the suite's (comma separated).
    #[arg(long, value_delimiter = ',')]
    seeds: Option<Vec<u64>>,
    /// Run only this cell (its name), or every cell of a target (`kv/`); repeatable.
    #[arg(long)]
    only: Vec<String>,
    /// Seconds of every run's main phase, instead of each cell's `time_limit`.
    #[arg(long)]
    time_limit: Option<f64>,
    /// Write the detection table as Markdown to this file (it is also appended to
    /// `$GITHUB_STEP_SUMMARY` when that is set).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write JUnit XML (one test case per cell) to this file.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the full results (every run) as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run store directory (each run is stored as `splitbrain test` stores it).
    #[arg(long, default_value = "store")]
    store: PathBuf,
    /// Print the suite file and exit.
    #[arg(long)]
    print: bool,
    /// Runs at a time. Cells are independent clusters on their own ports and directories;
    /// a detection that holds only on an idle machine is a weak one, so running two at a
    /// time is also a test of that (CI runs `--jobs 2` on its 2 cores).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    jobs: u32,
    /// Run every cell without the check alongside it (`test --no-online-check`), so no
    /// cell stops early: the suite as it ran before online checking, to compare with.
    #[arg(long)]
    no_online_check: bool,
    /// Choose every faulted cell's faults this way (`test --nemesis-search`): `guided` to
    /// compare its detection with the random schedule's on the same cells and seeds.
    #[arg(long, value_parser = ["random", "guided"])]
    nemesis_search: Option<String>,
}

pub(crate) fn cmd_suite(a: SuiteArgs) -> anyhow::Result<u8> {
    let (text, origin, default_name) = load(&a.suite)?;
    if a.print {
        print!("{text}");
        return Ok(0);
    }
    let mut suite = parse_suite(&text, &origin, &default_name).map_err(|e| usage(e.to_string()))?;
    if let Some(seeds) = &a.seeds {
        if seeds.is_empty() {
            return Err(usage("--seeds needs at least one seed"));
        }
        for c in &mut suite.cells {
            c.seeds = seeds.clone();
        }
    }
    if !a.only.is_empty() {
        suite
            .cells
            .retain(|c| a.only.iter().any(|o| selected(&c.name, o)));
        if suite.cells.is_empty() {
            return Err(usage(format!(
                "no cell of {origin} matches --only {:?}",
                a.only
            )));
        }
    }
    if let Some(t) = a.time_limit {
        for c in &mut suite.cells {
            c.options.time_limit = Some(t);
        }
    }
    if a.no_online_check {
        for c in &mut suite.cells {
            if !c.options.extra.iter().any(|x| x == "--no-online-check") {
                c.options.extra.push("--no-online-check".to_string());
            }
        }
    }
    if let Some(search) = &a.nemesis_search {
        for c in &mut suite.cells {
            if !c.options.extra.iter().any(|x| x == "--nemesis-search") {
                c.options.extra.push("--nemesis-search".to_string());
                c.options.extra.push(search.clone());
            }
        }
    }
    // Cells whose program is not here (`requires`, `${VAR}`) step aside, saying why.
    suite.cells.retain(|c| match &c.skip {
        Some(why) => {
            eprintln!("splitbrain: skip {}: {why}", c.name);
            false
        }
        None => true,
    });
    if suite.cells.is_empty() {
        eprintln!("splitbrain: every cell of {origin} was skipped; nothing ran");
        return Ok(0);
    }
    let store = a.store.to_string_lossy().into_owned();
    // Every cell is checked before anything runs, so a typo in the last cell does not
    // surface after an hour of runs.
    for c in &suite.cells {
        prepare(&suite, c, c.seeds[0], &store)?;
    }
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let total = suite.cells.len();
    let cells = run_cells(&suite, &store, &cancel, a.jobs as usize)?;
    if cancel.is_cancelled() {
        eprintln!(
            "splitbrain: suite interrupted after {} of {total} cells",
            cells.len()
        );
    }
    let report = SuiteReport::new(
        &suite,
        cells,
        started.elapsed().as_secs_f64(),
        load_average(),
    );
    println!("{}", terminal_table(&report));
    write_outputs(&a, &report)?;
    Ok(if cancel.is_cancelled() {
        EXIT_COULD_NOT_RUN
    } else if report.passed {
        0
    } else if report.cells.iter().any(|c| c.failed_on_verdict()) {
        1
    } else {
        EXIT_COULD_NOT_RUN
    })
}

/// Runs every (cell, seed) with `jobs` runs at a time and returns the cells' reports in
/// the suite's order, each printed as it completes. Stops taking new runs once cancelled;
/// a cell cut short by that is reported with the runs it has.
fn run_cells(
    suite: &Suite,
    store: &str,
    cancel: &CancellationToken,
    jobs: usize,
) -> anyhow::Result<Vec<CellReport>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let work: Vec<(usize, u64)> = suite
        .cells
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.seeds.iter().map(move |&s| (i, s)))
        .collect();
    let next = AtomicUsize::new(0);
    let total = suite.cells.len();
    // Per cell: the runs done so far, by position among its seeds.
    let done: Mutex<Vec<Vec<Option<RunReport>>>> = Mutex::new(
        suite
            .cells
            .iter()
            .map(|c| vec![None; c.seeds.len()])
            .collect(),
    );
    let finished = AtomicUsize::new(0);
    let first_error: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(work.len()).max(1) {
            scope.spawn(|| loop {
                if cancel.is_cancelled() || first_error.lock().is_ok_and(|e| e.is_some()) {
                    return;
                }
                let Some(&(ci, seed)) = work.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                let cell = &suite.cells[ci];
                match run_one(suite, cell, seed, store, cancel) {
                    Err(e) => {
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(e);
                        }
                        return;
                    }
                    Ok(run) => {
                        let Ok(mut d) = done.lock() else { return };
                        let k = cell.seeds.iter().position(|&s| s == seed).unwrap_or(0);
                        d[ci][k] = Some(run);
                        if d[ci].iter().all(Option::is_some) {
                            let runs = d[ci].iter().flatten().cloned().collect();
                            let report = CellReport::new(cell, runs);
                            let i = finished.fetch_add(1, Ordering::Relaxed) + 1;
                            eprintln!("{}", progress_line(i, total, &report));
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().ok().flatten() {
        return Err(e);
    }
    let done = done
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a suite run panicked"))?;
    Ok(suite
        .cells
        .iter()
        .zip(done)
        .filter(|(_, runs)| runs.iter().any(Option::is_some))
        .map(|(cell, runs)| CellReport::new(cell, runs.into_iter().flatten().collect()))
        .collect())
}

/// `--only`: the cell's name, a target prefix such as `kv/`, or a matrix cell's base name.
fn selected(name: &str, only: &str) -> bool {
    name == only
        || (only.ends_with('/') && name.starts_with(only))
        || name
            .strip_prefix(only)
            .is_some_and(|rest| rest.starts_with(" ["))
}

/// The suite's text, where it came from, and its default name.
fn load(name: &str) -> anyhow::Result<(String, String, String)> {
    if let Some((n, text)) = BUILT_IN.iter().find(|(n, _)| *n == name) {
        return Ok((
            text.to_string(),
            format!("built-in suite {n}"),
            n.to_string(),
        ));
    }
    let path = Path::new(name);
    if !path.exists() {
        let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
        return Err(usage(format!(
            "{name:?} is neither a built-in suite ({}) nor a file",
            names.join(", ")
        )));
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {name}"))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| name.to_string());
    Ok((text, name.to_string(), stem))
}

/// One run of a cell, resolved as `splitbrain test` resolves its flags; any problem is a
/// usage error naming the suite file's line and the cell.
fn prepare(
    suite: &Suite,
    cell: &Cell,
    seed: u64,
    store: &str,
) -> anyhow::Result<(TestSpec, CheckOptions)> {
    let at = format!("{}:{}: cell {:?}", suite.origin, cell.line, cell.name);
    let (request, check) = cell
        .request(seed, store)
        .map_err(|e| usage(format!("{at}: {e}")))?;
    let spec = resolve(&request, &check).map_err(|e| usage(format!("{at}: {e}")))?;
    Ok((spec, check))
}

fn run_one(
    suite: &Suite,
    cell: &Cell,
    seed: u64,
    store: &str,
    cancel: &CancellationToken,
) -> anyhow::Result<RunReport> {
    let (spec, check) = prepare(suite, cell, seed, store)?;
    let started = Instant::now();
    let outcome = run_blocking(&spec, &check, false, cancel);
    let wall_s = started.elapsed().as_secs_f64();
    Ok(match outcome {
        Err(e) => RunReport {
            seed,
            judgement: judge_run(&cell.expect, Err(&format!("{e:#}"))),
            time_to_detect_s: None,
            run_dir: None,
            wall_s,
        },
        Ok(o) => {
            let judgement = judge_run(&cell.expect, Ok(&o.summary));
            let points = evidence_points(&o.summary);
            let wanted: BTreeSet<u64> = points.iter().filter_map(|p| p.index).collect();
            // Without the history, times carried by the evidence itself still count.
            let times = history_times(&o.run_dir.history(), &wanted).unwrap_or_default();
            RunReport {
                seed,
                judgement,
                time_to_detect_s: time_to_detect(&points, &times).map(|ns| ns as f64 / 1e9),
                run_dir: Some(o.run_dir.path.display().to_string()),
                wall_s,
            }
        }
    })
}

/// `[3/26] kv/stale-read: seed 1: INVALID linearizable -> ok 14 s`.
fn progress_line(i: usize, n: usize, c: &CellReport) -> String {
    let runs: Vec<String> = c.runs.iter().map(|r| r.verdict_line()).collect();
    let wall: f64 = c.runs.iter().map(|r| r.wall_s).sum();
    format!(
        "splitbrain suite [{i}/{n}] {}: {} -> {} {:.0} s{}",
        c.name,
        runs.join(", "),
        if c.passed { "ok" } else { "FAIL" },
        wall,
        if c.passed {
            String::new()
        } else {
            format!(" ({})", c.reason)
        }
    )
}

fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

fn write_outputs(a: &SuiteArgs, report: &SuiteReport) -> anyhow::Result<()> {
    let md = markdown(report);
    if let Some(path) = &a.markdown {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| {
                format!("opening $GITHUB_STEP_SUMMARY ({})", path.to_string_lossy())
            })?;
        writeln!(f, "{md}").context("appending to $GITHUB_STEP_SUMMARY")?;
    }
    if let Some(path) = &a.junit {
        let xml = junit_xml(report).context("rendering JUnit XML")?;
        std::fs::write(path, xml).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.json {
        std::fs::write(path, report.json())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
