//! End-to-end runs of `--target exec`: servers started from a target spec file and spoken
//! to over the HTTP contract (docs/http-contract.md) — the bundled KV store and 2PC
//! database through their spec files, and the Python register store of
//! `examples/http-contract/python`. Real processes on loopback, bounded in time, none left
//! behind.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support;

/// A spec file of the repository, by its path from the repository's root.
fn spec(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    assert!(p.is_file(), "{} is missing", p.display());
    p.display().to_string()
}

/// Runs `splitbrain test --target exec --target-spec SPEC --nodes 3 ARGS` in a fresh store.
fn run_exec(spec_file: &str, args: &[&str]) -> (Option<i32>, Value, tempfile::TempDir) {
    let mut all = vec!["--target-spec", spec_file];
    all.extend_from_slice(args);
    support::run_target("exec", 3, &all)
}

/// True when `python3` runs here; the Python server's tests skip (counted; a failure
/// under CI) otherwise.
fn python3(test: &str) -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        support::skip::skip(test, "python3 (Debian package python3) is not on PATH");
    }
    ok
}

const PYTHON_SPEC: &str = "examples/http-contract/python/register.toml";

/// The flags of a run of `workload` under partitions and kills every 2 s or so.
fn under_partitions_and_kills<'a>(
    workload: &'a str,
    time_limit: &'a str,
    seed: &'a str,
) -> [&'a str; 10] {
    [
        "--workload",
        workload,
        "--nemesis",
        "partition,kill",
        "--nemesis-interval",
        "2",
        "--time-limit",
        time_limit,
        "--seed",
        seed,
    ]
}

#[test]
fn the_kv_store_through_its_spec_file_is_linearizable_under_partitions_and_kills() {
    let (code, results, store) = run_exec(
        &spec("targets/kv/exec.toml"),
        &under_partitions_and_kills("register", "8", "3"),
    );
    support::assert_exit_0_and_valid(code, &results, "linearizable");
    let test: Value =
        serde_json::from_slice(&std::fs::read(store.path().join("latest/test.json")).unwrap())
            .unwrap();
    assert_eq!(test["target"], "exec");
    assert!(
        test["target_spec"]
            .as_str()
            .is_some_and(|s| Path::new(s).is_absolute() && s.ends_with("targets/kv/exec.toml")),
        "{test:#}"
    );
}

#[test]
fn the_txn_database_through_its_spec_file_serves_elle_transactions() {
    let (code, results, _store) = run_exec(
        &spec("targets/txn/exec.toml"),
        &under_partitions_and_kills("list-append", "8", "5"),
    );
    assert_eq!(code, Some(0), "{results:#}");
    assert_eq!(
        support::checker(&results, "elle-list-append")["valid"],
        true
    );
}

#[test]
fn the_python_register_store_is_linearizable_under_partitions_and_kills() {
    if !python3("the_python_register_store_is_linearizable_under_partitions_and_kills") {
        return;
    }
    let (code, results, store) = run_exec(
        &spec(PYTHON_SPEC),
        &under_partitions_and_kills("register", "10", "1"),
    );
    support::assert_exit_0_and_valid(code, &results, "linearizable");
    // The faults happened, and n1 came back from its kills with what it acknowledged.
    let history = std::fs::read_to_string(store.path().join("latest/history.jsonl")).unwrap();
    assert!(history.contains(r#""f":"kill""#), "no kill in the run");
    assert!(history.contains(r#""f":"start-partition""#), "no partition");
    let log = store.path().join("latest/nodes/n1/node.log");
    assert!(
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("register_server node 1")),
        "{} does not show the Python server",
        log.display()
    );
}

#[test]
fn the_python_stores_stale_read_bug_is_found() {
    if !python3("the_python_stores_stale_read_bug_is_found") {
        return;
    }
    let (code, results, _store) = run_exec(
        &spec(PYTHON_SPEC),
        &[
            "--workload",
            "register",
            "--bug",
            "stale-read",
            "--nemesis",
            "none",
            "--time-limit",
            "6",
            "--seed",
            "2",
        ],
    );
    assert_eq!(code, Some(1), "{results:#}");
    assert_eq!(support::checker(&results, "linearizable")["valid"], false);
}

/// Writes `text` as a spec file in `dir` and runs `splitbrain test` on it.
fn run_spec_text(dir: &Path, text: &str, extra: &[&str]) -> (Option<i32>, String, PathBuf) {
    let path = dir.join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let store = dir.join("store");
    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["test", "--target", "exec", "--no-progress", "--target-spec"])
        .arg(&path)
        .args(["--nodes", "1", "--time-limit", "2", "--nemesis", "none"])
        .args(extra)
        .arg("--store")
        .arg(&store)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        store,
    )
}

#[test]
fn a_bad_spec_is_a_usage_error_naming_the_file_the_line_and_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, store) = run_spec_text(
        dir.path(),
        "command = [\"srv\", \"--listen\", \"{client_addr}\"]\nworkloads = [\"register\",\n  \"queue\"]\n",
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml:3: unknown workload \"queue\""),
        "{stderr}"
    );
    assert!(stderr.contains("register, append (POST /kv)"), "{stderr}");
    assert!(!store.exists(), "a usage error must not start a run");

    let (code, stderr, _) = run_spec_text(
        dir.path(),
        "command = [\"srv\", \"{port}\"]\nworkloads = [\"register\"]\n",
        &[],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml:1: unknown placeholder {port}"),
        "{stderr}"
    );

    let (code, stderr, _) = run_spec_text(dir.path(), "command = \"srv\"\n", &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml") && stderr.contains("line 1"),
        "{stderr}"
    );

    // Well-formed, but the workload asked for is not one the spec serves.
    let (code, stderr, _) = run_spec_text(
        dir.path(),
        "command = [\"srv\"]\nworkloads = [\"register\"]\n",
        &["--workload", "bank"],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot run workload \"bank\""), "{stderr}");

    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["test", "--target", "exec"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--target-spec"));
}

#[test]
fn a_server_that_exits_at_start_cannot_run_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    // A real program that exits at once: the cluster never becomes ready.
    let (code, stderr, store) = run_spec_text(
        dir.path(),
        "command = [\"/bin/sh\", \"-c\", \"echo starting {name} in {data_dir}; exit 3\"]\nworkloads = [\"register\"]\n",
        &[],
    );
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("starting the cluster"), "{stderr}");
    assert!(stderr.contains("starting n1"), "{stderr}");
    assert!(support::no_process_mentions(&store));
}

/// `clock = "faketime"`: the harness preloads libfaketime into each node and the clock
/// nemesis rewrites the node's offset file; every node process, looked at from outside
/// while the bump is on, reads a wall clock an hour ahead.
#[test]
fn a_spec_with_clock_faketime_has_its_nodes_clocks_moved_by_libfaketime() {
    if !python3("a_spec_with_clock_faketime_has_its_nodes_clocks_moved_by_libfaketime") {
        return;
    }
    if splitbrain_nemesis::faketime::FaketimeClocks::library().is_none() {
        support::skip::skip(
            "exec faketime",
            "libfaketime (Debian package faketime) is not installed",
        );
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let (spec, plan) = support::faketime_register_spec(store.path(), 3600);
    let mut child = support::spawn_test(
        "exec",
        3,
        store.path(),
        &[
            "--target-spec",
            &spec,
            "--workload",
            "register",
            "--nemesis-plan",
            &plan,
            "--time-limit",
            "7",
        ],
    );
    let marker = store.path().display().to_string();
    let seen = support::watch_faketime_offsets(
        &mut child,
        &marker,
        3,
        3600,
        std::time::Duration::from_secs(20),
    );
    let out = child.wait_with_output().unwrap();
    support::assert_faketime_run(store.path(), &out, &seen, 3, 3600);
    assert!(support::no_process_mentions(store.path()));
}
