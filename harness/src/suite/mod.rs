//! Suites: a declared verification matrix (`splitbrain suite`).
//!
//! A suite file (TOML) lists cells — a target, a workload, test options and seeds — each
//! with the verdict it must give: `valid` for a correct system, `invalid` (optionally with
//! the anomaly types or checkers that must appear) for a known bug. This module parses suite
//! files ([`parse_suite`]), expands cells into test requests ([`Cell::request`], which
//! `run::entry::resolve` validates), judges each run's
//! [`RunSummary`](splitbrain_reports::RunSummary) against its cell ([`judge_run`]), and
//! renders the detection table as terminal text, Markdown, JUnit XML and JSON.
//!
//! Pure data and logic: running a cell is the binary's job (it runs each as `splitbrain
//! test` does, through `run::entry`), so everything here is testable without a cluster.

mod evidence;
mod expect;
mod file;
mod junit;
mod report;
mod table;

#[cfg(test)]
mod fault_schedule_tests;
#[cfg(test)]
mod render_tests;

pub use evidence::{evidence_points, history_times, time_to_detect, EvidencePoint};
pub use expect::{judge_run, Expectation, ExpectedVerdict, MinDetect, RunJudgement, RunVerdict};
pub use file::{parse_suite, Cell, CellOptions, Suite};
pub use junit::junit_xml;
pub use report::{CellReport, RunReport, SuiteReport};
pub use table::{markdown, terminal_table};

/// Why a suite file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// The file is not valid TOML or does not have a suite's shape (toml's message names
    /// the line and column).
    #[error("{origin}: {message}")]
    Parse {
        /// The file (or built-in suite) it came from.
        origin: String,
        /// What was wrong and where.
        message: String,
    },
    /// A cell is well-formed TOML but makes no sense (missing target, duplicate name, ...).
    #[error("{origin}:{line}: {message}")]
    Cell {
        /// The file (or built-in suite) it came from.
        origin: String,
        /// 1-based line of the cell.
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// The suite names no cell at all.
    #[error("{origin}: the suite has no cells (add [[cell]] tables)")]
    Empty {
        /// The file (or built-in suite) it came from.
        origin: String,
    },
}

/// The suites shipped inside the binary: `quick` (CI) and `full` (the whole proof matrix).
pub const BUILT_IN: [(&str, &str); 2] = [
    ("quick", include_str!("../../../suites/quick.toml")),
    ("full", include_str!("../../../suites/full.toml")),
];

/// The text of a built-in suite.
pub fn built_in(name: &str) -> Option<&'static str> {
    BUILT_IN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
