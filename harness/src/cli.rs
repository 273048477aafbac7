//! Command-line definitions and the commands behind them.

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use splitbrain::check::{
    infer_workload, locate_history, run_checkers, write_outputs, CheckOptions,
};
use splitbrain::controller::run_test;
use splitbrain::spec::TestSpec;
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::Validity;
use splitbrain_reports::{history_stats, summary_table, RunSummary};
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Exit code: the harness or the system under test could not run.
pub const EXIT_COULD_NOT_RUN: u8 = 4;
/// Exit code: usage error.
pub const EXIT_USAGE: u8 = 2;

/// A usage error found after parsing (bad combination, unknown name).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(String);

/// Maps an error to its exit code: usage errors 2, everything else 4.
pub fn exit_code_for(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<UsageError>().is_some() {
        EXIT_USAGE
    } else {
        EXIT_COULD_NOT_RUN
    }
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UsageError(msg.into()).into()
}

/// splitbrain: start a real cluster, drive clients while faults hit it, record every
/// operation, and check the history for linearizability, serializability and convergence.
#[derive(Parser, Debug)]
#[command(name = "splitbrain", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a test against a real cluster and check it.
    Test(Box<TestArgs>),
    /// Check a recorded history (a run directory or a history file in any format).
    Check(CheckArgs),
    /// List targets, workloads, models, nemeses and bugs.
    List,
    /// Benchmarks: `controller`, `linearizable`, `elle`.
    Bench(BenchArgs),
}

#[derive(Args, Debug, Clone)]
struct CheckFlags {
    /// Linearizability model (register, cas-register, kv, list-append, set, queue, ...).
    #[arg(long)]
    model: Option<String>,
    /// Required consistency model for transactional histories.
    #[arg(long)]
    consistency_model: Option<String>,
    /// `jepsen` (a failed cas did nothing) or `observed` (it saw a different value).
    #[arg(long, default_value = "jepsen", value_parser = ["jepsen", "observed"])]
    failed_cas: String,
    /// Initial state of the linearizability model, as JSON (a register at `0`, a counter
    /// at `100`, a multi-register at `{"x":0,"y":0}`); also the `counter` checker's start.
    #[arg(long, value_parser = parse_json)]
    init: Option<serde_json::Value>,
    /// rw-register: infer version orders from each process's order (Elle's option).
    #[arg(long)]
    sequential_keys: bool,
    /// rw-register: infer version orders from real-time order (Elle's option).
    #[arg(long)]
    linearizable_keys: bool,
    /// rw-register: a write follows the value the same transaction read (Elle's option).
    #[arg(long)]
    wfr_keys: bool,
    /// Check a keyed history as one object instead of key by key.
    #[arg(long)]
    no_split: bool,
    /// Time bound for the check in seconds (then the verdict is `unknown`).
    #[arg(long = "check-time-limit")]
    check_time_limit: Option<f64>,
    /// Memory bound for the check in MiB.
    #[arg(long)]
    max_memory: Option<u64>,
}

/// Parses a `--init` argument.
fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

impl CheckFlags {
    fn options(&self) -> CheckOptions {
        CheckOptions {
            model: self.model.clone(),
            consistency_model: self.consistency_model.clone(),
            failed_cas_observed: self.failed_cas == "observed",
            init: self.init.clone(),
            sequential_keys: self.sequential_keys,
            linearizable_keys: self.linearizable_keys,
            wfr_keys: self.wfr_keys,
            no_split: self.no_split,
            time_limit: self.check_time_limit.map(Duration::from_secs_f64),
            max_memory: self.max_memory.map(|m| m * 1024 * 1024),
        }
    }
}

#[derive(Args, Debug)]
struct TestArgs {
    /// The system under test.
    #[arg(long, default_value = "kv")]
    target: String,
    /// What the clients do.
    #[arg(long, default_value = "register")]
    workload: String,
    /// Faults, comma separated: partition,kill,pause,clock,slow,loss or none.
    #[arg(long, default_value = "partition,kill,pause")]
    nemesis: String,
    /// Mean seconds between faults.
    #[arg(long, default_value_t = 4.0)]
    nemesis_interval: f64,
    /// A fault plan file (JSON: `[{"at_ms":..,"for_ms":..,"f":"kill","nodes":["n2"]}]`)
    /// replacing the random schedule.
    #[arg(long)]
    nemesis_plan: Option<PathBuf>,
    /// Number of nodes.
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// Concurrent client workers.
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    /// Total target rate in ops/s (0 = as fast as possible).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Seconds of the main phase.
    #[arg(long, default_value_t = 20.0)]
    time_limit: f64,
    /// Client op timeout in milliseconds; a timed-out op is `info`.
    #[arg(long, default_value_t = 1000)]
    op_timeout_ms: u64,
    /// Seed of every random choice (printed and stored; default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Enable a target bug (repeatable); `splitbrain list` names them.
    #[arg(long = "bug")]
    bugs: Vec<String>,
    /// Shards (targets that shard).
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Read mode (targets that have several; for `txn` the isolation level:
    /// serializable or read-committed).
    #[arg(long)]
    read_mode: Option<String>,
    /// Hedged reads: milliseconds before the second request.
    #[arg(long, default_value_t = 20)]
    hedge_delay_ms: u64,
    /// Keys in use at once.
    #[arg(long, default_value_t = 8)]
    active_keys: usize,
    /// Ops per key before a fresh key replaces it.
    #[arg(long, default_value_t = 100)]
    ops_per_key: usize,
    /// Run store directory.
    #[arg(long, default_value = "store")]
    store: PathBuf,
    /// Test name (default `<target>-<workload>`).
    #[arg(long)]
    name: Option<String>,
    /// Node binary (default: found beside splitbrain or on PATH).
    #[arg(long)]
    target_bin: Option<PathBuf>,
    /// Do not show the progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Print results.json to stdout instead of the table.
    #[arg(long, value_parser = ["table", "json"], default_value = "table")]
    format: String,
    #[command(flatten)]
    check: CheckFlags,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// A run directory (with history.jsonl) or a history file (JSONL, JSON array, EDN, Jepsen log).
    path: PathBuf,
    /// Workload whose checkers to use (register, append, list-append, rw-register, bank).
    #[arg(long)]
    workload: Option<String>,
    /// Run these checkers (comma separated or repeated) instead: Jepsen's counter,
    /// unique-ids, total-queue, long-fork, stats, exceptions, or bank.
    #[arg(long = "checker", value_delimiter = ',')]
    checkers: Vec<String>,
    /// Output format.
    #[arg(long, value_parser = ["table", "json"], default_value = "table")]
    format: String,
    #[command(flatten)]
    check: CheckFlags,
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// `controller`, `linearizable`, `elle`, `set` (set checkers on a 1M-op history) or
    /// `converge` (Bayou convergence time after a heal).
    what: String,
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
}

/// Runs the parsed command and returns the exit code.
pub fn try_main(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Test(a) => cmd_test(*a),
        Command::Check(a) => cmd_check(a),
        Command::List => {
            print!("{}", list_text());
            Ok(0)
        }
        Command::Bench(a) => cmd_bench(a),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn verdict_code(v: Validity) -> u8 {
    v.exit_code() as u8
}

fn cmd_test(a: TestArgs) -> anyhow::Result<u8> {
    let Some(target) = splitbrain::target::by_name(&a.target) else {
        return Err(usage(format!(
            "unknown target {:?}; `splitbrain list` shows them",
            a.target
        )));
    };
    let Some(workload) = splitbrain::workload::by_name(&a.workload) else {
        return Err(usage(format!(
            "unknown workload {:?}; `splitbrain list` shows them",
            a.workload
        )));
    };
    if !target.workloads().contains(&a.workload.as_str()) {
        return Err(usage(format!(
            "target {} cannot run workload {:?} (it runs: {})",
            a.target,
            a.workload,
            target.workloads().join(", ")
        )));
    }
    for bug in &a.bugs {
        if !target.bugs().iter().any(|b| b.name == bug) {
            return Err(usage(format!(
                "target {} has no bug {bug:?}; `splitbrain list` shows them",
                a.target
            )));
        }
    }
    if let Some(mode) = &a.read_mode {
        if !target.read_modes().contains(&mode.as_str()) {
            return Err(usage(format!(
                "target {} has no read mode {mode:?} (has: {})",
                a.target,
                target.read_modes().join(", ")
            )));
        }
    }
    if a.nodes == 0 || a.concurrency == 0 || a.time_limit <= 0.0 {
        return Err(usage(
            "--nodes, --concurrency and --time-limit must be positive",
        ));
    }
    let nemesis: Vec<String> = a
        .nemesis
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty() && *f != "none")
        .map(str::to_string)
        .collect();
    splitbrain_nemesis::NemesisSpec::parse(&a.nemesis, Duration::from_secs(1), 0)
        .map_err(|e| usage(e.to_string()))?;
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let check = a.check.options();
    workload
        .checkers(&check)
        .map_err(|e| usage(format!("{e:#}")))?;
    let spec = TestSpec {
        name: a
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-{}", a.target, a.workload)),
        target: a.target.clone(),
        workload: a.workload.clone(),
        nemesis,
        nemesis_interval_s: a.nemesis_interval,
        nemesis_plan: a.nemesis_plan.clone(),
        nemesis_schedule: serde_json::Value::Null,
        nodes: a.nodes,
        concurrency: a.concurrency,
        rate: a.rate,
        time_limit_s: a.time_limit,
        op_timeout_ms: a.op_timeout_ms,
        seed,
        bugs: a.bugs.clone(),
        shards: a.shards,
        read_mode: a.read_mode.clone(),
        consistency_model: a.check.consistency_model.clone(),
        init: a.check.init.clone(),
        hedge_delay_ms: a.hedge_delay_ms,
        active_keys: a.active_keys,
        ops_per_key: a.ops_per_key,
        quiesce_s: 2.0,
        store: a.store.clone(),
        target_bin: a.target_bin.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nsplitbrain: interrupted; stopping clients, healing, tearing down...");
                c.cancel();
            }
        });
        let show = !a.no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr());
        run_test(&spec, target, workload.as_ref(), &check, cancel, show).await
    })?;
    rt.shutdown_timeout(Duration::from_secs(2));
    let s = &outcome.summary;
    if a.format == "json" {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        println!("{}", summary_table(s));
        println!("report: {}", outcome.run_dir.report().display());
    }
    if s.incomplete.is_some() {
        return Ok(EXIT_COULD_NOT_RUN);
    }
    Ok(verdict_code(s.valid))
}

fn cmd_check(a: CheckArgs) -> anyhow::Result<u8> {
    let stored = locate_history(&a.path)?;
    let history_path = stored.history;
    let history = read_path(&history_path)?;
    let mut check = a.check.options();
    // A stored run is re-checked as it was checked, unless the flags say otherwise.
    if check.consistency_model.is_none() {
        check.consistency_model = stored.consistency_model;
    }
    if check.init.is_none() {
        check.init = stored.init;
    }
    let workload = a.workload.clone().or(stored.workload);
    let (name, checkers) = match (&workload, &check.model) {
        _ if !a.checkers.is_empty() => (
            a.checkers.join(","),
            a.checkers
                .iter()
                .map(|n| check.named_checker(n))
                .collect::<anyhow::Result<Vec<_>>>()
                .map_err(|e| usage(format!("{e:#}")))?,
        ),
        (Some(w), None) => (
            w.clone(),
            check.for_workload(w).map_err(|e| usage(format!("{e:#}")))?,
        ),
        (_, Some(m)) => (
            format!("model:{m}"),
            vec![check
                .linearizability(m)
                .map_err(|e| usage(format!("{e:#}")))?],
        ),
        (None, None) => {
            let inferred = infer_workload(&history);
            let checkers = match inferred.strip_prefix("model:") {
                Some(m) => vec![check
                    .linearizability(m)
                    .map_err(|e| usage(format!("{e:#}")))?],
                None => check.for_workload(inferred)?,
            };
            (inferred.to_string(), checkers)
        }
    };
    let results = run_checkers(&history, &checkers);
    let run_dir = a.path.is_dir().then(|| a.path.display().to_string());
    let summary = RunSummary::new(
        history_path.display().to_string(),
        run_dir.clone(),
        results,
        history_stats(&history),
        None,
    );
    if a.path.is_dir() {
        write_outputs(&a.path, &summary, &history)?;
    }
    if a.format == "json" {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        eprintln!("checked {} as {name}", history_path.display());
        println!("{}", summary_table(&summary));
    }
    Ok(verdict_code(summary.valid))
}

fn cmd_bench(a: BenchArgs) -> anyhow::Result<u8> {
    match a.what.as_str() {
        "controller" => {
            let dir = tempfile_dir()?;
            let path = dir.join("bench-history.jsonl");
            let rt = runtime()?;
            let r = rt.block_on(splitbrain::bench::controller_throughput(
                a.processes,
                Duration::from_secs_f64(a.seconds),
                &path,
            ))?;
            let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            let _ = std::fs::remove_dir_all(&dir);
            println!("| processes | ops | seconds | ops/s | history bytes |");
            println!("|---|---|---|---|---|");
            println!(
                "| {} | {} | {:.2} | {:.0} | {} |",
                r.processes,
                r.ops,
                r.seconds,
                r.ops_per_sec(),
                bytes
            );
            Ok(0)
        }
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
            let binary = splitbrain::controller::find_binary(None, "splitbrain-bayou")?;
            let dir = tempfile_dir()?;
            let rt = runtime()?;
            let table = rt.block_on(splitbrain::bench_converge::run_table(
                binary,
                &[25, 50, 100, 200, 500],
                a.writes,
                &dir,
            ));
            let _ = std::fs::remove_dir_all(&dir);
            print!("{}", table?);
            Ok(0)
        }
        other => bail!(usage(format!(
            "unknown benchmark {other:?}: controller, linearizable, elle, set or converge"
        ))),
    }
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("splitbrain-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn list_text() -> String {
    let mut out = String::from("targets:\n");
    for t in splitbrain::target::all() {
        out.push_str(&format!("  {:<24} {}\n", t.name(), t.description()));
        if !t.read_modes().is_empty() {
            out.push_str(&format!("    read modes: {}\n", t.read_modes().join(", ")));
        }
        out.push_str(&format!("    workloads: {}\n", t.workloads().join(", ")));
        for b in t.bugs() {
            out.push_str(&format!("    bug {:<22} {}\n", b.name, b.description));
        }
    }
    out.push_str("workloads:\n");
    for w in splitbrain::workload::all() {
        out.push_str(&format!("  {:<24} {}\n", w.name(), w.description()));
    }
    out.push_str("linearizability models (--model):\n");
    for (name, desc) in splitbrain_checkers::linearizability::models() {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out.push_str("consistency models (--consistency-model):\n");
    for (name, desc) in splitbrain_checkers::elle::consistency_models() {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out.push_str("checkers (check --checker NAME):\n");
    for (name, desc) in splitbrain_checkers::jepsen::CHECKERS {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out.push_str("nemeses (--nemesis, comma separated):\n");
    for (name, desc) in [
        ("partition", "network partitions through the proxy mesh (halves, isolate one, isolate the leader, majorities ring, bridge, one-way)"),
        ("leader-churn", "cut the leader off; each time another node takes over, cut that one off instead (three hand-overs per fault)"),
        ("kill", "kill -9 and restart nodes (one, a minority, a majority, all, the leader)"),
        ("pause", "SIGSTOP / SIGCONT nodes"),
        ("clock", "bump, strobe or skew node clocks through their admin endpoint"),
        ("slow", "add latency with jitter to links"),
        ("loss", "drop a fraction of link traffic"),
        ("none", "no faults"),
    ] {
        out.push_str(&format!("  {name:<24} {desc}\n"));
    }
    out
}
