//! The DDP checker: replica consistency of a data-parallel training run.
//!
//! History shape: one process per rank follows that rank's committed steps; each ok op
//! with `f: "step"` carries the rank's record of one committed step as its value:
//! `{"rank": r, "step": s, "epoch": e, "digest": "...", "loss": l, "samples": [ids],
//! "gen": g, "members": [ranks], "world": n}`. Only ok `step` ops are read; everything
//! else is ignored. `members` (the group that ran the step; optional) lets the checks
//! follow an elastic group that shrinks and grows: the world size of a step is its
//! member count.
//!
//! Four checks, each a [`Checker`] (see [`ddp_checkers`]):
//! - `ddp-replicas` ([`DdpCheck::Replicas`]): at every step all ranks (and every report
//!   of it) have the same parameter digest; names the first divergent step and the ranks
//!   on each side (`replica-divergence`); every report of a step names the same members
//!   (`member-divergence`), and a rank reports only steps of groups it was in
//!   (`non-member-report`).
//! - `ddp-data` ([`DdpCheck::Data`]): within each epoch every sample id is consumed
//!   exactly once across ranks over the committed steps (`duplicate-sample`; with the data
//!   set size, `missing-sample` for epochs every rank has finished), and a step reported
//!   twice by a rank reports the same samples (`changed-record`).
//! - `ddp-progress` ([`DdpCheck::Progress`]): the steps each process saw of its rank are
//!   gap-free from 1, except for steps some report shows the rank was not a member of
//!   (`step-gap`), the loss trends down (`loss-not-decreasing`); the time lost to each
//!   recovery is reported (not judged).
//! - `ddp-reference` ([`DdpCheck::Reference`]): every committed digest equals the
//!   single-process reference run's digest of that step (`reference-mismatch`); without
//!   reference digests the verdict is unknown.
//!
//! ```
//! use splitbrain_checkers::ddp::{ddp_checkers, DdpOptions};
//! let names: Vec<String> = ddp_checkers(&DdpOptions::default()).iter().map(|c| c.name()).collect();
//! assert_eq!(names, ["ddp-replicas", "ddp-data", "ddp-progress", "ddp-reference"]);
//! ```

mod checks;
mod online;

use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How many cases of one anomaly are kept as evidence (all are counted).
pub(crate) const MAX_CASES: usize = 8;

/// Options of the DDP checks.
#[derive(Debug, Clone, Default)]
pub struct DdpOptions {
    /// Number of samples in the data set (enables `missing-sample`).
    pub dataset_size: Option<u64>,
    /// Reference digests by step (from a single-process replay).
    pub reference: Option<BTreeMap<u64, String>>,
}

/// Which property a [`DdpChecker`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpCheck {
    /// Replica agreement per step.
    Replicas,
    /// Exactly-once samples per epoch.
    Data,
    /// Gap-free steps, falling loss, recovery times.
    Progress,
    /// Equality with the reference run.
    Reference,
}

impl DdpCheck {
    /// The checker's name in results.
    pub fn name(self) -> &'static str {
        match self {
            DdpCheck::Replicas => "ddp-replicas",
            DdpCheck::Data => "ddp-data",
            DdpCheck::Progress => "ddp-progress",
            DdpCheck::Reference => "ddp-reference",
        }
    }
}

/// One DDP check over a history.
#[derive(Debug, Clone)]
pub struct DdpChecker {
    check: DdpCheck,
    options: DdpOptions,
}

impl DdpChecker {
    /// A checker for one property.
    pub fn new(check: DdpCheck, options: DdpOptions) -> DdpChecker {
        DdpChecker { check, options }
    }
}

/// All four DDP checkers with the same options.
pub fn ddp_checkers(options: &DdpOptions) -> Vec<Box<dyn Checker>> {
    [
        DdpCheck::Replicas,
        DdpCheck::Data,
        DdpCheck::Progress,
        DdpCheck::Reference,
    ]
    .into_iter()
    .map(|c| Box::new(DdpChecker::new(c, options.clone())) as Box<dyn Checker>)
    .collect()
}

/// A step record as a rank reports it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StepRecord {
    /// Rank (0-based).
    pub rank: u64,
    /// Step (from 1).
    pub step: u64,
    /// Epoch (from 0).
    pub epoch: u64,
    /// Parameter digest after the step.
    pub digest: String,
    /// The rank's loss at that step.
    #[serde(default)]
    pub loss: Option<f64>,
    /// Sample ids the rank consumed.
    #[serde(default)]
    pub samples: Vec<u64>,
    /// Group generation that ran it.
    #[serde(default)]
    pub gen: Option<u64>,
    /// The ranks of the group that ran it (absent in records of a fixed group). An empty
    /// list is read as absent: a committed step always had its reporter among its
    /// members, so `[]` (a restarted rank serving a step from its checkpoint before it
    /// has rejoined a group) names no group and says nothing about membership.
    #[serde(default, deserialize_with = "members_if_any")]
    pub members: Option<Vec<u64>>,
}

fn members_if_any<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<u64>>, D::Error> {
    use serde::Deserialize;
    Ok(Option::<Vec<u64>>::deserialize(d)?.filter(|m| !m.is_empty()))
}

/// A record with where it sits in the history.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) record: StepRecord,
    /// The completion op's `index`.
    pub(crate) index: u64,
    /// The completion's time (ns).
    pub(crate) time: u64,
    pub(crate) process: u64,
    pub(crate) value: Value,
}

impl Seen {
    /// The op as evidence.
    pub(crate) fn evidence(&self) -> Value {
        json!({"index": self.index, "process": self.process, "type": "ok", "f": "step", "value": self.value})
    }
}

/// Every ok step record in history order, or the first malformed one.
pub(crate) fn records(history: &History) -> Result<Vec<Seen>, String> {
    let mut out = Vec::new();
    for p in history.pairs() {
        if p.outcome != Outcome::Ok || p.f != "step" {
            continue;
        }
        let pos = p.complete_pos.unwrap_or(p.invoke_pos);
        let index = history.op_index(pos);
        let record: StepRecord = serde_json::from_value(p.value.clone()).map_err(|e| {
            format!("op {index}: a step record needs rank, step, epoch and digest: {e}")
        })?;
        out.push(Seen {
            record,
            index,
            time: p.complete_time.unwrap_or(p.invoke_time),
            process: p.process,
            value: p.value.clone(),
        });
    }
    Ok(out)
}

/// Anomalies found by one check: name -> (count, evidence cases, evidence ops).
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub(crate) by_type: BTreeMap<&'static str, (usize, Vec<Value>, Vec<Value>)>,
}

impl Found {
    pub(crate) fn add(&mut self, anomaly: &'static str, case: Value, ops: Vec<Value>) {
        let e = self.by_type.entry(anomaly).or_default();
        e.0 += 1;
        if e.1.len() < MAX_CASES {
            e.1.push(case);
            e.2.extend(ops);
        }
    }

    /// The verdict: invalid with evidence if anything was found.
    pub(crate) fn result(self, name: &str, headline: String, mut details: Value) -> CheckResult {
        if self.by_type.is_empty() {
            let mut r = CheckResult::new(name, Validity::Valid, headline);
            r.details = details;
            return r;
        }
        let mut r = CheckResult::new(name, Validity::Invalid, headline);
        let mut cases = serde_json::Map::new();
        for (anomaly, (count, case, ops)) in self.by_type {
            r.anomaly_types.push(anomaly.to_string());
            cases.insert(anomaly.to_string(), json!({"count": count, "cases": case}));
            r.evidence.extend(ops);
        }
        if let Value::Object(m) = &mut details {
            m.insert("anomalies".into(), Value::Object(cases));
        }
        r.details = details;
        r
    }
}

impl Checker for DdpChecker {
    fn name(&self) -> String {
        self.check.name().into()
    }

    /// `ddp-replicas` decides on a prefix: a committed step's record never changes, so
    /// two reports of it that disagree stay in every longer history (`online.rs`).
    fn online(&self) -> Option<Box<dyn crate::verdict::OnlineCheck>> {
        (self.check == DdpCheck::Replicas).then(|| {
            Box::new(online::OnlineReplicas::default()) as Box<dyn crate::verdict::OnlineCheck>
        })
    }

    fn check(&self, history: &History) -> CheckResult {
        let seen = match records(history) {
            Ok(s) => s,
            Err(e) => {
                return CheckResult::new(
                    self.name(),
                    Validity::Unknown,
                    format!("malformed step record: {e}"),
                )
            }
        };
        let r = match self.check {
            DdpCheck::Replicas => checks::replicas(&seen),
            DdpCheck::Data => checks::data(&seen, self.options.dataset_size),
            DdpCheck::Progress => checks::progress(&seen, history),
            DdpCheck::Reference => checks::reference(&seen, self.options.reference.as_ref()),
        };
        let ranks: std::collections::BTreeSet<u64> = seen.iter().map(|s| s.record.rank).collect();
        let steps: std::collections::BTreeSet<u64> = seen.iter().map(|s| s.record.step).collect();
        let samples: usize = seen.iter().map(|s| s.record.samples.len()).sum();
        let mut coverage = Coverage::of([
            ("step records", seen.len() as u64),
            ("steps", steps.len() as u64),
            ("ranks", ranks.len() as u64),
        ]);
        let r = r
            .unless_unobserved(seen.len() as u64, "no committed step (no ok step op)")
            .with_coverage(coverage.clone());
        if self.check != DdpCheck::Data {
            return r;
        }
        // Exactly-once consumption is judged on the samples the records list.
        coverage.set("samples", samples as u64);
        r.with_coverage(coverage)
            .unless_unobserved(samples as u64, "no committed step lists a sample")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    /// Two ranks each invoke a step that ends `end` (not ok) with the value `value` gives
    /// the rank: a run in which no step is committed.
    pub(super) fn uncommitted_steps(end: OpType, value: impl Fn(u64) -> Value) -> Vec<Op> {
        (0..2)
            .flat_map(|rank| {
                [
                    Op::new(Process::Client(rank), OpType::Invoke, "step", Value::Null),
                    Op::new(Process::Client(rank), end, "step", value(rank)),
                ]
            })
            .collect()
    }

    /// Every check sees the same degenerate run: steps invoked, none committed.
    #[test]
    fn every_ddp_check_without_a_committed_step_is_unknown() {
        let h = History::new(uncommitted_steps(OpType::Info, |_| Value::Null)).unwrap();
        let reference = DdpOptions {
            reference: Some(BTreeMap::from([(1, "d".to_string())])),
            ..DdpOptions::default()
        };
        for c in ddp_checkers(&reference) {
            let r = c.check(&h);
            assert_eq!(
                r.valid,
                Validity::Unknown,
                "{}: {}",
                r.checker,
                r.explanation
            );
            assert!(
                r.explanation.contains("no committed step"),
                "{}: {}",
                r.checker,
                r.explanation
            );
            assert_eq!(r.coverage.get("step records"), Some(0));
        }
    }

    #[test]
    fn ddp_data_without_a_sample_is_unknown() {
        let record = json!({"rank": 0, "step": 1, "epoch": 0, "digest": "d"});
        let h = History::new(vec![
            Op::new(Process::Client(0), OpType::Invoke, "step", Value::Null),
            Op::new(Process::Client(0), OpType::Ok, "step", record),
        ])
        .unwrap();
        let r = DdpChecker::new(DdpCheck::Data, DdpOptions::default()).check(&h);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(r
            .explanation
            .starts_with("no committed step lists a sample"));
        let r = DdpChecker::new(DdpCheck::Replicas, DdpOptions::default()).check(&h);
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
    }
}
