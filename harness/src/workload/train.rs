//! `train`: follow every rank of the DDP training cluster and record each step it
//! commits (`f: "step"`, the rank's step record as the value), checked by the four DDP
//! checks (`splitbrain_checkers::ddp`).
//!
//! The reference for `ddp-reference` is not taken from the cluster: when the history is
//! checked, the harness runs the target's single-process replay (`splitbrain-ddp
//! --replay`, the same settings as the ranks, [`TRAIN_ARGS`]) up to the last recorded
//! step and compares against its digests.

use super::{OpGenerator, Workload, WorkloadOptions};
use crate::check::CheckOptions;
use crate::target::ddp::{DATASET_SIZE, TRAIN_ARGS};
use crate::target::Invocation;
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

/// The last step and the world size the ok step records show.
fn extent(history: &History) -> Option<(u64, u64)> {
    let mut last = None;
    for p in history.pairs() {
        if p.outcome != Outcome::Ok || p.f != "step" {
            continue;
        }
        let step = p.value.get("step").and_then(Value::as_u64)?;
        let world = p.value.get("world").and_then(Value::as_u64)?;
        let (s, w) = last.get_or_insert((step, world));
        *s = (*s).max(step);
        *w = (*w).max(world);
    }
    last
}

/// Runs the single-process replay for `steps` steps of a `world`-rank run.
pub fn replay_digests(world: u64, steps: u64) -> Result<BTreeMap<u64, String>, String> {
    let binary =
        crate::controller::find_binary(None, "splitbrain-ddp").map_err(|e| format!("{e:#}"))?;
    let out = Command::new(&binary)
        .arg("--replay")
        .args([
            "--steps",
            &steps.to_string(),
            "--world-size",
            &world.to_string(),
        ])
        .args(TRAIN_ARGS)
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
        let Some((steps, world)) = extent(history) else {
            return CheckResult::new(
                self.name(),
                Validity::Unknown,
                "no step records with a step and world size to replay",
            );
        };
        match replay_digests(world, steps) {
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
