//! History shrinking against ground truth: a shrunk history is a sub-history of the
//! original, fails in the same class, and is 1-minimal (removing any one operation makes
//! it pass or fail differently) — checked by brute force on random and hand-made
//! histories.

use crate::support;

use proptest::prelude::*;
use serde_json::{json, Value};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::linearizability::{LinearizabilityChecker, LinearizabilityOptions};
use splitbrain_checkers::shrink::{shrink, FailureClass, SameFailure, ShrinkBounds, ShrinkError};
use splitbrain_checkers::{Checker, History, Op, OpType, Process, Validity};
use std::collections::HashMap;
use support::H;

fn register() -> LinearizabilityChecker {
    LinearizabilityChecker::new("register", LinearizabilityOptions::default()).unwrap()
}

fn list_append() -> ElleChecker {
    let options = ElleOptions {
        consistency_model: "strict-serializable".into(),
        ..ElleOptions::default()
    };
    ElleChecker::new(ElleWorkload::ListAppend, options).unwrap()
}

/// The history's operations (an invoke with its completion, or a lone op), as positions;
/// written apart from the shrinker's own grouping so the test does not share its bugs.
fn operations(h: &History) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut open: HashMap<Process, usize> = HashMap::new();
    for (pos, op) in h.ops().iter().enumerate() {
        match (op.op_type, open.remove(&op.process)) {
            (OpType::Invoke, _) => {
                open.insert(op.process, out.len());
                out.push(vec![pos]);
            }
            (_, Some(u)) => out[u].push(pos),
            (_, None) => out.push(vec![pos]),
        }
    }
    out
}

/// `h` without operation `skip`, indices as carried.
fn without(h: &History, skip: usize) -> History {
    let ops = operations(h);
    let mut keep: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|&(u, _)| u != skip)
        .flat_map(|(_, ps)| ps.iter().copied())
        .collect();
    keep.sort_unstable();
    let picked = keep
        .into_iter()
        .map(|p| {
            let mut op = h.ops()[p].clone();
            op.index = h.op_index(p);
            op
        })
        .collect();
    History::new(picked).unwrap()
}

/// Every op of `small` is the op of `big` carrying the same index.
fn assert_sub_history(small: &History, big: &History) {
    let by_index: HashMap<u64, &Op> = (0..big.len())
        .map(|p| (big.op_index(p), &big.ops()[p]))
        .collect();
    for (p, op) in small.ops().iter().enumerate() {
        let original = by_index
            .get(&small.op_index(p))
            .unwrap_or_else(|| panic!("op index {} is not in the original", small.op_index(p)));
        assert_eq!(
            (op.process, op.op_type, &op.f, &op.value, &op.key),
            (
                original.process,
                original.op_type,
                &original.f,
                &original.value,
                &original.key
            )
        );
    }
}

/// Removing any one operation of the shrunk history no longer fails as the original.
fn assert_one_minimal(
    shrunk: &History,
    original: &History,
    checker: &dyn Checker,
    class: &FailureClass,
) {
    let same = SameFailure::new(original, &checker.check(original), class.clone());
    assert!(same.holds(shrunk, &checker.check(shrunk)));
    for u in 0..operations(shrunk).len() {
        let candidate = without(shrunk, u);
        let r = checker.check(&candidate);
        assert!(
            !same.holds(&candidate, &r),
            "removing operation {u} still fails as {class}: the shrink is not 1-minimal"
        );
    }
}

/// A random single-register history: each event either invokes on an idle process or
/// completes its open op; reads return random values, so many histories are invalid.
fn random_register(events: &[(u8, bool, u8)]) -> History {
    let mut ops = Vec::new();
    let mut open: HashMap<u8, (&'static str, u8)> = HashMap::new();
    for (i, &(p, write, v)) in events.iter().enumerate() {
        let t = i as u64 * 10 + 1;
        match open.remove(&p) {
            Some((f, iv)) => {
                let value = if f == "write" { json!(iv) } else { json!(v) };
                ops.push(Op::new(Process::Client(p as u64), OpType::Ok, f, value).at(t));
            }
            None => {
                let (f, value) = if write {
                    ("write", json!(v))
                } else {
                    ("read", Value::Null)
                };
                ops.push(Op::new(Process::Client(p as u64), OpType::Invoke, f, value).at(t));
                open.insert(p, (f, v));
            }
        }
    }
    History::new(ops).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn shrunk_register_histories_fail_alike_and_are_one_minimal(
        events in proptest::collection::vec((0u8..3, any::<bool>(), 0u8..3), 4..24)
    ) {
        let h = random_register(&events);
        let checker = register();
        let whole = checker.check(&h);
        let Some(class) = FailureClass::of(&whole, None) else { return Ok(()); };
        let s = shrink(&h, &checker, &class, &ShrinkBounds::default()).unwrap();
        prop_assert!(class.matches(&s.result));
        prop_assert!(class.matches(&checker.check(&s.history)));
        prop_assert!(s.stopped_by.is_none());
        prop_assert!(s.ops_after <= s.ops_before);
        assert_sub_history(&s.history, &h);
        assert_one_minimal(&s.history, &h, &checker, &class);
    }
}

fn elle(workload: ElleWorkload) -> ElleChecker {
    let options = ElleOptions {
        consistency_model: "strict-serializable".into(),
        ..ElleOptions::default()
    };
    ElleChecker::new(workload, options).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Histories from the Elle bench generator (strict serializable by construction, with
    /// failed and indeterminate transactions) with one injected anomaly: a G1c pair, or a
    /// list read missing its last element (G-single-item realtime). The shrunk history
    /// fails in the same class and is 1-minimal over transactions.
    #[test]
    fn shrunk_transactional_histories_fail_alike_and_are_one_minimal(
        seed in 0u64..100_000,
        txns in 6usize..48,
        g1c in any::<bool>(),
        rw_register in any::<bool>(),
        odd in 0u8..3,
    ) {
        use splitbrain_checkers::elle::bench::{generate, GenConfig};
        let mut cfg = GenConfig::new(seed, txns, 3, 4);
        cfg.fail_ratio = f64::from(odd) * 0.05;
        cfg.info_ratio = f64::from(odd) * 0.05;
        cfg.rw_register = rw_register;
        cfg.g1c = g1c;
        cfg.stale_read = !g1c;
        let h = generate(&cfg);
        let checker = elle(if rw_register { ElleWorkload::RwRegister } else { ElleWorkload::ListAppend });
        let whole = checker.check(&h);
        // A stale read needs a non-empty list read after half the run (rw has none): such
        // cases are rejected and replaced, so 40 cases each shrink a real failure.
        let class = FailureClass::of(&whole, None);
        prop_assume!(class.is_some());
        let class = class.unwrap();
        let s = shrink(&h, &checker, &class, &ShrinkBounds::default()).unwrap();
        prop_assert!(class.matches(&checker.check(&s.history)));
        prop_assert!(s.stopped_by.is_none());
        prop_assert!(s.ops_after <= s.ops_before);
        assert_sub_history(&s.history, &h);
        assert_one_minimal(&s.history, &h, &checker, &class);
    }
}

#[test]
fn a_stale_read_in_one_key_of_many_shrinks_to_that_key_and_a_few_ops() {
    // 20 keys written and read back correctly by 4 processes; key k7's last read returns
    // a value overwritten before the read began.
    let mut ops = Vec::new();
    let mut t = 0u64;
    let mut push = |ops: &mut Vec<Op>, p: u64, ty: OpType, f: &str, k: usize, v: Value| {
        t += 10;
        let mut op = Op::new(Process::Client(p), ty, f, v).at(t);
        op.key = Some(json!(format!("k{k}")));
        ops.push(op);
    };
    for round in 0..5u64 {
        for k in 0..20usize {
            let p = (k as u64) % 4;
            push(&mut ops, p, OpType::Invoke, "write", k, json!(round));
            push(&mut ops, p, OpType::Ok, "write", k, json!(round));
            let stale = k == 7 && round == 4;
            push(&mut ops, p, OpType::Invoke, "read", k, Value::Null);
            push(
                &mut ops,
                p,
                OpType::Ok,
                "read",
                k,
                json!(if stale { 2 } else { round }),
            );
        }
    }
    let h = History::new(ops).unwrap();
    let checker = register();
    let class = FailureClass::of(&checker.check(&h), None).expect("the stale read is found");
    let s = shrink(&h, &checker, &class, &ShrinkBounds::default()).unwrap();
    assert_eq!(s.ops_before, 400);
    // The stale read, the write of the value it returned and one write after that: the
    // read alone would fail only as a read of a value nobody wrote.
    assert_eq!(s.units_after, 3, "{:?}", s.history.ops());
    assert!(s
        .history
        .ops()
        .iter()
        .any(|o| o.f == "write" && o.value == json!(2)));
    assert!(s.history.ops().iter().all(|o| o.key == Some(json!("k7"))));
    assert!(s.first_cut.is_some());
    assert_sub_history(&s.history, &h);
    assert_one_minimal(&s.history, &h, &checker, &class);
}

#[test]
fn a_write_skew_among_serial_transactions_shrinks_to_its_two_transactions() {
    let mut h = H::default();
    for i in 0..30u64 {
        h.txn(
            2 + i % 3,
            json!([["append", "z", i], ["r", "z", (0..=i).collect::<Vec<_>>()]]),
        );
    }
    h.concurrent(&[
        (
            0,
            json!([["r", "x", []], ["r", "y", []], ["append", "x", 1]]),
        ),
        (
            1,
            json!([["r", "x", []], ["r", "y", []], ["append", "y", 1]]),
        ),
    ]);
    for i in 30..40u64 {
        h.txn(
            2 + i % 3,
            json!([["append", "z", i], ["r", "z", (0..=i).collect::<Vec<_>>()]]),
        );
    }
    let h = h.history();
    let checker = list_append();
    let whole = checker.check(&h);
    let class = FailureClass::of(&whole, Some("G2-item")).expect("G2-item found");
    let s = shrink(&h, &checker, &class, &ShrinkBounds::default()).unwrap();
    assert_eq!(s.units_after, 2, "{:?}", s.history.ops());
    assert!(s.result.anomaly_types.contains(&"G2-item".to_string()));
    assert_sub_history(&s.history, &h);
    assert_one_minimal(&s.history, &h, &checker, &class);
}

#[test]
fn a_stale_read_keeps_the_write_it_read_not_a_later_write_of_the_same_value() {
    // write 1, write 2, read 1 (stale), then write 1 again. The read with the later write
    // alone fails too, but only as a read of a value not yet written.
    let steps = [
        (0, "write", json!(1), json!(1)),
        (0, "write", json!(2), json!(2)),
        (1, "read", Value::Null, json!(1)),
        (2, "write", json!(1), json!(1)),
    ];
    let mut ops = Vec::new();
    for (i, (p, f, invoked, completed)) in steps.into_iter().enumerate() {
        let t = i as u64 * 10 + 1;
        ops.push(Op::new(Process::Client(p), OpType::Invoke, f, invoked).at(t));
        ops.push(Op::new(Process::Client(p), OpType::Ok, f, completed).at(t + 5));
    }
    let h = History::new(ops).unwrap();
    let checker = register();
    let class = FailureClass::of(&checker.check(&h), None).expect("the stale read is found");
    let s = shrink(&h, &checker, &class, &ShrinkBounds::default()).unwrap();
    let indices: Vec<u64> = (0..s.history.len())
        .map(|p| s.history.op_index(p))
        .collect();
    // The first write of 1, the write of 2 and the read; not the last write.
    assert_eq!(indices, vec![0, 1, 2, 3, 4, 5], "{:?}", s.history.ops());
    assert_one_minimal(&s.history, &h, &checker, &class);
}

/// A history recorded from the bundled txn database (`tests/data/txn`).
fn recorded_txn(file: &str) -> History {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/txn")
        .join(file);
    splitbrain_checkers::history::read::read_path(&path).unwrap()
}

#[test]
fn a_recorded_elle_cycle_shrinks_without_reads_of_dropped_writes() {
    // Dropping the transaction that appended an element makes the reads that saw it
    // garbage reads, which the recorded histories do not show: the shrunk history keeps
    // the writers, names no anomaly the original did not, and stays small.
    let checker = ElleChecker::new(ElleWorkload::ListAppend, ElleOptions::default()).unwrap();
    // The dirty read's default class is its most severe anomaly, G1a. The no-prepare-
    // fsync history's default class keeps so many writers that ddmin starting over after
    // each drop spent the 20 000-check bound on it; going on with the pass ends 1-minimal.
    for (file, anomaly, kept) in [
        ("dirty-read.jsonl", None, "G1a"),
        ("no-prepare-fsync.jsonl", None, "G0"),
        (
            "no-prepare-fsync.jsonl",
            Some("G-nonadjacent-item"),
            "G-nonadjacent-item",
        ),
    ] {
        let h = recorded_txn(file);
        let whole = checker.check(&h);
        let class = FailureClass::of(&whole, anomaly).expect("the recorded anomaly is found");
        assert_eq!(class.anomaly.as_deref(), Some(kept));
        let s = shrink(&h, &checker, &class, &ShrinkBounds::default()).unwrap();
        eprintln!(
            "{file} {kept}: operations {} -> {} in {} checks",
            s.units_before, s.units_after, s.checks
        );
        assert!(s.stopped_by.is_none(), "{file}: {:?}", s.stopped_by);
        for t in &s.result.anomaly_types {
            assert!(
                whole.anomaly_types.contains(t),
                "{file}: {t} is new: {}",
                s.result.explanation
            );
        }
        assert_sub_history(&s.history, &h);
        assert_one_minimal(&s.history, &h, &checker, &class);
    }
}

#[test]
fn a_history_that_does_not_fail_is_refused() {
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1]]))
        .txn(1, json!([["r", "x", [1]]]));
    let class = FailureClass {
        checker: "elle-list-append".into(),
        anomaly: Some("G2-item".into()),
    };
    let err = shrink(
        &h.history(),
        &list_append(),
        &class,
        &ShrinkBounds::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            ShrinkError::NotFailing {
                verdict: Validity::Valid,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_shrink_stopped_by_its_bound_says_so_and_still_fails_alike() {
    let events: Vec<(u8, bool, u8)> = (0..60u8).map(|i| (i % 3, i % 4 == 0, i % 3)).collect();
    let h = random_register(&events);
    let checker = register();
    let class = FailureClass::of(&checker.check(&h), None).expect("invalid");
    let bounds = ShrinkBounds {
        max_checks: 1,
        ..ShrinkBounds::default()
    };
    let s = shrink(&h, &checker, &class, &bounds).unwrap();
    assert_eq!(
        s.stopped_by.as_deref(),
        Some("the bound of 1 checks"),
        "{} units, {} checks, cut {:?}",
        s.units_before,
        s.checks,
        s.first_cut
    );
    assert!(class.matches(&checker.check(&s.history)));
}

/// Invalid, naming `needed`, when every write of an even value is in the history; when
/// some are missing, invalid naming a new anomaly instead (the oracle's "no new anomaly"
/// rule rejects that candidate, as it rejects an Elle history whose reads lost their
/// writer).
struct EvenWrites {
    evens: usize,
}

impl Checker for EvenWrites {
    fn name(&self) -> String {
        "even-writes".into()
    }

    fn check(&self, h: &History) -> splitbrain_checkers::CheckResult {
        let seen = h
            .ops()
            .iter()
            .filter(|o| o.op_type == OpType::Ok && o.value.as_u64().is_some_and(|v| v % 2 == 0))
            .count();
        let anomaly = if seen == self.evens { "needed" } else { "new" };
        let mut r = splitbrain_checkers::CheckResult::new(
            "even-writes",
            Validity::Invalid,
            format!("{seen} even writes"),
        );
        r.anomaly_types = vec![anomaly.to_string()];
        r
    }
}

/// `n` writes of 0..n, one process each, one after another.
fn writes(n: u64) -> History {
    let ops = (0..n)
        .flat_map(|v| {
            let p = Process::Client(v);
            [
                Op::new(p, OpType::Invoke, "write", json!(v)).at(10 * v + 1),
                Op::new(p, OpType::Ok, "write", json!(v)).at(10 * v + 2),
            ]
        })
        .collect();
    History::new(ops).unwrap()
}

#[test]
fn a_failure_needing_every_other_operation_shrinks_in_passes_not_quadratically() {
    // 300 writes; the failure needs the 150 even ones. No chunk of two or more adjacent
    // writes can go, so ddmin reaches single writes with all 300 kept, and 150 of them
    // can go one at a time. Starting over after each drop tries each remaining write
    // alone again and the complements up to the next odd one: about 150 rounds of 300
    // and more checks, past the 20 000 bound. Going on with the pass drops all 150 in
    // one pass; a second pass finds nothing more.
    let h = writes(300);
    let checker = EvenWrites { evens: 150 };
    let class = FailureClass {
        checker: "even-writes".into(),
        anomaly: Some("needed".into()),
    };
    let s = shrink(&h, &checker, &class, &ShrinkBounds::default()).unwrap();
    assert!(
        s.stopped_by.is_none(),
        "{:?} after {} checks",
        s.stopped_by,
        s.checks
    );
    assert_eq!(s.units_after, 150);
    assert!(s.checks < 3_000, "{} checks", s.checks);
    assert_one_minimal(&s.history, &h, &checker, &class);
}

#[test]
fn a_count_bound_mid_pass_keeps_a_failing_sub_history_and_says_it_is_not_minimal() {
    let h = writes(300);
    let checker = EvenWrites { evens: 150 };
    let class = FailureClass {
        checker: "even-writes".into(),
        anomaly: Some("needed".into()),
    };
    // Unbounded, the shrink takes 2 007 checks, the last 300 or so a pass over the 150
    // kept writes that drops none; 1 100 checks end it in the passes that drop odd ones.
    let bounds = ShrinkBounds {
        max_checks: 1_100,
        ..ShrinkBounds::default()
    };
    let s = shrink(&h, &checker, &class, &bounds).unwrap();
    assert_eq!(s.stopped_by.as_deref(), Some("the bound of 1100 checks"));
    assert_eq!(s.checks, 1_100);
    // Part of the odd writes went; what is left still fails as the original did.
    assert!(
        s.units_after > 150 && s.units_after < 300,
        "{}",
        s.units_after
    );
    let same = SameFailure::new(&h, &checker.check(&h), class.clone());
    assert!(same.holds(&s.history, &checker.check(&s.history)));
    assert_sub_history(&s.history, &h);
}
