use super::*;
use splitbrain_checkers::CheckResult;
use splitbrain_reports::HistoryStats;

fn summary(results: Vec<CheckResult>) -> RunSummary {
    RunSummary::new("t".into(), None, results, HistoryStats::default(), Some(1))
}

fn invalid(checker: &str, anomalies: &[&str]) -> CheckResult {
    let mut r = CheckResult::new(checker, Validity::Invalid, "found it");
    r.anomaly_types = anomalies.iter().map(|s| s.to_string()).collect();
    r
}

fn expect(verdict: ExpectedVerdict, anomalies: &[&str], checkers: &[&str]) -> Expectation {
    Expectation {
        verdict,
        anomalies: anomalies.iter().map(|s| s.to_string()).collect(),
        checkers: checkers.iter().map(|s| s.to_string()).collect(),
        min_detect: None,
    }
}

#[test]
fn a_correct_cell_is_met_only_by_a_valid_run() {
    let e = expect(ExpectedVerdict::Valid, &[], &[]);
    let ok = summary(vec![CheckResult::new("linearizable", Validity::Valid, "")]);
    assert!(judge_run(&e, Ok(&ok)).met);
    let bad = judge_run(&e, Ok(&summary(vec![invalid("linearizable", &[])])));
    assert!(!bad.met);
    assert_eq!(bad.verdict, RunVerdict::Invalid);
    assert!(bad.note.contains("false positive"));
    let hollow = summary(vec![CheckResult::new(
        "stats",
        Validity::Unknown,
        "no read ever succeeded. More.",
    )]);
    let j = judge_run(&e, Ok(&hollow));
    assert_eq!((j.verdict, j.met), (RunVerdict::Unknown, false));
    assert_eq!(j.note, "stats: no read ever succeeded.");
}

#[test]
fn a_bug_cell_needs_every_named_anomaly_and_checker() {
    let s = summary(vec![
        invalid("elle-list-append", &["G0", "G1c"]),
        CheckResult::new("stats", Validity::Valid, ""),
    ]);
    let j = judge_run(
        &expect(ExpectedVerdict::Invalid, &["G1c"], &["elle-list-append"]),
        Ok(&s),
    );
    assert!(j.met, "{j:?}");
    assert_eq!(j.found, ["elle-list-append(G0,G1c)"]);
    let j = judge_run(
        &expect(ExpectedVerdict::Invalid, &["G1c", "G2-item"], &[]),
        Ok(&s),
    );
    assert!(!j.met);
    assert_eq!(j.note, "invalid, but without G2-item");
    let j = judge_run(&expect(ExpectedVerdict::Invalid, &[], &["bank"]), Ok(&s));
    assert!(!j.met, "a checker that did not say invalid is missing");
    let valid = summary(vec![CheckResult::new("bank", Validity::Valid, "")]);
    let j = judge_run(&expect(ExpectedVerdict::Invalid, &[], &[]), Ok(&valid));
    assert_eq!((j.verdict, j.met), (RunVerdict::Valid, false));
}

#[test]
fn an_incomplete_or_failed_run_is_an_error() {
    let e = expect(ExpectedVerdict::Invalid, &[], &[]);
    let mut s = summary(vec![invalid("bank", &[])]);
    s.incomplete = Some("interrupted (SIGINT)".into());
    let j = judge_run(&e, Ok(&s));
    assert_eq!((j.verdict, j.met), (RunVerdict::Error, false));
    assert_eq!(j.note, "interrupted (SIGINT)");
    let j = judge_run(&e, Err("cannot find the node binary"));
    assert_eq!((j.verdict, j.met), (RunVerdict::Error, false));
    assert_eq!(j.note, "cannot find the node binary");
}

#[test]
fn min_detect_rounds_up_and_applies_only_to_bug_cells() {
    let m = MinDetect::parse("2/3").unwrap();
    assert_eq!(m, MinDetect { detected: 2, of: 3 });
    assert_eq!(m.to_string(), "2/3");
    assert_eq!(m.required(3), 2);
    assert_eq!(m.required(5), 4, "ceil(5 * 2 / 3)");
    assert_eq!(m.required(1), 1);
    assert_eq!(MinDetect::parse("4/5").unwrap().required(5), 4);
    for bad in ["0/3", "4/3", "2", "a/b", "2/0", ""] {
        assert!(MinDetect::parse(bad).is_err(), "{bad}");
    }
    let mut e = expect(ExpectedVerdict::Invalid, &[], &[]);
    assert_eq!(e.required(5), 5, "default: every run");
    e.min_detect = Some(m);
    assert_eq!(e.required(3), 2);
    assert_eq!(e.label(), "invalid (≥ 2/3)");
    let e = expect(ExpectedVerdict::Invalid, &["G1c"], &["bank"]);
    assert_eq!(e.label(), "invalid: G1c, bank");
}
