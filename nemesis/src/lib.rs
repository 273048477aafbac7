//! # splitbrain-nemesis
//!
//! Faults and their schedules. The harness owns the cluster's processes and hands the
//! nemesis a [`ClusterControl`]; the nemesis owns the network faults and records every
//! fault start and stop through a [`NemesisRecorder`].
//!
//! ## Pieces
//!
//! - [`NemesisSpec`]: which faults (`--nemesis partition,kill,...`), how often, which seed;
//!   or an explicit fault plan loaded with [`NemesisSpec::from_plan_file`].
//! - [`Nemesis`]: turns a spec into a deterministic [`PlannedFault`] list
//!   ([`Nemesis::schedule`]), runs it ([`Nemesis::run`]) and undoes everything
//!   ([`Nemesis::heal`]).
//! - [`proxy::ProxyMesh`]: the default network backend. One TCP proxy per directed link
//!   i→j; it can cut a link (both ways or one way; refusing or black-holing), delay it with
//!   jitter, drop newline-framed messages from it, or cap its bandwidth. No privileges.
//!   Optionally one more proxy per node fronts its client port, so that a node's answers
//!   to clients can be slowed (`slow-client`).
//! - [`netns::NetnsCluster`]: the Linux backend. Every node in its own network namespace on
//!   a private bridge; faults are nftables (or iptables) rules inside those namespaces.
//!
//! Both network backends implement [`NetworkFaults`], so the schedule runner does not care
//! which one is in use.
//!
//! ## What lands in the history
//!
//! Every start and stop is one [`NemesisRecorder::record`] call (a `nemesis` `info` op):
//!
//! | fault     | start `f`         | stop `f`         | value                                        |
//! |-----------|-------------------|------------------|----------------------------------------------|
//! | kill      | `kill`            | `restart`        | `{"nodes":["n3"],"target":"leader"}`          |
//! | kill-one  | `kill`            | `restart`        | `{"nodes":["n2"],"target":"one"}`             |
//! | pause     | `pause`           | `resume`         | `{"nodes":["n1","n2"],"target":"minority"}`   |
//! | partition | `start-partition` | `stop-partition` | `{"halves":[["n1","n2"],["n3","n4","n5"]],"shape":"halves","mode":"blackhole","blocked":[["n1","n3"],...]}` |
//! | clock     | `start-clock`     | `stop-clock`     | `{"nodes":["n2"],"mode":"bump","offset_ms":5000,"period_ms":100}` |
//! | slow      | `start-slow`      | `stop-slow`      | `{"nodes":["n1"],"delay_ms":50,"jitter_ms":12}` |
//! | loss      | `start-loss`      | `stop-loss`      | `{"nodes":["n1"],"fraction":0.2}`             |
//! | slow-client | `start-slow-client` | `stop-slow-client` | `{"nodes":["n3"],"target":"follower","delay_ms":50,"jitter_ms":0}` |
//! | figure-8  | `start-partition`, then `figure-8` per step | `stop-partition` | `{"step":"cut-second-leader","leaders":["n2"],"cut_all":false,"isolated":"n2","slow_peers_ms":0,"slow_answers_ms":150}` |
//! | strobe-pause | `start-strobe-pause` | `stop-strobe-pause` | `{"nodes":["n1"],"target":"leader","stop_ms":30,"every_ms":300}` |
//!
//! A fault that could not be applied carries an `"error"` field. [`Nemesis::heal`] records
//! the stop of whatever was still active (with `"healed": true`) and then a final `heal` op.
//! Faults of one class (process / network / clock) never overlap; faults of different
//! classes may.
//!
//! ## Example
//!
//! ```no_run
//! # use std::{sync::Arc, time::Duration};
//! # use splitbrain_nemesis::*;
//! # async fn demo<C: ClusterControl>(cluster: C, rec: &dyn NemesisRecorder,
//! #   peers: Vec<std::net::SocketAddr>) -> Result<(), NemesisError> {
//! let mesh = Arc::new(proxy::ProxyMesh::start(peers).await?);
//! // node i dials node j at mesh.link_addr(i, j)
//! let spec = NemesisSpec::parse("partition,kill", Duration::from_secs(5), 42)?;
//! let nemesis = Nemesis::with_mesh(spec, Some(mesh.clone()));
//! let plan = nemesis.schedule(cluster.node_count(), Duration::from_secs(60)); // store it
//! nemesis.run(&cluster, rec, Duration::from_secs(60)).await?;
//! nemesis.heal(&cluster, rec).await?;
//! mesh.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Invariants: every fault the nemesis starts is undone by [`Nemesis::heal`]; nothing here
//! sends traffic anywhere but loopback or namespaces it created itself.

#![warn(missing_docs)]

use std::future::Future;

pub mod faketime;
pub mod guided;
pub mod netns;
pub mod netns_mesh;
mod network;
mod plan;
pub mod proxy;
mod runner;
mod schedule;
mod spec;

pub use guided::{ClientCounts, Coverage, Memory, MemoryStart, NodeStatus, Search};
pub use network::{CutMode, FlowFaults, NetFaults, NetworkFaults};
pub use plan::{ClockMode, FaultAction, NodeNames, PlannedFault, Target};
pub use runner::Nemesis;
pub use spec::NemesisSpec;

/// Errors from fault injection.
#[derive(Debug, thiserror::Error)]
pub enum NemesisError {
    /// The nemesis spec names a fault this crate does not know.
    #[error("unknown nemesis {0:?} (known: {known})", known = KNOWN_FAULTS.join(", "))]
    UnknownFault(String),
    /// A fault could not be applied or undone.
    #[error("{0}")]
    Fault(String),
    /// The backend cannot do this (e.g. delay without netem in the namespace backend).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A fault plan file could not be read or parsed.
    #[error("fault plan {path}: {msg}")]
    Plan {
        /// The plan file.
        path: String,
        /// What was wrong.
        msg: String,
    },
    /// An I/O error (sockets, processes).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The fault names `--nemesis` accepts.
pub const KNOWN_FAULTS: &[&str] = &[
    "none",
    "partition",
    "partition-leader",
    "leader-churn",
    "figure-8",
    "kill",
    "kill-one",
    "pause",
    "clock",
    "slow",
    "loss",
    "slow-client",
    "strobe-pause",
];

/// The faults that act on the links between nodes (a network backend carries them: the
/// proxy mesh, namespaces, a remote host's firewall). Links that are not sockets (shared
/// memory) and hosts without a packet filter cannot take them.
pub const NETWORK_FAULTS: &[&str] = &[
    "partition",
    "partition-leader",
    "leader-churn",
    "figure-8",
    "slow",
    "loss",
];

/// The faults that act on the links between clients and nodes: a run with one of them
/// needs a proxy in front of each node's client port (the proxy mesh offers them).
pub const CLIENT_LINK_FAULTS: &[&str] = &["slow-client", "figure-8"];

/// What the nemesis may do to the cluster's processes. Implemented by the harness, which
/// owns the node processes. Nodes are numbered 0..n; the names a person sees are the
/// [`NodeNames`] given to [`Nemesis::with_node_names`] (`n1`..`nN` unless the run says
/// otherwise: Maelstrom's are `n0`..`n(N-1)`).
pub trait ClusterControl: Send + Sync + 'static {
    /// Number of nodes.
    fn node_count(&self) -> usize;
    /// Kills node `i` with SIGKILL (kill -9). Idempotent on a dead node.
    fn kill(&self, i: usize) -> impl Future<Output = Result<(), NemesisError>> + Send;
    /// Starts a killed node again with its original arguments and data directory.
    fn restart(&self, i: usize) -> impl Future<Output = Result<(), NemesisError>> + Send;
    /// Sends SIGSTOP to node `i`.
    fn pause(&self, i: usize) -> impl Future<Output = Result<(), NemesisError>> + Send;
    /// Sends SIGCONT to node `i`.
    fn resume(&self, i: usize) -> impl Future<Output = Result<(), NemesisError>> + Send;
    /// Nodes that currently lead at least one shard, as the target reports them
    /// (empty if the target cannot say).
    fn leaders(&self) -> impl Future<Output = Vec<usize>> + Send;
    /// Each node's status (who leads, its term, how far it got), for the sampler behind
    /// coverage and `--nemesis-search guided`; an entry is `None` for a node that did not
    /// answer. `None` (the default) when the target serves no status: states are then
    /// made of the active faults and the clients' outcomes only.
    fn status(&self) -> impl Future<Output = Option<Vec<Option<NodeStatus>>>> + Send {
        async { None }
    }
    /// Sets node `i`'s clock offset in milliseconds through its admin endpoint.
    fn set_clock_offset(
        &self,
        i: usize,
        offset_ms: i64,
    ) -> impl Future<Output = Result<(), NemesisError>> + Send;
}

/// What the clients have seen so far, for the sampler (the harness counts completions).
pub trait ClientSignals: Send + Sync {
    /// The cumulative counts now.
    fn counts(&self) -> ClientCounts;
}

/// Receives a record of every fault start and stop, to be written to the history as a
/// `nemesis` op (`type` = `info`).
pub trait NemesisRecorder: Send + Sync {
    /// Records one nemesis event: `f` such as `start-partition`, `value` describing it.
    fn record(&self, f: &str, value: serde_json::Value);
    /// Tells the progress display which faults are active now (empty = none).
    fn set_active(&self, active: &str) {
        let _ = active;
    }
}
