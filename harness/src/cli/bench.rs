//! `splitbrain bench`: the benchmarks.

use super::{runtime, usage};
use anyhow::bail;
use clap::Args;
use splitbrain_checkers::table::Table;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// `controller`, `linearizable`, `elle`, `set` (set checkers on a 1M-op history),
    /// `limit FILE` (raw read, bare parse and `check` of one history, with the check's
    /// phases and its ratio to the bare parse),
    /// `converge` (Bayou convergence time after a heal), `tail` (KV read policies'
    /// tail latency under slow-server faults), `maelstrom` (the simulated network:
    /// routing alone, and round trips through an echo node, `--bin`) or `online` (a kv
    /// `--rate 0` run with and without online checking: CPU per op, peak RSS, RSS over
    /// time).
    what: String,
    /// The history file of `bench limit`.
    file: Option<PathBuf>,
    /// Limit bench: first write FILE with a generator: `cas` (keyed cas-register, `--size`
    /// ops at `--info`'s first rate), `append` (list-append, `--size` transactions over
    /// `--processes`), `append-g1c` (the same with one injected G1c), `rw` and `rw-g1c`
    /// (rw-register transactions, the same shape), `cas-corrupt` (`cas` with one corrupt
    /// read near the middle, not linearizable).
    #[arg(long)]
    generate: Option<String>,
    /// Limit bench: only write FILE with `--generate`, measure nothing (e.g. to feed the
    /// same history to another checker, `scripts/porcupine-compare.sh`).
    #[arg(long)]
    generate_only: bool,
    /// Limit bench: ops or transactions to generate.
    #[arg(long, default_value_t = 1_000_000)]
    size: usize,
    /// Limit bench: an argument passed on to `splitbrain check` (repeatable), e.g.
    /// `--check-arg=--model --check-arg=cas-register`.
    #[arg(long, allow_hyphen_values = true)]
    check_arg: Vec<String>,
    /// Seconds of each run (online bench).
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Rounds of the online bench: each runs the test with online checking and without,
    /// which first alternating.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// How often the online bench shows splitbrain's resident set (seconds).
    #[arg(long, default_value_t = 30.0)]
    sample_every: f64,
    /// Client processes (controller bench).
    #[arg(long, default_value_t = 64)]
    processes: usize,
    /// Seconds (controller bench).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Data directory with the public histories (linearizable bench).
    #[arg(long, default_value = "../shared/data")]
    data: PathBuf,
    /// Writes pending when the partition heals (converge bench).
    #[arg(long, default_value_t = 10_000)]
    writes: usize,
    /// Seconds per cell (tail bench).
    #[arg(long, default_value_t = 10.0)]
    cell_seconds: f64,
    /// Where the tail bench writes its page (the table and a latency-quantile chart per
    /// scenario).
    #[arg(long, default_value = "bench-tail.html")]
    html: PathBuf,
    /// Share of the measured capacity offered in every cell (tail bench).
    #[arg(long, default_value_t = crate::bench::tail::LOAD_SHARE)]
    load_share: f64,
    /// Take this capacity (ok ops/s) instead of measuring it (tail bench), to rerun some
    /// cells at an earlier run's load.
    #[arg(long)]
    capacity: Option<f64>,
    /// Scenario letters to run, of `abcd` (tail bench).
    #[arg(long, default_value = "abcd")]
    scenarios: String,
    /// Read policies to run, comma-separated (tail bench; default all four).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "read-index,replica-read,hedged,read-all"
    )]
    policies: Vec<String>,
    /// Concurrent clients of every cell (tail bench); the capacity is measured with 16.
    #[arg(long, default_value_t = crate::bench::tail::CELL_CLIENTS)]
    clients: usize,
    /// Rounds of the tail bench: every cell runs this many times, interleaved, and shows
    /// its median run by p99 beside every run's p99.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Keep every cell's run (history, report) in this store (tail bench); by default
    /// the runs go to a scratch directory removed at the end.
    #[arg(long)]
    store: Option<PathBuf>,
    /// Run the tail bench's cells on these SSH hosts, one node per host (a hosts file or
    /// addresses, as `splitbrain test --hosts`).
    #[arg(long)]
    hosts: Option<String>,
    /// The minimum hedge delay, ms (tail bench).
    #[arg(long, default_value_t = 2)]
    hedge_floor_ms: u64,
    /// The echo node for the maelstrom bench (any Maelstrom echo program).
    #[arg(long, default_value = "examples/maelstrom/js/echo.js")]
    bin: PathBuf,
    /// Linearizable bench: instead of the public histories, generated keyed cas-register
    /// histories at `--sizes` x `--info`, plus one with a corrupt read per size at 5 %
    /// info, each checked by a `splitbrain check` child (time and peak RSS per cell, and the
    /// growth from the smallest size to the largest).
    #[arg(long)]
    scale: bool,
    /// Sizes of the scale bench, in ops.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000000,3000000,10000000"
    )]
    sizes: Vec<usize>,
    /// Percentages of ops ending `info` in the scale bench.
    #[arg(long, value_delimiter = ',', default_value = "0,1,5,20")]
    info: Vec<f64>,
    /// Scale bench: leave out the corrupt-read row per size.
    #[arg(long)]
    no_corrupt: bool,
}

pub(crate) fn cmd_bench(a: BenchArgs) -> anyhow::Result<u8> {
    match a.what.as_str() {
        "controller" => {
            let dir = tempfile_dir()?;
            let path = dir.join("bench-history.jsonl");
            let rt = runtime()?;
            let r = rt.block_on(crate::bench::controller::controller_throughput(
                a.processes,
                Duration::from_secs_f64(a.seconds),
                &path,
            ))?;
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let _ = std::fs::remove_dir_all(&dir);
            let mut t = Table::new(["processes", "ops", "seconds", "ops/s", "history bytes"]);
            t.row([
                r.processes.to_string(),
                r.ops.to_string(),
                format!("{:.2}", r.seconds),
                format!("{:.0}", r.ops_per_sec()),
                bytes.to_string(),
            ]);
            print!("{}", t.markdown());
            Ok(0)
        }
        "linearizable" if a.scale => linearizable_scale(&a),
        "limit" => limit(&a),
        "linearizable" => {
            let data = a.data.is_dir().then_some(a.data.as_path());
            print!(
                "{}",
                splitbrain_checkers::linearizability::bench::run_table(data)
            );
            Ok(0)
        }
        "elle" => {
            print!("{}", splitbrain_checkers::elle::bench::run_table());
            Ok(0)
        }
        "set" => {
            print!("{}", splitbrain_checkers::eventual::bench::run_table());
            Ok(0)
        }
        "converge" => {
            let binary = crate::run::programs::find_binary(None, "splitbrain-bayou")?;
            let dir = tempfile_dir()?;
            let rt = runtime()?;
            let table = rt.block_on(crate::bench::converge::run_table(
                binary,
                &[25, 50, 100, 200, 500],
                a.writes,
                &dir,
            ));
            let _ = std::fs::remove_dir_all(&dir);
            print!("{}", table?);
            Ok(0)
        }
        "tail" => tail(&a),
        "maelstrom" => maelstrom(&a),
        "online" => online(&a),
        other => bail!(usage(format!(
            "unknown benchmark {other:?}: controller, linearizable, elle, set, limit, converge, tail, maelstrom or online"
        ))),
    }
}

/// `bench tail`: read policies of the KV store under slow-server faults (Markdown on
/// stdout, the page with the quantile charts at `html`).
fn tail(a: &BenchArgs) -> anyhow::Result<u8> {
    use crate::bench::tail::POLICIES;
    if let Some(p) = a.policies.iter().find(|p| !POLICIES.contains(&p.as_str())) {
        bail!(usage(format!(
            "--policies: unknown policy {p:?}; expected some of {}",
            POLICIES.join(",")
        )));
    }
    if let Some(c) = a.scenarios.chars().find(|c| !"abcd".contains(*c)) {
        bail!(usage(format!(
            "--scenarios: unknown scenario {c:?}; expected letters of abcd"
        )));
    }
    if !(a.load_share > 0.0 && a.load_share <= 1.0) {
        bail!(usage(format!(
            "--load-share: {} is not a share of capacity in (0, 1]",
            a.load_share
        )));
    }
    if a.runs == 0 {
        bail!(usage("--runs: every cell needs at least one run"));
    }
    if a.clients == 0 {
        bail!(usage("--clients: a cell needs at least one client"));
    }
    if !(a.cell_seconds.is_finite() && a.cell_seconds > 0.0) {
        bail!(usage(format!(
            "--cell-seconds: {} is not a positive number of seconds",
            a.cell_seconds
        )));
    }
    let html = a.html.as_path();
    let dir = tempfile_dir()?;
    let opts = crate::bench::tail::TailOptions {
        cell_s: a.cell_seconds,
        store: a
            .store
            .clone()
            .unwrap_or_else(|| crate::bench::tail::scratch_store(&dir)),
        seed: 1,
        hedge_floor_ms: a.hedge_floor_ms,
        load_share: a.load_share,
        capacity: a.capacity,
        scenarios: a.scenarios.clone(),
        policies: a.policies.clone(),
        clients: a.clients,
        runs: a.runs,
        hosts: a.hosts.clone(),
    };
    let report = runtime()?.block_on(crate::bench::tail::run(&opts));
    let _ = std::fs::remove_dir_all(&dir);
    let report = report?;
    print!("{}", report.markdown());
    std::fs::write(html, report.html())
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", html.display()))?;
    eprintln!(
        "bench tail: page with the quantile charts: {}",
        html.display()
    );
    Ok(0)
}

/// `bench maelstrom`: routing alone, then round trips through a real echo node (Markdown).
fn maelstrom(a: &BenchArgs) -> anyhow::Result<u8> {
    use crate::bench::maelstrom as bench;
    let mut t = Table::new(["what", "messages", "seconds", "messages/s", "per message"]);
    let r = bench::routing_only(1_000_000);
    t.row([
        "routing only (node to node, 16-element gossip body)".to_string(),
        r.messages.to_string(),
        format!("{:.2}", r.seconds),
        format!("{:.0}", r.per_sec()),
        format!("{:.0} ns", r.ns_per_msg()),
    ]);
    if !a.bin.is_file() {
        t.row([
            "echo round trips".to_string(),
            format!("skipped: {} is not a file (--bin)", a.bin.display()),
        ]);
        print!("{}", t.markdown());
        return Ok(0);
    }
    let dir = tempfile_dir()?;
    let rt = runtime()?;
    for clients in [1, 10] {
        let out = rt.block_on(bench::echo_round_trips(&a.bin, clients, a.seconds, &dir));
        let (r, median) = out.map_err(|e| anyhow::anyhow!("echo bench: {e}"))?;
        t.row([
            format!("echo round trips, {clients} client(s), {}", a.bin.display()),
            r.messages.to_string(),
            format!("{:.2}", r.seconds),
            format!("{:.0}", r.per_sec()),
            format!("median round trip {median:.3} ms"),
        ]);
    }
    print!("{}", t.markdown());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(0)
}

/// `bench limit FILE`: generate it when asked, then raw read, bare parse, check.
fn limit(a: &BenchArgs) -> anyhow::Result<u8> {
    use crate::bench::limit::{self as bl, Generated};
    let Some(file) = &a.file else {
        bail!(usage("bench limit needs a history FILE"));
    };
    if let Some(kind) = &a.generate {
        let kind = match kind.as_str() {
            "cas" | "cas-corrupt" => Generated::Cas {
                info: a.info.first().copied().unwrap_or(0.0),
                corrupt: kind == "cas-corrupt",
            },
            "append" | "append-g1c" | "rw" | "rw-g1c" => Generated::Append {
                processes: a.processes,
                g1c: kind.ends_with("-g1c"),
                rw_register: kind.starts_with("rw"),
            },
            other => bail!(usage(format!(
                "--generate: unknown history {other:?}: cas, cas-corrupt, append, append-g1c, rw or rw-g1c"
            ))),
        };
        let t = std::time::Instant::now();
        bl::generate(file, kind, a.size)?;
        eprintln!(
            "generated {} in {:.1} s",
            file.display(),
            t.elapsed().as_secs_f64()
        );
        if a.generate_only {
            return Ok(0);
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let (bytes, read_s) = bl::raw_read(file)?;
    let threads = rayon::current_num_threads();
    let (lines, parse1_s) = bl::bare_parse(file, 1)?;
    let (_, parse_all_s) = bl::bare_parse(file, threads)?;
    let exe = std::env::current_exe()?;
    let scratch = tempfile_dir()?;
    let check = bl::check(&exe, file, &a.check_arg, &scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    let report = bl::LimitReport {
        bytes,
        read_s,
        lines,
        parse1_s,
        parse_all_s,
        threads,
        check: check?,
    };
    print!(
        "{}",
        report.markdown(&file.display().to_string(), load.trim())
    );
    Ok(0)
}

/// `bench linearizable --scale`: generation outside the measured time, each check in a
/// child process so its own peak RSS is measured. Exits 1 if a verdict is not the expected
/// one (valid for generated histories, invalid with a corrupt read).
fn linearizable_scale(a: &BenchArgs) -> anyhow::Result<u8> {
    let exe = std::env::current_exe()?;
    let dir = tempfile_dir()?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut plan: Vec<(usize, f64, bool)> = Vec::new();
    for &info in &a.info {
        plan.extend(a.sizes.iter().map(|&size| (size, info, false)));
    }
    if !a.no_corrupt {
        plan.extend(a.sizes.iter().map(|&size| (size, 5.0, true)));
    }
    let mut cells = Vec::new();
    for (size, info, corrupt) in plan {
        let cell =
            crate::bench::controller::linearizable_scale_cell(&exe, &dir, size, info, corrupt);
        let cell = match cell {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        eprintln!(
            "{size} ops, {info} % info{}: {} in {:.2} s",
            if corrupt { ", corrupt read" } else { "" },
            cell.verdict,
            cell.seconds
        );
        cells.push(cell);
    }
    let _ = std::fs::remove_dir_all(&dir);
    print!(
        "{}",
        crate::bench::controller::scale_table(&cells, load.trim())
    );
    let expected = |c: &crate::bench::controller::ScaleCell| {
        c.verdict == if c.corrupt { "INVALID" } else { "valid" }
    };
    Ok(if cells.iter().all(expected) { 0 } else { 1 })
}

/// `bench online`: kv `--rate 0` runs with and without online checking (Markdown on
/// stdout, each run on stderr as it ends).
fn online(a: &BenchArgs) -> anyhow::Result<u8> {
    if a.duration <= 0.0 || a.sample_every <= 0.0 || a.rounds == 0 {
        bail!(usage(
            "--duration, --sample-every and --rounds must be positive"
        ));
    }
    let exe = std::env::current_exe()?;
    let dir = tempfile_dir()?;
    let duration = Duration::from_secs_f64(a.duration);
    let runs = crate::bench::online::run_bench(
        &exe,
        &dir,
        duration,
        a.rounds,
        Duration::from_secs_f64(a.sample_every),
        &|r| {
            eprintln!(
                "online {}: {} ok ops, tree CPU {:.1} s, peak RSS {} MiB, load {}",
                if r.online { "on" } else { "off" },
                r.ok_ops,
                r.tree_cpu_s,
                r.peak_rss >> 20,
                r.load.1
            )
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
    let runs = runs?;
    print!("{}", crate::bench::online::table(&runs, duration));
    Ok(if runs.iter().all(|r| r.code.is_some()) {
        0
    } else {
        4
    })
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("splitbrain-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
