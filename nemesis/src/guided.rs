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
#[derive(Debug, Clone, Copy, PartialEq, Default)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

/// How far behind the most advanced node a node must be to count as lagging.
pub const LAG_THRESHOLD: u64 = 20;

/// Turns samples into abstract states; remembers what it needs from the sample before
/// (leader set, term, client counts, the healthy latency baseline).
#[derive(Debug, Default)]
pub struct Abstractor {
    prev_leaders: Option<BTreeSet<usize>>,
    prev_term: Option<u64>,
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
            let behind = progress
                .iter()
                .filter(|&&p| p + LAG_THRESHOLD < max)
                .count();
            st.lagging = Some(cap(behind));
        }
        if answered.iter().any(|(_, s)| s.pending.is_some()) {
            st.pending = Some(answered.iter().any(|(_, s)| s.pending.unwrap_or(0) > 0));
        }
        st
    }

    fn clients(&mut self, now: &ClientCounts) -> ClientClass {
        let p = self.prev_clients;
        self.prev_clients = *now;
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

/// One fault the search may choose: a kind as `--nemesis` names it, whom it hits, how
/// long, and when (at once, or just after the next leader change).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arm {
    /// The `--nemesis` kind (`kill`, `partition-leader`, ...).
    pub kind: String,
    /// Whom: a target (`leader`, `follower`, `minority`, ...) or a partition shape.
    pub whom: String,
    /// Three quarters of the class interval rather than a quarter.
    pub long: bool,
    /// Started just after the leader set next changes (bounded wait).
    pub after_leader_change: bool,
}

impl fmt::Display for Arm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind)?;
        if !self.whom.is_empty() {
            write!(f, " {}", self.whom)?;
        }
        write!(f, " {}", if self.long { "long" } else { "short" })?;
        if self.after_leader_change {
            write!(f, " after-leader-change")?;
        }
        Ok(())
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

/// Whom each kind may hit: targets, or partition shapes.
fn whoms(kind: &str, n: usize) -> Vec<String> {
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
/// (after a leader change) only when the target reports leaders.
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
        for whom in whoms(kind, n) {
            for long in [false, true] {
                for after in [false, true] {
                    if after && !leaders_known {
                        continue;
                    }
                    out[c].push(Arm {
                        kind: kind.clone(),
                        whom: whom.clone(),
                        long,
                        after_leader_change: after,
                    });
                }
            }
        }
    }
    out
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
    let nodes = |rng: &mut ChaCha8Rng| names.names(&pick(target, n, rng));
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
            let delay_ms = rng.gen_range(20..=200);
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
        after_leader_change: false,
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
    pub const ANOMALY: f64 = 5.0;
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
}

/// The bandit over (abstract state, arm) pairs, seeded. In a state, an arm never tried
/// there comes first (among those, the one tried least anywhere, then the one that earned
/// most elsewhere, then a seeded draw); once every arm was tried there, UCB1: mean reward
/// plus `sqrt(2 ln N / n)`.
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

    /// Picks one of `candidates` (not empty) in `state`; counts it as tried there.
    pub fn choose(&mut self, state: &AbstractState, candidates: &[Arm]) -> Option<Arm> {
        if candidates.is_empty() {
            return None;
        }
        let tries = |a: &Arm| self.pairs.get(&(*state, a.clone())).map_or(0, |s| s.tries);
        let unseen: Vec<&Arm> = candidates.iter().filter(|a| tries(a) == 0).collect();
        let chosen = if !unseen.is_empty() {
            let key = |a: &Arm| {
                let s = self.arms.get(a).copied().unwrap_or_default();
                (s.tries, -(s.mean() * 1e6) as i64)
            };
            let best = unseen.iter().map(|a| key(a)).min()?;
            let mut top: Vec<&Arm> = unseen.into_iter().filter(|a| key(a) == best).collect();
            top.shuffle(&mut self.rng);
            top[0].clone()
        } else {
            let total: u64 = candidates.iter().map(&tries).sum();
            let ln = (total.max(1) as f64).ln();
            let score = |a: &Arm| {
                let s = self.pairs[&(*state, a.clone())];
                s.mean() + (2.0 * ln / s.tries as f64).sqrt()
            };
            let best = candidates.iter().map(score).fold(f64::MIN, f64::max);
            let mut top: Vec<&Arm> = candidates
                .iter()
                .filter(|a| score(a) >= best - 1e-9)
                .collect();
            top.shuffle(&mut self.rng);
            top[0].clone()
        };
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
        assert!(all.iter().flatten().all(|a| !a.after_leader_change));
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
        assert_eq!(st.lagging, Some(2));
        assert_eq!(st.clients, ClientClass::Timeouts);
        assert_eq!(ab.leader_changes, 1);
        assert_eq!(
            st.to_string(),
            "leaders=2+ changed lagging=2+ silent=0 faults=process clients=timeouts"
        );
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
}
