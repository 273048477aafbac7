//! Elle's rw-register inference options, each on a history where it changes the verdict:
//! without it the version order of a register is unknown and the anomaly hidden.

use crate::support;

use serde_json::json;
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::history::OpType;
use splitbrain_checkers::{CheckResult, Checker, Validity};
use support::H;

fn rw(h: &H, model: &str, set: impl Fn(&mut ElleOptions)) -> CheckResult {
    let mut options = ElleOptions {
        consistency_model: model.into(),
        ..ElleOptions::default()
    };
    set(&mut options);
    ElleChecker::new(ElleWorkload::RwRegister, options)
        .expect("known model")
        .check(&h.history())
}

fn assert_valid(r: &CheckResult) {
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
}

fn assert_found(r: &CheckResult, anomaly: &str) {
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert!(
        r.anomaly_types.iter().any(|t| t == anomaly),
        "expected {anomaly} in {:?}: {}",
        r.anomaly_types,
        r.explanation
    );
}

/// Read skew that only real-time order reveals: x=1 completes before the txn writing x=2
/// and y=2 begins; a txn concurrent with that one reads x=1 and y=2. A stale read after
/// both writes contradicts real time itself: cyclic versions, as Elle names it.
#[test]
fn linearizable_keys_orders_versions_by_real_time() {
    let mut h = H::default();
    h.txn(0, json!([["w", "x", 1]]))
        .invoke(1, json!([["w", "x", 2], ["w", "y", 2]]))
        .invoke(2, json!([["r", "x", 1], ["r", "y", 2]]))
        .op(1, OpType::Ok, json!([["w", "x", 2], ["w", "y", 2]]))
        .op(2, OpType::Ok, json!([["r", "x", 1], ["r", "y", 2]]));
    assert_valid(&rw(&h, "serializable", |_| {}));
    let r = rw(&h, "serializable", |o| o.linearizable_keys = true);
    assert_found(&r, "G-single-item");
    // Sequential keys cannot see it: the writers are different processes.
    assert_valid(&rw(&h, "serializable", |o| o.sequential_keys = true));

    let mut stale = H::default();
    stale
        .txn(0, json!([["w", "x", 1]]))
        .txn(1, json!([["w", "x", 2]]))
        .txn(2, json!([["r", "x", 1]]));
    assert_valid(&rw(&stale, "strict-serializable", |_| {}));
    let r = rw(&stale, "strict-serializable", |o| {
        o.linearizable_keys = true
    });
    assert_found(&r, "cyclic-versions");
}

/// Read skew that only a process's own order reveals: process 0 writes x=1, then x=2
/// with y=2; process 1, concurrent with both, reads x=1 and y=2.
#[test]
fn sequential_keys_orders_versions_by_process() {
    let mut h = H::default();
    h.invoke(1, json!([["r", "x", 1], ["r", "y", 2]]))
        .txn(0, json!([["w", "x", 1]]))
        .txn(0, json!([["w", "x", 2], ["w", "y", 2]]))
        .op(1, OpType::Ok, json!([["r", "x", 1], ["r", "y", 2]]));
    assert_valid(&rw(&h, "serializable", |_| {}));
    assert_found(
        &rw(&h, "serializable", |o| o.sequential_keys = true),
        "G-single-item",
    );
}

/// Writes follow reads: T0 read x=1 and wrote x=2, so 1 came before 2; T1 read x=1
/// but y from T0: read skew. All three run concurrently.
#[test]
fn wfr_keys_orders_a_read_before_the_write_that_follows_it() {
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["r", "x", 1], ["w", "x", 2], ["w", "y", 3]])),
        (1, json!([["r", "x", 1], ["r", "y", 3]])),
        (2, json!([["w", "x", 1]])),
    ]);
    assert_valid(&rw(&h, "serializable", |_| {}));
    assert_found(
        &rw(&h, "serializable", |o| o.wfr_keys = true),
        "G-single-item",
    );
    // Inferred orders that contradict each other are cyclic versions, as Elle names it.
    let mut h = H::default();
    h.txn(1, json!([["r", "x", 2], ["w", "x", 1]]))
        .txn(2, json!([["r", "x", 1], ["w", "x", 2]]));
    let r = rw(&h, "serializable", |o| o.wfr_keys = true);
    assert_found(&r, "cyclic-versions");
}
