//! What a sample of the cluster holds, and its abstraction into a small state.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

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
