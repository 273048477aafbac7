//! Online checking: while a test runs, the workload's own checkers judge prefixes of the
//! history recorded so far, and report the anomalies that no later operation can repair.
//!
//! Sound by construction: an online result is only ever INVALID (only the final check of
//! the whole history can say valid), and only for what a longer history still shows:
//!
//! - `linearizable`, per key, incrementally ([`Checker::online`]; the checkers crate's
//!   `linearizability/online.rs`): a key's ops between two points at which none of them
//!   was pending form a segment; once one is complete it is decided against the set of
//!   states the key may be in at its start, summarised into the states it may be in at
//!   its end (and its `info` ops, which may still take effect later), and dropped. The
//!   summaries over-approximate, so a segment that no order explains is not explained in
//!   the whole history either. (`--no-split`: one segment for all keys, where nothing at
//!   all was pending.)
//! - Elle (`elle-list-append`, `elle-rw-register`) on the whole prefix (read back from
//!   the history file, checked again once it has grown by half), an op still
//!   pending counting as `info`, keeping only anomaly instances of a class that is
//!   monotone in the history ([`monotone_elle_anomaly`]: cycles, G1a, G1b, internal,
//!   lost-update, incompatible-order) and whose named transactions have all completed: a
//!   pending transaction may yet fail or commit, which would change what Elle infers.
//! - `bank`: a completed read whose balances do not add up to the total (`wrong-total`),
//!   or go negative, stays in the history; each tick checks only the new reads (beside
//!   one reference read for the total).
//!
//! - `ddp-replicas`, incrementally (the checkers crate's `ddp/online.rs`): two reports
//!   of one committed step naming different parameter digests (`replica-divergence`) or
//!   members, or a rank reporting a step of a group it was not in; a committed step's
//!   record never changes, so no later report repairs it.
//! - `committed-prefix` (Bayou), incrementally (`eventual/prefix_online.rs`): a read whose
//!   committed list names another element at a position an earlier read showed, or one
//!   element twice; commit order is final, so no later read repairs it.
//!
//! Every other checker (convergence, set-full, session guarantees, booking, the other
//! DDP checks ...) waits for the final check.
//! The checking runs on its own thread, one prefix at a time: a tick that is still running
//! when the next is due makes that one skip, and each check is bounded in time, so it
//! takes at most about half of one core from the run.

use super::online_claims::{bank_evidence, elle_evidence};
pub use super::online_claims::{
    certain_anomalies, decides_online, monotone_elle_anomaly, ONLINE_CHECKERS,
};
use crate::run::recorder::HistoryRecorder;
use crate::systems::BoxFuture;
use splitbrain_checkers::{
    CheckResult, Checker, History, OnlineCheck, Op, OpType, Process, Validity,
};
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
    /// Seconds into the run spanned by the ops that make the anomaly (see
    /// [`Online::tick`]): from the earliest invocation to the latest completion. What the
    /// guided nemesis credits it by; always at or before `at_s`.
    pub evidence_s: (f64, f64),
}

impl std::fmt::Display for OnlineFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} INVALID at {:.1} s (its ops {:.2}-{:.2} s)",
            self.checker, self.what, self.at_s, self.evidence_s.0, self.evidence_s.1
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

/// What online checking holds between ticks; none of it is a copy of the history.
///
/// - `linearizable`, `ddp-replicas`, `committed-prefix`, `session-guarantees`: the
///   checker's [`OnlineCheck`], fed every new op once: per key, the ops since its last
///   quiet point and a summary of what came before; per DDP step, its first report; per
///   Bayou key, its committed positions; per session and key, the elements it wrote and
///   saw.
/// - `bank`: one reference read (the first ok read with every balance) and the invokes
///   still pending; each tick checks those with the new ops only (its anomalies are
///   properties of single reads, or of two reads' totals).
/// - Elle: the whole prefix, read back from the history file the recorder streams to
///   (cut at its last complete line), and only when the history has grown by half since
///   the last Elle check (every tick while it is small), so its checks cost at most
///   about twice the final one.
pub struct Online {
    checkers: Vec<Box<dyn Checker>>,
    /// The checkers fed op by op ([`Checker::online`]), by name.
    incremental: Vec<(String, Box<dyn OnlineCheck>)>,
    /// The bank reference read (invoke, completion), when one has been seen.
    bank_reference: Option<[Op; 2]>,
    /// Client invokes not yet completed, by process (for bank's next tick).
    pending: HashMap<Process, Op>,
    /// Ops recorded so far, and as many when Elle last checked.
    recorded: usize,
    elle_checked_at: usize,
    /// The history's clock (ns) when the last complete bank read seen completed: a wrong
    /// total found later arose after it.
    bank_read_done_ns: u64,
}

/// Elle checks every tick until the history has this many ops; then when it has grown by
/// half since the last check.
const ELLE_EVERY_TICK_BELOW: usize = 20_000;

/// Where Elle's prefix comes from: the history recorded so far, or `None` when it cannot
/// be read.
pub type PrefixSource<'a> = &'a dyn Fn() -> Option<History>;

impl Online {
    /// Online checking with those of `checkers` that decide online.
    pub fn new(checkers: Vec<Box<dyn Checker>>) -> Online {
        let checkers: Vec<Box<dyn Checker>> = checkers
            .into_iter()
            .filter(|c| ONLINE_CHECKERS.contains(&c.name().as_str()))
            .collect();
        let incremental = checkers
            .iter()
            .filter_map(|c| Some((c.name(), c.online()?)))
            .collect();
        Online {
            checkers,
            incremental,
            bank_reference: None,
            pending: HashMap::new(),
            recorded: 0,
            elle_checked_at: 0,
            bank_read_done_ns: 0,
        }
    }

    /// True when no checker decides online.
    pub fn is_empty(&self) -> bool {
        self.checkers.is_empty()
    }

    /// How many checkers run.
    pub fn len(&self) -> usize {
        self.checkers.len()
    }

    /// History ops held (the undecided linearizability segments, the bank's reference
    /// read and the pending invokes).
    pub fn held_ops(&self) -> usize {
        self.incremental
            .iter()
            .map(|(_, c)| c.held_ops())
            .sum::<usize>()
            + self.pending.len()
            + if self.bank_reference.is_some() { 2 } else { 0 }
    }

    /// Takes the ops recorded since the last tick (in index order) and checks what they
    /// decide with every checker not yet known invalid; returns new findings. `prefix`
    /// gives the whole history so far, for Elle.
    ///
    /// Each finding carries its evidence, the span of the ops that make it: an
    /// incremental checker's own `evidence-ns` when it reports one (`linearizable`: from
    /// the key's last decided segment to the failing one; the session guarantees: from
    /// the earliest invocation of the ops named to the breaking read's completion); Elle,
    /// the transactions the first complete instance of each class found names (a cycle's
    /// members, the G1a reader and writer ...); `bank`, from the completion of the last
    /// complete read before the first wrong one (which still summed right) to that wrong
    /// read's completion, where the damage lies; the others (`ddp-replicas`,
    /// `committed-prefix`), the ops this tick checked.
    pub fn tick(
        &mut self,
        new: Vec<Op>,
        prefix: PrefixSource,
        known: &HashSet<String>,
        now_s: &dyn Fn() -> f64,
        stop: &AtomicBool,
    ) -> Vec<OnlineFinding> {
        self.recorded += new.len();
        let new: Vec<Op> = new.into_iter().filter(|o| o.is_client()).collect();
        let tick_span = (
            new.first().map_or(0, |o| o.time),
            new.last().map_or(0, |o| o.time),
        );
        let mut found = Vec::new();
        let mut note = |name: String,
                        result: &CheckResult,
                        pending: &HashSet<u64>,
                        evidence: Option<(u64, u64)>| {
            if let Some(anomaly_types) = certain_anomalies(result, pending) {
                let at_s = now_s();
                let (from, to) = evidence.unwrap_or(tick_span);
                let secs = |ns: u64| (ns as f64 / 1e9).min(at_s);
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
                    at_s,
                    evidence_s: (secs(from.min(to)), secs(to)),
                });
            }
        };
        let bank = self
            .checkers
            .iter()
            .find(|c| c.name() == "bank" && !known.contains("bank"));
        if let Some(bank) = bank {
            let mut ops: Vec<Op> = self.pending.values().cloned().collect();
            ops.extend(self.bank_reference.iter().flatten().cloned());
            ops.sort_by_key(|o| o.index);
            ops.extend(new.iter().cloned());
            if let Ok(h) = History::new(ops) {
                if !stop.load(Ordering::Relaxed) {
                    let r = bank.check(&h);
                    let evidence = bank_evidence(&r, &h, self.bank_read_done_ns);
                    note("bank".into(), &r, &HashSet::new(), evidence);
                }
                if let Some(t) = h
                    .pairs()
                    .iter()
                    .filter(|p| p.outcome == splitbrain_checkers::Outcome::Ok && p.f == "read")
                    .filter(|p| splitbrain_checkers::bank::read_sum(&p.value).is_some())
                    .filter_map(|p| p.complete_time)
                    .max()
                {
                    self.bank_read_done_ns = self.bank_read_done_ns.max(t);
                }
                if self.bank_reference.is_none() {
                    self.bank_reference = h.pairs().iter().find_map(|p| {
                        let reference = p.outcome == splitbrain_checkers::Outcome::Ok
                            && p.f == "read"
                            && splitbrain_checkers::bank::read_sum(&p.value).is_some();
                        let done = p.complete_pos.and_then(|c| h.ops().get(c))?;
                        reference.then(|| [h.ops()[p.invoke_pos].clone(), done.clone()])
                    });
                }
            }
            for op in &new {
                if op.op_type == OpType::Invoke {
                    self.pending.insert(op.process, op.clone());
                } else {
                    self.pending.remove(&op.process);
                }
            }
        }
        // Incremental checks: every new op once (moved into the last).
        let mut active: Vec<&mut (String, Box<dyn OnlineCheck>)> = self
            .incremental
            .iter_mut()
            .filter(|(name, _)| !known.contains(name))
            .collect();
        if let Some(((last_name, last), rest)) = active.split_last_mut() {
            let mut first: Vec<Option<CheckResult>> = vec![None; rest.len() + 1];
            for op in new {
                for (i, (_, c)) in rest.iter_mut().enumerate() {
                    if let Some(r) = c.push(op.clone()) {
                        first[i].get_or_insert(r);
                    }
                }
                if let Some(r) = last.push(op) {
                    first[rest.len()].get_or_insert(r);
                }
            }
            let names = rest
                .iter()
                .map(|(n, _)| n.clone())
                .chain([last_name.clone()]);
            for (name, r) in names.zip(first) {
                if let Some(r) = r {
                    let evidence = r
                        .details
                        .get("evidence-ns")
                        .and_then(|e| Some((e.get(0)?.as_u64()?, e.get(1)?.as_u64()?)));
                    note(name, &r, &HashSet::new(), evidence);
                }
            }
        }
        let elle_due = self.recorded < ELLE_EVERY_TICK_BELOW
            || self.recorded >= self.elle_checked_at + self.elle_checked_at / 2;
        let elle: Vec<&dyn Checker> = self
            .checkers
            .iter()
            .filter(|c| c.name().starts_with("elle-") && !known.contains(&c.name()))
            .map(|c| c.as_ref())
            .collect();
        if !elle.is_empty() && elle_due && !stop.load(Ordering::Relaxed) {
            self.elle_checked_at = self.recorded;
            if let Some(h) = prefix() {
                // Pending in the prefix read: counted as info, never named by a finding.
                let pending: HashSet<u64> = h
                    .pair_slots()
                    .iter()
                    .filter(|s| s.complete_pos.is_none())
                    .map(|s| h.op_index(s.invoke_pos))
                    .collect();
                for c in elle {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = c.check(&h);
                    let evidence = elle_evidence(&r, &h, &pending);
                    note(c.name(), &r, &pending, evidence);
                }
            }
        }
        found
    }
}

/// The recorded prefix of the history file at `path`: its complete lines.
pub fn read_prefix(path: &std::path::Path) -> Option<History> {
    let mut text = std::fs::read_to_string(path).ok()?;
    let end = text.rfind('\n').map_or(0, |i| i + 1);
    text.truncate(end);
    let h = splitbrain_checkers::history::read::read_str(
        &text,
        path,
        Some(splitbrain_checkers::history::read::Format::JsonLines),
    )
    .ok()?;
    // Client ops only (the nemesis's are not the checkers' concern online).
    let ops: Vec<Op> = h.ops().iter().filter(|o| o.is_client()).cloned().collect();
    History::new(ops).ok()
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
        rule: Option<StopRule>,
        print: bool,
    ) -> Option<OnlineMonitor> {
        let mut online = Online::new(checkers);
        if online.is_empty() {
            return None;
        }
        let history = recorder.path().map(std::path::Path::to_path_buf);
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
                let mut known: HashSet<String> = HashSet::new();
                let now_s = || rec.now_ns() as f64 / 1e9;
                let prefix = || history.as_deref().and_then(read_prefix);
                while !sh.done.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let new = rec.take_live();
                    if !new.is_empty() {
                        let found = online.tick(new, &prefix, &known, &now_s, &sh.done);
                        if sh.done.load(Ordering::Relaxed) {
                            // Checked after the main phase ended: the final check says it.
                            break;
                        }
                        for f in found {
                            known.insert(f.checker.clone());
                            if print {
                                eprintln!("splitbrain: online: {f}");
                            }
                            // The evidence on the monotonic clock (the nemesis's), recorded
                            // before the anomaly is counted.
                            let (now, now_s) = (Instant::now(), now_s());
                            let ago = |s: f64| {
                                now.checked_sub(Duration::from_secs_f64((now_s - s).max(0.0)))
                            };
                            if let (Some(a), Some(b)) = (ago(f.evidence_s.0), ago(f.evidence_s.1)) {
                                rec.counts
                                    .evidence
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .push((a, b));
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
                        if known.len() == online.len() {
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
