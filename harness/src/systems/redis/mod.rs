//! `--target redis`: Redis 7 (Debian's `redis-server` and `redis-sentinel`), a primary
//! with asynchronous replicas and a Sentinel beside every server, laid out as Jepsen
//! does it.
//!
//! Every node has a network namespace of its own (Redis replicas and sentinels dial the
//! one address a server announces, so they cannot be told a proxy per link; in a run with
//! faults, rules there route every connection between nodes through the link's proxy,
//! [`Target::mesh_ports`]) holding `redis-server` on port 6379 (the node process, which
//! kill and pause hit) and `redis-sentinel` on 26379 (a sidecar the faults leave alone:
//! the sentinels are the failure detector). n1 starts as the primary, the others as its
//! replicas; the sentinels monitor it with a majority quorum and fail over after a second
//! of silence. The layout's "peer" address of a node is its sentinel. See
//! `docs/targets/redis.md` for what this finds.

mod client;
mod config;

pub use client::{ReadFrom, RedisClient};
pub use config::{SENTINEL_PORT, SERVER_PORT};

use super::{
    poll_until, BoxFuture, Client, ClockSource, NodeNetwork, Profile, RequiredProgram, Sidecar,
    Target, TargetOptions,
};
use crate::run::node_layout::NodeLayout;
use client::{connect, send, sentinel_addr, text, Sent};
use redis::Value as RValue;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

/// Redis with Sentinel failover.
pub struct RedisTarget;

/// How long a readiness, role or formation probe waits for one answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

impl Target for RedisTarget {
    fn profile(&self) -> Profile<'_> {
        Profile::new(
            "redis",
            "Redis 7 primary + asynchronous replicas, Sentinel failover (Debian redis-server, redis-sentinel; root: one network namespace per node); read modes primary/replica; --wait N",
            "redis-server",
        )
        .read_modes(&["primary", "replica"])
        .accepted_flags(&["wait", "read-from"])
        .workloads(&["register", "append"])
    }
    fn network(&self) -> NodeNetwork {
        NodeNetwork::Namespaces {
            client_port: SERVER_PORT,
            peer_port: SENTINEL_PORT,
        }
    }
    fn client_links_unproxyable(&self) -> Option<String> {
        Some(
            "the Redis clients find each node's sentinel at the node's own address (port \
             26379) and match the sentinels' answers (the primary's ip and port) against the \
             nodes' addresses, so they cannot be given a proxy's address instead"
                .into(),
        )
    }
    fn mesh_ports(&self) -> Vec<u16> {
        // Replication (replicas dial the primary's server port), and Sentinel's links to
        // every server and to the other sentinels.
        vec![SERVER_PORT, SENTINEL_PORT]
    }
    /// Unsupported: Debian's redis-server is linked with jemalloc, whose start-up
    /// `clock_gettime` call libfaketime 0.9.10 cannot survive (the server hangs before it
    /// listens; libfaketime issue 130, open), so its clock cannot be moved that way.
    fn clock_source(&self) -> ClockSource {
        ClockSource::Unsupported
    }
    fn required_programs(&self) -> Vec<RequiredProgram<'_>> {
        vec![
            RequiredProgram {
                program: "redis-server",
                package: "redis-server",
            },
            RequiredProgram {
                program: "redis-sentinel",
                package: "redis-sentinel",
            },
        ]
    }

    fn node_args(
        &self,
        _i: usize,
        _client_addr: SocketAddr,
        _peer_listen: SocketAddr,
        _peer_addrs: &[SocketAddr],
        data_dir: &std::path::Path,
        _opts: &TargetOptions,
    ) -> Vec<String> {
        let conf = config::node_dir(data_dir).join("redis.conf");
        vec![conf.display().to_string()]
    }

    fn node_files(
        &self,
        i: usize,
        layouts: &[NodeLayout],
        _opts: &TargetOptions,
    ) -> Vec<(std::path::PathBuf, String)> {
        let (Some(me), Some(primary)) = (layouts.get(i), layouts.first()) else {
            return Vec::new();
        };
        let (ip, primary_ip) = (v4(me.client_addr), v4(primary.client_addr));
        let ips: Vec<Ipv4Addr> = layouts.iter().map(|l| v4(l.client_addr)).collect();
        let dir = config::node_dir(&me.data_dir);
        vec![
            (
                dir.join("redis.conf"),
                config::server_conf(ip, primary_ip, &me.data_dir),
            ),
            (
                dir.join("sentinel.conf"),
                config::sentinel_conf(i, &ips, &dir),
            ),
        ]
    }

    fn sidecar(&self, i: usize, layouts: &[NodeLayout], _opts: &TargetOptions) -> Option<Sidecar> {
        let dir = config::node_dir(&layouts.get(i)?.data_dir);
        Some(Sidecar {
            program: "redis-sentinel".into(),
            args: vec![dir.join("sentinel.conf").display().to_string()],
            log_file: dir.join("sentinel.log"),
        })
    }

    fn is_ready<'a>(&'a self, _http: &'a reqwest::Client, addr: SocketAddr) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let answer = probe(addr, redis::cmd("PING")).await;
            matches!(answer, Some(v) if text(&v).as_deref() == Some("PONG"))
        })
    }

    fn wait_formed<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        bound: Duration,
    ) -> BoxFuture<'a, Result<(), ()>> {
        Box::pin(poll_until(bound, move || formed(addrs)))
    }

    fn leaders<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for (i, addr) in addrs.iter().enumerate() {
                if role(*addr)
                    .await
                    .is_some_and(|r| r.first() == Some(&"master".to_string()))
                {
                    out.push(i);
                }
            }
            out
        })
    }

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        Box::new(RedisClient::new(addrs, home, opts))
    }
}

/// The IPv4 address of a node (namespaced nodes always have one).
fn v4(addr: SocketAddr) -> Ipv4Addr {
    match addr.ip() {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => Ipv4Addr::LOCALHOST,
    }
}

/// One command on a fresh connection, bounded by [`PROBE_TIMEOUT`]; None when it got no
/// answer.
async fn probe(addr: SocketAddr, cmd: redis::Cmd) -> Option<RValue> {
    let mut conn = Some(connect(addr, PROBE_TIMEOUT).await.ok()?);
    match send(&mut conn, addr, &cmd, PROBE_TIMEOUT).await {
        Sent::Answer(v) => Some(v),
        _ => None,
    }
}

/// `ROLE` of the server at `addr`, flattened to text: `["master", offset, ...]` or
/// `["slave", primary ip, port, link state, offset]`.
async fn role(addr: SocketAddr) -> Option<Vec<String>> {
    match probe(addr, redis::cmd("ROLE")).await? {
        RValue::Array(parts) => Some(parts.iter().map(|p| text(p).unwrap_or_default()).collect()),
        _ => None,
    }
}

/// True once the replication and the sentinels are in place: n1 is primary, every
/// other server a connected replica of it, and every sentinel knows the primary, its
/// replicas and every other sentinel (so a majority can authorise a failover from the
/// first fault on).
async fn formed(addrs: &[SocketAddr]) -> bool {
    let Some(primary) = addrs.first() else {
        return false;
    };
    let n = addrs.len();
    for (i, addr) in addrs.iter().enumerate() {
        let Some(r) = role(*addr).await else {
            return false;
        };
        let want = if i == 0 {
            r.first().map(String::as_str) == Some("master")
        } else {
            r.first().map(String::as_str) == Some("slave")
                && r.get(1) == Some(&primary.ip().to_string())
                && r.get(3).map(String::as_str) == Some("connected")
        };
        if !want {
            return false;
        }
    }
    for addr in addrs {
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("master").arg(config::MASTER_NAME);
        let Some(RValue::Array(fields)) = probe(sentinel_addr(*addr), cmd).await else {
            return false;
        };
        let field = |name: &str| {
            fields
                .chunks(2)
                .find(|kv| text(&kv[0]).as_deref() == Some(name))
                .and_then(|kv| kv.get(1).and_then(text))
        };
        let others = (n - 1).to_string();
        if field("ip") != Some(primary.ip().to_string())
            || field("num-slaves") != Some(others.clone())
            || field("num-other-sentinels") != Some(others)
        {
            return false;
        }
    }
    true
}
