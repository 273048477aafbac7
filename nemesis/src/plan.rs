//! One planned fault: at time t, do f to nodes n, for d. The schedule generator produces
//! these; a plan file holds a list of them for exact repeats.

use serde::{Deserialize, Serialize};

use crate::network::CutMode;
use crate::NemesisError;

/// How a run names its nodes: `n` followed by the node's index plus `first`. Nodes are
/// numbered 0..n everywhere inside the harness and the nemesis; this is the one place that
/// turns an index into the name a person sees (history, fault events, plans, node
/// directories) and back. splitbrain's own targets name them `n1`..`nN`
/// ([`NodeNames::FROM_ONE`]); Maelstrom names them `n0`..`n(N-1)` ([`NodeNames::FROM_ZERO`]),
/// and nodes written for Maelstrom compute peers' names from that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeNames {
    first: usize,
}

impl Default for NodeNames {
    fn default() -> NodeNames {
        NodeNames::FROM_ONE
    }
}

impl NodeNames {
    /// `n1`..`nN`: splitbrain's own targets.
    pub const FROM_ONE: NodeNames = NodeNames { first: 1 };
    /// `n0`..`n(N-1)`: Maelstrom's naming (`parse-node-count` in its `core.clj`).
    pub const FROM_ZERO: NodeNames = NodeNames { first: 0 };

    /// The name of node `i` (0-based index).
    pub fn name(self, i: usize) -> String {
        format!("n{}", i + self.first)
    }

    /// The names of the given node indices.
    pub fn names(self, nodes: &[usize]) -> Vec<String> {
        nodes.iter().map(|&i| self.name(i)).collect()
    }

    /// The names of every node of an `n`-node run, in index order.
    pub fn all(self, n: usize) -> Vec<String> {
        (0..n).map(|i| self.name(i)).collect()
    }

    /// The index of the node `name` names, if it is one of an `n`-node run's nodes.
    pub fn index(self, name: &str, n: usize) -> Option<usize> {
        let i = node_number(name)?.checked_sub(self.first)?;
        (i < n).then_some(i)
    }

    /// The range of names of an `n`-node run, for messages: `n0..n4`.
    pub fn range(self, n: usize) -> String {
        match n {
            0 => "no nodes".to_string(),
            1 => self.name(0),
            _ => format!("{}..{}", self.name(0), self.name(n - 1)),
        }
    }

    /// Resolves node names to the indices of an `n`-node run; a name that is not one of
    /// its nodes is an error naming the run's nodes.
    pub fn indices(self, names: &[String], n: usize) -> Result<Vec<usize>, NemesisError> {
        names
            .iter()
            .map(|name| {
                self.index(name, n).ok_or_else(|| {
                    NemesisError::Fault(format!(
                        "node {name:?} is not one of this run's nodes ({})",
                        self.range(n)
                    ))
                })
            })
            .collect()
    }
}

/// `K` of a name `nK` (no sign, no leading `+`), whatever the naming's first index.
fn node_number(name: &str) -> Option<usize> {
    let digits = name.strip_prefix('n')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
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
        /// `majorities-ring`, `bridge`, `one-way`, `one-way-leader` (in plans only: what
        /// the node leading when it starts sends is lost, what it is sent still arrives),
        /// `leader-churn` (follows each new leader,
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
    /// Whether the names are nodes of a run depends on the run: [`PlannedFault::check_nodes`].
    pub fn validate(&self) -> Result<(), String> {
        if let Some(bad) = self
            .action
            .names()
            .into_iter()
            .find(|n| node_number(n).is_none())
        {
            return Err(format!("node name {bad:?} is not of the form nK"));
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

    /// Checks that every node this fault names is a node of an `n`-node run named by
    /// `names`: a plan written for `n1..n5` names a node that does not exist in a
    /// Maelstrom run's `n0..n4`, and the other way round.
    pub fn check_nodes(&self, names: NodeNames, n: usize) -> Result<(), String> {
        match self
            .action
            .names()
            .into_iter()
            .find(|name| names.index(name, n).is_none())
        {
            Some(bad) => Err(format!(
                "node {bad:?} is not a node of this run (its nodes are {})",
                names.range(n)
            )),
            None => Ok(()),
        }
    }
}

/// The directed flows a partition blocks, as indices below `n`.
pub(crate) fn blocked_flows(
    names: NodeNames,
    groups: &[Vec<String>],
    blocked: &[(String, String)],
    n: usize,
) -> Result<Vec<(usize, usize)>, NemesisError> {
    let mut flows = Vec::new();
    if blocked.is_empty() {
        let groups: Vec<Vec<usize>> = groups
            .iter()
            .map(|g| names.indices(g, n))
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
            let pair = names.indices(&[from.clone(), to.clone()], n)?;
            flows.push((pair[0], pair[1]));
        }
    }
    flows.retain(|(a, b)| a != b);
    flows.sort_unstable();
    flows.dedup();
    Ok(flows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maelstrom_names_start_at_n0_and_ours_at_n1() {
        assert_eq!(NodeNames::FROM_ZERO.all(3), ["n0", "n1", "n2"]);
        assert_eq!(NodeNames::FROM_ONE.all(3), ["n1", "n2", "n3"]);
        assert_eq!(NodeNames::default(), NodeNames::FROM_ONE);
        assert_eq!(NodeNames::FROM_ZERO.range(5), "n0..n4");
        assert_eq!(NodeNames::FROM_ONE.range(1), "n1");
    }

    #[test]
    fn an_index_is_found_only_for_a_node_of_the_run() {
        let zero = NodeNames::FROM_ZERO;
        for i in 0..5 {
            assert_eq!(zero.index(&zero.name(i), 5), Some(i));
            assert_eq!(
                NodeNames::FROM_ONE.index(&NodeNames::FROM_ONE.name(i), 5),
                Some(i)
            );
        }
        // one past the last node, and n0 where names start at n1
        assert_eq!(zero.index("n5", 5), None);
        assert_eq!(NodeNames::FROM_ONE.index("n0", 5), None);
        assert_eq!(NodeNames::FROM_ONE.index("n5", 5), Some(4));
        for bad in ["", "n", "n-1", "n+1", "1", "x0", "n0x", "N0"] {
            assert_eq!(zero.index(bad, 5), None, "{bad:?}");
        }
        let err = zero
            .indices(&["n1".to_string(), "n5".to_string()], 5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"n5\"") && err.contains("n0..n4"), "{err}");
        assert_eq!(
            zero.indices(&["n4".into(), "n0".into()], 5).unwrap(),
            [4, 0]
        );
    }

    #[test]
    fn a_plan_naming_n0_fits_a_maelstrom_run_only() {
        let fault = PlannedFault {
            at_ms: 0,
            for_ms: 1000,
            action: FaultAction::Partition {
                shape: "isolate".into(),
                groups: vec![vec!["n0".into()], vec!["n1".into(), "n2".into()]],
                blocked: vec![],
                mode: CutMode::Blackhole,
            },
        };
        assert_eq!(fault.validate(), Ok(()));
        assert_eq!(fault.check_nodes(NodeNames::FROM_ZERO, 3), Ok(()));
        let err = fault.check_nodes(NodeNames::FROM_ONE, 3).unwrap_err();
        assert!(err.contains("\"n0\"") && err.contains("n1..n3"), "{err}");
        // n3 is a node of n1..n3 but not of n0..n2
        let kill = PlannedFault {
            at_ms: 0,
            for_ms: 1000,
            action: FaultAction::Kill {
                target: Target::Nodes,
                nodes: vec!["n3".into()],
            },
        };
        assert_eq!(kill.check_nodes(NodeNames::FROM_ONE, 3), Ok(()));
        let err = kill.check_nodes(NodeNames::FROM_ZERO, 3).unwrap_err();
        assert!(err.contains("\"n3\"") && err.contains("n0..n2"), "{err}");
    }

    #[test]
    fn blocked_flows_read_the_runs_names() {
        let groups = vec![vec!["n0".to_string()], vec!["n1".to_string()]];
        assert_eq!(
            blocked_flows(NodeNames::FROM_ZERO, &groups, &[], 2).unwrap(),
            [(0, 1), (1, 0)]
        );
        assert!(blocked_flows(NodeNames::FROM_ONE, &groups, &[], 2).is_err());
    }
}
