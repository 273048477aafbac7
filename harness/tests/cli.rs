//! End-to-end tests of the `splitbrain` binary: real node processes on loopback, real
//! signals, real files. Each test is bounded in time and kills only what it started.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn splitbrain() -> Command {
    Command::new(env!("CARGO_BIN_EXE_splitbrain"))
}

use crate::support::skip;

fn data_dir() -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    if d.is_dir() {
        Some(d)
    } else {
        skip::skip_here(&format!("{} is absent", d.display()));
        None
    }
}

/// Node processes whose command line mentions `marker` (our temp store), by PID.
fn processes_mentioning(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                out.push(pid);
            }
        }
    }
    out
}

fn wait_with_bound(child: &mut std::process::Child, bound: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < bound {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn check_parses_every_porcupine_file() {
    let Some(data) = data_dir() else { return };
    let mut checked = 0;
    for sub in ["porcupine/jepsen", "porcupine/kv"] {
        let mut files: Vec<_> = std::fs::read_dir(data.join(sub))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            if std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0) == 0 {
                continue;
            }
            let model = if sub.ends_with("kv") {
                "kv"
            } else {
                "cas-register"
            };
            let out = splitbrain()
                .args([
                    "check",
                    "--format",
                    "json",
                    "--model",
                    model,
                    "--failed-cas",
                    "observed",
                ])
                .arg(&f)
                .args(["--check-time-limit", "5"])
                .output()
                .unwrap();
            let code = out.status.code().unwrap();
            assert!(
                [0, 1, 3].contains(&code),
                "{}: exit {code}: {}",
                f.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(v["stats"]["ops"].as_u64().unwrap() > 0, "{}", f.display());
            checked += 1;
        }
    }
    assert_eq!(checked, 102 + 6);
}

#[test]
fn malformed_history_names_file_and_line_and_exits_4() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.jsonl");
    let mut f = std::fs::File::create(&path).unwrap();
    writeln!(
        f,
        r#"{{"index":0,"process":0,"type":"invoke","f":"read","value":null}}"#
    )
    .unwrap();
    writeln!(
        f,
        r#"{{"index":1,"process":0,"type":"okay","f":"read","value":1}}"#
    )
    .unwrap();
    drop(f);
    let out = splitbrain().arg("check").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}:2:", path.display())),
        "stderr was: {err}"
    );
}

#[test]
fn check_reads_elle_transactions_without_f_and_names_ops_by_their_index() {
    // Elle's EDN shape: no :f, indices from 10; a G1c cycle, no --workload given.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g1c.edn");
    std::fs::write(
        &path,
        "[{:type :invoke, :value [[:append :x 1] [:r :y nil]], :process 0, :index 10}\n\
         {:type :invoke, :value [[:append :y 1] [:r :x nil]], :process 1, :index 12}\n\
         {:type :ok, :value [[:append :x 1] [:r :y [1]]], :process 0, :index 14}\n\
         {:type :ok, :value [[:append :y 1] [:r :x [1]]], :process 1, :index 16}]\n",
    )
    .unwrap();
    let out = splitbrain()
        .args(["check", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("G1c") && stdout.contains("T14") && stdout.contains("T16"),
        "{stdout}"
    );
    // An op with no f whose value is no transaction is refused, naming the line.
    std::fs::write(&path, "{:type :invoke, :value 3, :process 0}\n").unwrap();
    let out = splitbrain().arg("check").arg(&path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(err.contains(":1: expected the op to have `f`"), "{err}");
}

#[test]
fn check_runs_jepsen_checkers_by_name_with_design_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ids = dir.path().join("ids.edn");
    // Knossos/Jepsen EDN: two generate ops return the same id.
    std::fs::write(
        &ids,
        "{:process 0 :type :invoke :f :generate :value nil}\n{:process 0 :type :ok :f :generate :value 1}\n\
         {:process 1 :type :invoke :f :generate :value nil}\n{:process 1 :type :ok :f :generate :value 1}\n",
    )
    .unwrap();
    let run = |args: &[&str], path: &Path| {
        let out = splitbrain()
            .arg("check")
            .args(args)
            .arg(path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let junit = dir.path().join("ids-junit.xml");
    let (code, text) = run(
        &[
            "--checker",
            "unique-ids",
            "--format",
            "json",
            "--junit",
            &junit.display().to_string(),
        ],
        &ids,
    );
    assert_eq!(code, Some(1), "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testcase name=\"unique-ids\"")
            && xml.contains("<failure message=\"invalid\"")
            && xml.contains("failures=\"1\""),
        "{xml}"
    );
    assert!(
        text.contains("\"unique-ids\"") && text.contains("duplicated"),
        "{text}"
    );
    // stats passes on it (generate succeeded), exceptions too: both chosen at once.
    let (code, text) = run(&["--checker", "stats,exceptions", "--format", "json"], &ids);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("\"stats\"") && text.contains("\"exceptions\""),
        "{text}"
    );
    // A counter read above every attempted increment.
    let counter = dir.path().join("counter.jsonl");
    std::fs::write(
        &counter,
        "{\"process\":0,\"type\":\"invoke\",\"f\":\"add\",\"value\":1}\n\
         {\"process\":0,\"type\":\"ok\",\"f\":\"add\",\"value\":1}\n\
         {\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"value\":null}\n\
         {\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"value\":2}\n",
    )
    .unwrap();
    let (code, text) = run(&["--checker", "counter"], &counter);
    assert_eq!(code, Some(1), "{text}");
    // Started at 1 (--init), the read of 2 is the one add.
    let (code, text) = run(&["--checker", "counter", "--init", "1"], &counter);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(&["--checker", "no-such"], &counter);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("known checkers") && text.contains("long-fork"),
        "{text}"
    );
}

#[test]
fn init_sets_the_models_initial_state_from_the_flag_or_test_json() {
    let dir = tempfile::tempdir().unwrap();
    // Knossos-style: a register read as 0 before anything was written.
    let history = "{\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"value\":null}\n\
                   {\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"value\":0}\n\
                   {\"process\":1,\"type\":\"invoke\",\"f\":\"write\",\"value\":3}\n\
                   {\"process\":1,\"type\":\"ok\",\"f\":\"write\",\"value\":3}\n";
    let path = dir.path().join("h.jsonl");
    std::fs::write(&path, history).unwrap();
    let code = |args: &[&str], p: &Path| {
        splitbrain()
            .arg("check")
            .args(args)
            .arg(p)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(code(&["--model", "register"], &path), Some(1));
    assert_eq!(
        code(&["--model", "register", "--init", "0"], &path),
        Some(0)
    );
    assert_eq!(code(&["--init", "0"], &path), Some(0), "inferred model");
    assert_eq!(
        code(&["--model", "counter", "--init", "\"x\""], &path),
        Some(2)
    );
    assert_eq!(code(&["--init", "{not json"], &path), Some(2));
    // A run directory whose test.json recorded the initial state is re-checked from it;
    // one without the field (older runs) from the model's own.
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("history.jsonl"), history).unwrap();
    std::fs::write(run.join("test.json"), r#"{"workload":"register","init":0}"#).unwrap();
    assert_eq!(code(&[], &run), Some(0));
    std::fs::write(run.join("test.json"), r#"{"workload":"register"}"#).unwrap();
    assert_eq!(code(&[], &run), Some(1));
}

#[test]
fn rw_register_inference_flags_reach_elle() {
    // A stale read after two real-time-ordered writes: only --linearizable-keys sees it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rw.edn");
    std::fs::write(
        &path,
        "{:type :invoke, :value [[:w :x 1]], :process 0}\n{:type :ok, :value [[:w :x 1]], :process 0}\n\
         {:type :invoke, :value [[:w :x 2]], :process 1}\n{:type :ok, :value [[:w :x 2]], :process 1}\n\
         {:type :invoke, :value [[:r :x nil]], :process 2}\n{:type :ok, :value [[:r :x 1]], :process 2}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let out = splitbrain()
            .args(["check", "--workload", "rw-register", "--format", "json"])
            .args(extra)
            .arg(&path)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    let (code, text) = run(&[]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = run(&["--linearizable-keys"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("cyclic-versions"), "{text}");
}

#[test]
fn usage_errors_exit_2() {
    let out = splitbrain()
        .args(["test", "--target", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = splitbrain()
        .args(["test", "--bug", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = splitbrain().args(["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // bench tail's numeric options are checked before any cluster starts
    for (flag, value, says) in [
        ("--clients", "0", "at least one client"),
        ("--runs", "0", "at least one run"),
        ("--cell-seconds", "0", "positive number of seconds"),
        ("--load-share", "1.5", "share of capacity"),
    ] {
        let out = splitbrain()
            .args(["bench", "tail", flag, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag) && err.contains(says), "{flag}: {err}");
    }
}

/// `splitbrain list` writing into a pipe whose reader is already gone (closed before the
/// child starts, so its first write fails). The process ends by SIGPIPE, as a filter
/// does, with no panic on stderr.
#[test]
fn a_closed_stdout_ends_list_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = splitbrain()
        .arg("list")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{:?} {stderr}",
        out.status
    );
}

#[test]
fn list_names_targets_workloads_models_and_bugs() {
    let out = splitbrain().arg("list").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "kv",
        "register",
        "append",
        "cas-register",
        "stale-read",
        "partition",
        "strict-serializable",
        "exec",
        "docs/http-contract.md",
    ] {
        assert!(text.contains(word), "list lacks {word}:\n{text}");
    }
}

#[test]
fn short_test_run_is_valid_and_stores_everything() {
    let store = tempfile::tempdir().unwrap();
    let out = splitbrain()
        .args([
            "test",
            "--nodes",
            "3",
            "--time-limit",
            "5",
            "--nemesis",
            "none",
            "--seed",
            "7",
            "--no-progress",
        ])
        .arg("--store")
        .arg(store.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("valid"), "{stdout}");
    let run = store.path().join("latest");
    for f in [
        "test.json",
        "history.jsonl",
        "results.json",
        "report.html",
        "nodes/n1/node.log",
    ] {
        assert!(run.join(f).exists(), "missing {f}");
    }
    let test: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("test.json")).unwrap()).unwrap();
    assert_eq!(test["seed"], 7);
    assert!(processes_mentioning(&store.path().display().to_string()).is_empty());
}

#[test]
fn sigint_mid_run_tears_down_and_leaves_a_parseable_history() {
    let store = tempfile::tempdir().unwrap();
    let marker = store.path().display().to_string();
    let mut child = splitbrain()
        .args([
            "test",
            "--nodes",
            "3",
            "--time-limit",
            "60",
            "--nemesis",
            "partition,kill,pause",
            "--nemesis-interval",
            "1",
            "--no-progress",
        ])
        .arg("--store")
        .arg(store.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the run is well under way: nodes up and ops recorded.
    let history = store.path().join("latest/history.jsonl");
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        let lines = std::fs::read_to_string(&history)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if lines > 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !processes_mentioning(&marker).is_empty(),
        "no node processes were started"
    );
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let code = wait_with_bound(&mut child, Duration::from_secs(30));
    assert!(
        code.is_some(),
        "splitbrain did not exit within 30 s of SIGINT"
    );
    assert!(
        processes_mentioning(&marker).is_empty(),
        "node processes survived SIGINT"
    );
    let file = std::fs::File::open(&history).unwrap();
    let mut n = 0;
    for line in std::io::BufReader::new(file).lines() {
        let line = line.unwrap();
        serde_json::from_str::<serde_json::Value>(&line)
            .unwrap_or_else(|e| panic!("line {}: {e}: {line}", n + 1));
        n += 1;
    }
    assert!(n > 200);
    assert!(store.path().join("latest/results.json").exists());
}

#[test]
fn a_cluster_that_cannot_start_exits_4_and_still_writes_results() {
    let store = tempfile::tempdir().unwrap();
    // `false` exits at once: the node never becomes ready.
    let out = splitbrain()
        .args([
            "test",
            "--nodes",
            "1",
            "--time-limit",
            "2",
            "--nemesis",
            "none",
            "--no-progress",
            "--target-bin",
            "/bin/false",
        ])
        .arg("--store")
        .arg(store.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "stderr: {stderr}");
    assert!(stderr.contains("starting the cluster"), "{stderr}");
    let results = store.path().join("latest/results.json");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&results).expect("results.json written")).unwrap();
    assert_eq!(v["valid"], "unknown", "{v}");
    assert_eq!(v["results"][0]["checker"], "cluster");
    assert!(v["incomplete"].as_str().unwrap().contains("did not start"));
}

#[test]
fn check_of_a_run_directory_uses_the_consistency_model_the_run_required() {
    // A history recorded from the 2PC database in read-committed mode: it keeps read
    // committed and breaks serializability.
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../checkers/tests/data/txn/read-committed.jsonl");
    let run = tempfile::tempdir().unwrap();
    std::fs::copy(&recorded, run.path().join("history.jsonl")).unwrap();
    std::fs::write(
        run.path().join("test.json"),
        r#"{"workload": "list-append", "consistency_model": "read-committed"}"#,
    )
    .unwrap();
    let status = |extra: &[&str]| {
        splitbrain()
            .arg("check")
            .arg(run.path())
            .args(extra)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(status(&[]), Some(0));
    let first = std::fs::read(run.path().join("results.json")).unwrap();
    assert_eq!(status(&["--consistency-model", "serializable"]), Some(1));
    // The first check is the run's record: the second is stored beside it, marked current.
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.path().join("results.json")).unwrap()).unwrap();
    assert_eq!(results["results"][0]["valid"], true, "{results}");
    let original: serde_json::Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(results["results"], original["results"]);
    let current = results["current"].as_str().expect("a current check");
    assert!(current.starts_with("checks/"), "{current}");
    let recheck: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run.path().join(current).join("results.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(recheck["results"][0]["valid"], false);
    assert!(run.path().join(current).join("report.html").is_file());
    assert_eq!(results["checks"][0]["valid"], false);
}

/// A run directory made by `check` (no cluster): a register history whose one read
/// returns `read` after a write of 1 (so 1 is valid, anything else invalid).
fn checked_run(store: &Path, name: &str, read: u64, bug: &str) -> PathBuf {
    let run = store.join(name).join("20261201T000000");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("history.jsonl"),
        format!(
            "{{\"process\":0,\"type\":\"invoke\",\"f\":\"write\",\"value\":1,\"time\":0}}\n\
             {{\"process\":0,\"type\":\"ok\",\"f\":\"write\",\"value\":1,\"time\":1000000}}\n\
             {{\"process\":1,\"type\":\"invoke\",\"f\":\"read\",\"value\":null,\"time\":2000000}}\n\
             {{\"process\":1,\"type\":\"ok\",\"f\":\"read\",\"value\":{read},\"time\":3000000}}\n"
        ),
    )
    .unwrap();
    let bugs = if bug.is_empty() { vec![] } else { vec![bug] };
    let spec = serde_json::json!({"target": "kv", "workload": "register", "bugs": bugs,
        "nemesis": ["none"], "seed": 3, "nodes": 3});
    std::fs::write(run.join("test.json"), spec.to_string()).unwrap();
    let out = splitbrain()
        .args(["check", "--model", "register"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(run.join("results.json").is_file(), "{out:?}");
    run
}

#[test]
fn compare_lays_runs_side_by_side_and_names_regressions_against_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let good = checked_run(dir.path(), "kv-good", 1, "");
    let bad = checked_run(dir.path(), "kv-bad", 0, "stale-read");
    let out = splitbrain()
        .args(["compare", "--format", "markdown", "--baseline"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The Markdown table's header cell, its padding folded to one space.
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(folded.contains("| bugs Δ |"), "{text}");
    assert!(
        text.contains("**stale-read**") && text.contains("**INVALID**"),
        "{text}"
    );
    assert!(
        text.contains("kv-bad/20261201T000000: verdict INVALID where the baseline was valid"),
        "{text}"
    );
    // Without a baseline nothing is a regression; a test directory means its latest run
    // only when it has one.
    let out = splitbrain()
        .arg("compare")
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = splitbrain()
        .arg("compare")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a run directory"));
}

/// One HTTP/1.1 GET over a raw socket, so the path reaches the server exactly as written
/// (a client library would normalise `..` away). Returns the status and the body.
fn raw_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[test]
fn serve_lists_runs_serves_reports_and_refuses_to_leave_the_store() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "do not serve").unwrap();
    let store = tempfile::tempdir().unwrap();
    let good = checked_run(store.path(), "kv-good", 1, "");
    checked_run(store.path(), "kv-bad", 0, "stale-read");
    std::fs::write(good.join("report.html"), "<html>the report</html>").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), good.join("escape.txt")).unwrap();
    let mut child = splitbrain()
        .args(["serve", "--listen", "127.0.0.1:0", "--store"])
        .arg(store.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let check = std::panic::catch_unwind(|| {
        let addr = first
            .split("http://")
            .nth(1)
            .map(|a| a.trim().trim_end_matches('/').to_string())
            .unwrap_or_else(|| panic!("no address in {first:?}"));
        let (code, page) = raw_get(&addr, "/");
        assert_eq!(code, 200, "{page}");
        assert!(
            page.contains("kv-good/20261201T000000") && page.contains("kv-bad/20261201T000000")
        );
        let (_, invalid) = raw_get(&addr, "/?verdict=invalid");
        assert!(invalid.contains("kv-bad/") && !invalid.contains("kv-good/20261201T000000/report"));
        let (code, report) = raw_get(&addr, "/runs/kv-good/20261201T000000/report.html");
        assert_eq!(code, 200);
        assert!(report.contains("the report") && report.contains("text/html"));
        let (code, _) = raw_get(&addr, "/runs/kv-good/20261201T000000/history.jsonl");
        assert_eq!(code, 200);
        for attack in [
            "/runs/../../../etc/passwd",
            "/runs/kv-good/..%2f..%2f..%2fetc%2fpasswd",
            "/runs/%2e%2e/%2e%2e/etc/passwd",
            "/runs/%2fetc%2fpasswd",
            "/runs/kv-good/20261201T000000/escape.txt",
            "/runs/kv-good/20261201T000000/missing",
        ] {
            let (code, body) = raw_get(&addr, attack);
            assert_eq!(code, 404, "{attack}: {body}");
            assert!(
                !body.contains("do not serve") && !body.contains("root:"),
                "{attack}"
            );
        }
    });
    let _ = child.kill();
    let _ = child.wait();
    if let Err(e) = check {
        std::panic::resume_unwind(e);
    }
}

/// A stored run that was interrupted, and one that was hollow, keep being so when checked
/// again: the re-check is stored beside the first results, which stay on disk.
#[test]
fn a_recheck_of_an_interrupted_or_hollow_run_keeps_what_the_run_was() {
    let dir = tempfile::tempdir().unwrap();
    // Interrupted: a complete, linearizable history, but the run was stopped by SIGINT.
    let interrupted = checked_run(dir.path(), "kv-stopped", 1, "");
    let results = interrupted.join("results.json");
    let mut first: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&results).unwrap()).unwrap();
    first["incomplete"] = "interrupted (SIGINT)".into();
    std::fs::write(&results, serde_json::to_vec_pretty(&first).unwrap()).unwrap();
    let out = splitbrain()
        .args(["check", "--model", "register"])
        .arg(&interrupted)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&results).unwrap()).unwrap();
    assert_eq!(record["incomplete"], "interrupted (SIGINT)");
    let current = interrupted.join(record["current"].as_str().unwrap());
    let recheck: serde_json::Value =
        serde_json::from_slice(&std::fs::read(current.join("results.json")).unwrap()).unwrap();
    assert_eq!(recheck["incomplete"], "interrupted (SIGINT)", "{recheck}");

    // Hollow: every read failed; the first check said unknown (exit 3), and so does the next.
    let hollow = dir.path().join("kv-hollow/20261201T000000");
    std::fs::create_dir_all(&hollow).unwrap();
    std::fs::write(
        hollow.join("history.jsonl"),
        "{\"process\":0,\"type\":\"invoke\",\"f\":\"write\",\"value\":1,\"time\":0}\n\
         {\"process\":0,\"type\":\"ok\",\"f\":\"write\",\"value\":1,\"time\":1000000}\n\
         {\"process\":1,\"type\":\"invoke\",\"f\":\"read\",\"value\":null,\"time\":2000000}\n\
         {\"process\":1,\"type\":\"fail\",\"f\":\"read\",\"value\":null,\"time\":3000000}\n",
    )
    .unwrap();
    std::fs::write(hollow.join("test.json"), r#"{"workload": "register"}"#).unwrap();
    let check = || {
        splitbrain()
            .arg("check")
            .arg(&hollow)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(check(), Some(3));
    let first = std::fs::read(hollow.join("results.json")).unwrap();
    assert_eq!(check(), Some(3));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(hollow.join("results.json")).unwrap()).unwrap();
    let original: serde_json::Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(record["results"], original["results"]);
    assert_eq!(record["checks"][0]["valid"], "unknown");
    let recheck: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            hollow
                .join(record["current"].as_str().unwrap())
                .join("results.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let hollow_result = recheck["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "hollow-run")
        .expect("the hollow-run rule applies on re-check");
    assert_eq!(hollow_result["valid"], "unknown");
}

/// A stored run that asked for a fault the history shows never took effect is not valid.
#[test]
fn a_run_whose_requested_fault_never_took_effect_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let run = checked_run(dir.path(), "kv-untested", 1, "");
    let spec = serde_json::json!({"target": "kv", "workload": "register",
        "nemesis": ["partition", "kill"], "seed": 3, "nodes": 3});
    std::fs::write(run.join("test.json"), spec.to_string()).unwrap();
    let out = splitbrain()
        .args(["check", "--model", "register", "--format", "json"])
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let faults = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["checker"] == "fault-coverage")
        .expect("a fault-coverage result");
    let why = faults["explanation"].as_str().unwrap();
    assert!(
        why.contains("not exercised: kill (never started), partition (never started)"),
        "{why}"
    );
}

#[test]
fn shrink_cuts_a_failing_history_to_a_run_directory_that_still_fails_alike() {
    let Some(data) = data_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("etcd_001.log");
    std::fs::copy(data.join("porcupine/jepsen/etcd_001.log"), &file).unwrap();
    let out = splitbrain()
        .arg("shrink")
        .arg("--history")
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ops 172 -> "), "{stdout}");
    assert!(stdout.contains("1-minimal"), "{stdout}");
    let shrunk = dir.path().join("etcd_001.log.shrunk");
    let lines = std::fs::read_to_string(shrunk.join("history.jsonl")).unwrap();
    let ops = lines.lines().count();
    assert!((2..172).contains(&ops), "{ops} ops");
    let sizes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(shrunk.join("shrink.json")).unwrap()).unwrap();
    assert_eq!(sizes["ops_after"].as_u64(), Some(ops as u64));
    // The shrunk run directory is a run like any other: checked again, it still fails.
    let again = splitbrain()
        .args(["check", "--model", "cas-register"])
        .arg(&shrunk)
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );

    // A history no checker finds invalid has nothing to shrink: its own verdict's code.
    let valid = dir.path().join("etcd_002.log");
    std::fs::copy(data.join("porcupine/jepsen/etcd_002.log"), &valid).unwrap();
    let out = splitbrain()
        .arg("shrink")
        .arg("--history")
        .arg(&valid)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to shrink"));
    // Input that is not a history is refused, as by check.
    let garbage = dir.path().join("garbage.txt");
    std::fs::write(&garbage, "hello\nnot a history\n").unwrap();
    let out = splitbrain()
        .arg("shrink")
        .arg("--history")
        .arg(&garbage)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    // An anomaly the checker does not name is a usage error.
    let out = splitbrain()
        .args(["shrink", "--anomaly", "G2-item", "--history"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
