//! JUnit XML: one test case per cell, a `<failure>` for a cell that missed its expectation.

use super::report::SuiteReport;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::time::Duration;

/// The suite as JUnit XML (one `<testsuite>`, one `<testcase>` per cell with the target as
/// its class name; each run's verdict in `<system-out>`).
pub fn junit_xml(report: &SuiteReport) -> Result<String, quick_junit::SerializeError> {
    let mut suite = TestSuite::new(format!("splitbrain suite {}", report.suite));
    suite.set_time(Duration::from_secs_f64(report.wall_s.max(0.0)));
    for c in &report.cells {
        let status = if c.passed {
            TestCaseStatus::success()
        } else {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(c.reason.clone());
            s.set_type(if c.failed_on_verdict() {
                "expectation-not-met"
            } else {
                "could-not-run"
            });
            s
        };
        let mut case = TestCase::new(c.name.clone(), status);
        case.set_classname(format!("splitbrain.{}", c.target));
        case.set_time(Duration::from_secs_f64(
            c.runs.iter().map(|r| r.wall_s.max(0.0)).sum(),
        ));
        let runs: Vec<String> = c
            .runs
            .iter()
            .map(|r| {
                let mut line = r.verdict_line();
                if !r.judgement.note.is_empty() {
                    line.push_str(&format!(" -- {}", r.judgement.note));
                }
                if let Some(d) = &r.run_dir {
                    line.push_str(&format!(" [{d}]"));
                }
                line
            })
            .collect();
        case.set_system_out(format!(
            "expected: {}\nflags: {}\n{}",
            c.expected,
            c.flags,
            runs.join("\n")
        ));
        suite.add_test_case(case);
    }
    let mut out = Report::new("splitbrain");
    out.set_time(Duration::from_secs_f64(report.wall_s.max(0.0)));
    out.add_test_suite(suite);
    out.to_string()
}
