//! # splitbrain-reports
//!
//! Turns a checked run into things people and machines read: the terminal summary
//! table, `results.json`, a self-contained `report.html`, JUnit XML for CI, the
//! side-by-side comparison of runs (`splitbrain compare`), and the page of
//! `splitbrain bench tail` ([`tail_page`]).
//!
//! Invariants: depends only on `splitbrain-checkers` (never on the harness, tokio or
//! the network); every output is derived from a [`RunSummary`] and the history.

#![warn(missing_docs)]

mod compare;
mod compare_html;
mod net;
mod report;
mod stats;
mod store_index;
mod table;
mod tail;

pub use compare::{compare, ComparedRun, Comparison, RegressionBounds, RunOptions};
pub use net::{NetStats, NodeNetStats, OpTypeNetStats};
pub use report::{
    cycles, fault_label, fault_windows, render_html, repeat_command, Cycle, CycleEdge, FaultWindow,
};
pub use stats::{history_stats, HistoryStats, Latency};
pub use store_index::{directory_html, store_index_html, IndexedRun};
pub use table::summary_table;
pub use tail::{runs_ms, tail_page, TailRun, TAIL_QUANTILES};

use serde::{Deserialize, Serialize};
use splitbrain_checkers::{CheckResult, Validity};

/// Everything results.json holds about one checked run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSummary {
    /// The test's name (e.g. `kv-register`), or the history file for `check`.
    pub test_name: String,
    /// The run directory, if any.
    pub run_dir: Option<String>,
    /// The combined verdict of all checkers.
    pub valid: Validity,
    /// Each checker's result.
    pub results: Vec<CheckResult>,
    /// Figures of the history.
    pub stats: HistoryStats,
    /// The seed of the run, if any.
    pub seed: Option<u64>,
    /// Set when the run was interrupted or hit an error; the verdict covers what was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Message statistics, for targets whose network the harness simulates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetStats>,
    /// Why the main phase ended before its time limit (`--stop-on-anomaly`: the anomaly
    /// the online check found). Absent for runs that ran their course and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
    /// For each checker that found an anomaly: seconds into the run (the history's clock)
    /// when it first knew, online or at the final check. Absent in older files.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub first_known_at_s: std::collections::BTreeMap<String, f64>,
}

impl RunSummary {
    /// Builds a summary, merging the checkers' verdicts.
    pub fn new(
        test_name: String,
        run_dir: Option<String>,
        results: Vec<CheckResult>,
        stats: HistoryStats,
        seed: Option<u64>,
    ) -> RunSummary {
        let valid = results
            .iter()
            .fold(Validity::Valid, |acc, r| acc.merge(r.valid));
        RunSummary {
            test_name,
            run_dir,
            valid,
            results,
            stats,
            seed,
            incomplete: None,
            net: None,
            stopped_early: None,
            first_known_at_s: Default::default(),
        }
    }
}

/// JUnit XML with one test case per checker, for CI systems that read it.
pub fn junit_xml(summary: &RunSummary) -> String {
    let failures = summary
        .results
        .iter()
        .filter(|r| r.valid == Validity::Invalid)
        .count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"{}\" tests=\"{}\" failures=\"{}\">\n",
        xml_escape(&summary.test_name),
        summary.results.len(),
        failures
    );
    for r in &summary.results {
        out.push_str(&format!("  <testcase name=\"{}\">", xml_escape(&r.checker)));
        match r.valid {
            Validity::Valid => {}
            Validity::Invalid => out.push_str(&format!(
                "<failure message=\"invalid\">{}</failure>",
                xml_escape(&r.explanation)
            )),
            Validity::Unknown => out.push_str(&format!(
                "<skipped message=\"unknown\">{}</skipped>",
                xml_escape(&r.explanation)
            )),
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("</testsuite>\n");
    out
}

/// Escapes text for XML and HTML.
pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
