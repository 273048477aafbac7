//! `splitbrain serve`'s live view of a running test, in a real browser: while a KV run's
//! main phase goes on, the store's index lists it as not checked yet and its live page
//! (headless Chromium, following the page's own polling) shows the run's `live.json`:
//! state, op counts, fault; once the run is checked, the page shows results.json's verdict
//! and links the report. Skips, saying so, without `chromium`.

use crate::support;

use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::browser::{browse, chromium};

/// Longest wait for a state of the run (the run itself is 20 s plus start and check).
const WAIT: Duration = Duration::from_secs(120);

/// Kills the child (by its PID, through `Child`) when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(start.elapsed() < WAIT, "waited {WAIT:?} for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The one run directory of `test` in `store`.
fn run_dir(store: &Path, test: &str) -> Option<PathBuf> {
    std::fs::read_dir(store.join(test))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && !p.is_symlink())
}

fn live_json(run: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(run.join("live.json")).ok()?).ok()
}

fn raw_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The text of the element with `id` in a dumped DOM.
fn cell(dom: &str, id: &str) -> String {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in the page"));
    let rest = &dom[start..];
    let open = rest.find('>').unwrap() + 1;
    let close = rest[open..].find('<').unwrap();
    rest[open..open + close].to_string()
}

#[test]
fn the_live_page_follows_a_running_test_then_shows_its_verdict() {
    let Some(browser) = chromium() else {
        support::skip::skip_here(
            "chromium (Debian package chromium) is not installed; the live page was not loaded in a browser",
        );
        return;
    };
    let store = tempfile::tempdir().unwrap();
    let test = Reaped(
        Command::new(env!("CARGO_BIN_EXE_splitbrain"))
            .args(["test", "--target", "kv", "--nodes", "3", "--no-progress"])
            .args(["--nemesis", "partition", "--nemesis-interval", "2"])
            .args(["--time-limit", "20", "--seed", "1", "--store"])
            .arg(store.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut serve = Reaped(
        Command::new(env!("CARGO_BIN_EXE_splitbrain"))
            .args(["serve", "--listen", "127.0.0.1:0", "--store"])
            .arg(store.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut first = String::new();
    std::io::BufReader::new(serve.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .map(|a| a.trim().trim_end_matches('/').to_string())
        .unwrap_or_else(|| panic!("no address in {first:?}"));

    // Running: live.json with ops counted, listed on the index, shown by the page.
    let run = wait_for("the run directory", || run_dir(store.path(), "kv-register"));
    let label = format!("kv-register/{}", run.file_name().unwrap().to_string_lossy());
    wait_for("live.json with ok ops while running", || {
        live_json(&run).filter(|s| s["state"] == "running" && s["ok"].as_u64() > Some(0))
    });
    let index = raw_get(&addr, "/");
    assert!(
        index.contains("Not checked yet") && index.contains(&format!("href=\"/live/{label}\"")),
        "{index}"
    );
    let url = format!("http://{addr}/live/{label}");
    let (dom, stderr) = browse(&browser, &url, &["--dump-dom".to_string()]);
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        console.is_empty(),
        "console output:\n{}",
        console.join("\n")
    );
    // The main phase has most of its 20 s left when the browser starts.
    let now = live_json(&run).unwrap();
    assert_eq!(cell(&dom, "state"), "running", "{dom}");
    let ok: u64 = cell(&dom, "ok").parse().expect("a count of ok ops");
    assert!(ok > 0 && ok <= now["ok"].as_u64().unwrap(), "{dom}");
    assert!(cell(&dom, "elapsed").ends_with("of 20 s"), "{dom}");
    assert_eq!(cell(&dom, "verdict"), "not checked yet");

    // Checked: the verdict from results.json and a link to the report.
    let results: Value = wait_for("results.json", || {
        serde_json::from_slice(&std::fs::read(run.join("results.json")).ok()?).ok()
    });
    let (dom, _) = browse(&browser, &url, &["--dump-dom".to_string()]);
    let verdict = match &results["valid"] {
        Value::Bool(true) => "valid",
        Value::Bool(false) => "INVALID",
        other => other.as_str().unwrap_or("?"),
    };
    assert_eq!(cell(&dom, "verdict"), verdict, "{dom}");
    assert_eq!(cell(&dom, "state"), "checked", "{dom}");
    assert!(
        dom.contains(&format!("href=\"/runs/{label}/report.html\"")),
        "{dom}"
    );
    let last = live_json(&run).unwrap();
    assert_eq!(last["state"], "checking");
    assert_eq!(cell(&dom, "ok"), last["ok"].to_string());
    for anomaly in last["anomalies"].as_array().unwrap() {
        assert!(dom.contains(anomaly.as_str().unwrap()), "{dom}");
    }
    let index = raw_get(&addr, "/");
    assert!(!index.contains("Not checked yet"), "{index}");

    // A run whose process died: live.json says running but was last written a minute ago
    // by the server's clock.
    let dead = store.path().join("kv-dead/20261201T000000");
    std::fs::create_dir_all(&dead).unwrap();
    let mut status = last.clone();
    status["state"] = "running".into();
    status["updated_unix_ms"] = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000)
        .into();
    std::fs::write(dead.join("live.json"), status.to_string()).unwrap();
    let (dom, _) = browse(
        &browser,
        &format!("http://{addr}/live/kv-dead/20261201T000000"),
        &["--dump-dom".to_string()],
    );
    assert!(cell(&dom, "state").starts_with("no update for "), "{dom}");
    drop(test);
}
