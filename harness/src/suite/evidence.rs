//! Time to detect: from the start of a run to the first op that is part of the evidence.
//!
//! Checkers name evidence ops by the history's own `index` (some also carry `time`); the
//! time of an index is looked up in the run's history, where `time` is nanoseconds since
//! the test began.

use serde::Deserialize;
use serde_json::Value;
use splitbrain_checkers::Validity;
use splitbrain_reports::RunSummary;
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;

/// One evidence op of an invalid checker: its history index and/or its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvidencePoint {
    /// The op's `index` in the history, when the evidence names it.
    pub index: Option<u64>,
    /// The op's `time` (ns since the test began), when the evidence carries it.
    pub time_ns: Option<u64>,
}

/// The evidence ops of every invalid checker in a run.
pub fn evidence_points(s: &RunSummary) -> Vec<EvidencePoint> {
    s.results
        .iter()
        .filter(|r| r.valid == Validity::Invalid)
        .flat_map(|r| r.evidence.iter())
        .map(|op| EvidencePoint {
            index: op.get("index").and_then(Value::as_u64),
            time_ns: op.get("time").and_then(Value::as_u64),
        })
        .filter(|p| p.index.is_some() || p.time_ns.is_some())
        .collect()
}

#[derive(Deserialize)]
struct IndexTime {
    index: Option<u64>,
    time: Option<u64>,
}

/// Reads the times of the ops with the given indices from a JSON Lines history; lines that
/// are not ops are skipped (a history being judged was written by the harness).
pub fn history_times(path: &Path, wanted: &BTreeSet<u64>) -> std::io::Result<BTreeMap<u64, u64>> {
    let mut out = BTreeMap::new();
    if wanted.is_empty() {
        return Ok(out);
    }
    let file = std::io::BufReader::new(std::fs::File::open(path)?);
    for line in file.lines() {
        let line = line?;
        if let Ok(IndexTime {
            index: Some(i),
            time: Some(t),
        }) = serde_json::from_str(&line)
        {
            if wanted.contains(&i) {
                out.insert(i, t);
                if out.len() == wanted.len() {
                    break;
                }
            }
        }
    }
    Ok(out)
}

/// The earliest time among the evidence (ns since the run began): each op's time from the
/// history by its index, else the time it carries. `None` when no evidence op has either.
pub fn time_to_detect(points: &[EvidencePoint], times: &BTreeMap<u64, u64>) -> Option<u64> {
    points
        .iter()
        .filter_map(|p| p.index.and_then(|i| times.get(&i).copied()).or(p.time_ns))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_checkers::CheckResult;
    use splitbrain_reports::HistoryStats;

    fn summary(results: Vec<CheckResult>) -> RunSummary {
        RunSummary::new("t".into(), None, results, HistoryStats::default(), Some(1))
    }

    #[test]
    fn earliest_evidence_op_of_invalid_checkers_by_history_time() {
        let mut bad = CheckResult::new("bank", Validity::Invalid, "wrong total");
        bad.evidence = vec![
            json!({"index": 7}),
            json!({"index": 3}),
            json!({"f": "read"}),
        ];
        let mut ok = CheckResult::new("stats", Validity::Valid, "");
        ok.evidence = vec![json!({"index": 0})];
        let s = summary(vec![bad, ok]);
        let points = evidence_points(&s);
        assert_eq!(
            points.len(),
            2,
            "ops without index or time are not evidence points"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let lines: Vec<String> = (0..10)
            .map(|i| json!({"index": i, "time": 1_000 * (i + 1), "type": "ok"}).to_string())
            .collect();
        std::fs::write(&path, lines.join("\n")).unwrap();
        let wanted = points.iter().filter_map(|p| p.index).collect();
        let times = history_times(&path, &wanted).unwrap();
        assert_eq!(times.len(), 2);
        assert_eq!(time_to_detect(&points, &times), Some(4_000));
    }

    #[test]
    fn evidence_time_is_used_when_the_history_lacks_the_index() {
        let mut bad = CheckResult::new("linearizable", Validity::Invalid, "");
        bad.evidence = vec![json!({"index": 99, "time": 5_000}), json!({"time": 9_000})];
        let points = evidence_points(&summary(vec![bad]));
        assert_eq!(time_to_detect(&points, &BTreeMap::new()), Some(5_000));
        assert_eq!(time_to_detect(&[], &BTreeMap::new()), None);
    }
}
