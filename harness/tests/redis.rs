//! End to end against real Redis + Sentinel (Debian's redis-server and redis-sentinel),
//! one network namespace per node, the links between nodes through the proxy mesh: a
//! partition that cuts the primary off makes the sentinels on the majority side promote
//! a replica, and the writes the old primary acknowledged meanwhile are discarded when it
//! rejoins as a replica; slow replica links delay every `WAIT 1` write. Afterwards (also
//! after SIGINT mid-run) none of the run's namespaces, host links or Redis processes
//! may be left. Skips (counted; a failure under CI=true) without root, iproute2,
//! nftables or Redis.

use crate::support;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// Why this test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces need it)".into());
    }
    for (program, package) in [
        ("redis-server", "redis-server"),
        ("redis-sentinel", "redis-sentinel"),
        ("nft", "nftables"),
    ] {
        if splitbrain::run::programs::find_on_path(program).is_none()
            && !Path::new("/usr/sbin").join(program).is_file()
        {
            return Some(format!("`{program}` is missing (Debian package {package})"));
        }
    }
    splitbrain_nemesis::netns::unavailable_reason()
}

/// A fresh store and, in it, a plan that cuts the primary off from `at_ms` for
/// `for_ms`; None (after saying why) where the test cannot run.
fn setup(at_ms: u64, for_ms: u64) -> Option<(tempfile::TempDir, String)> {
    if let Some(why) = skip_reason() {
        support::skip::skip_here(&why);
        return None;
    }
    let store = tempfile::tempdir().unwrap();
    let path = store.path().join("plan.json");
    let text = format!(
        r#"[{{"at_ms":{at_ms},"for_ms":{for_ms},"f":"partition","shape":"isolate-leader"}}]"#
    );
    std::fs::write(&path, text).unwrap();
    Some((store, path.display().to_string()))
}

fn spawn(store: &Path, args: &[&str]) -> Child {
    support::spawn_test("redis", 3, store, args)
}

/// Processes working inside `store` (a Redis server's working directory is its data
/// directory; its process title names its config file there).
fn processes_in(store: &Path) -> Vec<u32> {
    let marker = store.display().to_string();
    support::pids_where(|proc_dir| {
        std::fs::read_link(proc_dir.join("cwd")).is_ok_and(|c| c.starts_with(store))
            || std::fs::read(proc_dir.join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
    })
}

fn assert_clean(pid: u32, store: &Path) {
    assert_eq!(
        support::namespaces_and_links_of(pid),
        Vec::<String>::new(),
        "namespaces or links left"
    );
    assert_eq!(
        processes_in(store),
        Vec::<u32>::new(),
        "processes of the run left"
    );
}

#[test]
fn a_sentinel_failover_loses_acknowledged_appends() {
    let Some((store, plan)) = setup(1000, 6000) else {
        return;
    };
    let child = spawn(
        store.path(),
        &[
            "--workload",
            "append",
            "--nemesis-plan",
            &plan,
            "--time-limit",
            "9",
            "--seed",
            "1",
        ],
    );
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let results = std::fs::read(store.path().join("latest/results.json")).unwrap_or_else(|e| {
        panic!(
            "no results.json ({e}); stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let results: serde_json::Value = serde_json::from_slice(&results).unwrap();
    assert_clean(pid, store.path());
    assert_eq!(out.status.code(), Some(1), "{results:#}");
    let lin = support::checker(&results, "linearizable");
    assert_eq!(lin["valid"], false, "{lin:#}");
    // the failover really happened: a sentinel switched the primary
    let log = std::fs::read_to_string(store.path().join("latest/nodes/n2/sentinel.log")).unwrap();
    assert!(log.contains("+switch-master"), "{log}");
}

#[test]
fn sigint_mid_run_leaves_nothing_behind() {
    let Some((store, plan)) = setup(500, 20_000) else {
        return;
    };
    let mut child = spawn(
        store.path(),
        &[
            "--workload",
            "register",
            "--nemesis-plan",
            &plan,
            "--time-limit",
            "30",
        ],
    );
    let pid = child.id();
    // wait until the run is under way: the partition is in force (nft rules in place)
    let started = Instant::now();
    let history = || {
        std::fs::read_dir(store.path().join("redis-register"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.path().join("history.jsonl"))
    };
    loop {
        let partitioned = history()
            .and_then(|h| std::fs::read_to_string(h).ok())
            .is_some_and(|t| t.contains("start-partition"));
        if partitioned {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run never got going"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "splitbrain exited early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !support::namespaces_and_links_of(pid).is_empty(),
        "the run made no namespaces"
    );
    // SAFETY: kill(2) on the PID of a child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "an interrupted run exits 4; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_clean(pid, store.path());
}

/// Replication through the proxy mesh (no tc netem needed): with the replicas' links
/// slowed by 50 ms each way, `WAIT 1` after each write waits for a replica to receive the
/// write and acknowledge it, a round trip of at least 100 ms, so the writes invoked while
/// the links are slow take far longer than those before. (Sentinel's pings cross the same
/// links, 100 ms late, well inside its 1 s down-after: no failover.)
#[test]
fn slow_replica_links_delay_every_acknowledged_write() {
    if let Some(why) = skip_reason() {
        support::skip::skip_here(&why);
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let plan = store.path().join("slow.json");
    std::fs::write(
        &plan,
        r#"[{"at_ms":3000,"for_ms":4000,"f":"slow","nodes":["n2","n3"],"delay_ms":50}]"#,
    )
    .unwrap();
    let child = spawn(
        store.path(),
        &[
            "--workload",
            "register",
            "--wait",
            "1",
            "--nemesis-plan",
            &plan.display().to_string(),
            "--rate",
            "50",
            "--time-limit",
            "9",
            "--seed",
            "1",
        ],
    );
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_clean(pid, store.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ops = support::history(store.path());
    let start = ops
        .iter()
        .find(|op| op["f"] == "start-slow")
        .expect("no start-slow");
    assert!(start["value"].get("error").is_none(), "{start}");
    support::assert_slowed_writes(&ops, "WAIT 1 writes", 90.0);
    // Nobody failed over: n1 stayed the primary.
    let log = std::fs::read_to_string(store.path().join("latest/nodes/n2/sentinel.log")).unwrap();
    assert!(!log.contains("+switch-master"), "{log}");
}

/// `slow-client` on Redis is refused at start, with the reason (the clients derive each
/// sentinel's address from the node's), before any namespace or server exists.
#[test]
fn slow_client_is_refused_at_start_with_the_reason() {
    if let Some(why) = skip_reason() {
        support::skip::skip_here(&why);
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let child = spawn(
        store.path(),
        &["--nemesis", "slow-client", "--time-limit", "5"],
    );
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("`slow-client` on redis holds each node's answers in a proxy")
            && stderr.contains("find each node's sentinel at the node's own address"),
        "{stderr}"
    );
    assert!(support::namespaces_and_links_of(pid).is_empty());
}
