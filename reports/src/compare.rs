//! `splitbrain compare`: one table across runs — options, faults, verdicts, anomalies,
//! availability, latency and throughput — with the columns that differ marked, and, against
//! a baseline run, the regressions named.
//!
//! The harness reads each run's `test.json` and `results.json` into [`ComparedRun`]s; this
//! module only lays them side by side, so it works the same for two seeds of one system and
//! for one seed and plan on two implementations.

use crate::RunSummary;
use serde::Serialize;
use splitbrain_checkers::table::Table;
use splitbrain_checkers::Validity;

/// What a run was asked to do, as far as a comparison shows it (from `test.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunOptions {
    /// `--target`.
    pub target: String,
    /// `--workload`.
    pub workload: String,
    /// Read mode, or the txn target's isolation level.
    pub read_mode: Option<String>,
    /// Bugs enabled.
    pub bugs: Vec<String>,
    /// Fault kinds (`--nemesis`), or `plan` when a plan file drove the faults.
    pub faults: Vec<String>,
    /// Nodes.
    pub nodes: Option<usize>,
    /// Server settings (`--setting NAME=VALUE`), for database targets.
    pub settings: Vec<String>,
    /// Seed.
    pub seed: Option<u64>,
}

/// One run to compare: a label (its directory), what it was asked to do and its results.
#[derive(Debug, Clone)]
pub struct ComparedRun {
    /// How the table names the run (its run directory, shortened).
    pub label: String,
    /// The run's options.
    pub options: RunOptions,
    /// Its `results.json`.
    pub summary: RunSummary,
}

/// How far a run may fall behind the baseline before it counts as a regression.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RegressionBounds {
    /// p99 latency may grow by this factor (1.5 = 50% slower) ...
    pub latency_factor: f64,
    /// ... plus this many milliseconds, so sub-millisecond noise is not a regression.
    pub latency_slack_ms: f64,
    /// Throughput may shrink to this fraction of the baseline's.
    pub throughput_fraction: f64,
    /// Availability (share of ok ops) may drop by this many percentage points.
    pub availability_points: f64,
}

impl Default for RegressionBounds {
    fn default() -> Self {
        RegressionBounds {
            latency_factor: 1.5,
            latency_slack_ms: 1.0,
            throughput_fraction: 0.8,
            availability_points: 5.0,
        }
    }
}

/// The comparison: a header, one row per run, which columns differ, and regressions.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Column names.
    pub columns: Vec<String>,
    /// One row per run, cells as text, in the order the runs were given.
    pub rows: Vec<Vec<String>>,
    /// Per column: whether its value differs between runs.
    pub differs: Vec<bool>,
    /// The baseline's label, when one was given (it is also the first row).
    pub baseline: Option<String>,
    /// Regressions against the baseline, one line each: `run: what got worse`.
    pub regressions: Vec<String>,
}

/// Column names that are fixed; one column per checker follows `verdict`.
const LEADING: [&str; 10] = [
    "run",
    "target",
    "nodes",
    "workload",
    "read mode",
    "settings",
    "bugs",
    "faults",
    "seed",
    "verdict",
];
const TRAILING: [&str; 5] = ["ops", "availability", "p50 ms", "p99 ms", "ok ops/s"];

/// Lays the runs side by side. With a baseline, it becomes the first row and every other
/// run is checked against it within `bounds`.
pub fn compare(
    runs: &[ComparedRun],
    baseline: Option<&ComparedRun>,
    bounds: RegressionBounds,
) -> Comparison {
    let all: Vec<&ComparedRun> = baseline.into_iter().chain(runs.iter()).collect();
    // Checkers in the order they first appear, so related runs line up.
    let mut checkers: Vec<String> = Vec::new();
    for run in &all {
        for r in &run.summary.results {
            if !checkers.contains(&r.checker) {
                checkers.push(r.checker.clone());
            }
        }
    }
    let mut columns: Vec<String> = LEADING.iter().map(|c| c.to_string()).collect();
    columns.extend(checkers.iter().cloned());
    columns.extend(TRAILING.iter().map(|c| c.to_string()));
    let rows: Vec<Vec<String>> = all.iter().map(|run| row(run, &checkers)).collect();
    // The label column always differs; it is the row's name, not a difference. Measured
    // figures differ only beyond run-to-run noise (FIGURE_TOLERANCE), options and verdicts
    // on any change.
    let first_figure = columns.len() - TRAILING.len();
    let differs = (0..columns.len())
        .map(|c| {
            let column: Vec<&str> = rows.iter().map(|r| r[c].as_str()).collect();
            match c {
                0 => false,
                c if c >= first_figure => figures_differ(&column),
                _ => column.iter().any(|v| *v != column[0]),
            }
        })
        .collect();
    let regressions = match baseline {
        Some(base) => runs
            .iter()
            .flat_map(|run| {
                regressions(base, run, bounds)
                    .into_iter()
                    .map(move |why| format!("{}: {why}", run.label))
            })
            .collect(),
        None => Vec::new(),
    };
    Comparison {
        columns,
        rows,
        differs,
        baseline: baseline.map(|b| b.label.clone()),
        regressions,
    }
}

/// Measured figures closer than this (relative to the larger) count as the same.
pub const FIGURE_TOLERANCE: f64 = 0.10;

/// Whether figures (`12.5`, `97.0%`) spread by more than [`FIGURE_TOLERANCE`].
fn figures_differ(column: &[&str]) -> bool {
    let values: Vec<f64> = column
        .iter()
        .filter_map(|v| v.trim_end_matches('%').parse().ok())
        .collect();
    let max = values.iter().cloned().fold(f64::MIN, f64::max);
    let min = values.iter().cloned().fold(f64::MAX, f64::min);
    values.len() > 1 && max - min > FIGURE_TOLERANCE * max.abs()
}

fn row(run: &ComparedRun, checkers: &[String]) -> Vec<String> {
    let o = &run.options;
    let s = &run.summary;
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(",")
        }
    };
    let mut cells = vec![
        run.label.clone(),
        o.target.clone(),
        o.nodes.map_or_else(|| "-".into(), |n| n.to_string()),
        o.workload.clone(),
        o.read_mode.clone().unwrap_or_else(|| "-".into()),
        list(&o.settings),
        list(&o.bugs),
        list(&o.faults),
        o.seed.map_or_else(|| "-".into(), |s| s.to_string()),
        verdict_text(s),
    ];
    for name in checkers {
        cells.push(match s.results.iter().find(|r| &r.checker == name) {
            None => "-".into(),
            Some(r) => checker_cell(r),
        });
    }
    let st = &s.stats;
    cells.extend([
        st.ops.to_string(),
        format!("{:.1}%", st.availability * 100.0),
        format!("{:.2}", st.latency_ms.p50),
        format!("{:.2}", st.latency_ms.p99),
        format!("{:.0}", st.throughput),
    ]);
    cells
}

/// A checker's verdict, the anomalies it found and the weakest consistency models they
/// rule out (Elle's `not`): runs of one isolation-level name on different databases are
/// told apart by what they are not, whatever model each was judged against.
fn checker_cell(r: &splitbrain_checkers::CheckResult) -> String {
    let mut detail = r.anomaly_types.join(", ");
    if !r.not.is_empty() {
        if !detail.is_empty() {
            detail.push_str("; ");
        }
        detail.push_str(&format!("not {}", r.not.join(", ")));
    }
    if detail.is_empty() {
        r.valid.label().to_string()
    } else {
        format!("{} ({detail})", r.valid.label())
    }
}

fn verdict_text(s: &RunSummary) -> String {
    match &s.incomplete {
        Some(_) => format!("{} (incomplete)", s.valid.label()),
        None => s.valid.label().to_string(),
    }
}

/// A verdict's rank: a move to a higher rank is a regression.
fn badness(v: Validity) -> u8 {
    match v {
        Validity::Valid => 0,
        Validity::Unknown => 1,
        Validity::Invalid => 2,
    }
}

/// What got worse in `run` than in `base`.
fn regressions(base: &ComparedRun, run: &ComparedRun, b: RegressionBounds) -> Vec<String> {
    let mut out = Vec::new();
    let (bs, rs) = (&base.summary, &run.summary);
    if badness(rs.valid) > badness(bs.valid) {
        out.push(format!(
            "verdict {} where the baseline was {}",
            rs.valid.label(),
            bs.valid.label()
        ));
    }
    for r in &rs.results {
        let before = bs.results.iter().find(|x| x.checker == r.checker);
        if let Some(before) = before {
            if badness(r.valid) > badness(before.valid) {
                out.push(format!(
                    "checker {} {} where the baseline was {}",
                    r.checker,
                    r.valid.label(),
                    before.valid.label()
                ));
            }
        }
        let new: Vec<&String> = r
            .anomaly_types
            .iter()
            .filter(|a| before.is_none_or(|x| !x.anomaly_types.contains(a)))
            .collect();
        if !new.is_empty() {
            let names: Vec<&str> = new.iter().map(|a| a.as_str()).collect();
            out.push(format!(
                "checker {} finds {} not in the baseline",
                r.checker,
                names.join(", ")
            ));
        }
    }
    let (bl, rl) = (bs.stats.latency_ms.p99, rs.stats.latency_ms.p99);
    if rl > bl * b.latency_factor + b.latency_slack_ms {
        out.push(format!("p99 latency {rl:.2} ms against {bl:.2} ms"));
    }
    let (bt, rt) = (bs.stats.throughput, rs.stats.throughput);
    if rt < bt * b.throughput_fraction {
        out.push(format!("throughput {rt:.0} ok ops/s against {bt:.0}"));
    }
    let (ba, ra) = (bs.stats.availability * 100.0, rs.stats.availability * 100.0);
    if ra < ba - b.availability_points {
        out.push(format!("availability {ra:.1}% against {ba:.1}%"));
    }
    out
}

impl Comparison {
    /// A terminal table; the names of columns that differ carry a `*`.
    pub fn terminal(&self) -> String {
        let mut table = Table::new(self.columns.iter().zip(&self.differs).map(|(c, d)| {
            if *d {
                format!("{c} *")
            } else {
                c.clone()
            }
        }));
        for r in &self.rows {
            table.row(r.iter().cloned());
        }
        let mut out = table.boxed();
        out.push_str("\n* differs between runs");
        out.push_str(&self.regression_text());
        out
    }

    /// Markdown fit for a pull-request comment: cells of differing columns in bold.
    pub fn markdown(&self) -> String {
        let mut table = Table::new(self.columns.iter().zip(&self.differs).map(|(c, d)| {
            if *d {
                format!("{c} Δ")
            } else {
                c.clone()
            }
        }));
        for r in &self.rows {
            table.row(r.iter().zip(&self.differs).map(|(v, d)| {
                if *d {
                    format!("**{v}**")
                } else {
                    v.clone()
                }
            }));
        }
        let mut out = table.markdown();
        out.push_str("\nΔ: differs between runs.\n");
        out.push_str(&self.regression_text());
        out
    }

    /// A self-contained HTML page with the table; differing cells highlighted.
    pub fn html(&self) -> String {
        crate::compare_html::render(self)
    }

    fn regression_text(&self) -> String {
        match &self.baseline {
            None => String::new(),
            Some(base) if self.regressions.is_empty() => {
                format!("\nNo regression against the baseline {base}.\n")
            }
            Some(base) => {
                let mut out = format!("\nRegressions against the baseline {base}:\n");
                for r in &self.regressions {
                    out.push_str(&format!("- {r}\n"));
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HistoryStats, Latency};
    use splitbrain_checkers::CheckResult;

    fn run(
        label: &str,
        bug: Option<&str>,
        valid: Validity,
        anomalies: &[&str],
        p99: f64,
    ) -> ComparedRun {
        let mut result = CheckResult::new("linearizable", valid, "");
        result.anomaly_types = anomalies.iter().map(|a| a.to_string()).collect();
        let stats = HistoryStats {
            ops: 1000,
            ok: 900,
            availability: 0.9,
            throughput: 100.0,
            latency_ms: Latency {
                p50: 1.0,
                p95: 2.0,
                p99,
                max: p99,
            },
            ..HistoryStats::default()
        };
        ComparedRun {
            label: label.into(),
            options: RunOptions {
                target: "kv".into(),
                workload: "register".into(),
                bugs: bug.map(|b| vec![b.to_string()]).unwrap_or_default(),
                faults: vec!["partition".into()],
                seed: Some(1),
                ..RunOptions::default()
            },
            summary: RunSummary::new(label.into(), None, vec![result], stats, Some(1)),
        }
    }

    #[test]
    fn marks_only_the_columns_that_differ() {
        let a = run("a", None, Validity::Valid, &[], 3.0);
        let b = run(
            "b",
            Some("stale-read"),
            Validity::Invalid,
            &["nonlinearizable"],
            3.0,
        );
        let c = compare(&[a, b], None, RegressionBounds::default());
        let differing: Vec<&str> = c
            .columns
            .iter()
            .zip(&c.differs)
            .filter(|(_, d)| **d)
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(differing, ["bugs", "verdict", "linearizable"]);
        let slower = run("c", None, Validity::Valid, &[], 3.3);
        let much_slower = run("d", None, Validity::Valid, &[], 9.0);
        let near = compare(
            &[slower.clone(), run("a", None, Validity::Valid, &[], 3.0)],
            None,
            RegressionBounds::default(),
        );
        assert!(
            !near.differs.iter().any(|d| *d),
            "within 10% is the same: {:?}",
            near.columns
        );
        let far = compare(&[slower, much_slower], None, RegressionBounds::default());
        let p99 = far.columns.iter().position(|c| c == "p99 ms").unwrap();
        assert!(far.differs[p99]);
        let md = c.markdown();
        // The cells, the table's padding folded to one space.
        let folded = md.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(folded.contains("| bugs Δ |"), "{md}");
        assert!(md.contains("**INVALID (nonlinearizable)**"), "{md}");
        assert!(folded.contains("| kv |"), "{md}");
        assert!(c.regressions.is_empty());
        assert!(c.terminal().contains("bugs *"));
    }

    #[test]
    fn names_regressions_against_the_baseline() {
        let base = run("base", None, Validity::Valid, &[], 3.0);
        let same = run("same", None, Validity::Valid, &[], 3.5);
        let worse = run("worse", None, Validity::Invalid, &["G1c"], 30.0);
        let c = compare(&[same, worse], Some(&base), RegressionBounds::default());
        assert_eq!(c.rows[0][0], "base");
        assert_eq!(c.rows.len(), 3);
        assert!(
            c.regressions.iter().all(|r| r.starts_with("worse: ")),
            "{:?}",
            c.regressions
        );
        let text = c.regressions.join("\n");
        assert!(text.contains("verdict INVALID where the baseline was valid"));
        assert!(text.contains("finds G1c not in the baseline"));
        assert!(text.contains("p99 latency 30.00 ms against 3.00 ms"));
        assert!(c
            .markdown()
            .contains("Regressions against the baseline base:"));
    }

    #[test]
    fn a_checker_cell_names_the_models_its_anomalies_rule_out() {
        let mut lost_update = run("mariadb", None, Validity::Invalid, &["lost-update"], 1.0);
        lost_update.summary.results[0].not = vec!["cursor-stability".into()];
        let mut write_skew = run("postgres", None, Validity::Invalid, &["G2-item"], 1.0);
        write_skew.summary.results[0].not = vec!["serializable".into()];
        let c = compare(
            &[lost_update, write_skew],
            None,
            RegressionBounds::default(),
        );
        let column = c.columns.iter().position(|c| c == "linearizable").unwrap();
        assert_eq!(
            c.rows[0][column],
            "INVALID (lost-update; not cursor-stability)"
        );
        assert_eq!(c.rows[1][column], "INVALID (G2-item; not serializable)");
        assert!(c.differs[column]);
        assert!(c.html().contains("not cursor-stability"));
    }

    #[test]
    fn escapes_pipes_in_markdown_cells() {
        let mut a = run("a|b", None, Validity::Valid, &[], 1.0);
        a.options.read_mode = Some("x|y".into());
        let md = compare(&[a], None, RegressionBounds::default()).markdown();
        assert!(md.contains("a\\|b") && md.contains("x\\|y"), "{md}");
    }
}
