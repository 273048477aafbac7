//! Integration tests: real `splitbrain-txn` processes on loopback.
//!
//! Each test starts its own 3 nodes on free ports with temporary data directories, talks
//! HTTP to them, and kills them (SIGKILL, by PID) when done — also when a test fails,
//! through the runtime's `testing::Cluster` guard's `Drop`. Every wait has a deadline.

use serde_json::{json, Value};
use splitbrain_target_runtime::testing::{self, http};
use splitbrain_txn::types::{Key, Record, TxnId, Val, Write as LoggedWrite};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_splitbrain-txn");
const NODES: usize = 3;

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
    fn start(dir: &Path) -> Cluster {
        Cluster(testing::Cluster::start(
            BIN,
            NODES,
            dir,
            &["--in-doubt-timeout-ms", "200"],
        ))
    }

    fn data_dir(dir: &Path, i: usize) -> PathBuf {
        testing::Cluster::data_dir(dir, i)
    }

    /// Waits until no node holds locks, has in-doubt txns or coordinates anything.
    fn wait_quiet(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let quiet = (0..self.len()).all(|i| {
                matches!(self.get(i, "/status"),
                    Some((200, s)) if s["locks"] == 0 && s["in_doubt"] == 0 && s["active"] == 0)
            });
            if quiet {
                return;
            }
            assert!(Instant::now() < deadline, "cluster never became quiet");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn txn(&self, node: usize, ops: Value) -> Option<Value> {
        self.post(node, "/txn", &json!({ "ops": ops }))
            .map(|(_, v)| v)
    }

    /// Reads keys through node `node`, retrying aborts (bounded); returns the values.
    fn read(&self, node: usize, keys: &[i64]) -> Vec<Value> {
        let ops: Vec<Value> = keys.iter().map(|k| json!(["r", k, null])).collect();
        for _ in 0..50 {
            if let Some(answer) = self.txn(node, json!(ops)) {
                if answer["type"] == "ok" {
                    return answer["value"]
                        .as_array()
                        .map(|a| a.iter().map(|r| r[2].clone()).collect())
                        .unwrap_or_default();
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("reads of {keys:?} never succeeded");
    }
}

fn list_of(v: &Value) -> Vec<i64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

#[test]
fn api_answers_and_committed_data_survives_kill_9_under_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = Cluster::start(dir.path());

    // The exact API, on keys owned by all three nodes (key k lives on node k mod 3 + 1).
    let answer = cluster.txn(
        0,
        json!([
            ["r", 7, null],
            ["append", 1, 5],
            ["append", 2, 6],
            ["r", 1, null],
            ["add", "acct", 10]
        ]),
    );
    assert_eq!(
        answer,
        Some(
            json!({"type": "ok", "value": [["r", 7, null], ["append", 1, 5], ["append", 2, 6], ["r", 1, [5]], ["add", "acct", 10]]})
        )
    );
    let answer = cluster
        .txn(1, json!([["w", 3, 1], ["add", "acct", -11]]))
        .expect("answer");
    assert_eq!(
        (answer["type"].clone(), answer["error"].clone()),
        (json!("fail"), json!("insufficient-funds"))
    );
    assert_eq!(cluster.read(2, &[3, 1]), vec![Value::Null, json!([5])]);
    let (status, bad) = http(
        cluster.client_ports[0],
        "POST",
        "/txn",
        Some(&json!({"ops": [["cas", 1, 2]]})),
    )
    .expect("answer");
    assert_eq!((status, bad["error"].clone()), (400, json!("bad-request")));
    let (_, status) = http(cluster.client_ports[1], "GET", "/status", None).expect("status");
    assert_eq!(
        (
            status["id"].clone(),
            status["nodes"].clone(),
            status["isolation"].clone()
        ),
        (json!(2), json!(3), json!("serializable"))
    );

    // Load from three client threads through all nodes; node 2 is killed midway and
    // restarted from its data dir. Each txn appends its unique tag to two keys.
    let ports = cluster.client_ports.clone();
    let outcomes: Vec<(i64, Vec<i64>, String)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|w| {
                let ports = ports.clone();
                s.spawn(move || {
                    let mut out = Vec::new();
                    let deadline = Instant::now() + Duration::from_secs(30);
                    for i in 0..80 {
                        if Instant::now() > deadline {
                            break;
                        }
                        let tag = 1000 + w * 100 + i;
                        let keys = vec![10 + (tag % 6), 10 + ((tag / 6) % 6 + 1 + tag % 6) % 6];
                        let keys: Vec<i64> = keys
                            .into_iter()
                            .collect::<BTreeSet<_>>()
                            .into_iter()
                            .collect();
                        let ops: Vec<Value> =
                            keys.iter().map(|k| json!(["append", k, tag])).collect();
                        let body = json!({ "ops": ops });
                        let port = ports[(i as usize + w as usize) % NODES];
                        let kind = match http(port, "POST", "/txn", Some(&body)) {
                            Some((_, v)) => v["type"].as_str().unwrap_or("info").to_string(),
                            None => "info".to_string(),
                        };
                        out.push((tag, keys, kind));
                        std::thread::sleep(Duration::from_millis(15));
                    }
                    out
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        cluster.kill(1);
        std::thread::sleep(Duration::from_millis(300));
        cluster.spawn(1);
        cluster.wait_healthy(1);
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker"))
            .collect()
    });
    cluster.wait_quiet();

    let keys: Vec<i64> = (10..16).collect();
    let lists: BTreeMap<i64, Vec<i64>> = keys
        .iter()
        .copied()
        .zip(cluster.read(0, &keys).iter().map(list_of))
        .collect();
    let mut committed = 0;
    for (tag, keys, kind) in &outcomes {
        let on: Vec<bool> = keys.iter().map(|k| lists[k].contains(tag)).collect();
        match kind.as_str() {
            "ok" => {
                committed += 1;
                assert!(
                    on.iter().all(|x| *x),
                    "acknowledged txn {tag} lost on some of {keys:?}: {lists:?}"
                );
            }
            "fail" => assert!(
                on.iter().all(|x| !*x),
                "failed txn {tag} visible: {lists:?}"
            ),
            _ => assert!(
                on.iter().all(|x| *x) || on.iter().all(|x| !*x),
                "txn {tag} partially applied: {lists:?}"
            ),
        }
    }
    for list in lists.values() {
        assert_eq!(
            list.len(),
            list.iter().collect::<BTreeSet<_>>().len(),
            "an append applied twice: {list:?}"
        );
    }
    let count = |k: &str| outcomes.iter().filter(|o| o.2 == k).count();
    println!(
        "load: {} ok, {} fail, {} unknown",
        count("ok"),
        count("fail"),
        count("info")
    );
    assert!(committed > 10, "too few commits: {outcomes:?}");

    // Everything survives a kill -9 of every node.
    for i in 0..NODES {
        cluster.kill(i);
    }
    for i in 0..NODES {
        cluster.spawn(i);
    }
    for i in 0..NODES {
        cluster.wait_healthy(i);
    }
    let after: BTreeMap<i64, Vec<i64>> = keys
        .iter()
        .copied()
        .zip(cluster.read(2, &keys).iter().map(list_of))
        .collect();
    assert_eq!(after, lists);
}

fn write_wal(dir: &Path, records: &[Record]) {
    std::fs::create_dir_all(dir).expect("data dir");
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).expect("record"));
        text.push('\n');
    }
    std::fs::write(dir.join("wal.jsonl"), text).expect("write wal");
}

#[test]
fn in_doubt_participants_resolve_by_asking_the_coordinator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let t = |seq| TxnId {
        node: 1,
        boot: 1,
        seq,
    };
    // Node 1 (coordinator) committed t1 and saw it end; it never decided t2.
    write_wal(
        &Cluster::data_dir(dir.path(), 0),
        &[
            Record::Boot,
            Record::Committed {
                txn: t(1),
                participants: vec![2],
            },
            Record::End { txn: t(1) },
        ],
    );
    // Node 2 crashed while both were prepared (keys 1 and 4 live on node 2).
    write_wal(
        &Cluster::data_dir(dir.path(), 1),
        &[
            Record::Boot,
            Record::Prepared {
                txn: t(1),
                coord: 1,
                writes: vec![(Key::Int(1), LoggedWrite::Set(Val::List(vec![42])))],
            },
            Record::Prepared {
                txn: t(2),
                coord: 1,
                writes: vec![(
                    Key::Int(4),
                    LoggedWrite::Extend {
                        keep: 0,
                        then: vec![43],
                    },
                )],
            },
        ],
    );
    let cluster = Cluster::start(dir.path());
    // The in-doubt txns hold their locks until resolved, then: t1 commits (from node 1's
    // log), t2 aborts (presumed abort: node 1 has no record of it).
    cluster.wait_quiet();
    assert_eq!(cluster.read(0, &[1, 4]), vec![json!([42]), Value::Null]);
    let answer = cluster.txn(2, json!([["append", 4, 1]])).expect("answer");
    assert_eq!(answer["type"], "ok", "{answer}");
}
