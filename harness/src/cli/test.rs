//! `splitbrain test`: run a test against a real cluster and check it.

use super::flags::CheckFlags;
use super::{runtime, usage, verdict_code, EXIT_COULD_NOT_RUN};
use clap::Args;
use splitbrain::maelstrom::net::LatencyDist;
use splitbrain::maelstrom::workloads::{MaelstromWorkload, WORKLOADS};
use splitbrain::maelstrom::{absolute_bin, run_maelstrom_test, MaelstromSpec, TOPOLOGIES};
use splitbrain::run::controller::run_test;
use splitbrain::run::spec::TestSpec;
use splitbrain::systems::exec::ExecTarget;
use splitbrain_reports::summary_table;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub(crate) struct TestArgs {
    /// The system under test (`exec`: any server following docs/http-contract.md, given
    /// by --target-spec).
    #[arg(long, default_value = "kv")]
    target: String,
    /// With `--target exec`: the TOML file that says how to start the server and what it
    /// serves (docs/http-contract.md).
    #[arg(long)]
    target_spec: Option<PathBuf>,
    /// What the clients do [default: `register` where the target runs it, else the
    /// first workload `splitbrain list` shows for the target].
    #[arg(long)]
    workload: Option<String>,
    /// Faults, comma separated: partition,kill,pause,clock,slow,loss or none
    /// [default: partition,kill,pause; with --target maelstrom: none, as Maelstrom's].
    #[arg(long)]
    nemesis: Option<String>,
    /// Mean seconds between faults.
    #[arg(long, default_value_t = 4.0)]
    nemesis_interval: f64,
    /// A fault plan file (JSON: `[{"at_ms":..,"for_ms":..,"f":"kill","nodes":["n2"]}]`)
    /// replacing the random schedule.
    #[arg(long, conflicts_with = "nemesis_search")]
    nemesis_plan: Option<PathBuf>,
    /// How faults are chosen: `random` (a schedule made from the seed before the run) or
    /// `guided` (each next fault chosen while the run goes on, toward cluster states and
    /// (state, fault) pairs not yet reached, from the nodes' status and the clients'
    /// outcomes; its schedule is stored as `nemesis-plan.json` in the run directory, which
    /// `--nemesis-plan` replays). docs/guided.md.
    #[arg(long, value_parser = ["random", "guided"], default_value = "random")]
    nemesis_search: String,
    /// Number of nodes (default 5; with --hosts, one per host).
    #[arg(long)]
    nodes: Option<usize>,
    /// Run node i on host i over SSH: a hosts file (TOML; README "Testing on real
    /// machines") or a comma-separated list of addresses.
    #[arg(long)]
    hosts: Option<String>,
    /// With --hosts: the login user (a hosts file's own settings win).
    #[arg(long)]
    ssh_user: Option<String>,
    /// With --hosts: the private key file.
    #[arg(long)]
    ssh_key: Option<PathBuf>,
    /// With --hosts: sshd's port.
    #[arg(long)]
    ssh_port: Option<u16>,
    /// Concurrent client workers.
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    /// Total target rate in ops/s (0 = as fast as possible).
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Seconds of the main phase.
    #[arg(long, default_value_t = 20.0)]
    time_limit: f64,
    /// Train workload (ddp): end once every live rank has committed N steps (or at
    /// --time-limit, whichever comes first).
    #[arg(long)]
    steps: Option<u64>,
    /// Client op timeout in milliseconds; a timed-out op is `info`.
    #[arg(long, default_value_t = 1000)]
    op_timeout_ms: u64,
    /// Seed of every random choice (printed and stored; default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Enable a target bug (repeatable); `splitbrain list` names them.
    #[arg(long = "bug")]
    bugs: Vec<String>,
    /// Shards (targets that shard).
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Read mode (targets that have several; for `txn` the isolation level:
    /// serializable or read-committed).
    #[arg(long)]
    read_mode: Option<String>,
    /// Redis: after each write, `WAIT N` (N replicas must acknowledge it within the op
    /// timeout, or the write is `info`).
    #[arg(long)]
    wait: Option<u32>,
    /// Targets with replicas (postgres with --nodes 2 or more, redis): where read-only ops
    /// go, the primary (default) or a replica.
    #[arg(long, value_parser = ["primary", "replica"])]
    read_from: Option<String>,
    /// PostgreSQL with standbys: `async` (default; a commit is acknowledged once the
    /// primary flushed it) or `sync` (once every standby applied it: remote_apply).
    #[arg(long, value_parser = ["async", "sync"])]
    replication: Option<String>,
    /// ddp: how the ranks exchange data, `tcp` (default) or `shm` (shared memory, the
    /// ranks being on one host). Network faults (partition, slow, loss) cannot reach
    /// shared memory, so they are refused with `shm`.
    #[arg(long)]
    transport: Option<String>,
    /// A server setting of a database target, NAME=VALUE (repeatable; mariadb: a server
    /// variable written to each node's option file, e.g. innodb_snapshot_isolation=ON;
    /// postgres: `-c NAME=VALUE`, e.g. track_commit_timestamp=on, except the client's own
    /// splitbrain.append=update-insert|upsert and splitbrain.statement_log=on|off).
    #[arg(long = "setting")]
    settings: Vec<String>,
    /// Hedged reads: the shortest delay before the second request, in ms (the delay is
    /// the running p95 of a typical replica's first requests, never below this).
    #[arg(long, default_value_t = 2)]
    hedge_delay_ms: u64,
    /// Convergence workloads: the longest the final reads wait, after the heal, for
    /// every replica to agree (seconds). Replicas that still disagree then are divergent.
    #[arg(long, default_value_t = splitbrain::run::spec::default_converge_bound_s())]
    converge_bound: f64,
    /// Keys in use at once.
    #[arg(long, default_value_t = 8)]
    active_keys: usize,
    /// Ops per key before a fresh key replaces it.
    #[arg(long, default_value_t = 100)]
    ops_per_key: usize,
    /// Run store directory.
    #[arg(long, default_value = "store")]
    store: PathBuf,
    /// Test name (default `<target>-<workload>`).
    #[arg(long)]
    name: Option<String>,
    /// Node binary (default: found beside splitbrain or on PATH).
    #[arg(long)]
    target_bin: Option<PathBuf>,
    /// `--target maelstrom`: the node program, any language, speaking Maelstrom's protocol.
    #[arg(long)]
    bin: Option<PathBuf>,
    /// `--target maelstrom`: an argument for the node program (repeatable).
    #[arg(long = "bin-arg", allow_hyphen_values = true)]
    bin_args: Vec<String>,
    /// `--target maelstrom`: mean one-way message latency in ms.
    #[arg(long, default_value_t = 0.0)]
    latency: f64,
    /// `--target maelstrom`: latency distribution (constant, uniform, exponential).
    #[arg(long, default_value = "constant")]
    latency_dist: String,
    /// `--target maelstrom`, broadcast: the topology sent to the nodes (grid, line,
    /// total, tree2, tree3, tree4).
    #[arg(long, default_value = "grid")]
    topology: String,
    /// End the main phase (heal, final check, report as usual) once the check that runs
    /// alongside the test has found an anomaly no later operation can repair
    /// (linearizable, Elle, bank workloads).
    #[arg(long)]
    stop_on_anomaly: bool,
    /// With --stop-on-anomaly: stop only once every named checker or anomaly type has
    /// been found (repeatable; e.g. `linearizable`, `G1c`, `wrong-total`).
    #[arg(
        long = "stop-when-found",
        value_name = "NAME",
        requires = "stop_on_anomaly"
    )]
    stop_when_found: Vec<String>,
    /// Check nothing while the run goes on, only the final check (no live anomalies, no
    /// `first_known_at_s` before the run's end); measures what online checking costs.
    #[arg(long, conflicts_with = "stop_on_anomaly")]
    no_online_check: bool,
    /// Do not show the progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Print results.json to stdout instead of the table.
    #[arg(long, value_parser = ["table", "json"], default_value = "table")]
    format: String,
    #[command(flatten)]
    check: CheckFlags,
}

/// A test resolved from its flags, ready to run (shared by `test` and `suite`).
pub(crate) struct PreparedTest {
    pub(crate) spec: TestSpec,
    target: PreparedTarget,
    workload: Box<dyn splitbrain::workload::Workload>,
    check: splitbrain::check_options::CheckOptions,
}

impl TestArgs {
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

pub(crate) fn cmd_test(a: TestArgs) -> anyhow::Result<u8> {
    let prepared = prepare_test(&a)?;
    let show = !a.no_progress && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let outcome = run_prepared(&prepared, show, &CancellationToken::new())?;
    let s = &outcome.summary;
    if a.format == "json" {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        println!("{}", summary_table(s));
        println!("report: {}", outcome.run_dir.report().display());
    }
    if s.incomplete.is_some() {
        return Ok(EXIT_COULD_NOT_RUN);
    }
    Ok(verdict_code(s.valid))
}

/// What a prepared test runs against.
enum PreparedTarget {
    /// A target whose nodes the harness reaches over sockets.
    Networked(std::sync::Arc<dyn splitbrain::systems::Target>),
    /// Maelstrom nodes on stdin/stdout, with this workload.
    Maelstrom(MaelstromWorkload),
}

/// Validates the flags and resolves the test; errors are usage errors.
pub(crate) fn prepare_test(a: &TestArgs) -> anyhow::Result<PreparedTest> {
    if a.target == "maelstrom" {
        return prepare_maelstrom(a);
    }
    let (mut target, target_spec) = resolve_target(a)?;
    if !a.settings.is_empty() {
        target = match target.with_settings(&a.settings) {
            Some(configured) => configured.map_err(usage)?,
            None => return Err(usage(format!(
                "--setting applies to database targets that take server settings (mariadb, postgres), not {}",
                a.target
            ))),
        };
    }
    let planned = match &a.nemesis_plan {
        Some(plan) => splitbrain_nemesis::NemesisSpec::from_plan_file(plan)
            .map(|p| p.faults)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    for f in a
        .nemesis()
        .split(',')
        .map(str::trim)
        .chain(planned.iter().map(String::as_str))
    {
        if let Some(why) = target.refuses_fault(f) {
            return Err(usage(why));
        }
    }
    // Refused here rather than failing every clock fault and then the heal (exit 4).
    if target.clock_source() == splitbrain::systems::ClockSource::Unsupported
        && a.nemesis().split(',').any(|f| f.trim() == "clock")
    {
        return Err(usage(format!(
            "--nemesis clock: the clock of target {} cannot be moved (see its docs)",
            a.target
        )));
    }
    // A target's defaults run: without --workload, `register` where the target runs it
    // (what every target that runs it has always defaulted to), else its first workload.
    let runs = target.workloads();
    let workload_name: String = match &a.workload {
        Some(w) => w.clone(),
        None if runs.contains(&"register") => "register".into(),
        None => match runs.first() {
            Some(first) => first.to_string(),
            None => {
                return Err(usage(format!(
                    "target {} names no workload; set --workload",
                    a.target
                )))
            }
        },
    };
    let Some(workload) = splitbrain::workload::registry::by_name(&workload_name) else {
        return Err(usage(format!(
            "unknown workload {workload_name:?}; `splitbrain list` shows them",
        )));
    };
    if !runs.contains(&workload_name.as_str()) {
        return Err(usage(format!(
            "target {} cannot run workload {workload_name:?} (it runs: {}); set --workload",
            a.target,
            runs.join(", ")
        )));
    }
    for bug in &a.bugs {
        if !target.bugs().iter().any(|b| b.name == bug) {
            return Err(usage(format!(
                "target {} has no bug {bug:?}; `splitbrain list` shows them",
                a.target
            )));
        }
    }
    if let Some(mode) = &a.read_mode {
        if !target.read_modes().contains(&mode.as_str()) {
            return Err(usage(format!(
                "target {} has no read mode {mode:?} (has: {})",
                a.target,
                target.read_modes().join(", ")
            )));
        }
    }
    if a.wait.is_some() && !target.accepted_flags().contains(&"wait") {
        return Err(usage(format!(
            "--wait applies to targets that replicate asynchronously (redis), not {}",
            a.target
        )));
    }
    for (flag, given, targets) in [
        ("read-from", a.read_from.is_some(), "postgres, redis"),
        ("replication", a.replication.is_some(), "postgres"),
    ] {
        if given && !target.accepted_flags().contains(&flag) {
            return Err(usage(format!(
                "--{flag} applies to targets with replicas ({targets}), not {}",
                a.target
            )));
        }
    }
    check_transport(a, target.as_ref())?;
    let check = a.check.options();
    workload
        .checkers(&check)
        .map_err(|e| usage(format!("{e:#}")))?;
    let mut spec = common_spec(a, &workload_name, None)?;
    spec.target_spec = target_spec;
    Ok(PreparedTest {
        spec,
        target: PreparedTarget::Networked(target),
        workload,
        check,
    })
}

/// A test from a stored spec (a run's test.json, as `shrink` replays it): the target,
/// workload and checks it names, resolved as `prepare_test` resolves them from flags
/// (the flags were checked when the stored run was made).
pub(crate) fn prepare_spec(
    spec: TestSpec,
    check: splitbrain::check_options::CheckOptions,
) -> anyhow::Result<PreparedTest> {
    if spec.maelstrom.is_some() {
        let Some(workload) = MaelstromWorkload::parse(&spec.workload) else {
            anyhow::bail!("maelstrom workload {:?} is not known", spec.workload);
        };
        return Ok(PreparedTest {
            spec,
            target: PreparedTarget::Maelstrom(workload),
            workload: Box::new(workload),
            check,
        });
    }
    let mut target: std::sync::Arc<dyn splitbrain::systems::Target> = if spec.target == "exec" {
        let Some(path) = &spec.target_spec else {
            anyhow::bail!("an exec target's test.json names no target_spec");
        };
        std::sync::Arc::new(ExecTarget::from_file(path)?)
    } else {
        splitbrain::systems::by_name(&spec.target)
            .ok_or_else(|| anyhow::anyhow!("unknown target {:?}", spec.target))?
    };
    if !spec.settings.is_empty() {
        if let Some(configured) = target.with_settings(&spec.settings) {
            target = configured.map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    let Some(workload) = splitbrain::workload::registry::by_name(&spec.workload) else {
        anyhow::bail!("unknown workload {:?}", spec.workload);
    };
    Ok(PreparedTest {
        spec,
        target: PreparedTarget::Networked(target),
        workload,
        check,
    })
}

/// `--transport`: only for targets that take it, `tcp` or `shm`, and with `shm` no
/// network fault (it would be recorded as injected while changing nothing).
fn check_transport(a: &TestArgs, target: &dyn splitbrain::systems::Target) -> anyhow::Result<()> {
    let Some(transport) = &a.transport else {
        return Ok(());
    };
    if !target.accepted_flags().contains(&"transport") {
        return Err(usage(format!(
            "--transport applies to targets whose nodes can exchange data through shared memory (ddp), not {}",
            a.target
        )));
    }
    if transport != "tcp" && transport != "shm" {
        return Err(usage(format!(
            "--transport {transport:?}: expected tcp or shm"
        )));
    }
    if transport == "shm" {
        let mut faults: Vec<String> = a
            .nemesis()
            .split(',')
            .map(|f| f.trim().to_string())
            .collect();
        if let Some(plan) = &a.nemesis_plan {
            let spec = splitbrain_nemesis::NemesisSpec::from_plan_file(plan)
                .map_err(|e| usage(e.to_string()))?;
            faults.extend(spec.faults);
        }
        if let Some(f) = faults
            .iter()
            .find(|f| splitbrain_nemesis::NETWORK_FAULTS.contains(&f.as_str()))
        {
            return Err(usage(format!(
                "--transport shm with --nemesis {f}: the ranks exchange data through shared memory, which a network fault cannot cut, slow or drop (only the clients' HTTP would be hit, and the run would claim a fault the ranks never saw); use --transport tcp for network faults, or kill, pause, clock, slow-client with shm"
            )));
        }
    }
    Ok(())
}

/// `--target maelstrom`: the node program and its workload.
fn prepare_maelstrom(a: &TestArgs) -> anyhow::Result<PreparedTest> {
    let Some(bin) = &a.bin else {
        return Err(usage(
            "--target maelstrom needs --bin PATH, the node program",
        ));
    };
    if !bin.is_file() {
        return Err(usage(format!("--bin {} is not a file", bin.display())));
    }
    let names: Vec<&str> = WORKLOADS.iter().map(|(n, _)| *n).collect();
    let Some(workload_name) = a.workload.as_deref() else {
        return Err(usage(format!(
            "--target maelstrom needs --workload NAME, the Maelstrom workload its nodes serve (one of: {})",
            names.join(", ")
        )));
    };
    let Some(workload) = MaelstromWorkload::parse(workload_name) else {
        return Err(usage(format!(
            "target maelstrom cannot run workload {workload_name:?} (it runs: {}); set --workload",
            names.join(", ")
        )));
    };
    if !a.bugs.is_empty()
        || a.read_mode.is_some()
        || a.wait.is_some()
        || a.read_from.is_some()
        || a.replication.is_some()
        || a.transport.is_some()
    {
        return Err(usage(
            "--bug, --read-mode, --wait, --read-from, --replication and --transport do not apply to maelstrom nodes (a node's bugs are its own)",
        ));
    }
    let Some(latency_dist) = LatencyDist::parse(&a.latency_dist) else {
        return Err(usage(format!(
            "--latency-dist {:?}: expected constant, uniform or exponential",
            a.latency_dist
        )));
    };
    if !(a.latency >= 0.0 && a.latency.is_finite()) {
        return Err(usage("--latency must be a non-negative number of ms"));
    }
    if !TOPOLOGIES.contains(&a.topology.as_str()) {
        return Err(usage(format!(
            "--topology {:?}: expected one of {}",
            a.topology,
            TOPOLOGIES.join(", ")
        )));
    }
    let check = a.check.options();
    splitbrain::workload::Workload::checkers(&workload, &check)
        .map_err(|e| usage(format!("{e:#}")))?;
    let m = MaelstromSpec {
        bin: absolute_bin(bin),
        bin_args: a.bin_args.clone(),
        latency_ms: a.latency,
        latency_dist,
        topology: a.topology.clone(),
    };
    let spec = common_spec(a, workload_name, Some(m))?;
    Ok(PreparedTest {
        spec,
        target: PreparedTarget::Maelstrom(workload),
        workload: Box::new(workload),
        check,
    })
}

/// The parts of a test spec every target shares.
fn common_spec(
    a: &TestArgs,
    workload: &str,
    maelstrom: Option<MaelstromSpec>,
) -> anyhow::Result<TestSpec> {
    let hosts = remote_hosts(a, maelstrom.is_some())?;
    if a.stop_on_anomaly && (maelstrom.is_some() || hosts.is_some()) {
        return Err(usage(
            "--stop-on-anomaly applies to local runs of networked targets (not --target maelstrom or --hosts)",
        ));
    }
    let nodes = match (&hosts, a.nodes) {
        (Some(h), Some(n)) if h.len() != n => {
            return Err(usage(format!(
                "--nodes {n} but --hosts names {} hosts (node i runs on host i)",
                h.len()
            )))
        }
        (Some(h), _) => h.len(),
        (None, n) => n.unwrap_or(5),
    };
    if nodes == 0 || a.concurrency == 0 || a.time_limit <= 0.0 || a.converge_bound <= 0.0 {
        return Err(usage(
            "--nodes, --concurrency, --time-limit and --converge-bound must be positive",
        ));
    }
    // With one node there is no replica to read from or to wait for.
    if nodes < 2
        && (a.read_from.as_deref() == Some("replica") || a.replication.as_deref() == Some("sync"))
    {
        return Err(usage(format!(
            "--read-from replica and --replication sync need a replica: --nodes 2 or more (got {nodes})"
        )));
    }
    let nemesis: Vec<String> = a
        .nemesis()
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty() && *f != "none")
        .map(str::to_string)
        .collect();
    splitbrain_nemesis::NemesisSpec::parse(a.nemesis(), Duration::from_secs(1), 0)
        .map_err(|e| usage(e.to_string()))?;
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let spec = TestSpec {
        name: a
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-{workload}", a.target)),
        target: a.target.clone(),
        target_spec: None,
        workload: workload.to_string(),
        nemesis,
        nemesis_interval_s: a.nemesis_interval,
        nemesis_plan: a.nemesis_plan.clone(),
        nemesis_search: splitbrain_nemesis::Search::parse(&a.nemesis_search).unwrap_or_default(),
        nemesis_schedule: serde_json::Value::Null,
        nodes,
        concurrency: a.concurrency,
        rate: a.rate,
        time_limit_s: a.time_limit,
        steps: a.steps,
        op_timeout_ms: a.op_timeout_ms,
        seed,
        bugs: a.bugs.clone(),
        shards: a.shards,
        read_mode: a.read_mode.clone(),
        wait: a.wait,
        read_from: a.read_from.clone(),
        replication: a.replication.clone(),
        transport: a.transport.clone(),
        settings: a.settings.clone(),
        consistency_model: a.check.consistency_model.clone(),
        init: a.check.init.clone(),
        hedge_delay_ms: a.hedge_delay_ms,
        active_keys: a.active_keys,
        ops_per_key: a.ops_per_key,
        quiesce_s: 2.0,
        converge_bound_s: a.converge_bound,
        store: a.store.clone(),
        target_bin: a.target_bin.clone(),
        hosts,
        version: env!("CARGO_PKG_VERSION").to_string(),
        stop_on_anomaly: a.stop_on_anomaly.then(|| a.stop_when_found.clone()),
        no_online_check: a.no_online_check,
        maelstrom,
    };
    check_plan_nodes(&spec)?;
    Ok(spec)
}

/// A `--nemesis-plan` file naming a node the run does not have is a usage error: a plan
/// written for `n1`..`nN` names `nN`, which a Maelstrom run (`n0`..`n(N-1)`) lacks. (A
/// file that does not parse is reported when the run opens it.)
fn check_plan_nodes(spec: &TestSpec) -> anyhow::Result<()> {
    let Some(path) = &spec.nemesis_plan else {
        return Ok(());
    };
    let Ok(plan) = splitbrain_nemesis::NemesisSpec::from_plan_file(path) else {
        return Ok(());
    };
    splitbrain_nemesis::Nemesis::new(plan)
        .with_node_names(spec.node_names())
        .check_plan(spec.nodes)
        .map_err(|m| usage(format!("--nemesis-plan {}: {m}", path.display())))
}

/// `--hosts` with the `--ssh-*` options; a bad hosts file is a usage error.
fn remote_hosts(
    a: &TestArgs,
    maelstrom: bool,
) -> anyhow::Result<Option<Vec<splitbrain::remote::Host>>> {
    let Some(arg) = &a.hosts else {
        if a.ssh_user.is_some() || a.ssh_key.is_some() || a.ssh_port.is_some() {
            return Err(usage(
                "--ssh-user, --ssh-key and --ssh-port go with --hosts",
            ));
        }
        return Ok(None);
    };
    if maelstrom {
        return Err(usage(
            "--hosts does not apply to --target maelstrom (its network is simulated here)",
        ));
    }
    let ssh = splitbrain::remote::SshDefaults {
        user: a.ssh_user.clone(),
        identity: a.ssh_key.clone(),
        port: a.ssh_port,
    };
    splitbrain::remote::parse_hosts_arg(arg, &ssh)
        .map(Some)
        .map_err(|e| usage(e.to_string()))
}

/// The target `--target` names, and for `exec` the absolute path of its spec file (kept
/// in test.json, so the run repeats from any directory). A bad spec is a usage error.
fn resolve_target(
    a: &TestArgs,
) -> anyhow::Result<(
    std::sync::Arc<dyn splitbrain::systems::Target>,
    Option<PathBuf>,
)> {
    if a.target == "exec" {
        let Some(path) = &a.target_spec else {
            return Err(usage(
                "--target exec needs --target-spec FILE.toml (see docs/http-contract.md)",
            ));
        };
        let t = ExecTarget::from_file(path).map_err(|e| usage(e.to_string()))?;
        let faults = a.nemesis().split(',').map(str::trim);
        if !t.serves_clock() && faults.clone().any(|f| f == "clock") {
            return Err(usage(format!(
                "--nemesis clock needs a way to move the nodes' clocks, which the target spec {} does not declare (clock = true for POST /admin/clock, or clock = \"faketime\")",
                path.display()
            )));
        }
        let stored = t.path().to_path_buf();
        return Ok((std::sync::Arc::new(t), Some(stored)));
    }
    if a.target_spec.is_some() {
        return Err(usage("--target-spec goes with --target exec"));
    }
    match splitbrain::systems::by_name(&a.target) {
        Some(t) => Ok((t, None)),
        None => Err(usage(format!(
            "unknown target {:?}; `splitbrain list` shows them",
            a.target
        ))),
    }
}

/// Runs a prepared test; Ctrl-C (or `cancel`) stops its clients, heals and tears down.
pub(crate) fn run_prepared(
    p: &PreparedTest,
    show: bool,
    cancel: &CancellationToken,
) -> anyhow::Result<splitbrain::run::controller::RunOutcome> {
    let rt = runtime()?;
    let outcome = rt.block_on(async {
        let c = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\nsplitbrain: interrupted; stopping clients, healing, tearing down...");
                c.cancel();
            }
        });
        match &p.target {
            PreparedTarget::Networked(target) => {
                run_test(
                    &p.spec,
                    target.clone(),
                    p.workload.as_ref(),
                    &p.check,
                    cancel.clone(),
                    show,
                )
                .await
            }
            PreparedTarget::Maelstrom(w) => {
                run_maelstrom_test(&p.spec, *w, &p.check, cancel.clone(), show).await
            }
        }
    })?;
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(outcome)
}
