//! Hand-made minimal histories for every anomaly the Elle checker names.

use crate::support;

use serde_json::json;
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::{CheckResult, Checker, Validity};
use support::H;

fn check(workload: ElleWorkload, model: &str, h: &H) -> CheckResult {
    let options = ElleOptions {
        consistency_model: model.into(),
        ..ElleOptions::default()
    };
    ElleChecker::new(workload, options)
        .expect("known model")
        .check(&h.history())
}

fn la(h: &H) -> CheckResult {
    check(ElleWorkload::ListAppend, "strict-serializable", h)
}

fn assert_types(r: &CheckResult, expected: &[&str]) {
    assert_eq!(
        r.anomaly_types, expected,
        "{}\n{:#}",
        r.explanation, r.details
    );
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
}

fn assert_has(r: &CheckResult, name: &str) {
    assert!(
        r.anomaly_types.iter().any(|t| t == name),
        "expected {name} in {:?}: {}",
        r.anomaly_types,
        r.explanation
    );
    assert_eq!(r.valid, Validity::Invalid);
}

#[test]
fn serial_history_is_valid() {
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1], ["r", "y", []]]))
        .txn(1, json!([["r", "x", [1]], ["append", "y", 1]]))
        .txn(
            0,
            json!([["append", "x", 2], ["r", "y", [1]], ["r", "x", [1, 2]]]),
        );
    let r = la(&h);
    assert_eq!(
        r.valid,
        Validity::Valid,
        "{} {:#}",
        r.explanation,
        r.details
    );
    assert!(r.anomaly_types.is_empty() && r.not.is_empty());
}

#[test]
fn g0_write_cycle() {
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["append", "x", 1], ["append", "y", 1]])),
        (1, json!([["append", "x", 2], ["append", "y", 2]])),
    ])
    .txn(2, json!([["r", "x", [1, 2]], ["r", "y", [2, 1]]]));
    let r = la(&h);
    assert_types(&r, &["G0"]);
    assert_eq!(r.not, ["read-uncommitted"]);
    assert_eq!(r.evidence.len(), 2);
    let steps = &r.details["anomalies"]["G0"]["instances"][0]["steps"];
    assert_eq!(steps.as_array().map(Vec::len), Some(2));
    assert!(
        r.explanation.contains("appended 2 to key x after"),
        "{}",
        r.explanation
    );
}

#[test]
fn g1c_circular_information_flow() {
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["append", "x", 1], ["r", "y", [1]]])),
        (1, json!([["append", "y", 1], ["r", "x", [1]]])),
    ]);
    let r = la(&h);
    assert_types(&r, &["G1c"]);
    assert_eq!(r.not, ["read-committed"]);
    assert!(r.also_not.contains(&"serializable".to_string()));
}

#[test]
fn g_single_item_read_skew() {
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["append", "x", 1], ["append", "y", 1]])),
        (1, json!([["r", "x", []], ["r", "y", [1]]])),
    ]);
    let r = la(&h);
    assert_types(&r, &["G-single-item"]);
    assert_eq!(r.not, ["consistent-view", "repeatable-read"]);
    assert!(
        r.explanation.contains("missing 1 appended by"),
        "{}",
        r.explanation
    );
    // Snapshot isolation forbids it too, read committed does not.
    let si = check(ElleWorkload::ListAppend, "snapshot-isolation", &h);
    assert_eq!(si.valid, Validity::Invalid);
    let rc = check(ElleWorkload::ListAppend, "read-committed", &h);
    assert_eq!(rc.valid, Validity::Valid, "{}", rc.explanation);
    assert!(rc.anomaly_types.is_empty());
}

#[test]
fn g_nonadjacent_item() {
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["r", "x", []], ["r", "c", [1]]])),
        (1, json!([["append", "x", 1], ["append", "a", 1]])),
        (2, json!([["r", "a", [1]], ["r", "b", []]])),
        (3, json!([["append", "b", 1], ["append", "c", 1]])),
    ]);
    let r = la(&h);
    assert_types(&r, &["G-nonadjacent-item"]);
    let si = check(ElleWorkload::ListAppend, "snapshot-isolation", &h);
    assert_eq!(si.valid, Validity::Invalid);
}

#[test]
fn g2_item_write_skew() {
    let mut h = H::default();
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
    let r = la(&h);
    assert_types(&r, &["G2-item"]);
    assert_eq!(r.not, ["repeatable-read"]);
    assert!(!r.also_not.contains(&"snapshot-isolation".to_string()));
    // Snapshot isolation allows write skew.
    let si = check(ElleWorkload::ListAppend, "snapshot-isolation", &h);
    assert_eq!(si.valid, Validity::Valid, "{}", si.explanation);
}

#[test]
fn lost_update() {
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["r", "x", []], ["append", "x", 1]])),
        (1, json!([["r", "x", []], ["append", "x", 2]])),
    ])
    .txn(2, json!([["r", "x", [1, 2]]]));
    let r = la(&h);
    assert_types(&r, &["G-single-item", "lost-update"]);
    let si = check(ElleWorkload::ListAppend, "snapshot-isolation", &h);
    assert_eq!(si.valid, Validity::Invalid);
}

#[test]
fn g1a_aborted_read() {
    let mut h = H::default();
    h.failed(0, json!([["append", "x", 1]]))
        .txn(1, json!([["r", "x", [1]]]))
        .txn(1, json!([["r", "y", []]]));
    let r = la(&h);
    assert_types(&r, &["G1a"]);
    assert_eq!(r.not, ["read-committed"]);
    assert!(r.also_not.contains(&"read-atomic".to_string()));
}

#[test]
fn g1b_intermediate_read() {
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1], ["append", "x", 2]]))
        .txn(1, json!([["r", "x", [1]]]));
    let r = la(&h);
    assert_has(&r, "G1b");
}

#[test]
fn dirty_update() {
    let mut h = H::default();
    h.failed(0, json!([["append", "x", 1]]))
        .txn(1, json!([["append", "x", 2]]))
        .txn(2, json!([["r", "x", [1, 2]]]));
    let r = la(&h);
    assert_has(&r, "dirty-update");
    assert_has(&r, "G1a");
}

#[test]
fn duplicate_elements() {
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1]]))
        .txn(1, json!([["r", "x", [1, 1]]]));
    let r = la(&h);
    assert_has(&r, "duplicate-elements");
}

#[test]
fn incompatible_order() {
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["append", "x", 1]])),
        (1, json!([["append", "x", 2]])),
    ])
    .txn(2, json!([["r", "x", [1, 2]]]))
    .txn(3, json!([["r", "x", [2, 1]]]));
    let r = la(&h);
    assert_has(&r, "incompatible-order");
}

#[test]
fn internal_inconsistency() {
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1], ["r", "x", []]]))
        .txn(1, json!([["r", "x", [1]]]));
    let r = la(&h);
    assert_has(&r, "internal");
}

#[test]
fn future_read() {
    let mut h = H::default();
    h.txn(0, json!([["r", "x", [1]], ["append", "x", 1]]))
        .txn(1, json!([["r", "x", [1]]]));
    let r = la(&h);
    assert_has(&r, "future-read");
}

#[test]
fn stale_read_is_g_single_item_realtime_or_process() {
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1]]))
        .txn(0, json!([["r", "x", []]]));
    let r = la(&h);
    assert_types(&r, &["G-single-item-realtime"]);
    assert_eq!(r.not, ["strong-snapshot-isolation"]);
    let ss = check(ElleWorkload::ListAppend, "strong-session-serializable", &h);
    assert_types(&ss, &["G-single-item-process"]);
    let ser = check(ElleWorkload::ListAppend, "serializable", &h);
    assert_eq!(ser.valid, Validity::Valid, "{}", ser.explanation);
}

#[test]
fn g0_and_g1c_realtime() {
    let mut h = H::default();
    h.txn(1, json!([["append", "x", 2]]))
        .txn(0, json!([["append", "x", 1]]))
        .txn(2, json!([["r", "x", [1, 2]]]));
    assert_types(&la(&h), &["G0-realtime"]);
    let mut h = H::default();
    h.txn(1, json!([["r", "x", [1]]]))
        .txn(0, json!([["append", "x", 1]]));
    assert_has(&la(&h), "G1c-realtime");
}

#[test]
fn g2_item_realtime() {
    // Write skew where both reads are also stale in real time.
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["r", "x", []], ["append", "y", 1]])),
        (1, json!([["r", "y", []], ["append", "x", 1]])),
    ]);
    assert_types(&la(&h), &["G2-item"]);
}

#[test]
fn rw_register_anomalies() {
    let rw = |h: &H| check(ElleWorkload::RwRegister, "strict-serializable", h);
    let mut h = H::default();
    h.txn(0, json!([["w", "x", 1], ["w", "y", 1]]))
        .txn(1, json!([["r", "x", 1], ["r", "y", 1]]));
    let r = rw(&h);
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);

    let mut h = H::default();
    h.failed(0, json!([["w", "x", 1]]))
        .txn(1, json!([["r", "x", 1]]))
        .txn(1, json!([["r", "y", null]]));
    assert_has(&rw(&h), "G1a");

    let mut h = H::default();
    h.txn(0, json!([["w", "x", 1], ["w", "x", 2]]))
        .txn(1, json!([["r", "x", 1]]));
    assert_has(&rw(&h), "G1b");

    let mut h = H::default();
    h.txn(0, json!([["w", "x", 1], ["r", "x", 2]]))
        .txn(1, json!([["w", "x", 2]]));
    assert_has(&rw(&h), "internal");

    // Read skew: T1 sees y's new value but x's initial nil.
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["w", "x", 1], ["w", "y", 1]])),
        (1, json!([["r", "x", null], ["r", "y", 1]])),
    ]);
    assert_types(&rw(&h), &["G-single-item"]);

    let mut h = H::default();
    h.concurrent(&[
        (
            0,
            json!([["r", "x", null], ["r", "y", null], ["w", "x", 1]]),
        ),
        (
            1,
            json!([["r", "x", null], ["r", "y", null], ["w", "y", 1]]),
        ),
    ]);
    assert_types(&rw(&h), &["G2-item"]);

    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["r", "x", null], ["w", "x", 1]])),
        (1, json!([["r", "x", null], ["w", "x", 2]])),
    ]);
    assert_has(&rw(&h), "lost-update");

    // Writes-follow-reads orders 1 < 2 and 2 < 1: cyclic versions.
    let mut h = H::default();
    h.concurrent(&[
        (2, json!([["r", "x", 2], ["w", "x", 1]])),
        (3, json!([["r", "x", 1], ["w", "x", 2]])),
    ]);
    let options = ElleOptions {
        wfr_keys: true,
        ..ElleOptions::default()
    };
    let r = ElleChecker::new(ElleWorkload::RwRegister, options)
        .expect("model")
        .check(&h.history());
    assert!(
        r.anomaly_types.iter().any(|t| t == "cyclic-versions"),
        "{:?} {}",
        r.anomaly_types,
        r.explanation
    );
}

#[test]
fn unknown_model_and_wrong_workload() {
    let e = ElleChecker::new(
        ElleWorkload::ListAppend,
        ElleOptions {
            consistency_model: "bogus".into(),
            ..ElleOptions::default()
        },
    )
    .expect_err("bogus model");
    assert!(e.to_string().contains("strict-serializable"), "{e}");
    let mut h = H::default();
    h.txn(0, json!([["w", "x", 1]]))
        .txn(0, json!([["r", "x", 1]]));
    assert_eq!(la(&h).valid, Validity::Unknown);
    // No dependencies at all: Elle's empty-transaction-graph, unknown.
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1]]));
    let r = check(ElleWorkload::ListAppend, "serializable", &h);
    assert_eq!(r.valid, Validity::Unknown);
    assert_eq!(r.anomaly_types, ["empty-transaction-graph"]);
}

#[test]
fn cycle_search_timeout_reports_a_fallback_cycle() {
    let mut h = H::default();
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
    let options = |model: &str| ElleOptions {
        consistency_model: model.into(),
        cycle_search_timeout: std::time::Duration::ZERO,
        ..ElleOptions::default()
    };
    let r = ElleChecker::new(ElleWorkload::ListAppend, options("serializable"))
        .expect("model")
        .check(&h.history());
    assert_eq!(r.anomaly_types, ["G2-item", "cycle-search-timeout"]);
    assert_eq!(r.valid, Validity::Invalid);
    // Snapshot isolation allows the fallback cycle's class, so the verdict is unknown.
    let r = ElleChecker::new(ElleWorkload::ListAppend, options("snapshot-isolation"))
        .expect("model")
        .check(&h.history());
    assert_eq!(r.anomaly_types, ["cycle-search-timeout"]);
    assert_eq!(r.valid, Validity::Unknown);
}

#[test]
fn duplicate_appends_are_refused_as_elle_refuses_them() {
    // Two transactions append 1 to key 1 (one of them failed: Elle looks at invokes).
    let mut h = H::default();
    h.txn(0, json!([["append", 1, 1]]))
        .failed(1, json!([["append", 1, 1]]))
        .txn(2, json!([["r", 1, [1]]]));
    let opts = ElleOptions::default();
    let r = ElleChecker::new(ElleWorkload::ListAppend, opts)
        .unwrap()
        .check(&h.history());
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert_eq!(r.anomaly_types, vec!["duplicate-appends".to_string()]);
    assert_eq!(r.details["duplicate-appends"]["key"], "1");
    assert!(
        r.explanation.contains("more than once"),
        "{}",
        r.explanation
    );
}

/// A read of an element or value no transaction ever wrote: corruption, forbidden by
/// every model (read-uncommitted included), in both workloads.
#[test]
fn garbage_reads_are_forbidden_by_every_model() {
    // list-append: 7 was never appended to x (9 was, to y: garbage is per key).
    let mut h = H::default();
    h.txn(0, json!([["append", "x", 1], ["append", "y", 9]]))
        .txn(1, json!([["r", "x", [1, 7]]]))
        .txn(2, json!([["r", "y", [9, 1]]]));
    for model in ["strict-serializable", "read-uncommitted"] {
        let r = check(ElleWorkload::ListAppend, model, &h);
        assert_has(&r, "garbage-read");
        let first = &r.details["anomalies"]["garbage-read"]["instances"][0];
        assert_eq!(
            (&first["key"], &first["elements"]),
            (&json!("x"), &json!([7]))
        );
        assert!(r.not.iter().any(|m| m == "read-uncommitted"), "{:?}", r.not);
        assert_eq!(
            r.details["anomalies"]["garbage-read"]["count"], 2,
            "{:#}",
            r.details
        );
    }
    assert!(la(&h).explanation.contains("garbage read"));
    // The same history without the foreign elements is valid.
    let mut ok = H::default();
    ok.txn(0, json!([["append", "x", 1], ["append", "y", 9]]))
        .txn(1, json!([["r", "x", [1]], ["r", "y", [9]]]));
    assert_eq!(la(&ok).valid, Validity::Valid, "{}", la(&ok).explanation);

    // rw-register: 5 was never written to x; 3 was written only by a failed txn (G1a, not
    // garbage).
    let mut h = H::default();
    h.txn(0, json!([["w", "x", 1]]))
        .failed(1, json!([["w", "x", 3]]))
        .txn(2, json!([["r", "x", 5]]));
    for model in ["strict-serializable", "read-uncommitted"] {
        let r = check(ElleWorkload::RwRegister, model, &h);
        assert_has(&r, "garbage-read");
        assert!(
            r.explanation.contains("Most severe, garbage-read"),
            "{}",
            r.explanation
        );
    }
    let mut g1a = H::default();
    g1a.txn(0, json!([["w", "x", 1]]))
        .failed(1, json!([["w", "x", 3]]))
        .txn(2, json!([["r", "x", 3]]));
    let r = check(ElleWorkload::RwRegister, "strict-serializable", &g1a);
    assert_types(&r, &["G1a"]);
    let mut valid = H::default();
    valid
        .txn(0, json!([["w", "x", 1]]))
        .txn(2, json!([["r", "x", 1]]));
    let r = check(ElleWorkload::RwRegister, "strict-serializable", &valid);
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
}

/// One strongly connected component holding cycles of several classes: each class is
/// named, as Elle names them, not only the most severe.
#[test]
fn every_cycle_class_in_one_component_is_named() {
    // Serial in real time: T1, T0, T3, T4, T5. x's order is 0 (T4), 1 (T0), 2 (T1):
    // T0 -ww-> T1 -rt-> T0 is a G0-realtime; T4 -wr-> T3 -rt-> T4 a G1c-realtime; and
    // T4 -ww-> T0 -rt-> T3 joins them into one component.
    let mut h = H::default();
    h.txn(1, json!([["append", "x", 2]]))
        .txn(0, json!([["append", "x", 1]]))
        .txn(3, json!([["r", "y", [5]]]))
        .txn(4, json!([["append", "y", 5], ["append", "x", 0]]))
        .txn(5, json!([["r", "x", [0, 1, 2]]]));
    let r = la(&h);
    assert_has(&r, "G0-realtime");
    assert_has(&r, "G1c-realtime");
    let g1c = &r.details["anomalies"]["G1c-realtime"]["instances"][0]["explanation"];
    assert!(
        g1c.as_str()
            .is_some_and(|t| t.contains("T5") && t.contains("T7")),
        "{g1c}"
    );

    // Concurrent (no real-time order): T1 and T2 read each other's appends (G1c), and T3
    // read x before T1's append but y after T2's: one rw edge, a G-single-item.
    let mut h = H::default();
    h.concurrent(&[
        (1, json!([["append", "x", 1], ["r", "y", [1]]])),
        (2, json!([["append", "y", 1], ["r", "x", [1]]])),
        (3, json!([["r", "x", []], ["r", "y", [1]]])),
    ]);
    let r = check(ElleWorkload::ListAppend, "serializable", &h);
    assert_has(&r, "G1c");
    assert_has(&r, "G-single-item");
}

#[test]
fn list_append_without_a_committed_read_is_unknown() {
    let mut h = H::default();
    h.txn(0, json!([["append", 1, 1]]))
        .txn(1, json!([["append", 1, 2]]))
        .failed(2, json!([["r", 1, null]]));
    let r = la(&h);
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(r.explanation.contains("read anything"), "{}", r.explanation);
    assert_eq!(r.coverage.get("reads"), Some(0));
    assert_eq!(r.coverage.get("committed"), Some(2));
}

#[test]
fn rw_register_without_a_committed_transaction_is_unknown() {
    let mut h = H::default();
    h.failed(0, json!([["w", 1, 1]]))
        .failed(1, json!([["r", 1, null]]));
    let r = check(ElleWorkload::RwRegister, "serializable", &h);
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert_eq!(r.coverage.get("committed"), Some(0));
}

#[test]
fn a_committed_read_earns_a_valid_verdict_with_its_coverage() {
    let mut h = H::default();
    h.txn(0, json!([["append", 1, 1]]))
        .txn(1, json!([["r", 1, [1]]]));
    let r = la(&h);
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
    assert_eq!(
        r.coverage.to_string(),
        "2 transactions, 2 committed, 1 keys, 1 reads"
    );
}
