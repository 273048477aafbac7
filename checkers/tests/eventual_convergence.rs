//! Convergence checker: hand-made histories, each violation next to a valid history that
//! differs minimally (contract "History shapes": final reads after the quiescence point).

use crate::eventual_support;

use eventual_support::{evidence_indices, expect, mentions, H};
use serde_json::json;
use splitbrain_checkers::eventual::{ConvergenceChecker, EventualDataType};
use splitbrain_checkers::history::OpType;
use splitbrain_checkers::Validity;

fn set() -> ConvergenceChecker {
    ConvergenceChecker::new(EventualDataType::Set)
}

/// Adds 1 (n1) and 2 (n2) on k, a partition heals, then final reads from n1..n3 whose
/// values are given (committed, tentative).
fn set_history(finals: [(&[i64], &[i64]); 3]) -> H {
    let mut h = H::new();
    h.nemesis("start-partition");
    h.add(0, "k", 1, "n1");
    h.add(1, "k", 2, "n2");
    h.read_ct(2, "k", &[], &[1], "n3");
    h.nemesis("stop-partition");
    for (i, (c, t)) in finals.iter().enumerate() {
        h.read_ct(3, "k", c, t, &format!("n{}", i + 1));
    }
    h
}

#[test]
fn agreeing_final_reads_are_valid_and_report_the_time_to_converge() {
    let h = set_history([(&[1, 2], &[]), (&[1, 2], &[]), (&[1, 2], &[])]);
    let r = h.check(&set());
    expect(&r, Validity::Valid);
    // Quiescence point: the stop-partition op at position 7 (7 ms); the last replica's
    // first agreeing final read completes at 13 ms.
    assert_eq!(r.details["quiescence"]["index"], 7);
    assert_eq!(r.details["convergence_ms"]["max"], json!(6.0));
    assert_eq!(r.details["convergence_ms"]["per_key"]["k"], json!(6.0));
    assert_eq!(r.details["final_reads"], 3);
}

#[test]
fn time_to_converge_waits_for_the_last_replica_to_settle() {
    let mut h = set_history([(&[1, 2], &[]), (&[1, 2], &[]), (&[1], &[2])]);
    // n3 catches up in a second round.
    h.read_ct(3, "k", &[1, 2], &[], "n3");
    let r = h.check(&set());
    expect(&r, Validity::Valid);
    assert_eq!(r.details["convergence_ms"]["max"], json!(8.0));
}

#[test]
fn the_same_writes_in_another_commit_order_or_still_tentative_have_not_converged() {
    // Bayou's committed order is final and shared (Terry et al., SOSP 1995 §4.3).
    let r = set_history([(&[1, 2], &[]), (&[1, 2], &[]), (&[2, 1], &[])]).check(&set());
    expect(&r, Validity::Invalid);
    mentions(
        &r,
        &["same writes, committed in another order: committed position 0 holds 2 at n3 (op 13) but 1 at n1 (op 9), n2 (op 11)"],
    );
    let r = set_history([(&[1, 2], &[]), (&[1, 2], &[]), (&[1], &[2])]).check(&set());
    expect(&r, Validity::Invalid);
    mentions(
        &r,
        &["has committed [2] that n3 (op 13) still holds as tentative"],
    );
}

#[test]
fn replicas_that_disagree_are_named_with_the_difference() {
    let h = set_history([(&[1, 2], &[]), (&[1, 2], &[]), (&[1], &[7])]);
    let r = h.check(&set());
    expect(&r, Validity::Invalid);
    mentions(
        &r,
        &[
            "key \"k\"",
            "n3 (op 13) has [7] that n1 (op 9), n2 (op 11) lacks",
            "n1 (op 9), n2 (op 11) has [2] that n3 (op 13) lacks",
        ],
    );
    assert!(r.anomaly_types.contains(&"divergent".to_string()));
    let ix = evidence_indices(&r);
    assert!(ix.contains(&13) && ix.contains(&9), "{ix:?}");
}

#[test]
fn an_acknowledged_add_missing_everywhere_is_lost() {
    let h = set_history([(&[1], &[]), (&[1], &[]), (&[1], &[])]);
    let r = h.check(&set());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["lost"]);
    mentions(&r, &["2 (op 3)"]);
}

#[test]
fn an_element_never_attempted_is_unexpected_and_a_failed_one_too() {
    let h = set_history([(&[1, 2, 9], &[]), (&[1, 2, 9], &[]), (&[1, 2, 9], &[])]);
    let r = h.check(&set());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["unexpected"]);
    mentions(&r, &["[9]"]);

    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.add_ending(1, "k", 5, "n1", OpType::Fail);
    h.read_ct(2, "k", &[1, 5], &[], "n1");
    let r = h.check(&set());
    expect(&r, Validity::Invalid);
    mentions(&r, &["only by a failed update", "[5]"]);
    // The same read without the failed element is valid.
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.add_ending(1, "k", 5, "n1", OpType::Fail);
    h.read_ct(2, "k", &[1], &[], "n1");
    expect(&h.check(&set()), Validity::Valid);
}

#[test]
fn an_indeterminate_add_may_or_may_not_be_present() {
    for present in [true, false] {
        let mut h = H::new();
        h.add(0, "k", 1, "n1");
        h.add_ending(1, "k", 2, "n2", OpType::Info);
        let v: &[i64] = if present { &[1, 2] } else { &[1] };
        h.read_ct(2, "k", v, &[], "n1");
        h.read_ct(2, "k", v, &[], "n2");
        expect(&h.check(&set()), Validity::Valid);
    }
}

#[test]
fn plain_list_reads_compare_as_sets() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.add(1, "k", 2, "n2");
    h.read(2, "k", json!([2, 1]), "n1");
    h.read(2, "k", json!([1, 2]), "n2");
    expect(&h.check(&set()), Validity::Valid);
    h.read(2, "k", json!([1]), "n2");
    let r = h.check(&set());
    expect(&r, Validity::Invalid);
    mentions(&r, &["n1 (op 5) has [2] that n2 (op 9) lacks"]);
    assert!(!r.explanation.contains("n2 (op 9) has"));
}

#[test]
fn no_final_reads_is_unknown_with_the_reason() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.read_ct(1, "k", &[1], &[], "n1");
    h.add(0, "k", 2, "n2");
    let r = h.check(&set());
    expect(&r, Validity::Unknown);
    mentions(
        &r,
        &[
            "final reads missing",
            "no ok final read",
            "quiescence point (op 5)",
        ],
    );
}

#[test]
fn a_replica_without_a_final_read_makes_it_unknown() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.add(1, "k", 2, "n3");
    h.read_ct(2, "k", &[1, 2], &[], "n1");
    h.read_ct(2, "k", &[1, 2], &[], "n2");
    let r = h.check(&set());
    expect(&r, Validity::Unknown);
    mentions(&r, &["n3", "no ok final read"]);
    // A failed final read from n3 does not count either.
    let mut g = h.clone();
    g.invoke(4, "read", "k", json!(null));
    g.complete(4, OpType::Fail, "read", "k", json!(null), "n3");
    expect(&g.check(&set()), Validity::Unknown);
    h.read_ct(2, "k", &[1, 2], &[], "n3");
    expect(&h.check(&set()), Validity::Valid);
}

#[test]
fn keys_converge_independently() {
    let mut h = H::new();
    h.add(0, "a", 1, "n1");
    h.add(0, "b", 1, "n2");
    h.read_ct(1, "a", &[1], &[], "n1");
    h.read_ct(1, "a", &[1], &[], "n2");
    h.read_ct(1, "b", &[1], &[], "n1");
    h.read_ct(1, "b", &[], &[], "n2");
    let r = h.check(&set());
    expect(&r, Validity::Invalid);
    mentions(
        &r,
        &["key \"b\"", "n1 (op 9) has [1] that n2 (op 11) lacks"],
    );
    assert!(!r.explanation.contains("key \"a\""));
}

fn counter() -> ConvergenceChecker {
    ConvergenceChecker::new(EventualDataType::Counter)
}

fn counter_history(finals: [i64; 2]) -> H {
    let mut h = H::new();
    h.invoke(0, "add", "c", json!(3));
    h.complete(0, OpType::Ok, "add", "c", json!(3), "n1");
    h.invoke(1, "add", "c", json!(4));
    h.complete(1, OpType::Info, "add", "c", json!(4), "n2");
    h.read(2, "c", json!(finals[0]), "n1");
    h.read(2, "c", json!(finals[1]), "n2");
    h
}

#[test]
fn counters_lie_between_acknowledged_and_possible_sums() {
    expect(&counter_history([3, 3]).check(&counter()), Validity::Valid);
    expect(&counter_history([7, 7]).check(&counter()), Validity::Valid);
    let r = counter_history([2, 2]).check(&counter());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["lost"]);
    mentions(&r, &["final value 2", "below 3"]);
    let r = counter_history([8, 8]).check(&counter());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["unexpected"]);
    mentions(&r, &["exceeds 7"]);
    let r = counter_history([3, 7]).check(&counter());
    expect(&r, Validity::Invalid);
    mentions(&r, &["n2 (op 7) reads 7 where n1 (op 5) reads 3"]);
}

/// A PN-counter (Maelstrom's `pn-counter`): acknowledged +5 and -2, an indeterminate -3
/// and an indeterminate +4, so a final value may lie anywhere in 3 - 3 ..= 3 + 4.
fn pn_counter_history(finals: [i64; 2]) -> H {
    let mut h = H::new();
    h.invoke(0, "add", "", json!(5));
    h.complete(0, OpType::Ok, "add", "", json!(5), "n1");
    h.invoke(1, "add", "", json!(-2));
    h.complete(1, OpType::Ok, "add", "", json!(-2), "n2");
    h.invoke(2, "add", "", json!(-3));
    h.complete(2, OpType::Info, "add", "", json!(-3), "n1");
    h.invoke(3, "add", "", json!(4));
    h.complete(3, OpType::Info, "add", "", json!(4), "n2");
    h.read(4, "", json!(finals[0]), "n1");
    h.read(4, "", json!(finals[1]), "n2");
    h
}

#[test]
fn pn_counters_widen_each_bound_by_the_indeterminate_deltas_of_its_sign() {
    for ok in [0, 3, 7] {
        expect(
            &pn_counter_history([ok, ok]).check(&counter()),
            Validity::Valid,
        );
    }
    let r = pn_counter_history([-1, -1]).check(&counter());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["lost"]);
    mentions(&r, &["below 0"]);
    let r = pn_counter_history([8, 8]).check(&counter());
    expect(&r, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["unexpected"]);
    mentions(&r, &["exceeds 7"]);
}

#[test]
fn booking_schedules_compare_by_rows() {
    let booking = ConvergenceChecker::new(EventualDataType::Booking);
    let mut h = H::new();
    h.book(0, "s", 1, json!([[1, 1]]), "n1");
    h.book(1, "s", 2, json!([[1, 1], [1, 2]]), "n2");
    let good = json!({"committed": [1, 2], "tentative": [], "schedule": [[1, 1, 1], [2, 1, 2]]});
    h.read(2, "s", good.clone(), "n1");
    let mut g = h.clone();
    // The same schedule with its rows in another order.
    g.read(
        2,
        "s",
        json!({"committed": [1, 2], "tentative": [], "schedule": [[2, 1, 2], [1, 1, 1]]}),
        "n2",
    );
    expect(&g.check(&booking), Validity::Valid);
    h.read(
        2,
        "s",
        json!({"committed": [2, 1], "tentative": [], "schedule": [[2, 1, 1], [1, null, null]]}),
        "n2",
    );
    let r = h.check(&booking);
    expect(&r, Validity::Invalid);
    mentions(
        &r,
        &["n2 (op 7) has rows [1->rejected, 2->(1, 1)] that n1 (op 5) lacks"],
    );
}

#[test]
fn results_name_ops_by_the_history_s_own_index() {
    // A history recorded elsewhere, whose ops carry indices 100, 101, ...
    let mut h = set_history([(&[1, 2], &[]), (&[1, 2], &[]), (&[1], &[7])]);
    for (i, op) in h.ops.iter_mut().enumerate() {
        op.index = 100 + i as u64;
    }
    let r = h.check(&set());
    expect(&r, Validity::Invalid);
    mentions(
        &r,
        &["n3 (op 113) has [7] that n1 (op 109), n2 (op 111) lacks"],
    );
    assert!(evidence_indices(&r).contains(&113));
}

#[test]
fn a_history_without_nodes_is_one_replica() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.read(1, "k", json!([1]), "n1");
    for op in &mut h.ops {
        op.node = None;
    }
    let r = h.check(&set());
    expect(&r, Validity::Valid);
    assert_eq!(r.details["final_reads"], 1);
}

#[test]
fn an_unreadable_read_value_is_unknown_not_valid() {
    let mut h = H::new();
    h.add(0, "k", 1, "n1");
    h.read(1, "k", json!([1]), "n1");
    h.read(1, "k", json!({"elements": [1]}), "n1");
    let r = h.check(&set());
    expect(&r, Validity::Unknown);
    mentions(
        &r,
        &["could not be read, e.g. op 5", "not a set read value"],
    );
}
