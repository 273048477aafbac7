//! The guided fault search (`--nemesis-search guided`), sans IO: what the cluster is seen
//! doing, abstracted into a small state per sample ([`AbstractState`]), the faults the
//! search may choose ([`Arm`]: kind, target, duration, timing), and the bandit that picks
//! the next one ([`Chooser`]: a (state, arm) pair never tried first, then UCB1 over the
//! rewards pairs earned). The runner (`runner/guided.rs`) samples, asks, starts the fault
//! and records it, so the schedule it made is a plan that `--nemesis-plan` replays.
//!
//! Everything here is a pure function of its inputs and the seed: the chooser's only
//! randomness is a ChaCha stream from the run's seed.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::network::CutMode;
use crate::plan::{ClockMode, FaultAction, NodeNames, PlannedFault, Target};
use crate::schedule::{class_of, pick, SHAPES};

/// How the next fault is chosen (`--nemesis-search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Search {
    /// The seeded random schedule, made before the run (the default).
    #[default]
    Random,
    /// Chosen while the run goes on, from what the cluster does ([`Chooser`]).
    Guided,
}

impl Search {
    /// Parses `random` or `guided`.
    pub fn parse(s: &str) -> Option<Search> {
        match s {
            "random" => Some(Search::Random),
            "guided" => Some(Search::Guided),
            _ => None,
        }
    }

    /// True for the default, [`Search::Random`].
    pub fn is_random(&self) -> bool {
        *self == Search::Random
    }

    /// The name `--nemesis-search` takes.
    pub fn name(self) -> &'static str {
        match self {
            Search::Random => "random",
            Search::Guided => "guided",
        }
    }
}

/// One node's status as the target reports it (`GET /status` of the bundled systems).
/// Every field is optional: a system says what it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeStatus {
    /// Whether it leads something; `None` for a system without leaders (2PC).
    pub leads: Option<bool>,
    /// Its highest term (Raft), if it has terms.
    pub term: Option<u64>,
    /// How far it has got: a commit index, a commit sequence number.
    pub progress: Option<u64>,
    /// Work it holds undecided: in-doubt transactions, tentative writes.
    pub pending: Option<u64>,
}

/// What the clients have seen so far (cumulative counts; the sampler takes differences).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientCounts {
    /// `ok` completions.
    pub ok: u64,
    /// `fail` completions (definite errors).
    pub fail: u64,
    /// `info` completions (timeouts, unknown outcomes).
    pub info: u64,
    /// Sum of completed ops' latencies, in microseconds.
    pub latency_us: u64,
    /// Ops whose latency is in `latency_us`.
    pub timed: u64,
    /// Anomalies the check alongside the run has found so far.
    pub anomalies: u64,
    /// For each anomaly found, in the order found, the span of the ops that make it
    /// (from the earliest invocation to the latest completion): the faults active then
    /// are credited with it. May be shorter than `anomalies` (a signal that cannot say).
    pub evidence: Vec<(std::time::Instant, std::time::Instant)>,
}

/// One sample of the cluster: each node's status (`None`: the target serves no status;
/// an entry `None`: that node did not answer) and the clients' counts.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Per node, its status; `None` when the target cannot say.
    pub nodes: Option<Vec<Option<NodeStatus>>>,
    /// The clients' cumulative counts.
    pub clients: ClientCounts,
}

/// Fault classes, as the random schedule has them: a class never has two faults at once.
pub const CLASS_NAMES: [&str; 3] = ["process", "net", "clock"];

/// The abstract state of one sample. Small on purpose: coverage counts its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AbstractState {
    /// Leaders reported: `None` when the target reports no leader role; else 0, 1, or 2
    /// meaning "more than one" (a stale leader beside a new one).
    pub leaders: Option<u8>,
    /// The leader set or the highest term changed since the sample before.
    pub leader_changed: bool,
    /// Answering nodes whose progress is well behind the most advanced one: 0, 1, 2 (more).
    pub lagging: Option<u8>,
    /// Nodes that did not answer their status: 0, 1, 2 (more); `None` without status.
    pub silent: Option<u8>,
    /// Some node holds undecided work (in-doubt transactions, tentative writes).
    pub pending: Option<bool>,
    /// Fault classes active, a bit per [`CLASS_NAMES`] entry.
    pub active: u8,
    /// What the clients saw since the sample before.
    pub clients: ClientClass,
}

/// The clients' experience over one sample period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientClass {
    /// Nothing completed.
    Stalled,
    /// Some op timed out or ended unknown.
    Timeouts,
    /// More than a fifth of the completions failed.
    Failing,
    /// Mean latency above three times the healthy baseline.
    Slow,
    /// None of the above.
    Healthy,
}

impl fmt::Display for AbstractState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |c: Option<u8>| match c {
            None => "?".to_string(),
            Some(2) => "2+".to_string(),
            Some(k) => k.to_string(),
        };
        let mut parts = Vec::new();
        if self.leaders.is_some() {
            parts.push(format!(
                "leaders={}{}",
                count(self.leaders),
                if self.leader_changed { " changed" } else { "" }
            ));
        }
        if self.lagging.is_some() {
            parts.push(format!("lagging={}", count(self.lagging)));
        }
        if self.silent.is_some() {
            parts.push(format!("silent={}", count(self.silent)));
        }
        if let Some(p) = self.pending {
            parts.push(if p { "pending" } else { "no-pending" }.to_string());
        }
        let active: Vec<&str> = (0..CLASS_NAMES.len())
            .filter(|c| self.active & (1 << c) != 0)
            .map(|c| CLASS_NAMES[c])
            .collect();
        parts.push(if active.is_empty() {
            "faults=none".to_string()
        } else {
            format!("faults={}", active.join("+"))
        });
        let clients = match self.clients {
            ClientClass::Stalled => "stalled",
            ClientClass::Timeouts => "timeouts",
            ClientClass::Failing => "failing",
            ClientClass::Slow => "slow",
            ClientClass::Healthy => "healthy",
        };
        parts.push(format!("clients={clients}"));
        write!(f, "{}", parts.join(" "))
    }
}

/// How far behind the most advanced node a node must be to count as lagging, at least:
/// more than that node advanced since the sample before (a follower one sample period
/// behind under load is not lagging), and more than this.
pub const LAG_THRESHOLD: u64 = 20;

/// Turns samples into abstract states; remembers what it needs from the sample before
/// (leader set, term, client counts, the healthy latency baseline).
#[derive(Debug, Default)]
pub struct Abstractor {
    prev_leaders: Option<BTreeSet<usize>>,
    prev_term: Option<u64>,
    /// The most advanced node's progress at the sample before.
    prev_max_progress: Option<u64>,
    prev_clients: ClientCounts,
    /// Mean latency (µs) of healthy periods, smoothed.
    baseline_us: Option<f64>,
    /// Leader changes seen so far.
    pub leader_changes: u64,
}

impl Abstractor {
    /// The abstract state of `sample` with fault classes `active` (bits of [`CLASS_NAMES`]).
    pub fn state(&mut self, sample: &Sample, active: u8) -> AbstractState {
        let mut st = AbstractState {
            leaders: None,
            leader_changed: false,
            lagging: None,
            silent: None,
            pending: None,
            active,
            clients: self.clients(&sample.clients),
        };
        let Some(nodes) = &sample.nodes else {
            return st;
        };
        let cap = |k: usize| k.min(2) as u8;
        st.silent = Some(cap(nodes.iter().filter(|s| s.is_none()).count()));
        let answered: Vec<(usize, &NodeStatus)> = nodes
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i, s)))
            .collect();
        if answered.iter().any(|(_, s)| s.leads.is_some()) {
            let leaders: BTreeSet<usize> = answered
                .iter()
                .filter(|(_, s)| s.leads == Some(true))
                .map(|&(i, _)| i)
                .collect();
            let term = answered.iter().filter_map(|(_, s)| s.term).max();
            let changed = self.prev_leaders.as_ref().is_some_and(|p| *p != leaders)
                || (self.prev_term.is_some() && term.is_some() && term != self.prev_term);
            // An empty leader set between two leaders is a change only once it is over.
            if changed && !leaders.is_empty() {
                self.leader_changes += 1;
                st.leader_changed = true;
            }
            st.leaders = Some(cap(leaders.len()));
            if !leaders.is_empty() || self.prev_leaders.is_none() {
                self.prev_leaders = Some(leaders);
            }
            if term.is_some() {
                self.prev_term = term;
            }
        }
        let progress: Vec<u64> = answered.iter().filter_map(|(_, s)| s.progress).collect();
        if let Some(&max) = progress.iter().max() {
            let advance = self
                .prev_max_progress
                .map_or(0, |prev| max.saturating_sub(prev));
            let threshold = LAG_THRESHOLD.max(advance);
            self.prev_max_progress = Some(max);
            let behind = progress
                .iter()
                .filter(|&&p| p.saturating_add(threshold) < max)
                .count();
            st.lagging = Some(cap(behind));
        }
        if answered.iter().any(|(_, s)| s.pending.is_some()) {
            st.pending = Some(answered.iter().any(|(_, s)| s.pending.unwrap_or(0) > 0));
        }
        st
    }

    fn clients(&mut self, now: &ClientCounts) -> ClientClass {
        let p = std::mem::replace(
            &mut self.prev_clients,
            ClientCounts {
                evidence: Vec::new(),
                ..now.clone()
            },
        );
        let ok = now.ok.saturating_sub(p.ok);
        let fail = now.fail.saturating_sub(p.fail);
        let info = now.info.saturating_sub(p.info);
        let timed = now.timed.saturating_sub(p.timed);
        let mean_us =
            (timed > 0).then(|| now.latency_us.saturating_sub(p.latency_us) as f64 / timed as f64);
        if ok + fail + info == 0 {
            return ClientClass::Stalled;
        }
        if info > 0 {
            return ClientClass::Timeouts;
        }
        if fail * 5 > ok + fail {
            return ClientClass::Failing;
        }
        match (mean_us, self.baseline_us) {
            (Some(m), Some(b)) if m > 3.0 * b.max(200.0) => ClientClass::Slow,
            (Some(m), b) => {
                self.baseline_us = Some(b.map_or(m, |b| 0.8 * b + 0.2 * m));
                ClientClass::Healthy
            }
            (None, _) => ClientClass::Healthy,
        }
    }
}

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
fn node_of(whom: &str, n: usize) -> Option<usize> {
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

/// Rewards, per event observed while a fault runs or settles after it.
pub mod reward {
    /// A state no sample of the run had reached before.
    pub const NEW_STATE: f64 = 1.0;
    /// The leader set or the term changed.
    pub const LEADER_CHANGE: f64 = 0.5;
    /// Clients saw timeouts or failures (the system was disturbed).
    pub const DISTURBED: f64 = 0.2;
    /// The check alongside the run found an anomaly: what preceded it is worth repeating.
    /// Well above what a fault earns from new states in a run (a few), so that an arm
    /// that led to an anomaly outranks one that only led somewhere new.
    pub const ANOMALY: f64 = 20.0;
    /// What an arm never tried (in this run or the memory it started from) is taken to
    /// be worth: above what faults earn from new states alone, so a cold run tries every
    /// arm before repeating one, below an arm that led to an anomaly in its first tries.
    pub const UNTRIED: f64 = 10.0;
}

/// How long after a fault stopped an anomaly whose evidence no fault was active in is
/// still put down to it: the aftermath of a fault (a killed majority restarting and
/// electing, the first reads after a partition heals) shows in the ops that follow it.
pub const AFTERMATH: std::time::Duration = std::time::Duration::from_secs(2);

/// Which of `faults` (each its start and, once it stopped, its stop) an anomaly is
/// credited to, given its evidence (the span of the ops that make it, from the earliest
/// invocation to the latest completion): the faults active at some moment of the span
/// (started before it ended, not stopped before it began); when none was, the one that
/// stopped last before it began, if within [`AFTERMATH`]; else none (an anomaly that no fault of
/// the search's caused, such as one in the first ops of the run, is nobody's reward).
pub fn credited<T>(faults: &[(T, Option<T>)], evidence: (T, T)) -> Vec<usize>
where
    T: Copy + Ord + std::ops::Add<std::time::Duration, Output = T>,
{
    let (from, to) = evidence;
    let active: Vec<usize> = faults
        .iter()
        .enumerate()
        .filter(|(_, &(start, stop))| start <= to && stop.is_none_or(|s| s >= from))
        .map(|(i, _)| i)
        .collect();
    if !active.is_empty() {
        return active;
    }
    let before = |stop: Option<T>| stop.filter(|&s| s < from && s + AFTERMATH >= from);
    let last = faults.iter().filter_map(|&(_, stop)| before(stop)).max();
    faults
        .iter()
        .enumerate()
        .filter(|(_, &(_, stop))| last.is_some() && before(stop) == last)
        .map(|(i, _)| i)
        .collect()
}

/// Statistics of one (state, arm) pair, or of one arm over every state.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Stat {
    tries: u64,
    reward: f64,
}

impl Stat {
    fn mean(&self) -> f64 {
        if self.tries == 0 {
            0.0
        } else {
            self.reward / self.tries as f64
        }
    }

    fn add(&mut self, tries: u64, reward: f64) {
        self.tries += tries;
        self.reward += reward;
    }
}

/// One remembered (state, arm) pair: how often it was chosen and what it earned, over
/// the guided runs a [`Memory`] sums.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remembered {
    /// The state the arm was chosen in.
    pub state: AbstractState,
    /// The arm.
    pub arm: Arm,
    /// Times chosen there.
    pub tries: u64,
    /// Reward earned there, summed.
    pub reward: f64,
    /// `state | arm` in words, for a reader (ignored when read back).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pair: String,
}

/// The (state, arm) reward table guided runs of one system configuration leave for the
/// next (`--nemesis-memory`), so a campaign's runs learn from each other.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// The table's format: 1 (no `version` field, before 2026-12-05 evening) credited an
    /// anomaly to every fault running or stopped within 3 s of its detection; 2 credits it
    /// to the faults active while the ops that make it ran ([`credited`]). Both are read
    /// (a version-1 table's rewards are only less precise); a table is written as
    /// [`MEMORY_VERSION`]; a later version is refused.
    #[serde(default = "memory_version_1")]
    pub version: u32,
    /// The configuration the table is for, in words (the harness's key).
    pub key: String,
    /// Guided runs that added to it.
    pub runs: u64,
    /// The pairs tried, with what they earned.
    pub pairs: Vec<Remembered>,
}

/// The format of the memory tables written now (see [`Memory::version`]).
pub const MEMORY_VERSION: u32 = 2;

fn memory_version_1() -> u32 {
    1
}

impl Memory {
    /// Checks what serde cannot: every count and reward a table can hold.
    pub fn validate(&self) -> Result<(), String> {
        if self.version == 0 || self.version > MEMORY_VERSION {
            return Err(format!(
                "format version {} (this build reads 1 to {MEMORY_VERSION})",
                self.version
            ));
        }
        for (k, p) in self.pairs.iter().enumerate() {
            if p.tries == 0 {
                return Err(format!("pair {k} ({}): tries 0", p.arm));
            }
            if !p.reward.is_finite() {
                return Err(format!(
                    "pair {k} ({}): reward {} is not finite",
                    p.arm, p.reward
                ));
            }
        }
        Ok(())
    }
}

/// The bandit over (abstract state, arm) pairs, seeded. Every candidate gets a value: a
/// pair tried in this state, its mean reward plus UCB1's `sqrt(2 ln (N+1) / n)`; an arm
/// not tried in this state, its mean reward over every state (the memory's included)
/// plus `sqrt(2 ln (N+1))`; an arm never tried anywhere, [`reward::UNTRIED`] plus the
/// same. The highest value wins; ties go to the arm tried least anywhere, then a seeded
/// draw. An arm that coordinates two classes ([`Timing::WithNextCut`]) starts with the
/// prior of two tries that each found an anomaly (not stored in a memory), as the random
/// schedule aligns three cuts in four with such a fault: a cold run tries it first and
/// repeats it a few times before the arms never tried.
#[derive(Debug)]
pub struct Chooser {
    rng: ChaCha8Rng,
    pairs: BTreeMap<(AbstractState, Arm), Stat>,
    arms: BTreeMap<Arm, Stat>,
}

impl Chooser {
    /// A chooser whose ties are broken by a stream from `seed`.
    pub fn new(seed: u64) -> Chooser {
        Chooser {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x9d1d_ed5e_a4c4_0001),
            pairs: BTreeMap::new(),
            arms: BTreeMap::new(),
        }
    }

    /// A chooser that starts from what earlier runs left: their pairs count as tried,
    /// with what they earned.
    pub fn with_memory(seed: u64, memory: &Memory) -> Chooser {
        let mut c = Chooser::new(seed);
        for p in &memory.pairs {
            c.pairs
                .entry((p.state, p.arm.clone()))
                .or_default()
                .add(p.tries, p.reward);
            c.arms
                .entry(p.arm.clone())
                .or_default()
                .add(p.tries, p.reward);
        }
        c
    }

    /// The table to leave for the next run: every pair tried, the memory's included.
    pub fn memory(&self, key: &str, runs: u64) -> Memory {
        Memory {
            version: MEMORY_VERSION,
            key: key.to_string(),
            runs,
            pairs: self
                .pairs
                .iter()
                .filter(|(_, s)| s.tries > 0)
                .map(|((state, arm), s)| Remembered {
                    state: *state,
                    arm: arm.clone(),
                    tries: s.tries,
                    reward: s.reward,
                    pair: format!("{state} | {arm}"),
                })
                .collect(),
        }
    }

    /// An arm's statistics over every state, with the prior of a coordinating arm.
    fn arm_stat(&self, arm: &Arm) -> Stat {
        let mut s = self.arms.get(arm).copied().unwrap_or_default();
        if arm.timing == Timing::WithNextCut {
            s.add(2, 2.0 * reward::ANOMALY);
        }
        s
    }

    /// What choosing `arm` in `state` is worth now; `ln` is `ln (N+1)`, N the tries of
    /// the candidates in this state.
    fn value(&self, state: &AbstractState, arm: &Arm, ln: f64) -> f64 {
        match self.pairs.get(&(*state, arm.clone())) {
            Some(p) if p.tries > 0 => p.mean() + (2.0 * ln / p.tries as f64).sqrt(),
            _ => {
                let s = self.arm_stat(arm);
                let m = if s.tries > 0 {
                    s.mean()
                } else {
                    reward::UNTRIED
                };
                m + (2.0 * ln).sqrt()
            }
        }
    }

    /// Picks one of `candidates` (not empty) in `state`; counts it as tried there.
    pub fn choose(&mut self, state: &AbstractState, candidates: &[Arm]) -> Option<Arm> {
        if candidates.is_empty() {
            return None;
        }
        let tried: u64 = candidates
            .iter()
            .filter_map(|a| self.pairs.get(&(*state, a.clone())))
            .map(|s| s.tries)
            .sum();
        let ln = ((tried + 1) as f64).ln();
        let values: Vec<f64> = candidates
            .iter()
            .map(|a| self.value(state, a, ln))
            .collect();
        let best = values.iter().copied().fold(f64::MIN, f64::max);
        let top: Vec<&Arm> = candidates
            .iter()
            .zip(&values)
            .filter(|(_, &v)| v >= best - 1e-9)
            .map(|(a, _)| a)
            .collect();
        let least = top
            .iter()
            .map(|a| self.arms.get(*a).map_or(0, |s| s.tries))
            .min()?;
        let mut top: Vec<&Arm> = top
            .into_iter()
            .filter(|a| self.arms.get(*a).map_or(0, |s| s.tries) == least)
            .collect();
        top.shuffle(&mut self.rng);
        let chosen = top[0].clone();
        self.pairs
            .entry((*state, chosen.clone()))
            .or_default()
            .tries += 1;
        self.arms.entry(chosen.clone()).or_default().tries += 1;
        Some(chosen)
    }

    /// Credits `reward` to `arm` chosen in `state`.
    pub fn reward(&mut self, state: &AbstractState, arm: &Arm, reward: f64) {
        self.pairs.entry((*state, arm.clone())).or_default().reward += reward;
        self.arms.entry(arm.clone()).or_default().reward += reward;
    }

    /// A draw from the chooser's stream (for the details of the fault an arm stands for).
    pub fn rng(&mut self) -> &mut ChaCha8Rng {
        &mut self.rng
    }
}

/// What a run's fault search reached: stored in results.json.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// `random` or `guided`.
    pub search: String,
    /// Which signals the states were made of, in words (and what was missing).
    pub signals: String,
    /// Samples taken (about two a second).
    pub samples: u64,
    /// Leader changes seen.
    pub leader_changes: u64,
    /// Anomalies the check alongside the run had found when the main phase ended.
    pub anomalies: u64,
    /// Samples per abstract state reached.
    pub states: BTreeMap<String, u64>,
    /// Faults started per (state, fault) pair, keyed `state | fault`.
    pub pairs: BTreeMap<String, u64>,
    /// The memory a guided search started from; `None` when none was looked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStart>,
}

/// Which memory a guided run started from, for results.json: a reader sees the run was
/// not cold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryStart {
    /// The memory file (read at the start, written at the end); `off` when disabled.
    pub file: String,
    /// Guided runs it summed when this one started (0: cold).
    pub runs: u64,
    /// (state, arm) pairs it held.
    pub pairs: usize,
    /// Why it was not used or will not be written, when so (unreadable, another
    /// configuration's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Coverage {
    /// Records one sample's state; true when the run had not reached it before.
    pub fn sample(&mut self, state: &AbstractState) -> bool {
        self.samples += 1;
        let e = self.states.entry(state.to_string()).or_insert(0);
        *e += 1;
        *e == 1
    }

    /// Records a fault started in `state`.
    pub fn started(&mut self, state: &AbstractState, arm: &Arm) {
        *self.pairs.entry(format!("{state} | {arm}")).or_insert(0) += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(active: u8, leaders: Option<u8>) -> AbstractState {
        AbstractState {
            leaders,
            leader_changed: false,
            lagging: None,
            silent: None,
            pending: None,
            active,
            clients: ClientClass::Healthy,
        }
    }

    fn kinds(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_chooser_tries_every_unseen_pair_before_repeating_one() {
        let arms = arms(&kinds(&["kill"]), 5, true)[0].clone();
        assert_eq!(arms.len(), 5 * 2 * 2);
        let s = state(0, Some(1));
        let mut c = Chooser::new(7);
        let mut seen = BTreeSet::new();
        for _ in 0..arms.len() {
            let a = c.choose(&s, &arms).unwrap();
            assert!(
                seen.insert(a.clone()),
                "{a} chosen twice before all were tried"
            );
        }
        assert_eq!(seen.len(), arms.len());
        // In another state, every pair is unseen again, and arms tried least anywhere
        // come first: after one more in the first state, that arm is last in line.
        let again = c.choose(&s, &arms).unwrap();
        let other = state(2, Some(2));
        let first = c.choose(&other, &arms).unwrap();
        assert_ne!(first, again);
    }

    #[test]
    fn the_chooser_is_deterministic_for_a_seed_and_differs_across_seeds() {
        let arms = arms(&kinds(&["kill", "pause"]), 5, true)[0].clone();
        let run = |seed| {
            let mut c = Chooser::new(seed);
            (0..30)
                .map(|i| {
                    let s = state((i % 3) as u8, Some((i % 2) as u8));
                    let a = c.choose(&s, &arms).unwrap();
                    c.reward(&s, &a, (i % 4) as f64);
                    a.to_string()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn once_every_pair_was_tried_the_rewarded_arm_is_preferred() {
        let arms = arms(&kinds(&["partition-leader"]), 5, false)[1].clone();
        assert_eq!(arms.len(), 2);
        let s = state(0, Some(1));
        let mut c = Chooser::new(3);
        for _ in 0..2 {
            let a = c.choose(&s, &arms).unwrap();
            let r = if a.long { 5.0 } else { 0.0 };
            c.reward(&s, &a, r);
        }
        let picks: Vec<bool> = (0..10)
            .map(|_| {
                let a = c.choose(&s, &arms).unwrap();
                let r = if a.long { 5.0 } else { 0.0 };
                c.reward(&s, &a, r);
                a.long
            })
            .collect();
        let long = picks.iter().filter(|&&l| l).count();
        assert!(long >= 7, "rewarded arm chosen {long}/10: {picks:?}");
    }

    #[test]
    fn without_status_the_state_is_faults_and_clients_only() {
        let mut ab = Abstractor::default();
        let sample = Sample {
            nodes: None,
            clients: ClientCounts {
                ok: 10,
                timed: 10,
                latency_us: 10_000,
                ..Default::default()
            },
        };
        let st = ab.state(&sample, 0b010);
        assert_eq!(st.leaders, None);
        assert_eq!(st.lagging, None);
        assert_eq!(st.silent, None);
        assert_eq!(st.to_string(), "faults=net clients=healthy");
        // and no arm waits for a leader change that cannot be seen
        let all = arms(&kinds(&["kill", "partition"]), 5, false);
        assert!(all.iter().flatten().all(|a| a.timing == Timing::Now));
        assert!(all
            .iter()
            .flatten()
            .all(|a| !a.to_string().contains("after")));
    }

    #[test]
    fn status_gives_leaders_changes_lag_and_silent_nodes() {
        let node = |leads, term, progress| {
            Some(NodeStatus {
                leads: Some(leads),
                term: Some(term),
                progress: Some(progress),
                pending: None,
            })
        };
        let mut ab = Abstractor::default();
        let one = Sample {
            nodes: Some(vec![node(true, 1, 100), node(false, 1, 100), None]),
            clients: ClientCounts {
                ok: 5,
                ..Default::default()
            },
        };
        let st = ab.state(&one, 0);
        assert_eq!(st.leaders, Some(1));
        assert!(!st.leader_changed);
        assert_eq!(st.silent, Some(1));
        assert_eq!(st.lagging, Some(0));
        let two = Sample {
            nodes: Some(vec![
                node(true, 1, 100),
                node(true, 2, 200),
                node(false, 2, 150),
            ]),
            clients: ClientCounts {
                ok: 5,
                info: 1,
                ..Default::default()
            },
        };
        let st = ab.state(&two, 0b001);
        assert_eq!(st.leaders, Some(2));
        assert!(st.leader_changed);
        // the most advanced node went 100 further since the sample before: a node 100
        // behind is one sample period behind, not lagging; 50 behind neither
        assert_eq!(st.lagging, Some(0));
        assert_eq!(st.clients, ClientClass::Timeouts);
        assert_eq!(ab.leader_changes, 1);
        assert_eq!(
            st.to_string(),
            "leaders=2+ changed lagging=0 silent=0 faults=process clients=timeouts"
        );
        // then it goes 10 further: 100 and 150 are far behind it now
        let three = Sample {
            nodes: Some(vec![
                node(false, 2, 100),
                node(true, 2, 210),
                node(false, 2, 150),
            ]),
            clients: ClientCounts {
                ok: 10,
                info: 1,
                ..Default::default()
            },
        };
        let st = ab.state(&three, 0b001);
        assert_eq!(st.lagging, Some(2));
        assert!(st.leader_changed);
        assert_eq!(st.leaders, Some(1));
    }

    #[test]
    fn an_arm_becomes_a_plan_entry_and_a_plan_entry_its_arm() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let all = arms(&kinds(&["kill", "partition", "clock", "slow"]), 5, true);
        for arm in all.iter().flatten() {
            let f = concretize(arm, NodeNames::FROM_ONE, 5, 8_000, 100, &mut rng);
            assert_eq!(f.validate(), Ok(()), "{arm}");
            assert_eq!(f.check_nodes(NodeNames::FROM_ONE, 5), Ok(()), "{arm}");
            let back = arm_of(&f, 8_000);
            assert_eq!(back.kind, arm.kind, "{arm}");
            assert_eq!(back.whom, arm.whom, "{arm}");
            assert_eq!(back.long, arm.long, "{arm}");
        }
    }

    #[test]
    fn without_leaders_slow_and_loss_name_each_node() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let all = arms(&kinds(&["slow", "loss"]), 5, false);
        let whoms: BTreeSet<&str> = all[1].iter().map(|a| a.whom.as_str()).collect();
        let want: BTreeSet<&str> = ["all", "node1", "node2", "node3", "node4", "node5"]
            .into_iter()
            .collect();
        assert_eq!(whoms, want);
        // slow: six whoms, short or long, mild or not; loss: six whoms, short or long
        assert_eq!(all[1].len(), 6 * 2 * 2 + 6 * 2);
        assert_eq!(all[1].iter().filter(|a| a.mild).count(), 6 * 2);
        assert!(all[1].iter().filter(|a| a.mild).all(|a| a.kind == "slow"));
        for arm in &all[1] {
            let f = concretize(arm, NodeNames::FROM_ONE, 5, 8_000, 100, &mut rng);
            assert_eq!(f.validate(), Ok(()), "{arm}");
            let nodes = match &f.action {
                FaultAction::Slow {
                    nodes, delay_ms, ..
                } => {
                    let top = if arm.mild { 60 } else { 200 };
                    assert!((20..=top).contains(delay_ms), "{arm}: {delay_ms} ms");
                    nodes.clone()
                }
                FaultAction::Loss { nodes, .. } => nodes.clone(),
                other => panic!("{arm}: {other:?}"),
            };
            match node_of(&arm.whom, 5) {
                // that node, every time
                Some(i) => assert_eq!(nodes, vec![format!("n{}", i + 1)], "{arm}"),
                None => assert_eq!(nodes.len(), 5, "{arm}"),
            }
            // for coverage it counts as the random schedule's `one` / `all`
            let back = arm_of(&f, 8_000);
            let whom = if arm.whom == "all" { "all" } else { "one" };
            assert_eq!(
                (back.kind.as_str(), back.whom.as_str()),
                (arm.kind.as_str(), whom)
            );
        }
        // with leaders, a random one as before, and no mild variant
        let led = arms(&kinds(&["slow"]), 5, true);
        assert!(led[1].iter().all(|a| a.whom == "one" || a.whom == "all"));
        assert!(led[1].iter().all(|a| !a.mild));
        // a memory written before the field reads as not mild; a mild arm says so
        let old: Arm =
            serde_json::from_str(r#"{"kind":"slow","whom":"node2","long":true,"timing":"now"}"#)
                .unwrap();
        assert!(!old.mild);
        let mild = all[1].iter().find(|a| a.mild).unwrap();
        assert!(mild.to_string().contains(" mild "), "{mild}");
        assert!(serde_json::to_string(mild)
            .unwrap()
            .contains("\"mild\":true"));
        assert!(!serde_json::to_string(&old).unwrap().contains("mild"));
    }

    #[test]
    fn with_clock_and_leader_cuts_one_clock_arm_waits_for_the_next_cut() {
        let all = arms(&kinds(&["partition-leader", "clock"]), 5, true);
        let timed: Vec<&Arm> = all[2]
            .iter()
            .filter(|a| a.timing == Timing::WithNextCut)
            .collect();
        assert_eq!(timed.len(), 1);
        assert_eq!(timed[0].to_string(), "clock leader with-next-cut");
        assert!(all[1].iter().all(Arm::isolates_leader));
        // only where a cut can isolate the leader, and the leader is known
        let none = |k: &[&str], known| {
            arms(&kinds(k), 5, known)
                .iter()
                .flatten()
                .all(|a| a.timing != Timing::WithNextCut)
        };
        assert!(none(&["partition-leader", "clock"], false));
        assert!(none(&["slow", "clock"], true));
        assert!(none(&["clock"], true));
        let shapes = arms(&kinds(&["partition", "clock"]), 5, true);
        assert!(shapes[2].iter().any(|a| a.timing == Timing::WithNextCut));
        let isolating: Vec<String> = shapes[1]
            .iter()
            .filter(|a| a.isolates_leader())
            .map(|a| a.whom.clone())
            .collect();
        assert!(!isolating.is_empty());
        assert!(isolating.iter().all(|w| w == "isolate-leader"));
        // it concretizes to a jump back on whoever leads
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let f = concretize(timed[0], NodeNames::FROM_ONE, 5, 4_000, 50, &mut rng);
        match f.action {
            FaultAction::Clock {
                mode,
                target,
                offset_ms,
                ..
            } => {
                assert_eq!(mode, ClockMode::Bump);
                assert_eq!(target, Target::Leader);
                assert!((-5_000..=-1_000).contains(&offset_ms), "{offset_ms}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_cold_chooser_tries_the_coordinated_clock_arm_first_and_again() {
        let clock = arms(&kinds(&["partition-leader", "clock"]), 5, true)[2].clone();
        assert_eq!(clock.len(), 13);
        for seed in 1..=5 {
            let mut c = Chooser::new(seed);
            let picks: Vec<Timing> = (0..3)
                .map(|i| {
                    let s = state(0, Some(i as u8 % 3));
                    let a = c.choose(&s, &clock).unwrap();
                    // what a fault earns from new states, not an anomaly
                    c.reward(&s, &a, 3.0);
                    a.timing
                })
                .collect();
            assert_eq!(picks, [Timing::WithNextCut; 3], "seed {seed}");
            // and once it keeps finding nothing, the arms never tried come next
            let s = state(0, Some(1));
            let next = c.choose(&s, &clock).unwrap();
            assert_ne!(next.timing, Timing::WithNextCut, "seed {seed}");
        }
    }

    fn memory_of(pairs: &[(AbstractState, &Arm, u64, f64)]) -> Memory {
        Memory {
            version: MEMORY_VERSION,
            key: "test".into(),
            runs: 3,
            pairs: pairs
                .iter()
                .map(|(s, a, tries, reward)| Remembered {
                    state: *s,
                    arm: (*a).clone(),
                    tries: *tries,
                    reward: *reward,
                    pair: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_memory_round_trips_through_json_and_the_chooser() {
        let all = arms(&kinds(&["kill", "partition-leader", "clock"]), 5, true);
        let s = state(0b010, Some(1));
        let t = AbstractState {
            lagging: Some(2),
            silent: Some(1),
            pending: Some(true),
            leader_changed: true,
            clients: ClientClass::Timeouts,
            ..state(0b101, Some(2))
        };
        let mem = memory_of(&[
            (s, &all[0][3], 2, 7.5),
            (t, &all[1][1], 1, 20.0),
            (t, all[2].last().unwrap(), 4, 1.25),
        ]);
        let text = serde_json::to_string(&mem).unwrap();
        let back: Memory = serde_json::from_str(&text).unwrap();
        assert_eq!(back, mem);
        assert_eq!(back.validate(), Ok(()));
        // through a chooser: what it leaves is what it started from (in its order)
        let c = Chooser::with_memory(1, &back);
        let mut left = c.memory("test", 3);
        for p in &mut left.pairs {
            p.pair.clear();
        }
        let mut want = mem.pairs.clone();
        want.sort_by(|a, b| (a.state, &a.arm).cmp(&(b.state, &b.arm)));
        assert_eq!(left.pairs, want);
        // and a try there adds to it
        let mut c = Chooser::with_memory(1, &back);
        let a = c.choose(&s, &all[0][3..4]).unwrap();
        c.reward(&s, &a, 1.0);
        let left = c.memory("test", 4);
        let p = left.pairs.iter().find(|p| p.state == s).unwrap();
        assert_eq!((p.tries, p.reward), (3, 8.5));
        assert!(p.pair.contains(" | kill"), "{}", p.pair);
        // what serde cannot check is refused
        let mut bad = mem.clone();
        bad.pairs[0].tries = 0;
        assert!(bad.validate().is_err());
        let mut bad = mem;
        bad.pairs[1].reward = f64::NAN;
        assert!(bad.validate().is_err());
        assert!(serde_json::from_str::<Memory>("{\"runs\": \"x\"}").is_err());
    }

    #[test]
    fn an_anomaly_is_credited_to_the_faults_active_while_its_ops_ran() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // 0: 0-1000 ms, stopped; 1: 1250-3000 ms, stopped; 2: from 3250 ms, running
        let faults = [
            (at(0), Some(at(1000))),
            (at(1250), Some(at(3000))),
            (at(3250), None),
        ];
        // ops within the second fault: it alone, not the one that ended before
        assert_eq!(credited(&faults, (at(1500), at(1700))), vec![1]);
        // ops spanning the end of the first and the start of the second: both
        assert_eq!(credited(&faults, (at(900), at(1300))), vec![0, 1]);
        // the running fault, and one that started while the ops were running
        assert_eq!(credited(&faults, (at(3100), at(3400))), vec![2]);
        assert_eq!(credited(&faults, (at(5000), at(5100))), vec![2]);
        // no fault active then: the one that stopped last before it, within the aftermath
        let stopped = [(at(0), Some(at(1000))), (at(1250), Some(at(2000)))];
        assert_eq!(credited(&stopped, (at(2500), at(2600))), vec![1]);
        assert!(at(2000) + AFTERMATH < at(4100));
        assert_eq!(
            credited(&stopped, (at(4100), at(4200))),
            Vec::<usize>::new()
        );
        // ops before any fault started: nobody's
        let late = [(at(2000), None)];
        assert_eq!(credited(&late, (at(100), at(900))), Vec::<usize>::new());
    }

    #[test]
    fn an_old_memory_without_a_version_is_read_and_a_newer_one_refused() {
        let all = arms(&kinds(&["kill"]), 5, true);
        let s = state(0b001, Some(1));
        let mem = memory_of(&[(s, &all[0][0], 2, 21.0)]);
        let mut v: serde_json::Value = serde_json::to_value(&mem).unwrap();
        assert_eq!(v["version"], MEMORY_VERSION);
        // as the tables written before the version field were
        v.as_object_mut().unwrap().remove("version");
        let old: Memory = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(old.version, 1);
        assert_eq!(old.validate(), Ok(()));
        assert_eq!(old.pairs, mem.pairs);
        // a chooser starts from it, and leaves a table of the current version
        let left = Chooser::with_memory(1, &old).memory("test", 4);
        assert_eq!(left.version, MEMORY_VERSION);
        assert_eq!((left.pairs[0].tries, left.pairs[0].reward), (2, 21.0));
        v["version"] = serde_json::json!(MEMORY_VERSION + 1);
        let newer: Memory = serde_json::from_value(v).unwrap();
        assert!(newer.validate().unwrap_err().contains("version"));
    }

    #[test]
    fn a_memory_that_rewarded_an_arm_chooses_it_first_in_that_state() {
        let kills = arms(&kinds(&["kill"]), 5, true)[0].clone();
        let s = state(0, Some(1));
        let elsewhere = state(0b001, Some(0));
        for (i, rewarded) in kills.iter().enumerate() {
            // every arm tried before, in another state, earning what new states earn;
            // one of them, in `s`, found an anomaly
            let mut pairs: Vec<(AbstractState, &Arm, u64, f64)> =
                kills.iter().map(|a| (elsewhere, a, 1, 3.0)).collect();
            pairs.push((s, rewarded, 1, reward::ANOMALY + 2.0));
            let mem = memory_of(&pairs);
            for seed in [1, 2, 3] {
                let mut c = Chooser::with_memory(seed, &mem);
                assert_eq!(c.choose(&s, &kills).as_ref(), Some(rewarded), "arm {i}");
            }
        }
        // cold, the first choice is a seeded draw: not always the same arm
        let firsts: BTreeSet<Arm> = (1..=8)
            .map(|seed| Chooser::new(seed).choose(&s, &kills).unwrap())
            .collect();
        assert!(firsts.len() > 1);
        // and an empty memory is a cold start
        let empty = Memory::default();
        for seed in 1..=8 {
            assert_eq!(
                Chooser::with_memory(seed, &empty).choose(&s, &kills),
                Chooser::new(seed).choose(&s, &kills)
            );
        }
    }

    #[test]
    fn arms_that_wait_for_a_leader_change_only_when_one_may_come() {
        let all = arms(&kinds(&["partition", "clock"]), 5, true);
        let quiet = state(0, Some(1));
        let waits = |v: &[Arm]| {
            v.iter()
                .filter(|a| a.timing == Timing::AfterLeaderChange)
                .count()
        };
        let none = BTreeSet::new();
        assert!(waits(&all[1]) > 0);
        assert_eq!(waits(&candidates(&all[1], &quiet, false, &none)), 0);
        let busy = state(0b100, Some(1));
        assert!(waits(&candidates(&all[1], &busy, false, &none)) > 0);
        assert!(waits(&candidates(&all[1], &state(0, Some(0)), false, &none)) > 0);
        assert!(waits(&candidates(&all[1], &state(0, Some(2)), false, &none)) > 0);
        // a clock fault waiting for the next cut: the links choose a leader cut, once a
        // partition that counts as `partition` has run
        let first = candidates(&all[1], &quiet, true, &none);
        assert!(!first.is_empty());
        assert!(first.iter().all(|a| !a.isolates_leader()));
        let covered = BTreeSet::from(["partition".to_string()]);
        let cut = candidates(&all[1], &quiet, true, &covered);
        assert!(!cut.is_empty());
        assert!(cut.iter().all(Arm::isolates_leader));
        // a class without such a partition chooses among all it has
        assert_eq!(
            candidates(&all[2], &quiet, true, &none).len(),
            all[2].len() - waits(&all[2])
        );
    }

    #[test]
    fn every_kind_of_a_class_is_offered_before_any_kind_again() {
        let all = arms(&kinds(&["partition", "slow", "loss"]), 5, false);
        let quiet = state(0, None);
        let kinds_of = |v: &[Arm]| v.iter().map(|a| a.kind.clone()).collect::<BTreeSet<_>>();
        let mut started = BTreeSet::new();
        assert_eq!(
            kinds_of(&candidates(&all[1], &quiet, false, &started)).len(),
            3
        );
        started.insert("partition".to_string());
        let left = kinds_of(&candidates(&all[1], &quiet, false, &started));
        assert_eq!(left, ["loss", "slow"].map(String::from).into());
        started.insert("slow".to_string());
        started.insert("loss".to_string());
        // an isolate-leader partition counts as partition-leader, not as partition
        let shapes = arms(&kinds(&["partition"]), 5, false);
        let iso = shapes[1].iter().find(|a| a.isolates_leader()).unwrap();
        assert_eq!(coverage_kind(iso), "partition-leader");
        assert!(candidates(&shapes[1], &quiet, false, &BTreeSet::new())
            .iter()
            .all(|a| !a.isolates_leader()));
        // once each kind has run, every arm is offered again
        assert_eq!(
            candidates(&all[1], &quiet, false, &started).len(),
            all[1].len()
        );
    }
}
