//! End-to-end runs with `--stop-on-anomaly`: a bundled system's bug is found while the run
//! goes on, the run stops long before its time limit, and the final check of the whole
//! history confirms what the online check found; a correct system runs its course;
//! `--no-online-check` checks only at the end.

use serde_json::Value;
use std::time::{Duration, Instant};

use crate::support;

/// The main phase every run here asks for: far longer than any of these bugs takes to show.
const TIME_LIMIT_S: f64 = 60.0;

/// Runs `splitbrain test --target TARGET --nodes 3 --stop-on-anomaly ARGS` and returns
/// the exit code, results.json and the command's wall time.
fn run_stopping(target: &str, args: &[&str]) -> (Option<i32>, Value, Duration) {
    let limit = TIME_LIMIT_S.to_string();
    let mut all = vec!["--stop-on-anomaly", "--seed", "1", "--time-limit", &limit];
    all.extend_from_slice(args);
    let started = Instant::now();
    let (code, results, _store) = support::run_target(target, 3, &all);
    (code, results, started.elapsed())
}

/// The run found `checker` invalid online, stopped for it well before the time limit,
/// and its final check agrees.
fn assert_stopped_early_for(
    code: Option<i32>,
    results: &Value,
    wall: Duration,
    checker: &str,
    anomaly: Option<&str>,
) {
    assert_eq!(code, Some(1), "{results:#}");
    assert_eq!(results["valid"], false);
    let r = support::checker(results, checker);
    assert_eq!(r["valid"], false, "{r:#}");
    if let Some(a) = anomaly {
        assert!(
            r["anomaly_types"]
                .as_array()
                .is_some_and(|ts| ts.iter().any(|t| t == a)),
            "{r:#}"
        );
    }
    let why = results["stopped_early"].as_str().unwrap_or_else(|| {
        panic!("the run did not stop early: {results:#}");
    });
    assert!(why.contains(checker), "{why}");
    let known = results["first_known_at_s"][checker]
        .as_f64()
        .unwrap_or_else(|| panic!("no first_known_at_s for {checker}: {results:#}"));
    assert!(known < TIME_LIMIT_S, "known at {known} s");
    // The finding names its evidence, the span of the ops that make it: inside the run,
    // before it was known (`at 4.2 s (its ops 3.10-3.35 s)`).
    let ops = why
        .split("(its ops ")
        .nth(1)
        .and_then(|r| r.split(" s)").next())
        .unwrap_or_else(|| panic!("no evidence in {why}"));
    let (a, b) = ops
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse::<f64>().ok()?, b.parse::<f64>().ok()?)))
        .unwrap_or_else(|| panic!("evidence {ops} in {why}"));
    assert!(
        0.0 <= a && a <= b && b <= known + 0.05,
        "evidence {a}-{b}, known {known}: {why}"
    );
    // Generous: start, heal and check take seconds, the time limit is a minute.
    assert!(
        wall < Duration::from_secs_f64(TIME_LIMIT_S * 0.75),
        "the run took {wall:?}"
    );
    // No online finding the final check denied.
    assert!(
        results["results"]
            .as_array()
            .is_some_and(|rs| rs.iter().all(|r| r["checker"] != "online-check")),
        "{results:#}"
    );
}

#[test]
fn kv_stale_read_stops_the_run_at_the_first_stale_read() {
    let (code, results, wall) = run_stopping(
        "kv",
        &[
            "--bug",
            "stale-read",
            "--nemesis",
            "partition-leader",
            "--nemesis-interval",
            "2",
            "--active-keys",
            "2",
            "--op-timeout-ms",
            "300",
        ],
    );
    assert_stopped_early_for(code, &results, wall, "linearizable", None);
}

#[test]
fn ddp_skip_allreduce_stops_the_run_at_the_first_replica_divergence() {
    let (code, results, wall) = run_stopping(
        "ddp",
        &[
            "--workload",
            "train",
            "--concurrency",
            "3",
            "--rate",
            "0",
            "--bug",
            "skip-allreduce",
            "--nemesis",
            "none",
        ],
    );
    assert_stopped_early_for(
        code,
        &results,
        wall,
        "ddp-replicas",
        Some("replica-divergence"),
    );
}

#[test]
fn txn_dirty_read_stops_the_run_at_the_first_certain_anomaly() {
    let (code, results, wall) = run_stopping(
        "txn",
        &[
            "--workload",
            "list-append",
            "--bug",
            "dirty-read",
            "--rate",
            "0",
            "--nemesis",
            "none",
        ],
    );
    assert_stopped_early_for(code, &results, wall, "elle-list-append", None);
}

#[test]
fn txn_bank_early_lock_release_stops_at_the_first_wrong_total() {
    let (code, results, wall) = run_stopping(
        "txn",
        &[
            "--workload",
            "bank",
            "--bug",
            "early-lock-release",
            "--nemesis",
            "none",
            "--stop-when-found",
            "wrong-total",
        ],
    );
    assert_stopped_early_for(code, &results, wall, "bank", Some("wrong-total"));
}

#[test]
fn a_correct_kv_store_runs_its_whole_time_limit_and_is_valid() {
    let (code, results, _store) = support::run_target(
        "kv",
        3,
        &[
            "--stop-on-anomaly",
            "--seed",
            "1",
            "--time-limit",
            "8",
            "--nemesis",
            "partition,kill",
            "--nemesis-interval",
            "2",
        ],
    );
    assert_eq!(code, Some(0), "{results:#}");
    assert_eq!(results["valid"], true);
    assert!(results.get("stopped_early").is_none(), "{results:#}");
    assert!(results.get("first_known_at_s").is_none(), "{results:#}");
    // The main phase ran to its end: ops were still invoked in its last second.
    let run = std::path::Path::new(results["run_dir"].as_str().unwrap()).to_path_buf();
    let history = std::fs::read_to_string(run.join("history.jsonl")).unwrap();
    let first_client_ns = history
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|o| o["process"].is_u64() && o["type"] == "invoke")
        .and_then(|o| o["time"].as_u64())
        .unwrap();
    let last_invoke_ns = history
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|o| o["process"].as_u64().is_some_and(|p| p < 1_000_000) && o["type"] == "invoke")
        .filter_map(|o| o["time"].as_u64())
        .max()
        .unwrap();
    let main_phase_s = (last_invoke_ns - first_client_ns) as f64 / 1e9;
    assert!(main_phase_s > 7.0, "the main phase lasted {main_phase_s} s");
}

const DIRTY_READ_TIME_S: f64 = 10.0;

/// A txn list-append run with dirty reads, [`DIRTY_READ_TIME_S`] long, online checking on
/// or off: stderr, and results.json's `first_known_at_s` for `elle-list-append`.
fn dirty_read_run(extra: &[&str]) -> (String, f64) {
    let limit = DIRTY_READ_TIME_S.to_string();
    let store = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["test", "--target", "txn", "--nodes", "3", "--no-progress"])
        .args([
            "--workload",
            "list-append",
            "--bug",
            "dirty-read",
            "--rate",
            "0",
        ])
        .args(["--nemesis", "none", "--seed", "1", "--time-limit", &limit])
        .args(extra)
        .arg("--store")
        .arg(store.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let results: Value =
        serde_json::from_slice(&std::fs::read(store.path().join("latest/results.json")).unwrap())
            .unwrap();
    assert!(support::no_process_mentions(store.path()));
    let known = results["first_known_at_s"]["elle-list-append"]
        .as_f64()
        .unwrap_or_else(|| panic!("no first_known_at_s: {results:#}"));
    (stderr, known)
}

#[test]
fn no_online_check_leaves_the_anomaly_to_the_final_check() {
    // Online: found and printed while the run goes on.
    let (stderr, known) = dirty_read_run(&[]);
    assert!(
        stderr.contains("splitbrain: online: elle-list-append"),
        "{stderr}"
    );
    assert!(known < DIRTY_READ_TIME_S, "known online at {known} s");
    // Without: nothing printed while it runs, and first known only once checked at the end.
    let (stderr, known) = dirty_read_run(&["--no-online-check"]);
    assert!(!stderr.contains("splitbrain: online:"), "{stderr}");
    assert!(
        known >= DIRTY_READ_TIME_S,
        "known at {known} s without online checking"
    );
}

#[test]
fn bench_online_runs_with_and_without_online_checking_and_prints_its_table() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["bench", "online", "--duration", "3", "--sample-every", "1"])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| on ") || l.starts_with("| off "))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert_eq!(rows[0][1], "on", "{stdout}");
    assert_eq!(rows[1][1], "off", "{stdout}");
    for row in &rows {
        // Each run ended valid and did some work.
        assert_eq!(row[2], "0", "{stdout}\n{stderr}");
        assert!(row[3].parse::<u64>().unwrap() > 0, "{stdout}");
        assert!(row[4].parse::<f64>().unwrap() > 0.0, "{stdout}");
    }
    assert!(
        stdout.contains("on / off: tree CPU per 1k ok ops"),
        "{stdout}"
    );
    assert!(stdout.contains("- on : 1: "), "{stdout}");
}
