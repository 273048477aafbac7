//! The network-fault model shared by both backends: a set of directed flows i→j, each
//! with its own cut / delay / loss / bandwidth settings.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::NemesisError;

/// How a cut link behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CutMode {
    /// New connections are refused and a connection that tries to carry a blocked byte is
    /// reset: the sender learns quickly that the peer is unreachable.
    Refuse,
    /// New connections are accepted but blocked bytes are silently held (stalled) until the
    /// cut heals, like packets lost on a dead route: the sender learns nothing.
    #[default]
    Blackhole,
}

/// Faults on one directed flow: the messages node `from` sends to node `to`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FlowFaults {
    /// Messages from→to are blocked, in this mode.
    pub cut: Option<CutMode>,
    /// Added one-way latency.
    pub delay: Duration,
    /// Latency varies uniformly within ±`jitter` around `delay` (never below zero).
    pub jitter: Duration,
    /// Fraction (0.0..=1.0) of messages dropped.
    pub loss: f64,
    /// Bandwidth cap in bytes per second.
    pub bandwidth: Option<u64>,
}

impl FlowFaults {
    /// True when this flow is untouched.
    pub fn is_clean(&self) -> bool {
        *self == FlowFaults::default()
    }
}

/// The desired fault state of every directed flow (flows absent from the map are clean),
/// and of every node's client link (the answers node i sends to its clients).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetFaults {
    flows: BTreeMap<(usize, usize), FlowFaults>,
    clients: BTreeMap<usize, FlowFaults>,
}

impl NetFaults {
    /// No faults at all.
    pub fn new() -> NetFaults {
        NetFaults::default()
    }

    /// The faults on flow `from`→`to`.
    pub fn flow(&self, from: usize, to: usize) -> FlowFaults {
        self.flows.get(&(from, to)).cloned().unwrap_or_default()
    }

    /// Mutable access to flow `from`→`to` (created clean if absent).
    pub fn flow_mut(&mut self, from: usize, to: usize) -> &mut FlowFaults {
        self.flows.entry((from, to)).or_default()
    }

    /// Every flow with at least one fault, in (from, to) order.
    pub fn faulty_flows(&self) -> impl Iterator<Item = (&(usize, usize), &FlowFaults)> {
        self.flows.iter().filter(|(_, f)| !f.is_clean())
    }

    /// True when no flow and no client link has a fault.
    pub fn is_clean(&self) -> bool {
        self.faulty_flows().next().is_none() && self.faulty_clients().next().is_none()
    }

    /// The faults on node `i`'s client link (applied to its answers).
    pub fn client(&self, i: usize) -> FlowFaults {
        self.clients.get(&i).cloned().unwrap_or_default()
    }

    /// Mutable access to node `i`'s client link (created clean if absent).
    pub fn client_mut(&mut self, i: usize) -> &mut FlowFaults {
        self.clients.entry(i).or_default()
    }

    /// Every node whose client link has a fault, in node order.
    pub fn faulty_clients(&self) -> impl Iterator<Item = (&usize, &FlowFaults)> {
        self.clients.iter().filter(|(_, f)| !f.is_clean())
    }

    /// Blocks messages from→to.
    pub fn cut(&mut self, from: usize, to: usize, mode: CutMode) {
        if from != to {
            self.flow_mut(from, to).cut = Some(mode);
        }
    }

    /// Removes every cut, keeping delay and loss.
    pub fn clear_cuts(&mut self) {
        self.flows.values_mut().for_each(|f| f.cut = None);
    }

    /// Removes delay and jitter from every flow.
    pub fn clear_delay(&mut self) {
        self.flows.values_mut().for_each(|f| {
            f.delay = Duration::ZERO;
            f.jitter = Duration::ZERO;
        });
    }

    /// Removes loss from every flow.
    pub fn clear_loss(&mut self) {
        self.flows.values_mut().for_each(|f| f.loss = 0.0);
    }

    /// Removes every client-link fault, keeping the flows'.
    pub fn clear_clients(&mut self) {
        self.clients.clear();
    }
}

/// A network backend the nemesis can drive: it makes the network match a [`NetFaults`].
pub trait NetworkFaults: Send + Sync {
    /// Number of nodes the backend connects.
    fn node_count(&self) -> usize;
    /// Replaces the current faults with `faults` (flows absent from it become clean).
    fn apply(&self, faults: &NetFaults) -> Result<(), NemesisError>;
    /// Whether the backend can add latency (the namespace backend needs netem).
    fn supports_delay(&self) -> bool {
        true
    }
    /// Removes every network fault.
    fn heal_all(&self) -> Result<(), NemesisError> {
        self.apply(&NetFaults::new())
    }
}
