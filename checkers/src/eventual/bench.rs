//! Benchmark support: a seeded generator of eventually consistent set histories and the
//! table `splitbrain bench set` prints (read + check with set-full, convergence and
//! session guarantees, time and peak RSS).
//!
//! The simulated store commits every add when it is acknowledged; replica `r` shows the
//! adds committed at least `lag[r]` ago (as committed, in commit order) plus its own newer
//! adds (as tentative). Sessions stay on one replica. Reads are therefore often stale, yet
//! every history satisfies set-full, the committed prefix, the four session guarantees
//! and, after quiescence, convergence: the generator is correct by construction.

use super::{ConvergenceChecker, EventualDataType, SessionGuaranteesChecker, SetFullChecker};
use crate::history::write::write_op_line;
use crate::history::{History, HistoryError, Op, OpType, Process};
use crate::verdict::{CheckResult, Checker};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

/// Shape of a generated set history.
#[derive(Debug, Clone)]
pub struct SetGenConfig {
    /// ChaCha seed.
    pub seed: u64,
    /// Total ops (invokes and completions), final reads included (approximately: the
    /// last pairs complete and the final rounds are whole).
    pub ops: usize,
    /// Replicas (`n1`..).
    pub replicas: usize,
    /// Keys; the `n`-th add goes to key `n % keys` as element `n / keys` (elements are
    /// per key, as the checkers treat every key as its own set).
    pub keys: usize,
    /// Distinct elements added (each once).
    pub elements: usize,
    /// Client sessions (processes), each pinned to replica `process % replicas`.
    pub processes: usize,
    /// Largest replication lag, in ms (replica `r`'s lag is `r * max_lag_ms / replicas`).
    pub max_lag_ms: u64,
    /// Rounds of final reads (every replica x every key) after quiescence.
    pub final_rounds: usize,
}

impl SetGenConfig {
    /// The benchmark's shape: 1,000,000 ops, 10 replicas, 1,000 keys of 100 elements.
    pub fn benchmark(seed: u64) -> SetGenConfig {
        SetGenConfig {
            seed,
            ops: 1_000_000,
            replicas: 10,
            keys: 1_000,
            elements: 100_000,
            processes: 20,
            max_lag_ms: 200,
            final_rounds: 2,
        }
    }
}

/// Time between consecutive ops, ns.
const STEP_NS: u64 = 20_000;

/// The simulated store.
struct Store {
    /// Per key: (commit time, element, origin replica), in commit order.
    log: Vec<Vec<(u64, i64, usize)>>,
    lag_ns: Vec<u64>,
}

impl Store {
    /// What replica `r` shows of `key` at time `now`.
    fn read(&self, key: usize, r: usize, now: u64) -> Value {
        let log = &self.log[key];
        let horizon = now.saturating_sub(self.lag_ns[r]);
        let cut = log.partition_point(|x| x.0 <= horizon);
        let committed: Vec<i64> = log[..cut].iter().map(|x| x.1).collect();
        let tentative: Vec<i64> = log[cut..]
            .iter()
            .filter(|x| x.2 == r)
            .map(|x| x.1)
            .collect();
        json!({"committed": committed, "tentative": tentative})
    }
}

/// An open op of a process.
struct Open {
    read: bool,
    key: usize,
    element: i64,
}

fn client_op(p: u64, t: OpType, f: &str, key: usize, value: Value, time: u64) -> Op {
    Op::new(Process::Client(p), t, f, value)
        .with_key(format!("k{key}"))
        .at(time)
}

/// Runs the simulation, handing each op to `emit` in history order.
pub fn simulate(cfg: &SetGenConfig, mut emit: impl FnMut(Op) -> io::Result<()>) -> io::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let replicas = cfg.replicas.max(1);
    let keys = cfg.keys.max(1);
    let processes = cfg.processes.max(1);
    let mut store = Store {
        log: vec![Vec::new(); keys],
        lag_ns: (0..replicas)
            .map(|r| r as u64 * cfg.max_lag_ms * 1_000_000 / replicas as u64)
            .collect(),
    };
    let finals = cfg.final_rounds * replicas * keys * 2;
    let pairs = cfg.ops.saturating_sub(finals) / 2;
    let add_share = cfg.elements as f64 / pairs.max(1) as f64;
    let node = |r: usize| format!("n{}", r + 1);
    let mut open: Vec<Option<Open>> = (0..processes).map(|_| None).collect();
    let (mut time, mut invoked, mut added, mut in_flight) = (0u64, 0usize, 0usize, 0usize);
    while invoked < pairs || in_flight > 0 {
        time += STEP_NS;
        let p = rng.gen_range(0..processes);
        let r = p % replicas;
        match open[p].take() {
            None if invoked < pairs => {
                invoked += 1;
                in_flight += 1;
                let add = added < cfg.elements
                    && (rng.gen_bool(add_share.min(1.0)) || pairs - invoked < cfg.elements - added);
                let op = if add {
                    let element = (added / keys) as i64;
                    let key = added % keys;
                    added += 1;
                    open[p] = Some(Open {
                        read: false,
                        key,
                        element,
                    });
                    client_op(p as u64, OpType::Invoke, "add", key, json!(element), time)
                } else {
                    let key = rng.gen_range(0..keys);
                    open[p] = Some(Open {
                        read: true,
                        key,
                        element: 0,
                    });
                    client_op(p as u64, OpType::Invoke, "read", key, Value::Null, time)
                };
                emit(op)?;
            }
            None => {}
            Some(o) => {
                in_flight -= 1;
                let mut op = if o.read {
                    let v = store.read(o.key, r, time);
                    client_op(p as u64, OpType::Ok, "read", o.key, v, time)
                } else {
                    store.log[o.key].push((time, o.element, r));
                    client_op(p as u64, OpType::Ok, "add", o.key, json!(o.element), time)
                };
                op.node = Some(node(r));
                emit(op)?;
            }
        }
    }
    // Quiescence, then rounds of final reads: one session per replica.
    time += cfg.max_lag_ms * 1_000_000 + 1_000_000;
    for _ in 0..cfg.final_rounds {
        for r in 0..replicas {
            let p = (processes + r) as u64;
            for key in 0..keys {
                time += STEP_NS;
                emit(client_op(p, OpType::Invoke, "read", key, Value::Null, time))?;
                time += STEP_NS;
                let mut op = client_op(p, OpType::Ok, "read", key, store.read(key, r, time), time);
                op.node = Some(node(r));
                emit(op)?;
            }
        }
    }
    Ok(())
}

/// A generated history in memory (for tests and small benches).
pub fn generate(cfg: &SetGenConfig) -> History {
    let mut ops = Vec::new();
    let _ = simulate(cfg, |op| {
        ops.push(op);
        Ok(())
    });
    // Generated ops are well-formed by construction; fall back to empty if not.
    History::new(ops).unwrap_or_default()
}

/// Streams a generated history to `path` as JSON Lines without holding it in memory.
pub fn write_set_history(path: &Path, cfg: &SetGenConfig) -> io::Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let mut index = 0u64;
    simulate(cfg, |mut op| {
        op.index = index;
        index += 1;
        write_op_line(&mut out, &op)
    })?;
    out.flush()
}

/// CPU time (user + system, all threads) this process has used so far, in seconds
/// (Linux, assuming 100 clock ticks a second), if known: unlike wall time it does not
/// grow when other processes share the machine.
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    Some((ticks(11)? + ticks(12)?) / 100.0)
}

/// Wall and CPU seconds of `f`.
fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (t, c) = (Instant::now(), cpu_seconds());
    let out = f();
    let cpu = cpu_seconds().zip(c).map_or(0.0, |(b, a)| b - a);
    (out, t.elapsed().as_secs_f64(), cpu)
}

/// One measured run.
#[derive(Debug, Clone)]
pub struct SetBenchRun {
    /// Ops in the history.
    pub ops: usize,
    /// Size of the JSON Lines file in MiB.
    pub file_mib: f64,
    /// Seconds to write the file (not part of checking).
    pub generate_s: f64,
    /// Wall and CPU seconds to read and parse it.
    pub parse_s: (f64, f64),
    /// Per checker: name, wall and CPU seconds, result.
    pub checks: Vec<(String, (f64, f64), CheckResult)>,
}

/// Generates, writes, reads and checks one history; the temp file is removed after.
pub fn measure(cfg: &SetGenConfig) -> Result<SetBenchRun, HistoryError> {
    let path = std::env::temp_dir().join(format!(
        "splitbrain-set-bench-{}-{}.jsonl",
        cfg.seed,
        std::process::id()
    ));
    let io_err = |source| HistoryError::Io {
        file: path.clone(),
        source,
    };
    let t = Instant::now();
    write_set_history(&path, cfg).map_err(io_err)?;
    let generate_s = t.elapsed().as_secs_f64();
    let file_mib = std::fs::metadata(&path)
        .map(|m| m.len() as f64 / 1048576.0)
        .unwrap_or(0.0);
    let (history, wall, cpu) = timed(|| crate::history::read::read_path(&path));
    let _ = std::fs::remove_file(&path);
    let history = history?;
    let parse_s = (wall, cpu);
    let checkers: Vec<Box<dyn Checker>> = vec![
        Box::new(SetFullChecker),
        Box::new(ConvergenceChecker::new(EventualDataType::Set)),
        Box::new(SessionGuaranteesChecker::new(EventualDataType::Set)),
    ];
    let checks = checkers
        .iter()
        .map(|c| {
            let (r, wall, cpu) = timed(|| c.check(&history));
            (c.name(), (wall, cpu), r)
        })
        .collect();
    Ok(SetBenchRun {
        ops: history.len(),
        file_mib,
        generate_s,
        parse_s,
        checks,
    })
}

/// Runs the benchmark (the 1,000,000-op set history, seed 42) and renders a table.
pub fn run_table() -> String {
    let cfg = SetGenConfig::benchmark(42);
    let mut out = format!(
        "set history: {} ops target, {} replicas, {} keys, {} elements, {} sessions, lag up to {} ms, seed {}\n",
        cfg.ops, cfg.replicas, cfg.keys, cfg.elements, cfg.processes, cfg.max_lag_ms, cfg.seed
    );
    // Wall times stretch when other processes share the cores; say how busy it was.
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        let one_minute = load.split_whitespace().next().unwrap_or("?");
        out.push_str(&format!(
            "load average (1 min) at start: {one_minute}, cores: {}\n",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ));
    }
    match measure(&cfg) {
        Ok(run) => {
            out.push_str(&format!(
                "{} ops, file {:.1} MiB, generated in {:.2} s (not counted)\n",
                run.ops, run.file_mib, run.generate_s
            ));
            let mut t = crate::table::Table::new(["step", "wall s", "cpu s", "verdict", "notes"]);
            let mut row = |name: &str, (wall, cpu): (f64, f64), verdict: &str, notes: &str| {
                t.row([
                    name.to_string(),
                    format!("{wall:.2}"),
                    format!("{cpu:.2}"),
                    verdict.to_string(),
                    notes.to_string(),
                ]);
            };
            row("read + parse", run.parse_s, "-", "");
            let mut total = run.parse_s;
            for (name, s, r) in &run.checks {
                total = (total.0 + s.0, total.1 + s.1);
                let notes = match name.as_str() {
                    "set-full" => format!(
                        "stale reads {} of {}, stable latency p50 {} ms p99 {} ms",
                        r.details["stale_reads"],
                        r.details["reads"],
                        r.details["stable_latency_ms"]["p50"],
                        r.details["stable_latency_ms"]["p99"]
                    ),
                    "convergence" => format!(
                        "{} final reads, converged {} ms (max) after quiescence",
                        r.details["final_reads"], r.details["convergence_ms"]["max"]
                    ),
                    _ => format!(
                        "{} reads, {} sessions",
                        r.details["reads"], r.details["sessions"]
                    ),
                };
                row(name, *s, r.valid.label(), &notes);
            }
            row("total (read+check)", total, "", "");
            out.push_str(&t.plain());
        }
        Err(e) => out.push_str(&format!("error: {e}\n")),
    }
    if let Some(rss) = crate::elle::bench::peak_rss_mib() {
        out.push_str(&format!("peak RSS of this process: {rss:.0} MiB\n"));
    }
    out
}
