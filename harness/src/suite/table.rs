//! The detection table, for the terminal and as Markdown (one builder, two styles).

use super::report::{CellReport, SuiteReport};
use splitbrain_checkers::table::Table;

/// Longest `found` text in the terminal table (Markdown keeps it whole).
const TERMINAL_FOUND_CHARS: usize = 60;

fn rows(report: &SuiteReport, markdown: bool) -> Table {
    let seeds = report.seeds();
    let mut header = vec!["result".to_string(), "cell".to_string()];
    if markdown {
        header.push("flags".to_string());
    }
    header.push("expected".to_string());
    header.extend(seeds.iter().map(|s| format!("seed {s}")));
    header.extend(
        [
            "detected",
            "median time to detect",
            "false positives",
            "misses (seeds)",
            "found",
        ]
        .map(String::from),
    );
    let mut b = Table::new(header);
    for c in &report.cells {
        let mut row = vec![
            if c.passed { "ok" } else { "FAIL" }.to_string(),
            c.name.clone(),
        ];
        if markdown {
            row.push(format!("`{}`", c.flags));
        }
        row.push(c.expected.clone());
        for s in &seeds {
            row.push(
                c.runs
                    .iter()
                    .filter(|r| r.seed == *s)
                    .map(|r| r.judgement.verdict.label())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        row.push(
            c.detected
                .map(|d| format!("{d}/{}", c.runs.len()))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(
            c.median_time_to_detect_s
                .map(|t| format!("{t:.1} s"))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(
            c.false_positives
                .map(|f| f.to_string())
                .unwrap_or_else(|| "-".into()),
        );
        row.push(match c.misses.is_empty() {
            true => "-".into(),
            false => c
                .misses
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        });
        let found = found(c);
        row.push(if markdown {
            found
        } else if found.chars().count() > TERMINAL_FOUND_CHARS {
            let cut: String = found.chars().take(TERMINAL_FOUND_CHARS - 1).collect();
            format!("{cut}…")
        } else {
            found
        });
        b.row(row);
    }
    b
}

/// What the cell's invalid runs named, each once, in order.
fn found(c: &CellReport) -> String {
    let mut all: Vec<&str> = Vec::new();
    for f in c.runs.iter().flat_map(|r| &r.judgement.found) {
        if !all.contains(&f.as_str()) {
            all.push(f);
        }
    }
    all.join(" ")
}

/// Why each failing cell failed, one line each.
fn failures(report: &SuiteReport) -> Vec<String> {
    report
        .cells
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("FAIL {} (line {}): {}", c.name, c.line, c.reason))
        .collect()
}

/// The detection table for a terminal, failing cells first, then why each failed.
pub fn terminal_table(report: &SuiteReport) -> String {
    let mut out = rows(report, false).boxed();
    for line in failures(report) {
        out.push('\n');
        out.push_str(&line);
    }
    out.push('\n');
    out.push_str(&report.headline());
    // The plain closing line CI runners count.
    out.push_str(&format!(
        "\ncells: {} passed, {} failed",
        report.cells_passed,
        report.cells.len() - report.cells_passed
    ));
    out
}

/// The detection table as Markdown (with each cell's flags), for files and CI step
/// summaries.
pub fn markdown(report: &SuiteReport) -> String {
    let t = rows(report, true);
    let mut out = format!(
        "## splitbrain suite `{}`: {}\n\n",
        report.suite,
        if report.passed { "passed" } else { "FAILED" }
    );
    out.push_str(&report.headline());
    out.push_str("\n\n");
    out.push_str(&t.markdown());
    let fails = failures(report);
    if !fails.is_empty() {
        out.push('\n');
        for f in fails {
            out.push_str(&format!("- {}\n", f.replace('|', "\\|")));
        }
    }
    out
}
