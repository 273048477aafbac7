//! Remote runs over real SSH: each "host" is a network namespace with its own sshd
//! (`splitbrain::remote::testbed`), the nodes run there, partitions are nftables rules
//! inside each host's namespace. After every run — valid, interrupted, failed to start —
//! each host is listed for anything the harness left (processes, nftables tables, files).
//! Skips (counted; a failure under CI=true) where not root, or sshd / nft / ip is missing.

use serde_json::Value;
use splitbrain::remote::testbed::{unavailable_reason, SshTestbed};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support;
use support::nemesis_ops;

fn testbed(n: usize, without_nft: &[usize]) -> Option<SshTestbed> {
    if let Some(why) = unavailable_reason() {
        support::skip::skip_here(&format!("namespace hosts with sshd: {why}"));
        return None;
    }
    Some(SshTestbed::create_with(n, without_nft).expect("making the namespace hosts"))
}

fn splitbrain(hosts: &Path, store: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_splitbrain"));
    c.args(["test", "--no-progress", "--hosts"])
        .arg(hosts)
        .arg("--store")
        .arg(store)
        .args(args);
    c
}

/// How long one harness run here may take before the test kills it and fails: a run takes
/// seconds (the longest, 7 s of faults plus setup and checking, well under a minute); the
/// bound only turns a hang into a failure that says so.
const RUN_BOUND: Duration = Duration::from_secs(240);

/// A harness process that is killed (and reaped) if the test drops it, e.g. when an
/// assertion fails while it still runs, so a failed test never leaves a run behind.
struct Harness(std::process::Child);

impl Drop for Harness {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs `cmd` to its end and returns what it printed; a run still going after
/// [`RUN_BOUND`] is killed and the test fails, with its live status and its stderr.
fn output_bounded(mut cmd: Command, store: &Path) -> std::process::Output {
    let child = Harness(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_bounded(child, store)
}

/// Reads `r` to its end on a thread; the answer comes on the channel.
fn read_in_background<R: std::io::Read + Send + 'static>(
    mut r: R,
) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        let _ = tx.send(v);
    });
    rx
}

/// Waits for `child` (whose stdout and stderr, where piped, are read as it runs) and
/// returns what it printed; one still going after [`RUN_BOUND`] is killed and the test
/// fails, with its live status and its stderr. A pipe some leftover process still holds
/// open is given up after 10 s, so the wait for output is bounded too.
fn wait_bounded(mut child: Harness, store: &Path) -> std::process::Output {
    let stdout = child.0.stdout.take().map(read_in_background);
    let stderr = child.0.stderr.take().map(read_in_background);
    let read = |rx: Option<std::sync::mpsc::Receiver<Vec<u8>>>, bound: Duration| {
        rx.and_then(|rx| rx.recv_timeout(bound).ok())
            .unwrap_or_default()
    };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > RUN_BOUND {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let Some(status) = status else {
        let pid = child.0.id();
        drop(child);
        let err = read(stderr, Duration::from_secs(5));
        let live = std::fs::read_to_string(store.join("latest/live.json")).unwrap_or_default();
        panic!(
            "the harness (pid {pid}) was still running after {} s and was killed; live.json: {live}\nstderr:\n{}",
            RUN_BOUND.as_secs(),
            String::from_utf8_lossy(&err)
        );
    };
    std::process::Output {
        status,
        stdout: read(stdout, Duration::from_secs(10)),
        stderr: read(stderr, Duration::from_secs(10)),
    }
}

fn assert_clean(bed: &SshTestbed) {
    // sshd's per-connection processes end a moment after the harness's master exits.
    let start = Instant::now();
    loop {
        let left: Vec<String> = (0..bed.len()).flat_map(|i| bed.leftovers(i)).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "left on the hosts: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn results(store: &Path) -> Value {
    let text = std::fs::read(store.join("latest/results.json")).expect("results.json");
    serde_json::from_slice(&text).expect("results.json parses")
}

fn assert_logs_collected(store: &Path, n: usize) {
    for i in 1..=n {
        let log = store.join(format!("latest/nodes/n{i}/node.log"));
        let len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{} was not collected", log.display());
        assert!(store.join(format!("latest/nodes/n{i}/data")).is_dir());
    }
}

/// Starts a 60 s kv run on `bed` (partitions and pauses every 0.5 s, seed `seed`) and
/// returns it once a fault is in force: a table of rules or a paused node is on a host.
fn start_kv_until_a_fault(bed: &SshTestbed, store: &Path, seed: &str, stderr: Stdio) -> Harness {
    let hosts = store.join("hosts.toml");
    bed.write_hosts_file(&hosts, None).unwrap();
    let child = splitbrain(
        &hosts,
        store,
        &[
            "--target",
            "kv",
            "--nemesis",
            "partition,pause",
            "--nemesis-interval",
            "0.5",
            "--time-limit",
            "60",
            "--seed",
            seed,
        ],
    )
    .stdout(Stdio::null())
    .stderr(stderr)
    .spawn()
    .unwrap();
    let mut child = Harness(child);
    let start = Instant::now();
    while !nemesis_ops(store)
        .iter()
        .any(|o| o["f"] == "start-partition" || o["f"] == "pause")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no fault started"
        );
        assert!(child.0.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

#[test]
fn kv_on_three_hosts_under_partitions_and_kills_is_valid_and_leaves_nothing() {
    let Some(bed) = testbed(3, &[]) else { return };
    let store = tempfile::tempdir().unwrap();
    let hosts = store.path().join("hosts.toml");
    bed.write_hosts_file(&hosts, None).unwrap();
    let out = output_bounded(
        splitbrain(
            &hosts,
            store.path(),
            &[
                "--target",
                "kv",
                "--nemesis",
                "partition,kill",
                "--nemesis-interval",
                "1",
                "--time-limit",
                "6",
                "--seed",
                "3",
                "--rate",
                "100",
            ],
        ),
        store.path(),
    );
    let r = results(store.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{r:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r["valid"], true);
    let ops = nemesis_ops(store.path());
    let partitions: Vec<&Value> = ops.iter().filter(|o| o["f"] == "start-partition").collect();
    let kills: Vec<&Value> = ops.iter().filter(|o| o["f"] == "kill").collect();
    assert!(
        !partitions.is_empty() && !kills.is_empty(),
        "faults: {ops:#?}"
    );
    for op in partitions.iter().chain(&kills) {
        assert!(op["value"].get("error").is_none(), "a fault failed: {op}");
    }
    assert_logs_collected(store.path(), 3);
    assert_clean(&bed);
}

#[test]
fn txn_list_append_on_three_hosts_under_partitions_is_valid() {
    let Some(bed) = testbed(3, &[]) else { return };
    let store = tempfile::tempdir().unwrap();
    let hosts = store.path().join("hosts.toml");
    bed.write_hosts_file(&hosts, None).unwrap();
    let out = output_bounded(
        splitbrain(
            &hosts,
            store.path(),
            &[
                "--target",
                "txn",
                "--workload",
                "list-append",
                "--nemesis",
                "partition",
                "--nemesis-interval",
                "1",
                "--time-limit",
                "5",
                "--seed",
                "5",
            ],
        ),
        store.path(),
    );
    let r = results(store.path());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{r:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r["results"][0]["checker"], "elle-list-append");
    assert_eq!(r["results"][0]["valid"], true);
    let cut = nemesis_ops(store.path())
        .into_iter()
        .any(|o| o["f"] == "start-partition" && o["value"].get("error").is_none());
    assert!(cut, "no partition was applied");
    assert_logs_collected(store.path(), 3);
    assert_clean(&bed);
}

#[test]
fn a_wrong_key_a_closed_port_a_host_without_nft_or_a_node_that_cannot_start_exit_4() {
    let Some(bed) = testbed(3, &[2]) else { return };
    let store = tempfile::tempdir().unwrap();
    let run = |hosts_toml: String, extra: &[&str]| {
        let hosts = store.path().join("hosts.toml");
        std::fs::write(&hosts, hosts_toml).unwrap();
        let mut args = vec![
            "--target",
            "kv",
            "--nemesis",
            "partition",
            "--time-limit",
            "2",
        ];
        args.extend_from_slice(extra);
        let out = output_bounded(splitbrain(&hosts, store.path(), &args), store.path());
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(4), "{stderr}");
        assert!(
            nemesis_ops(store.path()).is_empty(),
            "a fault was applied: {stderr}"
        );
        assert_eq!(results(store.path())["valid"], "unknown");
        assert_clean(&bed);
        stderr
    };
    let good = bed.hosts_toml(None);
    let addr = |i: usize| bed.addr(i).to_string();

    let wrong_key = store.path().join("wrong_key");
    let gen = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&wrong_key)
        .status()
        .unwrap();
    assert!(gen.success());
    let e = run(bed.hosts_toml(Some(&wrong_key)), &[]);
    assert!(e.contains(&format!("root@{}:22", addr(0))), "{e}");
    assert!(
        e.contains("refused the key") || e.contains("refused"),
        "{e}"
    );
    assert!(e.contains("wrong key or user"), "{e}");

    let closed = good.replacen(
        &format!("address = \"{}\"", addr(1)),
        &format!("address = \"{}\"\nport = 2222", addr(1)),
        1,
    );
    let e = run(closed, &[]);
    assert!(
        e.contains(&format!("{}:2222", addr(1))) && e.contains("unreachable"),
        "{e}"
    );

    let e = run(good.clone(), &[]);
    assert!(e.contains(&format!("root@{}:22", addr(2))), "{e}");
    assert!(e.contains("nft is not installed"), "{e}");

    // Host 3 lacks nft, but without network faults it is not needed; the node binary is
    // uploaded and exits at once: every host is cleaned all the same.
    let hosts = store.path().join("hosts.toml");
    std::fs::write(&hosts, &good).unwrap();
    let out = output_bounded(
        splitbrain(
            &hosts,
            store.path(),
            &[
                "--target",
                "kv",
                "--nemesis",
                "kill",
                "--time-limit",
                "2",
                "--target-bin",
                "/bin/false",
            ],
        ),
        store.path(),
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{e}");
    assert!(
        e.contains("starting node n1") && e.contains("exited"),
        "{e}"
    );
    assert_clean(&bed);
}

#[test]
fn sigint_mid_run_heals_collects_and_leaves_nothing() {
    let Some(bed) = testbed(3, &[]) else { return };
    let store = tempfile::tempdir().unwrap();
    let mut child = start_kv_until_a_fault(&bed, store.path(), "9", Stdio::piped());
    // SAFETY: kill(2) on the child we spawned and have not reaped.
    unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGINT) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(30) {
            panic!("the run did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = child.0.stderr.take().map(read_in_background);
    let stderr = stderr
        .and_then(|rx| rx.recv_timeout(Duration::from_secs(10)).ok())
        .unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr);
    assert_eq!(status.code(), Some(4), "{stderr}");
    assert_eq!(results(store.path())["incomplete"], "interrupted (SIGINT)");
    let ops = nemesis_ops(store.path());
    assert!(
        ops.iter().any(|o| o["f"] == "heal"),
        "no heal recorded: {ops:#?}"
    );
    assert_logs_collected(store.path(), 3);
    assert_clean(&bed);
}

#[test]
fn a_sigkilled_harness_leaves_nothing_on_the_hosts() {
    let Some(bed) = testbed(3, &[]) else { return };
    let store = tempfile::tempdir().unwrap();
    let mut child = start_kv_until_a_fault(&bed, store.path(), "4", Stdio::null());
    let before: Vec<String> = (0..bed.len()).flat_map(|i| bed.leftovers(i)).collect();
    assert!(
        before
            .iter()
            .any(|l| l.starts_with("process") && l.contains("splitbrain-kv")),
        "no node was running on the hosts: {before:#?}"
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // No teardown ran: whatever is gone, the hosts' leashes removed.
    assert_clean(&bed);
}

#[test]
fn an_unchanged_binary_is_not_uploaded_again() {
    use splitbrain::remote::session::HostSession;
    use splitbrain::remote::{parse_hosts_arg, SshDefaults};
    let Some(bed) = testbed(1, &[]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    bed.write_hosts_file(&hosts, None).unwrap();
    let host = parse_hosts_arg(hosts.to_str().unwrap(), &SshDefaults::default()).unwrap();
    let local = dir.path().join("node-bin");
    let remote = format!("{}/bin/node-bin", bed.data_dir(0).display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let session = HostSession::connect(&host[0], dir.path()).await.unwrap();
        std::fs::write(&local, b"#!/bin/sh\necho one\n").unwrap();
        assert!(session.upload_if_changed(&local, &remote).await.unwrap());
        assert!(!session.upload_if_changed(&local, &remote).await.unwrap());
        std::fs::write(&local, b"#!/bin/sh\necho two\n").unwrap();
        assert!(session.upload_if_changed(&local, &remote).await.unwrap());
        let ran = session.run("running it", &remote).await.unwrap();
        assert_eq!(ran.trim(), "two");
        session
            .run(
                "removing it",
                &format!("rm -r {}/bin", bed.data_dir(0).display()),
            )
            .await
            .unwrap();
        session.close().await;
    });
    assert_clean(&bed);
}

/// A target whose clocks move through libfaketime (`clock = "faketime"`) on SSH hosts:
/// each node starts with the host's libfaketime preloaded and its offset file in the
/// node's directory there; the clock nemesis rewrites that file over SSH. Looked at from
/// outside (the namespace hosts share this machine's processes), every node reads a wall
/// clock an hour ahead while the bump is on; afterwards nothing is left on the hosts.
#[test]
fn a_faketime_clock_target_has_its_clocks_moved_on_the_hosts() {
    if splitbrain_nemesis::faketime::FaketimeClocks::library().is_none() {
        support::skip::skip(
            "remote faketime",
            "libfaketime (Debian package faketime) is not installed",
        );
        return;
    }
    let Some(bed) = testbed(3, &[]) else { return };
    let store = tempfile::tempdir().unwrap();
    let hosts = store.path().join("hosts.toml");
    bed.write_hosts_file(&hosts, None).unwrap();
    let (spec, plan) = support::faketime_register_spec(store.path(), 3600);
    let child = splitbrain(
        &hosts,
        store.path(),
        &[
            "--target",
            "exec",
            "--target-spec",
            &spec,
            "--workload",
            "register",
            "--nemesis-plan",
            &plan,
            "--time-limit",
            "7",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut child = Harness(child);
    // The nodes' data directories are under the hosts' data directories.
    let marker = bed
        .data_dir(0)
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .display()
        .to_string();
    let seen =
        support::watch_faketime_offsets(&mut child.0, &marker, 3, 3600, Duration::from_secs(30));
    let out = wait_bounded(child, store.path());
    support::assert_faketime_run(store.path(), &out, &seen, 3, 3600);
    assert_logs_collected(store.path(), 3);
    assert_clean(&bed);
}

/// `--nemesis slow` on namespace hosts goes through each host's link proxy: a plan slows
/// every peer link by 100 ms for 4 s; the run is valid, the proxies measured delayed
/// chunks held at least that long, and every write invoked well inside the window (one
/// second after it opened) took at least the delay, since committing it needs a peer.
#[test]
fn slow_links_on_three_hosts_go_through_the_host_proxies_and_show_in_latency() {
    let Some(bed) = testbed(3, &[]) else { return };
    let store = tempfile::tempdir().unwrap();
    let hosts = store.path().join("hosts.toml");
    bed.write_hosts_file(&hosts, None).unwrap();
    let plan = store.path().join("slow-plan.json");
    std::fs::write(
        &plan,
        serde_json::json!([{"at_ms": 1000, "for_ms": 4000, "f": "slow",
            "nodes": ["n1", "n2", "n3"], "delay_ms": 100, "jitter_ms": 0}])
        .to_string(),
    )
    .unwrap();
    let out = output_bounded(
        splitbrain(
            &hosts,
            store.path(),
            &[
                "--target",
                "kv",
                "--nemesis-plan",
                plan.to_str().unwrap(),
                "--time-limit",
                "6",
                "--seed",
                "7",
            ],
        ),
        store.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = results(store.path());
    assert_eq!(out.status.code(), Some(0), "{r:#}\n{stderr}");
    assert_eq!(r["valid"], true);
    let ops = support::history(store.path());
    let at = |f: &str| {
        ops.iter()
            .find(|o| o["process"] == "nemesis" && o["f"] == f)
            .unwrap_or_else(|| panic!("no {f} recorded:\n{stderr}"))
    };
    let (start, stop) = (at("start-slow"), at("stop-slow"));
    assert!(start["value"].get("error").is_none(), "{start}");
    let links: Value = serde_json::from_slice(
        &std::fs::read(store.path().join("latest/links.json")).expect("links.json"),
    )
    .unwrap();
    let total = &links["total"];
    assert_eq!(links["hosts_reporting"], 3, "{links:#}");
    // The same figures are in the run's summary (results.json; report.html shows them).
    assert_eq!(r["links"], links, "{r:#}");
    assert!(total["delayed_chunks"].as_u64().unwrap() > 0, "{links:#}");
    assert!(
        total["mean_delay_ms"].as_f64().unwrap() >= 100.0,
        "a delayed chunk left a proxy before its delay: {links:#}"
    );
    // Per fault window: the slow fault is one fault (every link at +100 ms), measured at
    // no less than that on every link that carried a chunk in it; nothing lost anywhere.
    let faults = links["faults"].as_array().expect("per-fault figures");
    assert_eq!(faults.len(), 1, "{links:#}");
    assert_eq!(faults[0]["asked"]["delay_ms"], 100.0, "{links:#}");
    assert!(faults[0]["measured"]["delayed_chunks"].as_u64().unwrap() > 0);
    assert!(faults[0]["measured"]["mean_delay_ms"].as_f64().unwrap() >= 100.0);
    for w in links["windows"].as_array().expect("windows") {
        let m = &w["measured"];
        assert_eq!(m["dropped"], 0, "{w}");
        if w["asked"]["delay_ms"] == 100.0 && m["delayed_chunks"].as_u64().unwrap() > 0 {
            assert!(m["mean_delay_ms"].as_f64().unwrap() >= 100.0, "{w}");
        }
    }
    assert_eq!(links["outside"]["dropped"], 0, "{links:#}");
    // Writes invoked from 1 s after the slow links were set until they were lifted.
    let from = start["time"].as_u64().unwrap() + 1_000_000_000;
    let until = stop["time"].as_u64().unwrap();
    let mut invoked = std::collections::HashMap::new();
    let mut latencies_ms = Vec::new();
    for o in &ops {
        let (p, t) = (o["process"].to_string(), o["time"].as_u64().unwrap_or(0));
        match o["type"].as_str() {
            Some("invoke") => {
                invoked.insert(p, t);
            }
            Some("ok") if o["f"] == "write" => {
                if let Some(&i) = invoked.get(&p) {
                    if i >= from && t <= until {
                        latencies_ms.push((t - i) as f64 / 1e6);
                    }
                }
            }
            _ => {}
        }
    }
    assert!(
        !latencies_ms.is_empty(),
        "no write completed inside the window"
    );
    let fastest = latencies_ms.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(
        fastest >= 100.0,
        "a write inside the slow window took {fastest:.1} ms, under the 100 ms delay: {latencies_ms:?}"
    );
    assert_logs_collected(store.path(), 3);
    assert_clean(&bed);
}

/// A fault only the host proxies carry, asked of a target whose members advertise one
/// fixed address (etcd, Redis), is refused with the reason before any host is reached:
/// these hosts have nothing listening on their SSH port, and the refusal still comes.
#[test]
fn slow_or_loss_for_etcd_or_redis_on_hosts_is_refused_with_the_reason_before_connecting() {
    let store = tempfile::tempdir().unwrap();
    let hosts = store.path().join("hosts.toml");
    std::fs::write(
        &hosts,
        "port = 1\n[[host]]\naddress = \"127.0.0.1\"\n[[host]]\naddress = \"127.0.0.2\"\n\
         [[host]]\naddress = \"127.0.0.3\"\n",
    )
    .unwrap();
    for (target, fault) in [("etcd", "slow"), ("redis", "slow"), ("etcd", "loss")] {
        let args = ["--target", target, "--nemesis", fault, "--time-limit", "2"];
        let out = output_bounded(splitbrain(&hosts, store.path(), &args), store.path());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{target} {fault}: {stderr}");
        assert!(
            stderr.contains(&format!("`{fault}` on --hosts goes through a link proxy"))
                && stderr.contains(&format!(
                    "{target}'s members each advertise one fixed address"
                )),
            "{target} {fault}: {stderr}"
        );
        assert!(!stderr.contains("connected to"), "{stderr}");
    }
}

/// `splitbrain proxy-host --binary-streams` (what a host runs for a target whose peer
/// streams are binary): under 30 % loss a stream full of newlines arrives whole and in
/// order, and the loss is counted as pieces stalled for a retransmission, in the window
/// of the `set` that asked for it, none dropped. Loopback only; no hosts needed.
#[test]
fn a_binary_stream_through_a_host_proxy_stalls_under_loss_and_the_stalls_are_counted() {
    use std::io::{BufRead, BufReader, Read, Write};
    let sink = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let sink_addr = sink.local_addr().unwrap();
    let total = 48 * 1024;
    let reader = std::thread::spawn(move || {
        let (mut s, _) = sink.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 8192];
        while got.len() < total {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        got
    });
    let mut proxy = Harness(
        Command::new(env!("CARGO_BIN_EXE_splitbrain"))
            .args([
                "proxy-host",
                "--bind",
                "127.0.0.1",
                "--seed",
                "5",
                "--binary-streams",
            ])
            .arg("--target")
            .arg(sink_addr.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut to_proxy = proxy.0.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = proxy.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let next = || -> Value {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the proxy said nothing for 20 s");
        serde_json::from_str(&line).unwrap()
    };
    let listen = next()["listen"][0].as_str().unwrap().to_string();
    writeln!(to_proxy, r#"{{"seq":3,"set":[[{{"loss":0.3}},{{}}]]}}"#).unwrap();
    assert_eq!(next()["applied"], 3);
    let sent: Vec<u8> = (0..total)
        .map(|k| {
            if k % 7 == 0 {
                b'\n'
            } else {
                (k * 31 % 251) as u8
            }
        })
        .collect();
    let mut c = std::net::TcpStream::connect(&listen).unwrap();
    for piece in sent.chunks(1024) {
        c.write_all(piece).unwrap();
        // one piece per proxy read, so each stands for its own packets
        std::thread::sleep(Duration::from_millis(2));
    }
    let got = reader.join().unwrap();
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "the stream arrived altered");
    writeln!(to_proxy, r#"{{"stats":true}}"#).unwrap();
    let stats = next();
    let fwd = &stats["stats"][0]["forward"];
    assert_eq!(fwd["lines_dropped"], 0, "{stats}");
    let windows = fwd["windows"].as_array().expect("windows");
    let lossy = windows
        .iter()
        .find(|w| w["seq"] == 3)
        .unwrap_or_else(|| panic!("no window of set 3: {stats}"));
    let stalled = lossy["stalled_chunks"].as_u64().unwrap();
    assert!(stalled > 0, "{stats}");
    // each stalled piece waited at least one retransmission timeout (200 ms)
    assert!(
        lossy["stalled_held_us"].as_u64().unwrap() >= stalled * 200_000,
        "{stats}"
    );
    assert_eq!(windows[0]["stalled_chunks"], 0, "{stats}");
    drop(to_proxy);
    let start = Instant::now();
    while proxy.0.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the proxy did not end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `bench tail --hosts` on three namespace hosts, one short run of one cell: the table
/// comes out with a verdict, and the host proxies measured the slowed client link at no
/// less than the 50 ms asked.
#[test]
fn bench_tail_on_three_hosts_gives_its_table_and_the_measured_client_link() {
    let Some(bed) = testbed(3, &[]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts.toml");
    bed.write_hosts_file(&hosts, None).unwrap();
    let html = dir.path().join("tail.html");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_splitbrain"));
    cmd.args(["bench", "tail", "--hosts"])
        .arg(&hosts)
        .args(["--scenarios", "b", "--policies", "hedged", "--runs", "1"])
        .args(["--cell-seconds", "3", "--capacity", "400", "--html"])
        .arg(&html);
    let out = output_bounded(cmd, dir.path());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with("| (b)") && l.contains("hedged"))
        .unwrap_or_else(|| panic!("no table row: {text}"));
    assert!(row.contains("valid") && !row.contains("invalid"), "{row}");
    assert!(html.is_file());
    // "slow +50 ms on n3->clients (...): measured 51.2 ms mean over 101 chunks"
    let line = text
        .lines()
        .find(|l| l.contains("slow +50 ms on") && l.contains("->clients"))
        .unwrap_or_else(|| panic!("no per-fault figure: {text}"));
    let measured: f64 = line
        .split("measured ")
        .nth(1)
        .and_then(|r| r.split(" ms").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no measured delay in {line}"));
    assert!(measured >= 50.0, "{line}");
    assert_clean(&bed);
}
