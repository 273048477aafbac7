//! Bank checker: conserved totals, negative balances, nil balances.

use serde_json::{json, Value};
use splitbrain_checkers::bank::{BankChecker, BankOptions};
use splitbrain_checkers::history::{History, Op, OpType, Process};
use splitbrain_checkers::{Checker, Validity};

fn history(reads: &[Value]) -> History {
    let mut ops = Vec::new();
    ops.push(Op::new(
        Process::Client(0),
        OpType::Invoke,
        "transfer",
        json!({"from": 0, "to": 1, "amount": 5}),
    ));
    ops.push(Op::new(
        Process::Client(0),
        OpType::Ok,
        "transfer",
        json!({"from": 0, "to": 1, "amount": 5}),
    ));
    for r in reads {
        ops.push(Op::new(
            Process::Client(1),
            OpType::Invoke,
            "read",
            Value::Null,
        ));
        ops.push(Op::new(Process::Client(1), OpType::Ok, "read", r.clone()));
    }
    History::new(ops).expect("well-formed")
}

#[test]
fn conserved_total_is_valid() {
    let h = history(&[json!({"0": 10, "1": 10}), json!({"0": 5, "1": 15})]);
    let r = BankChecker::new(BankOptions {
        total: Some(20),
        negative_allowed: false,
    })
    .check(&h);
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
    assert_eq!(r.details["reads"], 2);
    assert_eq!(r.details["transfers"], 1);
}

#[test]
fn wrong_total_and_negative_are_named() {
    let h = history(&[
        json!({"0": 10, "1": 10}),
        json!({"0": 5, "1": 10}),
        json!({"0": -5, "1": 25}),
    ]);
    let r = BankChecker::new(BankOptions {
        total: None,
        negative_allowed: false,
    })
    .check(&h);
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["negative-value", "wrong-total"]);
    assert_eq!(r.details["errors"]["wrong-total"]["count"], 1);
    assert_eq!(
        r.details["errors"]["wrong-total"]["instances"][0]["total"],
        15
    );
    assert_eq!(r.evidence.len(), 2);
    assert!(
        r.explanation.contains("did not sum to 20"),
        "{}",
        r.explanation
    );
    let allowed = BankChecker::new(BankOptions {
        total: Some(20),
        negative_allowed: true,
    })
    .check(&h);
    assert_eq!(allowed.anomaly_types, ["wrong-total"]);
}

#[test]
fn nil_balance_and_no_reads() {
    let h = history(&[json!({"0": 10, "1": null})]);
    let r = BankChecker::new(BankOptions::default()).check(&h);
    assert_eq!(r.anomaly_types, ["nil-balance"]);
    let r = BankChecker::new(BankOptions::default()).check(&history(&[]));
    assert_eq!(r.valid, Validity::Unknown);
}

#[test]
fn transfers_without_an_ok_read_are_unknown() {
    let r = BankChecker::new(BankOptions::default()).check(&history(&[]));
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert_eq!(r.coverage.get("reads"), Some(0));
    assert_eq!(r.coverage.get("transfers"), Some(1));
}

#[test]
fn a_read_that_is_not_a_map_of_balances_is_reported_not_skipped() {
    let h = history(&[json!({"0": 10, "1": 10}), json!("garbage")]);
    let r = BankChecker::new(BankOptions::default()).check(&h);
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(r.explanation.contains("not a map"), "{}", r.explanation);
    assert_eq!(r.coverage.get("malformed reads"), Some(1));
}
