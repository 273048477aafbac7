//! Every target's defaults run: `splitbrain test --target T --time-limit 3`, with no other
//! flag, runs and is judged, or is a usage error (exit 2) that names the flag to set, for
//! every target `splitbrain list` names. A target whose programs are not installed here is
//! skipped (a failure under `CI=true`, see `testing/skip.rs`).
//!
//! "Judged" is exit 0 (valid) or 3 (unknown): 3 s is shorter than the default nemesis
//! interval, so the faults asked for by default never start and fault coverage makes the
//! verdict unknown, as it should. Exit 1 is a finding for a system nobody here wrote (its
//! defaults may allow an anomaly). What must not happen: exit 1 for a bundled system (its
//! correct mode judged invalid), exit 4 (it could not run: a default that does not fit, such as a
//! data set the default number of ranks does not divide), a usage error naming no flag.

use crate::support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::skip;

/// How long one target's run may take, start-up and teardown included (a Galera cluster
/// forms in tens of seconds on a loaded machine).
const RUN_BOUND: Duration = Duration::from_secs(240);

/// The targets `splitbrain list` names: the indented names of its `targets:` section.
fn listed_targets() -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .arg("list")
        .output()
        .unwrap();
    assert!(out.status.success(), "splitbrain list failed");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .skip_while(|l| *l != "targets:")
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        // "  name  description"; deeper lines are the target's read modes, workloads, bugs.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Why target `name` cannot run here, if it cannot: a required program missing, or
/// PostgreSQL's own conditions.
fn why_not_runnable(name: &str) -> Option<String> {
    if name == "postgres" {
        if let Some(why) = support::postgres_unavailable() {
            return Some(why);
        }
    }
    let target = splitbrain::systems::by_name(name)?;
    let missing: Vec<String> = target
        .required_programs()
        .iter()
        .filter(|p| splitbrain::run::programs::find_on_path(p.program).is_none())
        .map(|p| format!("`{}` (Debian package {})", p.program, p.package))
        .collect();
    (!missing.is_empty()).then(|| format!("target {name} needs {}", missing.join(", ")))
}

/// A system nobody here wrote (it ships no named bugs of ours): its own defaults may allow
/// an anomaly — Galera's `wsrep_sync_wait=0` serves stale reads — and finding one is the
/// harness working. A bundled system's default is its correct mode and must not fail.
fn is_real_system(name: &str) -> bool {
    splitbrain::systems::by_name(name).is_some_and(|t| t.bugs().is_empty())
}

/// Runs `splitbrain test --target NAME --time-limit 3` in a fresh store, killed after
/// [`RUN_BOUND`]; returns the exit code (None when killed) and stdout + stderr.
fn run_defaults(name: &str) -> (Option<i32>, String) {
    let store = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args([
            "test",
            "--target",
            name,
            "--time-limit",
            "3",
            "--no-progress",
        ])
        .arg("--store")
        .arg(store.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained while the run goes, so a chatty run cannot fill a pipe and stall.
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = String::new();
            let _ = pipe.read_to_string(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + RUN_BOUND;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = format!(
        "{}{}",
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default()
    );
    (code, text)
}

/// The line that says what happened: the verdict line, else the error, else the first.
fn telling_line(text: &str) -> &str {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines
        .iter()
        .find(|l| l.contains("error:") || l.to_lowercase().contains("verdict"))
        .or(lines.first())
        .copied()
        .unwrap_or("")
        .trim()
}

#[test]
fn every_listed_target_runs_with_its_defaults_or_names_the_flag_to_set() {
    let targets = listed_targets();
    for expected in ["kv", "txn", "ddp", "bayou", "exec", "maelstrom"] {
        assert!(
            targets.iter().any(|t| t == expected),
            "{expected} not in {targets:?}"
        );
    }
    let mut table = Vec::new();
    let mut wrong = Vec::new();
    let mut runnable = Vec::new();
    for name in &targets {
        match why_not_runnable(name) {
            Some(why) => {
                skip::skip(&format!("target_defaults::{name}"), &why);
                table.push(format!("{name:<10} skipped: {why}"));
            }
            None => runnable.push(name.as_str()),
        }
    }
    // Two runs at a time, as CI's suites run their cells: each run has its own store and
    // ports, and most of a run is waiting on its cluster.
    for pair in runnable.chunks(2) {
        let results: Vec<(&str, (Option<i32>, String))> = std::thread::scope(|s| {
            let handles: Vec<_> = pair
                .iter()
                .map(|name| (*name, s.spawn(move || run_defaults(name))))
                .collect();
            handles
                .into_iter()
                .map(|(name, h)| (name, h.join().unwrap()))
                .collect()
        });
        for (name, (code, text)) in results {
            let line = telling_line(&text);
            table.push(format!("{name:<10} exit {code:?}: {line}"));
            // A usage error must say which flag to set (`--target-spec`, `--bin`, ...).
            let ok = match code {
                Some(0 | 3) => true,
                Some(1) => is_real_system(name),
                Some(2) => line.contains("--"),
                _ => false,
            };
            if !ok {
                wrong.push(format!("{name}: exit {code:?}\n{text}"));
            }
        }
    }
    eprintln!("target defaults:\n{}", table.join("\n"));
    assert!(
        wrong.is_empty(),
        "targets whose defaults do not run:\n{}\n\nall:\n{}",
        wrong.join("\n---\n"),
        table.join("\n")
    );
}
