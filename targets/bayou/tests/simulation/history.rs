//! The simulation's client ops as a Jepsen history, judged by the eventual-consistency
//! checkers (issue 11).
//!
//! Ops are recorded as `harness/src/systems/bayou.rs` records them against the real server:
//! a read's ok value is the core's READ answer, a write's ok value its argument, a refusal
//! (`session-behind`) a fail, and a request whose replica crashed before answering an info,
//! after which the session's process id is retired and a fresh one takes over. The heal is
//! a nemesis op; final reads of every key at every replica follow in rounds until two
//! rounds agree (as the harness's `converge.rs`).

use super::{Sim, COUNTER, NODES, SCHEDULES, SET_KEYS};
use serde_json::{json, Value};
use splitbrain_bayou::core::{Bugs, Reply, Request};
use splitbrain_bayou::types::{Kind, Op as BayouOp, ReplicaId, Session};
use splitbrain_checkers::eventual::{
    BookingChecker, CommittedPrefixChecker, ConvergenceChecker, EventualDataType,
    SessionGuaranteesChecker, SetFullChecker,
};
use splitbrain_checkers::{CheckResult, Checker, History, Op, OpType, Process, Validity};
use std::collections::BTreeMap;

/// Final readers' process ids start here (one per replica, as the harness's).
const FINAL_READ_PROCESS_BASE: u64 = 1_000_000;
/// At most this many final-read rounds.
const MAX_ROUNDS: usize = 20;
/// Simulated milliseconds between rounds.
const ROUND_PAUSE_MS: usize = 25;

/// A final read waiting for its reply.
struct FinalRead {
    process: u64,
    key: String,
    replica: ReplicaId,
}

/// The history of one simulated run, as it is recorded.
pub struct Recorder {
    ops: Vec<Op>,
    /// The history process of each simulated session (replaced after an info).
    process: Vec<u64>,
    next_process: u64,
    /// Final reads by request id.
    final_reads: BTreeMap<u64, FinalRead>,
    /// The values the current final-read round got: (replica, key) -> value (None: not ok).
    round: BTreeMap<(ReplicaId, String), Option<Value>>,
}

/// Simulated milliseconds as history nanoseconds.
fn ns(now: i64) -> u64 {
    u64::try_from(now).unwrap_or(0) * 1_000_000
}

fn node(replica: ReplicaId) -> Option<String> {
    Some(format!("n{replica}"))
}

/// The history's f, key and invoke value of a request (the harness's mapping).
fn describe(request: &Request) -> (&'static str, &str, Value) {
    match request {
        Request::Read { key, .. } => ("read", key, Value::Null),
        Request::Write { key, op, .. } => match op {
            BayouOp::Add { element } => ("add", key, json!(element)),
            BayouOp::Incr { delta } => ("add", key, json!(delta)),
            BayouOp::Book { id, alternatives } => (
                "book",
                key,
                json!({ "id": id, "alternatives": alternatives }),
            ),
        },
    }
}

/// A completion: its type, its ok value (None: the invoke's), its error.
type Outcome = (OpType, Option<Value>, Option<String>);

/// What a reply makes of the request (as the harness's `BayouClient::complete`).
fn outcome(reply: &Reply) -> Outcome {
    match reply {
        Reply::Read { value, .. } => (OpType::Ok, Some(value.clone()), None),
        Reply::Written { .. } => (OpType::Ok, None, None),
        Reply::Fail { error } => (OpType::Fail, None, Some(error.clone())),
    }
}

/// An op of `request` by `process` at `replica`; `value` replaces the request's argument.
fn request_op(
    process: u64,
    op_type: OpType,
    request: &Request,
    value: Option<Value>,
    replica: ReplicaId,
    now: i64,
) -> Op {
    let (f, key, arg) = describe(request);
    let mut op = Op::new(Process::Client(process), op_type, f, value.unwrap_or(arg))
        .with_key(key)
        .at(ns(now));
    op.node = node(replica);
    op
}

impl Recorder {
    /// A recorder for `sessions` client sessions (processes 0..sessions).
    pub fn new(sessions: usize) -> Recorder {
        Recorder {
            ops: Vec::new(),
            process: (0..sessions as u64).collect(),
            next_process: sessions as u64,
            final_reads: BTreeMap::new(),
            round: BTreeMap::new(),
        }
    }

    /// Records `request`'s completion `outcome` for `process`.
    fn complete(
        &mut self,
        process: u64,
        request: &Request,
        replica: ReplicaId,
        now: i64,
        outcome: Outcome,
    ) {
        let (op_type, value, error) = outcome;
        let mut op = request_op(process, op_type, request, value, replica, now);
        op.error = error.map(|e| json!(e));
        self.ops.push(op);
    }

    /// Session `c` sent `request` to `replica`.
    pub fn invoke(&mut self, c: usize, request: &Request, replica: ReplicaId, now: i64) {
        let op = request_op(self.process[c], OpType::Invoke, request, None, replica, now);
        self.ops.push(op);
    }

    /// Session `c`'s `request` at `replica` got `reply`.
    pub fn reply(
        &mut self,
        c: usize,
        request: &Request,
        replica: ReplicaId,
        reply: &Reply,
        now: i64,
    ) {
        self.complete(self.process[c], request, replica, now, outcome(reply));
    }

    /// Session `c`'s `request` will never be answered (its replica crashed): info, and a
    /// fresh process takes the session over.
    pub fn lost(&mut self, c: usize, request: &Request, replica: ReplicaId, now: i64) {
        let crashed = (OpType::Info, None, Some("replica crashed".to_string()));
        self.complete(self.process[c], request, replica, now, crashed);
        self.process[c] = self.next_process;
        self.next_process += 1;
    }

    /// Replica `replica`'s final reader sends `request` as request `req`.
    fn final_read(&mut self, req: u64, request: &Request, replica: ReplicaId, now: i64) {
        let process = FINAL_READ_PROCESS_BASE + replica;
        let op = request_op(process, OpType::Invoke, request, None, replica, now);
        self.ops.push(op);
        let key = describe(request).1.to_string();
        self.final_reads.insert(
            req,
            FinalRead {
                process,
                key,
                replica,
            },
        );
    }

    /// The network healed and every replica is coming back.
    pub fn heal(&mut self, now: i64) {
        let op = Op::new(Process::Nemesis, OpType::Info, "heal", Value::Null).at(ns(now));
        self.ops.push(op);
    }

    /// A reply no session waits on: recorded if it answers a final read.
    pub fn unclaimed(&mut self, req: u64, reply: &Reply, now: i64) {
        let Some(read) = self.final_reads.remove(&req) else {
            return;
        };
        let request = final_request(&read.key);
        let answer = outcome(reply);
        let value = answer.1.clone();
        self.complete(read.process, &request, read.replica, now, answer);
        self.round.insert((read.replica, read.key), value);
    }

    /// The recorded ops on the keys `wanted` accepts, plus the nemesis ops, as a history.
    pub fn history(&self, wanted: impl Fn(&str) -> bool) -> History {
        let ops: Vec<Op> = self
            .ops
            .iter()
            .filter(|op| match op.key_string() {
                Some(k) => wanted(&k),
                None => !op.is_client(),
            })
            .cloned()
            .collect();
        match History::new(ops) {
            Ok(h) => h,
            Err(e) => panic!("the recorded history does not pair: {e}"),
        }
    }
}

/// What a key of the simulation holds.
fn kind_of(key: &str) -> Kind {
    if key == COUNTER {
        Kind::Counter
    } else if SCHEDULES.contains(&key) {
        Kind::Schedule
    } else {
        Kind::Set
    }
}

/// A final read of `key`: an empty session, and the key's type (as the harness's reads).
fn final_request(key: &str) -> Request {
    Request::Read {
        key: key.to_string(),
        kind: Some(kind_of(key)),
        session: Session::default(),
    }
}

fn all_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = SET_KEYS.to_vec();
    keys.push(COUNTER);
    keys.extend(SCHEDULES);
    keys
}

impl Sim {
    /// Final reads after quiescence: every key at every replica, in rounds, until two
    /// rounds in a row agree everywhere (or [`MAX_ROUNDS`]). Returns the rounds taken.
    pub fn final_read_rounds(&mut self) -> usize {
        let mut previous = None;
        for round in 1..=MAX_ROUNDS {
            self.history.round.clear();
            for replica in 1..=NODES {
                for key in all_keys() {
                    let now = self.now;
                    let Some(core) = self.nodes[replica as usize - 1].core.as_mut() else {
                        continue;
                    };
                    let req = self.next_req;
                    self.next_req += 1;
                    let request = final_request(key);
                    self.history.final_read(req, &request, replica, now);
                    core.client(req, request, now);
                    self.collect(replica, false);
                }
            }
            let values = std::mem::take(&mut self.history.round);
            let agree = values.values().all(Option::is_some)
                && values.len() == all_keys().len() * NODES as usize
                && all_keys().iter().all(|k| {
                    (2..=NODES)
                        .all(|r| values.get(&(r, k.to_string())) == values.get(&(1, k.to_string())))
                });
            if agree && previous.as_ref() == Some(&values) {
                return round;
            }
            previous = Some(values);
            for _ in 0..ROUND_PAUSE_MS {
                self.step(false);
            }
        }
        MAX_ROUNDS
    }
}

/// Every eventual checker that applies to the simulation's keys, each on its keys'
/// history, labelled `checker/data-type`.
pub fn check_all(recorder: &Recorder) -> Vec<(String, CheckResult)> {
    let sets = recorder.history(|k| SET_KEYS.contains(&k));
    let counters = recorder.history(|k| k == COUNTER);
    let bookings = recorder.history(|k| SCHEDULES.contains(&k));
    let set = EventualDataType::Set;
    let counter = EventualDataType::Counter;
    let booking = EventualDataType::Booking;
    let runs: [(&dyn Checker, EventualDataType, &History); 10] = [
        (&ConvergenceChecker::new(set), set, &sets),
        (&SetFullChecker, set, &sets),
        (&CommittedPrefixChecker, set, &sets),
        (&SessionGuaranteesChecker::new(set), set, &sets),
        (&ConvergenceChecker::new(counter), counter, &counters),
        (&SessionGuaranteesChecker::new(counter), counter, &counters),
        (&ConvergenceChecker::new(booking), booking, &bookings),
        (&CommittedPrefixChecker, booking, &bookings),
        (&SessionGuaranteesChecker::new(booking), booking, &bookings),
        (&BookingChecker, booking, &bookings),
    ];
    runs.into_iter()
        .map(|(checker, kind, history)| {
            let r = checker.check(history);
            (format!("{}/{}", r.checker, kind.name()), r)
        })
        .collect()
}

/// One seed's run: the simulation's own violations, the checkers' results, the ops.
struct Judged {
    violations: Vec<super::Violation>,
    results: Vec<(String, CheckResult)>,
    ops: usize,
    /// Client completions: ok, fail, info.
    completions: [usize; 3],
    rounds: usize,
}

fn judge(spec: super::Spec, seed: u64) -> Judged {
    let mut sim = Sim::new(spec, seed);
    let violations = sim.run();
    let rounds = sim.final_read_rounds();
    let mut completions = [0; 3];
    for op in &sim.history.ops {
        match op.op_type {
            OpType::Ok => completions[0] += 1,
            OpType::Fail => completions[1] += 1,
            OpType::Info if op.is_client() => completions[2] += 1,
            _ => {}
        }
    }
    assert_no_invoke_after_info(&sim.history.ops);
    Judged {
        completions,
        violations,
        results: check_all(&sim.history),
        ops: sim.history.ops.len(),
        rounds,
    }
}

/// Per checker label: how many seeds were valid, invalid, unknown.
fn tally(runs: &[(u64, Judged)]) -> BTreeMap<String, [usize; 3]> {
    let mut out: BTreeMap<String, [usize; 3]> = BTreeMap::new();
    for (_, j) in runs {
        for (name, r) in &j.results {
            let slot = match r.valid {
                Validity::Valid => 0,
                Validity::Invalid => 1,
                _ => 2,
            };
            out.entry(name.clone()).or_default()[slot] += 1;
        }
    }
    out
}

fn completions(runs: &[(u64, Judged)]) -> [usize; 3] {
    let mut sum = [0; 3];
    for (_, j) in runs {
        for (s, c) in sum.iter_mut().zip(j.completions) {
            *s += c;
        }
    }
    sum
}

/// Jepsen's rule the harness keeps: a process whose op ended `info` never invokes again.
fn assert_no_invoke_after_info(ops: &[Op]) {
    let mut retired = std::collections::BTreeSet::new();
    for op in ops {
        match op.op_type {
            OpType::Info if op.is_client() => {
                retired.insert(op.process);
            }
            OpType::Invoke => assert!(!retired.contains(&op.process), "{op:?} after an info"),
            _ => {}
        }
    }
}

fn print_tally(name: &str, runs: &[(u64, Judged)]) {
    let ops: usize = runs.iter().map(|(_, j)| j.ops).sum();
    let rounds: usize = runs.iter().map(|(_, j)| j.rounds).sum();
    let [ok, fail, info] = completions(runs);
    println!(
        "{name}: {} seeds, {ops} history ops ({ok} ok, {fail} fail, {info} info), {rounds} final-read rounds",
        runs.len()
    );
    for (checker, [v, i, u]) in tally(runs) {
        println!("  {checker}: valid {v}, invalid {i}, unknown {u}");
    }
    // Per seed, the simulation's own findings next to the checkers' (they should match).
    for (seed, j) in runs {
        let mut kinds: Vec<String> = j
            .violations
            .iter()
            .map(|v| {
                format!("{v:?}")
                    .split(['(', ' '])
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        kinds.dedup();
        let invalid: Vec<String> = j
            .results
            .iter()
            .filter(|(_, r)| r.valid == Validity::Invalid)
            .map(|(name, _)| name.clone())
            .collect();
        println!("  seed {seed}: simulation {kinds:?}; invalid {invalid:?}");
        if std::env::var("SIM_DEBUG").is_ok() {
            for (name, r) in &j.results {
                println!("    {name} {:?}: {}", r.valid, r.explanation);
            }
        }
    }
}

#[test]
fn correct_mode_histories_are_valid_for_every_eventual_checker() {
    // SOSP'95 §5 (convergence, committed order final), PDIS'94 §3 (session guarantees),
    // SOSP'95 §4 (booking merge): a correct group's history passes every checker.
    let runs: Vec<(u64, Judged)> = super::seeds(0..20)
        .into_iter()
        .map(|seed| (seed, judge(super::Spec::correct(), seed)))
        .collect();
    print_tally("correct", &runs);
    // The histories hold every kind of completion: refusals and crashed requests too.
    let [ok, fail, info] = completions(&runs);
    assert!(
        ok > 1000 && fail > 0 && info > 0,
        "{ok} ok, {fail} fail, {info} info"
    );
    for (seed, j) in &runs {
        assert!(j.violations.is_empty(), "seed {seed}: {:?}", j.violations);
        for (name, r) in &j.results {
            assert_eq!(
                r.valid,
                Validity::Valid,
                "seed {seed}: {name} says {:?}: {} {:?}",
                r.valid,
                r.explanation,
                r.evidence
            );
        }
    }
}

/// Runs `spec` on 3 seeds (or `SIM_SEED`; the simulation's own bug tests cover 10); some
/// seed's history must be judged invalid by a checker whose label is in `expected`.
fn expect_invalid(name: &str, spec: super::Spec, expected: &[&str]) {
    let runs: Vec<(u64, Judged)> = super::seeds(0..3)
        .into_iter()
        .map(|seed| (seed, judge(spec, seed)))
        .collect();
    print_tally(name, &runs);
    let hit = runs.iter().find_map(|(seed, j)| {
        j.results.iter().find_map(|(checker, r)| {
            (r.valid == Validity::Invalid && expected.contains(&checker.as_str()))
                .then(|| (seed, checker.clone(), r.explanation.clone()))
        })
    });
    println!("{name}: first invalid verdict: {hit:?}");
    assert!(
        hit.is_some(),
        "{name}: no seed judged invalid by any of {expected:?}"
    );
}

fn with_bugs(f: impl FnOnce(&mut Bugs)) -> Bugs {
    let mut bugs = Bugs::default();
    f(&mut bugs);
    bugs
}

#[test]
fn lose_tentative_histories_lose_acknowledged_writes() {
    let spec = super::Spec {
        crash: 0.002,
        ..super::Spec::quiet(with_bugs(|b| b.lose_tentative = true))
    };
    expect_invalid("lose-tentative", spec, &["set-full/set", "convergence/set"]);
}

#[test]
fn reorder_commit_histories_change_the_committed_prefix() {
    let spec = super::Spec {
        crash_primary: 0.001,
        ..super::Spec::quiet(with_bugs(|b| b.reorder_commit = true))
    };
    expect_invalid(
        "reorder-commit",
        spec,
        &["committed-prefix/set", "committed-prefix/booking"],
    );
}

#[test]
fn stale_commit_sync_histories_do_not_converge() {
    let spec = super::Spec::quiet(with_bugs(|b| b.stale_commit_sync = true));
    expect_invalid(
        "stale-commit-sync",
        spec,
        &["convergence/set", "convergence/booking"],
    );
}

#[test]
fn stale_session_histories_break_session_guarantees() {
    let spec = super::Spec {
        partition: 0.002,
        ..super::Spec::quiet(with_bugs(|b| b.stale_session = true))
    };
    expect_invalid("stale-session", spec, &["session-guarantees/set"]);
}

#[test]
fn no_rollback_histories_break_the_booking_schedule() {
    let spec = super::Spec::quiet(with_bugs(|b| b.no_rollback = true));
    expect_invalid(
        "no-rollback",
        spec,
        &["booking/booking", "convergence/booking"],
    );
}
