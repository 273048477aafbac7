//! End-to-end runs of PostgreSQL 15 with a streaming hot standby (`--nodes 2`): n2 really
//! streams n1's WAL (rows committed on the primary are read back on the standby, and the
//! standby comes back streaming after kill -9), and with `--read-from replica` and the
//! standby paused, asynchronous replication shows as stale reads that Elle's
//! strict-serializable model refutes by name. Skips, with a message, where the server's
//! programs or the `postgres` account (needed when running as root) are missing. Each
//! run takes a few seconds and leaves no server process or work directory behind.

use serde_json::Value;
use splitbrain::systems::postgres::WorkDir;
use std::path::{Path, PathBuf};

use crate::support;

/// The PostgreSQL work directories of the run's nodes n1..n`nodes`.
fn work_dirs(store: &Path, nodes: usize) -> Vec<PathBuf> {
    let run = std::fs::canonicalize(store.join("latest")).unwrap();
    (1..=nodes)
        .map(|i| {
            WorkDir::for_node(&run.join(format!("nodes/n{i}/data")))
                .root()
                .to_path_buf()
        })
        .collect()
}

/// Runs one short two-node test; checks that no process works in, and nothing is left
/// of, either node's work directory (every PostgreSQL process, walsender and
/// walreceiver included, works in its data directory).
fn run_pair(args: &[&str]) -> (Option<i32>, Value, tempfile::TempDir) {
    let (code, results, store) = support::run_target("postgres", 2, args);
    for work in work_dirs(store.path(), 2) {
        let inside = support::pids_where(|proc_dir| {
            std::fs::read_link(proc_dir.join("cwd")).is_ok_and(|cwd| cwd.starts_with(&work))
        });
        assert!(
            inside.is_empty(),
            "PostgreSQL processes {inside:?} outlived the run"
        );
        assert!(!work.exists(), "{} was not removed", work.display());
    }
    (code, results, store)
}

/// Runs serializable list-append for `secs` seconds on two nodes with `--read-from
/// replica` under the fault plan of `faults` (JSON objects of the plan format).
fn replica_reads_under(
    faults: &str,
    secs: &str,
    seed: &str,
) -> (Option<i32>, Value, tempfile::TempDir) {
    let plan = support::plan_file(&format!("[{faults}]"));
    let plan_path = plan.path().display().to_string();
    run_pair(&[
        "--workload",
        "list-append",
        "--read-mode",
        "serializable",
        "--read-from",
        "replica",
        "--nemesis-plan",
        &plan_path,
        "--rate",
        "0",
        "--active-keys",
        "3",
        "--time-limit",
        secs,
        "--seed",
        seed,
    ])
}

/// The appended elements an ok read of `node` saw, over all its reads.
fn elements_read_on(ops: &[Value], node: &str) -> Vec<i64> {
    ops.iter()
        .filter(|op| op["type"] == "ok" && op["node"] == node)
        .filter_map(|op| op["value"].as_array())
        .flatten()
        .filter(|m| m[0] == "r")
        .filter_map(|m| m[2].as_array())
        .flatten()
        .filter_map(Value::as_i64)
        .collect()
}

#[test]
fn the_standby_streams_the_primarys_commits_and_resumes_after_kill_9() {
    if let Some(why) = support::postgres_unavailable() {
        support::skip::skip_here(&why);
        return;
    }
    // Kill -9 of the standby, then of the primary: each comes back (the standby resumes
    // streaming from its slot; the primary recovers and the standby reconnects).
    let (code, results, store) = replica_reads_under(
        r#"{"at_ms":1500,"for_ms":300,"f":"kill","nodes":["n2"]},
           {"at_ms":3500,"for_ms":300,"f":"kill","nodes":["n1"]}"#,
        "7",
        "5",
    );
    assert!(code == Some(0) || code == Some(1), "{results:#}");
    let ops = support::history(store.path());
    // Every append went to the primary, every read-only txn to the standby.
    let only_reads = |op: &Value| {
        op["value"]
            .as_array()
            .is_some_and(|ms| ms.iter().all(|m| m[0] == "r"))
    };
    for op in ops
        .iter()
        .filter(|op| op["type"] == "ok" && op["f"] == "txn")
    {
        let want = if only_reads(op) { "n2" } else { "n1" };
        assert_eq!(op["node"], want, "{op}");
    }
    // What the primary committed, the standby served: elements appended on n1 are
    // read back in read-only transactions on n2, also after both kills.
    let seen_on_standby = elements_read_on(&ops, "n2");
    let last_kill = ops
        .iter()
        .rposition(|op| op["process"] == "nemesis" && op["f"] == "kill")
        .expect("the plan's kills are in the history");
    let appended_after: Vec<i64> = ops[last_kill..]
        .iter()
        .filter(|op| op["type"] == "ok" && op["node"] == "n1")
        .filter_map(|op| op["value"].as_array())
        .flatten()
        .filter(|m| m[0] == "append")
        .filter_map(|m| m[2].as_i64())
        .collect();
    assert!(
        !appended_after.is_empty(),
        "nothing committed on the primary after its restart"
    );
    let replayed = appended_after
        .iter()
        .filter(|v| seen_on_standby.contains(v))
        .count();
    assert!(
        replayed > 0,
        "none of the {} elements appended after the primary's restart was read on the standby",
        appended_after.len()
    );
    // The node logs say what happened: a base backup, streaming, crash recovery.
    let run = store.path().join("latest/nodes");
    let standby_log = std::fs::read_to_string(run.join("n2/node.log")).unwrap();
    assert!(
        standby_log.contains("started streaming WAL from primary"),
        "n2 never streamed:\n{standby_log}"
    );
    assert!(
        standby_log.matches("entering standby mode").count() >= 2,
        "n2 did not restart as a standby after its kill"
    );
    let primary_log = std::fs::read_to_string(run.join("n1/node.log")).unwrap();
    assert!(
        primary_log.contains("database system was not properly shut down"),
        "n1 did not go through crash recovery"
    );
}

#[test]
fn reads_from_a_paused_async_standby_are_stale_and_elle_names_it() {
    if let Some(why) = support::postgres_unavailable() {
        support::skip::skip_here(&why);
        return;
    }
    // Two pauses of the standby alone: while it is stopped the primary commits on, and
    // the reads waiting on the standby are answered from its old state when it resumes.
    let (code, results, store) = replica_reads_under(
        r#"{"at_ms":1000,"for_ms":700,"f":"pause","nodes":["n2"]},
           {"at_ms":3000,"for_ms":700,"f":"pause","nodes":["n2"]}"#,
        "5",
        "6",
    );
    assert_eq!(code, Some(1), "{results:#}");
    let elle = support::checker(&results, "elle-list-append");
    assert_eq!(elle["valid"], false, "{elle:#}");
    let anomalies: Vec<&str> = elle["anomaly_types"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // Stale reads order nothing wrongly among the transactions themselves: only real
    // time (a read that began after an append committed and missed it) refutes them.
    assert!(
        anomalies.iter().any(|a| a.ends_with("-realtime")),
        "no realtime anomaly in {anomalies:?}"
    );
    let ops = support::history(store.path());
    assert!(
        ops.iter()
            .any(|op| op["type"] == "ok" && op["node"] == "n2" && op["f"] == "txn"),
        "no read was served by the standby"
    );
}

#[test]
fn replica_flags_without_a_replica_or_on_other_targets_are_usage_errors() {
    // Refused before anything starts, so PostgreSQL need not be installed.
    let store = tempfile::tempdir().unwrap();
    for (target, args, says) in [
        (
            "postgres",
            &[
                "--workload",
                "list-append",
                "--nodes",
                "1",
                "--read-from",
                "replica",
            ][..],
            "--nodes 2 or more",
        ),
        (
            "postgres",
            &[
                "--workload",
                "list-append",
                "--nodes",
                "1",
                "--replication",
                "sync",
            ][..],
            "--nodes 2 or more",
        ),
        (
            "kv",
            &["--replication", "sync"][..],
            "--replication applies",
        ),
        ("kv", &["--read-from", "replica"][..], "--read-from applies"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_splitbrain"))
            .args(["test", "--target", target, "--no-progress"])
            .args(args)
            .arg("--store")
            .arg(store.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target} {args:?}: {stderr}");
        assert!(stderr.contains(says), "{target} {args:?}: {stderr}");
    }
}

#[test]
fn a_partitioned_sync_standby_stalls_the_primarys_commits_until_healed() {
    if let Some(why) = support::postgres_unavailable() {
        support::skip::skip_here(&why);
        return;
    }
    // The standby streams through the proxy mesh, so cutting n2 off cuts replication:
    // with `--replication sync` no write commits while n2 is away, and they go on after.
    let plan = support::plan_file(
        r#"[{"at_ms":1500,"for_ms":3000,"f":"partition","shape":"isolate","groups":[["n1"],["n2"]]}]"#,
    );
    let plan_path = plan.path().display().to_string();
    let (code, results, store) = run_pair(&[
        "--workload",
        "register",
        "--replication",
        "sync",
        "--nemesis-plan",
        &plan_path,
        "--rate",
        "0",
        "--time-limit",
        "7",
        "--seed",
        "1",
    ]);
    support::assert_exit_0_and_valid(code, &results, "linearizable");
    let ops = support::history(store.path());
    let nemesis_time = |f: &str| {
        ops.iter()
            .find(|op| op["process"] == "nemesis" && op["f"] == f)
            .and_then(|op| op["time"].as_u64())
            .unwrap_or_else(|| panic!("no {f} in the history"))
    };
    let (cut, healed) = (
        nemesis_time("start-partition"),
        nemesis_time("stop-partition"),
    );
    let ok_writes: Vec<u64> = ops
        .iter()
        .filter(|op| op["type"] == "ok" && op["f"] != "read")
        .filter_map(|op| op["time"].as_u64())
        .collect();
    // A commit already acknowledged by n2 when the cut came may still land just after it.
    let grace = 300_000_000;
    let during: Vec<&u64> = ok_writes
        .iter()
        .filter(|t| **t > cut + grace && **t < healed)
        .collect();
    assert!(
        during.is_empty(),
        "{} writes committed while the sync standby was cut off",
        during.len()
    );
    assert!(
        ok_writes.iter().any(|t| *t < cut),
        "no write before the cut"
    );
    assert!(
        ok_writes.iter().any(|t| *t > healed),
        "no write committed after the partition healed"
    );
}

/// Runs `register` on `--nodes 2 --replication sync` at rate 50 for 9 s with the plan's
/// one fault on n2's link (3 s to 7 s): every commit waits for the standby's apply, so
/// whatever the link does shows in the writes' latencies. The verdict must be valid.
fn sync_pair_under(fault: &str) -> (Vec<Value>, tempfile::TempDir) {
    let plan = support::plan_file(&format!(r#"[{{"at_ms":3000,"for_ms":4000,"f":{fault}}}]"#));
    let plan_path = plan.path().display().to_string();
    let (code, results, store) = run_pair(&[
        "--workload",
        "register",
        "--replication",
        "sync",
        "--nemesis-plan",
        &plan_path,
        "--rate",
        "50",
        "--time-limit",
        "9",
        "--seed",
        "1",
    ]);
    support::assert_exit_0_and_valid(code, &results, "linearizable");
    (support::history(store.path()), store)
}

/// A slow link to the sync standby: each commit waits for the WAL to reach n2 and its
/// apply to come back, a round trip through the proxy of at least 2 x 50 ms.
#[test]
fn a_slow_link_to_a_sync_standby_slows_every_commit() {
    if let Some(why) = support::postgres_unavailable() {
        support::skip::skip_here(&why);
        return;
    }
    let (ops, _store) = sync_pair_under(r#""slow","nodes":["n2"],"delay_ms":50"#);
    support::assert_slowed_writes(&ops, "sync commits", 90.0);
}

/// Loss on the replication link is packet loss, not cut frames: the proxy holds pieces
/// of the stream back by retransmission timeouts and drops no byte, so the walreceiver
/// never reads a broken message, the standby keeps streaming, and sync commits go on
/// inside the window (a line-dropping proxy let none through: docs/targets/postgres.md).
#[test]
fn loss_on_the_standby_link_delays_the_stream_without_breaking_it() {
    if let Some(why) = support::postgres_unavailable() {
        support::skip::skip_here(&why);
        return;
    }
    let (ops, store) = sync_pair_under(r#""loss","nodes":["n2"],"fraction":0.1"#);
    let (lossy_ms, before_ms) =
        support::median_write_ms_inside_and_before(&ops, "loss", "sync commits");
    assert!(lossy_ms > 0.0 && before_ms > 0.0);
    let n2 = std::fs::read_to_string(store.path().join("latest/nodes/n2/node.log")).unwrap();
    assert!(!n2.contains("lost synchronization"), "{n2}");
    let n1 = std::fs::read_to_string(store.path().join("latest/nodes/n1/node.log")).unwrap();
    assert!(!n1.contains("unexpected EOF on standby"), "{n1}");
}
