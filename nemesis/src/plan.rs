//! One planned fault: at time t, do f to nodes n, for d. The schedule generator produces
//! these; a plan file holds a list of them for exact repeats.

use serde::{Deserialize, Serialize};

use crate::network::CutMode;
use crate::NemesisError;

/// The name of node `i` (0-based): `n1`, `n2`, ...
pub fn node_name(i: usize) -> String {
    format!("n{}", i + 1)
}

/// The 0-based index of a node named `n1`..`nN`, or None if the name has another shape.
pub fn node_index(name: &str) -> Option<usize> {
    let digits = name.strip_prefix('n')?;
    let k: usize = digits.parse().ok()?;
    k.checked_sub(1)
}

/// Which nodes a process fault picks. The schedule resolves all but `Leader` when it is
/// made; `Leader` is resolved when the fault starts, from [`crate::ClusterControl::leaders`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// One random node.
    One,
    /// A random minority.
    Minority,
    /// A random majority.
    Majority,
    /// Every node.
    All,
    /// The node(s) the target reports as leader (a random node if it cannot say).
    Leader,
    /// One node that leads nothing, as the target reports it, resolved when the fault
    /// starts (a random node if it cannot say).
    Follower,
    /// Exactly the listed nodes.
    #[default]
    Nodes,
}

/// How a clock fault moves the clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClockMode {
    /// The offset jumps to `offset_ms` for the fault's duration.
    Bump,
    /// The offset flips between `offset_ms` and 0 every `period_ms`.
    Strobe,
    /// The offset drifts steadily by `offset_ms` per second, updated every `period_ms`.
    Skew,
}

/// What a planned fault does. Serialized with an `f` tag, e.g.
/// `{"f":"kill","target":"minority","nodes":["n2","n4"]}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "kebab-case")]
pub enum FaultAction {
    /// kill -9 the nodes; restart them when the fault stops.
    Kill {
        /// How the nodes were chosen.
        #[serde(default)]
        target: Target,
        /// The nodes (empty for `Leader`, resolved at run time).
        #[serde(default)]
        nodes: Vec<String>,
    },
    /// SIGSTOP the nodes; SIGCONT them when the fault stops.
    Pause {
        /// How the nodes were chosen.
        #[serde(default)]
        target: Target,
        /// The nodes (empty for `Leader`, resolved at run time).
        #[serde(default)]
        nodes: Vec<String>,
    },
    /// Cut links between nodes.
    Partition {
        /// The shape's name: `halves`, `random-halves`, `isolate`, `isolate-leader`,
        /// `majority-minority`,
        /// `majorities-ring`, `bridge`, `one-way`, `leader-churn` (follows each new leader,
        /// see `--nemesis leader-churn`), `figure-8` (stages Raft's figure 8 round after
        /// round from who leads, see `--nemesis figure-8`), or anything for hand-written plans.
        shape: String,
        /// The groups, for display; if `blocked` is empty, every message between nodes
        /// of different groups is blocked.
        #[serde(default)]
        groups: Vec<Vec<String>>,
        /// Directed flows `[from, to]` whose messages are blocked.
        #[serde(default)]
        blocked: Vec<(String, String)>,
        /// Refuse or black-hole.
        #[serde(default)]
        mode: CutMode,
    },
    /// Move the nodes' clocks.
    Clock {
        /// Bump, strobe or skew.
        mode: ClockMode,
        /// How the nodes were chosen (`leader` is resolved when the fault starts).
        #[serde(default)]
        target: Target,
        /// The nodes whose clocks move (empty for `Leader`, resolved at run time).
        #[serde(default)]
        nodes: Vec<String>,
        /// The offset (bump, strobe) or the drift per second (skew), in milliseconds.
        offset_ms: i64,
        /// Strobe flip period or skew update period (default 100 ms).
        #[serde(default)]
        period_ms: u64,
    },
    /// Delay every message to and from the nodes.
    Slow {
        /// The nodes whose links are slowed.
        nodes: Vec<String>,
        /// Added one-way latency.
        delay_ms: u64,
        /// Uniform jitter around the delay.
        #[serde(default)]
        jitter_ms: u64,
    },
    /// Delay every answer the nodes send to their clients (their client links; peer
    /// links are untouched). Needs the proxy mesh in front of client ports, which the
    /// harness starts when a run asks for this fault.
    SlowClient {
        /// How the nodes were chosen (`leader`, `follower` resolved at run time).
        #[serde(default)]
        target: Target,
        /// The nodes whose client links are slowed.
        #[serde(default)]
        nodes: Vec<String>,
        /// Added latency per answer.
        delay_ms: u64,
        /// Uniform jitter around the delay.
        #[serde(default)]
        jitter_ms: u64,
    },
    /// Stop the nodes (SIGSTOP) for `stop_ms` at the start of every `every_ms` period,
    /// for the fault's whole duration: the hiccup a garbage collector causes.
    StrobePause {
        /// How the nodes were chosen (`leader`, `follower` resolved at run time).
        #[serde(default)]
        target: Target,
        /// The nodes strobed.
        #[serde(default)]
        nodes: Vec<String>,
        /// How long each stop lasts.
        stop_ms: u64,
        /// The period: a stop begins every `every_ms`.
        every_ms: u64,
    },
    /// Drop a fraction of the messages to and from the nodes.
    Loss {
        /// The nodes whose links lose messages.
        nodes: Vec<String>,
        /// Fraction dropped, 0.0..=1.0.
        fraction: f64,
    },
}

impl FaultAction {
    /// The fault's kind as `--nemesis` names it (`kill`, `partition`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            FaultAction::Kill { .. } => "kill",
            FaultAction::Pause { .. } => "pause",
            FaultAction::Partition { .. } => "partition",
            FaultAction::Clock { .. } => "clock",
            FaultAction::Slow { .. } => "slow",
            FaultAction::Loss { .. } => "loss",
            FaultAction::SlowClient { .. } => "slow-client",
            FaultAction::StrobePause { .. } => "strobe-pause",
        }
    }

    /// Every node name the action mentions.
    fn names(&self) -> Vec<&str> {
        match self {
            FaultAction::Kill { nodes, .. }
            | FaultAction::Pause { nodes, .. }
            | FaultAction::Clock { nodes, .. }
            | FaultAction::Slow { nodes, .. }
            | FaultAction::SlowClient { nodes, .. }
            | FaultAction::StrobePause { nodes, .. }
            | FaultAction::Loss { nodes, .. } => nodes.iter().map(String::as_str).collect(),
            FaultAction::Partition {
                groups, blocked, ..
            } => groups
                .iter()
                .flatten()
                .map(String::as_str)
                .chain(blocked.iter().flat_map(|(a, b)| [a.as_str(), b.as_str()]))
                .collect(),
        }
    }
}

/// One entry of a fault schedule: start `action` at `at_ms` after the run began, stop it
/// `for_ms` later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedFault {
    /// Start time, milliseconds since the nemesis began.
    pub at_ms: u64,
    /// How long the fault lasts, in milliseconds.
    pub for_ms: u64,
    /// What to do.
    #[serde(flatten)]
    pub action: FaultAction,
}

impl PlannedFault {
    /// Checks that every node name has the `nK` shape and that fractions are in range.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(bad) = self
            .action
            .names()
            .into_iter()
            .find(|n| node_index(n).is_none())
        {
            return Err(format!("node name {bad:?} is not n1..nN"));
        }
        if let FaultAction::Loss { fraction, .. } = self.action {
            if !(0.0..=1.0).contains(&fraction) {
                return Err(format!("loss fraction {fraction} is not within 0..=1"));
            }
        }
        if let FaultAction::StrobePause {
            stop_ms, every_ms, ..
        } = self.action
        {
            if stop_ms == 0 || stop_ms >= every_ms {
                return Err(format!(
                    "strobe-pause needs 0 < stop_ms < every_ms (got {stop_ms}, {every_ms})"
                ));
            }
        }
        Ok(())
    }
}

/// Resolves node names to indices below `n`.
pub(crate) fn indices(names: &[String], n: usize) -> Result<Vec<usize>, NemesisError> {
    names
        .iter()
        .map(|name| match node_index(name) {
            Some(i) if i < n => Ok(i),
            _ => Err(NemesisError::Fault(format!(
                "node {name:?} is not one of n1..n{n}"
            ))),
        })
        .collect()
}

/// Names of the given node indices.
pub(crate) fn names(nodes: &[usize]) -> Vec<String> {
    nodes.iter().map(|&i| node_name(i)).collect()
}

/// The directed flows a partition blocks, as indices below `n`.
pub(crate) fn blocked_flows(
    groups: &[Vec<String>],
    blocked: &[(String, String)],
    n: usize,
) -> Result<Vec<(usize, usize)>, NemesisError> {
    let mut flows = Vec::new();
    if blocked.is_empty() {
        let groups: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| indices(g, n))
            .collect::<Result<_, _>>()?;
        for (gi, a) in groups.iter().enumerate() {
            for (gj, b) in groups.iter().enumerate() {
                if gi != gj {
                    flows.extend(a.iter().flat_map(|&x| b.iter().map(move |&y| (x, y))));
                }
            }
        }
    } else {
        for (from, to) in blocked {
            let pair = indices(&[from.clone(), to.clone()], n)?;
            flows.push((pair[0], pair[1]));
        }
    }
    flows.retain(|(a, b)| a != b);
    flows.sort_unstable();
    flows.dedup();
    Ok(flows)
}
