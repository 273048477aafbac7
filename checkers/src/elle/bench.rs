//! Benchmark support: a generator of strict-serializable list-append histories and the
//! table `splitbrain bench elle` prints.
//!
//! The generator simulates a database that applies each transaction atomically at one
//! point inside its invoke/complete interval, so every history it makes is strict
//! serializable by construction. Keys rotate: once a key has taken
//! [`GenConfig::max_appends_per_key`] appends it is retired and a fresh key takes its
//! place among the `keys` active ones (as Elle's own generator does), which keeps reads
//! short however long the history.

use super::{ElleChecker, ElleOptions, ElleWorkload};
use crate::history::write::write_op_line;
use crate::history::{History, HistoryError, Op, OpType, Process};
use crate::verdict::Checker;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

/// Shape of a generated list-append history.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// ChaCha seed.
    pub seed: u64,
    /// Number of transactions.
    pub txns: usize,
    /// Number of keys active at any time.
    pub keys: usize,
    /// Number of concurrent client processes.
    pub processes: usize,
    /// Micro-ops per transaction: uniform in 1..=max_mops.
    pub max_mops: usize,
    /// Appends a key takes before it is retired for a fresh one.
    pub max_appends_per_key: u32,
    /// Fraction of transactions that fail (never applied).
    pub fail_ratio: f64,
    /// Fraction of transactions that end `info` (applied or not, at random).
    pub info_ratio: f64,
    /// Make one read stale: the first `ok` transaction completed after half the
    /// transactions that read a non-empty list returns it without its last element
    /// (a G-single-item-realtime under strict serializability). List-append only.
    pub stale_read: bool,
    /// Inject one G1c: once half the transactions are invoked, two `ok` transactions on
    /// two fresh keys (by two fresh processes) each append to one key and read the
    /// other's append, a write-read cycle no serial order explains.
    pub g1c: bool,
    /// Rw-register instead of list-append: `["w", k, v]` writes a value unique to its
    /// key and `["r", k, v]` reads the key's last value (`null` before any write).
    pub rw_register: bool,
}

impl GenConfig {
    /// The benchmark's shape: 1–5 micro-ops, all transactions ok.
    pub fn new(seed: u64, txns: usize, keys: usize, processes: usize) -> GenConfig {
        GenConfig {
            seed,
            txns,
            keys: keys.max(1),
            processes: processes.max(1),
            max_mops: 5,
            max_appends_per_key: 16,
            fail_ratio: 0.0,
            info_ratio: 0.0,
            stale_read: false,
            g1c: false,
            rw_register: false,
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Fate {
    Ok,
    Fail,
    Info,
}

struct Pending {
    process: u64,
    mops: Vec<(bool, u64, u64)>, // (is_append, key, value)
    fate: Fate,
    applied: Option<Value>,
}

/// Runs the simulation, handing each op to `emit` in history order.
pub fn simulate(cfg: &GenConfig, mut emit: impl FnMut(Op) -> io::Result<()>) -> io::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let mut active: Vec<u64> = (0..cfg.keys as u64).collect();
    let mut next_key = cfg.keys as u64;
    let mut assigned: Vec<u32> = vec![0; cfg.keys];
    // Every key's list, retired keys included: transactions in flight may still use them.
    let mut lists: std::collections::HashMap<u64, Vec<u64>> = std::collections::HashMap::new();
    let mut slots: Vec<Option<Pending>> = (0..cfg.processes).map(|_| None).collect();
    let mut process_ids: Vec<u64> = (0..cfg.processes as u64).collect();
    let (mut invoked, mut open, mut time) = (0usize, 0usize, 0u64);
    let mut completed = 0usize;
    let mut stale_pending = cfg.stale_read;
    let mut g1c_pending = cfg.g1c;
    let limit = cfg.txns.saturating_mul(8).saturating_add(1_000_000);
    for _ in 0..limit {
        if invoked >= cfg.txns && open == 0 {
            break;
        }
        time += 1_000;
        let p = rng.gen_range(0..cfg.processes);
        match &mut slots[p] {
            None => {
                if invoked >= cfg.txns {
                    continue;
                }
                if g1c_pending && invoked >= cfg.txns / 2 {
                    g1c_pending = false;
                    let (x, y) = (next_key, next_key + 1);
                    next_key += 2;
                    emit_g1c(cfg, [x, y], time, &mut emit)?;
                }
                invoked += 1;
                open += 1;
                let n = rng.gen_range(1..=cfg.max_mops.max(1));
                let mut mops = Vec::with_capacity(n);
                for _ in 0..n {
                    let slot = rng.gen_range(0..cfg.keys);
                    if rng.gen_bool(0.5) {
                        if assigned[slot] >= cfg.max_appends_per_key {
                            active[slot] = next_key;
                            next_key += 1;
                            assigned[slot] = 0;
                        }
                        assigned[slot] += 1;
                        mops.push((true, active[slot], assigned[slot] as u64));
                    } else {
                        mops.push((false, active[slot], 0));
                    }
                }
                let r: f64 = rng.gen();
                let fate = if r < cfg.fail_ratio {
                    Fate::Fail
                } else if r < cfg.fail_ratio + cfg.info_ratio {
                    Fate::Info
                } else {
                    Fate::Ok
                };
                let value = Value::Array(
                    mops.iter()
                        .map(|&(a, k, v)| invoke_mop(cfg, a, k, v))
                        .collect(),
                );
                emit(
                    Op::new(
                        Process::Client(process_ids[p]),
                        OpType::Invoke,
                        "txn",
                        value.clone(),
                    )
                    .at(time),
                )?;
                slots[p] = Some(Pending {
                    process: process_ids[p],
                    mops,
                    fate,
                    applied: None,
                });
            }
            Some(pending) => {
                if pending.applied.is_none()
                    && pending.fate != Fate::Fail
                    && (pending.fate == Fate::Ok || rng.gen_bool(0.5))
                {
                    // Apply atomically now: this is the transaction's linearization point.
                    let mut out = Vec::with_capacity(pending.mops.len());
                    for &(is_append, k, v) in &pending.mops {
                        match (is_append, cfg.rw_register) {
                            (true, false) => {
                                lists.entry(k).or_default().push(v);
                                out.push(json!(["append", k, v]));
                            }
                            (false, false) => {
                                let list = lists.get(&k).cloned().unwrap_or_default();
                                out.push(json!(["r", k, list]));
                            }
                            (true, true) => {
                                // A register keeps only its last value.
                                let slot = lists.entry(k).or_default();
                                slot.clear();
                                slot.push(v);
                                out.push(json!(["w", k, v]));
                            }
                            (false, true) => {
                                let last = lists.get(&k).and_then(|l| l.last().copied());
                                out.push(json!(["r", k, last]));
                            }
                        }
                    }
                    pending.applied = Some(Value::Array(out));
                    if pending.fate == Fate::Ok {
                        continue;
                    }
                }
                let done = slots[p].take();
                let Some(done) = done else { continue };
                open -= 1;
                let invoke_value = Value::Array(
                    done.mops
                        .iter()
                        .map(|&(a, k, v)| invoke_mop(cfg, a, k, v))
                        .collect(),
                );
                completed += 1;
                let (t, value) = match done.fate {
                    Fate::Ok => {
                        let mut value = done.applied.unwrap_or(invoke_value);
                        if stale_pending && completed > cfg.txns / 2 && drop_last_read(&mut value) {
                            stale_pending = false;
                        }
                        (OpType::Ok, value)
                    }
                    Fate::Fail => (OpType::Fail, invoke_value),
                    Fate::Info => {
                        // A crashed client never invokes again: a fresh process replaces it.
                        process_ids[p] += cfg.processes as u64;
                        (OpType::Info, invoke_value)
                    }
                };
                emit(Op::new(Process::Client(done.process), t, "txn", value).at(time))?;
            }
        }
    }
    Ok(())
}

/// A micro-op as invoked: a write or append with its value, a read with `null`.
fn invoke_mop(cfg: &GenConfig, write: bool, key: u64, value: u64) -> Value {
    match (write, cfg.rw_register) {
        (true, false) => json!(["append", key, value]),
        (true, true) => json!(["w", key, value]),
        (false, _) => json!(["r", key, null]),
    }
}

/// The injected G1c: processes above every generated one's, invoked and completed at
/// `time`: T1 appends (writes) 1 to `x` and reads `y` as `[1]` (`1`), T2 the same with
/// `x` and `y` swapped, so each read the other's write (a wr cycle).
fn emit_g1c(
    cfg: &GenConfig,
    [x, y]: [u64; 2],
    time: u64,
    emit: &mut impl FnMut(Op) -> io::Result<()>,
) -> io::Result<()> {
    // Info completions move a slot's process id up by `processes`; these stay above all.
    let base = u64::MAX / 2;
    let txn = |own: u64, other: u64, read: Value| {
        json!([invoke_mop(cfg, true, own, 1), ["r", other, read]])
    };
    for (p, own, other) in [(base, x, y), (base + 1, y, x)] {
        emit(
            Op::new(
                Process::Client(p),
                OpType::Invoke,
                "txn",
                txn(own, other, Value::Null),
            )
            .at(time),
        )?;
    }
    for (p, own, other) in [(base, x, y), (base + 1, y, x)] {
        emit(
            Op::new(
                Process::Client(p),
                OpType::Ok,
                "txn",
                txn(
                    own,
                    other,
                    if cfg.rw_register {
                        json!(1)
                    } else {
                        json!([1])
                    },
                ),
            )
            .at(time),
        )?;
    }
    Ok(())
}

/// Drops the last element of the first non-empty list read in a transaction's value.
fn drop_last_read(value: &mut Value) -> bool {
    let Some(mops) = value.as_array_mut() else {
        return false;
    };
    for m in mops {
        if m.get(0).and_then(Value::as_str) != Some("r") {
            continue;
        }
        if let Some(list) = m.get_mut(2).and_then(Value::as_array_mut) {
            if list.pop().is_some() {
                return true;
            }
        }
    }
    false
}

/// A strict-serializable list-append history of `txns` transactions (1–5 micro-ops each)
/// over `keys` active keys and `processes` processes, all completing `ok`.
pub fn generate_list_append_history(
    seed: u64,
    txns: usize,
    keys: usize,
    processes: usize,
) -> History {
    generate(&GenConfig::new(seed, txns, keys, processes))
}

/// A history from a full [`GenConfig`] (e.g. with failed and indeterminate transactions).
pub fn generate(cfg: &GenConfig) -> History {
    let mut ops = Vec::new();
    let _ = simulate(cfg, |op| {
        ops.push(op);
        Ok(())
    });
    // Generated ops are well-formed by construction; fall back to empty if not.
    History::new(ops).unwrap_or_default()
}

/// Streams a generated history to `path` as JSON Lines without holding it in memory.
pub fn write_list_append_history(path: &Path, cfg: &GenConfig) -> io::Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let mut index = 0u64;
    simulate(cfg, |mut op| {
        op.index = index;
        index += 1;
        write_op_line(&mut out, &op)
    })?;
    out.flush()
}

/// Peak resident set size of this process so far, in MiB (Linux), if known.
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// One measured row of the table.
#[derive(Debug, Clone)]
pub struct BenchRow {
    /// Transactions in the history.
    pub txns: usize,
    /// Client processes.
    pub processes: usize,
    /// Size of the JSON Lines file in MiB.
    pub file_mib: f64,
    /// Seconds to read and parse the file.
    pub parse_s: f64,
    /// Seconds to check at strict-serializable.
    pub check_s: f64,
    /// The verdict label.
    pub verdict: String,
}

/// Generates, writes, parses and checks one history; the temp file is removed after.
pub fn measure(txns: usize, processes: usize) -> Result<BenchRow, HistoryError> {
    let path = std::env::temp_dir().join(format!(
        "splitbrain-elle-bench-{txns}-{processes}-{}.jsonl",
        std::process::id()
    ));
    let cfg = GenConfig::new(42, txns, 1000, processes);
    write_list_append_history(&path, &cfg).map_err(|source| HistoryError::Io {
        file: path.clone(),
        source,
    })?;
    let file_mib = std::fs::metadata(&path)
        .map(|m| m.len() as f64 / 1048576.0)
        .unwrap_or(0.0);
    let t0 = Instant::now();
    let history = crate::history::read::read_path(&path);
    let _ = std::fs::remove_file(&path);
    let history = history?;
    let parse_s = t0.elapsed().as_secs_f64();
    let checker =
        ElleChecker::new(ElleWorkload::ListAppend, ElleOptions::default()).map_err(|e| {
            HistoryError::Structure {
                index: 0,
                reason: e.to_string(),
            }
        })?;
    let t1 = Instant::now();
    let result = checker.check(&history);
    let check_s = t1.elapsed().as_secs_f64();
    Ok(BenchRow {
        txns,
        processes,
        file_mib,
        parse_s,
        check_s,
        verdict: result.valid.label().to_string(),
    })
}

/// Runs the benchmark (10k / 100k / 1M transactions at 30 processes, then 10 vs 100
/// processes at 100k) and renders a table.
pub fn run_table() -> String {
    let mut out =
        String::from("elle list-append, strict-serializable (1-5 micro-ops, 1000 keys)\n");
    let mut t = crate::table::Table::new([
        "txns", "procs", "file MiB", "parse s", "check s", "total s", "txns/s", "verdict",
    ]);
    for (txns, procs) in [
        (10_000, 30),
        (100_000, 30),
        (1_000_000, 30),
        (100_000, 10),
        (100_000, 100),
    ] {
        match measure(txns, procs) {
            Ok(r) => {
                let total = r.parse_s + r.check_s;
                t.row([
                    r.txns.to_string(),
                    r.processes.to_string(),
                    format!("{:.1}", r.file_mib),
                    format!("{:.2}", r.parse_s),
                    format!("{:.2}", r.check_s),
                    format!("{total:.2}"),
                    format!("{:.0}", r.txns as f64 / total.max(1e-9)),
                    r.verdict,
                ]);
            }
            Err(e) => {
                t.row([txns.to_string(), procs.to_string(), format!("error: {e}")]);
            }
        }
    }
    out.push_str(&t.plain());
    if let Some(rss) = peak_rss_mib() {
        out.push_str(&format!("peak RSS of this process: {rss:.0} MiB\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_injected_g1c_is_the_one_anomaly_found() {
        let checker = ElleChecker::new(ElleWorkload::ListAppend, ElleOptions::default()).unwrap();
        let mut cfg = GenConfig::new(3, 3000, 20, 12);
        let clean = checker.check(&generate(&cfg));
        assert_eq!(clean.valid, crate::Validity::Valid, "{}", clean.explanation);
        cfg.g1c = true;
        let history = generate(&cfg);
        assert_eq!(history.pair_slots().len(), 3002);
        let r = checker.check(&history);
        assert_eq!(r.valid, crate::Validity::Invalid, "{}", r.explanation);
        assert_eq!(r.anomaly_types, ["G1c"], "{}", r.explanation);
    }

    #[test]
    fn rw_register_histories_are_valid_and_their_injected_g1c_is_found() {
        let checker = ElleChecker::new(ElleWorkload::RwRegister, ElleOptions::default()).unwrap();
        let mut cfg = GenConfig::new(5, 3000, 20, 12);
        cfg.rw_register = true;
        let clean = generate(&cfg);
        let names = clean.op_micro_op_names(0);
        assert!(names.iter().all(|n| n == "w" || n == "r"), "{names:?}");
        let r = checker.check(&clean);
        assert_eq!(r.valid, crate::Validity::Valid, "{}", r.explanation);
        cfg.g1c = true;
        let r = checker.check(&generate(&cfg));
        assert_eq!(r.valid, crate::Validity::Invalid, "{}", r.explanation);
        assert_eq!(r.anomaly_types, ["G1c"], "{}", r.explanation);
    }
}
