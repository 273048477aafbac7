//! What the end-to-end tests of bundled targets share: running `splitbrain test` in a fresh
//! store, and making sure no node process outlived the run.

#![allow(dead_code)] // each test binary uses its own part

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `splitbrain test --target TARGET --nodes NODES ARGS` in a fresh store; returns the
/// exit code, results.json and the store (kept alive for the caller). Fails the test when a
/// node process whose command line names the store is still running afterwards.
pub fn run_target(
    target: &str,
    nodes: usize,
    args: &[&str],
) -> (Option<i32>, Value, tempfile::TempDir) {
    let store = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["test", "--target", target, "--no-progress"])
        .args(["--nodes", &nodes.to_string()])
        .args(args)
        .arg("--store")
        .arg(store.path())
        .output()
        .unwrap();
    let results = std::fs::read(store.path().join("latest/results.json")).unwrap_or_else(|e| {
        panic!(
            "no results.json ({e}); stdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let results: Value = serde_json::from_slice(&results).unwrap();
    assert!(
        no_process_mentions(store.path()),
        "node processes outlived the run"
    );
    (out.status.code(), results, store)
}

/// True when no running process has `store` in its command line.
pub fn no_process_mentions(store: &Path) -> bool {
    let marker = store.display().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    !entries.flatten().any(|e| {
        e.file_name().to_string_lossy().parse::<u32>().is_ok()
            && std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
    })
}

/// PIDs of the running processes whose `/proc/PID` directory satisfies `matches`.
pub fn pids_where(matches: impl Fn(&Path) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            matches(&e.path()).then_some(pid)
        })
        .collect()
}

/// The result of checker `name`, which must be there.
pub fn checker<'a>(results: &'a Value, name: &str) -> &'a Value {
    results["results"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["checker"] == name))
        .unwrap_or_else(|| panic!("no {name} result in {results:#}"))
}

/// `splitbrain test --target TARGET --nodes NODES --no-progress ARGS --store STORE`,
/// started with piped output and not awaited (for tests that signal it mid-run).
pub fn spawn_test(target: &str, nodes: usize, store: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args(["test", "--target", target, "--no-progress"])
        .args(["--nodes", &nodes.to_string()])
        .args(args)
        .arg("--store")
        .arg(store)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Namespaces and host links named after splitbrain process `pid` (every run names its
/// own so): what a namespaced run must not leave behind.
pub fn namespaces_and_links_of(pid: u32) -> Vec<String> {
    use splitbrain_nemesis::netns;
    let ns_prefix = format!("{}{pid}-", netns::PREFIX);
    let link_prefix = format!("sbh{pid}x");
    let ns = netns::list_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&ns_prefix));
    let links = netns::host_links()
        .into_iter()
        .filter(|l| l.starts_with(&link_prefix));
    ns.chain(links).collect()
}

/// The ops of the latest run in `store`, in history order.
pub fn history(store: &Path) -> Vec<Value> {
    std::fs::read_to_string(store.join("latest/history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Why PostgreSQL runs (primary and standbys) cannot be made here, if they cannot: a
/// missing server program, or a harness running as root without the `postgres` account.
pub fn postgres_unavailable() -> Option<String> {
    use splitbrain::target::postgres::{find_program, OS_USER};
    for program in ["postgres", "initdb", "pg_basebackup"] {
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
