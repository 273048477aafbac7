//! Elle's `*-cycle-exists` anomalies: proofs that a forbidden cycle exists, which keep a
//! history invalid when the shortest-cycle search runs out of time, and vanish when a
//! named anomaly already says as much.
//!
//! On a timeout the checker also reports one fallback cycle through the component's
//! first transaction, and that cycle's class makes weaker proofs redundant. So these
//! histories put the first transaction in a write skew (fallback class G2-item) and the
//! interesting cycle elsewhere in the same component.

use crate::support;

use serde_json::{json, Value};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::{CheckResult, Checker, Validity};
use std::time::Duration;
use support::H;

fn check(model: &str, timeout: Duration, h: &H) -> CheckResult {
    let options = ElleOptions {
        consistency_model: model.into(),
        cycle_search_timeout: timeout,
        ..ElleOptions::default()
    };
    ElleChecker::new(ElleWorkload::ListAppend, options)
        .expect("known model")
        .check(&h.history())
}

const NORMAL: Duration = Duration::from_secs(5);

/// Every `*-cycle-exists` type anywhere in the result (reported or not).
fn cycle_exists_types(r: &CheckResult) -> Vec<String> {
    let mut types: Vec<String> = r.anomaly_types.clone();
    if let Some(Value::Array(xs)) = r.details.get("not-forbidden-by-model") {
        types.extend(xs.iter().filter_map(|x| x.as_str().map(String::from)));
    }
    types.retain(|t| t.ends_with("-cycle-exists"));
    types
}

/// T0 and T1 write-skew (x, y); T1 and T2 write-cycle (a, b), seen by reader T3.
fn write_skew_and_g0() -> H {
    let mut h = H::default();
    h.concurrent(&[
        (
            0,
            json!([["r", "x", []], ["r", "y", []], ["append", "x", 1]]),
        ),
        (
            1,
            json!([
                ["r", "x", []],
                ["r", "y", []],
                ["append", "y", 1],
                ["append", "a", 1],
                ["append", "b", 1]
            ]),
        ),
        (2, json!([["append", "a", 2], ["append", "b", 2]])),
    ])
    .txn(3, json!([["r", "a", [1, 2]], ["r", "b", [2, 1]]]));
    h
}

/// T0 and T1 write-skew (x, y); T1 -rw(z)-> T2 -wr(w)-> T1 is a G-single.
fn write_skew_and_g_single() -> H {
    let mut h = H::default();
    h.concurrent(&[
        (
            0,
            json!([["r", "x", []], ["r", "y", []], ["append", "x", 1]]),
        ),
        (
            1,
            json!([
                ["r", "x", []],
                ["r", "y", []],
                ["append", "y", 1],
                ["r", "z", []],
                ["r", "w", [1]]
            ]),
        ),
        (2, json!([["append", "z", 1], ["append", "w", 1]])),
    ]);
    h
}

fn write_skew() -> H {
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
    h
}

#[test]
fn write_cycle_under_timeout_is_proved_and_invalid() {
    let h = write_skew_and_g0();
    let r = check("read-uncommitted", Duration::ZERO, &h);
    // The fallback cycle (G2-item) is allowed here: only the proof makes it invalid.
    assert_eq!(
        r.anomaly_types,
        ["PL-1-cycle-exists", "cycle-search-timeout"],
        "{}",
        r.explanation
    );
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert_eq!(r.not, ["read-uncommitted"]);
    let case = &r.details["anomalies"]["PL-1-cycle-exists"]["instances"][0];
    assert_eq!(case["not"], "read-uncommitted");
    assert_eq!(case["subgraph"], "ww");
    assert_eq!(case["scc-size"], 2);
    // T1 and T2 complete at history indices 4 and 5.
    assert_eq!(case["scc"], json!([4, 5]));
    assert_eq!(r.evidence.len(), 2);

    let r = check("serializable", Duration::ZERO, &h);
    assert_eq!(
        r.anomaly_types,
        ["G2-item", "PL-1-cycle-exists", "cycle-search-timeout"]
    );
    assert_eq!(r.valid, Validity::Invalid);
}

#[test]
fn named_cycles_make_proofs_redundant() {
    let h = write_skew_and_g0();
    let r = check("serializable", NORMAL, &h);
    assert_eq!(r.anomaly_types, ["G0", "G2-item"], "{}", r.explanation);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(cycle_exists_types(&r).is_empty(), "{:#}", r.details);

    let r = check("strict-serializable", NORMAL, &write_skew_and_g_single());
    assert_eq!(r.valid, Validity::Invalid);
    assert!(r.anomaly_types.contains(&"G-single-item".to_string()));
    assert!(cycle_exists_types(&r).is_empty(), "{:#}", r.details);

    // A plain write cycle under timeout: the fallback cycle is the G0 itself.
    let mut h = H::default();
    h.concurrent(&[
        (0, json!([["append", "x", 1], ["append", "y", 1]])),
        (1, json!([["append", "x", 2], ["append", "y", 2]])),
    ])
    .txn(2, json!([["r", "x", [1, 2]], ["r", "y", [2, 1]]]));
    let r = check("serializable", Duration::ZERO, &h);
    assert_eq!(r.anomaly_types, ["G0", "cycle-search-timeout"]);
    assert!(cycle_exists_types(&r).is_empty(), "{:#}", r.details);
}

#[test]
fn g_single_under_timeout_breaks_snapshot_isolation() {
    let h = write_skew_and_g_single();
    let r = check("snapshot-isolation", Duration::ZERO, &h);
    assert_eq!(
        r.anomaly_types,
        ["PL-SI-cycle-exists", "cycle-search-timeout"],
        "{}",
        r.explanation
    );
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    let case = &r.details["anomalies"]["PL-SI-cycle-exists"]["instances"][0];
    assert_eq!(case["not"], "snapshot-isolation");
    assert_eq!(
        case["subgraph"],
        json!(["extension", ["union", "ww", "wr"], "rw"])
    );
    // As in Elle, the extension's cycle is a self-loop on T2 (index 5).
    assert_eq!(case["scc"], json!([5]));

    let r = check("snapshot-isolation", NORMAL, &h);
    assert_eq!(r.anomaly_types, ["G-single-item"], "{}", r.explanation);
    assert_eq!(r.valid, Validity::Invalid);
}

#[test]
fn write_skew_under_timeout_proves_no_si_cycle() {
    let h = write_skew();
    let r = check("snapshot-isolation", Duration::ZERO, &h);
    assert_eq!(r.anomaly_types, ["cycle-search-timeout"]);
    assert_eq!(r.valid, Validity::Unknown);
    assert!(cycle_exists_types(&r).is_empty(), "{:#}", r.details);

    // Serializable: invalid; the repeatable-read proof is redundant with the fallback
    // G2-item cycle, which rules out repeatable read already.
    let r = check("serializable", Duration::ZERO, &h);
    assert_eq!(r.anomaly_types, ["G2-item", "cycle-search-timeout"]);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(cycle_exists_types(&r).is_empty(), "{:#}", r.details);
}

#[test]
fn realtime_cycle_under_timeout_breaks_strong_snapshot_isolation() {
    // T0 and T1 write-skew; T1 appends q, and T2, invoked after T1 completed, misses
    // it: T1 -realtime-> T2 -rw-> T1.
    let mut h = H::default();
    h.concurrent(&[
        (
            0,
            json!([["r", "x", []], ["r", "y", []], ["append", "x", 1]]),
        ),
        (
            1,
            json!([
                ["r", "x", []],
                ["r", "y", []],
                ["append", "y", 1],
                ["append", "q", 1]
            ]),
        ),
    ])
    .txn(2, json!([["r", "q", []]]));
    let r = check("strong-snapshot-isolation", Duration::ZERO, &h);
    assert_eq!(
        r.anomaly_types,
        [
            "cycle-search-timeout",
            "strong-snapshot-isolation-cycle-exists"
        ],
        "{}",
        r.explanation
    );
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    let case = &r.details["anomalies"]["strong-snapshot-isolation-cycle-exists"]["instances"][0];
    assert_eq!(case["not"], "strong-snapshot-isolation");
    // T1 completes at index 3.
    assert_eq!(case["scc"], json!([3]));

    let r = check("strong-snapshot-isolation", NORMAL, &h);
    assert_eq!(
        r.anomaly_types,
        ["G-single-item-realtime"],
        "{}",
        r.explanation
    );
    assert!(cycle_exists_types(&r).is_empty(), "{:#}", r.details);
}
