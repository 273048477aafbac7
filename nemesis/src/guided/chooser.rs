//! Rewards, crediting an anomaly to the faults behind it, the bandit ([`Chooser`]) and
//! the memory it starts from and leaves.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{AbstractState, Arm, Timing};

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
