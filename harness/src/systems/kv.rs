//! The bundled KV store (`targets/kv`): how to start it and its HTTP/JSON client.
//!
//! Protocol: `POST /kv {"f","key","value"}` answers `{"type":"ok"|"fail"|"info", ...}`;
//! `GET /status` reports each shard's leader; `POST /admin/clock` sets the clock offset.
//! A `not-leader` failure is definite, so the client may retry it on the hinted leader
//! within the same logical op: only the last attempt can have taken effect.

use super::{
    bundled_node_args, poll_until, post_json, request_timeout_args, BoxFuture, BugInfo, Client,
    Completion, Invocation, Posted, Profile, Target, TargetOptions,
};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

mod hedge;
use hedge::{HedgeState, ReadPolicy};

/// The bundled sharded, replicated KV store.
pub struct KvTarget;

const BUGS: &[BugInfo<'static>] = &[
    BugInfo {
        name: "stale-read",
        description: "leader serves reads without confirming leadership; a partitioned old leader returns stale values (fault: partition-leader, partition)",
    },
    BugInfo {
        name: "ack-before-commit",
        description: "leader acknowledges writes before a quorum has them; a leader change loses them (fault: partition, kill)",
    },
    BugInfo {
        name: "no-fsync",
        description: "acknowledges before persisting; kill -9 loses acknowledged writes (fault: kill)",
    },
    BugInfo {
        name: "vote-without-log-check",
        description: "grants votes regardless of log freshness; a stale node can win and erase committed entries (fault: partition)",
    },
    BugInfo {
        name: "commit-old-term",
        description: "commits entries of an earlier term by counting replicas (Raft figure 8); they can later be overwritten (fault: figure-8 on 3 nodes, append workload)",
    },
    BugInfo {
        name: "lease-no-margin",
        description: "lease reads with no allowance for clock drift; a leader whose clock jumps back after a partition cut it off keeps serving reads beside its successor (fault: partition-leader,clock)",
    },
];

impl Target for KvTarget {
    fn profile(&self) -> Profile<'_> {
        Profile::new(
            "kv",
            "sharded KV store, Raft-replicated per shard, persistent; read modes log/read-index/lease/follower/replica-read/hedged/read-all",
            "splitbrain-kv",
        )
        .bugs(BUGS)
        .workloads(&["register", "append"])
        .read_modes(&[
            "read-index",
            "log",
            "lease",
            "follower",
            "replica-read",
            "hedged",
            "read-all",
        ])
    }

    fn node_args(
        &self,
        i: usize,
        client_addr: SocketAddr,
        peer_listen: SocketAddr,
        peer_addrs: &[SocketAddr],
        data_dir: &std::path::Path,
        opts: &TargetOptions,
    ) -> Vec<String> {
        let mut args = bundled_node_args(
            i,
            client_addr,
            peer_listen,
            peer_addrs,
            data_dir,
            &opts.bugs,
        );
        args.extend(["--shards".to_string(), opts.shards.to_string()]);
        if let Some(mode) = &opts.read_mode {
            args.push("--read-mode".into());
            args.push(mode.clone());
        }
        args.extend(request_timeout_args(opts.op_timeout, 100));
        args
    }

    fn wait_formed<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        bound: Duration,
    ) -> BoxFuture<'a, Result<(), ()>> {
        Box::pin(poll_until(bound, move || all_shards_led(http, addrs)))
    }

    fn leaders<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        Box::pin(status_leaders(http, addrs))
    }

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        kv_client(addrs, home, opts)
    }
}

/// A client of `POST /kv` (the bundled store's, and any `exec` target's that serves the
/// `register` or `append` workload): leader-hint following, the read policy of
/// `opts.read_mode`.
pub(crate) fn kv_client(
    addrs: &[SocketAddr],
    home: usize,
    opts: &TargetOptions,
) -> Box<dyn Client> {
    Box::new(KvClient {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(4)
            .build()
            .unwrap_or_default(),
        addrs: addrs.to_vec(),
        home: home % addrs.len().max(1),
        timeout: opts.op_timeout,
        policy: ReadPolicy::for_mode(opts.read_mode.as_deref(), opts.hedge_delay),
        leader: None,
        hedge: shared_view(addrs, opts.hedge_delay),
    })
}

/// The latency view of each cluster this process has clients of, by its node addresses.
type ViewsByCluster = Vec<(Vec<SocketAddr>, Weak<Mutex<HedgeState>>)>;
static VIEWS: Mutex<ViewsByCluster> = Mutex::new(Vec::new());

/// The latency view shared by every client of the cluster at `addrs` in this process, as
/// the threads of one application share its client library: one client's hedge that
/// found a replica slow keeps the others off it at once. Lives while its clients do.
fn shared_view(addrs: &[SocketAddr], floor: Duration) -> Arc<Mutex<HedgeState>> {
    let mut views = VIEWS.lock().unwrap_or_else(|e| e.into_inner());
    views.retain(|(_, w)| w.strong_count() > 0);
    if let Some(v) = views
        .iter()
        .find(|(a, _)| a.as_slice() == addrs)
        .and_then(|(_, w)| w.upgrade())
    {
        return v;
    }
    let v = Arc::new(Mutex::new(HedgeState::new(addrs.len(), floor)));
    views.push((addrs.to_vec(), Arc::downgrade(&v)));
    v
}

/// One request outstanding to a replica in the shared view, from its creation to its
/// drop: a request answered, failed or dropped (it lost to another) ends alike.
struct InFlight<'a> {
    view: &'a Mutex<HedgeState>,
    replica: usize,
}

impl<'a> InFlight<'a> {
    fn new(view_: &'a Mutex<HedgeState>, replica: usize) -> InFlight<'a> {
        view(view_).sent(replica);
        InFlight {
            view: view_,
            replica,
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        view(self.view).ended(self.replica);
    }
}

/// The view, even if a client panicked while holding it (its numbers are still usable).
fn view(h: &Mutex<HedgeState>) -> MutexGuard<'_, HedgeState> {
    h.lock().unwrap_or_else(|e| e.into_inner())
}

/// The nodes (indices into `addrs`) whose `GET /status` says they lead some shard
/// (`{"shards": [{"shard": S, "role": "leader"}, ...]}`); a node that does not answer
/// leads nothing.
pub(crate) async fn status_leaders(http: &reqwest::Client, addrs: &[SocketAddr]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        if let Some(status) = fetch_status(http, *addr).await {
            let leads = status["shards"]
                .as_array()
                .is_some_and(|s| s.iter().any(|sh| sh["role"] == "leader"));
            if leads {
                out.push(i);
            }
        }
    }
    out
}

async fn fetch_status(http: &reqwest::Client, addr: SocketAddr) -> Option<Value> {
    let r = http
        .get(format!("http://{addr}/status"))
        .send()
        .await
        .ok()?;
    r.json::<Value>().await.ok()
}

/// True when every node answers `GET /status` and some node reports a leader for every
/// shard.
pub(crate) async fn all_shards_led(http: &reqwest::Client, addrs: &[SocketAddr]) -> bool {
    let mut led = std::collections::BTreeSet::new();
    let mut shards = 0usize;
    for addr in addrs {
        let Some(status) = fetch_status(http, *addr).await else {
            return false;
        };
        if let Some(list) = status["shards"].as_array() {
            shards = shards.max(list.len());
            for s in list {
                if s["role"] == "leader" {
                    led.insert(s["shard"].as_u64().unwrap_or(0));
                }
            }
        }
    }
    shards > 0 && led.len() >= shards
}

/// Read requests sent over HTTP by every KV client of this process, and read ops
/// invoked: their ratio is what a read policy costs (`splitbrain bench tail`).
static READ_REQUESTS: AtomicU64 = AtomicU64::new(0);
static READ_OPS: AtomicU64 = AtomicU64::new(0);
static HEDGES: AtomicU64 = AtomicU64::new(0);
static SHADOWS: AtomicU64 = AtomicU64::new(0);

/// Process-wide read counters of the KV clients, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCounters {
    /// Read operations invoked.
    pub reads: u64,
    /// HTTP read requests sent (first requests, hedges, read-all fan-out, redirects).
    pub requests: u64,
    /// Second requests sent by hedged reads.
    pub hedges: u64,
    /// Shadow requests sent by hedged reads to replicas on probation.
    pub shadows: u64,
}

impl ReadCounters {
    /// The counters now.
    pub fn now() -> ReadCounters {
        ReadCounters {
            reads: READ_OPS.load(Ordering::Relaxed),
            requests: READ_REQUESTS.load(Ordering::Relaxed),
            hedges: HEDGES.load(Ordering::Relaxed),
            shadows: SHADOWS.load(Ordering::Relaxed),
        }
    }

    /// What was counted between `earlier` and `self`.
    pub fn since(self, earlier: ReadCounters) -> ReadCounters {
        ReadCounters {
            reads: self.reads.saturating_sub(earlier.reads),
            requests: self.requests.saturating_sub(earlier.requests),
            hedges: self.hedges.saturating_sub(earlier.hedges),
            shadows: self.shadows.saturating_sub(earlier.shadows),
        }
    }
}

struct KvClient {
    http: reqwest::Client,
    addrs: Vec<SocketAddr>,
    home: usize,
    timeout: Duration,
    policy: ReadPolicy,
    /// The node that last served a leader-only op: where the next one goes first.
    leader: Option<usize>,
    /// Shared with the cluster's other clients (see [`shared_view`]).
    hedge: Arc<Mutex<HedgeState>>,
}

/// Result of one HTTP attempt.
enum Attempt {
    Done(Completion),
    /// Definite failure at this node (not the leader, or unreachable): the op did not
    /// happen, so another node may be tried. Maybe a leader hint (0-based node index).
    Redirect {
        hint: Option<usize>,
        error: &'static str,
    },
}

/// Whether an op's completion is a success.
fn is_ok(c: &Completion) -> bool {
    c.op_type == OpType::Ok
}

impl KvClient {
    async fn attempt(&self, node: usize, op: &Invocation, deadline: Instant) -> Attempt {
        let addr = self.addrs[node];
        let name = Some(format!("n{}", node + 1));
        let body = json!({ "f": op.f, "key": op.key, "value": op.value });
        let remaining = deadline.saturating_duration_since(Instant::now());
        if op.f == "read" {
            READ_REQUESTS.fetch_add(1, Ordering::Relaxed);
        }
        let v = match post_json(&self.http, format!("http://{addr}/kv"), &body, remaining).await {
            Posted::Answer(v) => v,
            // Refused before anything was sent: certainly not applied.
            Posted::Unreachable => {
                return Attempt::Redirect {
                    hint: None,
                    error: "connection-refused",
                }
            }
            Posted::Unknown(why) => {
                return Attempt::Done(Completion::info(op.value.clone(), why, name))
            }
        };
        match v["type"].as_str() {
            Some("ok") => Attempt::Done(Completion {
                op_type: OpType::Ok,
                value: match op.f.as_str() {
                    "read" => v.get("value").cloned().unwrap_or(Value::Null),
                    _ => op.value.clone(),
                },
                node: name,
                error: None,
            }),
            Some("fail") if v["error"] == "not-leader" => {
                let hint = v["leader"]
                    .as_u64()
                    .and_then(|id| (id as usize).checked_sub(1))
                    .filter(|&j| j < self.addrs.len());
                Attempt::Redirect {
                    hint,
                    error: "not-leader",
                }
            }
            Some("fail") => Attempt::Done(Completion {
                op_type: OpType::Fail,
                value: op.value.clone(),
                node: name,
                error: v.get("error").cloned(),
            }),
            _ => Attempt::Done(Completion::info(
                op.value.clone(),
                v.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string(),
                name,
            )),
        }
    }

    /// Tries `start`, then follows leader hints (or walks the nodes), a bounded number
    /// of times; only definite failures are retried. Returns the completion and the node
    /// that gave it.
    async fn routed(
        &self,
        start: usize,
        op: &Invocation,
        deadline: Instant,
    ) -> (Completion, usize) {
        let mut node = start;
        let mut tried = 0usize;
        loop {
            match self.attempt(node, op, deadline).await {
                Attempt::Done(c) => return (c, node),
                Attempt::Redirect { hint, error } => {
                    tried += 1;
                    if tried > self.addrs.len() {
                        let c = Completion {
                            op_type: OpType::Fail,
                            value: op.value.clone(),
                            node: Some(format!("n{}", node + 1)),
                            error: Some(json!(error)),
                        };
                        return (c, node);
                    }
                    node = match hint {
                        Some(h) if h != node => h,
                        _ => (node + 1) % self.addrs.len(),
                    };
                    if hint.is_none() {
                        // No leader known yet: give an election a moment.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }
    }

    /// A leader-only op: first to the node that last served one, else home. An answer
    /// of unknown outcome (perhaps a partitioned leader) forgets the leader.
    async fn via_leader(&mut self, op: &Invocation, deadline: Instant) -> Completion {
        let start = self.leader.unwrap_or(self.home);
        let (c, node) = self.routed(start, op, deadline).await;
        self.leader = match c.op_type {
            OpType::Info => None,
            _ => Some(node),
        };
        c
    }

    /// Hedged read: the first request to a replica not on probation; if no answer came
    /// after the running p95 (or sooner, if another read puts that replica on probation
    /// meanwhile), a second request to the best other replica; the first
    /// `ok` wins and the other request is dropped (its connection closed). Maybe a
    /// shadow request to a replica on probation beside it.
    async fn hedged_read(&mut self, op: &Invocation, deadline: Instant) -> Completion {
        let (plan, delay, signal) = {
            let mut h = view(&self.hedge);
            let plan = h.choose(self.home, Instant::now());
            let signal = h.probation_signal(plan.first).unwrap_or_default();
            (plan, h.delay(), signal)
        };
        // Registered before the first request goes: a probation that begins while it
        // waits is not missed.
        let probation = signal.notified();
        tokio::pin!(probation);
        probation.as_mut().enable();
        if let Some(r) = plan.shadow {
            self.shadow(r, op, deadline);
        }
        let (first_node, second_node) = (plan.first, plan.second);
        let began = Instant::now();
        let (c, first_took) = {
            let first = async {
                let _in_flight = InFlight::new(&self.hedge, first_node);
                self.routed(first_node, op, deadline).await
            };
            tokio::pin!(first);
            let early = tokio::select! {
                r = &mut first => Some(r),
                _ = tokio::time::sleep(delay) => None,
                _ = &mut probation => None,
            };
            match early {
                Some((c, _)) => {
                    let took = began.elapsed();
                    (Err((c, took)), took)
                }
                None => {
                    // Slower than the p95 already (or put on probation by another read
                    // meanwhile): a strike at once, so that the other clients keep off
                    // this replica while this read still waits.
                    view(&self.hedge).first_slow(first_node);
                    let second_began = Instant::now();
                    // Counted when the second request is first polled, i.e. sent: `first`
                    // may win the select below before `second` is ever polled.
                    let second = async {
                        HEDGES.fetch_add(1, Ordering::Relaxed);
                        let _in_flight = InFlight::new(&self.hedge, second_node);
                        self.routed(second_node, op, deadline).await
                    };
                    tokio::pin!(second);
                    let (c, winner) = tokio::select! {
                        r = &mut first => (r.0, 1),
                        r = &mut second => (r.0, 2),
                    };
                    let first_took = began.elapsed();
                    // The hedge answered first, and well: the first request was outraced.
                    let outraced = winner == 2 && is_ok(&c);
                    let c = if is_ok(&c) {
                        c
                    } else if winner == 1 {
                        // The faster one did not succeed: a read has no effect, so wait
                        // for the other.
                        second.await.0
                    } else {
                        first.await.0
                    };
                    let second_took = second_began.elapsed();
                    (Ok((c, winner, outraced, second_took)), first_took)
                }
            }
        };
        let mut h = view(&self.hedge);
        h.record_read(first_node, first_took);
        match c {
            Err((c, took)) => {
                if is_ok(&c) {
                    h.answered(first_node, took);
                } else {
                    h.lost(first_node, took);
                }
                c
            }
            Ok((c, winner, outraced, second_took)) => {
                if winner == 1 && is_ok(&c) {
                    h.answered(first_node, first_took);
                } else {
                    h.lost(first_node, first_took);
                    h.answered(second_node, second_took);
                }
                if outraced {
                    h.outraced(first_node);
                }
                c
            }
        }
    }

    /// A shadow request: the same read to `replica` (on probation), in a task of its
    /// own so that the read does not wait for it; its answer time (or its failure)
    /// only updates the replica's score. A read changes nothing, so it is harmless.
    fn shadow(&self, replica: usize, op: &Invocation, deadline: Instant) {
        READ_REQUESTS.fetch_add(1, Ordering::Relaxed);
        SHADOWS.fetch_add(1, Ordering::Relaxed);
        let (http, hedge) = (self.http.clone(), self.hedge.clone());
        let url = format!("http://{}/kv", self.addrs[replica]);
        let body = json!({ "f": op.f, "key": op.key, "value": op.value });
        tokio::spawn(async move {
            let _in_flight = InFlight::new(&hedge, replica);
            let began = Instant::now();
            let remaining = deadline.saturating_duration_since(began);
            let ok = matches!(
                post_json(&http, url, &body, remaining).await,
                Posted::Answer(v) if v["type"] == "ok"
            );
            view(&hedge).shadow_done(replica, began.elapsed(), ok);
        });
    }

    /// Read-all: every replica at once; the first `ok` wins, the rest are dropped.
    async fn read_all(&self, op: &Invocation, deadline: Instant) -> Completion {
        let mut pending: Vec<BoxFuture<'_, (Completion, usize)>> = (0..self.addrs.len())
            .map(|node| Box::pin(self.routed(node, op, deadline)) as BoxFuture<'_, _>)
            .collect();
        let mut last = None;
        while !pending.is_empty() {
            let (i, (c, _)) = std::future::poll_fn(|cx| {
                for (i, f) in pending.iter_mut().enumerate() {
                    if let std::task::Poll::Ready(r) = f.as_mut().poll(cx) {
                        return std::task::Poll::Ready((i, r));
                    }
                }
                std::task::Poll::Pending
            })
            .await;
            drop(pending.swap_remove(i));
            if is_ok(&c) {
                return c;
            }
            last = Some(c);
        }
        last.unwrap_or_else(|| Completion::info(op.value.clone(), "no replicas", None))
    }
}

impl Client for KvClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let deadline = Instant::now() + self.timeout;
            if op.f != "read" {
                return self.via_leader(op, deadline).await;
            }
            READ_OPS.fetch_add(1, Ordering::Relaxed);
            match self.policy {
                ReadPolicy::Leader => self.via_leader(op, deadline).await,
                ReadPolicy::Replica => self.routed(self.home, op, deadline).await.0,
                ReadPolicy::Hedged { .. } if self.addrs.len() > 1 => {
                    self.hedged_read(op, deadline).await
                }
                ReadPolicy::Hedged { .. } => self.routed(self.home, op, deadline).await.0,
                ReadPolicy::All => self.read_all(op, deadline).await,
            }
        })
    }
}
