//! The resolved definition of one test: every parameter, stored as `test.json` so the run
//! can be repeated exactly (`--seed`).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Every parameter of a test run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestSpec {
    /// The test's name: `<target>-<workload>` unless given.
    pub name: String,
    /// `--target`.
    pub target: String,
    /// `--target-spec`: the spec file of an `exec` target (absolute). Absent otherwise and
    /// in older test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_spec: Option<PathBuf>,
    /// `--workload`.
    pub workload: String,
    /// Fault kinds (`--nemesis`), empty for none.
    pub nemesis: Vec<String>,
    /// Mean seconds between faults.
    pub nemesis_interval_s: f64,
    /// A fault plan file replacing the random schedule (`--nemesis-plan`).
    pub nemesis_plan: Option<PathBuf>,
    /// `--nemesis-search`: `random` (the default, a schedule made from the seed before
    /// the run) or `guided` (chosen while the run goes on from what the cluster does).
    /// Absent when random and in older test.json files.
    #[serde(default, skip_serializing_if = "splitbrain_nemesis::Search::is_random")]
    pub nemesis_search: splitbrain_nemesis::Search,
    /// `--nemesis-memory`: the guided search's reward table (a path, or `off`); absent
    /// for the store's default and in older test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nemesis_memory: Option<String>,
    /// The fault schedule this run follows (derived from the seed or the plan file; for
    /// a guided search, the schedule it made, written when the main phase ends), so
    /// it can be read and replayed.
    #[serde(default)]
    pub nemesis_schedule: serde_json::Value,
    /// Number of nodes.
    pub nodes: usize,
    /// Number of concurrent client workers.
    pub concurrency: usize,
    /// Target ops per second over all clients (0 = unlimited).
    pub rate: f64,
    /// Seconds of the main phase.
    pub time_limit_s: f64,
    /// Ends the main phase early once the target reports this many steps (`--steps`;
    /// the ddp target: every live rank has committed them). Absent in older test.json.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// `--target maelstrom`: the node program and the simulated network's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maelstrom: Option<MaelstromSpec>,
    /// Per-op client timeout in milliseconds; a timed-out op is `info`.
    pub op_timeout_ms: u64,
    /// The seed of every random choice.
    pub seed: u64,
    /// Bugs enabled in the target.
    pub bugs: Vec<String>,
    /// Shards (targets that shard).
    pub shards: u32,
    /// Read mode (targets that have several).
    pub read_mode: Option<String>,
    /// `--wait N` (Redis): replicas each write waits for. Absent when not given and in
    /// older test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<u32>,
    /// `--read-from` (targets with replicas): where read-only ops go. Absent when not
    /// given and in older test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_from: Option<String>,
    /// `--replication` (PostgreSQL with standbys): `async` or `sync`. Absent when not
    /// given and in older test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<String>,
    /// `--transport tcp|shm` (ddp): how the ranks exchange data. Absent when not given
    /// (the target's default, TCP) and in specs written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// `--setting NAME=VALUE`s: server settings of a database target (MariaDB). Absent
    /// when none were given and in older test.json files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<String>,
    /// The consistency model transactional checks required (`--consistency-model`);
    /// `splitbrain check` on the run directory uses it unless told otherwise.
    #[serde(default)]
    pub consistency_model: Option<String>,
    /// Initial state of the linearizability model (`--init`, JSON); `splitbrain check`
    /// on the run directory uses it unless told otherwise. Absent in older test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<serde_json::Value>,
    /// Shortest delay before the second request of a hedged read (the clients' running
    /// p95 read latency when longer).
    pub hedge_delay_ms: u64,
    /// Keys in use at once.
    pub active_keys: usize,
    /// Ops per key before rotation.
    pub ops_per_key: usize,
    /// Seconds to let the cluster settle after healing, before final reads.
    pub quiesce_s: f64,
    /// Convergence workloads: the longest the per-replica final reads go on waiting for
    /// the replicas to agree (`--converge-bound`). Absent in older test.json files.
    #[serde(default = "default_converge_bound_s")]
    pub converge_bound_s: f64,
    /// Where the run store is.
    pub store: PathBuf,
    /// Explicit node binary, if given (with `hosts`: a path on the hosts when it is not a
    /// file here).
    pub target_bin: Option<PathBuf>,
    /// `--hosts`: node `i` runs on host `i` over SSH. Absent for local runs and in older
    /// test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<crate::remote::Host>>,
    /// `--stop-on-anomaly`: end the main phase once the online check has found an
    /// anomaly (`[]`) or every named checker or anomaly type (`--stop-when-found`).
    /// Absent when not asked for and in older test.json files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_on_anomaly: Option<Vec<String>>,
    /// `--no-online-check`: nothing is checked while the run goes on, only the final
    /// check (to measure what online checking costs). Absent when false and in older
    /// test.json files.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_online_check: bool,
    /// splitbrain's version.
    pub version: String,
}

impl TestSpec {
    /// The faults the run asks for: its `--nemesis-plan` file, or else `--nemesis` at its
    /// interval, scheduled from its seed.
    pub fn nemesis_spec(
        &self,
    ) -> Result<splitbrain_nemesis::NemesisSpec, splitbrain_nemesis::NemesisError> {
        match &self.nemesis_plan {
            Some(path) => splitbrain_nemesis::NemesisSpec::from_plan_file(path),
            None => splitbrain_nemesis::NemesisSpec::parse(
                &self.nemesis.join(","),
                std::time::Duration::from_secs_f64(self.nemesis_interval_s),
                self.seed,
            )
            .map(|mut s| {
                s.search = self.nemesis_search;
                s
            }),
        }
    }

    /// How the run names its nodes, the one answer every part of a run asks (node
    /// directories, the nodes' own ids, the history's `node`, the nemesis's schedule and
    /// events, plan files): `n0`..`n(N-1)` for `--target maelstrom`, as Maelstrom names
    /// them (`parse-node-count` in its `core.clj`) and as nodes written for it compute
    /// each other's ids; `n1`..`nN` for every other target.
    pub fn node_names(&self) -> splitbrain_nemesis::NodeNames {
        if self.target == "maelstrom" {
            splitbrain_nemesis::NodeNames::FROM_ZERO
        } else {
            splitbrain_nemesis::NodeNames::FROM_ONE
        }
    }
}

/// [`TestSpec::converge_bound_s`] when test.json does not say.
pub fn default_converge_bound_s() -> f64 {
    crate::run::converge::CONVERGE_BOUND.as_secs_f64()
}

/// The options a test spec sets for its target. Written here, beside the spec, so that
/// `target/` (which the spec's owners use) needs nothing from the spec: no import circle.
impl crate::systems::TargetOptions {
    /// The options a test spec sets.
    pub fn from_spec(spec: &TestSpec) -> crate::systems::TargetOptions {
        crate::systems::TargetOptions {
            shards: spec.shards,
            read_mode: spec.read_mode.clone(),
            bugs: spec.bugs.clone(),
            op_timeout: std::time::Duration::from_millis(spec.op_timeout_ms),
            hedge_delay: std::time::Duration::from_millis(spec.hedge_delay_ms),
            workload: spec.workload.clone(),
            wait: spec.wait,
            read_from: spec.read_from.clone(),
            replication: spec.replication.clone(),
            transport: spec.transport.clone(),
        }
    }
}

/// The Maelstrom part of a test, stored in `test.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MaelstromSpec {
    /// The node program (`--bin`).
    pub bin: PathBuf,
    /// Its arguments (`--bin-arg`, repeatable).
    #[serde(default)]
    pub bin_args: Vec<String>,
    /// Mean one-way message latency in ms (`--latency`).
    pub latency_ms: f64,
    /// Its distribution (`--latency-dist`).
    pub latency_dist: LatencyDist,
    /// The broadcast topology (`--topology`).
    pub topology: String,
}

/// How the base one-way latency of every message is drawn (Maelstrom's `--latency-dist`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyDist {
    /// Always the mean.
    Constant,
    /// Uniform between 0 and twice the mean.
    Uniform,
    /// Exponential with the mean.
    Exponential,
}

impl LatencyDist {
    /// Parses `constant`, `uniform` or `exponential`.
    pub fn parse(s: &str) -> Option<LatencyDist> {
        match s {
            "constant" => Some(LatencyDist::Constant),
            "uniform" => Some(LatencyDist::Uniform),
            "exponential" => Some(LatencyDist::Exponential),
            _ => None,
        }
    }
}
