//! etcd (Debian's `etcd-server`, an unmodified third-party binary): how to start a cluster
//! of it and its client over the v3 JSON gateway.
//!
//! Members dial each other at one advertised peer URL, so they cannot be told a proxy per
//! link: each member runs in a network namespace of its own ([`NodeNetwork::Namespaces`])
//! at `ADDR:2379` (clients) and `ADDR:2380` (peers), and in a run with faults every
//! connection a member opens to another's `:2380` is routed through the proxy of that
//! link ([`Target::mesh_ports`]), which cuts (one way too), slows and drops from it.
//! Readiness is `GET /health`; who leads is `POST /v3/maintenance/status`, whose
//! answer carries the member's own id and the id of the leader it follows.
//!
//! etcd is a Go program: Go reads the time through the vDSO, which libfaketime's
//! `LD_PRELOAD` does not reach, so its clock cannot be moved ([`ClockSource::Unsupported`];
//! checked by hand: its log timestamps stay on the real time under `FAKETIME=-10d`).

use super::{
    poll_until, BoxFuture, Client, ClockSource, NodeNetwork, Profile, RequiredProgram, Target,
    TargetOptions,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

mod gateway;

/// The port every member serves clients on (inside its own namespace).
pub const CLIENT_PORT: u16 = 2379;
/// The port every member serves peers on.
pub const PEER_PORT: u16 = 2380;
/// Raft heartbeat interval (ms): half etcd's default, so a test sees elections within a
/// second of a fault rather than two.
const HEARTBEAT_MS: u64 = 50;
/// Raft election timeout (ms): ten heartbeats, as etcd recommends.
const ELECTION_MS: u64 = 500;

/// An etcd cluster (etcd-server 3.4 from Debian), each member in its own namespace.
pub struct EtcdTarget;

impl Target for EtcdTarget {
    fn profile(&self) -> Profile<'_> {
        Profile::new(
            "etcd",
            "etcd (Debian's etcd-server, unmodified), one member per network namespace, over its v3 JSON gateway; read modes linearizable/serializable",
            "etcd",
        )
        .read_modes(&["linearizable", "serializable"])
        .workloads(&["register", "append"])
    }
    fn required_programs(&self) -> Vec<RequiredProgram<'_>> {
        vec![RequiredProgram {
            program: "etcd",
            package: "etcd-server",
        }]
    }
    fn network(&self) -> NodeNetwork {
        NodeNetwork::Namespaces {
            client_port: CLIENT_PORT,
            peer_port: PEER_PORT,
        }
    }
    fn mesh_ports(&self) -> Vec<u16> {
        // Raft's messages between members: streams and pipelines on the peer port.
        vec![PEER_PORT]
    }
    fn clock_source(&self) -> ClockSource {
        ClockSource::Unsupported
    }

    fn node_args(
        &self,
        i: usize,
        client_addr: SocketAddr,
        peer_listen: SocketAddr,
        peer_addrs: &[SocketAddr],
        data_dir: &Path,
        _opts: &TargetOptions,
    ) -> Vec<String> {
        let client_url = format!("http://{client_addr}");
        let peer_url = format!("http://{peer_listen}");
        let initial_cluster: Vec<String> = peer_addrs
            .iter()
            .enumerate()
            .map(|(j, a)| format!("{}=http://{a}", member_name(j)))
            .collect();
        let flags: [(&str, String); 13] = [
            ("name", member_name(i)),
            ("data-dir", data_dir.display().to_string()),
            ("listen-client-urls", client_url.clone()),
            ("advertise-client-urls", client_url),
            ("listen-peer-urls", peer_url.clone()),
            ("initial-advertise-peer-urls", peer_url),
            ("initial-cluster", initial_cluster.join(",")),
            // A restarted member finds its data dir and ignores the initial-* flags.
            ("initial-cluster-state", "new".into()),
            ("initial-cluster-token", cluster_token(data_dir)),
            ("heartbeat-interval", HEARTBEAT_MS.to_string()),
            ("election-timeout", ELECTION_MS.to_string()),
            ("logger", "zap".into()),
            ("log-outputs", "stderr".into()),
        ];
        flags
            .into_iter()
            .map(|(k, v)| format!("--{k}={v}"))
            .collect()
    }

    fn wait_formed<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        bound: Duration,
    ) -> BoxFuture<'a, Result<(), ()>> {
        Box::pin(poll_until(bound, move || async move {
            // Formed when every member answers and all follow the same leader.
            let mut leader = None;
            for addr in addrs {
                match member_status(http, *addr).await {
                    Some(s)
                        if s.leader != "0"
                            && leader.get_or_insert(s.leader.clone()) == &s.leader => {}
                    _ => return false,
                }
            }
            true
        }))
    }

    fn leaders<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for (i, addr) in addrs.iter().enumerate() {
                // A member leads when the leader it reports is itself; a partitioned old
                // leader counts until it steps down (etcd runs with CheckQuorum).
                if member_status(http, *addr)
                    .await
                    .is_some_and(|s| s.leader == s.member)
                {
                    out.push(i);
                }
            }
            out
        })
    }

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        Box::new(gateway::GatewayClient::new(addrs, home, opts))
    }
}

/// Member `i`'s name (`n1`, `n2`, ...), the same as the harness's node names.
fn member_name(i: usize) -> String {
    format!("n{}", i + 1)
}

/// A token of this run for `--initial-cluster-token`, the same for every member: derived
/// from the run directory the data directories live in (`RUN/nodes/nI/data`), so members
/// of two runs can never join each other's cluster.
fn cluster_token(data_dir: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let run_dir = data_dir.ancestors().nth(3).unwrap_or(data_dir);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    run_dir.hash(&mut h);
    format!("splitbrain-{:016x}", h.finish())
}

/// What `POST /v3/maintenance/status` says about a member (ids as the gateway prints
/// them, decimal strings; leader `"0"` when it knows none).
struct MemberStatus {
    member: String,
    leader: String,
}

async fn member_status(http: &reqwest::Client, addr: SocketAddr) -> Option<MemberStatus> {
    let r = http
        .post(format!("http://{addr}/v3/maintenance/status"))
        .json(&json!({}))
        .send()
        .await
        .ok()?;
    let v: Value = r.json().await.ok()?;
    let id = |x: &Value| match x {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    Some(MemberStatus {
        member: id(&v["header"]["member_id"])?,
        leader: id(&v["leader"]).unwrap_or_else(|| "0".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_told_the_whole_cluster_and_one_token() {
        let addrs: Vec<SocketAddr> = (0..3)
            .map(|i| SocketAddr::from(([10, 77, 5, 10 + i], PEER_PORT)))
            .collect();
        let opts = TargetOptions {
            shards: 1,
            read_mode: None,
            bugs: Vec::new(),
            op_timeout: Duration::from_secs(1),
            hedge_delay: Duration::from_millis(2),
            workload: "register".into(),
            wait: None,
            read_from: None,
            replication: None,
            transport: None,
        };
        let args = |i: usize| {
            let data = Path::new("/store/t/run1/nodes")
                .join(member_name(i))
                .join("data");
            let client = SocketAddr::from(([10, 77, 5, 10 + i as u8], CLIENT_PORT));
            EtcdTarget.node_args(i, client, addrs[i], &addrs, &data, &opts)
        };
        let a1 = args(1);
        assert!(a1.contains(&"--name=n2".to_string()));
        assert!(a1.contains(&"--listen-client-urls=http://10.77.5.11:2379".to_string()));
        assert!(a1.contains(&"--initial-advertise-peer-urls=http://10.77.5.11:2380".to_string()));
        assert!(a1.contains(
            &"--initial-cluster=n1=http://10.77.5.10:2380,n2=http://10.77.5.11:2380,n3=http://10.77.5.12:2380"
                .to_string()
        ));
        let token = |a: &[String]| {
            a.iter()
                .find(|s| s.starts_with("--initial-cluster-token="))
                .cloned()
        };
        assert_eq!(token(&a1), token(&args(0)));
        let other_run = EtcdTarget.node_args(
            0,
            SocketAddr::from(([10, 77, 5, 10], CLIENT_PORT)),
            addrs[0],
            &addrs,
            Path::new("/store/t/run2/nodes/n1/data"),
            &opts,
        );
        assert_ne!(token(&a1), token(&other_run));
    }
}
