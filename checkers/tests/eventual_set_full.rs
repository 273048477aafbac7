//! Set-full checker (Jepsen's set-full idea): hand-made histories for lost, stale, never
//! read, unstable and unexpected elements, each next to a minimally different valid one,
//! in both read shapes.

use crate::eventual_support;

use eventual_support::{evidence_indices, expect, mentions, H};
use serde_json::json;
use splitbrain_checkers::eventual::{ElementOutcome, SetFullChecker};
use splitbrain_checkers::history::OpType;
use splitbrain_checkers::Validity;

/// Add 1 (acknowledged at op 1), a stale read (ops 2-3), then two reads that see it
/// (ops 4-5, 6-7). `list` picks Jepsen's plain-list shape.
fn stale_then_stable(list: bool) -> H {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    let read = |h: &mut H, v: &[i64], node: &str| {
        if list {
            h.read(1, "k", json!(v), node)
        } else {
            h.read_ct(1, "k", &[], v, node)
        }
    };
    read(&mut h, &[], "n2");
    read(&mut h, &[1], "n1");
    read(&mut h, &[1], "n2");
    h
}

#[test]
fn a_stale_read_is_counted_but_valid() {
    for list in [false, true] {
        let h = stale_then_stable(list);
        let r = h.check(&SetFullChecker);
        expect(&r, Validity::Valid);
        assert_eq!(r.details["stale_reads"], 1);
        assert_eq!(r.details["stale_read_share"], json!(1.0 / 3.0));
        assert_eq!(r.details["stable"], 1);
        // Acknowledged at 1 ms, stably visible from the read invoked at 4 ms.
        assert_eq!(r.details["stable_latency_ms"]["p50"], json!(3.0));
        let a = SetFullChecker.analyse(&h.history());
        let e = &a.elements[0];
        assert_eq!(e.outcome, ElementOutcome::Stable);
        assert_eq!(
            (e.stale_reads, e.first_seen_index, e.last_seen_index),
            (1, Some(5), Some(7))
        );
        assert_eq!((e.add_invoke_index, e.add_ok_index), (0, Some(1)));
    }
}

#[test]
fn absent_from_every_read_after_its_last_appearance_is_lost() {
    for list in [false, true] {
        let mut h = stale_then_stable(list);
        if list {
            h.read(2, "k", json!([]), "n3");
        } else {
            h.read_ct(2, "k", &[], &[], "n3");
        }
        let r = h.check(&SetFullChecker);
        expect(&r, Validity::Invalid);
        assert_eq!(r.anomaly_types, ["lost"]);
        mentions(
            &r,
            &[
                "element 1 of key \"k\" lost",
                "added by op 0",
                "acknowledged by op 1",
                "last seen by read op 7",
                "e.g. op 9",
            ],
        );
        assert_eq!(evidence_indices(&r), [0, 1, 7, 9]);
        assert_eq!(r.details["lost"], 1);
    }
}

#[test]
fn a_read_concurrent_with_the_last_appearance_does_not_make_it_lost() {
    let mut h = stale_then_stable(false);
    // Read A (process 1) and read B (process 2) overlap; A sees 1, B does not.
    h.op(1, OpType::Invoke, "read", "k", json!(null), None);
    h.op(2, OpType::Invoke, "read", "k", json!(null), None);
    h.op(
        1,
        OpType::Ok,
        "read",
        "k",
        json!({"committed": [1], "tentative": []}),
        Some("n1"),
    );
    h.op(
        2,
        OpType::Ok,
        "read",
        "k",
        json!({"committed": [], "tentative": []}),
        Some("n3"),
    );
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Valid);
    assert_eq!(r.details["unstable"], 1);
    let a = SetFullChecker.analyse(&h.history());
    assert_eq!(a.elements[0].outcome, ElementOutcome::Unstable);
    // B began after the add was acknowledged: a stale read.
    assert_eq!(a.elements[0].stale_reads, 2);
}

#[test]
fn an_observed_but_unacknowledged_element_that_vanishes_is_lost() {
    let mut h = H::new();
    h.add_ending(0, "k", 5, "n1", OpType::Info);
    h.read(1, "k", json!([5]), "n1");
    h.read(1, "k", json!([]), "n2");
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Invalid);
    mentions(&r, &["element 5", "observed", "last seen by read op 3"]);
    // Never seen at all: an indeterminate add may simply not have happened.
    let mut h = H::new();
    h.add_ending(0, "k", 5, "n1", OpType::Info);
    h.read(1, "k", json!([]), "n1");
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Valid);
    assert_eq!(r.details["never_read"], 1);
}

#[test]
fn an_acknowledged_element_no_read_began_after_is_never_read() {
    let mut h = H::new();
    h.read(1, "k", json!([]), "n1");
    h.add(0, "k", 1, "n1");
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Valid);
    assert_eq!(r.details["never_read"], 1);
    assert_eq!(r.details["stale_reads"], 0);
    // One more read after the acknowledgement, lacking it: lost.
    h.read(1, "k", json!([]), "n2");
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Invalid);
    mentions(&r, &["never seen", "e.g. op 5"]);
}

#[test]
fn elements_never_added_or_only_failed_are_unexpected() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.add_ending(0, "k", 2, "n1", OpType::Fail);
    h.read(1, "k", json!({"committed": [1], "tentative": []}), "n1");
    expect(&h.check(&SetFullChecker), Validity::Valid);
    let mut bad = h.clone();
    bad.read(1, "k", json!({"committed": [1], "tentative": [2, 3]}), "n2");
    let r = bad.check(&SetFullChecker);
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["unexpected"]);
    mentions(
        &r,
        &[
            "element 2 of key \"k\" unexpected: read by op 7 but its only add, op 2, failed",
            "element 3 of key \"k\" unexpected: read by op 7 but no add of it was ever attempted",
        ],
    );
    assert_eq!(evidence_indices(&r), [2, 7]);
}

#[test]
fn keys_are_separate_sets() {
    let mut h = H::new();
    h.add(0, "a", 1, "n1");
    h.read(1, "a", json!([1]), "n1");
    h.read(1, "b", json!([]), "n1");
    expect(&h.check(&SetFullChecker), Validity::Valid);
    h.read(1, "b", json!([1]), "n1");
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Invalid);
    mentions(&r, &["element 1 of key \"b\" unexpected"]);
}

#[test]
fn no_reads_is_unknown() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Unknown);
    mentions(&r, &["no ok read"]);
}

#[test]
fn latency_quantiles_use_nearest_rank() {
    // Elements 1..=4 acknowledged at once; each becomes visible one read later.
    let mut h = H::new();
    for e in 1..=4 {
        h.add(0, "k", e, "n1");
    }
    // Acks at ms 1, 3, 5, 7; reads invoked at 8, 10, 12, 14 show 1, 1-2, 1-3, 1-4.
    for n in 1..=4 {
        let v: Vec<i64> = (1..=n).collect();
        h.read(1, "k", json!(v), "n1");
    }
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Valid);
    let q = &r.details["stable_latency_ms"];
    // Latencies: 8-1=7, 10-3=7, 12-5=7, 14-7=7.
    assert_eq!(
        (q["p50"].clone(), q["max"].clone(), q["count"].clone()),
        (json!(7.0), json!(7.0), json!(4))
    );
    assert_eq!(r.details["stale_reads"], 3);
}

#[test]
fn an_element_both_committed_and_tentative_counts_once() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.read_ct(1, "k", &[1], &[1], "n1");
    let r = h.check(&SetFullChecker);
    expect(&r, Validity::Valid);
    assert_eq!(r.details["stable"], 1);
    assert_eq!(r.details["stale_reads"], 0);
}
