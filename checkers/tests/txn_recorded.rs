//! Ground truth from a real system: histories recorded from the bundled two-phase-commit
//! database (`targets/txn`) in its correct mode, its read-committed mode and with each
//! of its bugs (see `tests/data/txn/README.md` for how each was recorded).

use splitbrain_checkers::bank::{BankChecker, BankOptions};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::{CheckResult, Checker, Validity};
use std::path::Path;

fn check_append(file: &str, model: &str) -> CheckResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/txn")
        .join(file);
    let history = read_path(&path).unwrap();
    let opts = ElleOptions {
        consistency_model: model.to_string(),
        ..ElleOptions::default()
    };
    ElleChecker::new(ElleWorkload::ListAppend, opts)
        .unwrap()
        .check(&history)
}

fn has(r: &CheckResult, anomaly: &str) -> bool {
    r.anomaly_types.iter().any(|t| t == anomaly)
}

#[test]
fn correct_mode_under_kills_and_partitions_is_strict_serializable() {
    let r = check_append("correct-append.jsonl", "strict-serializable");
    assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
    assert!(r.details["transactions"].as_u64().unwrap() > 200);
}

#[test]
fn read_committed_mode_keeps_read_committed_and_nothing_stronger() {
    let rc = check_append("read-committed.jsonl", "read-committed");
    assert_eq!(rc.valid, Validity::Valid, "{}", rc.explanation);
    let ser = check_append("read-committed.jsonl", "serializable");
    assert_eq!(ser.valid, Validity::Invalid);
    assert!(
        has(&ser, "G-single-item") || has(&ser, "G2-item"),
        "{:?}",
        ser.anomaly_types
    );
    // Read committed forbids every G0 and G1 anomaly: none may appear.
    assert!(
        !ser.anomaly_types
            .iter()
            .any(|t| t.starts_with("G0") || t.starts_with("G1")),
        "{:?}",
        ser.anomaly_types
    );
    assert!(!ser
        .not
        .iter()
        .any(|m| m == "read-committed" || m == "read-uncommitted"));
}

#[test]
fn dirty_reads_are_aborted_and_intermediate_reads() {
    let r = check_append("dirty-read.jsonl", "read-committed");
    assert_eq!(r.valid, Validity::Invalid);
    assert!(has(&r, "G1a") && has(&r, "G1b"), "{:?}", r.anomaly_types);
    assert_eq!(r.not, vec!["read-committed".to_string()]);
    // The headline and evidence are the most severe anomaly, not the first by name.
    assert!(
        r.explanation.contains("Most severe, G1"),
        "{}",
        r.explanation
    );
    let ru = check_append("dirty-read.jsonl", "read-uncommitted");
    assert_eq!(ru.valid, Validity::Valid, "{}", ru.explanation);
}

#[test]
fn a_forgotten_prepare_breaks_even_read_uncommitted() {
    let r = check_append("no-prepare-fsync.jsonl", "read-uncommitted");
    assert_eq!(r.valid, Validity::Invalid);
    assert!(has(&r, "G0"), "{:?}", r.anomaly_types);
    assert!(r.not.iter().any(|m| m == "read-uncommitted"), "{:?}", r.not);
    assert!(
        r.explanation.contains("Most severe, G0"),
        "{}",
        r.explanation
    );
}

#[test]
fn a_unilateral_abort_leaves_a_partial_commit() {
    let r = check_append("unilateral-abort-append.jsonl", "strict-serializable");
    assert_eq!(r.valid, Validity::Invalid);
    assert!(has(&r, "G0-realtime"), "{:?}", r.anomaly_types);
}

#[test]
fn early_lock_release_loses_money() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/txn/early-lock-release-bank.jsonl");
    let history = read_path(&path).unwrap();
    let r = BankChecker::new(BankOptions {
        total: Some(80),
        negative_allowed: false,
    })
    .check(&history);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(has(&r, "wrong-total"), "{:?}", r.anomaly_types);
}
