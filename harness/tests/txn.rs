//! End-to-end runs against the bundled 2PC database (`splitbrain-txn`): real node
//! processes on loopback, checked by the Elle-style and bank checkers. Each run is
//! bounded in time and leaves no process behind.

use serde_json::Value;
use std::path::Path;

mod support;

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
