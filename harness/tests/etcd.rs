//! End-to-end runs against a real etcd cluster (Debian's etcd-server, unmodified), each
//! member in a network namespace of its own, the links between members through the proxy
//! mesh (cuts, one-way cuts, slow links) and nftables there (loss). Needs root, `ip`,
//! nftables (or iptables) and `etcd` on PATH; skips with a message otherwise. After every
//! run, also one interrupted by SIGINT, no namespace, host link or etcd process of that
//! run may be left.

use serde_json::Value;
use splitbrain_nemesis::netns;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support;

/// One cluster at a time: the tests of this file would otherwise start three etcd
/// clusters at once on a small machine. Under cargo-nextest (a process per test) the
/// test group `etcd` in `.config/nextest.toml` does the same.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

/// Why these tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces need it)".into());
    }
    let on_path = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("etcd").is_file()));
    if !on_path {
        return Some("`etcd` is not on PATH (Debian package etcd-server)".into());
    }
    netns::unavailable_reason()
}

macro_rules! skip_unless_runnable {
    () => {
        if let Some(why) = skip_reason() {
            support::skip::skip_here(&why);
            return;
        }
    };
}

/// `splitbrain test --target etcd --nodes 3 ARGS` in `store`, started (not awaited).
fn spawn_etcd_run(store: &Path, args: &[&str]) -> Child {
    support::spawn_test("etcd", 3, store, args)
}

/// Fails the test when the run of splitbrain process `pid` left a namespace, a host link
/// or a process naming its store.
fn assert_nothing_left(pid: u32, store: &Path) {
    let left = support::namespaces_and_links_of(pid);
    assert!(left.is_empty(), "namespaces or host links left: {left:?}");
    assert!(
        support::no_process_mentions(store),
        "etcd processes outlived the run"
    );
}

/// Fails the test unless the run of splitbrain process `pid` has namespaces, and none of
/// them routes anywhere but its own subnet (no default route: members can reach each
/// other and the harness's host link, nothing else).
fn assert_no_way_out(pid: u32) {
    let ns_prefix = format!("{}{pid}-", netns::PREFIX);
    let namespaces: Vec<String> = netns::list_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&ns_prefix))
        .collect();
    assert!(!namespaces.is_empty(), "the run made no namespaces");
    for ns in namespaces {
        let out = Command::new("ip")
            .args(["-n", &ns, "route", "show", "default"])
            .output()
            .unwrap();
        assert!(out.status.success(), "ip -n {ns} route failed");
        let routes = String::from_utf8_lossy(&out.stdout);
        assert!(
            routes.trim().is_empty(),
            "{ns} has a default route: {routes}"
        );
    }
}

/// Runs to the end; returns the exit code and results.json.
fn run_etcd(args: &[&str]) -> (Option<i32>, Value, tempfile::TempDir) {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let store = tempfile::tempdir().unwrap();
    let child = spawn_etcd_run(store.path(), args);
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let results = std::fs::read(store.path().join("latest/results.json")).unwrap_or_else(|e| {
        panic!(
            "no results.json ({e}); stdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_nothing_left(pid, store.path());
    let results: Value = serde_json::from_slice(&results).unwrap();
    (out.status.code(), results, store)
}

/// Completions of `type` of reads answered by each member (n1, n2, n3).
fn reads_by_member(store: &Path, op_type: &str) -> [usize; 3] {
    let history = std::fs::read_to_string(store.join("latest/history.jsonl")).unwrap();
    let mut counts = [0; 3];
    for op in history
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if op["type"] == op_type && op["f"] == "read" {
            if let Some(i) = op["node"]
                .as_str()
                .and_then(|n| n.strip_prefix('n')?.parse::<usize>().ok())
                .filter(|i| (1..=3).contains(i))
            {
                counts[i - 1] += 1;
            }
        }
    }
    counts
}

/// An 8 s `register` run under `nemesis` (a fault every 1.5 s on average).
fn register_run(nemesis: &str, seed: &str) -> (Option<i32>, Value, tempfile::TempDir) {
    run_etcd(&[
        "--workload",
        "register",
        "--nemesis",
        nemesis,
        "--seed",
        seed,
        "--nemesis-interval",
        "1.5",
        "--time-limit",
        "8",
    ])
}

#[test]
fn linearizable_register_stays_valid_under_partitions_kills_and_pauses() {
    skip_unless_runnable!();
    let (code, results, store) = register_run("partition,kill,pause", "3");
    support::assert_exit_0_and_valid(code, &results, "linearizable");
    let ok_reads = reads_by_member(store.path(), "ok");
    assert!(
        ok_reads.iter().all(|&n| n > 0),
        "every member must serve reads: {ok_reads:?}"
    );
}

/// The race made on purpose: cuts of 2 s and more (etcd's majority may need one or two
/// failed elections before it writes again), two keys (every write the majority
/// acknowledges makes the old leader's reads of that key stale) and a short op timeout
/// (the old leader's clients give up on writes quickly and read again). With 1 s cuts and
/// 8 keys an idle CI machine once saw no stale read in 8 s; this shape gave 12-35 certainly
/// stale reads in each of 6 runs on a loaded machine.
#[test]
fn serializable_reads_are_stale_when_the_leader_is_cut_off() {
    skip_unless_runnable!();
    let (code, results, store) = run_etcd(&[
        "--workload",
        "register",
        "--read-mode",
        "serializable",
        "--nemesis",
        "partition-leader",
        "--nemesis-interval",
        "5",
        "--time-limit",
        "12",
        "--active-keys",
        "2",
        "--op-timeout-ms",
        "500",
        "--seed",
        "1",
    ]);
    assert_eq!(code, Some(1), "{results:#}");
    assert_eq!(support::checker(&results, "linearizable")["valid"], false);
    // Served locally by whichever member a client is homed on, cut off or not.
    let ok_reads = reads_by_member(store.path(), "ok");
    assert!(ok_reads.iter().all(|&n| n > 0), "{ok_reads:?}");
}

#[test]
fn sigint_mid_run_removes_namespaces_links_and_members() {
    skip_unless_runnable!();
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|p| p.into_inner());
    let store = tempfile::tempdir().unwrap();
    let mut child = spawn_etcd_run(
        store.path(),
        &[
            "--workload",
            "append",
            "--nemesis",
            "partition,pause",
            "--nemesis-interval",
            "1",
            "--time-limit",
            "60",
            "--seed",
            "5",
        ],
    );
    let pid = child.id();
    // Mid-run: once the members are up and ops are being recorded.
    let history = store.path().join("latest/history.jsonl");
    let began = Instant::now();
    while std::fs::read_to_string(&history).map_or(0, |h| h.lines().count()) < 50 {
        assert!(
            began.elapsed() < Duration::from_secs(40),
            "the run never got going"
        );
        if let Ok(Some(status)) = child.try_wait() {
            panic!("splitbrain ended before the interrupt: {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !support::no_process_mentions(store.path()),
        "no etcd member of the run is running"
    );
    assert_no_way_out(pid);
    // SAFETY: kill(2) on the PID of the child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    let waited = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if waited.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("splitbrain did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.code().is_some(), "killed by a signal: {status}");
    assert_nothing_left(pid, store.path());
}

/// The nemesis op `f` of the history, with no `error` (the fault took effect).
fn applied_fault<'a>(ops: &'a [Value], f: &str) -> &'a Value {
    let op = ops
        .iter()
        .find(|op| op["process"] == "nemesis" && op["f"] == f)
        .unwrap_or_else(|| panic!("no {f} in the history"));
    assert!(op["value"].get("error").is_none(), "{f} failed: {op}");
    op
}

/// Slow peer links through the proxy mesh (no tc netem needed): with 50 ms added to
/// every message between members, each commit waits for a quorum's acknowledgement, a
/// round trip of at least 100 ms, so the writes invoked while the links are slow take
/// far longer than those before.
#[test]
fn slow_peer_links_slow_every_commit() {
    skip_unless_runnable!();
    let plan = support::plan_file(
        r#"[{"at_ms":4000,"for_ms":4000,"f":"slow","nodes":["n1","n2","n3"],"delay_ms":50}]"#,
    );
    let plan_path = plan.path().display().to_string();
    let (code, results, store) = run_etcd(&[
        "--workload",
        "register",
        "--nemesis-plan",
        &plan_path,
        "--rate",
        "50",
        "--time-limit",
        "10",
        "--seed",
        "1",
    ]);
    support::assert_exit_0_and_valid(code, &results, "linearizable");
    let ops = support::history(store.path());
    applied_fault(&ops, "start-slow");
    support::assert_slowed_writes(&ops, "writes", 90.0);
}

/// The member that most recently logged `became leader at term T` (highest T) in the
/// run's node logs, and how many times members became leader.
fn last_elected(store: &Path) -> (Option<String>, usize) {
    let mut best: Option<(u64, String)> = None;
    let mut elections = 0;
    for name in ["n1", "n2", "n3"] {
        let log = store.join("latest/nodes").join(name).join("node.log");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        for term in text.lines().filter_map(|l| {
            let rest = &l[l.find("became leader at term ")? + "became leader at term ".len()..];
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        }) {
            elections += 1;
            if best.as_ref().is_none_or(|(t, _)| term > *t) {
                best = Some((term, name.to_string()));
            }
        }
    }
    (best.map(|(_, n)| n), elections)
}

/// A one-way partition through the proxy mesh: the leader's messages are lost, what the
/// others send it still arrives. The followers hear no heartbeat and elect one of
/// themselves; the old leader hears the new one and follows it. After the heal writes
/// commit again and the history stays linearizable.
#[test]
fn a_leader_whose_messages_are_lost_is_replaced() {
    skip_unless_runnable!();
    let plan = support::plan_file(
        r#"[{"at_ms":3000,"for_ms":3000,"f":"partition","shape":"one-way-leader"}]"#,
    );
    let plan_path = plan.path().display().to_string();
    let (code, results, store) = run_etcd(&[
        "--workload",
        "register",
        "--nemesis-plan",
        &plan_path,
        "--rate",
        "50",
        "--time-limit",
        "9",
        "--seed",
        "1",
    ]);
    support::assert_exit_0_and_valid(code, &results, "linearizable");
    let ops = support::history(store.path());
    let cut = applied_fault(&ops, "start-partition");
    let old_leader = cut["value"]["one-way-leader"][0][0]
        .as_str()
        .unwrap_or_else(|| panic!("no leader named: {cut}"))
        .to_string();
    // One way only: the old leader's messages, not the others'.
    let blocked = cut["value"]["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 2, "{cut}");
    assert!(blocked.iter().all(|b| b[0] == old_leader.as_str()), "{cut}");
    let (last, elections) = last_elected(store.path());
    assert!(elections >= 2, "no election after the first: {elections}");
    assert!(
        last.as_deref().is_some_and(|l| l != old_leader),
        "the last leader elected is {last:?}, the cut-off leader was {old_leader}"
    );
    let healed = support::nemesis_time(&ops, "stop-partition");
    let after = support::ok_latencies(&ops, |f| f == "write")
        .iter()
        .filter(|(t, _)| *t > healed)
        .count();
    assert!(after > 0, "no write committed after the heal");
}

/// `slow-client` on etcd: the harness's clients dial a proxy on loopback in front of each
/// member's client port, and each slowed member's answers are measured there (per fault
/// window, in links.json and results.json) at no less than the delay asked, less its
/// jitter; nothing is held outside the faults' windows for a delay.
#[test]
fn slow_client_holds_the_members_answers_in_client_proxies_and_measures_it() {
    if let Some(why) = skip_reason() {
        support::skip::skip_here(&why);
        return;
    }
    let (code, results, _store) = run_etcd(&[
        "--nemesis",
        "slow-client",
        "--time-limit",
        "10",
        "--seed",
        "41",
    ]);
    assert_eq!(code, Some(0), "{results:#}");
    assert_eq!(results["valid"], true, "{results:#}");
    let links = &results["links"];
    let faults = links["faults"].as_array().expect("per-fault figures");
    let measured: Vec<&Value> = faults
        .iter()
        .filter(|f| f["measured"]["delayed_chunks"].as_u64().unwrap_or(0) > 0)
        .collect();
    assert!(!measured.is_empty(), "no slowed answer measured: {links:#}");
    for f in &measured {
        assert!(
            f["links"]
                .as_array()
                .unwrap()
                .iter()
                .all(|l| l.as_str().unwrap().ends_with("->clients")),
            "{f}"
        );
        let least =
            f["asked"]["delay_ms"].as_f64().unwrap() - f["asked"]["jitter_ms"].as_f64().unwrap();
        assert!(
            f["measured"]["mean_delay_ms"].as_f64().unwrap() >= least,
            "{f}"
        );
    }
    assert_eq!(links["outside"]["delayed_chunks"], 0, "{links:#}");
}
