//! End-to-end runs against a real etcd cluster (Debian's etcd-server, unmodified), each
//! member in a network namespace of its own, faults by nftables there. Needs root, `ip`,
//! nftables (or iptables) and `etcd` on PATH; skips with a message otherwise. After every
//! run, also one interrupted by SIGINT, no namespace, host link or etcd process of that
//! run may be left.

use serde_json::Value;
use splitbrain_nemesis::netns;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod support;

/// One cluster at a time: the tests of this file would otherwise start three etcd
/// clusters at once on a small machine.
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
    assert_eq!(code, Some(0), "{results:#}");
    assert_eq!(support::checker(&results, "linearizable")["valid"], true);
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
