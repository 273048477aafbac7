//! Network-namespace backend on real namespaces: a real server process in one namespace,
//! a client in another; partitions block real TCP, heal restores it, loss is measured over
//! UDP, and nothing is left behind. Skips (counted; a failure under CI=true) without root / tools.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use splitbrain_nemesis::netns::{self, NetnsCluster};
use splitbrain_nemesis::{CutMode, NemesisError, NetFaults, NetworkFaults};

const HELPER_ENV: &str = "SB_NEMESIS_ECHO_AT";

/// The name libtest knows this module's test `name` by (its module path within the test
/// binary, which `--exact` needs).
fn test_name(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

/// Not a test of its own: when the env var is set (by `echo_server_in`), this test binary
/// acts as the echo server inside a namespace, for at most 60 s.
#[test]
fn helper_echo_server() {
    let Ok(at) = std::env::var(HELPER_ENV) else {
        return;
    };
    let listener = TcpListener::bind(at.as_str()).expect("bind helper");
    listener.set_nonblocking(true).unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        match listener.accept() {
            Ok((sock, _)) => {
                std::thread::spawn(move || {
                    sock.set_nonblocking(false).unwrap();
                    let mut w = sock.try_clone().unwrap();
                    for line in BufReader::new(sock).lines().map_while(Result::ok) {
                        if writeln!(w, "{line}").is_err() {
                            break;
                        }
                    }
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

use crate::skip;

fn skip_reason() -> Option<String> {
    netns::unavailable_reason()
}

/// Runs `f` on a thread that has entered namespace `ns`; sockets it makes live there.
fn in_netns<R: Send + 'static>(ns: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        use std::os::fd::AsRawFd;
        // SAFETY: setns(2) on a valid namespace fd, affecting only this thread
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("netns thread")
}

fn echo_server_in(cluster: &NetnsCluster, i: usize, port: u16) -> Child {
    let exe = std::env::current_exe().unwrap();
    cluster
        .command(i, exe.to_str().unwrap())
        .args([
            "--exact",
            &test_name("helper_echo_server"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_ENV, format!("{}:{port}", cluster.addr(i)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn echo server in namespace")
}

/// Kills (by PID) and reaps the server process even when an assertion fails.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One echo round trip on a fresh connection from namespace `ns`, or the error.
fn echo_once(ns: &str, to: SocketAddr, timeout: Duration) -> Result<String, String> {
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&to, timeout).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(timeout)).unwrap();
        writeln!(s, "ping").map_err(|e| e.to_string())?;
        let mut line = String::new();
        BufReader::new(s)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        Ok(line.trim().to_string())
    })
}

fn wait_echo(ns: &str, to: SocketAddr) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if echo_once(ns, to, Duration::from_millis(500)).as_deref() == Ok("ping") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// UDP datagrams sent from `from` to `to` that arrive.
fn udp_delivery(cluster: &NetnsCluster, from: usize, to: usize, port: u16, count: u32) -> u32 {
    let dst = SocketAddr::from((cluster.addr(to), port));
    let rx_ns = cluster.namespace(to).to_string();
    let receiver = std::thread::spawn(move || {
        in_netns(&rx_ns, move || {
            let sock = UdpSocket::bind(dst).unwrap();
            sock.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut buf = [0u8; 64];
            let mut got = 0;
            while let Ok(n) = sock.recv(&mut buf) {
                if &buf[..n] == b"end" {
                    break;
                }
                got += 1;
            }
            got
        })
    });
    std::thread::sleep(Duration::from_millis(200));
    let tx_ns = cluster.namespace(from).to_string();
    in_netns(&tx_ns, move || {
        let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
        for k in 0..count {
            let _ = sock.send_to(format!("m{k}").as_bytes(), dst);
            if k % 20 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    receiver.join().unwrap()
}

fn root_ruleset() -> String {
    std::process::Command::new("nft")
        .args(["list", "ruleset"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

#[test]
fn partition_blocks_real_tcp_and_heal_restores_it() {
    if let Some(why) = skip_reason() {
        skip::skip_here(&why);
        return;
    }
    let ruleset_before = root_ruleset();
    let cluster = NetnsCluster::create(2).unwrap();
    let (ns1, ns2) = (
        cluster.namespace(0).to_string(),
        cluster.namespace(1).to_string(),
    );
    let server = KillOnDrop(echo_server_in(&cluster, 1, 7000));
    let srv = SocketAddr::from((cluster.addr(1), 7000));
    assert!(wait_echo(&ns1, srv), "echo server in {ns2} never answered");

    // a long-lived connection opened before the partition
    let long = in_netns(&ns1, move || {
        TcpStream::connect_timeout(&srv, Duration::from_secs(2)).unwrap()
    });
    let mut long_r = BufReader::new(long.try_clone().unwrap());
    let mut long_w = long;
    long_w
        .set_read_timeout(Some(Duration::from_millis(800)))
        .unwrap();

    let mut faults = NetFaults::new();
    faults.cut(0, 1, CutMode::Blackhole);
    faults.cut(1, 0, CutMode::Blackhole);
    cluster.apply(&faults).unwrap();
    let blocked = echo_once(&ns1, srv, Duration::from_millis(800));
    assert!(blocked.is_err(), "TCP crossed a partition: {blocked:?}");
    writeln!(long_w, "held").unwrap();
    let mut line = String::new();
    assert!(
        long_r.read_line(&mut line).is_err(),
        "existing connection got {line:?} through a cut"
    );

    cluster.heal_all().unwrap();
    assert!(wait_echo(&ns1, srv), "heal did not restore TCP");
    // the held line is retransmitted by TCP once the path is back
    long_r
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    line.clear();
    long_r.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "held");

    // refuse mode: a new connection is rejected at once instead of timing out, and the
    // existing one is reset when it next sends
    let mut refuse = NetFaults::new();
    refuse.cut(0, 1, CutMode::Refuse);
    cluster.apply(&refuse).unwrap();
    let t = Instant::now();
    let refused = echo_once(&ns1, srv, Duration::from_secs(3));
    println!("refuse mode: {refused:?} after {:?}", t.elapsed());
    assert!(refused.is_err());
    writeln!(long_w, "rejected").unwrap();
    line.clear();
    assert!(
        long_r.read_line(&mut line).is_err() || line.is_empty(),
        "got {line:?}"
    );
    cluster.heal_all().unwrap();
    assert!(
        wait_echo(&ns1, srv),
        "heal did not restore TCP after refuse"
    );

    drop(server);
    let made = cluster.namespaces();
    cluster.teardown().unwrap();
    cluster.teardown().unwrap(); // idempotent
    let left: Vec<String> = netns::list_namespaces()
        .into_iter()
        .filter(|n| made.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left: {left:?}");
    assert_eq!(
        root_ruleset(),
        ruleset_before,
        "rules left in the root namespace"
    );
}

#[test]
fn loss_is_measured_and_delay_is_detected() {
    if let Some(why) = skip_reason() {
        skip::skip_here(&why);
        return;
    }
    let cluster = NetnsCluster::create(2).unwrap();
    let total = 4000;
    let clean = udp_delivery(&cluster, 0, 1, 7101, total);
    let mut faults = NetFaults::new();
    faults.flow_mut(0, 1).loss = 0.25;
    cluster.apply(&faults).unwrap();
    let lossy = udp_delivery(&cluster, 0, 1, 7102, total);
    let reverse = udp_delivery(&cluster, 1, 0, 7103, total);
    let measured = 1.0 - f64::from(lossy) / f64::from(clean.max(1));
    println!(
        "FIGURES netns loss: requested 0.25, measured {measured:.3} ({lossy}/{clean} datagrams; reverse direction {reverse}/{total}; firewall {:?})",
        cluster.firewall()
    );
    assert!(
        clean >= total * 95 / 100,
        "clean path lost datagrams: {clean}/{total}"
    );
    assert!((measured - 0.25).abs() < 0.05, "measured loss {measured}");
    assert!(
        reverse >= total * 95 / 100,
        "loss leaked into the reverse flow"
    );

    let mut slow = NetFaults::new();
    slow.flow_mut(0, 1).delay = Duration::from_millis(50);
    if cluster.supports_delay() {
        cluster.apply(&slow).unwrap();
        println!("netem present: delay applied");
    } else {
        let err = cluster.apply(&slow).unwrap_err();
        println!("FIGURES netns delay: unsupported here ({err})");
        assert!(matches!(err, NemesisError::Unsupported(_)));
    }
    cluster.heal_all().unwrap();
    let made = cluster.namespaces();
    assert_eq!(made.len(), 3);
    drop(cluster); // Drop tears down
    let left: Vec<String> = netns::list_namespaces()
        .into_iter()
        .filter(|n| made.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left after drop: {left:?}");
}

#[test]
fn sweep_removes_namespaces_of_dead_runs() {
    if let Some(why) = skip_reason() {
        skip::skip_here(&why);
        return;
    }
    // pid 4194304 is above the kernel's pid_max limit, so this run is certainly dead
    let stale = "sb-4194304-0-n1";
    let ok = std::process::Command::new("ip")
        .args(["netns", "add", stale])
        .status()
        .unwrap();
    assert!(ok.success());
    let removed = netns::sweep_stale();
    assert!(removed.contains(&stale.to_string()), "{removed:?}");
    assert!(!netns::list_namespaces().contains(&stale.to_string()));
}

struct NoProcesses(usize);

impl splitbrain_nemesis::ClusterControl for NoProcesses {
    fn node_count(&self) -> usize {
        self.0
    }
    async fn kill(&self, _: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn restart(&self, _: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn pause(&self, _: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn resume(&self, _: usize) -> Result<(), NemesisError> {
        Ok(())
    }
    async fn leaders(&self) -> Vec<usize> {
        Vec::new()
    }
    async fn set_clock_offset(&self, _: usize, _: i64) -> Result<(), NemesisError> {
        Ok(())
    }
}

struct Ops(std::sync::Mutex<Vec<(String, serde_json::Value)>>);

impl splitbrain_nemesis::NemesisRecorder for Ops {
    fn record(&self, f: &str, value: serde_json::Value) {
        self.0.lock().unwrap().push((f.to_string(), value));
    }
}

#[tokio::test]
async fn nemesis_drives_namespaces() {
    use splitbrain_nemesis::{Nemesis, NemesisSpec, PlannedFault};
    use std::sync::Arc;
    if let Some(why) = skip_reason() {
        skip::skip_here(&why);
        return;
    }
    let cluster = Arc::new(NetnsCluster::create(3).unwrap());
    let plan: Vec<PlannedFault> = serde_json::from_str(
        r#"[{"at_ms": 0, "for_ms": 60000, "f": "partition", "shape": "isolate",
             "groups": [["n1"], ["n2", "n3"]]},
            {"at_ms": 10, "for_ms": 60000, "f": "slow", "nodes": ["n2"], "delay_ms": 50}]"#,
    )
    .unwrap();
    let net: Arc<dyn NetworkFaults> = cluster.clone();
    let nemesis = Nemesis::with_network(NemesisSpec::from_plan(plan), Some(net));
    let ops = Ops(std::sync::Mutex::new(Vec::new()));
    nemesis
        .run(&NoProcesses(3), &ops, Duration::from_millis(200))
        .await
        .unwrap();
    let faults = cluster.faults();
    assert_eq!(faults.flow(0, 1).cut, Some(CutMode::Blackhole));
    assert_eq!(faults.flow(2, 0).cut, Some(CutMode::Blackhole));
    assert_eq!(faults.flow(1, 2).cut, None);
    let slow_op = ops.0.lock().unwrap()[1].clone();
    assert_eq!(slow_op.0, "start-slow");
    if !cluster.supports_delay() {
        assert!(slow_op.1["error"].is_string(), "{slow_op:?}");
    }
    nemesis.heal(&NoProcesses(3), &ops).await.unwrap();
    assert!(cluster.faults().is_clean());
    cluster.teardown().unwrap();
}

/// One echo round trip from the test's own namespace (through the host link).
fn echo_from_host(to: SocketAddr) -> Result<String, String> {
    let timeout = Duration::from_millis(500);
    let mut s = TcpStream::connect_timeout(&to, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout)).unwrap();
    writeln!(s, "ping").map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    Ok(line.trim().to_string())
}

#[test]
fn host_link_reaches_nodes_directly_and_survives_partitions() {
    if let Some(why) = skip_reason() {
        skip::skip_here(&why);
        return;
    }
    let a = NetnsCluster::create_reachable(2).expect("create reachable cluster");
    let b = NetnsCluster::create_reachable(2).expect("a second one beside it");
    let (ha, hb) = (a.host_addr().unwrap(), b.host_addr().unwrap());
    assert_ne!(ha, hb, "two live clusters must not share a subnet");
    assert_eq!(a.addr(0).octets()[..3], ha.octets()[..3]);
    let port = 7311;
    let _server = KillOnDrop(echo_server_in(&a, 0, port));
    let to = SocketAddr::from((a.addr(0), port));
    let end = Instant::now() + Duration::from_secs(10);
    let mut last = Err(String::new());
    while Instant::now() < end {
        last = echo_from_host(to);
        if last.as_deref() == Ok("ping") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(last.as_deref(), Ok("ping"), "host reaches node 0 directly");
    // Cut node 1 off from node 0: node 1 cannot reach it, the host still can.
    let mut cut = NetFaults::new();
    cut.cut(1, 0, CutMode::Blackhole);
    a.apply(&cut).unwrap();
    assert!(echo_once(a.namespace(1), to, Duration::from_millis(300)).is_err());
    assert_eq!(echo_from_host(to).as_deref(), Ok("ping"));
    a.apply(&NetFaults::new()).unwrap();
    drop(_server);
    // Host link names start with this; none may be left.
    let link = format!("sbh{}x", std::process::id());
    a.teardown().unwrap();
    b.teardown().unwrap();
    let left = std::process::Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .unwrap();
    let left = String::from_utf8_lossy(&left.stdout);
    assert!(
        !left.contains(&link),
        "host links left after teardown: {left}"
    );
}
