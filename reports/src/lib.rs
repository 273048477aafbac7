//! # splitbrain-reports
//!
//! Turns a checked run into things people and machines read: the terminal summary
//! table, `results.json`, a self-contained `report.html`, JUnit XML for CI, the
//! side-by-side comparison of runs (`splitbrain compare`), the page of
//! `splitbrain bench tail` ([`tail_page`]), and `splitbrain serve`'s pages: the store's
//! index and a running test's live view ([`live_html`]).
//!
//! Invariants: depends only on `splitbrain-checkers` (never on the harness, tokio or
//! the network); every output is derived from a [`RunSummary`] and the history.

#![warn(missing_docs)]

mod compare;
mod compare_html;
mod links;
mod live;
mod net;
mod report;
mod stats;
mod store_index;
mod table;
mod tail;

pub use compare::{compare, ComparedRun, Comparison, RegressionBounds, RunOptions};
pub use links::{AskedLink, LinkFault, LinkMeasure, LinkMeasures, LinkWindow};
pub use live::{live_html, LiveStatus};
pub use net::{NetStats, NodeNetStats, OpTypeNetStats};
pub use report::{
    cycles, fault_label, fault_windows, render_html, render_html_with_shrunk, repeat_command,
    Cycle, CycleEdge, FaultWindow, ShrunkFiles,
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
    /// How the run's faults were chosen and what its sampler reached (abstract states,
    /// (state, fault) pairs). Absent for runs without faults and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_search: Option<FaultSearch>,
    /// What the link proxies measured, for runs on SSH hosts with proxied link faults.
    /// Absent otherwise and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<LinkMeasures>,
}

/// How a run's faults were chosen (`--nemesis-search`) and the coverage its sampler
/// recorded: the abstract states the cluster was seen in, and the (state, fault) pairs,
/// a fault started in a state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultSearch {
    /// `random`, `guided`, or `plan` (a `--nemesis-plan` file).
    pub search: String,
    /// Which signals the states were made of, and what was missing.
    pub signals: String,
    /// Samples taken.
    pub samples: u64,
    /// Leader changes seen.
    pub leader_changes: u64,
    /// Distinct abstract states reached.
    pub states: usize,
    /// Distinct (state, fault) pairs reached.
    pub pairs: usize,
    /// Samples per abstract state.
    pub state_counts: std::collections::BTreeMap<String, u64>,
    /// Faults started per pair, keyed `state | fault`.
    pub pair_counts: std::collections::BTreeMap<String, u64>,
    /// The schedule a guided search made, as a plan file in the run directory
    /// (`--nemesis-plan` replays it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_file: Option<String>,
    /// The reward table a guided search started from (`--nemesis-memory`); absent for
    /// random and plan runs and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<SearchMemory>,
}

/// Which memory a guided run started from and whether it added to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchMemory {
    /// The memory file, or `off`.
    pub file: String,
    /// Guided runs it summed when this run started (0: a cold run).
    pub runs: u64,
    /// (state, fault) pairs it held then.
    pub pairs: usize,
    /// Why it was not used or not written, when so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether this run wrote its table back (the memory plus what it tried).
    #[serde(default)]
    pub written: bool,
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
            fault_search: None,
            links: None,
        }
    }
}

/// JUnit XML with one test case per checker, for CI systems that read it: an invalid
/// checker is a `<failure>`, an unknown one `<skipped>`, each with the explanation. Written
/// by `quick-junit`, as the suite's JUnit is.
pub fn junit_xml(summary: &RunSummary) -> Result<String, quick_junit::SerializeError> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut suite = TestSuite::new(summary.test_name.clone());
    for r in &summary.results {
        let status = match r.valid {
            Validity::Valid => TestCaseStatus::success(),
            Validity::Invalid => {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message("invalid")
                    .set_description(r.explanation.clone());
                s
            }
            Validity::Unknown => {
                let mut s = TestCaseStatus::skipped();
                s.set_message("unknown")
                    .set_description(r.explanation.clone());
                s
            }
        };
        suite.add_test_case(TestCase::new(r.checker.clone(), status));
    }
    let mut report = Report::new("splitbrain");
    report.add_test_suite(suite);
    report.to_string()
}

/// Escapes text for XML and HTML.
pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_has_a_case_per_checker_a_failure_per_invalid_and_a_skip_per_unknown() {
        let results = vec![
            CheckResult::new("linearizability", Validity::Valid, "ok"),
            CheckResult::new("elle", Validity::Invalid, "G1c: <a> & \"b\""),
            CheckResult::new("hollow-run", Validity::Unknown, "no read observed"),
        ];
        let summary = RunSummary::new(
            "kv-register".into(),
            None,
            results,
            HistoryStats::default(),
            Some(1),
        );
        let xml = junit_xml(&summary).unwrap();
        assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
        assert_eq!(xml.matches("<failure ").count(), 1, "{xml}");
        assert_eq!(xml.matches("<skipped ").count(), 1, "{xml}");
        assert!(xml.contains("failures=\"1\""), "{xml}");
        // The explanation is escaped, not raw markup.
        assert!(xml.contains("G1c: &lt;a&gt; &amp;"), "{xml}");
    }
}
