//! End-to-end runs of `--target maelstrom`: the example nodes of `examples/maelstrom`
//! (Python and Node.js, unmodified Maelstrom protocol) under splitbrain's faults, each
//! correct node valid and each named bug found; and nodes that break the protocol, each
//! ending the run with exit code 4, an error naming the node and the line, and no process
//! left behind. Real processes, bounded in time.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support;

/// True when `program --version` runs here; tests that need it skip (counted; a failure
/// under CI) otherwise.
fn have(program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        support::skip::skip_here(&format!("{program} is not on PATH"));
    }
    ok
}

/// An example node by its path under `examples/maelstrom`.
fn example(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/maelstrom")
        .join(rel);
    assert!(p.is_file(), "{} is missing", p.display());
    p.display().to_string()
}

/// Runs node `bin` on `nodes` nodes with `args`. The store's path is passed to every node
/// as an (ignored) argument, so the leftover-process check can find them.
fn run(bin: &str, nodes: usize, args: &[&str]) -> (Option<i32>, Value, String) {
    let store = tempfile::tempdir().unwrap();
    run_in(store.path(), bin, nodes, args)
}

/// [`run`] with the run store at `store`, kept for the test to read the run's files.
fn run_in(store: &Path, bin: &str, nodes: usize, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_splitbrain"))
        .args([
            "test",
            "--target",
            "maelstrom",
            "--no-progress",
            "--bin",
            bin,
        ])
        .args(["--nodes", &nodes.to_string()])
        .arg("--bin-arg")
        .arg(store)
        .args(args)
        .arg("--store")
        .arg(store)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        support::no_process_mentions(store),
        "node processes outlived the run"
    );
    let results = std::fs::read(store.join("latest/results.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    (out.status.code(), results, stderr)
}

fn verdicts(results: &Value) -> Vec<(String, Value)> {
    results["results"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    (
                        r["checker"].as_str().unwrap_or("").to_string(),
                        r["valid"].clone(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn python_broadcast_is_valid_under_partitions_and_counts_its_messages() {
    if !have("python3") {
        return;
    }
    let (code, r, err) = run(
        &example("python/broadcast.py"),
        5,
        &[
            "--workload",
            "broadcast",
            "--nemesis",
            "partition",
            "--nemesis-interval",
            "2",
            "--latency",
            "5",
            "--time-limit",
            "6",
            "--seed",
            "3",
        ],
    );
    assert_eq!(code, Some(0), "{:?}\n{err}", verdicts(&r));
    let net = &r["net"];
    assert!(net["server_messages"].as_u64().unwrap() > 0, "{net:#}");
    assert!(net["msgs_per_op"].as_f64().unwrap() > 1.0, "{net:#}");
    assert_eq!(net["by_node"].as_object().unwrap().len(), 5);
}

#[test]
fn js_lossy_broadcast_loses_acknowledged_messages_under_a_partition() {
    if !have("node") {
        return;
    }
    let (code, r, err) = run(
        &example("js/broadcast_lossy.js"),
        5,
        &[
            "--workload",
            "broadcast",
            "--nemesis",
            "partition",
            "--nemesis-interval",
            "2",
            "--time-limit",
            "6",
            "--seed",
            "3",
        ],
    );
    assert_eq!(code, Some(1), "{:?}\n{err}", verdicts(&r));
    let conv = support::checker(&r, "convergence");
    assert_eq!(conv["valid"], false);
    assert!(
        conv["anomaly_types"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "divergent" || a == "lost"),
        "{conv:#}"
    );
}

#[test]
fn a_counter_that_double_counts_retries_is_caught_and_the_correct_one_passes() {
    if !have("python3") || !have("node") {
        return;
    }
    let args = [
        "--workload",
        "pn-counter",
        "--nemesis",
        "partition",
        "--nemesis-interval",
        "2",
        "--latency",
        "20",
        "--time-limit",
        "6",
        "--seed",
        "5",
    ];
    let (code, r, err) = run(&example("python/g_counter_double.py"), 3, &args);
    assert_eq!(code, Some(1), "{:?}\n{err}", verdicts(&r));
    let conv = support::checker(&r, "convergence");
    assert!(
        conv["anomaly_types"].to_string().contains("unexpected")
            || conv["anomaly_types"].to_string().contains("lost"),
        "{conv:#}"
    );
    let (code, r, err) = run(&example("js/g_counter.js"), 3, &args);
    assert_eq!(code, Some(0), "{:?}\n{err}", verdicts(&r));
}

#[test]
fn local_reads_are_not_linearizable_and_the_single_leader_is() {
    if !have("python3") || !have("node") {
        return;
    }
    let args = [
        "--workload",
        "lin-kv",
        "--nemesis",
        "partition",
        "--nemesis-interval",
        "2",
        "--time-limit",
        "6",
        "--seed",
        "2",
    ];
    let (code, r, err) = run(&example("js/lin_kv_stale.js"), 3, &args);
    assert_eq!(code, Some(1), "{:?}\n{err}", verdicts(&r));
    assert_eq!(support::checker(&r, "linearizable")["valid"], false);
    let (code, r, err) = run(&example("python/lin_kv.py"), 3, &args);
    assert_eq!(code, Some(0), "{:?}\n{err}", verdicts(&r));
}

/// Writes a node program into a fresh directory; returns (dir, path).
fn script(body: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("node.py");
    std::fs::write(
        &path,
        format!("#!/usr/bin/env python3\nimport sys, json\n{body}"),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&path, perm).unwrap();
    (dir, path)
}

/// Answers init, then handles each later message with `on_msg` (Python, `m` the message,
/// `send(dest, body)` in scope).
const PRELUDE: &str = r#"
def send(dest, body):
    sys.stdout.write(json.dumps({"src": me, "dest": dest, "body": body}) + "\n")
    sys.stdout.flush()
me = None
for line in sys.stdin:
    m = json.loads(line)
    b = m["body"]
    if b["type"] == "init":
        me = b["node_id"]
        send(m["src"], {"type": "init_ok", "in_reply_to": b["msg_id"]})
        continue
"#;

fn expect_protocol_error(body: &str, want: &[&str]) {
    let (_dir, path) = script(body);
    let (code, _r, err) = run(
        path.to_str().unwrap(),
        2,
        &[
            "--workload",
            "echo",
            "--nemesis",
            "none",
            "--time-limit",
            "3",
            "--seed",
            "1",
        ],
    );
    assert_eq!(code, Some(4), "stderr:\n{err}");
    for w in want {
        assert!(err.contains(w), "stderr lacks {w:?}:\n{err}");
    }
}

/// Maelstrom's network takes any known `src` (a follower forwarding a client's request
/// keeping the client's `src`, so the leader answers the client: Maelstrom's
/// `demo/python/raft.py`), and its services answer a node still handling `init` (a node
/// whose `init` waits for a `seq-kv` write: Maelstrom's Go library allows it).
#[test]
fn forwarded_client_requests_and_services_during_init_work_as_in_maelstrom() {
    if !have("python3") {
        return;
    }
    let (_dir, path) = script(
        r#"
def send(src, dest, body):
    sys.stdout.write(json.dumps({"src": src, "dest": dest, "body": body}) + "\n")
    sys.stdout.flush()
me = None
init = None
for line in sys.stdin:
    m = json.loads(line)
    b = m["body"]
    if b["type"] == "init":
        me, init = b["node_id"], m
        send(me, "seq-kv", {"type": "write", "key": me, "value": 1, "msg_id": 1})
    elif b["type"] == "write_ok":
        send(me, init["src"], {"type": "init_ok", "in_reply_to": init["body"]["msg_id"]})
    elif b["type"] == "echo" and me != "n0":
        send(m["src"], "n0", b)
    elif b["type"] == "echo":
        send(me, m["src"], {"type": "echo_ok", "echo": b["echo"], "in_reply_to": b["msg_id"]})
"#,
    );
    let (code, r, err) = run(
        path.to_str().unwrap(),
        3,
        &["--workload", "echo", "--time-limit", "3", "--seed", "1"],
    );
    assert_eq!(code, Some(0), "{:?}\n{err}", verdicts(&r));
    let by_node = &r["net"]["by_node"];
    // n1 and n2 forwarded: n0 answered every client.
    assert!(by_node["n2"]["sent"].as_u64().unwrap() > 0, "{by_node:#}");
    assert!(
        r["net"]["service_messages"].as_u64().unwrap() >= 6,
        "{:#}",
        r["net"]
    );
}

#[test]
fn a_line_that_is_not_json_names_the_node_and_the_line() {
    if !have("python3") {
        return;
    }
    expect_protocol_error(
        &format!("{PRELUDE}    print('debug: got', b['type'], flush=True)\n"),
        &[
            "stdout line 2",
            "expected a JSON message object",
            "debug: got echo",
        ],
    );
}

#[test]
fn a_reply_to_an_unknown_msg_id_is_a_protocol_error() {
    if !have("python3") {
        return;
    }
    expect_protocol_error(
        &format!("{PRELUDE}    send(m['src'], {{'type': 'echo_ok', 'echo': b['echo'], 'in_reply_to': b['msg_id'] + 1000}})\n"),
        &["stdout line 2", "never sent"],
    );
}

#[test]
fn a_node_that_exits_at_start_is_named_with_its_status_and_stderr() {
    if !have("python3") {
        return;
    }
    expect_protocol_error(
        "sys.stderr.write('cannot open config\\n')\nsys.exit(3)\n",
        // Both nodes exit; whichever is noticed first is named.
        &[
            "node n",
            "exited on its own (exit status: 3)",
            "cannot open config",
        ],
    );
}

#[test]
fn a_node_that_never_answers_init_is_named() {
    if !have("python3") {
        return;
    }
    expect_protocol_error(
        "for line in sys.stdin:\n    pass\n",
        &["node n0 did not answer init within 10 s"],
    );
}

#[test]
fn local_kafka_offsets_collide_and_the_single_leader_keeps_its_logs() {
    if !have("python3") || !have("node") {
        return;
    }
    let args = [
        "--workload",
        "kafka",
        "--nemesis",
        "partition",
        "--nemesis-interval",
        "1.5",
        "--time-limit",
        "5",
        "--seed",
        "4",
    ];
    let (code, r, err) = run(&example("python/kafka_local.py"), 3, &args);
    assert_eq!(code, Some(1), "{:?}\n{err}", verdicts(&r));
    let kafka = support::checker(&r, "kafka");
    assert_eq!(kafka["valid"], false);
    assert!(
        kafka["anomaly_types"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "inconsistent-offsets"),
        "{kafka:#}"
    );
    let (code, r, err) = run(&example("js/kafka.js"), 3, &args);
    assert_eq!(code, Some(0), "{:?}\n{err}", verdicts(&r));
    let kafka = support::checker(&r, "kafka");
    assert!(
        kafka["details"]["final_reads"].as_u64().unwrap() > 0,
        "{kafka:#}"
    );
    assert!(kafka["details"]["polls"].as_u64().unwrap() > 0, "{kafka:#}");
    // Latency per request type, every kind the workload sends.
    let by_type = r["net"]["by_op_type"].as_object().unwrap();
    for kind in ["send", "poll", "commit_offsets", "list_committed_offsets"] {
        assert!(
            by_type[kind]["client_ops"].as_u64().unwrap() > 0,
            "{by_type:#?}"
        );
        assert!(by_type[kind]["latency_ms"]["p99"].as_f64().is_some());
    }
}

/// A broadcast node that names its one peer by number, as mcastorina's Gossip Glomers 3c
/// does: node `nI` forwards every new message to `n{(I+1) % N}` (a ring), resending every
/// 100 ms until the peer acknowledges, so partitions only delay it. Maelstrom names the
/// nodes n0..n(N-1), where this ring is whole.
const RING_NODE: &str = r#"
import threading, time
lock = threading.Lock()
def send(dest, body):
    with lock:
        sys.stdout.write(json.dumps({"src": me, "dest": dest, "body": body}) + "\n")
        sys.stdout.flush()
me, succ, seen, unacked, next_id = None, None, set(), {}, 0
def resend():
    while True:
        time.sleep(0.1)
        with lock:
            pending = list(unacked.items())
        for mid, v in pending:
            send(succ, {"type": "broadcast", "message": v, "msg_id": mid})
threading.Thread(target=resend, daemon=True).start()
for line in sys.stdin:
    m = json.loads(line)
    b = m["body"]
    t = b["type"]
    if t == "init":
        me = b["node_id"]
        succ = "n%d" % ((int(me[1:]) + 1) % len(b["node_ids"]))
        send(m["src"], {"type": "init_ok", "in_reply_to": b["msg_id"]})
    elif t == "topology":
        send(m["src"], {"type": "topology_ok", "in_reply_to": b["msg_id"]})
    elif t == "broadcast":
        v = b["message"]
        if v not in seen:
            seen.add(v)
            next_id += 1
            with lock:
                unacked[next_id] = v
            send(succ, {"type": "broadcast", "message": v, "msg_id": next_id})
        send(m["src"], {"type": "broadcast_ok", "in_reply_to": b["msg_id"]})
    elif t == "broadcast_ok":
        with lock:
            unacked.pop(b["in_reply_to"], None)
    elif t == "read":
        send(m["src"], {"type": "read_ok", "messages": sorted(seen), "in_reply_to": b["msg_id"]})
"#;

/// Every string in a JSON value, however nested.
fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        Value::Object(o) => o.values().flat_map(strings).collect(),
        _ => vec![],
    }
}

/// Maelstrom names the nodes of `--node-count 5` n0..n4: a node computing its ring
/// successor from its own number reaches a node that exists, and the run shows the same
/// names everywhere — the nodes' directories, the history's `node`, the fault events,
/// the schedule in test.json and the message statistics.
#[test]
fn nodes_are_named_n0_to_n4_as_maelstrom_names_them_everywhere() {
    if !have("python3") {
        return;
    }
    let (_dir, path) = script(RING_NODE);
    let store = tempfile::tempdir().unwrap();
    let (code, r, err) = run_in(
        store.path(),
        path.to_str().unwrap(),
        5,
        &[
            "--workload",
            "broadcast",
            "--rate",
            "10",
            "--nemesis",
            "partition",
            "--nemesis-interval",
            "1",
            "--time-limit",
            "5",
            "--seed",
            "1",
        ],
    );
    assert_eq!(code, Some(0), "{:?}\n{err}", verdicts(&r));
    let names: Vec<String> = (0..5).map(|i| format!("n{i}")).collect();
    let run_dir = store.path().join("latest");
    let mut dirs: Vec<String> = std::fs::read_dir(run_dir.join("nodes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    dirs.sort();
    assert_eq!(dirs, names);
    let by_node: Vec<String> = r["net"]["by_node"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(by_node, names);
    let history = std::fs::read_to_string(run_dir.join("history.jsonl")).unwrap();
    let ops: Vec<Value> = history
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let client_nodes: std::collections::BTreeSet<String> = ops
        .iter()
        .filter_map(|o| o["node"].as_str().map(str::to_string))
        .collect();
    assert_eq!(client_nodes.into_iter().collect::<Vec<_>>(), names);
    let partitions: Vec<&Value> = ops.iter().filter(|o| o["f"] == "start-partition").collect();
    assert!(!partitions.is_empty(), "no partition in {history}");
    let fault_names: std::collections::BTreeSet<String> = partitions
        .iter()
        .flat_map(|o| strings(&o["value"]))
        .filter(|s| s.starts_with('n') && s[1..].parse::<u32>().is_ok())
        .collect();
    assert!(fault_names.contains("n0"), "{fault_names:?}");
    assert!(
        fault_names.iter().all(|n| names.contains(n)),
        "{fault_names:?}"
    );
    let test: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("test.json")).unwrap()).unwrap();
    let scheduled: std::collections::BTreeSet<String> = test["nemesis_schedule"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| strings(&f["groups"]))
        .collect();
    assert!(
        scheduled.contains("n0") && !scheduled.contains("n5"),
        "{scheduled:?}"
    );
}

/// A fault plan for a Maelstrom run names its nodes n0..n(N-1); a node it does not have
/// (a plan written for splitbrain's other targets, n1..nN) is a usage error naming the
/// run's nodes, before anything starts.
#[test]
fn a_maelstrom_fault_plan_names_n0_and_a_missing_node_is_refused() {
    if !have("python3") {
        return;
    }
    let (dir, path) = script(RING_NODE);
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"[{"at_ms": 500, "for_ms": 1000, "f": "partition", "shape": "isolate",
             "groups": [["n0"], ["n1", "n2"]]}]"#,
    )
    .unwrap();
    let args = |plan: &Path| {
        vec![
            "--workload".to_string(),
            "broadcast".into(),
            "--rate".into(),
            "10".into(),
            "--nemesis-plan".into(),
            plan.display().to_string(),
            "--time-limit".into(),
            "3".into(),
            "--seed".into(),
            "1".into(),
        ]
    };
    let store = tempfile::tempdir().unwrap();
    let a = args(&plan);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, r, err) = run_in(store.path(), path.to_str().unwrap(), 3, &a);
    assert_eq!(code, Some(0), "{:?}\n{err}", verdicts(&r));
    let history = std::fs::read_to_string(store.path().join("latest/history.jsonl")).unwrap();
    let start = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|o| o["f"] == "start-partition")
        .expect("the plan's partition started");
    assert_eq!(
        start["value"]["isolate"],
        serde_json::json!([["n0"], ["n1", "n2"]])
    );
    assert!(start["value"].get("error").is_none(), "{start}");

    std::fs::write(
        &plan,
        r#"[{"at_ms": 500, "for_ms": 1000, "f": "kill", "nodes": ["n3"]}]"#,
    )
    .unwrap();
    let a = args(&plan);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let (code, _r, err) = run(path.to_str().unwrap(), 3, &a);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("node \"n3\" is not a node of this run (its nodes are n0..n2)"),
        "{err}"
    );
}
