//! `live.json`: a running test's state in its run directory — elapsed time, op counts, the
//! active fault and the anomalies the online check has found — rewritten twice a second
//! while the main phase runs, for `splitbrain serve`'s live page (`/live/<test>/<run>`)
//! and anything else that wants to watch a run from outside the process.
//!
//! The file is replaced atomically (written beside, then renamed), so a reader never sees
//! half of it. It stays after the run with the state it ended in; `results.json` beside it
//! says the run was checked. A run whose process died leaves `updated_unix_ms` old, which
//! the page shows as stale rather than running.

use crate::run::recorder::LiveCounts;
pub use splitbrain_reports::LiveStatus;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The file's name inside a run directory.
pub const LIVE_FILE: &str = "live.json";

/// How often the file is rewritten while the main phase runs.
const PERIOD: Duration = Duration::from_millis(500);

/// Keeps `live.json` current while the main phase runs.
pub struct LiveStatusFile {
    path: PathBuf,
    snapshot: Arc<dyn Fn(&str) -> LiveStatus + Send + Sync>,
    ticker: tokio::task::JoinHandle<()>,
}

impl LiveStatusFile {
    /// Starts rewriting `run_dir/live.json` from `counts` and `active` (the fault line).
    /// Must be called inside a tokio runtime.
    pub fn start(
        run_dir: &Path,
        time_limit: Duration,
        counts: Arc<LiveCounts>,
        active: Arc<Mutex<String>>,
    ) -> LiveStatusFile {
        let path = run_dir.join(LIVE_FILE);
        let started = Instant::now();
        let snapshot: Arc<dyn Fn(&str) -> LiveStatus + Send + Sync> =
            Arc::new(move |state: &str| {
                let fault = active
                    .lock()
                    .map(|a| a.clone())
                    .unwrap_or_else(|e| e.into_inner().clone());
                LiveStatus {
                    state: state.to_string(),
                    elapsed_s: started.elapsed().as_secs_f64(),
                    time_limit_s: time_limit.as_secs_f64(),
                    ok: counts.ok.load(Relaxed),
                    fail: counts.fail.load(Relaxed),
                    info: counts.info.load(Relaxed),
                    fault: if fault.is_empty() {
                        "none".into()
                    } else {
                        fault
                    },
                    anomalies: counts
                        .anomalies
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone(),
                    updated_unix_ms: chrono::Utc::now().timestamp_millis(),
                }
            });
        let (p, snap) = (path.clone(), snapshot.clone());
        let ticker = tokio::spawn(async move {
            let mut warned = false;
            loop {
                if let Err(e) = write_status(&p, &snap("running")) {
                    if !warned {
                        eprintln!("splitbrain: writing {}: {e}", p.display());
                        warned = true;
                    }
                }
                tokio::time::sleep(PERIOD).await;
            }
        });
        LiveStatusFile {
            path,
            snapshot,
            ticker,
        }
    }

    /// Stops the ticker and writes the last state, `checking`: the main phase is over.
    pub fn finish(&self) {
        self.ticker.abort();
        if let Err(e) = write_status(&self.path, &(self.snapshot)("checking")) {
            eprintln!("splitbrain: writing {}: {e}", self.path.display());
        }
    }
}

impl Drop for LiveStatusFile {
    fn drop(&mut self) {
        self.ticker.abort();
    }
}

/// Writes `status` to `path` through a temporary file and a rename.
pub fn write_status(path: &Path, status: &LiveStatus) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(status)?)?;
    std::fs::rename(&tmp, path)
}

/// Reads a run directory's `live.json`, if it has one that parses.
pub fn read_status(run_dir: &Path) -> Option<LiveStatus> {
    let bytes = std::fs::read(run_dir.join(LIVE_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_file_follows_the_counts_and_ends_checking() {
        let dir = tempfile::tempdir().unwrap();
        let counts = Arc::new(LiveCounts::default());
        let active = Arc::new(Mutex::new("partition n1".to_string()));
        counts.ok.store(7, Relaxed);
        counts
            .anomalies
            .lock()
            .unwrap()
            .push("linearizable: key 3 INVALID at 1.2 s".into());
        let live = LiveStatusFile::start(
            dir.path(),
            Duration::from_secs(30),
            counts.clone(),
            active.clone(),
        );
        // The ticker writes at once; wait for the first file rather than for a time.
        let mut first = None;
        for _ in 0..200 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(10)).await;
            if let Some(s) = read_status(dir.path()) {
                first = Some(s);
                break;
            }
        }
        let first = first.expect("live.json was never written");
        assert_eq!(first.state, "running");
        assert_eq!((first.ok, first.fail, first.info), (7, 0, 0));
        assert_eq!(first.fault, "partition n1");
        assert_eq!(first.anomalies, ["linearizable: key 3 INVALID at 1.2 s"]);
        assert_eq!(first.time_limit_s, 30.0);

        counts.fail.store(2, Relaxed);
        active.lock().unwrap().clear();
        live.finish();
        let last = read_status(dir.path()).unwrap();
        assert_eq!(last.state, "checking");
        assert_eq!((last.ok, last.fail), (7, 2));
        assert_eq!(last.fault, "none");
        assert!(last.updated_unix_ms >= first.updated_unix_ms);
        assert!(!dir.path().join("live.json.tmp").exists());
    }

    #[test]
    fn a_missing_or_garbled_file_reads_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_status(dir.path()), None);
        std::fs::write(dir.path().join(LIVE_FILE), "{not json").unwrap();
        assert_eq!(read_status(dir.path()), None);
    }
}
