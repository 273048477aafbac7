//! The bundled Bayou replica group (`targets/bayou`): how to start it and its session client.
//!
//! Protocol (see `targets/bayou/README.md`): `POST /write {"key","op","session"}` and
//! `POST /read {"key","session"}` answer `{"type":"ok",...}` or `{"type":"fail","error"}`;
//! `GET /status` names the primary, which is what leader-aimed faults hit.
//!
//! Each client process is one Bayou *session* (Terry et al., PDIS 1994): it carries a read
//! vector and a write vector, sends both with every request, and the replica refuses
//! (`session-behind`) what it cannot serve without breaking a session guarantee. A session
//! moves to the next replica every [`OPS_PER_REPLICA`] ops, so its guarantees are exercised
//! across replicas; final reads use a pinned client with an empty session instead.

use super::{
    bundled_node_args, post_json, BoxFuture, BugInfo, Client, Completion, Invocation, Posted,
    Profile, Target, TargetOptions,
};
use serde_json::{json, Map, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The bundled Bayou replica group.
pub struct BayouTarget;

/// Ops a session performs at one replica before it moves to the next.
const OPS_PER_REPLICA: u64 = 2;
/// Anti-entropy interval the harness starts nodes with (milliseconds).
const ANTI_ENTROPY_MS: u64 = 100;

const BUGS: &[BugInfo<'static>] = &[
    BugInfo {
        name: "no-rollback",
        description: "applies writes in arrival order and never rolls back; replicas run the booking merge in different orders and their schedules diverge (fault: none needed; booking workload)",
    },
    BugInfo {
        name: "lose-tentative",
        description: "tentative writes are acknowledged before they are persisted (only their stamps reach the log); kill -9 loses acknowledged writes not yet propagated, and the restarted replica's version vector still claims them, so it never gets them back (fault: kill)",
    },
    BugInfo {
        name: "reorder-commit",
        description: "a restarted primary forgets its commit numbers and commits already-committed writes again in another order; the committed prefix changes (fault: kill aimed at the primary)",
    },
    BugInfo {
        name: "stale-commit-sync",
        description: "anti-entropy never sends commit knowledge for writes the peer already holds; replicas never agree on the committed order (fault: none needed)",
    },
    BugInfo {
        name: "stale-session",
        description: "replicas ignore the session vectors; a session that switches replica misses its own writes or goes back in time (fault: partition, or none)",
    },
];

impl Target for BayouTarget {
    fn profile(&self) -> Profile<'_> {
        Profile::new(
            "bayou",
            "Bayou replica group: writes accepted anywhere, anti-entropy, primary commit, rollback and replay, session guarantees",
            "splitbrain-bayou",
        )
        .bugs(BUGS)
        .workloads(&["set", "booking", "counter"])
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
        // A replica that cannot serve a session waits at most a third of the client's
        // budget for anti-entropy, so it answers `session-behind` before the client gives up.
        let session_wait = (opts.op_timeout.as_millis() / 3).clamp(50, 300);
        args.extend([
            "--anti-entropy-ms".to_string(),
            ANTI_ENTROPY_MS.to_string(),
            "--session-wait-ms".to_string(),
            session_wait.to_string(),
        ]);
        args
    }

    fn leaders<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        // The primary is the one replica whose loss matters (it alone commits).
        Box::pin(async move {
            let mut out = Vec::new();
            for (i, addr) in addrs.iter().enumerate() {
                let status = http
                    .get(format!("http://{addr}/status"))
                    .timeout(Duration::from_millis(500))
                    .send()
                    .await;
                if let Ok(r) = status {
                    if let Ok(v) = r.json::<Value>().await {
                        if v["is_primary"] == true {
                            out.push(i);
                        }
                    }
                }
            }
            out
        })
    }

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        Box::new(BayouClient::new(addrs, home, opts, false))
    }

    fn replica_client(
        &self,
        addrs: &[SocketAddr],
        replica: usize,
        opts: &TargetOptions,
    ) -> Box<dyn Client> {
        Box::new(BayouClient::new(addrs, replica, opts, true))
    }
}

/// A Bayou session: what it has read and written, as version vectors
/// (replica id -> highest accept stamp).
#[derive(Debug, Default, Clone, PartialEq)]
struct Session {
    read: Map<String, Value>,
    write: Map<String, Value>,
}

impl Session {
    fn to_json(&self) -> Value {
        json!({ "read": self.read, "write": self.write })
    }
}

/// Raises every entry of `into` to at least the one in `from`.
fn merge_vv(into: &mut Map<String, Value>, from: &Value) {
    let Some(from) = from.as_object() else {
        return;
    };
    for (replica, stamp) in from {
        let Some(stamp) = stamp.as_u64() else {
            continue;
        };
        let cur = into.get(replica).and_then(Value::as_u64).unwrap_or(0);
        if stamp > cur {
            into.insert(replica.clone(), json!(stamp));
        }
    }
}

/// What a workload op becomes on the wire: a path and a body without the session.
fn request(workload: &str, op: &Invocation) -> Result<(&'static str, Value), String> {
    let key = op.key.clone().unwrap_or(Value::Null);
    let write_op = match (op.f.as_str(), workload) {
        // The read names the object type, so a key no write has reached yet reads as an
        // empty value of that type (0 for a counter).
        ("read", w) => {
            let kind = match w {
                "counter" => "counter",
                "booking" => "schedule",
                _ => "set",
            };
            return Ok(("/read", json!({ "key": key, "type": kind })));
        }
        ("add", "counter") => json!({"type": "incr", "delta": op.value}),
        ("add", _) => json!({"type": "add", "element": op.value}),
        ("book", _) => json!({
            "type": "book",
            "id": op.value["id"],
            "alternatives": op.value["alternatives"],
        }),
        (other, _) => return Err(format!("the bayou target cannot perform {other:?}")),
    };
    Ok(("/write", json!({ "key": key, "op": write_op })))
}

struct BayouClient {
    http: reqwest::Client,
    addrs: Vec<SocketAddr>,
    home: usize,
    /// Final reads stay on one replica.
    pinned: bool,
    ops_done: u64,
    timeout: Duration,
    workload: String,
    session: Session,
}

impl BayouClient {
    fn new(addrs: &[SocketAddr], home: usize, opts: &TargetOptions, pinned: bool) -> BayouClient {
        BayouClient {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(2)
                .build()
                .unwrap_or_default(),
            addrs: addrs.to_vec(),
            home: home % addrs.len().max(1),
            pinned,
            ops_done: 0,
            timeout: opts.op_timeout,
            workload: opts.workload.clone(),
            session: Session::default(),
        }
    }

    /// The replica this op goes to first.
    fn replica(&self) -> usize {
        if self.pinned {
            self.home
        } else {
            (self.home + (self.ops_done / OPS_PER_REPLICA) as usize) % self.addrs.len().max(1)
        }
    }

    /// Turns a replica's answer into a completion and updates the session.
    fn complete(&mut self, op: &Invocation, node: usize, v: Value) -> Completion {
        let name = Some(format!("n{}", node + 1));
        match v["type"].as_str() {
            Some("ok") if op.f == "read" => {
                merge_vv(&mut self.session.read, &v["vv"]);
                Completion {
                    op_type: OpType::Ok,
                    value: v["value"].clone(),
                    node: name,
                    error: None,
                }
            }
            Some("ok") => {
                // The write's own stamp joins the write vector (monotonic writes,
                // read-your-writes); fall back to the replica's whole vector.
                match (v["replica"].as_u64(), v["stamp"].as_u64()) {
                    (Some(r), Some(s)) => {
                        merge_vv(&mut self.session.write, &json!({ r.to_string(): s }))
                    }
                    _ => merge_vv(&mut self.session.write, &v["vv"]),
                }
                Completion {
                    op_type: OpType::Ok,
                    value: op.value.clone(),
                    node: name,
                    error: None,
                }
            }
            Some("fail") => Completion {
                op_type: OpType::Fail,
                value: op.value.clone(),
                node: name,
                error: v.get("error").cloned(),
            },
            _ => Completion::info(op.value.clone(), format!("unexpected answer: {v}"), name),
        }
    }
}

impl Client for BayouClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let (path, mut body) = match request(&self.workload, op) {
                Ok(r) => r,
                // Nothing was sent, so nothing happened.
                Err(e) => {
                    return Completion {
                        op_type: OpType::Fail,
                        value: op.value.clone(),
                        node: None,
                        error: Some(json!(e)),
                    }
                }
            };
            body["session"] = self.session.to_json();
            let first = self.replica();
            self.ops_done += 1;
            let deadline = Instant::now() + self.timeout;
            // A replica that refuses the connection never saw the request: any other
            // replica may take it (a pinned client has no other).
            let tries = if self.pinned { 1 } else { self.addrs.len() };
            for step in 0..tries {
                let node = (first + step) % self.addrs.len();
                let url = format!("http://{}{path}", self.addrs[node]);
                let remaining = deadline.saturating_duration_since(Instant::now());
                match post_json(&self.http, url, &body, remaining).await {
                    Posted::Answer(v) => return self.complete(op, node, v),
                    Posted::Unreachable => continue,
                    Posted::Unknown(why) => {
                        return Completion::info(
                            op.value.clone(),
                            why,
                            Some(format!("n{}", node + 1)),
                        )
                    }
                }
            }
            Completion {
                op_type: OpType::Fail,
                value: op.value.clone(),
                node: None,
                error: Some(json!("connection-refused")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(f: &str, value: Value) -> Invocation {
        Invocation {
            f: f.into(),
            key: Some(json!("k1")),
            value,
        }
    }

    #[test]
    fn ops_map_onto_bayou_writes_by_workload() {
        let (path, body) = request("set", &inv("add", json!(7))).unwrap();
        assert_eq!(path, "/write");
        assert_eq!(body["op"], json!({"type": "add", "element": 7}));
        let (_, body) = request("counter", &inv("add", json!(3))).unwrap();
        assert_eq!(body["op"], json!({"type": "incr", "delta": 3}));
        let b = json!({"id": 4, "alternatives": [[1, 2], [0, 2]]});
        let (_, body) = request("booking", &inv("book", b)).unwrap();
        assert_eq!(body["op"]["alternatives"], json!([[1, 2], [0, 2]]));
        let (path, body) = request("set", &inv("read", Value::Null)).unwrap();
        assert_eq!((path, body["key"].clone()), ("/read", json!("k1")));
        let (_, body) = request("counter", &inv("read", Value::Null)).unwrap();
        assert_eq!(body["type"], "counter");
        assert!(request("set", &inv("cas", json!([1, 2]))).is_err());
    }

    #[test]
    fn session_vectors_only_grow() {
        let mut vv = Map::new();
        merge_vv(&mut vv, &json!({"1": 5, "2": 3}));
        merge_vv(&mut vv, &json!({"1": 4, "2": 9, "3": "bad"}));
        assert_eq!(Value::Object(vv), json!({"1": 5, "2": 9}));
    }

    #[test]
    fn a_session_moves_between_replicas_and_a_pinned_one_does_not() {
        let addrs: Vec<SocketAddr> = (0..3)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 9000 + i)))
            .collect();
        let opts = TargetOptions {
            shards: 1,
            read_mode: None,
            bugs: vec![],
            op_timeout: Duration::from_secs(1),
            hedge_delay: Duration::from_millis(10),
            workload: "set".into(),
            wait: None,
            read_from: None,
            replication: None,
            transport: None,
        };
        let mut moving = BayouClient::new(&addrs, 1, &opts, false);
        let mut pinned = BayouClient::new(&addrs, 1, &opts, true);
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push((moving.replica(), pinned.replica()));
            moving.ops_done += 1;
            pinned.ops_done += 1;
        }
        assert_eq!(seen, vec![(1, 1), (1, 1), (2, 1), (2, 1), (0, 1), (0, 1)]);
    }
}
