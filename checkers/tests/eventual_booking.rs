//! Booking checker: Bayou's meeting-room scheduler (Terry et al., SOSP 1995 §3, dependency
//! check and merge procedure). Each unsound schedule next to the sound one.

use crate::eventual_support;

use eventual_support::{evidence_indices, expect, mentions, H};
use serde_json::{json, Value};
use splitbrain_checkers::eventual::BookingChecker;
use splitbrain_checkers::Validity;

/// Reservations 1 ([1,1]), 2 ([1,1] then [1,2]) and 3 (`alts3`), all acknowledged (book
/// ops at positions 0, 2, 4), then final reads from n1 and n2 showing `read`.
fn history(alts3: Value, read: Value) -> H {
    let mut h = H::new();
    h.book(0, "s", 1, json!([[1, 1]]), "n1");
    h.book(1, "s", 2, json!([[1, 1], [1, 2]]), "n2");
    h.book(2, "s", 3, alts3, "n1");
    h.read(3, "s", read.clone(), "n1");
    h.read(3, "s", read, "n2");
    h
}

fn sched(committed: &[i64], tentative: &[i64], rows: Value) -> Value {
    json!({"committed": committed, "tentative": tentative, "schedule": rows})
}

fn good() -> Value {
    sched(
        &[1, 2],
        &[3],
        json!([[1, 1, 1], [2, 1, 2], [3, null, null]]),
    )
}

#[test]
fn a_sound_converged_schedule_is_valid() {
    let r = history(json!([[1, 1]]), good()).check(&BookingChecker);
    expect(&r, Validity::Valid);
    assert_eq!(r.details["schedules_checked"], 1);
}

#[test]
fn a_slot_held_twice_is_a_double_booking() {
    let bad = sched(
        &[1, 2],
        &[3],
        json!([[1, 1, 1], [2, 1, 1], [3, null, null]]),
    );
    let r = history(json!([[1, 1]]), bad).check(&BookingChecker);
    expect(&r, Validity::Invalid);
    assert!(
        r.anomaly_types.contains(&"double-booking".to_string()),
        "{:?}",
        r.anomaly_types
    );
    mentions(&r, &["room 1 slot 1 is held by both reservation 1 and 2"]);
    let ix = evidence_indices(&r);
    assert!(
        ix.contains(&0) && ix.contains(&2) && ix.contains(&7),
        "{ix:?}"
    );
}

#[test]
fn an_acknowledged_reservation_missing_is_lost() {
    let bad = sched(&[1, 2], &[], json!([[1, 1, 1], [2, 1, 2]]));
    let r = history(json!([[1, 1]]), bad).check(&BookingChecker);
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["lost"]);
    mentions(&r, &["acknowledged reservation(s) 3 (op 4)"]);
}

#[test]
fn rejected_while_an_alternative_is_free_is_wrong() {
    let r = history(json!([[1, 1], [2, 2]]), good()).check(&BookingChecker);
    expect(&r, Validity::Invalid);
    assert!(r.anomaly_types.contains(&"wrongly-rejected".to_string()));
    mentions(&r, &["reservation 3 is rejected though its alternative room 2 slot 2 is held by no other reservation"]);
    // The replay also places it there.
    assert!(r.anomaly_types.contains(&"merge-mismatch".to_string()));
}

#[test]
fn a_slot_outside_the_alternatives_is_caught() {
    let bad = sched(
        &[1, 2],
        &[3],
        json!([[1, 1, 1], [2, 3, 3], [3, null, null]]),
    );
    let r = history(json!([[1, 1]]), bad).check(&BookingChecker);
    expect(&r, Validity::Invalid);
    assert!(r.anomaly_types.contains(&"not-an-alternative".to_string()));
    mentions(
        &r,
        &["reservation 2 holds room 3 slot 3, which is not among its alternatives"],
    );
}

#[test]
fn a_schedule_the_commit_order_does_not_replay_to_is_caught() {
    // Committed 2 before 1: the merge gives 2 the room first and rejects 1.
    let bad = sched(
        &[2, 1],
        &[3],
        json!([[1, 1, 1], [2, 1, 2], [3, null, null]]),
    );
    let r = history(json!([[1, 1]]), bad).check(&BookingChecker);
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["merge-mismatch"]);
    mentions(
        &r,
        &[
            "replaying its order",
            "gives 1->rejected, 2->(1, 1) but the schedule has 1->(1, 1), 2->(1, 2)",
        ],
    );
}

#[test]
fn a_reservation_never_attempted_is_unexpected() {
    let bad = sched(
        &[1, 2],
        &[3, 9],
        json!([[1, 1, 1], [2, 1, 2], [3, null, null], [9, 5, 5]]),
    );
    let r = history(json!([[1, 1]]), bad).check(&BookingChecker);
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["unexpected"]);
    mentions(
        &r,
        &["reservation(s) [9] were never successfully attempted"],
    );
}

#[test]
fn disagreeing_replicas_leave_it_unknown() {
    let mut h = history(json!([[1, 1]]), good());
    h.read(
        3,
        "s",
        sched(&[1], &[2], json!([[1, 1, 1], [2, 1, 2]])),
        "n2",
    );
    let r = h.check(&BookingChecker);
    expect(&r, Validity::Unknown);
    mentions(&r, &["final schedules disagree"]);
}

#[test]
fn missing_final_reads_leave_it_unknown() {
    let mut h = H::new();
    h.book(0, "s", 1, json!([[1, 1]]), "n1");
    h.book(1, "s", 2, json!([[1, 1]]), "n2");
    h.read(
        3,
        "s",
        sched(&[1, 2], &[], json!([[1, 1, 1], [2, null, null]])),
        "n1",
    );
    let r = h.check(&BookingChecker);
    expect(&r, Validity::Unknown);
    mentions(&r, &["n2", "no ok final read"]);
    h.read(
        3,
        "s",
        sched(&[1, 2], &[], json!([[1, 1, 1], [2, null, null]])),
        "n2",
    );
    expect(&h.check(&BookingChecker), Validity::Valid);
}

#[test]
fn a_final_read_without_a_schedule_is_unknown() {
    let r = history(json!([[1, 1]]), json!([1, 2, 3])).check(&BookingChecker);
    expect(&r, Validity::Unknown);
    mentions(&r, &["final read op 7 carries no schedule"]);
}
