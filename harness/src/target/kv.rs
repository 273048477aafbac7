//! The bundled KV store (`targets/kv`): how to start it and its HTTP/JSON client.
//!
//! Protocol: `POST /kv {"f","key","value"}` answers `{"type":"ok"|"fail"|"info", ...}`;
//! `GET /status` reports each shard's leader; `POST /admin/clock` sets the clock offset.
//! A `not-leader` failure is definite, so the client may retry it on the hinted leader
//! within the same logical op: only the last attempt can have taken effect.

use super::{
    bundled_node_args, poll_until, post_json, request_timeout_args, BoxFuture, BugInfo, Client,
    Completion, Invocation, Posted, Target, TargetOptions,
};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The bundled sharded, replicated KV store.
pub struct KvTarget;

const BUGS: &[BugInfo] = &[
    BugInfo {
        name: "stale-read",
        description: "leader serves reads without confirming leadership; a partitioned old leader returns stale values (fault: partition)",
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
        description: "grants votes regardless of log freshness; a stale node can win and erase committed entries (fault: partition, kill)",
    },
    BugInfo {
        name: "commit-old-term",
        description: "commits entries of an earlier term by counting replicas (Raft figure 8); they can later be overwritten (fault: leader-churn, append workload)",
    },
    BugInfo {
        name: "lease-no-margin",
        description: "lease reads with no allowance for clock drift; a leader whose clock jumps back after a partition cut it off keeps serving reads beside its successor (fault: partition,clock)",
    },
];

impl Target for KvTarget {
    fn name(&self) -> &'static str {
        "kv"
    }
    fn description(&self) -> &'static str {
        "sharded KV store, Raft-replicated per shard, persistent; read modes log/read-index/lease/follower/hedged"
    }
    fn binary_name(&self) -> &'static str {
        "splitbrain-kv"
    }
    fn bugs(&self) -> &'static [BugInfo] {
        BUGS
    }
    fn workloads(&self) -> &'static [&'static str] {
        &["register", "append"]
    }
    fn read_modes(&self) -> &'static [&'static str] {
        &["read-index", "log", "lease", "follower", "hedged"]
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
        Box::pin(async move {
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
        })
    }

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        Box::new(KvClient {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(2)
                .build()
                .unwrap_or_default(),
            addrs: addrs.to_vec(),
            home: home % addrs.len().max(1),
            timeout: opts.op_timeout,
            hedge: (opts.read_mode.as_deref() == Some("hedged")).then_some(opts.hedge_delay),
        })
    }
}

async fn fetch_status(http: &reqwest::Client, addr: SocketAddr) -> Option<Value> {
    let r = http
        .get(format!("http://{addr}/status"))
        .send()
        .await
        .ok()?;
    r.json::<Value>().await.ok()
}

/// True when some node reports a leader for every shard.
async fn all_shards_led(http: &reqwest::Client, addrs: &[SocketAddr]) -> bool {
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

struct KvClient {
    http: reqwest::Client,
    addrs: Vec<SocketAddr>,
    home: usize,
    timeout: Duration,
    hedge: Option<Duration>,
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

impl KvClient {
    async fn attempt(&self, node: usize, op: &Invocation, deadline: Instant) -> Attempt {
        let addr = self.addrs[node];
        let name = Some(format!("n{}", node + 1));
        let body = json!({ "f": op.f, "key": op.key, "value": op.value });
        let remaining = deadline.saturating_duration_since(Instant::now());
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

    /// Tries the home node, then follows leader hints (or walks the nodes), a bounded
    /// number of times; only definite failures are retried.
    async fn routed(&self, start: usize, op: &Invocation, deadline: Instant) -> Completion {
        let mut node = start;
        let mut tried = 0usize;
        loop {
            match self.attempt(node, op, deadline).await {
                Attempt::Done(c) => return c,
                Attempt::Redirect { hint, error } => {
                    tried += 1;
                    if tried > self.addrs.len() {
                        return Completion {
                            op_type: OpType::Fail,
                            value: op.value.clone(),
                            node: Some(format!("n{}", node + 1)),
                            error: Some(json!(error)),
                        };
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

    /// Hedged read: ask the home node; if it has not answered after the hedge delay, ask
    /// the next node too; the first `ok` wins.
    async fn hedged_read(&self, op: &Invocation, delay: Duration, deadline: Instant) -> Completion {
        let first = self.routed(self.home, op, deadline);
        tokio::pin!(first);
        tokio::select! {
            c = &mut first => return c,
            _ = tokio::time::sleep(delay) => {}
        }
        let second = self.routed((self.home + 1) % self.addrs.len(), op, deadline);
        tokio::pin!(second);
        let (c, other) = tokio::select! {
            c = &mut first => (c, 1),
            c = &mut second => (c, 2),
        };
        if c.op_type == OpType::Ok {
            return c;
        }
        // The faster one did not succeed: a read has no effect, so wait for the other.
        if other == 1 {
            second.await
        } else {
            first.await
        }
    }
}

impl Client for KvClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let deadline = Instant::now() + self.timeout;
            match self.hedge {
                Some(delay) if op.f == "read" && self.addrs.len() > 1 => {
                    self.hedged_read(op, delay, deadline).await
                }
                _ => self.routed(self.home, op, deadline).await,
            }
        })
    }
}
