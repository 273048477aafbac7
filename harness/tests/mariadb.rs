//! End-to-end runs against real MariaDB 10.11 (Debian's mariadb-server, galera-4): a single
//! server at REPEATABLE READ loses updates with `innodb_snapshot_isolation` off and does
//! not with it on; a healthy three-node Galera cluster loses updates across nodes; and a
//! Galera cluster whose nodes are killed with -9 (all of them, or a majority) recovers and
//! serves again. Needs the server's programs, and for Galera root (network namespaces);
//! skips otherwise, through `testing/skip.rs`. One cluster at a time; each run leaves no
//! server or work directory.

use crate::support;
use support::skip;

use serde_json::Value;
use splitbrain::systems::mariadb::WorkDir;
use std::path::Path;
use std::sync::Mutex;

/// One MariaDB run at a time: the tests would otherwise start several clusters at once
/// on a small machine. Under cargo-nextest (a process per test) the test group
/// `mariadb` in `.config/nextest.toml` does the same.
static ONE_RUN: Mutex<()> = Mutex::new(());

/// Why no MariaDB server can be started here, if none can.
fn server_missing() -> Option<String> {
    for program in ["/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db"] {
        if !Path::new(program).is_file() {
            return Some(format!("{program} (Debian package mariadb-server)"));
        }
    }
    None
}

/// Why no Galera cluster can be started here, if none can.
fn galera_missing() -> Option<String> {
    server_missing()
        .or_else(skip::root_missing)
        .or_else(|| {
            (!Path::new("/usr/lib/galera/libgalera_smm.so").is_file())
                .then(|| "/usr/lib/galera/libgalera_smm.so (Debian package galera-4)".into())
        })
        .or_else(|| skip::program_missing("rsync", "--version", "rsync"))
        .or_else(splitbrain_nemesis::netns::unavailable_reason)
}

/// Runs one test against fresh MariaDB nodes; checks that nothing of them is left.
fn run_mariadb(nodes: usize, args: &[&str]) -> (Option<i32>, Value, Vec<Value>) {
    let (code, results, ops, _) = run_mariadb_with_logs(nodes, args);
    (code, results, ops)
}

/// [`run_mariadb`], with every node's log.
fn run_mariadb_with_logs(
    nodes: usize,
    args: &[&str],
) -> (Option<i32>, Value, Vec<Value>, Vec<String>) {
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let (code, results, store) = support::run_target("mariadb", nodes, args);
    let run = std::fs::canonicalize(store.path().join("latest")).unwrap();
    for i in 1..=nodes {
        let work = WorkDir::for_node(&run.join(format!("nodes/n{i}/data")));
        assert!(
            !work.root().exists(),
            "{} was not removed",
            work.root().display()
        );
        let left = support::pids_where(|p| {
            std::fs::read(p.join("cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c).contains(&*work.root().to_string_lossy())
            })
        });
        assert!(
            left.is_empty(),
            "MariaDB processes outlived the run: {left:?}"
        );
    }
    let ops = support::history(store.path());
    let logs = (1..=nodes)
        .map(|i| std::fs::read_to_string(run.join(format!("nodes/n{i}/node.log"))).unwrap())
        .collect();
    (code, results, ops, logs)
}

/// The anomaly types Elle named.
fn anomalies(results: &Value, checker: &str) -> Vec<String> {
    support::checker(results, checker)["anomaly_types"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `--rate 0` over two keys: every transaction overlaps others on the same keys.
const CONTENTION: [&str; 6] = ["--rate", "0", "--active-keys", "2", "--concurrency", "10"];

#[test]
fn single_server_repeatable_read_loses_updates_unless_snapshot_isolation_is_on() {
    if skip::unless(module_path!(), server_missing()) {
        return;
    }
    let base = [
        "--workload",
        "list-append",
        "--read-mode",
        "repeatable-read",
        "--nemesis",
        "none",
        "--time-limit",
        "4",
        "--seed",
        "1",
    ];
    let args: Vec<&str> = base.iter().chain(CONTENTION.iter()).copied().collect();
    let (code, results, _) = run_mariadb(1, &args);
    assert_eq!(code, Some(1), "{results:#}");
    let off = anomalies(&results, "elle-list-append");
    assert!(off.iter().any(|a| a == "lost-update"), "{off:?}");

    let mut with_si = args.clone();
    with_si.extend(["--setting", "innodb_snapshot_isolation=ON"]);
    let (_, results, ops) = run_mariadb(1, &with_si);
    let on = anomalies(&results, "elle-list-append");
    assert!(!on.iter().any(|a| a == "lost-update"), "{on:?}");
    // The second writer of a row changed since its snapshot is refused, definitely.
    assert!(
        ops.iter().any(|op| op["type"] == "fail"
            && op["error"].as_str().is_some_and(|e| e.starts_with("1020"))),
        "no 1020 refusal recorded as fail"
    );
    let committed = ops.iter().filter(|op| op["type"] == "ok").count();
    assert!(committed > 100, "only {committed} commits");
}

#[test]
fn a_healthy_galera_cluster_loses_updates_across_nodes() {
    if skip::unless(module_path!(), galera_missing()) {
        return;
    }
    let base = [
        "--workload",
        "list-append",
        "--read-mode",
        "repeatable-read",
        "--nemesis",
        "none",
        "--time-limit",
        "6",
        "--seed",
        "1",
        "--op-timeout-ms",
        "3000",
    ];
    let args: Vec<&str> = base.iter().chain(CONTENTION.iter()).copied().collect();
    let (code, results, ops) = run_mariadb(3, &args);
    assert_eq!(code, Some(1), "{results:#}");
    let found = anomalies(&results, "elle-list-append");
    assert!(found.iter().any(|a| a == "lost-update"), "{found:?}");
    // Every node took commits: the race is across nodes.
    for node in ["n1", "n2", "n3"] {
        assert!(
            ops.iter()
                .any(|op| op["type"] == "ok" && op["node"] == node),
            "no commit on {node}"
        );
    }
}

/// The Galera state UUID every node log says it connected to the cluster at, in order
/// (`Server nI connected to cluster at position UUID:SEQNO`).
fn joined_at(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| {
            l.split_once("connected to cluster at position ")?
                .1
                .split(':')
                .next()
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn a_galera_cluster_killed_with_minus_9_recovers_and_serves() {
    if skip::unless(module_path!(), galera_missing()) {
        return;
    }
    let plan = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        plan.path(),
        r#"[{"at_ms":1000,"for_ms":1500,"f":"kill","nodes":["n2"]},
            {"at_ms":5000,"for_ms":1500,"f":"kill","nodes":["n1","n2","n3"]}]"#,
    )
    .unwrap();
    let plan = plan.path().display().to_string();
    let (_, results, ops, logs) = run_mariadb_with_logs(
        3,
        &[
            "--workload",
            "append",
            "--nemesis-plan",
            &plan,
            "--time-limit",
            "30",
            "--seed",
            "2",
            "--rate",
            "100",
            "--op-timeout-ms",
            "3000",
        ],
    );
    let nemesis = |f: &str| {
        ops.iter()
            .enumerate()
            .filter(|(_, op)| op["process"] == "nemesis" && op["f"] == f)
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        nemesis("kill").len(),
        2,
        "the plan's two kills are not in the history"
    );
    let restarts = nemesis("restart");
    assert_eq!(
        restarts.len(),
        2,
        "the plan's two restarts are not in the history"
    );
    let heal = nemesis("heal").last().copied().unwrap_or(ops.len());
    // Appends committed between the restart after every node was killed and the heal
    // (after the heal come only the final reads).
    let committed = |from: usize, to: usize| {
        ops[from..to]
            .iter()
            .filter(|op| op["type"] == "ok" && op["f"] == "append")
            .count()
    };
    let before = committed(0, restarts[1]);
    let after = committed(restarts[1], heal);
    println!("appends committed before the last restart: {before}, after it: {after}");
    assert!(
        after > 10,
        "only {after} appends committed after every node was killed and restarted: {results:#}"
    );
    // The cluster was founded again from the most advanced node, as an operator would,
    // and kept its history: every node rejoined at the cluster's own state UUID, not at
    // the empty one `pc.recovery` re-forms at when no node is told its position.
    assert!(
        logs.iter().any(|l| l.contains("founds the cluster again")),
        "no node founded the cluster again"
    );
    for (i, log) in logs.iter().enumerate() {
        let uuids = joined_at(log);
        println!("n{}: connected to the cluster at {uuids:?}", i + 1);
        assert!(uuids.len() >= 2, "n{} did not rejoin: {uuids:?}", i + 1);
        assert!(
            uuids
                .iter()
                .all(|u| u == &uuids[0] && !u.starts_with("00000000")),
            "n{} joined another history: {uuids:?}",
            i + 1
        );
    }
    // The checkers ran on a history with reads (lost-appends and linearizability).
    let lost = support::checker(&results, "lost-appends");
    println!("lost-appends: {}", lost["valid"]);
    assert_ne!(lost["valid"], "unknown", "{lost:#}");
}

#[test]
fn a_galera_cluster_serves_again_after_a_majority_is_killed() {
    if skip::unless(module_path!(), galera_missing()) {
        return;
    }
    // Two of three killed for less than Galera's suspect timeout (5 s): restarted while
    // the survivor still reports the primary view that counts them, which it then loses.
    let (after, results, logs) = appends_after_the_last_restart(
        r#"[{"at_ms":1000,"for_ms":1500,"f":"kill","nodes":["n2","n3"]}]"#,
        "20",
    );
    println!("appends acknowledged after the restart: {after}");
    // The quorum was reset on the survivor (or a restarted node founded the cluster),
    // once the survivor had left the primary component.
    let reset =
        logged(&logs, "the quorum was reset on").or_else(|| logged(&logs, "founds the cluster"));
    println!("{}", reset.unwrap_or("no quorum reset in the node logs"));
    assert!(reset.is_some(), "the quorum was not reset");
    assert!(
        after > 10,
        "only {after} appends acknowledged after the majority was restarted: {results:#}"
    );
    let lost = support::checker(&results, "lost-appends");
    println!("lost-appends: {}", lost["valid"]);
    assert_ne!(lost["valid"], "unknown", "{lost:#}");
}

/// Runs the append workload under `plan` (a `--nemesis-plan` file's text) for
/// `time_limit` seconds; returns how many appends were acknowledged after the plan's
/// last restart (and before the heal, after which come only the final reads), the
/// results, and every node's log.
fn appends_after_the_last_restart(plan: &str, time_limit: &str) -> (usize, Value, Vec<String>) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), plan).unwrap();
    let file = file.path().display().to_string();
    let (_, results, ops, logs) = run_mariadb_with_logs(
        3,
        &[
            "--workload",
            "append",
            "--nemesis-plan",
            &file,
            "--time-limit",
            time_limit,
            "--seed",
            "3",
            "--rate",
            "100",
            "--op-timeout-ms",
            "3000",
        ],
    );
    let nemesis = |f: &str| {
        ops.iter()
            .rposition(|op| op["process"] == "nemesis" && op["f"] == f)
            .unwrap_or_else(|| panic!("no nemesis {f} in the history"))
    };
    let (restart, heal) = (nemesis("restart"), nemesis("heal"));
    let after = ops[restart..heal]
        .iter()
        .filter(|op| op["type"] == "ok" && op["f"] == "append")
        .count();
    (after, results, logs)
}

/// The first line of the node logs that holds `text`.
fn logged<'a>(logs: &'a [String], text: &str) -> Option<&'a str> {
    logs.iter()
        .find_map(|l| l.lines().find(|line| line.contains(text)))
}

#[test]
fn a_galera_cluster_serves_again_when_its_one_primary_member_is_killed_before_the_others_join() {
    if skip::unless(module_path!(), galera_missing()) {
        return;
    }
    // n1 and n2 killed; their restart resets the quorum on n3 (once n3 has noticed, 5 s
    // on), and the nemesis, which waits for a restart, kills n3 as soon as it returns:
    // n1 and n2 are still starting, and wait in a non-primary component of their own
    // for a primary that is gone, answering no SQL. n3 is restarted at once.
    let (after, results, logs) = appends_after_the_last_restart(
        r#"[{"at_ms":1000,"for_ms":1500,"f":"kill","nodes":["n1","n2"]},
            {"at_ms":3000,"for_ms":1000,"f":"kill","nodes":["n3"]}]"#,
        "20",
    );
    let founded = logged(&logs, "founds the cluster again");
    println!("appends acknowledged after n3's restart: {after}; {founded:?}");
    // n3, the most advanced (the other two never got its commits), founds the cluster
    // again, and the two waiting join it.
    assert!(
        founded.is_some_and(|l| l.contains("n3 at seqno")),
        "n3 did not found the cluster again: {founded:?}"
    );
    assert!(
        after > 10,
        "only {after} appends acknowledged after n3 was restarted: {results:#}"
    );
    let lost = support::checker(&results, "lost-appends");
    assert_ne!(lost["valid"], "unknown", "{lost:#}");
}

#[test]
fn a_galera_cluster_serves_again_when_a_survivor_is_left_non_primary_with_a_joiner() {
    if skip::unless(module_path!(), galera_missing()) {
        return;
    }
    // n1 killed and restarted; n2 killed before n1 is in the primary view {n2, n3}:
    // n3 is left with half of it, non-primary, in a view with n1, which was never in
    // it. Two of three processes run, but no primary forms until the quorum is reset.
    let (after, results, logs) = appends_after_the_last_restart(
        r#"[{"at_ms":1000,"for_ms":1500,"f":"kill","nodes":["n1"]},
            {"at_ms":3000,"for_ms":8000,"f":"kill","nodes":["n2"]}]"#,
        "20",
    );
    let reset = logged(&logs, "the quorum was reset on")
        .or_else(|| logged(&logs, "founds the cluster again"));
    println!("appends acknowledged after n2's restart: {after}; {reset:?}");
    assert!(reset.is_some(), "the quorum was not reset");
    assert!(
        after > 10,
        "only {after} appends acknowledged after n2 was restarted: {results:#}"
    );
    let lost = support::checker(&results, "lost-appends");
    assert_ne!(lost["valid"], "unknown", "{lost:#}");
}
