//! Tests of the suite's outputs: cell reports, the tables, JUnit and JSON.

use super::*;
use splitbrain_checkers::{CheckResult, Validity};
use splitbrain_reports::{HistoryStats, RunSummary};

const SUITE: &str = r#"
name = "demo"
seeds = [1, 2, 3]
[[cell]]
target = "kv"
expect = "valid"
[[cell]]
name = "txn/flaky"
target = "txn"
bugs = ["unilateral-abort"]
expect = "invalid"
min_detect = "2/3"
[[cell]]
name = "kv/escaped"
target = "kv"
bugs = ["stale-read"]
expect = "invalid"
"#;

fn run(cell: &Cell, seed: u64, valid: Validity, ttd: Option<f64>) -> RunReport {
    let mut r = CheckResult::new("bank", valid, "");
    if valid == Validity::Invalid {
        r.anomaly_types = vec!["wrong-total".into()];
    }
    let s = RunSummary::new(
        "t".into(),
        None,
        vec![r],
        HistoryStats::default(),
        Some(seed),
    );
    RunReport {
        seed,
        judgement: judge_run(&cell.expect, Ok(&s)),
        time_to_detect_s: ttd,
        run_dir: Some(format!("store/{}/{seed}", cell.store_name())),
        wall_s: 1.0,
    }
}

/// kv/correct passes (3/3 valid), txn/flaky passes at 2/3, kv/escaped fails (1/3).
fn report() -> SuiteReport {
    let suite = parse_suite(SUITE, "demo.toml", "demo").unwrap();
    let [correct, flaky, escaped] = [&suite.cells[0], &suite.cells[1], &suite.cells[2]];
    use Validity::*;
    let cells = vec![
        CellReport::new(
            correct,
            (1..=3).map(|s| run(correct, s, Valid, None)).collect(),
        ),
        CellReport::new(
            flaky,
            vec![
                run(flaky, 1, Invalid, Some(4.0)),
                run(flaky, 2, Valid, None),
                run(flaky, 3, Invalid, Some(2.0)),
            ],
        ),
        CellReport::new(
            escaped,
            vec![
                run(escaped, 1, Valid, None),
                run(escaped, 2, Invalid, Some(1.5)),
                run(escaped, 3, Valid, None),
            ],
        ),
    ];
    SuiteReport::new(&suite, cells, 12.0, Some("1.00 2.00 3.00".into()))
}

#[test]
fn cells_add_up_detection_misses_and_false_positives() {
    let r = report();
    assert!(!r.passed);
    assert_eq!(r.cells_passed, 2);
    let names: Vec<&str> = r.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["kv/escaped", "kv/correct", "txn/flaky"],
        "failing cells first"
    );
    let escaped = &r.cells[0];
    assert_eq!((escaped.detected, escaped.required), (Some(1), 3));
    assert_eq!(escaped.misses, [1, 3]);
    assert_eq!(
        escaped.reason,
        "detected 1/3, needs 3; seed 1: missed: the run was valid"
    );
    assert!(escaped.failed_on_verdict());
    let correct = &r.cells[1];
    assert_eq!((correct.false_positives, correct.detected), (Some(0), None));
    let flaky = &r.cells[2];
    assert!(flaky.passed, "2 of 3 meets min_detect 2/3");
    assert_eq!(flaky.misses, [2]);
    assert_eq!(
        flaky.median_time_to_detect_s,
        Some(2.0),
        "the nearest-rank median of 4.0 and 2.0: rank 1, a time one run took"
    );
}

#[test]
fn terminal_table_lists_failures_first_with_their_reasons() {
    let t = terminal_table(&report());
    let escaped = t.find("kv/escaped").unwrap();
    assert!(escaped < t.find("kv/correct").unwrap());
    assert!(t.contains("seed 1") && t.contains("seed 3"));
    assert!(t.contains("1/3") && t.contains("2.0 s") && t.contains("bank(wrong-total)"));
    assert!(t.contains("FAIL kv/escaped (line 13): detected 1/3"), "{t}");
    assert!(t.contains(
        "\nsuite demo: 2/3 cells met their expectation in 12 s (load average 1.00 2.00 3.00)\n"
    ));
    assert!(t.ends_with("\ncells: 2 passed, 1 failed"), "{t}");
}

#[test]
fn markdown_is_a_table_with_flags() {
    let m = markdown(&report());
    assert!(m.starts_with("## splitbrain suite `demo`: FAILED\n"), "{m}");
    assert!(m.contains("\n| result | cell       | flags "), "{m}");
    assert!(
        m.contains("\n|--------|------------|"),
        "a Markdown header rule: {m}"
    );
    assert!(
        m.contains("\n| FAIL   | kv/escaped | `--target kv --bug stale-read`"),
        "{m}"
    );
    assert!(m.contains("- FAIL kv/escaped (line 13)"), "{m}");
}

#[test]
fn junit_has_one_case_per_cell_and_a_failure_for_the_failing_one() {
    let x = junit_xml(&report()).unwrap();
    assert_eq!(x.matches("<testcase ").count(), 3, "{x}");
    assert_eq!(x.matches("<failure").count(), 1, "{x}");
    let case = x.find("name=\"kv/escaped\"").unwrap();
    let failure = x.find("<failure").unwrap();
    assert!(
        failure > case && failure < x.find("name=\"kv/correct\"").unwrap(),
        "{x}"
    );
    assert!(
        x.contains("message=\"detected 1/3, needs 3; seed 1: missed: the run was valid\""),
        "{x}"
    );
    assert!(x.contains("classname=\"splitbrain.txn\""));
    assert!(x.contains("seed 2: INVALID bank(wrong-total)"), "{x}");
}

#[test]
fn json_carries_every_run() {
    let v: serde_json::Value = serde_json::from_str(&report().json()).unwrap();
    assert_eq!(v["passed"], false);
    assert_eq!(v["cells"][0]["name"], "kv/escaped");
    assert_eq!(v["cells"][0]["misses"], serde_json::json!([1, 3]));
    assert_eq!(v["cells"][2]["runs"][0]["verdict"], "invalid");
    assert_eq!(v["cells"][2]["runs"][0]["time_to_detect_s"], 4.0);
    assert_eq!(v["cells"][2]["expect"]["min_detect"], "2/3");
}
