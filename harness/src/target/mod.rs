//! Targets: the systems under test the harness knows how to start and talk to.
//!
//! A [`Target`] says how to lay out and start its node processes, how to tell when they
//! are ready, how to ask who leads, how to set a node's clock, and how to build a
//! [`Client`] that turns workload invocations into requests.

pub mod kv;

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
    /// Read mode (targets that have several).
    pub read_mode: Option<String>,
    /// Bugs to enable.
    pub bugs: Vec<String>,
    /// Per-op timeout of clients.
    pub op_timeout: Duration,
    /// Hedged reads: delay before the second request.
    pub hedge_delay: Duration,
}

/// A bug a target can be started with, for `splitbrain list` and validation.
#[derive(Debug, Clone, Copy)]
pub struct BugInfo {
    /// `--bug` name.
    pub name: &'static str,
    /// What it breaks and which fault exposes it.
    pub description: &'static str,
}

/// A system under test.
pub trait Target: Send + Sync {
    /// The `--target` name.
    fn name(&self) -> &'static str;
    /// One-line description.
    fn description(&self) -> &'static str;
    /// The node binary's file name (found beside the `splitbrain` binary or on PATH).
    fn binary_name(&self) -> &'static str;
    /// The bugs it knows.
    fn bugs(&self) -> &'static [BugInfo];
    /// Read modes it knows (first is the default).
    fn read_modes(&self) -> &'static [&'static str];
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
    /// True once the node at `addr` answers its health check.
    fn is_ready<'a>(&'a self, http: &'a reqwest::Client, addr: SocketAddr) -> BoxFuture<'a, bool>;
    /// Waits until the cluster can serve (e.g. every shard has a leader), up to `bound`.
    fn wait_formed<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        bound: Duration,
    ) -> BoxFuture<'a, Result<(), ()>>;
    /// Nodes that currently lead something (indices into `addrs`).
    fn leaders<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>>;
    /// Sets a node's clock offset through its admin endpoint.
    fn set_clock_offset<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addr: SocketAddr,
        offset_ms: i64,
    ) -> BoxFuture<'a, Result<(), String>>;
    /// A client for one process; `home` is the node it prefers.
    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client>;
}

/// Every target the harness knows.
pub fn all() -> Vec<std::sync::Arc<dyn Target>> {
    vec![std::sync::Arc::new(kv::KvTarget)]
}

/// Looks a target up by name.
pub fn by_name(name: &str) -> Option<std::sync::Arc<dyn Target>> {
    all().into_iter().find(|t| t.name() == name)
}
