//! End-to-end runs against the bundled 2PC database (`splitbrain-txn`): real node
//! processes on loopback, checked by the Elle-style and bank checkers. Each run is
//! bounded in time and leaves no process behind.

use serde_json::Value;
use std::path::Path;

use crate::support;

/// Runs `splitbrain test --target txn --nodes 3 ARGS` in a fresh store.
fn run_txn(args: &[&str]) -> (Option<i32>, Value, tempfile::TempDir) {
    support::run_target("txn", 3, args)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn ok_txns(store: &Path) -> usize {
    let history = std::fs::read_to_string(store.join("latest/history.jsonl")).unwrap();
    history
        .lines()
        .filter(|l| l.contains(r#""type":"ok""#) && l.contains(r#""f":"txn""#))
        .count()
}

#[test]
fn serializable_list_append_stays_strict_serializable_under_kills_and_partitions() {
    let (code, results, store) = run_txn(&[
        "--workload",
        "list-append",
        "--nemesis",
        "partition,kill",
        "--nemesis-interval",
        "2",
        "--time-limit",
        "8",
        "--seed",
        "11",
    ]);
    assert_eq!(code, Some(0), "{results:#}");
    assert_eq!(results["results"][0]["checker"], "elle-list-append");
    assert_eq!(results["results"][0]["valid"], true);
    assert!(ok_txns(store.path()) > 50, "too few committed transactions");
}

#[test]
fn bank_opens_accounts_once_and_conserves_money() {
    let (code, results, store) = run_txn(&[
        "--workload",
        "bank",
        "--nemesis",
        "kill",
        "--time-limit",
        "6",
        "--seed",
        "5",
    ]);
    assert_eq!(code, Some(0), "{results:#}");
    let history = std::fs::read_to_string(store.path().join("latest/history.jsonl")).unwrap();
    // The setup transaction ran first, under its own process, and succeeded.
    let setup: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|op| op["process"].as_u64().is_some_and(|p| p >= 2_000_000))
        .collect();
    assert!(setup.iter().any(|op| op["type"] == "ok"), "{setup:?}");
    let reads: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|op| op["type"] == "ok" && op["f"] == "read")
        .collect();
    assert!(reads.len() > 20, "too few reads: {}", reads.len());
    for r in &reads {
        let total: i64 = r["value"]
            .as_object()
            .unwrap()
            .values()
            .map(|b| b.as_i64().unwrap())
            .sum();
        assert_eq!(total, 80, "{r}");
    }
}

#[test]
fn dirty_reads_are_named_as_g1_and_rule_out_read_committed() {
    let (code, results, _store) = run_txn(&[
        "--workload",
        "list-append",
        "--bug",
        "dirty-read",
        "--rate",
        "0",
        "--nemesis",
        "none",
        "--time-limit",
        "8",
        "--seed",
        "2",
    ]);
    assert_eq!(code, Some(1), "{results:#}");
    let r = &results["results"][0];
    let types = strings(&r["anomaly_types"]);
    assert!(
        types.iter().any(|t| t.starts_with("G1")),
        "expected a G1 anomaly, got {types:?}"
    );
    assert!(
        strings(&r["not"]).contains(&"read-committed".to_string()),
        "{r:#}"
    );
}

#[test]
fn read_committed_mode_never_shows_what_read_committed_forbids() {
    let (code, results, store) = run_txn(&[
        "--workload",
        "list-append",
        "--read-mode",
        "read-committed",
        "--consistency-model",
        "read-committed",
        "--rate",
        "0",
        "--nemesis",
        "kill",
        "--time-limit",
        "8",
        "--seed",
        "4",
    ]);
    assert_eq!(code, Some(0), "{results:#}");
    assert!(ok_txns(store.path()) > 50, "too few committed transactions");
}

/// Money the bank lost or made: the bank checker's verdict must be invalid with
/// `wrong-total` among its anomalies.
fn assert_wrong_total(code: Option<i32>, results: &Value) {
    assert_eq!(code, Some(1), "{results:#}");
    let bank = support::checker(results, "bank");
    assert_eq!(bank["valid"], false, "{bank:#}");
    assert!(
        strings(&bank["anomaly_types"]).contains(&"wrong-total".to_string()),
        "{bank:#}"
    );
}

/// Runs the bank for 8 s on 3 nodes (`bugs` enabled) under a fixed fault plan slowing
/// every link by 30 ms (±5) from 1 s to 6 s into the run: a vote and its decision then take
/// longer than n1's in-doubt timeout, not the others'. A fixed plan, so the slow links are
/// there whatever the seed.
fn bank_under_slow_links(bugs: &[&str]) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("slow.json");
    std::fs::write(
        &plan,
        r#"[{"at_ms": 1000, "for_ms": 5000, "f": "slow", "nodes": ["n1", "n2", "n3"],
            "delay_ms": 30, "jitter_ms": 5}]"#,
    )
    .unwrap();
    let plan = plan.display().to_string();
    let mut args = vec!["--workload", "bank", "--nemesis-plan", &plan];
    args.extend(["--time-limit", "8", "--seed", "2"]);
    for bug in bugs {
        args.extend(["--bug", bug]);
    }
    let (code, results, _store) = run_txn(&args);
    (code, results)
}

/// `early-lock-release` (README, Bugs): a participant frees an account at its yes vote and
/// the next writer adds to the balance from before the first commit — a lost update. The
/// bank's hot account makes transfers queue behind each other at once, so a short run
/// without faults shows it at any machine speed.
#[test]
fn early_lock_release_loses_a_transfer_on_the_hot_account() {
    let (code, results, _store) = run_txn(&[
        "--workload",
        "bank",
        "--bug",
        "early-lock-release",
        "--nemesis",
        "none",
        "--time-limit",
        "8",
        "--seed",
        "3",
    ]);
    assert_wrong_total(code, &results);
}

/// `unilateral-abort` (README, Bugs): n1 gives up on the decision before a slow link
/// delivers it while the other participant waits, and the transfer commits at one account
/// only.
#[test]
fn unilateral_abort_on_a_slow_decision_path_splits_a_transfer() {
    let (code, results) = bank_under_slow_links(&["unilateral-abort"]);
    assert_wrong_total(code, &results);
}

/// The same slow links leave the correct mode's bank whole: a participant that hears no
/// decision asks and waits, it does not decide alone.
#[test]
fn correct_participants_wait_out_a_slow_decision_path() {
    let (code, results) = bank_under_slow_links(&[]);
    assert_eq!(code, Some(0), "{results:#}");
}
