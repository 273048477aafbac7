//! `train`: follow every rank of the DDP training cluster and record each step it
//! commits (`f: "step"`, the rank's step record as the value), checked by the four DDP
//! checks (`splitbrain_checkers::ddp`).
//!
//! The reference for `ddp-reference` is not taken from the cluster: when the history is
//! checked, the harness runs the target's single-process replay (`splitbrain-ddp
//! --replay`, the same settings as the ranks, [`TRAIN_ARGS`]) up to the last recorded
//! step and compares against its digests. The group that ran each step (the records'
//! `members`) is passed to the replay (`--members`), so it reproduces the run's global
//! batches and averages across shrinking and growing the group.

use super::{OpGenerator, Workload, WorkloadOptions};
use crate::check_options::CheckOptions;
use crate::systems::ddp::{DATASET_SIZE, TRAIN_ARGS};
use crate::systems::Invocation;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use splitbrain_checkers::ddp::{ddp_checkers, DdpCheck, DdpChecker, DdpOptions};
use splitbrain_checkers::history::Outcome;
use splitbrain_checkers::{CheckResult, Checker, History, Validity};
use std::collections::BTreeMap;
use std::process::Command;

/// Watch the training cluster's committed steps.
pub struct TrainWorkload;

impl Workload for TrainWorkload {
    fn name(&self) -> &'static str {
        "train"
    }
    fn description(&self) -> &'static str {
        "follow each rank of a training cluster (ddp target), one op per committed step; replica agreement, exactly-once samples, progress, equality with a single-process replay"
    }
    fn generator(&self, _opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(StepGenerator)
    }
    fn checkers(&self, _check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        let opts = DdpOptions {
            dataset_size: Some(DATASET_SIZE),
            reference: None,
        };
        let mut checkers = ddp_checkers(&opts);
        // The reference check gets its digests from the replay, when the history is known.
        checkers.retain(|c| c.name() != DdpCheck::Reference.name());
        checkers.push(Box::new(ReplayReference { opts }));
        Ok(checkers)
    }
}

struct StepGenerator;

impl OpGenerator for StepGenerator {
    fn next_op(&mut self, _rng: &mut ChaCha8Rng) -> Invocation {
        Invocation {
            f: "step".into(),
            key: None,
            value: Value::Null,
        }
    }
}

/// `ddp-reference` with digests from `splitbrain-ddp --replay`.
struct ReplayReference {
    opts: DdpOptions,
}

/// What the replay needs from the ok step records.
#[derive(Debug, Clone, PartialEq)]
pub struct Extent {
    /// The last step.
    pub steps: u64,
    /// The full world size (the widest group, or the highest rank seen plus one).
    pub world: u64,
    /// The members of each step where they change, as `--members` takes them
    /// (`FROM:R,R;FROM:R,...`); empty when no record names its members.
    pub members: String,
}

/// The extent of the run the ok step records show.
pub fn extent(history: &History) -> Option<Extent> {
    let mut steps = None;
    let mut world = 0;
    let mut by_step: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for p in history.pairs() {
        if p.outcome != Outcome::Ok || p.f != "step" {
            continue;
        }
        let step = p.value.get("step").and_then(Value::as_u64)?;
        let w = p.value.get("world").and_then(Value::as_u64)?;
        let s = steps.get_or_insert(step);
        *s = (*s).max(step);
        world = world.max(w);
        if let Some(m) = p.value.get("members").and_then(Value::as_array) {
            let ranks: Vec<u64> = m.iter().filter_map(Value::as_u64).collect();
            world = world.max(ranks.iter().max().map_or(0, |r| r + 1));
            by_step.entry(step).or_insert(ranks);
        }
    }
    // A step no record shows keeps the members of the step before it.
    let mut changes = Vec::new();
    let mut prev: Option<&Vec<u64>> = None;
    for (step, m) in &by_step {
        if prev != Some(m) {
            let ranks: Vec<String> = m.iter().map(u64::to_string).collect();
            changes.push(format!("{step}:{}", ranks.join(",")));
            prev = Some(m);
        }
    }
    Some(Extent {
        steps: steps?,
        world,
        members: changes.join(";"),
    })
}

/// Runs the single-process replay for `steps` steps of a `world`-rank run whose groups
/// are `members` (`--members` syntax; empty: every rank at every step).
pub fn replay_digests(
    world: u64,
    steps: u64,
    members: &str,
) -> Result<BTreeMap<u64, String>, String> {
    let binary =
        crate::run::programs::find_binary(None, "splitbrain-ddp").map_err(|e| format!("{e:#}"))?;
    let out = Command::new(&binary)
        .arg("--replay")
        .args([
            "--steps",
            &steps.to_string(),
            "--world-size",
            &world.to_string(),
        ])
        .args(TRAIN_ARGS)
        .args(if members.is_empty() {
            Vec::new()
        } else {
            vec!["--members", members]
        })
        .output()
        .map_err(|e| format!("running {}: {e}", binary.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --replay failed: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let mut digests = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("replay output {line:?}: {e}"))?;
        if let (Some(s), Some(d)) = (v["step"].as_u64(), v["digest"].as_str()) {
            digests.insert(s, d.to_string());
        }
    }
    Ok(digests)
}

impl Checker for ReplayReference {
    fn name(&self) -> String {
        DdpCheck::Reference.name().into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let Some(run) = extent(history) else {
            return CheckResult::new(
                self.name(),
                Validity::Unknown,
                "no step records with a step and world size to replay",
            );
        };
        match replay_digests(run.world, run.steps, &run.members) {
            Ok(reference) => {
                let opts = DdpOptions {
                    reference: Some(reference),
                    ..self.opts.clone()
                };
                DdpChecker::new(DdpCheck::Reference, opts).check(history)
            }
            Err(e) => CheckResult::new(
                self.name(),
                Validity::Unknown,
                format!("the reference replay did not run: {e}"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitbrain_checkers::history::{Op, OpType, Process};

    fn history(records: &[(u64, u64, &[u64])]) -> History {
        let mut ops = Vec::new();
        for (i, (rank, step, members)) in records.iter().enumerate() {
            let value = serde_json::json!({"rank": rank, "step": step, "world": members.len(), "members": members});
            for (t, v) in [(OpType::Invoke, Value::Null), (OpType::Ok, value)] {
                let mut op = Op::new(Process::Client(*rank), t, "step", v);
                op.time = i as u64 * 10 + u64::from(t == OpType::Ok);
                ops.push(op);
            }
        }
        History::new(ops).expect("well-formed")
    }

    /// The replay gets the members where they change (a step no record shows keeps the
    /// members before it) and the full world size, not the last group's.
    #[test]
    fn the_member_changes_become_replay_arguments() {
        let h = history(&[
            (0, 1, &[0, 1, 2]),
            (2, 1, &[0, 1, 2]),
            (0, 2, &[0, 1]),
            (1, 3, &[0, 1]),
            (0, 5, &[0, 1, 2]),
        ]);
        let e = extent(&h).expect("records");
        assert_eq!(
            e,
            Extent {
                steps: 5,
                world: 3,
                members: "1:0,1,2;2:0,1;5:0,1,2".into()
            }
        );
    }
}
