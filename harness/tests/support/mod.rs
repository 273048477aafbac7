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
