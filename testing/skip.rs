//! The one way a test steps aside when something it needs is missing (a program, a
//! privilege, `../shared/data`). Included by each crate's integration tests with
//! `#[path = "../../testing/skip.rs"] mod skip;` (depth as needed).
//!
//! With `CI=true` a missing dependency is a failure that names it, so a CI machine that
//! stopped installing something goes red instead of quietly passing fewer tests. Anywhere
//! else the test passes but the skip is counted: one line per skip is appended to the file
//! `SPLITBRAIN_SKIP_LOG` names (default `$TMPDIR/splitbrain-test-skips.log`), which
//! `scripts/test.sh` counts and prints after `cargo test`.

#![allow(dead_code)]

use std::io::Write;

/// Where skips are counted.
pub fn skip_log() -> std::path::PathBuf {
    std::env::var_os("SPLITBRAIN_SKIP_LOG")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("splitbrain-test-skips.log"))
}

/// True when missing dependencies must fail tests (`CI` set to anything but `false`/`0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Steps `test` aside because `missing` is absent: panics under CI, else prints the
/// reason and records one line in the skip log. Call it, then `return`.
#[track_caller]
pub fn skip(test: &str, missing: &str) {
    if in_ci() {
        panic!("{test}: needs {missing} (CI=true: a missing dependency is a failure)");
    }
    eprintln!("SKIP {test}: {missing}");
    let line = format!("{test}\t{missing}\n");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(skip_log())
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// [`skip`] under the running test's name (the test harness names its thread after it).
#[track_caller]
pub fn skip_here(missing: &str) {
    let name = std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .map(str::to_string)
        .unwrap_or_else(|| std::env::args().next().unwrap_or_else(|| "a test".into()));
    skip(&name, missing)
}

/// `Some(reason)` skips: the usual shape of a test's preamble,
/// `if skip::unless(module_path!(), why_not_runnable()) { return; }`.
#[track_caller]
pub fn unless(test: &str, why: Option<String>) -> bool {
    match why {
        Some(missing) => {
            skip(test, &missing);
            true
        }
        None => false,
    }
}

/// `None` when `program` runs with `arg` (e.g. `--version`), else why not.
pub fn program_missing(program: &str, arg: &str, package: &str) -> Option<String> {
    let runs = std::process::Command::new(program)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok();
    (!runs).then(|| format!("{program} (Debian package {package}) is not on PATH"))
}

/// `None` when running as root (network namespaces, nftables), else why not.
pub fn root_missing() -> Option<String> {
    // The effective uid from /proc, so including crates need no libc dependency.
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        });
    (uid.as_deref() != Some("0")).then(|| "root (network namespaces and nftables)".to_string())
}
