//! `--nemesis` options and fault plan files.

use std::path::Path;
use std::time::Duration;

use crate::guided::Search;
use crate::plan::{FaultAction, PlannedFault};
use crate::{NemesisError, KNOWN_FAULTS};

/// Parsed `--nemesis` options: which faults, how often, from which seed; or a fixed plan.
#[derive(Debug, Clone, PartialEq)]
pub struct NemesisSpec {
    /// Fault kinds to schedule (`partition`, `kill`, ...). Empty means no faults.
    pub faults: Vec<String>,
    /// Mean time between fault starts.
    pub interval: Duration,
    /// Seed for the schedule's random choices.
    pub seed: u64,
    /// An explicit plan (from a plan file). When set it replaces the random schedule.
    pub plan: Option<Vec<PlannedFault>>,
    /// How faults are chosen when there is no plan: the random schedule made before the
    /// run, or chosen while it goes on from what the cluster does.
    pub search: Search,
}

impl NemesisSpec {
    /// Parses a comma-separated list such as `partition,kill`.
    pub fn parse(list: &str, interval: Duration, seed: u64) -> Result<NemesisSpec, NemesisError> {
        let mut faults = Vec::new();
        for f in list.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            if !KNOWN_FAULTS.contains(&f) {
                return Err(NemesisError::UnknownFault(f.to_string()));
            }
            if f != "none" && !faults.iter().any(|g| g == f) {
                faults.push(f.to_string());
            }
        }
        Ok(NemesisSpec {
            faults,
            interval,
            seed,
            plan: None,
            search: Search::Random,
        })
    }

    /// A spec that replays a fixed plan, e.g. one stored in a previous run's test.json.
    /// Its `faults` name the plan's kinds as `--nemesis` does: a partition shaped
    /// `figure-8` is the `figure-8` fault, which also slows the links to clients, so a run
    /// of the plan proxies them as a run of `--nemesis figure-8` does (named `partition`,
    /// a replayed round failed at its first step: "client links are not proxied").
    pub fn from_plan(plan: Vec<PlannedFault>) -> NemesisSpec {
        let mut faults: Vec<String> = Vec::new();
        for p in &plan {
            let kind = match &p.action {
                FaultAction::Partition { shape, .. } if shape == "figure-8" => "figure-8",
                action => action.kind(),
            }
            .to_string();
            if !faults.contains(&kind) {
                faults.push(kind);
            }
        }
        NemesisSpec {
            faults,
            interval: Duration::ZERO,
            seed: 0,
            plan: Some(plan),
            search: Search::Random,
        }
    }

    /// Reads a fault plan file: JSON, either an array of planned faults or an object
    /// `{"faults": [...]}`. Each entry is
    /// `{"at_ms": 5000, "for_ms": 10000, "f": "kill", "nodes": ["n2"]}`
    /// (see [`crate::FaultAction`] for every `f`).
    pub fn from_plan_file(path: &Path) -> Result<NemesisSpec, NemesisError> {
        let plan_err = |msg: String| NemesisError::Plan {
            path: path.display().to_string(),
            msg,
        };
        let text = std::fs::read_to_string(path).map_err(|e| plan_err(e.to_string()))?;
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum PlanFile {
            List(Vec<PlannedFault>),
            Object { faults: Vec<PlannedFault> },
        }
        let plan = match serde_json::from_str::<PlanFile>(&text) {
            Ok(PlanFile::List(p)) | Ok(PlanFile::Object { faults: p }) => p,
            Err(_) => {
                // untagged enums hide the real error; re-parse as a list to report it
                let e = serde_json::from_str::<Vec<PlannedFault>>(&text)
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "not a plan".to_string());
                return Err(plan_err(e));
            }
        };
        for (k, p) in plan.iter().enumerate() {
            p.validate()
                .map_err(|m| plan_err(format!("entry {k}: {m}")))?;
        }
        Ok(NemesisSpec::from_plan(plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::CutMode;

    fn partition(at_ms: u64, shape: &str) -> PlannedFault {
        PlannedFault {
            at_ms,
            for_ms: 1000,
            action: FaultAction::Partition {
                shape: shape.to_string(),
                groups: Vec::new(),
                blocked: Vec::new(),
                mode: CutMode::Blackhole,
            },
        }
    }

    #[test]
    fn a_plan_names_its_faults_as_the_nemesis_option_does() {
        let spec = NemesisSpec::from_plan(vec![
            partition(0, "isolate-leader"),
            partition(10, "figure-8"),
            partition(20, "halves"),
        ]);
        assert_eq!(spec.faults, ["partition", "figure-8"]);
        // so a run of the plan proxies client links, as `--nemesis figure-8` does
        assert!(spec
            .faults
            .iter()
            .any(|f| crate::CLIENT_LINK_FAULTS.contains(&f.as_str())));
        assert!(spec
            .faults
            .iter()
            .all(|f| KNOWN_FAULTS.contains(&f.as_str())));
    }
}
