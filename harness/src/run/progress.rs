//! The progress bar shown while `splitbrain test` runs: elapsed and remaining time,
//! ok/fail/info counts and the active fault.

use crate::run::recorder::LiveCounts;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running progress display; a no-op when disabled or stderr is not a terminal.
pub struct Progress {
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// Starts the display for a main phase of `total`.
    pub fn start(
        enabled: bool,
        total: Duration,
        counts: Arc<LiveCounts>,
        active: Arc<Mutex<String>>,
    ) -> Progress {
        if !enabled {
            return Progress {
                bar: None,
                ticker: None,
            };
        }
        let bar = ProgressBar::new(total.as_millis() as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {eta} left  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let b = bar.clone();
        let ticker = tokio::spawn(async move {
            let start = std::time::Instant::now();
            loop {
                b.set_position(start.elapsed().as_millis() as u64);
                let fault = active.lock().map(|a| a.clone()).unwrap_or_default();
                // Anomalies the online check found: the latest, and how many in all.
                let anomalies = {
                    let found = counts.anomalies.lock().unwrap_or_else(|e| e.into_inner());
                    match found.as_slice() {
                        [] => String::new(),
                        [one] => format!("  {one}"),
                        [.., last] => format!("  {last} (+{} more)", found.len() - 1),
                    }
                };
                b.set_message(format!(
                    "ok {} fail {} info {}  fault: {}{anomalies}",
                    counts.ok.load(Relaxed),
                    counts.fail.load(Relaxed),
                    counts.info.load(Relaxed),
                    if fault.is_empty() { "none" } else { &fault }
                ));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Progress {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    /// Stops and clears the display.
    pub fn finish(&self) {
        if let Some(t) = &self.ticker {
            t.abort();
        }
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
