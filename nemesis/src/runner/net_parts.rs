//! The network state as the sum of the active network faults' parts.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::network::{CutMode, NetFaults};

/// One active network fault's contribution to the network state.
#[derive(Clone)]
pub(super) enum NetPart {
    Cut(Vec<(usize, usize)>, CutMode),
    Slow(Vec<usize>, Duration, Duration),
    Loss(Vec<usize>, f64),
    /// Answers of these nodes to their clients are delayed (delay, jitter).
    SlowClient(Vec<usize>, Duration, Duration),
    /// Several parts at once (a `figure-8` round cuts one node and slows another's answers).
    Several(Vec<NetPart>),
}

impl NetPart {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            NetPart::Cut(..) => "partition",
            NetPart::Slow(..) => "slow",
            NetPart::Loss(..) => "loss",
            NetPart::SlowClient(..) => "slow-client",
            // a `figure-8` round: its cuts are what matters
            NetPart::Several(..) => "partition",
        }
    }
}

/// Every flow to or from any of `nodes`.
fn flows_touching(nodes: &[usize], n: usize) -> Vec<(usize, usize)> {
    let mut flows: Vec<(usize, usize)> = nodes
        .iter()
        .flat_map(|&k| {
            (0..n)
                .filter(move |&x| x != k)
                .flat_map(move |x| [(k, x), (x, k)])
        })
        .collect();
    flows.sort_unstable();
    flows.dedup();
    flows
}

pub(super) fn rebuild(parts: &BTreeMap<usize, NetPart>, n: usize) -> NetFaults {
    let mut net = NetFaults::new();
    for part in parts.values() {
        add(&mut net, part, n);
    }
    net
}

/// Adds one part's faults to `net`.
fn add(net: &mut NetFaults, part: &NetPart, n: usize) {
    match part {
        NetPart::Several(parts) => parts.iter().for_each(|p| add(net, p, n)),
        NetPart::Cut(flows, mode) => flows.iter().for_each(|&(a, b)| net.cut(a, b, *mode)),
        NetPart::Slow(nodes, delay, jitter) => {
            for (a, b) in flows_touching(nodes, n) {
                let f = net.flow_mut(a, b);
                f.delay = f.delay.max(*delay);
                f.jitter = f.jitter.max(*jitter);
            }
        }
        NetPart::Loss(nodes, fraction) => {
            for (a, b) in flows_touching(nodes, n) {
                let f = net.flow_mut(a, b);
                f.loss = f.loss.max(*fraction);
            }
        }
        NetPart::SlowClient(nodes, delay, jitter) => {
            for &i in nodes {
                let f = net.client_mut(i);
                f.delay = f.delay.max(*delay);
                f.jitter = f.jitter.max(*jitter);
            }
        }
    }
}
