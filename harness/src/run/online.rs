//! Online checking: while a test runs, the workload's own checkers judge prefixes of the
//! history recorded so far, and report the anomalies that no later operation can repair.
//!
//! Sound by construction: an online result is only ever INVALID (only the final check of
//! the whole history can say valid), and only for what a longer history still shows:
//!
//! - `linearizable`, per key: a key's ops up to the last point at which none of its ops
//!   was pending. Every op after that point was invoked after every op before it
//!   completed, so a linearization of the whole history, cut to the key's prefix, is a
//!   linearization of the prefix (an `info` op may take effect later or never, in both).
//!   So a key whose prefix is not linearizable is not in the whole history either.
//!   (`--no-split`: one cut for all keys, where nothing at all was pending.)
//! - Elle (`elle-list-append`, `elle-rw-register`) on the whole prefix, an op still
//!   pending counting as `info`, keeping only anomaly instances of a class that is
//!   monotone in the history ([`monotone_elle_anomaly`]: cycles, G1a, G1b, internal,
//!   lost-update, incompatible-order) and whose named transactions have all completed: a
//!   pending transaction may yet fail or commit, which would change what Elle infers.
//! - `bank`: a completed read whose balances do not add up to the total (`wrong-total`),
//!   or go negative, stays in the history.
//!
//! Every other checker (convergence, set-full, DDP ...) waits for the final check.
//! The checking runs on its own thread, one prefix at a time: a tick that is still running
//! when the next is due makes that one skip, and each check is bounded in time, so it
//! takes at most about half of one core from the run.

use crate::run::recorder::HistoryRecorder;
use crate::systems::BoxFuture;
use serde_json::Value;
use splitbrain_checkers::{CheckResult, Checker, History, Op, OpType, Process, Validity};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How often the recorded prefix is checked (at most: a check that takes longer than
/// this delays the next one by as long as it took).
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The bound of each online check: a check that cannot decide within it says `unknown`,
/// which online checking ignores.
const CHECK_BOUND: Duration = Duration::from_secs(3);

/// The checkers that decide on a prefix of the history (see the module docs).
pub const ONLINE_CHECKERS: [&str; 4] = [
    "linearizable",
    "elle-list-append",
    "elle-rw-register",
    "bank",
];

/// Anomaly types of `bank` that a completed read shows for good.
const BANK_ANOMALIES: [&str; 2] = ["wrong-total", "negative-value"];

/// An Elle anomaly class that later operations cannot take away, once every transaction
/// it names has completed: a cycle among transactions (its edges come from completed
/// reads, writes, process and real-time order, all fixed), an aborted or intermediate
/// read, an internal inconsistency, a lost update, two reads of one key in incompatible
/// orders.
pub fn monotone_elle_anomaly(anomaly: &str) -> bool {
    const CYCLES: [&str; 5] = ["G0", "G1c", "G-single", "G-nonadjacent", "G2"];
    matches!(
        anomaly,
        "G1a" | "G1b" | "internal" | "lost-update" | "incompatible-order"
    ) || (CYCLES.iter().any(|c| anomaly.starts_with(c)) && !anomaly.ends_with("cycle-exists"))
}

/// True when the online checker can find `name` (a checker or an anomaly type), so that
/// a run may wait for it before it stops early (`suite`'s cells).
pub fn decides_online(name: &str) -> bool {
    ONLINE_CHECKERS.contains(&name) || BANK_ANOMALIES.contains(&name) || monotone_elle_anomaly(name)
}

/// One anomaly found online.
#[derive(Debug, Clone, PartialEq)]
pub struct OnlineFinding {
    /// The checker that found it.
    pub checker: String,
    /// Where: `key 7`, or the anomaly types (`G1c, lost-update`).
    pub what: String,
    /// The anomaly types, where the checker names them (Elle, bank).
    pub anomaly_types: Vec<String>,
    /// Seconds into the run (the history's clock) when the check that found it ended.
    pub at_s: f64,
}

impl std::fmt::Display for OnlineFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} INVALID at {:.1} s",
            self.checker, self.what, self.at_s
        )
    }
}

/// When `--stop-on-anomaly` ends the main phase.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StopRule {
    /// Checker names or anomaly types that must all have been found; empty: any anomaly.
    pub when_found: Vec<String>,
}

impl StopRule {
    /// True once `findings` meet the rule.
    pub fn met(&self, findings: &[OnlineFinding]) -> bool {
        if self.when_found.is_empty() {
            return !findings.is_empty();
        }
        self.when_found.iter().all(|name| {
            findings
                .iter()
                .any(|f| &f.checker == name || f.anomaly_types.iter().any(|t| t == name))
        })
    }
}

/// What online checking found, for the final results.
#[derive(Debug, Clone, Default)]
pub struct OnlineOutcome {
    /// The first finding of each checker, in the order found.
    pub findings: Vec<OnlineFinding>,
    /// Why the main phase ended early, when `--stop-on-anomaly` ended it.
    pub stopped_early: Option<String>,
}

/// The ops recorded so far and, per key, what has been checked: cuts the prefixes each
/// online checker may judge.
#[derive(Default)]
pub struct Prefix {
    ops: Vec<Op>,
    /// Per linearizability key (or `None` with `--no-split`): the ops of its last checked
    /// prefix. A key whose decidable prefix has not grown need not be checked again.
    checked: HashMap<String, usize>,
}

/// The group a keyed op is checked in: its key, or one group for everything.
fn group_of(op: &Op, split: bool) -> String {
    match (&op.key, split) {
        (Some(k), true) => k.to_string(),
        _ => String::new(),
    }
}

impl Prefix {
    /// Appends ops recorded after the ones held (in index order).
    pub fn extend(&mut self, ops: Vec<Op>) {
        self.ops.extend(ops);
    }

    /// Number of ops held.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when no op is held.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Indices of client invokes with no completion yet.
    pub fn pending(&self) -> HashSet<u64> {
        let mut open: HashMap<Process, u64> = HashMap::new();
        for op in self.ops.iter().filter(|o| o.is_client()) {
            if op.op_type == OpType::Invoke {
                open.insert(op.process, op.index);
            } else {
                open.remove(&op.process);
            }
        }
        open.into_values().collect()
    }

    /// Every client op so far: pending ones count as `info` (Elle, bank).
    pub fn whole(&self) -> Vec<Op> {
        self.ops.iter().filter(|o| o.is_client()).cloned().collect()
    }

    /// For linearizability: each key's ops up to the last point at which none of them was
    /// pending (`split`; else all keys together up to where no client op was pending),
    /// leaving out keys whose prefix is the same as when last asked. `None` when nothing
    /// new is decidable.
    pub fn linearizable_cut(&mut self, split: bool) -> Option<Vec<Op>> {
        let client: Vec<&Op> = self.ops.iter().filter(|o| o.is_client()).collect();
        // Per group: ops open now, and how many of its ops precede its last quiet point.
        let mut open: HashMap<String, usize> = HashMap::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut decidable: HashMap<String, usize> = HashMap::new();
        let mut open_group: HashMap<Process, String> = HashMap::new();
        let mut group_at: Vec<String> = Vec::with_capacity(client.len());
        for op in &client {
            let group = if op.op_type == OpType::Invoke {
                let g = group_of(op, split);
                open_group.insert(op.process, g.clone());
                *open.entry(g.clone()).or_default() += 1;
                g
            } else {
                // A completion belongs to its invoke's group (completions may omit the key).
                let g = open_group
                    .remove(&op.process)
                    .unwrap_or_else(|| group_of(op, split));
                let n = open.entry(g.clone()).or_default();
                *n = n.saturating_sub(1);
                g
            };
            let count = seen.entry(group.clone()).or_default();
            *count += 1;
            if open.get(&group).copied().unwrap_or(0) == 0 {
                decidable.insert(group.clone(), *count);
            }
            group_at.push(group);
        }
        let fresh: HashSet<&String> = decidable
            .iter()
            .filter(|(g, n)| self.checked.get(*g) != Some(*n))
            .map(|(g, _)| g)
            .collect();
        if fresh.is_empty() {
            return None;
        }
        let mut taken: HashMap<&String, usize> = HashMap::new();
        let mut out = Vec::new();
        for (op, group) in client.iter().zip(&group_at) {
            if !fresh.contains(group) {
                continue;
            }
            let n = taken.entry(group).or_default();
            if *n < decidable[group] {
                *n += 1;
                out.push((*op).clone());
            }
        }
        for g in fresh {
            self.checked.insert(g.clone(), decidable[g]);
        }
        Some(out)
    }
}

/// The op indices an Elle anomaly instance names (`op`, `writer`, the `cycle`, `txns`).
fn named_indices(v: &Value, out: &mut Vec<u64>) {
    match v {
        Value::Object(m) => {
            if let Some(i) = m.get("index").and_then(Value::as_u64) {
                out.push(i);
            }
            for (k, x) in m {
                // A cycle's steps name its own members again.
                if k != "steps" {
                    named_indices(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| named_indices(x, out)),
        _ => {}
    }
}

/// The part of an online result that stands for the whole history: the anomaly types it
/// may report, or `None` when nothing in it is certain (see the module docs).
pub fn certain_anomalies(result: &CheckResult, pending: &HashSet<u64>) -> Option<Vec<String>> {
    if result.valid != Validity::Invalid {
        return None;
    }
    match result.checker.as_str() {
        // The prefix itself was cut to be decidable.
        "linearizable" => Some(Vec::new()),
        "bank" => {
            let found: Vec<String> = result
                .anomaly_types
                .iter()
                .filter(|t| BANK_ANOMALIES.contains(&t.as_str()))
                .cloned()
                .collect();
            (!found.is_empty()).then_some(found)
        }
        "elle-list-append" | "elle-rw-register" => {
            let anomalies = result.details.get("anomalies")?.as_object()?;
            let found: Vec<String> = anomalies
                .iter()
                .filter(|(t, _)| monotone_elle_anomaly(t))
                .filter(|(t, found)| {
                    let instances = found["instances"].as_array().cloned().unwrap_or_default();
                    instances.iter().any(|inst| {
                        // A cycle must name its members; a proof of one without them
                        // may rest on transactions still pending.
                        if is_cycle(t) && !inst.get("cycle").is_some_and(Value::is_array) {
                            return false;
                        }
                        let mut named = Vec::new();
                        named_indices(inst, &mut named);
                        named.iter().all(|i| !pending.contains(i))
                    })
                })
                .map(|(t, _)| t.clone())
                .collect();
            (!found.is_empty()).then_some(found)
        }
        _ => None,
    }
}

fn is_cycle(anomaly: &str) -> bool {
    !matches!(
        anomaly,
        "G1a" | "G1b" | "internal" | "lost-update" | "incompatible-order"
    )
}

/// Checks one prefix with every checker not yet known invalid; returns new findings.
fn check_prefix(
    prefix: &mut Prefix,
    checkers: &[Box<dyn Checker>],
    known: &HashSet<String>,
    split: bool,
    now_s: &dyn Fn() -> f64,
    stop: &AtomicBool,
) -> Vec<OnlineFinding> {
    let pending = prefix.pending();
    let mut whole: Option<History> = None;
    let mut found = Vec::new();
    for c in checkers {
        let name = c.name();
        if known.contains(&name) || stop.load(Ordering::Relaxed) {
            continue;
        }
        let result = if name == "linearizable" {
            let Some(ops) = prefix.linearizable_cut(split) else {
                continue;
            };
            match History::new(ops) {
                Ok(h) => c.check(&h),
                Err(_) => continue,
            }
        } else {
            if whole.is_none() {
                whole = History::new(prefix.whole()).ok();
            }
            match &whole {
                Some(h) => c.check(h),
                None => continue,
            }
        };
        if let Some(anomaly_types) = certain_anomalies(&result, &pending) {
            let what = match result.details.get("key").filter(|k| !k.is_null()) {
                // Keys are shown as the history has them, a string one unquoted.
                Some(k) => format!(
                    "key {}",
                    k.as_str().map_or_else(|| k.to_string(), str::to_string)
                ),
                None if !anomaly_types.is_empty() => anomaly_types.join(", "),
                None => "history".to_string(),
            };
            found.push(OnlineFinding {
                checker: name,
                what,
                anomaly_types,
                at_s: now_s(),
            });
        }
    }
    found
}

struct Shared {
    findings: Mutex<Vec<OnlineFinding>>,
    stopped_early: Mutex<Option<String>>,
    done: AtomicBool,
}

/// The online checker of one run: a thread that checks the recorded prefix at
/// [`INTERVAL`] until [`OnlineMonitor::finish`].
pub struct OnlineMonitor {
    shared: Arc<Shared>,
    stop_rule_met: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OnlineMonitor {
    /// Starts checking what `recorder` records with those of `checkers` that decide
    /// online; `None` when none does. `split` is false under `--no-split`. Findings are
    /// shown on the progress line, and printed when `print` (no progress bar). `rule`,
    /// when given, is what [`OnlineMonitor::stop_requested`] waits for.
    pub fn start(
        recorder: &HistoryRecorder,
        checkers: Vec<Box<dyn Checker>>,
        split: bool,
        rule: Option<StopRule>,
        print: bool,
    ) -> Option<OnlineMonitor> {
        let checkers: Vec<Box<dyn Checker>> = checkers
            .into_iter()
            .filter(|c| ONLINE_CHECKERS.contains(&c.name().as_str()))
            .collect();
        if checkers.is_empty() {
            return None;
        }
        recorder.start_live();
        let shared = Arc::new(Shared {
            findings: Mutex::new(Vec::new()),
            stopped_early: Mutex::new(None),
            done: AtomicBool::new(false),
        });
        let stop_rule_met = CancellationToken::new();
        let (rec, sh, met) = (recorder.clone(), shared.clone(), stop_rule_met.clone());
        let thread = std::thread::Builder::new()
            .name("online-check".into())
            .spawn(move || {
                let mut prefix = Prefix::default();
                let mut known: HashSet<String> = HashSet::new();
                let now_s = || rec.now_ns() as f64 / 1e9;
                while !sh.done.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let new = rec.take_live();
                    if !new.is_empty() {
                        prefix.extend(new);
                        let found =
                            check_prefix(&mut prefix, &checkers, &known, split, &now_s, &sh.done);
                        if sh.done.load(Ordering::Relaxed) {
                            // Checked after the main phase ended: the final check says it.
                            break;
                        }
                        for f in found {
                            known.insert(f.checker.clone());
                            if print {
                                eprintln!("splitbrain: online: {f}");
                            }
                            rec.counts
                                .anomalies
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .push(f.to_string());
                            let mut all = sh.findings.lock().unwrap_or_else(|e| e.into_inner());
                            all.push(f);
                            if rule.as_ref().is_some_and(|r| r.met(&all)) {
                                met.cancel();
                            }
                        }
                        if known.len() == checkers.len() {
                            break;
                        }
                    }
                    // A check that took longer than the interval delays the next by as
                    // long: online checking takes at most about half a core.
                    let wait = INTERVAL.max(started.elapsed());
                    let until = Instant::now() + wait;
                    while Instant::now() < until && !sh.done.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            })
            .ok()?;
        Some(OnlineMonitor {
            shared,
            stop_rule_met,
            thread: Some(thread),
        })
    }

    /// Resolves, with the reason, once the findings meet the stop rule; records that the
    /// run stopped early for it.
    pub fn stop_requested(&self) -> BoxFuture<'static, String> {
        let (met, shared) = (self.stop_rule_met.clone(), self.shared.clone());
        Box::pin(async move {
            met.cancelled().await;
            let findings = shared.findings.lock().unwrap_or_else(|e| e.into_inner());
            let list: Vec<String> = findings.iter().map(|f| f.to_string()).collect();
            let reason = format!(
                "--stop-on-anomaly: the online check found {}",
                list.join("; ")
            );
            *shared
                .stopped_early
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
            reason
        })
    }

    /// Stops checking and returns what was found. A check still running is left to end
    /// on its own (within its bound) rather than waited for.
    pub fn finish(mut self) -> OnlineOutcome {
        self.shared.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            if t.is_finished() {
                let _ = t.join();
            }
        }
        OnlineOutcome {
            findings: self
                .shared
                .findings
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            stopped_early: self
                .shared
                .stopped_early
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// The checking options online: the run's, bounded per check.
pub fn online_options(check: &crate::check::CheckOptions) -> crate::check::CheckOptions {
    let mut opts = check.clone();
    opts.time_limit = Some(opts.time_limit.map_or(CHECK_BOUND, |t| t.min(CHECK_BOUND)));
    opts
}

/// Folds online findings into the final results: for each checker, the seconds into the
/// run when it first knew (online, or `final_at_s` from the final check), and an
/// `online-check` result naming any online finding the final check did not confirm (a
/// harness bug: online checking must be sound).
pub fn first_known(
    results: &[CheckResult],
    online: &OnlineOutcome,
    final_at_s: f64,
) -> (BTreeMap<String, f64>, Option<CheckResult>) {
    let mut first = BTreeMap::new();
    for r in results.iter().filter(|r| r.valid == Validity::Invalid) {
        let at = online
            .findings
            .iter()
            .find(|f| f.checker == r.checker)
            .map_or(final_at_s, |f| f.at_s);
        first.insert(r.checker.clone(), (at * 10.0).round() / 10.0);
    }
    let unconfirmed: Vec<String> = online
        .findings
        .iter()
        .filter(|f| {
            !results
                .iter()
                .any(|r| r.checker == f.checker && r.valid == Validity::Invalid)
        })
        .map(|f| f.to_string())
        .collect();
    let disagreement = (!unconfirmed.is_empty()).then(|| {
        CheckResult::new(
            "online-check",
            Validity::Unknown,
            format!(
                "the final check did not confirm what online checking found ({}): a harness bug, please report it",
                unconfirmed.join("; ")
            ),
        )
    });
    (first, disagreement)
}

#[cfg(test)]
#[path = "online_tests.rs"]
mod tests;
