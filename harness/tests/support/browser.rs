//! Headless Chromium for the tests that load pages in a real browser (report.html, the
//! live view of `splitbrain serve`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest one browser invocation may take before it is killed.
pub const BROWSER_LIMIT: Duration = Duration::from_secs(90);

pub fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find_map(|name| {
            let ok = Command::new(name)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            ok.then(|| PathBuf::from(name))
        })
}

/// Runs Chromium headless on `url` (`file://...` or `http://...`) with `extra` arguments; returns (stdout, stderr).
/// Chromium runs in its own process group, killed by that id if it overruns.
pub fn browse(browser: &Path, url: &str, extra: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let out = tempfile::NamedTempFile::new().unwrap();
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args([
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdout(out.reopen().unwrap())
        .stderr(err.reopen().unwrap())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > BROWSER_LIMIT {
            // The group id is the browser's pid (process_group(0)).
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_LIMIT:?} on {url}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (
        std::fs::read_to_string(out.path()).unwrap_or_default(),
        std::fs::read_to_string(err.path()).unwrap_or_default(),
    )
}
