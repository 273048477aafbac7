//! The guided fault search (`--nemesis-search guided`), sans IO: what the cluster is seen
//! doing, abstracted into a small state per sample ([`AbstractState`]), the faults the
//! search may choose ([`Arm`]: kind, target, duration, timing), and the bandit that picks
//! the next one ([`Chooser`]: a (state, arm) pair never tried first, then UCB1 over the
//! rewards pairs earned). The runner (`runner/guided.rs`) samples, asks, starts the fault
//! and records it, so the schedule it made is a plan that `--nemesis-plan` replays.
//!
//! Everything here is a pure function of its inputs and the seed: the chooser's only
//! randomness is a ChaCha stream from the run's seed.
//!
//! The parts: `signals` (what a sample holds and its abstraction into a state), `arms`
//! (the faults the search may choose, and how one becomes a planned fault), `chooser`
//! (rewards, crediting, the bandit and its memory across runs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod arms;
mod chooser;
mod signals;
#[cfg(test)]
mod tests;

pub use arms::{arm_of, arms, candidates, concretize, coverage_kind, Arm, Timing};
pub use chooser::{credited, reward, Chooser, Memory, Remembered, AFTERMATH, MEMORY_VERSION};
pub use signals::{
    AbstractState, Abstractor, ClientClass, ClientCounts, NodeStatus, Sample, CLASS_NAMES,
    LAG_THRESHOLD,
};

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
