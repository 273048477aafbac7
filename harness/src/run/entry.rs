//! The one way in to a test: [`resolve`] a request (the flags of `splitbrain test`, a
//! suite cell, a bench's cell) into a validated [`TestSpec`], then [`run`] the spec into a
//! [`RunOutcome`]. Every caller goes through both (a stored test.json, as `shrink` replays
//! it, through `run` alone: it was resolved when it was made); the target's defaults are
//! applied here and nowhere else.
//!
//! ```text
//! flags | suite cell | bench -> TestRequest -> resolve -> TestSpec -> run -> RunOutcome
//!                                                               (local, remote, maelstrom)
//! ```

use crate::check_options::{CheckFlags, CheckOptions};
use crate::maelstrom::workloads::{MaelstromWorkload, WORKLOADS};
use crate::maelstrom::{absolute_bin, run_maelstrom_test, TOPOLOGIES};
use crate::run::controller::{run_local_test, RunOutcome};
use crate::run::spec::{LatencyDist, MaelstromSpec, TestSpec};
use crate::systems::exec::ExecTarget;
use crate::systems::Target;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A test as asked for: every option of `splitbrain test` (these are its flags), typed,
/// with `None` where the target's default applies. [`TestRequest::default`] is what the
/// command takes with no flag.
#[derive(clap::Args, Debug, Clone)]
pub struct TestRequest {
    /// The system under test (`exec`: any server following docs/http-contract.md, given
    /// by --target-spec).
    #[arg(long, default_value = "kv")]
    pub target: String,
    /// With `--target exec`: the TOML file that says how to start the server and what it
    /// serves (docs/http-contract.md).
    #[arg(long)]
    pub target_spec: Option<PathBuf>,
    /// What the clients do [default: `register` where the target runs it, else the
    /// first workload `splitbrain list` shows for the target].
    #[arg(long)]
    pub workload: Option<String>,
    /// Faults, comma separated: partition,kill,pause,clock,slow,loss or none
    /// [default: partition,kill,pause; with --target maelstrom: none, as Maelstrom's].
    #[arg(long)]
    pub nemesis: Option<String>,
    /// Mean seconds between faults.
    #[arg(long, default_value_t = 4.0)]
    pub nemesis_interval: f64,
    /// A fault plan file (JSON: `[{"at_ms":..,"for_ms":..,"f":"kill","nodes":["n2"]}]`)
    /// replacing the random schedule.
    #[arg(long, conflicts_with = "nemesis_search")]
    pub nemesis_plan: Option<PathBuf>,
    /// How faults are chosen: `random` (a schedule made from the seed before the run) or
    /// `guided` (each next fault chosen while the run goes on, toward cluster states and
    /// (state, fault) pairs not yet reached, from the nodes' status and the clients'
    /// outcomes; its schedule is stored as `nemesis-plan.json` in the run directory, which
    /// `--nemesis-plan` replays). docs/guided.md.
    #[arg(long, value_parser = ["random", "guided"], default_value = "random")]
    pub nemesis_search: String,
    /// With `--nemesis-search guided`: the (state, fault) reward table the search starts
    /// from and adds its own to at the end, or `off` for a cold run that leaves none
    /// [default: the run store's table for this target, workload, bug, faults and node
    /// count, STORE/<target>-<workload>/guided-memory--<bug>--<faults>--n<N>.json].
    /// docs/guided.md.
    #[arg(long, value_name = "PATH|off")]
    pub nemesis_memory: Option<String>,
    /// Number of nodes (default 5; with --hosts, one per host).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Run node i on host i over SSH: a hosts file (TOML; README "Testing on real
    /// machines") or a comma-separated list of addresses.
    #[arg(long)]
    pub hosts: Option<String>,
    /// With --hosts: the login user (a hosts file's own settings win).
    #[arg(long)]
    pub ssh_user: Option<String>,
    /// With --hosts: the private key file.
    #[arg(long)]
    pub ssh_key: Option<PathBuf>,
    /// With --hosts: sshd's port.
    #[arg(long)]
    pub ssh_port: Option<u16>,
    /// Concurrent client workers.
    #[arg(long, default_value_t = 10)]
    pub concurrency: usize,
    /// Total target rate in ops/s (0 = as fast as possible).
    #[arg(long, default_value_t = 200.0)]
    pub rate: f64,
    /// Seconds of the main phase.
    #[arg(long, default_value_t = 20.0)]
    pub time_limit: f64,
    /// Train workload (ddp): end once every live rank has committed N steps (or at
    /// --time-limit, whichever comes first).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Client op timeout in milliseconds; a timed-out op is `info`.
    #[arg(long, default_value_t = 1000)]
    pub op_timeout_ms: u64,
    /// Seed of every random choice (printed and stored; default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Enable a target bug (repeatable); `splitbrain list` names them.
    #[arg(long = "bug")]
    pub bugs: Vec<String>,
    /// Shards (targets that shard).
    #[arg(long, default_value_t = 1)]
    pub shards: u32,
    /// Read mode (targets that have several; for `txn` the isolation level:
    /// serializable or read-committed).
    #[arg(long)]
    pub read_mode: Option<String>,
    /// Redis: after each write, `WAIT N` (N replicas must acknowledge it within the op
    /// timeout, or the write is `info`).
    #[arg(long)]
    pub wait: Option<u32>,
    /// Targets with replicas (postgres with --nodes 2 or more, redis): where read-only ops
    /// go, the primary (default) or a replica.
    #[arg(long, value_parser = ["primary", "replica"])]
    pub read_from: Option<String>,
    /// PostgreSQL with standbys: `async` (default; a commit is acknowledged once the
    /// primary flushed it) or `sync` (once every standby applied it: remote_apply).
    #[arg(long, value_parser = ["async", "sync"])]
    pub replication: Option<String>,
    /// ddp: how the ranks exchange data, `tcp` (default) or `shm` (shared memory, the
    /// ranks being on one host). Network faults (partition, slow, loss) cannot reach
    /// shared memory, so they are refused with `shm`.
    #[arg(long)]
    pub transport: Option<String>,
    /// A server setting of a database target, NAME=VALUE (repeatable; mariadb: a server
    /// variable written to each node's option file, e.g. innodb_snapshot_isolation=ON;
    /// postgres: `-c NAME=VALUE`, e.g. track_commit_timestamp=on, except the client's own
    /// splitbrain.append=update-insert|upsert and splitbrain.statement_log=on|off).
    #[arg(long = "setting")]
    pub settings: Vec<String>,
    /// Hedged reads: the shortest delay before the second request, in ms (the delay is
    /// the running p95 of a typical replica's first requests, never below this).
    #[arg(long, default_value_t = 2)]
    pub hedge_delay_ms: u64,
    /// Convergence workloads: the longest the final reads wait, after the heal, for
    /// every replica to agree (seconds). Replicas that still disagree then are divergent.
    #[arg(long, default_value_t = crate::run::spec::default_converge_bound_s())]
    pub converge_bound: f64,
    /// Keys in use at once.
    #[arg(long, default_value_t = 8)]
    pub active_keys: usize,
    /// Ops per key before a fresh key replaces it.
    #[arg(long, default_value_t = 100)]
    pub ops_per_key: usize,
    /// Run store directory.
    #[arg(long, default_value = "store")]
    pub store: PathBuf,
    /// Test name (default `<target>-<workload>`).
    #[arg(long)]
    pub name: Option<String>,
    /// Node binary (default: found beside splitbrain or on PATH).
    #[arg(long)]
    pub target_bin: Option<PathBuf>,
    /// `--target maelstrom`: the node program, any language, speaking Maelstrom's protocol.
    #[arg(long)]
    pub bin: Option<PathBuf>,
    /// `--target maelstrom`: an argument for the node program (repeatable).
    #[arg(long = "bin-arg", allow_hyphen_values = true)]
    pub bin_args: Vec<String>,
    /// `--target maelstrom`: mean one-way message latency in ms.
    #[arg(long, default_value_t = 0.0)]
    pub latency: f64,
    /// `--target maelstrom`: latency distribution (constant, uniform, exponential).
    #[arg(long, default_value = "constant")]
    pub latency_dist: String,
    /// `--target maelstrom`, broadcast: the topology sent to the nodes (grid, line,
    /// total, tree2, tree3, tree4).
    #[arg(long, default_value = "grid")]
    pub topology: String,
    /// End the main phase (heal, final check, report as usual) once the check that runs
    /// alongside the test has found an anomaly no later operation can repair
    /// (linearizable, Elle, bank workloads).
    #[arg(long)]
    pub stop_on_anomaly: bool,
    /// With --stop-on-anomaly: stop only once every named checker or anomaly type has
    /// been found (repeatable; e.g. `linearizable`, `G1c`, `wrong-total`).
    #[arg(
        long = "stop-when-found",
        value_name = "NAME",
        requires = "stop_on_anomaly"
    )]
    pub stop_when_found: Vec<String>,
    /// Check nothing while the run goes on, only the final check (no live anomalies, no
    /// `first_known_at_s` before the run's end); measures what online checking costs.
    #[arg(long, conflicts_with = "stop_on_anomaly")]
    pub no_online_check: bool,
    /// Seconds the cluster settles after the heal, before the final reads (no flag: a
    /// bench's short runs set it lower).
    #[arg(skip = 2.0)]
    pub quiesce: f64,
}

impl Default for TestRequest {
    /// The request of `splitbrain test` with no flag: the defaults its flags declare.
    fn default() -> TestRequest {
        use clap::{Args, FromArgMatches};
        let cmd = TestRequest::augment_args(clap::Command::new("test").no_binary_name(true));
        let matches = cmd.get_matches_from(std::iter::empty::<String>());
        TestRequest::from_arg_matches(&matches).expect("every flag of a test has a default")
    }
}

/// Every flag of `splitbrain test`: the request, how its result is shown, and how it is
/// checked. A suite cell's `extra` arguments are these flags too.
#[derive(clap::Args, Debug, Clone)]
pub struct TestFlags {
    #[allow(missing_docs)] // clap's flatten: the flags' own docs are their help
    #[command(flatten)]
    pub request: TestRequest,
    /// Do not show the progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Print results.json to stdout instead of the table.
    #[arg(long, value_parser = ["table", "json"], default_value = "table")]
    pub format: String,
    #[allow(missing_docs)]
    #[command(flatten)]
    pub check: CheckFlags,
}

/// A request that cannot be a test (a bad combination, an unknown name): a usage error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidTest(pub String);

fn bad(msg: impl Into<String>) -> InvalidTest {
    InvalidTest(msg.into())
}

impl TestRequest {
    /// `--nemesis`, or the target's default: none for Maelstrom nodes (Maelstrom injects
    /// no fault unless asked, and its nodes usually keep their state in memory only).
    fn nemesis(&self) -> &str {
        match (&self.nemesis, self.target.as_str()) {
            (Some(n), _) => n,
            (None, "maelstrom") => "none",
            (None, _) => "partition,kill,pause",
        }
    }
}

/// Validates a request and resolves it into the test it asks for, every default applied
/// (the target's workload, nemesis and node count among them). `check` is how the run
/// will be checked (its consistency model and `init` are stored in the spec).
pub fn resolve(r: &TestRequest, check: &CheckOptions) -> Result<TestSpec, InvalidTest> {
    if r.target == "maelstrom" {
        return resolve_maelstrom(r, check);
    }
    let (target, target_spec) = resolve_target(r)?;
    let planned = match &r.nemesis_plan {
        Some(plan) => splitbrain_nemesis::NemesisSpec::from_plan_file(plan)
            .map(|p| p.faults)
            .map_err(|e| bad(e.to_string()))?,
        None => Vec::new(),
    };
    for f in r
        .nemesis()
        .split(',')
        .map(str::trim)
        .chain(planned.iter().map(String::as_str))
    {
        if let Some(why) = target.refuses_fault(f) {
            return Err(bad(why));
        }
    }
    // Refused here rather than failing every clock fault and then the heal (exit 4).
    if target.clock_source() == crate::systems::ClockSource::Unsupported
        && r.nemesis().split(',').any(|f| f.trim() == "clock")
    {
        return Err(bad(format!(
            "--nemesis clock: the clock of target {} cannot be moved (see its docs)",
            r.target
        )));
    }
    // A target's defaults run: without --workload, `register` where the target runs it
    // (what every target that runs it has always defaulted to), else its first workload.
    let runs = target.workloads();
    let workload_name: String = match &r.workload {
        Some(w) => w.clone(),
        None if runs.contains(&"register") => "register".into(),
        None => match runs.first() {
            Some(first) => first.to_string(),
            None => {
                return Err(bad(format!(
                    "target {} names no workload; set --workload",
                    r.target
                )))
            }
        },
    };
    let Some(workload) = crate::workload::registry::by_name(&workload_name) else {
        return Err(bad(format!(
            "unknown workload {workload_name:?}; `splitbrain list` shows them",
        )));
    };
    if !runs.contains(&workload_name.as_str()) {
        return Err(bad(format!(
            "target {} cannot run workload {workload_name:?} (it runs: {}); set --workload",
            r.target,
            runs.join(", ")
        )));
    }
    for bug in &r.bugs {
        if !target.bugs().iter().any(|b| b.name == bug) {
            return Err(bad(format!(
                "target {} has no bug {bug:?}; `splitbrain list` shows them",
                r.target
            )));
        }
    }
    if let Some(mode) = &r.read_mode {
        if !target.read_modes().contains(&mode.as_str()) {
            return Err(bad(format!(
                "target {} has no read mode {mode:?} (has: {})",
                r.target,
                target.read_modes().join(", ")
            )));
        }
    }
    if r.wait.is_some() && !target.accepted_flags().contains(&"wait") {
        return Err(bad(format!(
            "--wait applies to targets that replicate asynchronously (redis), not {}",
            r.target
        )));
    }
    for (flag, given, targets) in [
        ("read-from", r.read_from.is_some(), "postgres, redis"),
        ("replication", r.replication.is_some(), "postgres"),
    ] {
        if given && !target.accepted_flags().contains(&flag) {
            return Err(bad(format!(
                "--{flag} applies to targets with replicas ({targets}), not {}",
                r.target
            )));
        }
    }
    check_transport(r, target.as_ref())?;
    workload
        .checkers(check)
        .map_err(|e| bad(format!("{e:#}")))?;
    let mut spec = common_spec(r, check, &workload_name, None)?;
    spec.target_spec = target_spec;
    Ok(spec)
}

/// Runs a test: starts its cluster (here, on `--hosts`, or Maelstrom nodes), drives its
/// clients and faults, heals, tears down, checks and stores it. `cancel` (Ctrl-C) stops
/// the clients; the run then heals, tears down and checks what was recorded. The spec
/// comes from [`resolve`], or from a stored run's test.json.
pub async fn run(
    spec: &TestSpec,
    check: &CheckOptions,
    cancel: CancellationToken,
    show_progress: bool,
) -> anyhow::Result<RunOutcome> {
    if spec.maelstrom.is_some() {
        let Some(workload) = MaelstromWorkload::parse(&spec.workload) else {
            anyhow::bail!("maelstrom workload {:?} is not known", spec.workload);
        };
        return run_maelstrom_test(spec, workload, check, cancel, show_progress).await;
    }
    let target = target_for(&spec.target, spec.target_spec.as_deref(), &spec.settings)?;
    let Some(workload) = crate::workload::registry::by_name(&spec.workload) else {
        anyhow::bail!("unknown workload {:?}", spec.workload);
    };
    match &spec.hosts {
        Some(hosts) => {
            crate::remote::run_remote_test(
                spec,
                hosts,
                target,
                workload.as_ref(),
                check,
                cancel,
                show_progress,
            )
            .await
        }
        None => {
            run_local_test(
                spec,
                target,
                workload.as_ref(),
                check,
                cancel,
                show_progress,
            )
            .await
        }
    }
}

/// The target a test names (for `exec`, the one its spec file describes), with its
/// server settings: what [`resolve`] checks a request against and [`run`] runs.
fn target_for(
    name: &str,
    target_spec: Option<&Path>,
    settings: &[String],
) -> Result<Arc<dyn Target>, InvalidTest> {
    let target: Arc<dyn Target> = if name == "exec" {
        Arc::new(exec_target(target_spec)?)
    } else {
        if target_spec.is_some() {
            return Err(bad("--target-spec goes with --target exec"));
        }
        crate::systems::by_name(name).ok_or_else(|| {
            bad(format!(
                "unknown target {name:?}; `splitbrain list` shows them"
            ))
        })?
    };
    if settings.is_empty() {
        return Ok(target);
    }
    match target.with_settings(settings) {
        Some(configured) => configured.map_err(|e| bad(e.to_string())),
        None => Err(bad(format!(
            "--setting applies to database targets that take server settings (mariadb, postgres), not {name}"
        ))),
    }
}

/// An `exec` target from its spec file; a bad spec is a usage error.
fn exec_target(target_spec: Option<&Path>) -> Result<ExecTarget, InvalidTest> {
    let Some(path) = target_spec else {
        return Err(bad(
            "--target exec needs --target-spec FILE.toml (see docs/http-contract.md)",
        ));
    };
    ExecTarget::from_file(path).map_err(|e| bad(e.to_string()))
}

/// `--transport`: only for targets that take it, `tcp` or `shm`, and with `shm` no
/// network fault (it would be recorded as injected while changing nothing).
fn check_transport(r: &TestRequest, target: &dyn Target) -> Result<(), InvalidTest> {
    let Some(transport) = &r.transport else {
        return Ok(());
    };
    if !target.accepted_flags().contains(&"transport") {
        return Err(bad(format!(
            "--transport applies to targets whose nodes can exchange data through shared memory (ddp), not {}",
            r.target
        )));
    }
    if transport != "tcp" && transport != "shm" {
        return Err(bad(format!(
            "--transport {transport:?}: expected tcp or shm"
        )));
    }
    if transport == "shm" {
        let mut faults: Vec<String> = r
            .nemesis()
            .split(',')
            .map(|f| f.trim().to_string())
            .collect();
        if let Some(plan) = &r.nemesis_plan {
            let spec = splitbrain_nemesis::NemesisSpec::from_plan_file(plan)
                .map_err(|e| bad(e.to_string()))?;
            faults.extend(spec.faults);
        }
        if let Some(f) = faults
            .iter()
            .find(|f| splitbrain_nemesis::NETWORK_FAULTS.contains(&f.as_str()))
        {
            return Err(bad(format!(
                "--transport shm with --nemesis {f}: the ranks exchange data through shared memory, which a network fault cannot cut, slow or drop (only the clients' HTTP would be hit, and the run would claim a fault the ranks never saw); use --transport tcp for network faults, or kill, pause, clock, slow-client with shm"
            )));
        }
    }
    Ok(())
}

/// `--target maelstrom`: the node program and its workload.
fn resolve_maelstrom(r: &TestRequest, check: &CheckOptions) -> Result<TestSpec, InvalidTest> {
    let Some(bin) = &r.bin else {
        return Err(bad("--target maelstrom needs --bin PATH, the node program"));
    };
    if !bin.is_file() {
        return Err(bad(format!("--bin {} is not a file", bin.display())));
    }
    let names: Vec<&str> = WORKLOADS.iter().map(|(n, _)| *n).collect();
    let Some(workload_name) = r.workload.as_deref() else {
        return Err(bad(format!(
            "--target maelstrom needs --workload NAME, the Maelstrom workload its nodes serve (one of: {})",
            names.join(", ")
        )));
    };
    let Some(workload) = MaelstromWorkload::parse(workload_name) else {
        return Err(bad(format!(
            "target maelstrom cannot run workload {workload_name:?} (it runs: {}); set --workload",
            names.join(", ")
        )));
    };
    if !r.bugs.is_empty()
        || r.read_mode.is_some()
        || r.wait.is_some()
        || r.read_from.is_some()
        || r.replication.is_some()
        || r.transport.is_some()
    {
        return Err(bad(
            "--bug, --read-mode, --wait, --read-from, --replication and --transport do not apply to maelstrom nodes (a node's bugs are its own)",
        ));
    }
    let Some(latency_dist) = LatencyDist::parse(&r.latency_dist) else {
        return Err(bad(format!(
            "--latency-dist {:?}: expected constant, uniform or exponential",
            r.latency_dist
        )));
    };
    if !(r.latency >= 0.0 && r.latency.is_finite()) {
        return Err(bad("--latency must be a non-negative number of ms"));
    }
    if !TOPOLOGIES.contains(&r.topology.as_str()) {
        return Err(bad(format!(
            "--topology {:?}: expected one of {}",
            r.topology,
            TOPOLOGIES.join(", ")
        )));
    }
    crate::workload::Workload::checkers(&workload, check).map_err(|e| bad(format!("{e:#}")))?;
    let m = MaelstromSpec {
        bin: absolute_bin(bin),
        bin_args: r.bin_args.clone(),
        latency_ms: r.latency,
        latency_dist,
        topology: r.topology.clone(),
    };
    common_spec(r, check, workload_name, Some(m))
}

/// The parts of a test spec every target shares.
fn common_spec(
    r: &TestRequest,
    check: &CheckOptions,
    workload: &str,
    maelstrom: Option<MaelstromSpec>,
) -> Result<TestSpec, InvalidTest> {
    let hosts = remote_hosts(r, maelstrom.is_some())?;
    if r.stop_on_anomaly && (maelstrom.is_some() || hosts.is_some()) {
        return Err(bad(
            "--stop-on-anomaly applies to local runs of networked targets (not --target maelstrom or --hosts)",
        ));
    }
    let nodes = match (&hosts, r.nodes) {
        (Some(h), Some(n)) if h.len() != n => {
            return Err(bad(format!(
                "--nodes {n} but --hosts names {} hosts (node i runs on host i)",
                h.len()
            )))
        }
        (Some(h), _) => h.len(),
        (None, n) => n.unwrap_or(5),
    };
    if nodes == 0 || r.concurrency == 0 || r.time_limit <= 0.0 || r.converge_bound <= 0.0 {
        return Err(bad(
            "--nodes, --concurrency, --time-limit and --converge-bound must be positive",
        ));
    }
    // With one node there is no replica to read from or to wait for.
    if nodes < 2
        && (r.read_from.as_deref() == Some("replica") || r.replication.as_deref() == Some("sync"))
    {
        return Err(bad(format!(
            "--read-from replica and --replication sync need a replica: --nodes 2 or more (got {nodes})"
        )));
    }
    // A plan run's faults are the plan's (the plan overrides `--nemesis` and its default),
    // so test.json and the report name the faults the run can actually inject.
    let nemesis: Vec<String> = if let Some(plan) = &r.nemesis_plan {
        splitbrain_nemesis::NemesisSpec::from_plan_file(plan)
            .map_err(|e| bad(e.to_string()))?
            .faults
    } else {
        r.nemesis()
            .split(',')
            .map(str::trim)
            .filter(|f| !f.is_empty() && *f != "none")
            .map(str::to_string)
            .collect()
    };
    splitbrain_nemesis::NemesisSpec::parse(r.nemesis(), Duration::from_secs(1), 0)
        .map_err(|e| bad(e.to_string()))?;
    let seed = r.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let spec = TestSpec {
        name: r
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-{workload}", r.target)),
        target: r.target.clone(),
        target_spec: None,
        workload: workload.to_string(),
        nemesis,
        nemesis_interval_s: r.nemesis_interval,
        nemesis_plan: r.nemesis_plan.clone(),
        nemesis_search: splitbrain_nemesis::Search::parse(&r.nemesis_search).unwrap_or_default(),
        nemesis_memory: r.nemesis_memory.clone(),
        nemesis_schedule: serde_json::Value::Null,
        nodes,
        concurrency: r.concurrency,
        rate: r.rate,
        time_limit_s: r.time_limit,
        steps: r.steps,
        op_timeout_ms: r.op_timeout_ms,
        seed,
        bugs: r.bugs.clone(),
        shards: r.shards,
        read_mode: r.read_mode.clone(),
        wait: r.wait,
        read_from: r.read_from.clone(),
        replication: r.replication.clone(),
        transport: r.transport.clone(),
        settings: r.settings.clone(),
        consistency_model: check.consistency_model.clone(),
        init: check.init.clone(),
        hedge_delay_ms: r.hedge_delay_ms,
        active_keys: r.active_keys,
        ops_per_key: r.ops_per_key,
        quiesce_s: r.quiesce,
        converge_bound_s: r.converge_bound,
        store: r.store.clone(),
        target_bin: r.target_bin.clone(),
        hosts,
        version: env!("CARGO_PKG_VERSION").to_string(),
        stop_on_anomaly: r.stop_on_anomaly.then(|| r.stop_when_found.clone()),
        no_online_check: r.no_online_check,
        maelstrom,
    };
    check_plan_nodes(&spec)?;
    Ok(spec)
}

/// A `--nemesis-plan` file naming a node the run does not have is a usage error: a plan
/// written for `n1`..`nN` names `nN`, which a Maelstrom run (`n0`..`n(N-1)`) lacks. (A
/// file that does not parse is reported when the run opens it.)
fn check_plan_nodes(spec: &TestSpec) -> Result<(), InvalidTest> {
    let Some(path) = &spec.nemesis_plan else {
        return Ok(());
    };
    let Ok(plan) = splitbrain_nemesis::NemesisSpec::from_plan_file(path) else {
        return Ok(());
    };
    splitbrain_nemesis::Nemesis::new(plan)
        .with_node_names(spec.node_names())
        .check_plan(spec.nodes)
        .map_err(|m| bad(format!("--nemesis-plan {}: {m}", path.display())))
}

/// `--hosts` with the `--ssh-*` options; a bad hosts file is a usage error.
fn remote_hosts(
    r: &TestRequest,
    maelstrom: bool,
) -> Result<Option<Vec<crate::remote::Host>>, InvalidTest> {
    let Some(arg) = &r.hosts else {
        if r.ssh_user.is_some() || r.ssh_key.is_some() || r.ssh_port.is_some() {
            return Err(bad("--ssh-user, --ssh-key and --ssh-port go with --hosts"));
        }
        return Ok(None);
    };
    if maelstrom {
        return Err(bad(
            "--hosts does not apply to --target maelstrom (its network is simulated here)",
        ));
    }
    let ssh = crate::remote::SshDefaults {
        user: r.ssh_user.clone(),
        identity: r.ssh_key.clone(),
        port: r.ssh_port,
    };
    crate::remote::parse_hosts_arg(arg, &ssh)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The target `--target` names, and for `exec` the absolute path of its spec file (kept
/// in test.json, so the run repeats from any directory).
fn resolve_target(r: &TestRequest) -> Result<(Arc<dyn Target>, Option<PathBuf>), InvalidTest> {
    let stored = if r.target == "exec" {
        let t = exec_target(r.target_spec.as_deref())?;
        if !t.serves_clock() && r.nemesis().split(',').any(|f| f.trim() == "clock") {
            return Err(bad(format!(
                "--nemesis clock needs a way to move the nodes' clocks, which the target spec {} does not declare (clock = true for POST /admin/clock, or clock = \"faketime\")",
                r.target_spec.as_deref().unwrap_or(t.path()).display()
            )));
        }
        Some(t.path().to_path_buf())
    } else {
        None
    };
    let target = target_for(
        &r.target,
        stored.as_deref().or(r.target_spec.as_deref()),
        &r.settings,
    )?;
    Ok((target, stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(r: TestRequest) -> Result<TestSpec, InvalidTest> {
        resolve(&r, &CheckOptions::default())
    }

    #[test]
    fn no_flag_is_the_kv_register_test_with_the_default_faults() {
        let spec = resolved(TestRequest {
            seed: Some(1),
            ..TestRequest::default()
        })
        .unwrap();
        assert_eq!(
            (
                spec.name.as_str(),
                spec.target.as_str(),
                spec.workload.as_str()
            ),
            ("kv-register", "kv", "register")
        );
        assert_eq!(spec.nemesis, ["partition", "kill", "pause"]);
        assert_eq!((spec.nodes, spec.concurrency, spec.seed), (5, 10, 1));
        assert_eq!((spec.time_limit_s, spec.quiesce_s), (20.0, 2.0));
    }

    #[test]
    fn a_plan_run_names_the_plans_faults_not_the_default_ones() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("plan.json");
        std::fs::write(
            &plan,
            r#"[{"at_ms":0,"for_ms":2000,"f":"kill","nodes":["n1"]},
                {"at_ms":3000,"for_ms":1000,"f":"kill","nodes":["n2"]}]"#,
        )
        .unwrap();
        let spec = resolved(TestRequest {
            nemesis_plan: Some(plan.clone()),
            seed: Some(1),
            ..TestRequest::default()
        })
        .unwrap();
        assert_eq!(spec.nemesis, ["kill"]);
        std::fs::write(&plan, "not a plan").unwrap();
        let e = resolved(TestRequest {
            nemesis_plan: Some(plan),
            ..TestRequest::default()
        })
        .unwrap_err();
        assert!(e.0.contains("plan.json"), "{e}");
    }

    #[test]
    fn maelstrom_nodes_default_to_no_fault_and_name_their_workload() {
        let bin = PathBuf::from("/bin/sh");
        let bare = TestRequest {
            target: "maelstrom".into(),
            bin: Some(bin.clone()),
            ..TestRequest::default()
        };
        let e = resolved(bare.clone()).unwrap_err();
        assert!(e.0.contains("--workload NAME"), "{e}");
        let spec = resolved(TestRequest {
            workload: Some("echo".into()),
            ..bare
        })
        .unwrap();
        assert!(spec.nemesis.is_empty(), "{:?}", spec.nemesis);
        assert!(spec.maelstrom.is_some());
    }

    #[test]
    fn bad_requests_are_invalid_tests_naming_the_flag() {
        let bad = |r: TestRequest| resolved(r).unwrap_err().0;
        let unknown = bad(TestRequest {
            target: "nope".into(),
            ..TestRequest::default()
        });
        assert!(unknown.contains("unknown target \"nope\""), "{unknown}");
        let setting = bad(TestRequest {
            settings: vec!["x=1".into()],
            ..TestRequest::default()
        });
        assert!(setting.starts_with("--setting applies to"), "{setting}");
        let spec_file = bad(TestRequest {
            target_spec: Some("x.toml".into()),
            ..TestRequest::default()
        });
        assert_eq!(spec_file, "--target-spec goes with --target exec");
        let nodes = bad(TestRequest {
            nodes: Some(0),
            ..TestRequest::default()
        });
        assert!(nodes.contains("must be positive"), "{nodes}");
    }
}
