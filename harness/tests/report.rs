//! report.html in a real browser: headless Chromium loads the report of a short KV run
//! with faults and of invalid runs of each evidence kind (a linearizability
//! counterexample, an Elle cycle, a wrong bank total, diverging DDP ranks, replicas that
//! did not converge), and any console message or
//! uncaught error fails the test. The timeline must finish unpacking its data
//! (`data-ready`), so its script ran to the end. Skips, saying so, without `chromium`.
//!
//! Screenshots land in `$CARGO_TARGET_TMPDIR/report-screenshots/` for people to look at.

use crate::support;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::browser::{browse, chromium};

fn file_url(page: &Path) -> String {
    format!("file://{}", page.display())
}

/// Console lines Chromium logged for the page (every level: the report logs nothing, so
/// any line is an error or an uncaught exception).
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

fn shots_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Loads `page` in Chromium: no console output, the timeline ready, a screenshot taken.
fn assert_renders(browser: &Path, page: &Path, shot: &str) {
    let (dom, stderr) = browse(browser, &file_url(page), &["--dump-dom".to_string()]);
    let console = console_lines(&stderr);
    assert!(
        console.is_empty(),
        "{}: console output:\n{}",
        page.display(),
        console.join("\n")
    );
    assert!(
        dom.contains("data-ready=\"1\""),
        "{}: the timeline never finished loading; status: {:?}",
        page.display(),
        dom.split("id=\"tl-status\"")
            .nth(1)
            .map(|s| &s[..s.len().min(200)])
    );
    let file = shots_dir().join(shot);
    let (_, stderr) = browse(
        browser,
        &file_url(page),
        &[
            format!("--screenshot={}", file.display()),
            "--window-size=1200,3000".to_string(),
        ],
    );
    let console = console_lines(&stderr);
    assert!(
        console.is_empty(),
        "{}: console output:\n{}",
        page.display(),
        console.join("\n")
    );
    assert!(file.is_file(), "no screenshot at {}", file.display());
    eprintln!("screenshot: {}", file.display());
}

macro_rules! require_chromium {
    () => {
        match chromium() {
            Some(b) => b,
            None => {
                support::skip::skip_here(
                    "chromium (Debian package chromium) is not installed; report.html was not loaded in a browser",
                );
                return;
            }
        }
    };
}

#[test]
fn the_console_check_catches_an_uncaught_error() {
    let browser = require_chromium!();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(&page, "<html><body><script>null.x;</script></body></html>").unwrap();
    let (_, stderr) = browse(&browser, &file_url(&page), &["--dump-dom".to_string()]);
    assert!(
        console_lines(&stderr)
            .iter()
            .any(|l| l.contains("Uncaught")),
        "chromium's stderr had no uncaught error line:\n{stderr}"
    );
}

#[test]
fn report_of_a_kv_run_with_faults_loads_without_errors() {
    let browser = require_chromium!();
    let (code, results, store) = support::run_target(
        "kv",
        3,
        &[
            "--workload",
            "register",
            "--nemesis",
            "partition,kill,pause",
            "--nemesis-interval",
            "1.5",
            "--time-limit",
            "8",
            "--rate",
            "150",
            "--seed",
            "11",
        ],
    );
    assert!(
        matches!(code, Some(0 | 1 | 3)),
        "exit {code:?}: {results:#}"
    );
    let page = store.path().join("latest/report.html");
    assert_page_has(
        &page,
        &[
            (
                "splitbrain test --target kv --workload register",
                "repeat command",
            ),
            ("--seed 11", "seed in the repeat command"),
            ("id=\"latency\"", "latency plot"),
        ],
    );
    assert_renders(&browser, &page, "kv-faults.png");
}

/// Creates run directory `dir/name` holding `ops` as its history, indexed in order.
fn write_run(dir: &Path, name: &str, ops: &[serde_json::Value]) -> PathBuf {
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    let text: String = ops
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut o = o.clone();
            o["index"] = json!(i);
            format!("{o}\n")
        })
        .collect();
    std::fs::write(run.join("history.jsonl"), text).unwrap();
    run
}

/// Writes `ops` as a run directory's history, checks it with `splitbrain check`, then
/// re-renders it with `splitbrain report`; returns the report's path.
fn checked_run(dir: &Path, name: &str, ops: &[serde_json::Value], check_args: &[&str]) -> PathBuf {
    let run = write_run(dir, name, ops);
    let bin = env!("CARGO_BIN_EXE_splitbrain");
    let out = Command::new(bin)
        .arg("check")
        .arg(&run)
        .args(check_args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{name} should be invalid: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    std::fs::remove_file(run.join("report.html")).unwrap();
    let out = Command::new(bin).arg("report").arg(&run).output().unwrap();
    assert!(
        out.status.success(),
        "report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    run.join("report.html")
}

/// The page at `page` holds every one of `needles` (each with why it should).
fn assert_page_has(page: &Path, needles: &[(&str, &str)]) {
    let html = std::fs::read_to_string(page).unwrap();
    for (needle, why) in needles {
        assert!(
            html.contains(needle),
            "{}: {why} ({needle:?} missing)",
            page.display()
        );
    }
}

fn ev(process: u64, ty: &str, f: &str, value: serde_json::Value, ms: u64) -> serde_json::Value {
    json!({"process": process, "type": ty, "f": f, "value": value, "time": ms * 1_000_000})
}

#[test]
fn reports_of_invalid_runs_draw_their_evidence_without_errors() {
    let browser = require_chromium!();
    let dir = tempfile::tempdir().unwrap();

    // Linearizability: a read of a value overwritten before it began.
    let mut ops = vec![
        json!({"process": "nemesis", "type": "info", "f": "start-partition",
        "value": {"shape": "isolate", "halves": [["n1"], ["n2", "n3"]]}, "time": 1_000_000}),
    ];
    for i in 0..30u64 {
        ops.push(ev(i % 2, "invoke", "write", json!(i), 2 + i * 4));
        ops.push(ev(i % 2, "ok", "write", json!(i), 4 + i * 4));
    }
    ops.push(json!({"process": "nemesis", "type": "info", "f": "stop-partition", "value": {}, "time": 125_000_000}));
    ops.push(ev(2, "invoke", "read", json!(null), 130));
    ops.push(ev(2, "ok", "read", json!(3), 133));
    let page = checked_run(dir.path(), "register", &ops, &["--model", "register"]);
    assert_page_has(
        &page,
        &[
            ("could not take effect", "linearizability evidence drawn"),
            (
                "No test.json beside this history",
                "header without test.json",
            ),
        ],
    );
    assert_renders(&browser, &page, "invalid-register.png");

    // Elle: G1c, each transaction read the other's append.
    let ops = vec![
        ev(
            0,
            "invoke",
            "txn",
            json!([["append", "x", 1], ["r", "y", null]]),
            1,
        ),
        ev(
            1,
            "invoke",
            "txn",
            json!([["append", "y", 1], ["r", "x", null]]),
            2,
        ),
        ev(
            0,
            "ok",
            "txn",
            json!([["append", "x", 1], ["r", "y", [1]]]),
            3,
        ),
        ev(
            1,
            "ok",
            "txn",
            json!([["append", "y", 1], ["r", "x", [1]]]),
            4,
        ),
    ];
    let page = checked_run(dir.path(), "txn", &ops, &["--workload", "list-append"]);
    assert_page_has(&page, &[("<figure class=\"cycle\">", "cycle drawn")]);
    assert_renders(&browser, &page, "invalid-txn-g1c.png");

    // Bank: a read whose balances do not add up.
    let mut ops = Vec::new();
    for (i, (a, b)) in [(50, 50), (40, 60), (45, 65), (30, 70)]
        .into_iter()
        .enumerate()
    {
        let t = 10 * i as u64;
        ops.push(ev(
            0,
            "invoke",
            "transfer",
            json!({"from": "a", "to": "b", "amount": 5}),
            t + 1,
        ));
        ops.push(ev(
            0,
            "ok",
            "transfer",
            json!({"from": "a", "to": "b", "amount": 5}),
            t + 2,
        ));
        ops.push(ev(1, "invoke", "read", json!(null), t + 3));
        ops.push(ev(1, "ok", "read", json!({"a": a, "b": b}), t + 4));
    }
    let page = checked_run(dir.path(), "bank", &ops, &["--workload", "bank"]);
    assert_page_has(
        &page,
        &[("Sum of balances of every ok read", "bank totals drawn")],
    );
    assert_renders(&browser, &page, "invalid-bank.png");
}

/// Writes `ops` as a run directory's history, checks it with the library's own `checkers`
/// (for checker families `splitbrain check` runs only inside a test: DDP, convergence),
/// stores their results as a run does, and renders it with `splitbrain report`.
fn reported_run(
    dir: &Path,
    name: &str,
    ops: &[serde_json::Value],
    checkers: &[Box<dyn splitbrain_checkers::Checker>],
) -> PathBuf {
    let run = write_run(dir, name, ops);
    let history =
        splitbrain_checkers::history::read::read_path(&run.join("history.jsonl")).unwrap();
    let results: Vec<_> = checkers.iter().map(|c| c.check(&history)).collect();
    assert!(
        results
            .iter()
            .any(|r| r.valid == splitbrain_checkers::Validity::Invalid),
        "{name} should be invalid: {results:#?}"
    );
    let summary = splitbrain_reports::RunSummary::new(
        name.to_string(),
        Some(run.display().to_string()),
        results,
        splitbrain_reports::history_stats(&history),
        None,
    );
    std::fs::write(
        run.join("results.json"),
        serde_json::to_vec_pretty(&summary).unwrap(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .arg("report")
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "report: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    run.join("report.html")
}

#[test]
fn ddp_and_convergence_evidence_is_drawn_without_errors() {
    let browser = require_chromium!();
    let dir = tempfile::tempdir().unwrap();

    // DDP: two ranks; rank 1's parameters differ from step 3 on, the replay sides with rank 0.
    let mut ops = Vec::new();
    let mut reference = std::collections::BTreeMap::new();
    let mut ms = 1;
    for step in 1..=6u64 {
        reference.insert(step, format!("{step:016x}"));
        for rank in 0..2u64 {
            let digest = if rank == 1 && step >= 3 {
                format!("{:016x}", 1000 + step)
            } else {
                format!("{step:016x}")
            };
            let first = (step - 1) * 4 + rank * 2;
            ops.push(ev(rank, "invoke", "step", json!(null), ms));
            ops.push(ev(
                rank,
                "ok",
                "step",
                json!({"rank": rank, "world": 2, "members": [0, 1], "step": step, "epoch": 0,
                       "offset": (step - 1) * 4, "gen": 0, "digest": digest,
                       "loss": 1.0 / step as f64, "samples": [first, first + 1]}),
                ms + 1,
            ));
            ms += 2;
        }
    }
    let checkers = splitbrain_checkers::ddp::ddp_checkers(&splitbrain_checkers::ddp::DdpOptions {
        dataset_size: None,
        reference: Some(reference),
    });
    let page = reported_run(dir.path(), "ddp", &ops, &checkers);
    assert_page_has(
        &page,
        &[
            ("Per rank and committed step", "replica agreement drawn"),
            ("single-process replay", "the reference row explained"),
        ],
    );
    assert_renders(&browser, &page, "invalid-ddp.png");

    // Convergence: two elements added; after the heal n3 never learns the second one.
    let read = |p: u64, node: &str, v: serde_json::Value, ms: u64| {
        [
            json!({"process": p, "type": "invoke", "f": "read", "key": "k", "value": null,
                   "time": ms * 1_000_000}),
            json!({"process": p, "type": "ok", "f": "read", "key": "k", "value": v,
                   "node": node, "time": (ms + 1) * 1_000_000}),
        ]
    };
    let mut ops = vec![
        json!({"process": 0, "type": "invoke", "f": "add", "key": "k", "value": 1, "time": 1_000_000}),
        json!({"process": 0, "type": "ok", "f": "add", "key": "k", "value": 1, "node": "n1", "time": 2_000_000}),
        json!({"process": 1, "type": "invoke", "f": "add", "key": "k", "value": 2, "time": 3_000_000}),
        json!({"process": 1, "type": "ok", "f": "add", "key": "k", "value": 2, "node": "n2", "time": 4_000_000}),
        json!({"process": "nemesis", "type": "info", "f": "heal", "value": {"healed": true}, "time": 5_000_000}),
    ];
    for (i, ms) in [10u64, 20, 30].into_iter().enumerate() {
        let p = 100 + i as u64 * 3;
        ops.extend(read(p, "n1", json!([1, 2]), ms));
        ops.extend(read(p + 1, "n2", json!([2, 1]), ms + 2));
        ops.extend(read(p + 2, "n3", json!([1]), ms + 4));
    }
    let checkers: Vec<Box<dyn splitbrain_checkers::Checker>> = vec![Box::new(
        splitbrain_checkers::eventual::ConvergenceChecker::new(
            splitbrain_checkers::eventual::EventualDataType::Set,
        ),
    )];
    let page = reported_run(dir.path(), "converge", &ops, &checkers);
    assert_page_has(
        &page,
        &[("After the heal: per replica", "divergence over time drawn")],
    );
    assert_renders(&browser, &page, "invalid-convergence.png");
}
