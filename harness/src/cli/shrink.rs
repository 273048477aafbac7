//! `splitbrain shrink --history`: the smallest sub-history that still fails the same way,
//! with the checker as the oracle (see `splitbrain_checkers::shrink`).

use super::checker_selection::{load, select_checkers, CheckerSelection};
use super::usage;
use crate::check::{write_outputs, StoredRun};
use crate::check_options::CheckFlags;
use anyhow::Context;
use clap::Args;
use splitbrain_checkers::history::write::write_json_lines;
use splitbrain_checkers::shrink::{shrink, FailureClass, ShrinkBounds, Shrunk};
use splitbrain_checkers::{CheckResult, Checker, History, Validity};
use splitbrain_reports::{history_stats, RunSummary};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub(crate) struct ShrinkArgs {
    /// A stored failing run directory: replay it against a live cluster to shrink its
    /// fault schedule, length and load (docs/shrink.md), then shrink the history of the
    /// last failing replay.
    #[arg(conflicts_with = "history", required_unless_present = "history")]
    pub(crate) run: Option<PathBuf>,
    /// A run directory (with history.jsonl) or a history file (JSONL, JSON array, EDN,
    /// Jepsen log) that a checker finds invalid: shrink the history only, no cluster.
    #[arg(long)]
    history: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) selection: CheckerSelection,
    #[command(flatten)]
    pub(crate) check: CheckFlags,
    #[command(flatten)]
    pub(crate) shrink: ShrinkFlags,
    #[command(flatten)]
    pub(crate) schedule: ScheduleFlags,
}

/// How a schedule shrink (`shrink RUN_DIR`) replays and is bounded.
#[derive(Args, Debug, Clone)]
pub(crate) struct ScheduleFlags {
    /// Most replays of each candidate; it is kept when a majority fail the same way.
    #[arg(long, default_value_t = 3)]
    pub(crate) replays: usize,
    /// Replays of the final candidate that measure its replay rate.
    #[arg(long, default_value_t = 5)]
    pub(crate) confirm: usize,
    /// Most seconds the schedule shrink may take, confirmation runs included.
    #[arg(long, default_value_t = 1800)]
    pub(crate) budget: u64,
}

/// How a shrink is aimed and bounded (shared by `shrink` and `check --shrink`).
#[derive(Args, Debug, Clone)]
pub(crate) struct ShrinkFlags {
    /// The anomaly the shrunk history must still show (G2-item, lost-append, ...); by
    /// default the failure least bound to timing: an anomaly without a -realtime or
    /// -process suffix, a checker other than linearizable or convergence (docs/shrink.md).
    #[arg(long)]
    pub(crate) anomaly: Option<String>,
    /// Where to write the shrunk history, its results and report (default: `shrunk/` in
    /// the run directory, or `FILE.shrunk/` beside a history file).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Most candidate histories to check.
    #[arg(long, default_value_t = 20_000)]
    max_checks: usize,
    /// Most seconds to spend (a schedule shrink gives its history shrink what is left of
    /// `--budget`, at least 30 s, if that is less).
    #[arg(long, default_value_t = 300)]
    pub(crate) max_seconds: u64,
}

impl Default for ShrinkFlags {
    fn default() -> Self {
        ShrinkFlags {
            anomaly: None,
            out: None,
            max_checks: 20_000,
            max_seconds: 300,
        }
    }
}

/// `shrink --history`: the history alone (`shrink RUN_DIR` is `shrink_schedule`'s).
pub(crate) fn cmd_shrink(a: ShrinkArgs) -> anyhow::Result<u8> {
    let Some(path) = a.history.clone() else {
        return Err(usage("shrink needs a RUN_DIR or --history PATH"));
    };
    let (stored, history, check) = load(&path, &a.check)?;
    let (name, checkers) = select_checkers(&a.selection, &history, &stored, &check)?;
    let results: Vec<CheckResult> = checkers.iter().map(|c| c.check(&history)).collect();
    eprintln!("checked {} as {name}", stored.history.display());
    match shrink_first_failure(&path, &stored, &history, &checkers, &results, &a.shrink)? {
        Some(_) => Ok(super::verdict_code(Validity::Invalid)),
        None => {
            let merged = results
                .iter()
                .fold(Validity::Valid, |v, r| v.merge(r.valid));
            eprintln!("nothing to shrink: no checker found the history invalid");
            for r in &results {
                eprintln!("  {}: {:?}: {}", r.checker, r.valid, r.explanation);
            }
            Ok(super::verdict_code(merged))
        }
    }
}

/// Shrinks the history for the failure least bound to timing (`FailureClass::of_results`;
/// the first naming `--anomaly`, if given), writes the shrunk history beside the run and prints the
/// before/after sizes. `None` if no result qualifies.
pub(crate) fn shrink_first_failure(
    path: &Path,
    stored: &StoredRun,
    history: &History,
    checkers: &[Box<dyn Checker>],
    results: &[CheckResult],
    flags: &ShrinkFlags,
) -> anyhow::Result<Option<Shrunk>> {
    let chosen = FailureClass::of_results(results, flags.anomaly.as_deref()).and_then(|class| {
        let checker = checkers.iter().find(|c| c.name() == class.checker)?;
        Some((checker, class))
    });
    let Some((checker, class)) = chosen else {
        if let Some(a) = &flags.anomaly {
            if results.iter().any(|r| r.valid == Validity::Invalid) {
                return Err(usage(format!(
                    "no invalid checker names the anomaly {a}; they name: {}",
                    results
                        .iter()
                        .flat_map(|r| r.anomaly_types.iter().cloned())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        return Ok(None);
    };
    let bounds = ShrinkBounds {
        max_checks: flags.max_checks,
        max_time: Duration::from_secs(flags.max_seconds),
    };
    let started = Instant::now();
    let shrunk = shrink(history, checker.as_ref(), &class, &bounds)?;
    let took = started.elapsed();
    let out = flags.out.clone().unwrap_or_else(|| default_out(path));
    write_shrunk(&out, &shrunk, stored)?;
    println!("shrunk for {class}:");
    println!(
        "  ops {} -> {}; operations {} -> {}; {} checks in {:.2} s",
        shrunk.ops_before,
        shrunk.ops_after,
        shrunk.units_before,
        shrunk.units_after,
        shrunk.checks,
        took.as_secs_f64()
    );
    if let Some(cut) = &shrunk.first_cut {
        println!("  first cut: {cut}");
    }
    match &shrunk.stopped_by {
        None => {
            println!("  1-minimal: removing any one remaining operation no longer fails this way")
        }
        Some(bound) => println!(
            "  not 1-minimal: stopped by {bound}; the history still fails this way, but some operation may still go"
        ),
    }
    println!("  explanation: {}", shrunk.result.explanation);
    println!("  written to {}", out.display());
    const SHOWN: usize = 40;
    for op in carried_ops(&shrunk.history).iter().take(SHOWN) {
        println!("    {}", serde_json::to_string(op)?);
    }
    if shrunk.ops_after > SHOWN {
        println!("    ... {} more in history.jsonl", shrunk.ops_after - SHOWN);
    }
    Ok(Some(shrunk))
}

/// `RUN_DIR/shrunk` or `FILE.shrunk`.
fn default_out(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join("shrunk")
    } else {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".shrunk");
        path.with_file_name(name)
    }
}

/// The history's ops carrying the indices of the original file.
fn carried_ops(h: &History) -> Vec<splitbrain_checkers::Op> {
    (0..h.len()).filter_map(|p| h.carried_op(p)).collect()
}

/// The shrunk history (original indices), its results and report, as a run directory
/// that `check` and `report` read like any other.
fn write_shrunk(out: &Path, s: &Shrunk, stored: &StoredRun) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let path = out.join("history.jsonl");
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(&path).with_context(|| format!("writing {}", path.display()))?,
    );
    write_json_lines(&mut file, carried_ops(&s.history).iter())
        .with_context(|| format!("writing {}", path.display()))?;
    drop(file);
    let summary = RunSummary::new(
        format!("{} (shrunk)", stored.history.display()),
        Some(out.display().to_string()),
        vec![s.result.clone()],
        history_stats(&s.history),
        None,
    );
    write_outputs(out, &summary, &s.history, stored.test.as_ref())?;
    let sizes = serde_json::json!({
        "ops_before": s.ops_before, "ops_after": s.ops_after,
        "operations_before": s.units_before, "operations_after": s.units_after,
        "checks": s.checks, "first_cut": s.first_cut, "stopped_by": s.stopped_by,
    });
    std::fs::write(out.join("shrink.json"), serde_json::to_vec_pretty(&sizes)?)
        .with_context(|| format!("writing {}", out.join("shrink.json").display()))?;
    Ok(())
}
