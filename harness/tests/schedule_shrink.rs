//! `splitbrain shrink RUN_DIR` against a live cluster: a stored failing run of a bundled
//! bug is replayed with smaller fault plans and lighter runs, bounded by `--budget`, and
//! leaves its reproduction in `RUN_DIR/shrunk/`.

use serde_json::Value;
use std::process::Command;

use crate::support;

#[test]
fn a_txn_bug_that_needs_no_fault_shrinks_to_an_empty_plan_and_a_minimal_history() {
    // early-lock-release breaks a bank total without any fault (suite quick finds it in
    // 0.1 s); the run had a fault every second or so.
    let (code, results, store) = support::run_target(
        "txn",
        3,
        &[
            "--workload",
            "bank",
            "--bug",
            "early-lock-release",
            "--nemesis",
            "partition,kill",
            "--nemesis-interval",
            "1",
            "--time-limit",
            "4",
            "--seed",
            "5",
        ],
    );
    assert_eq!(code, Some(1), "{results:#}");
    let run = std::fs::canonicalize(store.path().join("latest")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .arg("shrink")
        .arg(&run)
        .args(["--anomaly", "wrong-total"])
        .args(["--budget", "150", "--replays", "2", "--confirm", "2"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let shrunk = run.join("shrunk");
    let schedule: Value =
        serde_json::from_slice(&std::fs::read(shrunk.join("schedule.json")).unwrap()).unwrap();
    assert!(
        schedule["events_before"].as_u64().unwrap() >= 2,
        "{schedule:#}"
    );
    assert_eq!(schedule["events_after"], 0, "{schedule:#}");
    assert_eq!(schedule["steps"][0]["phase"], "no faults", "{schedule:#}");
    assert!(
        schedule["time_limit_s_after"].as_f64().unwrap() <= 4.0,
        "{schedule:#}"
    );
    assert!(schedule["replay_rate"]["failed"].as_u64().unwrap() >= 1);
    assert!(
        schedule["seconds"].as_f64().unwrap() <= 150.0,
        "{schedule:#}"
    );
    let plan: Value =
        serde_json::from_slice(&std::fs::read(shrunk.join("plan.json")).unwrap()).unwrap();
    assert_eq!(plan, serde_json::json!([]));
    let command = std::fs::read_to_string(shrunk.join("command.txt")).unwrap();
    for needle in [
        "--target txn",
        "--bug early-lock-release",
        "--nemesis-plan",
        "--seed 5",
    ] {
        assert!(command.contains(needle), "{command}");
    }
    // The history shrink of the last failing replay sits beside it.
    let history = std::fs::read_to_string(shrunk.join("history.jsonl")).unwrap();
    let ops_before = schedule["history_ops_before"].as_u64().unwrap() as usize;
    assert!(history.lines().count() < ops_before, "{schedule:#}");
    assert!(stdout.contains("step"), "{stdout}");
    let report = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(report.contains("Shrunk reproduction"));
    assert!(
        support::no_process_mentions(store.path()),
        "node processes outlived the replays"
    );
}
