//! The results of a suite: per run, per cell (detection rate, time to detect, false
//! positives, misses) and for the whole suite, failing cells first.

use super::expect::{Expectation, ExpectedVerdict, RunJudgement, RunVerdict};
use super::file::{Cell, Suite};
use serde::Serialize;

/// One run of a cell.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// The run's seed.
    pub seed: u64,
    /// Its verdict and whether it met the cell's expectation.
    #[serde(flatten)]
    pub judgement: RunJudgement,
    /// Seconds from the run's start to the first evidence op (invalid runs whose evidence
    /// names an op).
    pub time_to_detect_s: Option<f64>,
    /// The run directory in the store.
    pub run_dir: Option<String>,
    /// Wall-clock seconds the run took, cluster start to check.
    pub wall_s: f64,
}

impl RunReport {
    /// `seed 2: INVALID bank(wrong-total)`: the seed, the verdict and what was found.
    pub fn verdict_line(&self) -> String {
        let mut line = format!("seed {}: {}", self.seed, self.judgement.verdict.label());
        if !self.judgement.found.is_empty() {
            line.push_str(&format!(" {}", self.judgement.found.join(" ")));
        }
        line
    }
}

/// One cell: its runs and what they add up to.
#[derive(Debug, Clone, Serialize)]
pub struct CellReport {
    /// The cell's name.
    pub name: String,
    /// The target it tests.
    pub target: String,
    /// Its `splitbrain test` flags.
    pub flags: String,
    /// Its line in the suite file.
    pub line: usize,
    /// What it must give.
    pub expect: Expectation,
    /// `expect` as a table label.
    pub expected: String,
    /// Its runs, in seed order as listed.
    pub runs: Vec<RunReport>,
    /// Bug cells: runs that detected the bug (with the required anomalies).
    pub detected: Option<usize>,
    /// Runs that must meet the expectation for the cell to pass.
    pub required: usize,
    /// Correct cells: runs judged invalid.
    pub false_positives: Option<usize>,
    /// Seeds of the runs that did not meet the expectation (to rerun with `--seed`).
    pub misses: Vec<u64>,
    /// Median time to detect over the detecting runs that have one, in seconds: their p50
    /// by [`splitbrain_checkers::quantile`]'s nearest rank, a time one of the runs took.
    pub median_time_to_detect_s: Option<f64>,
    /// Whether the cell met its expectation.
    pub passed: bool,
    /// Why not, when it did not.
    pub reason: String,
}

impl CellReport {
    /// Adds up a cell's runs.
    pub fn new(cell: &Cell, runs: Vec<RunReport>) -> CellReport {
        let met = runs.iter().filter(|r| r.judgement.met).count();
        let required = cell.expect.required(runs.len());
        let bug = cell.expect.verdict == ExpectedVerdict::Invalid;
        let mut ttd: Vec<f64> = runs
            .iter()
            .filter(|r| r.judgement.met)
            .filter_map(|r| r.time_to_detect_s)
            .collect();
        ttd.sort_by(f64::total_cmp);
        let median = splitbrain_checkers::quantile::quantile_of_sorted(&ttd, 0.5);
        let misses: Vec<u64> = runs
            .iter()
            .filter(|r| !r.judgement.met)
            .map(|r| r.seed)
            .collect();
        let passed = !runs.is_empty() && met >= required;
        let reason = if passed {
            String::new()
        } else if let Some(r) = runs.iter().find(|r| !r.judgement.met) {
            let head = if bug {
                format!("detected {met}/{}, needs {required}", runs.len())
            } else {
                format!("valid {met}/{}", runs.len())
            };
            format!("{head}; seed {}: {}", r.seed, r.judgement.note)
        } else {
            "no runs".to_string()
        };
        CellReport {
            name: cell.name.clone(),
            target: cell.options.target.clone(),
            flags: cell.flags_line(),
            line: cell.line,
            expect: cell.expect.clone(),
            expected: cell.expect.label(),
            detected: bug.then_some(met),
            required,
            false_positives: (!bug).then(|| {
                runs.iter()
                    .filter(|r| r.judgement.verdict == RunVerdict::Invalid)
                    .count()
            }),
            misses,
            median_time_to_detect_s: median,
            passed,
            reason,
            runs,
        }
    }

    /// Whether some run could not run at all (as opposed to giving the wrong verdict).
    pub fn has_errors(&self) -> bool {
        self.runs
            .iter()
            .any(|r| r.judgement.verdict == RunVerdict::Error)
    }

    /// Whether the cell failed on a verdict (a miss, false positive or unknown), not only
    /// on runs that could not run.
    pub fn failed_on_verdict(&self) -> bool {
        !self.passed
            && self
                .runs
                .iter()
                .any(|r| !r.judgement.met && r.judgement.verdict != RunVerdict::Error)
    }
}

/// A whole suite's results.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteReport {
    /// The suite's name.
    pub suite: String,
    /// Where it came from.
    pub origin: String,
    /// Whether every cell met its expectation.
    pub passed: bool,
    /// Cells that passed / all cells.
    pub cells_passed: usize,
    /// Every cell, failing ones first (otherwise in suite order).
    pub cells: Vec<CellReport>,
    /// Wall-clock seconds for the whole suite.
    pub wall_s: f64,
    /// The machine's load when the suite ended (`/proc/loadavg`), since times stretch on a
    /// shared machine.
    pub load: Option<String>,
}

impl SuiteReport {
    /// Puts the cells together, failing cells first.
    pub fn new(
        suite: &Suite,
        mut cells: Vec<CellReport>,
        wall_s: f64,
        load: Option<String>,
    ) -> SuiteReport {
        cells.sort_by_key(|c| c.passed);
        let cells_passed = cells.iter().filter(|c| c.passed).count();
        SuiteReport {
            suite: suite.name.clone(),
            origin: suite.origin.clone(),
            passed: cells_passed == cells.len(),
            cells_passed,
            cells,
            wall_s,
            load,
        }
    }

    /// The report as pretty JSON.
    pub fn json(&self) -> String {
        // Serializing plain data with string keys cannot fail; fall back to an error
        // object rather than panicking if it ever does.
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
    }

    /// Every seed column the table needs, in first-seen order.
    pub fn seeds(&self) -> Vec<u64> {
        let mut seeds: Vec<u64> = Vec::new();
        for r in self.cells.iter().flat_map(|c| &c.runs) {
            if !seeds.contains(&r.seed) {
                seeds.push(r.seed);
            }
        }
        seeds
    }

    /// One line: `quick: 25/26 cells passed in 512 s (load ...)`.
    pub fn headline(&self) -> String {
        format!(
            "suite {}: {}/{} cells met their expectation in {:.0} s{}",
            self.suite,
            self.cells_passed,
            self.cells.len(),
            self.wall_s,
            self.load
                .as_ref()
                .map(|l| format!(" (load average {l})"))
                .unwrap_or_default()
        )
    }
}
