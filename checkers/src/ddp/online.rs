//! `ddp-replicas` online: replica divergence found while the run goes on.
//!
//! A committed step's record never changes: once two reports of one step name different
//! parameter digests (`replica-divergence`) or different members (`member-divergence`),
//! or a rank reports a step of a group it was not in (`non-member-report`), every longer
//! history shows the same, so the whole history's `ddp-replicas` check is INVALID too.
//! Held per step: its first report's digest and its first report naming members (not the
//! ops). A malformed step record makes the whole history's check `unknown` (it cannot
//! read the run), so from one on nothing more is reported here.

use super::checks::membership;
use super::StepRecord;
use crate::history::{Op, OpType, Process};
use crate::verdict::{CheckResult, OnlineCheck, Validity};
use serde_json::{json, Value};
use std::collections::HashMap;

/// A step's first report of something, kept to compare later reports with.
#[derive(Debug, Clone)]
struct Report {
    rank: u64,
    digest: String,
    members: Option<Vec<u64>>,
    /// The op as evidence (`index`, `process`, `f`, `value`).
    evidence: Value,
}

/// The online `ddp-replicas` check ([`crate::Checker::online`] of
/// [`super::DdpCheck::Replicas`]).
#[derive(Debug, Default)]
pub(crate) struct OnlineReplicas {
    /// Per step, its first report.
    first: HashMap<u64, Report>,
    /// Per step, its first report that names the members.
    members_of: HashMap<u64, Report>,
    /// A malformed step record was seen: nothing more is reported.
    malformed: bool,
}

fn evidence(op: &Op) -> Value {
    let process = match op.process {
        Process::Client(p) => json!(p),
        Process::Nemesis => json!("nemesis"),
    };
    json!({"index": op.index, "process": process, "type": "ok", "f": "step", "value": op.value})
}

fn invalid(anomaly: &str, explanation: String, case: Value, ops: Vec<Value>) -> CheckResult {
    let mut r = CheckResult::new(
        "ddp-replicas",
        Validity::Invalid,
        format!("replicas or memberships disagree (found online); the first: {explanation}"),
    );
    r.anomaly_types.push(anomaly.to_string());
    r.details = json!({"anomalies": {anomaly: {"count": 1, "cases": [case]}}});
    r.evidence = ops;
    r
}

impl OnlineCheck for OnlineReplicas {
    fn push(&mut self, op: Op) -> Option<CheckResult> {
        if self.malformed || op.op_type != OpType::Ok || op.f != "step" {
            return None;
        }
        let Ok(rec) = serde_json::from_value::<StepRecord>(op.value.clone()) else {
            self.malformed = true;
            return None;
        };
        let this = Report {
            rank: rec.rank,
            digest: rec.digest.clone(),
            members: rec.members.clone(),
            evidence: evidence(&op),
        };
        let prev_named = self.members_of.get(&rec.step);
        let rules = membership(
            &rec,
            prev_named.and_then(|p| p.members.as_ref().map(|m| (p.rank, m))),
        );
        if let Some(b) = rules.non_member {
            return Some(invalid(
                "non-member-report",
                b.explanation,
                b.case,
                vec![this.evidence],
            ));
        }
        if let Some(prev) = self.first.get(&rec.step) {
            if prev.digest != rec.digest {
                return Some(invalid(
                    "replica-divergence",
                    format!(
                        "step {}: rank {} holds {}, rank {} holds {}",
                        rec.step, prev.rank, prev.digest, rec.rank, rec.digest
                    ),
                    json!({"step": rec.step, "sides": [
                        {"digest": prev.digest, "ranks": [prev.rank]},
                        {"digest": rec.digest, "ranks": [rec.rank]}]}),
                    vec![prev.evidence.clone(), this.evidence],
                ));
            }
        } else {
            self.first.insert(rec.step, this.clone());
        }
        if let (Some(b), Some(prev)) = (rules.divergence, self.members_of.get(&rec.step)) {
            return Some(invalid(
                "member-divergence",
                b.explanation,
                b.case,
                vec![prev.evidence.clone(), this.evidence],
            ));
        }
        if rules.names_first {
            self.members_of.insert(rec.step, this);
        }
        None
    }

    /// No op is held: one report per step is kept as a summary, not for a later decision.
    fn held_ops(&self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DdpCheck, DdpChecker, DdpOptions};
    use super::*;
    use crate::history::History;
    use crate::verdict::Checker;

    fn step(rank: u64, step: u64, digest: &str, members: Option<&[u64]>) -> Value {
        let mut v = json!({"rank": rank, "step": step, "epoch": 0, "digest": digest});
        if let Some(m) = members {
            v["members"] = json!(m);
        }
        v
    }

    /// Invoke and ok op of each record, one process per rank, indexed in order.
    fn history(records: &[Value]) -> Vec<Op> {
        let mut ops = Vec::new();
        for r in records {
            let p = Process::Client(r["rank"].as_u64().unwrap_or(9));
            ops.push(Op::new(p, OpType::Invoke, "step", Value::Null));
            ops.push(Op::new(p, OpType::Ok, "step", r.clone()));
        }
        for (i, o) in ops.iter_mut().enumerate() {
            o.index = i as u64;
        }
        ops
    }

    fn checker() -> DdpChecker {
        DdpChecker::new(DdpCheck::Replicas, DdpOptions::default())
    }

    /// Every result of pushing `ops` in order.
    fn online(ops: &[Op]) -> Vec<CheckResult> {
        let mut o = checker().online().expect("ddp-replicas checks online");
        ops.iter().filter_map(|op| o.push(op.clone())).collect()
    }

    #[test]
    fn only_ddp_replicas_checks_online() {
        for c in [DdpCheck::Data, DdpCheck::Progress, DdpCheck::Reference] {
            assert!(DdpChecker::new(c, DdpOptions::default()).online().is_none());
        }
        assert!(checker().online().is_some());
    }

    #[test]
    fn no_observation_finds_nothing() {
        assert!(online(&[]).is_empty());
        // Steps invoked, none committed: nothing is observed, nothing is said.
        let ops =
            super::super::tests::uncommitted_steps(OpType::Fail, |rank| step(rank, 1, "x", None));
        assert!(online(&ops).is_empty());
    }

    #[test]
    fn garbage_is_never_invalid_and_silences_what_follows() {
        let junk = [json!("nonsense"), json!({"rank": 0}), json!(null), json!(3)];
        for j in junk {
            // Divergent after the garbage: the whole history's check cannot read the
            // run (unknown), so online must not say invalid either.
            let ops = history(&[step(0, 1, "a", None), j.clone(), step(1, 1, "b", None)]);
            assert!(online(&ops).is_empty(), "{j}");
            let whole = checker().check(&History::new(ops).unwrap());
            assert_eq!(whole.valid, Validity::Unknown, "{j}: {}", whole.explanation);
        }
        // Ops of other names, and nemesis ops, are not step records.
        let ops = vec![
            Op::new(Process::Nemesis, OpType::Info, "kill", json!("junk")),
            Op::new(Process::Client(0), OpType::Ok, "read", json!({"x": 1})),
        ];
        assert!(online(&ops).is_empty());
    }

    #[test]
    fn agreeing_replicas_are_never_invalid_and_the_whole_check_says_valid() {
        let ops = history(&[
            step(0, 1, "a", Some(&[0, 1])),
            step(1, 1, "a", Some(&[0, 1])),
            step(1, 2, "b", Some(&[0, 1])),
            step(0, 2, "b", Some(&[0, 1])),
            step(0, 2, "b", Some(&[0, 1])),
        ]);
        assert!(online(&ops).is_empty());
        let whole = checker().check(&History::new(ops).unwrap());
        assert_eq!(whole.valid, Validity::Valid, "{}", whole.explanation);
    }

    #[test]
    fn divergence_is_found_at_the_first_report_that_disagrees_and_confirmed_whole() {
        let ops = history(&[
            step(0, 1, "a", None),
            step(1, 1, "a", None),
            step(0, 2, "b", None),
            step(1, 2, "c", None),
            step(0, 3, "d", None),
        ]);
        // Nothing before the disagreeing report (ops 0..7 hold it at index 7).
        assert!(online(&ops[..7]).is_empty());
        let found = online(&ops);
        assert_eq!(found.len(), 1, "{found:?}");
        let r = &found[0];
        assert_eq!(r.valid, Validity::Invalid);
        assert_eq!(r.anomaly_types, ["replica-divergence"]);
        assert!(
            r.explanation
                .contains("step 2: rank 0 holds b, rank 1 holds c"),
            "{}",
            r.explanation
        );
        let indices: Vec<u64> = r
            .evidence
            .iter()
            .map(|e| e["index"].as_u64().unwrap())
            .collect();
        assert_eq!(indices, [5, 7]);
        // Every prefix that shows it, and the whole history, is invalid the same way.
        for end in 8..=ops.len() {
            let whole = checker().check(&History::new(ops[..end].to_vec()).unwrap());
            assert_eq!(whole.valid, Validity::Invalid, "{end}");
            assert!(whole
                .anomaly_types
                .contains(&"replica-divergence".to_string()));
        }
    }

    #[test]
    fn membership_anomalies_are_found_and_confirmed_whole() {
        let cases = [
            (
                vec![step(0, 1, "a", Some(&[0, 1])), step(1, 1, "a", Some(&[1]))],
                "member-divergence",
            ),
            (vec![step(2, 1, "a", Some(&[0, 1]))], "non-member-report"),
        ];
        for (records, anomaly) in cases {
            let ops = history(&records);
            let found = online(&ops);
            assert_eq!(found.len(), 1, "{anomaly}: {found:?}");
            assert_eq!(found[0].anomaly_types, [anomaly]);
            let whole = checker().check(&History::new(ops).unwrap());
            assert_eq!(whole.valid, Validity::Invalid, "{anomaly}");
            assert!(whole.anomaly_types.contains(&anomaly.to_string()));
        }
    }
}
