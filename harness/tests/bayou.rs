//! End-to-end runs against the bundled Bayou replica group (`splitbrain-bayou`): real
//! replica processes on loopback, final reads at every replica, judged by the
//! eventual-consistency checkers. Each run is bounded in time and leaves no process behind.

use serde_json::Value;
use std::path::Path;

use crate::support;
use splitbrain::run::converge::FINAL_READ_PROCESS_BASE;
use support::checker;

/// Runs `splitbrain test --target bayou --nodes 3 ARGS` in a fresh store.
fn run_bayou(args: &[&str]) -> (Option<i32>, Value, tempfile::TempDir) {
    support::run_target("bayou", 3, args)
}

/// Ok final reads (process ids from `FINAL_READ_PROCESS_BASE` up) in the run's history, and the replicas
/// they came from.
fn final_reads(store: &Path) -> (usize, std::collections::BTreeSet<String>) {
    let history = std::fs::read_to_string(store.join("latest/history.jsonl")).unwrap();
    let mut nodes = std::collections::BTreeSet::new();
    let mut n = 0;
    for line in history.lines() {
        let op: Value = serde_json::from_str(line).unwrap();
        let p = op["process"].as_u64().unwrap_or(0);
        if (FINAL_READ_PROCESS_BASE..2 * FINAL_READ_PROCESS_BASE).contains(&p) && op["type"] == "ok"
        {
            n += 1;
            nodes.insert(op["node"].as_str().unwrap_or("?").to_string());
        }
    }
    (n, nodes)
}

#[test]
fn correct_set_converges_under_partitions_and_kills() {
    let (code, results, store) = run_bayou(&[
        "--workload",
        "set",
        "--nemesis",
        "partition,kill",
        "--nemesis-interval",
        "2",
        "--time-limit",
        "8",
        "--seed",
        "3",
    ]);
    assert_eq!(code, Some(0), "{results:#}");
    for name in [
        "convergence",
        "set-full",
        "committed-prefix",
        "session-guarantees",
    ] {
        assert_eq!(
            checker(&results, name)["valid"],
            true,
            "{name}: {results:#}"
        );
    }
    let (n, nodes) = final_reads(store.path());
    assert!(n >= 3, "final reads were made");
    assert_eq!(
        nodes.len(),
        3,
        "every replica was read at the end: {nodes:?}"
    );
}

#[test]
fn stale_commit_sync_never_converges_and_is_found() {
    let (code, results, _store) = run_bayou(&[
        "--workload",
        "set",
        "--bug",
        "stale-commit-sync",
        "--nemesis",
        "none",
        "--time-limit",
        "5",
        "--seed",
        "2",
    ]);
    assert_eq!(code, Some(1), "{results:#}");
    assert_eq!(
        checker(&results, "convergence")["valid"],
        false,
        "{results:#}"
    );
}

#[test]
fn stale_session_breaks_session_guarantees() {
    let (code, results, _store) = run_bayou(&[
        "--workload",
        "set",
        "--bug",
        "stale-session",
        "--nemesis",
        "partition",
        "--nemesis-interval",
        "2",
        "--time-limit",
        "8",
        "--seed",
        "4",
    ]);
    assert_eq!(code, Some(1), "{results:#}");
    assert_eq!(
        checker(&results, "session-guarantees")["valid"],
        false,
        "{results:#}"
    );
}

#[test]
fn booking_workload_is_valid_in_correct_mode() {
    let (code, results, _store) = run_bayou(&[
        "--workload",
        "booking",
        "--nemesis",
        "partition",
        "--time-limit",
        "6",
        "--seed",
        "8",
    ]);
    assert_eq!(code, Some(0), "{results:#}");
    assert_eq!(checker(&results, "booking")["valid"], true, "{results:#}");
}

/// A set history from elsewhere (two replicas, final reads after the last add, the first
/// one in Bayou's shape, the second as given).
fn set_history(final_n2: &str) -> String {
    [
        r#"{"index":0,"process":0,"type":"invoke","f":"add","value":1}"#,
        r#"{"index":1,"process":0,"type":"ok","f":"add","value":1,"node":"n1"}"#,
        r#"{"index":2,"process":1,"type":"invoke","f":"add","value":2}"#,
        r#"{"index":3,"process":1,"type":"ok","f":"add","value":2,"node":"n2"}"#,
        r#"{"index":4,"process":"nemesis","type":"info","f":"heal","value":null}"#,
        r#"{"index":5,"process":0,"type":"invoke","f":"read","value":null}"#,
        r#"{"index":6,"process":0,"type":"ok","f":"read","value":{"committed":[1],"tentative":[2]},"node":"n1"}"#,
        r#"{"index":7,"process":1,"type":"invoke","f":"read","value":null}"#,
        &format!(
            r#"{{"index":8,"process":1,"type":"ok","f":"read","value":{final_n2},"node":"n2"}}"#
        ),
    ]
    .join("\n")
}

#[test]
fn check_infers_a_set_history_from_elsewhere_and_judges_convergence() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, text: String, extra: &[&str]| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitbrain"))
            .arg("check")
            .arg(&path)
            .args(["--format", "json"])
            .args(extra)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), v)
    };
    let same = r#"{"committed":[1],"tentative":[2]}"#;
    let (code, v) = run("ok.jsonl", set_history(same), &[]);
    assert_eq!(code, Some(0), "{v:#}");
    for name in ["convergence", "set-full", "committed-prefix"] {
        assert_eq!(checker(&v, name)["valid"], true, "{name}: {v:#}");
    }
    // Element 2 was acknowledged at n2, but n2's final read lost it.
    let lost = r#"{"committed":[1],"tentative":[]}"#;
    let (code, v) = run("lost.jsonl", set_history(lost), &[]);
    assert_eq!(code, Some(1), "{v:#}");
    assert_eq!(checker(&v, "convergence")["valid"], false, "{v:#}");
    // Jepsen's plain-list reads, one checker by name.
    let (code, v) = run(
        "plain.jsonl",
        set_history("[1]"),
        &["--checker", "convergence"],
    );
    assert_eq!(code, Some(1), "{v:#}");
    assert_eq!(v["results"].as_array().map(Vec::len), Some(1));
}
