//! Integration tests: real `splitbrain-kv` processes on loopback.
//!
//! Each test starts its own nodes on free ports with temporary data directories, talks
//! HTTP to them, and kills them (SIGKILL, by PID) when done — also when a test fails,
//! through the runtime's `testing::Cluster` guard's `Drop`.

use serde_json::{json, Value};
use splitbrain_target_runtime::testing::{self, http};
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_splitbrain-kv");

/// A running cluster; kills its processes when dropped.
struct Cluster(testing::Cluster);

impl Deref for Cluster {
    type Target = testing::Cluster;
    fn deref(&self) -> &testing::Cluster {
        &self.0
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut testing::Cluster {
        &mut self.0
    }
}

impl Cluster {
    fn start(n: usize, dir: &Path, extra: &[&str]) -> Cluster {
        Cluster(testing::Cluster::start(BIN, n, dir, extra))
    }

    /// Waits until some node reports itself leader of shard 0; returns its index.
    fn wait_leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            for (i, port) in self.client_ports.iter().enumerate() {
                if let Some((200, status)) = http(*port, "GET", "/status", None) {
                    if status["shards"][0]["role"] == "leader" {
                        return i;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no leader elected");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs one op, following not-leader hints (bounded); returns the final answer.
    fn op(&self, f: &str, key: &str, value: Value) -> Value {
        let body = json!({"f": f, "key": key, "value": value});
        let mut node = 0usize;
        let mut last = Value::Null;
        for _ in 0..100 {
            let Some((_, answer)) = http(self.client_ports[node], "POST", "/kv", Some(&body))
            else {
                node = (node + 1) % self.client_ports.len();
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            if answer["error"] != "not-leader" {
                return answer;
            }
            node = match answer["leader"].as_u64() {
                Some(id) if id >= 1 && (id as usize) <= self.client_ports.len() => id as usize - 1,
                _ => {
                    std::thread::sleep(Duration::from_millis(50));
                    (node + 1) % self.client_ports.len()
                }
            };
            last = answer;
        }
        panic!("op {f} {key} never reached a leader: {last}");
    }
}

#[test]
fn three_nodes_serve_ops_and_lose_no_acknowledged_write_after_kill_9_of_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = Cluster::start(3, dir.path(), &[]);
    cluster.wait_leader();

    // The basics, with their exact answers.
    assert_eq!(
        cluster.op("read", "fresh", Value::Null),
        json!({"type": "ok", "value": null})
    );
    assert_eq!(cluster.op("write", "x", json!(1)), json!({"type": "ok"}));
    assert_eq!(cluster.op("cas", "x", json!([1, 2])), json!({"type": "ok"}));
    assert_eq!(
        cluster.op("cas", "x", json!([1, 3])),
        json!({"type": "fail", "error": "cas-mismatch"})
    );
    assert_eq!(
        cluster.op("cas", "new", json!([null, 5])),
        json!({"type": "ok"})
    );
    assert_eq!(
        cluster.op("append", "x", json!(9)),
        json!({"type": "fail", "error": "not-a-list"})
    );
    let (status, bad) = http(
        cluster.client_ports[0],
        "POST",
        "/kv",
        Some(&json!({"f": "nope"})),
    )
    .expect("answer");
    assert_eq!((status, bad["error"].clone()), (400, json!("bad-request")));

    // Enough writes from 4 concurrent clients to pass the 1,000-entry compaction point.
    let mut acked: BTreeMap<String, Value> = BTreeMap::new();
    acked.insert("x".into(), json!(2));
    acked.insert("new".into(), json!(5));
    let results: Vec<(String, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let cluster = &cluster;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    let list = format!("list{t}");
                    let mut elements = Vec::new();
                    for k in 0..280 {
                        let key = format!("k{t}-{}", k % 20);
                        if cluster.op("write", &key, json!(k))["type"] == "ok" {
                            mine.push((key, json!(k)));
                        }
                        if k % 7 == 0 && cluster.op("append", &list, json!(k))["type"] == "ok" {
                            elements.push(json!(k));
                        }
                    }
                    mine.push((list, Value::Array(elements)));
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client thread"))
            .collect()
    });
    for (key, value) in results {
        acked.insert(key, value);
    }
    for (key, value) in &acked {
        assert_eq!(
            cluster.op("read", key, Value::Null),
            json!({"type": "ok", "value": value}),
            "key {key}"
        );
    }
    let (_, status) = http(cluster.client_ports[0], "GET", "/status", None).expect("status");
    println!("status before kill: {status}");
    assert!(status["shards"][0]["commit_index"].as_u64().unwrap_or(0) > 1000);

    cluster.kill_all();
    cluster.restart_all();
    cluster.wait_leader();
    for (key, value) in &acked {
        assert_eq!(
            cluster.op("read", key, Value::Null),
            json!({"type": "ok", "value": value}),
            "acknowledged write to {key} lost after kill -9 of every node"
        );
    }
    println!(
        "{} acknowledged keys intact after kill -9 of all 3 nodes",
        acked.len()
    );
}

#[test]
fn single_node_is_leader_and_restarts_from_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = Cluster::start(1, dir.path(), &["--shards", "2"]);
    cluster.wait_leader();
    for k in 0..20 {
        assert_eq!(
            cluster.op("append", &format!("l{}", k % 4), json!(k)),
            json!({"type": "ok"})
        );
    }
    cluster.kill_all();
    cluster.restart_all();
    cluster.wait_leader();
    assert_eq!(
        cluster.op("read", "l1", Value::Null),
        json!({"type": "ok", "value": [1, 5, 9, 13, 17]})
    );
}

#[test]
fn every_read_mode_reads_its_own_writes_and_replica_modes_serve_on_followers() {
    for mode in [
        "log",
        "lease",
        "replica-read",
        "hedged",
        "read-all",
        "follower",
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let cluster = Cluster::start(3, dir.path(), &["--read-mode", mode]);
        let leader = cluster.wait_leader();
        assert_eq!(cluster.op("write", "k", json!(mode)), json!({"type": "ok"}));
        assert_eq!(
            cluster.op("read", "k", Value::Null),
            json!({"type": "ok", "value": mode}),
            "{mode}"
        );
        let follower = (leader + 1) % 3;
        let body = json!({"f": "read", "key": "k"});
        let (_, answer) =
            http(cluster.client_ports[follower], "POST", "/kv", Some(&body)).expect("answer");
        if ["replica-read", "hedged", "read-all"].contains(&mode) {
            // A follower serves a linearizable read itself, after asking the leader.
            assert_eq!(answer, json!({"type": "ok", "value": mode}));
        } else if mode != "follower" {
            assert_eq!(answer["error"], "not-leader", "{mode}");
        }
        let (_, status) = http(cluster.client_ports[0], "GET", "/status", None).expect("status");
        assert_eq!(status["read_mode"], mode);
    }
}
