//! Online checking: what a prefix may say, and that it is never contradicted by the whole.

use super::*;
use crate::check::CheckOptions;
use crate::run::online_claims::is_cycle;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::elle::ElleWorkload;

fn op(p: u64, t: OpType, f: &str, key: Option<Value>, value: Value) -> Op {
    let mut o = Op::new(Process::Client(p), t, f, value);
    o.key = key;
    o
}

/// Ops numbered as the recorder numbers them.
fn indexed(mut ops: Vec<Op>) -> Vec<Op> {
    for (i, o) in ops.iter_mut().enumerate() {
        o.index = i as u64;
        o.time = (i as u64 + 1) * 1000;
    }
    ops
}

/// Ops a test tick takes.
const TICK: usize = 3;

/// Online checking fed `ops` a few at a time, as the monitor's ticks take them: every
/// finding.
fn online(ops: &[Op], checkers: Vec<Box<dyn Checker>>) -> Vec<OnlineFinding> {
    online_with(&mut Online::new(checkers), ops, 0)
}

/// Feeds `ops[from..]` to `o` (`ops[..from]` it has had already).
fn online_with(o: &mut Online, ops: &[Op], from: usize) -> Vec<OnlineFinding> {
    let stop = AtomicBool::new(false);
    let mut known = HashSet::new();
    let mut found = Vec::new();
    let mut at = from;
    while at < ops.len() {
        let end = (at + TICK).min(ops.len());
        let seen = &ops[..end];
        let prefix = || History::new(seen.to_vec()).ok();
        // The clock when the tick ends: that of the last op it took.
        let now_s = || seen.last().map_or(0.0, |o| o.time as f64 / 1e9);
        for f in o.tick(ops[at..end].to_vec(), &prefix, &known, &now_s, &stop) {
            known.insert(f.checker.clone());
            found.push(f);
        }
        at = end;
    }
    found
}

fn lin() -> Vec<Box<dyn Checker>> {
    vec![CheckOptions::default()
        .linearizability("cas-register")
        .unwrap()]
}

fn elle() -> Vec<Box<dyn Checker>> {
    vec![CheckOptions::default()
        .elle(ElleWorkload::ListAppend)
        .unwrap()]
}

#[test]
fn a_key_holds_only_its_ops_since_it_was_last_quiet() {
    let k = |n: u64| Some(json!(n));
    let ops = indexed(vec![
        op(0, OpType::Invoke, "write", k(1), json!(1)),
        op(0, OpType::Ok, "write", k(1), json!(1)),
        op(1, OpType::Invoke, "write", k(2), json!(5)),
        op(0, OpType::Invoke, "read", k(1), json!(null)),
        op(1, OpType::Ok, "write", k(2), json!(5)),
        op(0, OpType::Ok, "read", k(1), json!(1)),
    ]);
    let mut o = Online::new(lin());
    assert!(online_with(&mut o, &ops[..5], 0).is_empty());
    // Key 1's pending read; key 2 is decided and dropped.
    assert_eq!(o.held_ops(), 1);
    assert!(online_with(&mut o, &ops, 5).is_empty());
    assert_eq!(o.held_ops(), 0);
}

#[test]
fn a_stale_read_after_many_dropped_segments_is_found_and_confirmed() {
    // Two processes on one key, overlapping now and then: writes 1..=120 each read back,
    // then a read of a value written long before, its segments long dropped.
    let key = Some(json!("k0"));
    let mut ops = Vec::new();
    for v in 1..=120i64 {
        let p = (v % 2) as u64;
        ops.push(op(p, OpType::Invoke, "write", key.clone(), json!(v)));
        ops.push(op(p, OpType::Ok, "write", key.clone(), json!(v)));
        ops.push(op(1 - p, OpType::Invoke, "read", key.clone(), json!(null)));
        if v % 3 == 0 {
            // An overlapping write that timed out: it may land at any later time, or not.
            ops.push(op(
                7 + v as u64,
                OpType::Invoke,
                "write",
                key.clone(),
                json!(-v),
            ));
            ops.push(op(
                7 + v as u64,
                OpType::Info,
                "write",
                key.clone(),
                json!(-v),
            ));
        }
        ops.push(op(1 - p, OpType::Ok, "read", key.clone(), json!(v)));
    }
    let quiet = ops.len();
    ops.push(op(0, OpType::Invoke, "read", key.clone(), json!(null)));
    ops.push(op(0, OpType::Ok, "read", key.clone(), json!(5)));
    let ops = indexed(ops);
    let mut o = Online::new(lin());
    assert!(online_with(&mut o, &ops[..quiet], 0).is_empty());
    assert_eq!(o.held_ops(), 0, "every segment decided and dropped");
    let found = online_with(&mut o, &ops, quiet);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].what, "key k0");
    let whole = lin()[0].check(&History::new(ops.clone()).unwrap());
    assert_eq!(whole.valid, Validity::Invalid, "{}", whole.explanation);
    // A read of a value that timed out writing may still be explained: not reported.
    let mut late = ops[..quiet].to_vec();
    late.push(op(0, OpType::Invoke, "read", key.clone(), json!(null)));
    late.push(op(0, OpType::Ok, "read", key.clone(), json!(-3)));
    let late = indexed(late);
    assert!(online(&late, lin()).is_empty());
    let whole = lin()[0].check(&History::new(late).unwrap());
    assert_eq!(whole.valid, Validity::Valid, "{}", whole.explanation);
}

#[test]
fn a_read_of_a_pending_write_is_not_judged_before_the_write_completes() {
    // Dropping the pending write would make the read of 1 look impossible.
    let k = Some(json!(0));
    let ops = indexed(vec![
        op(0, OpType::Invoke, "write", k.clone(), json!(1)),
        op(1, OpType::Invoke, "read", k.clone(), json!(null)),
        op(1, OpType::Ok, "read", k.clone(), json!(1)),
    ]);
    assert!(online(&ops, lin()).is_empty());
}

#[test]
fn a_stale_read_on_a_quiet_key_is_found_and_named() {
    let k = Some(json!(7));
    let ops = indexed(vec![
        op(0, OpType::Invoke, "write", k.clone(), json!(1)),
        op(0, OpType::Ok, "write", k.clone(), json!(1)),
        op(0, OpType::Invoke, "write", k.clone(), json!(2)),
        op(0, OpType::Ok, "write", k.clone(), json!(2)),
        op(1, OpType::Invoke, "read", k.clone(), json!(null)),
        op(1, OpType::Ok, "read", k.clone(), json!(1)),
        // Another key still busy does not hold key 7 back.
        op(2, OpType::Invoke, "write", Some(json!(8)), json!(3)),
    ]);
    let found = online(&ops, lin());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].checker, "linearizable");
    assert_eq!(found[0].what, "key 7");
    assert_eq!(
        found[0].to_string(),
        "linearizable: key 7 INVALID at 0.0 s (its ops 0.00-0.00 s)"
    );
    // Its evidence: from the write it contradicts (the key's last decided segment, op 2)
    // to the stale read's completion (op 5), not the first write.
    assert_eq!(found[0].evidence_s, (3000e-9, 6000e-9));
}

fn txn(p: u64, t: OpType, mops: Value) -> Op {
    op(p, t, "txn", None, mops)
}

#[test]
fn an_intermediate_read_counts_once_its_writer_completed() {
    let pending = vec![
        txn(
            0,
            OpType::Invoke,
            json!([["append", 1, 1], ["append", 1, 2]]),
        ),
        txn(1, OpType::Invoke, json!([["r", 1, null]])),
        txn(1, OpType::Ok, json!([["r", 1, [1]]])),
    ];
    // The writer may still fail (then it is an aborted read) or commit: not yet certain.
    assert!(online(&indexed(pending.clone()), elle()).is_empty());
    let mut done = pending;
    done.push(txn(
        0,
        OpType::Ok,
        json!([["append", 1, 1], ["append", 1, 2]]),
    ));
    let found = online(&indexed(done), elle());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].anomaly_types.contains(&"G1b".to_string()));
    // Its evidence: the writer and the reader, from the first invocation to the last
    // completion.
    assert_eq!(found[0].evidence_s, (1000e-9, 4000e-9));
}

#[test]
fn only_monotone_elle_classes_count() {
    for t in [
        "G0",
        "G1a",
        "G1b",
        "G1c",
        "G1c-realtime",
        "G-single",
        "G-single-item-process",
        "G-nonadjacent",
        "G2-item",
        "lost-update",
        "incompatible-order",
        "internal",
    ] {
        assert!(monotone_elle_anomaly(t), "{t}");
    }
    for t in [
        "garbage-read",
        "dirty-update",
        "duplicate-elements",
        "G2-item-cycle-exists",
        "cycle-search-timeout",
        "empty-transaction-graph",
    ] {
        assert!(!monotone_elle_anomaly(t), "{t}");
    }
}

#[test]
fn a_wrong_bank_total_counts_and_a_valid_prefix_says_nothing() {
    let bank = || crate::check::checkers_for_workload("bank", &CheckOptions::default()).unwrap();
    let read = |p: u64, a: i64, b: i64| {
        vec![
            op(p, OpType::Invoke, "read", None, json!(null)),
            op(p, OpType::Ok, "read", None, json!({"a": a, "b": b})),
        ]
    };
    let good = indexed([read(0, 10, 10), read(1, 5, 15)].concat());
    assert!(online(&good, bank()).is_empty());
    let bad = indexed([read(0, 10, 10), read(1, 5, 10)].concat());
    let found = online(&bad, bank());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].anomaly_types, vec!["wrong-total".to_string()]);
    // Its evidence: from the last read that summed right (completed at op 1, in the
    // tick before) to the wrong one's completion (op 3).
    assert_eq!(found[0].evidence_s, (2000e-9, 4000e-9));
}

#[test]
fn the_stop_rule_waits_for_every_named_finding() {
    let f = |checker: &str, types: &[&str]| OnlineFinding {
        checker: checker.into(),
        what: String::new(),
        anomaly_types: types.iter().map(|t| t.to_string()).collect(),
        at_s: 1.0,
        evidence_s: (0.5, 0.6),
    };
    let any = StopRule::default();
    assert!(!any.met(&[]));
    assert!(any.met(&[f("bank", &["wrong-total"])]));
    let both = StopRule {
        when_found: vec!["linearizable".into(), "G1c".into()],
    };
    assert!(!both.met(&[f("linearizable", &[])]));
    assert!(both.met(&[
        f("linearizable", &[]),
        f("elle-list-append", &["G1c", "G0"])
    ]));
}

#[test]
fn an_online_finding_the_final_check_denies_is_reported_as_a_harness_bug() {
    let finding = OnlineFinding {
        checker: "linearizable".into(),
        what: "key 1".into(),
        anomaly_types: vec![],
        at_s: 2.34,
        evidence_s: (1.0, 1.5),
    };
    let online = OnlineOutcome {
        findings: vec![finding],
        stopped_early: None,
    };
    let invalid = CheckResult::new("linearizable", Validity::Invalid, "stale read");
    let late = CheckResult::new("bank", Validity::Invalid, "wrong total");
    let (first, denied) = first_known(&[invalid, late], &online, 9.96);
    assert_eq!(first["linearizable"], 2.3);
    assert_eq!(first["bank"], 10.0);
    assert!(denied.is_none());
    let valid = CheckResult::new("linearizable", Validity::Valid, "ok");
    let (first, denied) = first_known(&[valid], &online, 9.0);
    assert!(first.is_empty());
    assert_eq!(denied.unwrap().valid, Validity::Unknown);
}

/// A register whose reads sometimes return the value before the last write: histories
/// with stale reads among concurrent, sometimes timed-out ops.
fn buggy_register_history(seed: u64) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // Reads of the register before any write return nil.
    let (mut value, mut previous) = (Value::Null, Value::Null);
    let mut open: Vec<Option<(String, i64)>> = vec![None; 4];
    let mut pids: Vec<u64> = (0..4).collect();
    let mut ops = Vec::new();
    let mut next = 1i64;
    for _ in 0..60 {
        let slot = rng.gen_range(0..4);
        let p = pids[slot];
        let key = Some(json!(0));
        match open[slot].take() {
            None => {
                let f = if rng.gen_bool(0.5) { "read" } else { "write" };
                let v = if f == "write" {
                    next += 1;
                    next
                } else {
                    0
                };
                ops.push(op(p, OpType::Invoke, f, key, json!(v)));
                if f == "write" {
                    previous = std::mem::replace(&mut value, json!(v));
                }
                open[slot] = Some((f.to_string(), v));
            }
            Some((f, v)) => {
                let k = key;
                if rng.gen_bool(0.1) {
                    ops.push(op(p, OpType::Info, &f, k, json!(v)));
                    pids[slot] += 4;
                } else if f == "read" {
                    let seen = if rng.gen_bool(0.15) {
                        previous.clone()
                    } else {
                        value.clone()
                    };
                    ops.push(op(p, OpType::Ok, "read", k, seen));
                } else {
                    ops.push(op(p, OpType::Ok, "write", k, json!(v)));
                }
            }
        }
    }
    indexed(ops)
}

/// A list-append store that applies a transaction's reads at its invoke and its appends at
/// its completion, and sometimes reports a transaction failed whose appends it kept:
/// lost updates, cycles and aborted reads, among pending transactions.
fn buggy_append_history(seed: u64) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut lists: Vec<Vec<i64>> = vec![Vec::new(); 3];
    let mut open: Vec<Option<Vec<Value>>> = vec![None; 4];
    let mut next = 0i64;
    let mut ops = Vec::new();
    for _ in 0..80 {
        let p = rng.gen_range(0..4usize);
        match open[p].take() {
            None => {
                let n = rng.gen_range(1..4);
                let mut invoked = Vec::new();
                let mut done = Vec::new();
                for _ in 0..n {
                    let k = rng.gen_range(0..3usize);
                    if rng.gen_bool(0.5) {
                        invoked.push(json!(["r", k, null]));
                        done.push(json!(["r", k, lists[k].clone()]));
                    } else {
                        next += 1;
                        invoked.push(json!(["append", k, next]));
                        done.push(json!(["append", k, next]));
                    }
                }
                ops.push(txn(p as u64, OpType::Invoke, Value::Array(invoked)));
                open[p] = Some(done);
            }
            Some(done) => {
                for m in &done {
                    if m[0] == "append" {
                        let k = m[1].as_u64().unwrap() as usize;
                        lists[k].push(m[2].as_i64().unwrap());
                    }
                }
                let t = if rng.gen_bool(0.15) {
                    OpType::Fail
                } else {
                    OpType::Ok
                };
                ops.push(txn(p as u64, t, Value::Array(done)));
            }
        }
    }
    indexed(ops)
}

/// Every prefix of many buggy histories: whatever online checking reports, the whole
/// history's check confirms (and it does report, so the property is not vacuous).
fn online_is_confirmed_by_the_whole(
    histories: impl Iterator<Item = Vec<Op>>,
    checkers: fn() -> Vec<Box<dyn Checker>>,
) {
    let (mut found, mut runs) = (0, 0);
    for ops in histories {
        let whole = History::new(ops.clone()).unwrap();
        let verdicts: Vec<CheckResult> = checkers().iter().map(|c| c.check(&whole)).collect();
        for len in (1..=ops.len()).step_by(3) {
            for f in online(&ops[..len], checkers()) {
                found += 1;
                // Its evidence lies inside the run, in the ops it was given, and no later
                // than when it was found.
                let (a, b) = f.evidence_s;
                let first = ops[0].time as f64 / 1e9;
                assert!(first <= a && a <= b && b <= f.at_s, "{f}: evidence {a}-{b}");
                let r = verdicts.iter().find(|r| r.checker == f.checker).unwrap();
                assert_eq!(
                    r.valid,
                    Validity::Invalid,
                    "online found {f} in the first {len} ops; the whole history: {}",
                    r.explanation
                );
                for t in &f.anomaly_types {
                    if !is_cycle(t) {
                        assert!(r.anomaly_types.contains(t), "{t} not in {r:?}");
                    }
                }
            }
        }
        runs += 1;
    }
    assert!(
        found > runs / 4,
        "online found {found} anomalies in {runs} histories"
    );
}

/// A replicated set whose replicas lag: sessions add elements and read from whichever
/// replica they reach, which may hold only an older prefix of the acknowledged adds (a
/// session that switches replica misses its writes or goes back in time), and some adds
/// end unknown.
fn buggy_session_history(seed: u64) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut applied: Vec<i64> = Vec::new();
    let mut open: Vec<Option<(String, i64)>> = vec![None; 3];
    let mut pids: Vec<u64> = (0..3).collect();
    let mut ops = Vec::new();
    let mut next = 0i64;
    for _ in 0..60 {
        let slot = rng.gen_range(0..3);
        let p = pids[slot];
        let key = Some(json!("s"));
        match open[slot].take() {
            None => {
                let (f, v) = if rng.gen_bool(0.5) {
                    next += 1;
                    ("add", next)
                } else {
                    ("read", 0)
                };
                let arg = if f == "add" { json!(v) } else { Value::Null };
                ops.push(op(p, OpType::Invoke, f, key, arg));
                open[slot] = Some((f.to_string(), v));
            }
            Some((f, v)) if f == "add" => {
                applied.push(v);
                if rng.gen_bool(0.1) {
                    ops.push(op(p, OpType::Info, "add", key, json!(v)));
                    pids[slot] += 3;
                } else {
                    ops.push(op(p, OpType::Ok, "add", key, json!(v)));
                }
            }
            Some(_) => {
                let lag = if rng.gen_bool(0.2) {
                    rng.gen_range(0..=3)
                } else {
                    0
                };
                let shown = &applied[..applied.len().saturating_sub(lag)];
                ops.push(op(p, OpType::Ok, "read", key, json!(shown)));
            }
        }
    }
    indexed(ops)
}

fn sessions() -> Vec<Box<dyn Checker>> {
    use splitbrain_checkers::eventual::{EventualDataType, SessionGuaranteesChecker};
    vec![Box::new(SessionGuaranteesChecker::new(
        EventualDataType::Set,
    ))]
}

#[test]
fn session_guarantees_online_are_confirmed_by_the_whole_history() {
    online_is_confirmed_by_the_whole((0..40).map(buggy_session_history), sessions);
    assert!(decides_online("read-your-writes") && decides_online("monotonic-reads"));
    assert!(!decides_online("monotonic-writes") && !decides_online("writes-follow-reads"));
}

#[test]
fn linearizability_online_is_confirmed_by_the_whole_history() {
    online_is_confirmed_by_the_whole((0..40).map(buggy_register_history), lin);
}

#[test]
fn elle_online_is_confirmed_by_the_whole_history() {
    online_is_confirmed_by_the_whole((0..40).map(buggy_append_history), elle);
}

#[test]
fn ddp_replica_divergence_is_found_online_and_the_other_ddp_checks_wait() {
    use splitbrain_checkers::ddp::{ddp_checkers, DdpOptions};
    let rec = |rank: u64, step: u64, digest: &str| json!({"rank": rank, "step": step, "epoch": 0, "digest": digest, "samples": [rank * 100 + step]});
    let mut ops = Vec::new();
    for (rank, step, digest) in [(0, 1, "a"), (1, 1, "a"), (0, 2, "b"), (1, 2, "b")] {
        ops.push(op(rank, OpType::Invoke, "step", None, json!(null)));
        ops.push(op(rank, OpType::Ok, "step", None, rec(rank, step, digest)));
    }
    let agreeing = indexed(ops.clone());
    let o = Online::new(ddp_checkers(&DdpOptions::default()));
    assert_eq!(o.len(), 1, "only ddp-replicas decides online");
    assert!(online(&agreeing, ddp_checkers(&DdpOptions::default())).is_empty());
    ops.push(op(0, OpType::Invoke, "step", None, json!(null)));
    ops.push(op(0, OpType::Ok, "step", None, rec(0, 3, "c")));
    ops.push(op(1, OpType::Invoke, "step", None, json!(null)));
    ops.push(op(1, OpType::Ok, "step", None, rec(1, 3, "d")));
    let divergent = indexed(ops);
    let found = online(&divergent, ddp_checkers(&DdpOptions::default()));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].checker, "ddp-replicas");
    assert_eq!(found[0].anomaly_types, ["replica-divergence"]);
    assert_eq!(found[0].what, "replica-divergence");
    let whole: Vec<CheckResult> = ddp_checkers(&DdpOptions::default())
        .iter()
        .map(|c| c.check(&History::new(divergent.clone()).unwrap()))
        .collect();
    let outcome = OnlineOutcome {
        findings: found,
        stopped_early: None,
    };
    let (_, disagreement) = first_known(&whole, &outcome, 1.0);
    assert!(disagreement.is_none(), "{disagreement:?}");
    assert!(decides_online("ddp-replicas") && decides_online("replica-divergence"));
    assert!(!decides_online("ddp-data") && !decides_online("ddp-reference"));
}
