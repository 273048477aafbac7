//! Session guarantees (Terry et al., PDIS 1994, §3: read-your-writes, monotonic reads,
//! writes-follow-reads, monotonic writes): one violation of each next to a minimally
//! different valid history, for sets (both read shapes) and counters.

use crate::eventual_support;

use eventual_support::{evidence_indices, expect, mentions, H};
use serde_json::json;
use splitbrain_checkers::eventual::{EventualDataType, SessionGuaranteesChecker};
use splitbrain_checkers::Validity;

fn set() -> SessionGuaranteesChecker {
    SessionGuaranteesChecker::new(EventualDataType::Set)
}

#[test]
fn read_your_writes() {
    let with = |seen: &[i64]| {
        let mut h = H::new();
        h.add(0, "k", 1, "n1");
        h.read_ct(0, "k", &[], seen, "n2");
        // Another session may lag: not a violation.
        h.read_ct(1, "k", &[], &[], "n3");
        h
    };
    expect(&with(&[1]).check(&set()), Validity::Valid);
    let r = with(&[]).check(&set());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["read-your-writes"]);
    mentions(&r, &["read-your-writes: session 0 on key \"k\": read op 3 (n2) lacks 1 written by the session's op 0 (n1)"]);
    assert_eq!(evidence_indices(&r), [0, 1, 2, 3]);
    assert_eq!(r.details["violations"]["read-your-writes"], 1);
    assert_eq!(r.details["violations"]["monotonic-reads"], 0);
}

#[test]
fn monotonic_reads() {
    let with = |second: serde_json::Value| {
        let mut h = H::new();
        h.add(0, "k", 1, "n1");
        h.read(1, "k", json!([1]), "n1");
        h.read(1, "k", second, "n2");
        h
    };
    expect(&with(json!([1])).check(&set()), Validity::Valid);
    let r = with(json!([])).check(&set());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["monotonic-reads"]);
    mentions(&r, &["monotonic reads: session 1 on key \"k\": read op 5 (n2) lacks 1 which the session's earlier read op 3 (n1) reflected"]);
    assert_eq!(evidence_indices(&r), [2, 3, 4, 5]);
}

/// Session 0 adds 1 then 2 at n1; session 1 reads `seen` at n2.
fn two_writes(seen: serde_json::Value) -> H {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.add(0, "k", 2, "n1");
    h.read(1, "k", seen, "n2");
    h
}

#[test]
fn monotonic_writes_presence() {
    expect(&two_writes(json!([1])).check(&set()), Validity::Valid);
    expect(&two_writes(json!([2, 1])).check(&set()), Validity::Valid);
    let r = two_writes(json!([2])).check(&set());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["monotonic-writes"]);
    mentions(&r, &["monotonic writes: session 0 on key \"k\": read op 5 (n2) reflects its op 2 (n1, element 2) but not its earlier op 0 (n1, element 1)"]);
    assert_eq!(evidence_indices(&r), [0, 2, 5]);
}

#[test]
fn monotonic_writes_order() {
    let ordered = |c: &[i64], t: &[i64]| two_writes(json!({"committed": c, "tentative": t}));
    expect(&ordered(&[1], &[2]).check(&set()), Validity::Valid);
    expect(&ordered(&[], &[1, 2]).check(&set()), Validity::Valid);
    let r = ordered(&[2], &[1]).check(&set());
    expect(&r, Validity::Invalid);
    mentions(
        &r,
        &["read op 5 (n2) orders its op 2 (element 2) before its earlier op 0 (element 1)"],
    );
}

/// Session 1 adds 1 at n1; session 0 reads it, then adds 2 at n2; session 2 reads `seen`.
fn read_then_write(seen: serde_json::Value) -> H {
    let mut h = H::new();
    h.add(1, "k", 1, "n1");
    h.read(0, "k", json!([1]), "n1");
    h.add(0, "k", 2, "n2");
    h.read(2, "k", seen, "n3");
    h
}

#[test]
fn writes_follow_reads_presence() {
    expect(
        &read_then_write(json!([1, 2])).check(&set()),
        Validity::Valid,
    );
    expect(&read_then_write(json!([1])).check(&set()), Validity::Valid);
    let r = read_then_write(json!([2])).check(&set());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["writes-follow-reads"]);
    mentions(&r, &["writes-follow-reads: session 0 on key \"k\" read 1 (read op 3, n1) before writing 2 (op 4, n2), yet read op 7 (n3) reflects the write but lacks 1"]);
    assert_eq!(evidence_indices(&r), [0, 3, 4, 7]);
}

#[test]
fn writes_follow_reads_order() {
    let ordered = |c: &[i64], t: &[i64]| read_then_write(json!({"committed": c, "tentative": t}));
    expect(&ordered(&[1], &[2]).check(&set()), Validity::Valid);
    let r = ordered(&[2, 1], &[]).check(&set());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["writes-follow-reads"]);
    mentions(&r, &["orders the write before 1"]);
}

#[test]
fn guarantees_are_per_key() {
    let mut h = H::new();
    h.add(0, "a", 1, "n1");
    h.read(0, "b", json!([]), "n2");
    expect(&h.check(&set()), Validity::Valid);
}

#[test]
fn bookings_reflect_reservation_ids() {
    let booking = SessionGuaranteesChecker::new(EventualDataType::Booking);
    let mut h = H::new();
    h.book(0, "s", 7, json!([[1, 1]]), "n1");
    let mut good = h.clone();
    good.read(
        0,
        "s",
        json!({"committed": [], "tentative": [7], "schedule": [[7, 1, 1]]}),
        "n2",
    );
    expect(&good.check(&booking), Validity::Valid);
    h.read(
        0,
        "s",
        json!({"committed": [], "tentative": [], "schedule": []}),
        "n2",
    );
    let r = h.check(&booking);
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["read-your-writes"]);
}

fn counter() -> SessionGuaranteesChecker {
    SessionGuaranteesChecker::new(EventualDataType::Counter)
}

#[test]
fn counters_read_your_writes_and_monotonic_reads() {
    let with = |own: i64, later: i64| {
        let mut h = H::new();
        h.invoke(0, "add", "c", json!(3));
        h.complete(
            0,
            splitbrain_checkers::history::OpType::Ok,
            "add",
            "c",
            json!(3),
            "n1",
        );
        h.read(0, "c", json!(own), "n2");
        h.read(1, "c", json!(5), "n1");
        h.read(1, "c", json!(later), "n2");
        h
    };
    let r = with(3, 5).check(&counter());
    expect(&r, Validity::Valid);
    assert!(r.details["violations"]["monotonic-writes"]
        .as_str()
        .unwrap_or("")
        .contains("not checkable"));
    mentions(&r, &["not checkable on a counter"]);
    let r = with(2, 5).check(&counter());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["read-your-writes"]);
    mentions(&r, &["session 0 read 2 from key \"c\" (op 3, n2) though its own acknowledged increments sum to 3"]);
    let r = with(3, 4).check(&counter());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["monotonic-reads"]);
    mentions(
        &r,
        &["session 1 read 5 from key \"c\" (op 5, n1) and later 4 (op 7, n2)"],
    );
}
