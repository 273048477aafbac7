//! Targets: the systems under test the harness knows how to start and talk to.
//!
//! A [`Target`] says how to lay out and start its node processes, how to tell when they
//! are ready, how to ask who leads, how to set a node's clock, and how to build a
//! [`Client`] that turns workload invocations into requests.

pub mod bayou;
pub mod ddp;
pub mod etcd;
pub mod exec;
pub mod kv;
pub mod mariadb;
pub mod postgres;
pub mod redis;
pub mod sql;
pub mod txn;

use serde_json::Value;
use splitbrain_checkers::OpType;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

/// A boxed, sendable future (targets are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One operation a client is asked to perform.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The operation (`read`, `write`, `cas`, `append`, ...).
    pub f: String,
    /// The key, for keyed workloads.
    pub key: Option<Value>,
    /// The argument.
    pub value: Value,
}

/// How an operation ended, as the client observed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// `Ok`, `Fail` or `Info` (never `Invoke`).
    pub op_type: OpType,
    /// The result for `ok`; the argument otherwise.
    pub value: Value,
    /// The node that answered, if any.
    pub node: Option<String>,
    /// Why it failed or is unknown.
    pub error: Option<Value>,
}

impl Completion {
    /// An `info` completion: the outcome is unknown.
    pub fn info(value: Value, error: impl Into<String>, node: Option<String>) -> Completion {
        Completion {
            op_type: OpType::Info,
            value,
            node,
            error: Some(Value::String(error.into())),
        }
    }
}

/// A workload client for one logical process. Each process owns one client.
pub trait Client: Send {
    /// Performs one operation. Must return within the op timeout given at construction;
    /// a timeout is `info`, never `fail`.
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion>;
}

/// Target-specific options from the command line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetOptions {
    /// Number of shards (targets that shard).
    pub shards: u32,
    /// Read mode (targets that have several; for `txn`, the isolation level).
    pub read_mode: Option<String>,
    /// Bugs to enable.
    pub bugs: Vec<String>,
    /// Per-op timeout of clients.
    pub op_timeout: Duration,
    /// Hedged reads: delay before the second request.
    pub hedge_delay: Duration,
    /// The `--workload` being run (a target whose ops mean different things per workload,
    /// as Bayou's `add` on a set or a counter, needs it).
    pub workload: String,
    /// `--wait N` (Redis): after each write, `WAIT N` replicas; fewer acknowledging within
    /// the op timeout makes the write `info`.
    pub wait: Option<u32>,
    /// `--read-from primary|replica` (targets with replicas): where read-only ops go.
    /// Absent means the target's default (the primary).
    pub read_from: Option<String>,
    /// `--replication async|sync` (PostgreSQL with standbys): whether a commit waits until
    /// every standby applied it. Absent means asynchronous.
    pub replication: Option<String>,
    /// `--transport` (ddp): `tcp` or `shm`; `None` is the target's default (TCP).
    pub transport: Option<String>,
}

/// A bug a target can be started with, for `splitbrain list` and validation. Borrowed
/// from the target: the bundled ones are constants, an `exec` target's come from its spec
/// file.
#[derive(Debug, Clone, Copy)]
pub struct BugInfo<'a> {
    /// `--bug` name.
    pub name: &'a str,
    /// What it breaks and which fault exposes it.
    pub description: &'a str,
}

/// Where a target's nodes live on the network, which decides how the harness lays them
/// out and which network backend its faults use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeNetwork {
    /// Loopback ports the harness picks; peers dial each other through the proxy mesh
    /// (every bundled target: peer addresses can be set per node).
    Mesh,
    /// Each node in a network namespace of its own (root needed), at the namespace's
    /// address on these fixed ports, reached by the harness directly over a host link.
    /// For systems whose members dial each other at one advertised address (etcd, Redis):
    /// partitions are packet-filter rules inside the namespaces.
    Namespaces {
        /// The port clients use on every node.
        client_port: u16,
        /// The port peers use on every node.
        peer_port: u16,
    },
}

/// How the clock nemesis moves a node's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSource {
    /// Through [`Target::set_clock_offset`] (the bundled targets' `/admin/clock`).
    Endpoint,
    /// libfaketime preloaded into the node process, its offset file rewritten while it
    /// runs (unmodified C programs; not Go programs, which read the vDSO directly).
    Faketime,
    /// The target's clock cannot be moved; the clock nemesis reports that it is
    /// unsupported.
    Unsupported,
}

/// A second process a target runs in each node's place beside the node process (Redis:
/// a `redis-sentinel` next to every `redis-server`). The cluster starts it with the node,
/// in the node's network namespace, and stops it at teardown; the nemesis's kills and
/// pauses never touch it (they are faults of the database process, as in Jepsen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    /// The program's file name, looked up on PATH (see [`Target::required_programs`]).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its log file (stdout and stderr).
    pub log_file: std::path::PathBuf,
}

/// A program a target needs from the system, and the Debian package that installs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequiredProgram<'a> {
    /// The program's file name, looked up on PATH.
    pub program: &'a str,
    /// The Debian package that installs it.
    pub package: &'a str,
}

/// What a target is, as `splitbrain list` shows it and flag validation reads it: its
/// names and lists, stated once per target ([`Target::profile`]); the getters of
/// [`Target`] (`name`, `bugs`, `read_modes` ...) read it. Borrowed from the target, since
/// an exec target's come from its spec file.
#[derive(Debug, Clone)]
pub struct Profile<'a> {
    /// The `--target` name.
    pub name: &'a str,
    /// One-line description.
    pub description: &'a str,
    /// The node binary's file name (found beside the `splitbrain` binary or on PATH), or
    /// its path.
    pub binary_name: &'a str,
    /// The bugs it knows.
    pub bugs: Vec<BugInfo<'a>>,
    /// Read modes it knows (first is the default).
    pub read_modes: Vec<&'a str>,
    /// Workloads its client can perform (`--workload` names).
    pub workloads: Vec<&'a str>,
    /// Target-specific `splitbrain test` flags it accepts (`"wait"` for `--wait`,
    /// `"read-from"`, `"replication"`); any other such flag is a usage error.
    pub accepted_flags: Vec<&'a str>,
}

impl<'a> Profile<'a> {
    /// A target with these names and, until the builders below say otherwise, no bugs,
    /// read modes, workloads or flags of its own.
    pub fn new(name: &'a str, description: &'a str, binary_name: &'a str) -> Profile<'a> {
        Profile {
            name,
            description,
            binary_name,
            bugs: Vec::new(),
            read_modes: Vec::new(),
            workloads: Vec::new(),
            accepted_flags: Vec::new(),
        }
    }
    /// With these bugs.
    pub fn bugs(mut self, bugs: &[BugInfo<'a>]) -> Self {
        self.bugs = bugs.to_vec();
        self
    }
    /// With these read modes (the first is the default).
    pub fn read_modes(mut self, modes: &[&'a str]) -> Self {
        self.read_modes = modes.to_vec();
        self
    }
    /// With these workloads.
    pub fn workloads(mut self, workloads: &[&'a str]) -> Self {
        self.workloads = workloads.to_vec();
        self
    }
    /// Accepting these target-specific flags.
    pub fn accepted_flags(mut self, flags: &[&'a str]) -> Self {
        self.accepted_flags = flags.to_vec();
        self
    }
}

/// A system under test.
///
/// Names and lists are borrowed from the target rather than `'static`: an `exec` target
/// reads them from its spec file at run time. (An impl may still return `&'static str`.)
pub trait Target: Send + Sync {
    /// Its names and lists ([`Profile`]), which the getters below read.
    fn profile(&self) -> Profile<'_>;
    /// The `--target` name.
    fn name(&self) -> &str {
        self.profile().name
    }
    /// One-line description.
    fn description(&self) -> &str {
        self.profile().description
    }
    /// The node binary's file name (found beside the `splitbrain` binary or on PATH), or
    /// its path.
    fn binary_name(&self) -> &str {
        self.profile().binary_name
    }
    /// What to tell a user whose machine lacks the node binary (a package to install),
    /// added to the error; none by default (the bundled binaries are built).
    fn install_hint(&self) -> Option<String> {
        None
    }
    /// The bugs it knows.
    fn bugs(&self) -> Vec<BugInfo<'_>> {
        self.profile().bugs
    }
    /// Where its nodes live on the network; the proxy mesh unless it says otherwise.
    fn network(&self) -> NodeNetwork {
        NodeNetwork::Mesh
    }
    /// How its clocks are moved; its `/admin/clock` endpoint unless it says otherwise.
    fn clock_source(&self) -> ClockSource {
        ClockSource::Endpoint
    }
    /// Read modes it knows (first is the default).
    fn read_modes(&self) -> Vec<&str> {
        self.profile().read_modes
    }
    /// Programs of the system (not built here) that must be on PATH; a run of a target
    /// missing one stops before anything starts, naming the program and its package.
    fn required_programs(&self) -> Vec<RequiredProgram<'_>> {
        Vec::new()
    }
    /// Target-specific `splitbrain test` flags it accepts (`"wait"` for `--wait`,
    /// `"read-from"`, `"replication"`); any other such flag is a usage error.
    fn accepted_flags(&self) -> Vec<&str> {
        self.profile().accepted_flags
    }
    /// This target with the server settings of `--setting NAME=VALUE` (a database nobody
    /// here wrote: server variables for its configuration), or why they do not fit; None
    /// for a target that takes no settings.
    fn with_settings(
        &self,
        _settings: &[String],
    ) -> Option<Result<std::sync::Arc<dyn Target>, String>> {
        None
    }
    /// True when the system's nodes reach each other at their client port (PostgreSQL's
    /// standbys stream from the primary's one port): the proxy mesh's peer links then
    /// forward to the client ports, and [`Target::node_args`]'s `peer_addrs` lead there.
    fn peers_dial_the_client_port(&self) -> bool {
        false
    }
    /// True when what the nodes send each other over the proxy mesh on loopback is a
    /// binary stream, not JSON lines (PostgreSQL's replication protocol): `loss` on those
    /// links then drops no byte and holds the stream up by retransmission timeouts
    /// instead (`splitbrain_nemesis::proxy::LossMode::Retransmit`), since dropping
    /// "lines" of it would cut its frames in two.
    fn peer_streams_are_binary(&self) -> bool {
        false
    }
    /// Why the test's clients cannot be pointed at a proxy in front of each node's client
    /// port (for client-link faults such as `slow-client`), if they cannot.
    fn client_links_unproxyable(&self) -> Option<String> {
        None
    }
    /// For a target on [`NodeNetwork::Namespaces`]: the ports its members dial each other
    /// at (etcd: the peer port; Redis: the server's and the sentinel's). In a run with
    /// faults every such connection is routed through the proxy mesh
    /// (`splitbrain_nemesis::netns_mesh`), so partitions (one-way too), slow links and
    /// loss act on them without tc netem. Empty: faults are nftables rules only.
    fn mesh_ports(&self) -> Vec<u16> {
        Vec::new()
    }
    /// Why fault `fault` cannot reach this target's nodes as they are laid out here (so
    /// a run would record a fault that changed nothing), or None.
    fn refuses_fault(&self, _fault: &str) -> Option<String> {
        None
    }
    /// Files written once, before node `i` first starts (configuration the system reads
    /// and may rewrite itself, so a restart must not write them again).
    fn node_files(
        &self,
        _i: usize,
        _layouts: &[crate::run::node_layout::NodeLayout],
        _opts: &TargetOptions,
    ) -> Vec<(std::path::PathBuf, String)> {
        Vec::new()
    }
    /// A second process for node `i`'s place (see [`Sidecar`]); none by default.
    fn sidecar(
        &self,
        _i: usize,
        _layouts: &[crate::run::node_layout::NodeLayout],
        _opts: &TargetOptions,
    ) -> Option<Sidecar> {
        None
    }
    /// Command-line arguments for node `i`. `peer_addrs[j]` is where node `i` must dial
    /// node `j` (a proxy of the mesh); `peer_addrs[i]` is node i's own listen address.
    fn node_args(
        &self,
        i: usize,
        client_addr: SocketAddr,
        peer_listen: SocketAddr,
        peer_addrs: &[SocketAddr],
        data_dir: &std::path::Path,
        opts: &TargetOptions,
    ) -> Vec<String>;
    /// Workloads its client can perform (`--workload` names).
    fn workloads(&self) -> Vec<&str> {
        self.profile().workloads
    }
    /// True once the node at `addr` answers its health check. The default asks
    /// `GET /health`, which every bundled target serves.
    fn is_ready<'a>(&'a self, http: &'a reqwest::Client, addr: SocketAddr) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            matches!(http.get(format!("http://{addr}/health")).send().await,
                Ok(r) if r.status().is_success())
        })
    }
    /// Waits until the cluster can serve (e.g. every shard has a leader), up to `bound`.
    /// By default: until every node is ready ([`Target::is_ready`]).
    fn wait_formed<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        bound: Duration,
    ) -> BoxFuture<'a, Result<(), ()>> {
        every_node_ready(self, http, addrs, bound)
    }
    /// Resolves once the run has reached `steps` by the target's own measure (the ddp
    /// target: every live rank has committed that many steps), ending the main phase
    /// early. Never resolves by default.
    fn until_steps<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        _addrs: &'a [SocketAddr],
        _steps: Option<u64>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(std::future::pending())
    }
    /// Nodes that currently lead something (indices into `addrs`). None by default: no
    /// node leads (every node coordinates its own clients' requests).
    fn leaders<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        _addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        Box::pin(async { Vec::new() })
    }
    /// Each node's status for the nemesis's sampler (who leads, term, progress, undecided
    /// work; `None` for a node that did not answer), or `None` when the target serves no
    /// status (the default): coverage and the guided search then see only the active
    /// faults and the clients' outcomes.
    fn node_status<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        _addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Option<Vec<Option<splitbrain_nemesis::NodeStatus>>>> {
        Box::pin(async { None })
    }
    /// Sets a node's clock offset. The default posts to `/admin/clock`, the endpoint the
    /// bundled targets share (`targets/runtime`).
    fn set_clock_offset<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addr: SocketAddr,
        offset_ms: i64,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(post_clock_offset(http, addr, offset_ms))
    }
    /// The OS account to run its node processes as, when not the harness's own (a server
    /// that refuses root, started by a harness that is root). None by default.
    fn run_as(&self) -> Result<Option<crate::run::node_layout::RunAs>, String> {
        Ok(None)
    }
    /// One-time preparation of node `i` (`layouts[i]`) before its first start
    /// (PostgreSQL: initdb, or a base backup of the primary for a standby); the nodes
    /// before it are already spawned, maybe not ready yet. Nothing by default.
    fn prepare_node<'a>(
        &'a self,
        _i: usize,
        _layouts: &'a [crate::run::node_layout::NodeLayout],
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
    /// Decides how node `i` comes back after a kill, just before it is started again:
    /// the nodes to start now, in this order (`[i]` by default). `running[j]` says
    /// whether node `j`'s process runs. A target may rewrite its node files here: a
    /// Galera node joins the nodes that run; with none running, the most advanced node
    /// founds the cluster again and is started first, even if its own fault has not
    /// ended, since no other node can serve until it does.
    fn before_restart<'a>(
        &'a self,
        i: usize,
        _layouts: &'a [crate::run::node_layout::NodeLayout],
        _running: &'a [bool],
    ) -> BoxFuture<'a, Result<Vec<usize>, String>> {
        Box::pin(async move { Ok(vec![i]) })
    }
    /// True when a node is a tree of processes that kill and pause must reach whole (a
    /// postmaster and the backends it forks); false by default (one process per node).
    fn signal_process_tree(&self) -> bool {
        false
    }
    /// Removes what [`Target::prepare_node`] made outside the run directory, once the
    /// node's processes are gone (teardown; may run twice). Nothing by default.
    fn cleanup_node(&self, _i: usize, _layout: &crate::run::node_layout::NodeLayout) {}
    /// A client for one process; `home` is the node it prefers.
    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client>;
    /// A client that only ever talks to node `replica`, for per-replica final reads
    /// (convergence workloads). By default the ordinary client with that home node.
    fn replica_client(
        &self,
        addrs: &[SocketAddr],
        replica: usize,
        opts: &TargetOptions,
    ) -> Box<dyn Client> {
        self.client(addrs, replica, opts)
    }
}

/// Every target the harness knows.
pub fn all() -> Vec<std::sync::Arc<dyn Target>> {
    vec![
        std::sync::Arc::new(kv::KvTarget),
        std::sync::Arc::new(txn::TxnTarget),
        std::sync::Arc::new(ddp::DdpTarget),
        std::sync::Arc::new(bayou::BayouTarget),
        std::sync::Arc::new(etcd::EtcdTarget),
        std::sync::Arc::new(redis::RedisTarget),
        std::sync::Arc::new(postgres::PostgresTarget::default()),
        std::sync::Arc::new(mariadb::MariaDbTarget::default()),
    ]
}

/// Looks a target up by name.
pub fn by_name(name: &str) -> Option<std::sync::Arc<dyn Target>> {
    all().into_iter().find(|t| t.name() == name)
}

/// `POST /admin/clock {"offset_ms": N}`: how every bundled target (and an `exec` target
/// that declares `clock = true`) lets the clock nemesis move its clock.
pub(crate) async fn post_clock_offset(
    http: &reqwest::Client,
    addr: SocketAddr,
    offset_ms: i64,
) -> Result<(), String> {
    let r = http
        .post(format!("http://{addr}/admin/clock"))
        .json(&serde_json::json!({ "offset_ms": offset_ms }))
        .send()
        .await
        .map_err(|e| format!("set clock on {addr}: {e}"))?;
    if r.status().is_success() {
        Ok(())
    } else {
        Err(format!("set clock on {addr}: HTTP {}", r.status()))
    }
}

/// The command-line arguments every bundled target takes (`targets/runtime` conventions):
/// `--id` (1-based), both listen addresses, the data directory, one `--peer J=ADDR` per
/// other node (where node `i` dials it, maybe through a proxy) and one `--bug` per bug.
pub fn bundled_node_args(
    i: usize,
    client_addr: SocketAddr,
    peer_listen: SocketAddr,
    peer_addrs: &[SocketAddr],
    data_dir: &std::path::Path,
    bugs: &[String],
) -> Vec<String> {
    let mut args = vec![
        "--id".to_string(),
        (i + 1).to_string(),
        "--client-listen".into(),
        client_addr.to_string(),
        "--peer-listen".into(),
        peer_listen.to_string(),
        "--data-dir".into(),
        data_dir.display().to_string(),
    ];
    for (j, addr) in peer_addrs.iter().enumerate() {
        if j != i {
            args.push("--peer".into());
            args.push(format!("{}={}", j + 1, addr));
        }
    }
    for bug in bugs {
        args.push("--bug".into());
        args.push(bug.clone());
    }
    args
}

/// What became of one JSON request to a node.
pub(crate) enum Posted {
    /// The node answered with this JSON body (any HTTP status).
    Answer(Value),
    /// The connection was refused: the node never saw the request.
    Unreachable,
    /// The request may or may not have been acted on (timeout, broken connection,
    /// unreadable answer): the reason.
    Unknown(String),
}

/// Posts `body` to `url` within `remaining`; see [`Posted`] for how it can end.
pub(crate) async fn post_json(
    http: &reqwest::Client,
    url: String,
    body: &Value,
    remaining: Duration,
) -> Posted {
    if remaining.is_zero() {
        return Posted::Unknown("timeout".into());
    }
    let resp = match http.post(url).timeout(remaining).json(body).send().await {
        Ok(r) => r,
        Err(e) if e.is_connect() => return Posted::Unreachable,
        Err(e) if e.is_timeout() => return Posted::Unknown("timeout".into()),
        Err(e) => return Posted::Unknown(e.to_string()),
    };
    let status = resp.status();
    match resp.json::<Value>().await {
        Ok(v) => Posted::Answer(v),
        Err(e) => Posted::Unknown(format!("bad response (HTTP {status}): {e}")),
    }
}

/// `--request-timeout-ms` for a node: the client's op timeout less `margin_ms` (at least
/// 100 ms), so the node gives a definite answer before the client gives up.
pub fn request_timeout_args(op_timeout: Duration, margin_ms: u128) -> [String; 2] {
    [
        "--request-timeout-ms".to_string(),
        request_timeout_ms(op_timeout, margin_ms).to_string(),
    ]
}

/// The client's op timeout less `margin_ms`, at least 100 ms: how long a node may take to
/// answer so that its answer still arrives before the client gives up.
pub fn request_timeout_ms(op_timeout: Duration, margin_ms: u128) -> u128 {
    op_timeout.as_millis().saturating_sub(margin_ms).max(100)
}

/// [`Target::wait_formed`] for targets that need nothing beyond every node answering its
/// health check (no leader to elect).
pub(crate) fn every_node_ready<'a, T: Target + ?Sized>(
    target: &'a T,
    http: &'a reqwest::Client,
    addrs: &'a [SocketAddr],
    bound: Duration,
) -> BoxFuture<'a, Result<(), ()>> {
    Box::pin(poll_until(bound, move || async move {
        for addr in addrs {
            if !target.is_ready(http, *addr).await {
                return false;
            }
        }
        true
    }))
}

/// `GET /status` of every node at once, each within `bound`, read by `read` (`None`
/// for a node that did not answer or whose answer `read` cannot use).
pub(crate) async fn statuses(
    http: &reqwest::Client,
    addrs: &[SocketAddr],
    bound: Duration,
    read: fn(&Value) -> Option<splitbrain_nemesis::NodeStatus>,
) -> Vec<Option<splitbrain_nemesis::NodeStatus>> {
    let mut set = tokio::task::JoinSet::new();
    for (i, addr) in addrs.iter().enumerate() {
        let (http, addr) = (http.clone(), *addr);
        set.spawn(async move {
            let r = http
                .get(format!("http://{addr}/status"))
                .timeout(bound)
                .send()
                .await
                .ok()?;
            let v = r.json::<Value>().await.ok()?;
            Some((i, read(&v)?))
        });
    }
    let mut out = vec![None; addrs.len()];
    while let Some(r) = set.join_next().await {
        if let Ok(Some((i, s))) = r {
            out[i] = Some(s);
        }
    }
    out
}

/// Polls `ready` every 100 ms until it holds (`Ok`) or `bound` has passed (`Err`).
pub(crate) async fn poll_until<F, Fut>(bound: Duration, mut ready: F) -> Result<(), ()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = std::time::Instant::now();
    while start.elapsed() < bound {
        if ready().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(())
}
