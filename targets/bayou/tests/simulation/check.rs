//! The simulation's figures, observer and final checks.

use serde_json::Value;
use splitbrain_bayou::core::Core;
use splitbrain_bayou::db::set_elements;
use splitbrain_bayou::types::{Op, ReplicaId, Wid};
use std::collections::{BTreeMap, BTreeSet};

/// What the run did (printed, and checked to be non-trivial).
#[derive(Default, Debug, Clone, Copy)]
pub struct Stats {
    /// Writes answered ok.
    pub writes_acked: u64,
    /// Reads answered ok.
    pub reads_ok: u64,
    /// Requests refused `session-behind`.
    pub session_behind: u64,
    /// Requests whose replica crashed before answering.
    pub unknown: u64,
    /// Crash-restarts.
    pub crashes: u64,
    /// Partitions started.
    pub partitions: u64,
    /// Messages sent.
    pub messages: u64,
    /// Messages lost.
    pub dropped: u64,
    /// Messages delivered twice.
    pub duplicated: u64,
    /// Checkpoints written (folded or received).
    pub checkpoints: u64,
    /// Simulated time from heal to identical replicas (summed over seeds).
    pub converge_ms: i64,
    /// The longest of those.
    pub slowest_converge_ms: i64,
}

impl Stats {
    /// Adds another run's figures (maximum for the slowest convergence).
    pub fn add(&mut self, o: &Stats) {
        self.writes_acked += o.writes_acked;
        self.reads_ok += o.reads_ok;
        self.session_behind += o.session_behind;
        self.unknown += o.unknown;
        self.crashes += o.crashes;
        self.partitions += o.partitions;
        self.messages += o.messages;
        self.dropped += o.dropped;
        self.duplicated += o.duplicated;
        self.checkpoints += o.checkpoints;
        self.converge_ms += o.converge_ms;
        self.slowest_converge_ms = self.slowest_converge_ms.max(o.converge_ms);
    }
}

/// What went wrong, by kind (tests assert on the kind a bug must produce).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Violation {
    /// After healing, replicas show different values for this key (or "csn"/"tentative").
    Diverged(String),
    /// An acknowledged write is missing from the final state.
    LostWrite(String, Wid),
    /// A replica showed `now` at a CSN where `before` had been seen committed.
    PrefixChanged {
        /// The CSN.
        csn: u64,
        /// The write first seen there.
        before: Wid,
        /// The write seen there later.
        now: Wid,
        /// Where.
        replica: ReplicaId,
    },
    /// A [room, slot] held by two reservations.
    DoubleBooked(String, i64, i64),
    /// A session's read missed a write it made or an element it had read.
    Session {
        /// Which guarantee.
        guarantee: &'static str,
        /// The session.
        session: usize,
        /// The replica that served the read.
        replica: ReplicaId,
        /// The element missing.
        element: i64,
    },
    /// The group did not converge within the bound after healing.
    NotConverged,
}

/// An acknowledged write.
#[derive(Clone, Debug)]
pub struct Acked {
    /// Its id.
    pub wid: Wid,
    /// Its key.
    pub key: String,
    /// Its op.
    pub op: Op,
}

/// Watches the run: acknowledged writes, session reads, committed prefixes.
#[derive(Default)]
pub struct Observer {
    acked: Vec<Acked>,
    /// Per (session, key): elements the session wrote (acked) and elements it read.
    wrote: BTreeMap<(usize, String), BTreeSet<i64>>,
    seen: BTreeMap<(usize, String), BTreeSet<i64>>,
    /// The committed order as first seen anywhere: CSN -> write.
    committed: BTreeMap<u64, Wid>,
    violations: Vec<Violation>,
}

fn elements(value: &Value) -> BTreeSet<i64> {
    set_elements(value).into_iter().collect()
}

impl Observer {
    /// Session `c` got an ok for this write.
    pub fn acked(&mut self, c: usize, w: Acked) {
        if let Op::Add { element } = w.op {
            self.wrote
                .entry((c, w.key.clone()))
                .or_default()
                .insert(element);
        }
        self.acked.push(w);
    }

    /// Session `c` read `value` of a set key at `replica`: read-your-writes and monotonic
    /// reads (Terry et al. 1994, §3).
    pub fn read(&mut self, c: usize, replica: ReplicaId, key: &str, value: &Value, _now: i64) {
        let shown = elements(value);
        let k = (c, key.to_string());
        for (guarantee, wanted) in [
            ("read-your-writes", self.wrote.get(&k)),
            ("monotonic-reads", self.seen.get(&k)),
        ] {
            if let Some(missing) = wanted.and_then(|w| w.difference(&shown).next()) {
                self.violations.push(Violation::Session {
                    guarantee,
                    session: c,
                    replica,
                    element: *missing,
                });
            }
        }
        self.seen.entry(k).or_default().extend(shown);
    }

    /// Compares a replica's committed writes with the committed order seen so far
    /// (SOSP'95 §5: once committed at a position, a write stays there everywhere).
    pub fn committed(&mut self, core: &Core) {
        for (csn, wid) in core.committed_ids() {
            match self.committed.get(&csn) {
                None => {
                    self.committed.insert(csn, wid);
                }
                Some(before) if *before != wid => {
                    let v = Violation::PrefixChanged {
                        csn,
                        before: *before,
                        now: wid,
                        replica: core.id(),
                    };
                    if self.violations.len() < 100 {
                        self.violations.push(v);
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// Everything found during the run and at the end.
    pub fn final_check(&self, cores: &[&Core]) -> Vec<Violation> {
        let mut out = self.violations.clone();
        out.extend(identical(cores));
        // Every acknowledged write is in every replica's final state.
        for core in cores {
            let mut counter_floor: BTreeMap<&str, i64> = BTreeMap::new();
            for a in &self.acked {
                let value = core.read_value(&a.key, None);
                let present = match &a.op {
                    Op::Add { element } => elements(&value).contains(element),
                    Op::Book { id, .. } => value["schedule"]
                        .as_array()
                        .is_some_and(|rows| rows.iter().any(|r| r[0].as_i64() == Some(*id))),
                    Op::Incr { delta } => {
                        *counter_floor.entry(&a.key).or_insert(0) += delta;
                        true
                    }
                };
                if !present {
                    out.push(Violation::LostWrite(a.key.clone(), a.wid));
                }
            }
            for (key, floor) in counter_floor {
                if core.read_value(key, None).as_i64().unwrap_or(0) < floor {
                    out.push(Violation::LostWrite(key.to_string(), Wid::default()));
                }
            }
        }
        out.sort();
        out.dedup();
        for core in cores {
            for key in core.keys() {
                let value = core.read_value(&key, None);
                let mut held = BTreeSet::new();
                for row in value["schedule"].as_array().into_iter().flatten() {
                    if let (Some(room), Some(slot)) = (row[1].as_i64(), row[2].as_i64()) {
                        if !held.insert((room, slot)) {
                            out.push(Violation::DoubleBooked(key.clone(), room, slot));
                        }
                    }
                }
            }
        }
        out
    }
}

/// The differences between replicas: committed count, tentative writes, any key's value.
/// Empty when every replica (all must be up) shows the same state.
pub fn identical(cores: &[&Core]) -> Vec<Violation> {
    let mut out = Vec::new();
    if cores.len() as u64 != super::NODES {
        out.push(Violation::Diverged("down".into()));
        return out;
    }
    let csn: BTreeSet<u64> = cores.iter().map(|c| c.csn()).collect();
    if csn.len() > 1 {
        out.push(Violation::Diverged("csn".into()));
    }
    if cores.iter().any(|c| c.status().tentative > 0) {
        out.push(Violation::Diverged("tentative".into()));
    }
    let keys: BTreeSet<String> = cores.iter().flat_map(|c| c.keys()).collect();
    for key in keys {
        let values: BTreeSet<String> = cores
            .iter()
            .map(|c| c.read_value(&key, None).to_string())
            .collect();
        if values.len() > 1 {
            out.push(Violation::Diverged(key));
        }
    }
    out
}
