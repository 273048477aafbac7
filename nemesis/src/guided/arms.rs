//! The faults the search may choose ([`Arm`]) and how a chosen one becomes a planned fault.

use std::collections::BTreeSet;
use std::fmt;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::network::CutMode;
use crate::plan::{ClockMode, FaultAction, NodeNames, PlannedFault, Target};
use crate::schedule::{class_of, pick, SHAPES};

use super::AbstractState;

/// When a chosen fault starts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Timing {
    /// At once.
    #[default]
    Now,
    /// Just after the leader set next changes (bounded wait).
    AfterLeaderChange,
    /// Clock arms only: a jump back on whoever leads, 20-100 ms after the next partition
    /// that isolates the leader starts, lasting until that partition heals (the random
    /// schedule's aligned clock fault); while it waits, the link class chooses among the
    /// partitions that isolate the leader.
    WithNextCut,
}

/// One fault the search may choose: a kind as `--nemesis` names it, whom it hits, how
/// long, and when (at once, just after the next leader change, with the next cut).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Arm {
    /// The `--nemesis` kind (`kill`, `partition-leader`, ...).
    pub kind: String,
    /// Whom: a target (`leader`, `follower`, `minority`, ...) or a partition shape.
    pub whom: String,
    /// Three quarters of the class interval rather than a quarter (an arm timed
    /// [`Timing::WithNextCut`] lasts as long as the cut instead).
    pub long: bool,
    /// When it starts.
    #[serde(default)]
    pub timing: Timing,
    /// `slow` where nodes are named ([`arms`]): a delay of 20-60 ms per message, the low
    /// end of the random schedule's 20-200 ms, rather than anywhere in it. A message that
    /// comes a little late and one that comes after the peers' and the clients' timeouts
    /// make different failures; which one finds a bug, the search learns.
    #[serde(default, skip_serializing_if = "is_false")]
    pub mild: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Arm {
    /// A partition that cuts off whoever leads when it starts.
    pub fn isolates_leader(&self) -> bool {
        self.kind == "partition-leader"
            || (self.kind == "partition" && self.whom == "isolate-leader")
    }
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if !self.whom.is_empty() {
            write!(f, " {}", self.whom)?;
        }
        if self.mild {
            write!(f, " mild")?;
        }
        match self.timing {
            Timing::Now => write!(f, " {}", if self.long { "long" } else { "short" }),
            Timing::AfterLeaderChange => write!(
                f,
                " {} after-leader-change",
                if self.long { "long" } else { "short" }
            ),
            Timing::WithNextCut => write!(f, " with-next-cut"),
        }
    }
}

fn target_name(t: Target) -> &'static str {
    match t {
        Target::One => "one",
        Target::Minority => "minority",
        Target::Majority => "majority",
        Target::All => "all",
        Target::Leader => "leader",
        Target::Follower => "follower",
        Target::Nodes => "nodes",
    }
}

fn target_of(name: &str) -> Target {
    match name {
        "minority" => Target::Minority,
        "majority" => Target::Majority,
        "all" => Target::All,
        "leader" => Target::Leader,
        "follower" => Target::Follower,
        _ => Target::One,
    }
}

/// The arm's whom for the `i`-th node (from 0) of a cluster whose nodes have no roles.
fn node_whom(i: usize) -> String {
    format!("node{}", i + 1)
}

/// The node a `node<K>` whom names (from 0), when it names one of `n`.
pub(super) fn node_of(whom: &str, n: usize) -> Option<usize> {
    let k: usize = whom.strip_prefix("node")?.parse().ok()?;
    (1..=n).contains(&k).then(|| k - 1)
}

/// Whom each kind may hit: targets, or partition shapes. `slow` and `loss` on one node,
/// where the target reports no leader (its nodes differ by what they hold, not by a role
/// that moves: the txn database's participants, each the owner of its keys), name each
/// node (`node1` ... `nodeN`, as the target numbers them) rather than a random one, so
/// that the search can learn which node's links matter.
fn whoms(kind: &str, n: usize, leaders_known: bool) -> Vec<String> {
    let t = |ts: &[Target]| ts.iter().map(|&t| target_name(t).to_string()).collect();
    match kind {
        "kill" | "pause" => t(&[
            Target::Leader,
            Target::Follower,
            Target::Minority,
            Target::Majority,
            Target::All,
        ]),
        "kill-one" => t(&[Target::One]),
        "clock" => t(&[Target::Leader, Target::One, Target::All]),
        "slow" | "loss" if !leaders_known && n >= 2 => std::iter::once("all".to_string())
            .chain((0..n).map(node_whom))
            .collect(),
        "slow" | "loss" => t(&[Target::One, Target::All]),
        "slow-client" | "strobe-pause" => t(&[Target::Leader, Target::Follower, Target::One]),
        "partition" => SHAPES
            .iter()
            .filter(|s| n >= 4 || !matches!(**s, "majorities-ring" | "bridge"))
            .map(|s| s.to_string())
            .collect(),
        _ => vec![String::new()],
    }
}

/// Every arm of the kinds asked for, by class ([`CLASS_NAMES`] order). Timing arms
/// (after a leader change) only when the target reports leaders; so is the clock arm
/// that coordinates with the link class ([`Timing::WithNextCut`]), when clock faults and
/// partitions that can isolate the leader are both asked for.
pub fn arms(kinds: &[String], n: usize, leaders_known: bool) -> [Vec<Arm>; 3] {
    let mut out: [Vec<Arm>; 3] = Default::default();
    for kind in kinds {
        let Some(c) = class_of(kind) else { continue };
        if n < 2
            && matches!(
                kind.as_str(),
                "partition" | "partition-leader" | "leader-churn" | "figure-8"
            )
        {
            continue;
        }
        let milds: &[bool] = if kind == "slow" && !leaders_known && n >= 2 {
            &[false, true]
        } else {
            &[false]
        };
        for whom in whoms(kind, n, leaders_known) {
            for &mild in milds {
                for long in [false, true] {
                    for timing in [Timing::Now, Timing::AfterLeaderChange] {
                        if timing == Timing::AfterLeaderChange && !leaders_known {
                            continue;
                        }
                        out[c].push(Arm {
                            kind: kind.clone(),
                            whom: whom.clone(),
                            long,
                            timing,
                            mild,
                        });
                    }
                }
            }
        }
    }
    let coordinated = leaders_known
        && n >= 2
        && kinds.iter().any(|k| k == "clock")
        && out[1].iter().any(Arm::isolates_leader);
    if coordinated {
        out[2].push(Arm {
            kind: "clock".into(),
            whom: target_name(Target::Leader).into(),
            long: false,
            timing: Timing::WithNextCut,
            mild: false,
        });
    }
    out
}

/// The kind a started arm counts as for the fault-coverage check (`fault_coverage.rs`): a
/// partition shaped `isolate-leader` is a `partition-leader`, whatever kind chose it.
pub fn coverage_kind(arm: &Arm) -> &str {
    if arm.kind == "partition" && arm.whom == "isolate-leader" {
        "partition-leader"
    } else {
        &arm.kind
    }
}

/// The arms of one class the chooser may pick from in `state`, given the kinds started in
/// this run so far (`started`, as [`coverage_kind`] counts them):
///
/// - an arm that waits for a leader change only when one may come (some fault is active,
///   or no single leader is seen: an election is under way), so a quiet start does not
///   wait for nothing;
/// - while some kind of the class has not been started, only the arms that start it, so
///   every kind asked for is exercised (as the random schedule deals every kind once
///   before any twice, and as the fault-coverage check requires);
/// - among those, while a clock fault waits for the next cut (`cut_pending`), only the
///   partitions that isolate the leader, when there are any.
pub fn candidates(
    class_arms: &[Arm],
    state: &AbstractState,
    cut_pending: bool,
    started: &BTreeSet<String>,
) -> Vec<Arm> {
    let change_expected = state.active != 0 || state.leaders != Some(1);
    let open: Vec<Arm> = class_arms
        .iter()
        .filter(|a| a.timing != Timing::AfterLeaderChange || change_expected)
        .cloned()
        .collect();
    let fresh: Vec<Arm> = open
        .iter()
        .filter(|a| !started.contains(&a.kind) && coverage_kind(a) == a.kind)
        .cloned()
        .collect();
    let base = if fresh.is_empty() { open } else { fresh };
    let isolating: Vec<Arm> = base
        .iter()
        .filter(|a| a.isolates_leader())
        .cloned()
        .collect();
    if cut_pending && !isolating.is_empty() {
        isolating
    } else {
        base
    }
}

/// The fault an arm stands for, with its random details (nodes of a `minority`, delays,
/// offsets) drawn from `rng`. `class_iv_ms` is the class interval; the duration is a
/// quarter of it (short) or three quarters (long), as the random schedule's range ends.
pub fn concretize(
    arm: &Arm,
    names: NodeNames,
    n: usize,
    class_iv_ms: u64,
    at_ms: u64,
    rng: &mut ChaCha8Rng,
) -> PlannedFault {
    let iv = class_iv_ms.max(4);
    let mut for_ms = if arm.long { iv * 3 / 4 } else { iv / 4 };
    let target = target_of(&arm.whom);
    let chosen_node = node_of(&arm.whom, n);
    let nodes = |rng: &mut ChaCha8Rng| match chosen_node {
        Some(i) => names.names(&[i]),
        None => names.names(&pick(target, n, rng)),
    };
    let blank_partition = |shape: &str| FaultAction::Partition {
        shape: shape.into(),
        groups: Vec::new(),
        blocked: Vec::new(),
        mode: CutMode::Blackhole,
    };
    let action = match arm.kind.as_str() {
        "kill" | "kill-one" => FaultAction::Kill {
            target,
            nodes: nodes(rng),
        },
        "pause" => FaultAction::Pause {
            target,
            nodes: nodes(rng),
        },
        "partition" => crate::schedule::partition_shape(&arm.whom, names, n, rng),
        "partition-leader" => blank_partition("isolate-leader"),
        "leader-churn" => blank_partition("leader-churn"),
        "figure-8" => {
            for_ms = for_ms.max(crate::schedule::FIGURE8_MIN_MS);
            blank_partition("figure-8")
        }
        "clock" if target == Target::Leader => FaultAction::Clock {
            // the leader's clock jumps back: what stretches a lease past its successor
            mode: ClockMode::Bump,
            target,
            nodes: Vec::new(),
            offset_ms: -rng.gen_range(1_000..=5_000i64),
            period_ms: 0,
        },
        "clock" => {
            let mode = [ClockMode::Bump, ClockMode::Strobe, ClockMode::Skew][rng.gen_range(0..3)];
            crate::schedule::clock_action(mode, target, names, n, rng)
        }
        "slow" => {
            let delay_ms = rng.gen_range(20..=if arm.mild { 60 } else { 200 });
            FaultAction::Slow {
                nodes: nodes(rng),
                delay_ms,
                jitter_ms: delay_ms / 4,
            }
        }
        "slow-client" => {
            let delay_ms = rng.gen_range(20..=200);
            FaultAction::SlowClient {
                target,
                nodes: nodes(rng),
                delay_ms,
                jitter_ms: delay_ms / 4,
            }
        }
        "strobe-pause" => {
            let every_ms = rng.gen_range(200..=1_000);
            FaultAction::StrobePause {
                target,
                nodes: nodes(rng),
                stop_ms: rng.gen_range(10..=every_ms / 4),
                every_ms,
            }
        }
        _ => FaultAction::Loss {
            nodes: nodes(rng),
            fraction: f64::from(rng.gen_range(5u32..=50)) / 100.0,
        },
    };
    PlannedFault {
        at_ms,
        for_ms,
        action,
    }
}

/// The arm a planned fault of the random schedule stands for, for coverage: its kind,
/// target or shape, and whether it lasts more than half the class interval.
pub fn arm_of(fault: &PlannedFault, class_iv_ms: u64) -> Arm {
    let (kind, whom) = match &fault.action {
        FaultAction::Kill { target, nodes } if *target == Target::One && nodes.len() == 1 => {
            ("kill".to_string(), "one".to_string())
        }
        FaultAction::Kill { target, .. } => ("kill".into(), target_name(*target).into()),
        FaultAction::Pause { target, .. } => ("pause".into(), target_name(*target).into()),
        FaultAction::Partition { shape, .. } => match shape.as_str() {
            "leader-churn" | "figure-8" => (shape.clone(), String::new()),
            s => ("partition".into(), s.to_string()),
        },
        FaultAction::Clock { target, .. } => ("clock".into(), target_name(*target).into()),
        FaultAction::Slow { nodes, .. } => ("slow".into(), one_or_all(nodes)),
        FaultAction::Loss { nodes, .. } => ("loss".into(), one_or_all(nodes)),
        FaultAction::SlowClient { target, .. } => {
            ("slow-client".into(), target_name(*target).into())
        }
        FaultAction::StrobePause { target, .. } => {
            ("strobe-pause".into(), target_name(*target).into())
        }
    };
    Arm {
        kind,
        whom,
        long: fault.for_ms > class_iv_ms / 2,
        timing: Timing::Now,
        mild: false,
    }
}

fn one_or_all(nodes: &[String]) -> String {
    if nodes.len() == 1 { "one" } else { "all" }.to_string()
}
