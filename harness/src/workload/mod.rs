//! Workloads: what the clients do (a generator of invocations) and how the resulting
//! history is checked (a list of checkers).

pub mod bank;
pub mod eventual;
mod keys;
pub mod register;
pub mod registry;
pub mod train;
pub mod txn;

pub use keys::KeyRotation;

use crate::check_options::CheckOptions;
use crate::systems::Invocation;
use rand_chacha::ChaCha8Rng;
use splitbrain_checkers::Checker;

/// Produces the next invocation for any process. Shared by all processes (behind a
/// lock), so key rotation is global.
pub trait OpGenerator: Send {
    /// The next operation to perform.
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation;
    /// Reads to run after the cluster is healed and quiet (convergence workloads).
    fn final_reads(&self) -> Vec<Invocation> {
        Vec::new()
    }
    /// True when the final reads are to be made at every replica, in rounds, until two
    /// rounds in a row agree (convergence workloads); false: once each, anywhere.
    fn final_reads_per_replica(&self) -> bool {
        false
    }
    /// Operations to complete before the main phase starts (e.g. opening balances);
    /// each is retried until it succeeds, and all are recorded.
    fn setup_ops(&self) -> Vec<Invocation> {
        Vec::new()
    }
}

/// Options that shape a workload's generator.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct WorkloadOptions {
    /// Keys in use at once.
    pub active_keys: usize,
    /// Operations per key before it is retired and a fresh key takes its place.
    pub ops_per_key: usize,
}

/// A named workload.
pub trait Workload: Send + Sync {
    /// `--workload` name.
    fn name(&self) -> &'static str;
    /// One-line description for `splitbrain list`.
    fn description(&self) -> &'static str;
    /// A fresh generator.
    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator>;
    /// The checkers its histories are judged by.
    fn checkers(&self, check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>>;
}
