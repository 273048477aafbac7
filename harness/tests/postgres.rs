//! End-to-end runs against a real PostgreSQL 15 server (Debian package postgresql):
//! serializable list-append stays valid while the server is killed with -9 and
//! restarted (crash recovery), and read committed shows the anomalies PostgreSQL's
//! documentation allows it. Skips, with a message, where the server's programs or the
//! `postgres` account (needed when running as root) are missing. Each run is a few
//! seconds and leaves no server process or work directory behind.

use serde_json::Value;
use splitbrain::target::postgres::{find_program, WorkDir, OS_USER};
use std::path::{Path, PathBuf};

mod support;

/// Why these tests cannot run here, if they cannot.
fn unavailable() -> Option<String> {
    for program in ["postgres", "initdb"] {
        if find_program(program).is_none() {
            return Some(format!(
                "PostgreSQL's `{program}` is not installed (Debian package postgresql)"
            ));
        }
    }
    // SAFETY: geteuid(2) cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let has_user = std::fs::read_to_string("/etc/passwd")
        .is_ok_and(|p| p.lines().any(|l| l.starts_with(&format!("{OS_USER}:"))));
    (root && !has_user).then(|| format!("running as root without an OS user `{OS_USER}`"))
}

/// The PostgreSQL work directory of the run's node n1.
fn work_dir(store: &Path) -> PathBuf {
    let run = std::fs::canonicalize(store.join("latest")).unwrap();
    WorkDir::for_node(&run.join("nodes/n1/data"))
        .root()
        .to_path_buf()
}

/// True when some process runs inside `dir` (every PostgreSQL process works in its
/// data directory, whatever its process title says).
fn process_inside(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name().to_string_lossy().parse::<u32>().is_ok()
            && std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir))
    })
}

/// Runs one short test against a fresh server; checks that nothing of it is left.
fn run_postgres(args: &[&str]) -> (Option<i32>, Value, tempfile::TempDir) {
    let (code, results, store) = support::run_target("postgres", 1, args);
    let work = work_dir(store.path());
    assert!(
        !process_inside(&work),
        "a PostgreSQL process outlived the run"
    );
    assert!(!work.exists(), "{} was not removed", work.display());
    (code, results, store)
}

fn history(store: &Path) -> Vec<Value> {
    std::fs::read_to_string(store.join("latest/history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn serializable_list_append_is_valid_through_kill_9_of_the_server() {
    if let Some(why) = unavailable() {
        eprintln!("skipping: {why}");
        return;
    }
    // Two kills at fixed times, each followed by seconds of service: a random schedule
    // could kill the server again while it is still recovering on a busy machine.
    let plan = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        plan.path(),
        r#"[{"at_ms":1000,"for_ms":300,"f":"kill","nodes":["n1"]},
            {"at_ms":4000,"for_ms":300,"f":"kill","nodes":["n1"]}]"#,
    )
    .unwrap();
    let plan_path = plan.path().display().to_string();
    let (code, results, store) = run_postgres(&[
        "--workload",
        "list-append",
        "--read-mode",
        "serializable",
        "--nemesis-plan",
        &plan_path,
        "--rate",
        "0",
        "--active-keys",
        "3",
        "--time-limit",
        "8",
        "--seed",
        "3",
    ]);
    assert_eq!(code, Some(0), "{results:#}");
    let elle = support::checker(&results, "elle-list-append");
    assert_eq!(elle["valid"], true, "{elle:#}");
    let ops = history(store.path());
    let kills = ops
        .iter()
        .filter(|op| op["process"] == "nemesis" && op["f"] == "kill")
        .count();
    assert_eq!(kills, 2, "the plan's two kills are not in the history");
    // Transactions committed after a kill: the server came back through crash recovery.
    let first_kill = ops
        .iter()
        .position(|op| op["process"] == "nemesis" && op["f"] == "kill")
        .unwrap();
    let committed_after = ops[first_kill..]
        .iter()
        .filter(|op| op["type"] == "ok" && op["f"] == "txn")
        .count();
    assert!(
        committed_after > 20,
        "only {committed_after} commits after the first kill"
    );
    // Serialization failures are definite failures, not unknowns.
    assert!(
        ops.iter().any(|op| op["type"] == "fail"
            && op["error"].as_str().is_some_and(|e| e.starts_with("40001"))),
        "no serialization failure was recorded as fail"
    );
}

#[test]
fn read_committed_list_append_shows_read_skew_and_lost_updates() {
    if let Some(why) = unavailable() {
        eprintln!("skipping: {why}");
        return;
    }
    let (code, results, _store) = run_postgres(&[
        "--workload",
        "list-append",
        "--read-mode",
        "read-committed",
        "--nemesis",
        "none",
        "--rate",
        "0",
        "--active-keys",
        "3",
        "--time-limit",
        "4",
        "--seed",
        "4",
    ]);
    assert_eq!(code, Some(1), "{results:#}");
    let elle = support::checker(&results, "elle-list-append");
    assert_eq!(elle["valid"], false);
    let anomalies: Vec<&str> = elle["anomaly_types"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for expected in ["G-single-item", "lost-update"] {
        assert!(
            anomalies.contains(&expected),
            "{expected} not in {anomalies:?}"
        );
    }
}
