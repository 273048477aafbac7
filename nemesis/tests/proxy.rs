//! Proxy mesh on real loopback sockets: cuts (both ways, one way, refuse, black-hole),
//! heal, delay, loss and bandwidth, measured with line-echo servers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use splitbrain_nemesis::proxy::{LossMode, ProxyMesh, RTO_MIN};
use splitbrain_nemesis::CutMode;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// A node stand-in: echoes every line and remembers what it received.
struct EchoServer {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<String>>>,
}

impl EchoServer {
    async fn start() -> EchoServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let rec = received.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let rec = rec.clone();
                tokio::spawn(async move {
                    let (r, mut w) = sock.into_split();
                    let mut lines = BufReader::new(r).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        rec.lock().unwrap().push(line.clone());
                        if w.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        EchoServer { addr, received }
    }

    fn has(&self, line: &str) -> bool {
        self.received.lock().unwrap().iter().any(|l| l == line)
    }

    async fn wait_for(&self, line: &str, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if self.has(line) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.has(line)
    }
}

struct Client {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    w: OwnedWriteHalf,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).await.unwrap();
        s.set_nodelay(true).unwrap();
        let (r, w) = s.into_split();
        Client {
            lines: BufReader::new(r).lines(),
            w,
        }
    }

    async fn send(&mut self, line: &str) {
        self.w
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }

    /// The next echoed line, or None if none arrives in time (or the connection ended).
    async fn recv(&mut self, within: Duration) -> Option<String> {
        match tokio::time::timeout(within, self.lines.next_line()).await {
            Ok(Ok(Some(l))) => Some(l),
            _ => None,
        }
    }

    /// True if the connection was reset or closed (read error or EOF) within `within`.
    async fn is_dead(&mut self, within: Duration) -> bool {
        matches!(
            tokio::time::timeout(within, self.lines.next_line()).await,
            Ok(Err(_)) | Ok(Ok(None))
        )
    }

    async fn round_trip(&mut self, line: &str) -> Duration {
        let t = Instant::now();
        self.send(line).await;
        assert_eq!(
            self.recv(Duration::from_secs(5)).await.as_deref(),
            Some(line)
        );
        t.elapsed()
    }
}

const QUIET: Duration = Duration::from_millis(400);
const SOON: Duration = Duration::from_secs(5);

async fn two_nodes() -> (EchoServer, EchoServer, ProxyMesh) {
    let a = EchoServer::start().await;
    let b = EchoServer::start().await;
    let mesh = ProxyMesh::start(vec![a.addr, b.addr]).await.unwrap();
    (a, b, mesh)
}

#[tokio::test]
async fn one_way_cut_blocks_only_that_direction_and_heals() {
    let (a, b, mesh) = two_nodes().await;
    assert_ne!(mesh.link_addr(0, 1), b.addr);
    assert_eq!(mesh.link_addr(1, 1), b.addr);
    // c01: connection node 0 opened to node 1; c10: node 1 to node 0
    let mut c01 = Client::connect(mesh.link_addr(0, 1)).await;
    let mut c10 = Client::connect(mesh.link_addr(1, 0)).await;
    c01.round_trip("warm-01").await;
    c10.round_trip("warm-10").await;

    mesh.cut_one_way(0, 1, CutMode::Blackhole);
    // 0 -> 1 on 0's own connection: lost
    c01.send("x1").await;
    assert_eq!(c01.recv(QUIET).await, None);
    assert!(!b.has("x1"), "node 1 heard node 0 through a one-way cut");
    // 1 -> 0 on 1's connection: arrives; 0's reply (0 -> 1) is lost
    c10.send("y1").await;
    assert!(
        a.wait_for("y1", SOON).await,
        "node 0 must still hear node 1"
    );
    assert_eq!(
        c10.recv(QUIET).await,
        None,
        "node 0's reply crossed a one-way cut"
    );
    // new connections from 0 to 1 are accepted but carry nothing (black-hole)
    let mut fresh = Client::connect(mesh.link_addr(0, 1)).await;
    fresh.send("z1").await;
    assert_eq!(fresh.recv(QUIET).await, None);
    assert!(!b.has("z1"));

    mesh.heal();
    // stalled bytes flow again, in order, on the same connections
    assert_eq!(c01.recv(SOON).await.as_deref(), Some("x1"));
    assert_eq!(c10.recv(SOON).await.as_deref(), Some("y1"));
    assert_eq!(fresh.recv(SOON).await.as_deref(), Some("z1"));
    c01.round_trip("after-heal").await;
    mesh.shutdown().await;
    assert_eq!(mesh.open_connections(), 0);
}

#[tokio::test]
async fn two_way_cut_blocks_both_directions() {
    let (a, b, mesh) = two_nodes().await;
    let mut c01 = Client::connect(mesh.link_addr(0, 1)).await;
    let mut c10 = Client::connect(mesh.link_addr(1, 0)).await;
    c01.round_trip("w1").await;
    c10.round_trip("w2").await;
    mesh.cut_both(0, 1, CutMode::Blackhole);
    c01.send("p").await;
    c10.send("q").await;
    tokio::time::sleep(QUIET).await;
    assert!(!b.has("p") && !a.has("q"));
    mesh.heal();
    assert_eq!(c01.recv(SOON).await.as_deref(), Some("p"));
    assert_eq!(c10.recv(SOON).await.as_deref(), Some("q"));
    mesh.shutdown().await;
}

#[tokio::test]
async fn refuse_mode_resets_and_refuses() {
    let (_a, b, mesh) = two_nodes().await;
    let mut c01 = Client::connect(mesh.link_addr(0, 1)).await;
    c01.round_trip("ok").await;
    mesh.cut_one_way(0, 1, CutMode::Refuse);
    // an existing connection is reset when it tries to carry a blocked byte
    c01.send("r1").await;
    assert!(c01.is_dead(SOON).await, "existing connection was not reset");
    assert!(!b.has("r1"));
    // a new connection is refused (accepted by the kernel, then reset at once)
    match TcpStream::connect(mesh.link_addr(0, 1)).await {
        Err(_) => {}
        Ok(s) => {
            let (r, _w) = s.into_split();
            let mut lines = BufReader::new(r).lines();
            let res = tokio::time::timeout(SOON, lines.next_line()).await;
            assert!(
                matches!(res, Ok(Err(_)) | Ok(Ok(None))),
                "new connection not refused: {res:?}"
            );
        }
    }
    mesh.heal();
    let mut again = Client::connect(mesh.link_addr(0, 1)).await;
    again.round_trip("back").await;
    mesh.shutdown().await;
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::test]
async fn delay_adds_the_requested_latency() {
    let (_a, _b, mesh) = two_nodes().await;
    let mut c = Client::connect(mesh.link_addr(0, 1)).await;
    let mut samples = Vec::new();
    for k in 0..20 {
        samples.push(c.round_trip(&format!("base{k}")).await);
    }
    let base = median(samples);
    let requested = Duration::from_millis(50);
    mesh.set_delay(0, 1, requested, Duration::ZERO);
    let mut samples = Vec::new();
    for k in 0..20 {
        samples.push(c.round_trip(&format!("slow{k}")).await);
    }
    let one_way = median(samples.clone()).saturating_sub(base);
    // both directions slowed: requests 0->1 and replies 1->0
    mesh.set_delay(1, 0, requested, Duration::ZERO);
    let mut both = Vec::new();
    for k in 0..20 {
        both.push(c.round_trip(&format!("both{k}")).await);
    }
    let two_way = median(both).saturating_sub(base);
    // jitter: 50 ms +- 20 ms on one direction only
    mesh.set_delay(1, 0, Duration::ZERO, Duration::ZERO);
    mesh.set_delay(0, 1, requested, Duration::from_millis(20));
    let mut jittered = Vec::new();
    for k in 0..40 {
        jittered.push(c.round_trip(&format!("jit{k}")).await.saturating_sub(base));
    }
    let (jmin, jmax) = (
        *jittered.iter().min().unwrap(),
        *jittered.iter().max().unwrap(),
    );
    println!(
        "FIGURES delay: base rtt {base:?}; requested 50ms one-way -> added {one_way:?}; \
         both ways -> added {two_way:?}; 50+-20ms jitter -> added min {jmin:?} max {jmax:?}"
    );
    // never early (the proxy holds each chunk at least the delay); generous upper bound
    assert!(one_way >= Duration::from_millis(40), "added {one_way:?}");
    assert!(one_way <= Duration::from_millis(150), "added {one_way:?}");
    assert!(two_way >= Duration::from_millis(80), "added {two_way:?}");
    assert!(
        jmin >= Duration::from_millis(25) && jmax > jmin,
        "jitter {jmin:?}..{jmax:?}"
    );
    // Per fault window, on both directions: each delayed chunk held at least its delay
    // (less the jitter), and nothing held for a delay in a window that asked none.
    let stats = mesh.host_stats();
    let link = &stats[0][0];
    let mut slowed = 0;
    for w in link.forward.windows.iter().chain(&link.backward.windows) {
        if w.asked.delay_us == 0 {
            assert_eq!(w.counts.delayed_chunks, 0, "{w:?}");
            continue;
        }
        let least = w.asked.delay_us.saturating_sub(w.asked.jitter_us);
        assert!(
            w.counts.delayed_held_us >= least * w.counts.delayed_chunks,
            "{w:?}"
        );
        slowed += w.counts.delayed_chunks;
    }
    assert!(
        slowed >= 80,
        "{slowed} delayed chunks in the windows: {link:?}"
    );
    mesh.heal();
    c.round_trip("healed").await;
    mesh.shutdown().await;
}

#[tokio::test]
async fn loss_drops_the_requested_fraction_of_whole_messages() {
    let (_a, b, mesh) = two_nodes().await;
    let mut c = Client::connect(mesh.link_addr(0, 1)).await;
    c.round_trip("start").await;
    let requested = 0.2;
    mesh.set_loss(0, 1, requested);
    let total: i32 = 3000;
    for k in 0..total {
        c.send(&format!("m{k}")).await;
    }
    mesh.set_loss(0, 1, 0.0);
    c.send("end").await;
    assert!(b.wait_for("end", Duration::from_secs(10)).await);
    let got = b.received.lock().unwrap().clone();
    let arrived: Vec<&String> = got.iter().filter(|l| l.starts_with('m')).collect();
    // every surviving message arrived whole and in order
    let mut last = -1i64;
    for l in &arrived {
        let k: i64 = l[1..]
            .parse()
            .unwrap_or_else(|_| panic!("corrupted message {l:?}"));
        assert!(k > last && k < i64::from(total));
        last = k;
    }
    let measured = 1.0 - arrived.len() as f64 / f64::from(total);
    println!("FIGURES loss: requested {requested}, measured {measured:.3} over {total} messages");
    assert!(
        (measured - requested).abs() < 0.04,
        "measured loss {measured}"
    );
    // The proxy's windows: every loss counted, all of it in the window that asked for it.
    let windows = &mesh.host_stats()[0][0].forward.windows;
    let dropped: u64 = windows.iter().map(|w| w.counts.lines_dropped).sum();
    assert_eq!(dropped, total as u64 - arrived.len() as u64, "{windows:?}");
    for w in windows {
        if w.asked.loss == 0.0 {
            assert_eq!(
                w.counts.lines_dropped, 0,
                "a loss outside the loss window: {w:?}"
            );
        }
    }
    let lossy = windows
        .iter()
        .find(|w| w.asked.loss > 0.0)
        .expect("a loss window");
    assert!(
        lossy.counts.lines > 0 && lossy.counts.lines_dropped == dropped,
        "{lossy:?}"
    );
    mesh.shutdown().await;
}

/// Loss on a binary stream ([`LossMode::Retransmit`]): bytes full of newlines cross a link
/// losing 30% of its packets whole and in order (a line-dropping proxy would lose about a
/// third of them), and the stream is held up by at least one retransmission timeout.
#[tokio::test]
async fn retransmit_loss_delivers_a_binary_stream_whole_and_late() {
    let sink = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink_addr = sink.local_addr().unwrap();
    let total = 64 * 1024;
    let reader = tokio::spawn(async move {
        let (mut s, _) = sink.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 8192];
        while got.len() < total {
            let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
                .await
                .expect("the stream stalled for 20 s")
                .unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let unused = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mesh = ProxyMesh::start_with(
        "127.0.0.1".parse().unwrap(),
        vec![unused.local_addr().unwrap(), sink_addr],
        Vec::new(),
        7,
        LossMode::Retransmit,
    )
    .await
    .unwrap();
    mesh.set_loss(0, 1, 0.3);
    // every seventh byte a newline: frames of a binary protocol are full of 0x0a
    let sent: Vec<u8> = (0..total)
        .map(|k| {
            if k % 7 == 0 {
                b'\n'
            } else {
                (k * 31 % 251) as u8
            }
        })
        .collect();
    let t = Instant::now();
    let mut c = TcpStream::connect(mesh.link_addr(0, 1)).await.unwrap();
    for piece in sent.chunks(1024) {
        c.write_all(piece).await.unwrap();
        // one piece per proxy read, so each stands for its own packet
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let got = reader.await.unwrap();
    let elapsed = t.elapsed();
    println!(
        "FIGURES retransmit loss 0.3: {} of {total} bytes in {elapsed:?}",
        got.len()
    );
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "the stream arrived altered");
    // the proxy never hands a held piece over before its timeout: a floor, not a timing
    assert!(elapsed >= RTO_MIN, "{elapsed:?}");
    // The loss is counted as stalls, not drops, in the window that asked for it; each
    // stalled piece waited at least one retransmission timeout.
    let s = &mesh.host_stats()[0][0].forward;
    let w = s
        .windows
        .iter()
        .find(|w| w.asked.loss > 0.0)
        .expect("the loss window");
    assert_eq!(w.counts.lines_dropped, 0, "{w:?}");
    assert!(w.counts.stalled_chunks > 0, "{w:?}");
    assert!(
        w.counts.stalled_held_us >= w.counts.stalled_chunks * RTO_MIN.as_micros() as u64,
        "{w:?}"
    );
    assert_eq!(s.counts.stalled_chunks, w.counts.stalled_chunks);
    mesh.shutdown().await;
}

#[tokio::test]
async fn bandwidth_cap_slows_a_bulk_transfer() {
    let (_a, b, mesh) = two_nodes().await;
    let mut c = Client::connect(mesh.link_addr(0, 1)).await;
    c.round_trip("start").await;
    let cap = 100_000u64;
    mesh.set_bandwidth(0, 1, Some(cap));
    let line = "x".repeat(999);
    let t = Instant::now();
    for _ in 0..150 {
        c.send(&line).await;
    }
    c.send("done").await;
    assert!(b.wait_for("done", Duration::from_secs(20)).await);
    let elapsed = t.elapsed();
    let rate = 150_000.0 / elapsed.as_secs_f64();
    println!("FIGURES bandwidth: cap {cap} B/s, measured {rate:.0} B/s over 150 kB ({elapsed:?})");
    // 150 kB at 100 kB/s cannot arrive in less than about 1.5 s
    assert!(elapsed >= Duration::from_millis(1200), "{elapsed:?}");
    mesh.shutdown().await;
}

#[tokio::test]
async fn dead_target_resets_the_dialer_and_shutdown_closes_everything() {
    // a listener that is closed at once: connecting through the proxy must fail fast
    let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone_addr = gone.local_addr().unwrap();
    drop(gone);
    let a = EchoServer::start().await;
    let mesh = ProxyMesh::start(vec![a.addr, gone_addr]).await.unwrap();
    let mut c = Client::connect(mesh.link_addr(0, 1)).await;
    assert!(c.is_dead(SOON).await);
    let mut live = Client::connect(mesh.link_addr(1, 0)).await;
    live.round_trip("hi").await;
    mesh.shutdown().await;
    assert!(live.is_dead(SOON).await, "shutdown left a connection open");
    assert!(
        TcpStream::connect(mesh.link_addr(1, 0)).await.is_err(),
        "listener still open"
    );
}

/// A cluster with no processes: only the network faults matter here. Given the mesh,
/// leadership follows it like Raft's would: a node cut off from everyone still claims to
/// lead, and the lowest-numbered node that still reaches the others leads too.
struct NoProcesses(usize, Option<Arc<ProxyMesh>>);

impl splitbrain_nemesis::ClusterControl for NoProcesses {
    fn node_count(&self) -> usize {
        self.0
    }
    async fn kill(&self, _: usize) -> Result<(), splitbrain_nemesis::NemesisError> {
        Ok(())
    }
    async fn restart(&self, _: usize) -> Result<(), splitbrain_nemesis::NemesisError> {
        Ok(())
    }
    async fn pause(&self, _: usize) -> Result<(), splitbrain_nemesis::NemesisError> {
        Ok(())
    }
    async fn resume(&self, _: usize) -> Result<(), splitbrain_nemesis::NemesisError> {
        Ok(())
    }
    async fn leaders(&self) -> Vec<usize> {
        let (n, Some(mesh)) = (self.0, &self.1) else {
            return Vec::new();
        };
        let faults = mesh.faults();
        let cut_from = |i: usize| {
            (0..n)
                .filter(|&j| j != i && faults.flow(i, j).cut.is_some())
                .count()
        };
        let isolated = (0..n).filter(|&i| cut_from(i) == n - 1);
        let leading = (0..n).find(|&i| cut_from(i) < n - 1);
        isolated.chain(leading).collect()
    }
    async fn set_clock_offset(
        &self,
        _: usize,
        _: i64,
    ) -> Result<(), splitbrain_nemesis::NemesisError> {
        Ok(())
    }
}

#[derive(Default)]
struct Ops(Mutex<Vec<(String, serde_json::Value)>>);

impl splitbrain_nemesis::NemesisRecorder for Ops {
    fn record(&self, f: &str, value: serde_json::Value) {
        self.0.lock().unwrap().push((f.to_string(), value));
    }
}

#[tokio::test]
async fn nemesis_drives_the_mesh_and_heals_it() {
    use splitbrain_nemesis::{Nemesis, NemesisSpec, PlannedFault};
    let (_a, b, mesh) = two_nodes().await;
    let mesh = Arc::new(mesh);
    let plan: Vec<PlannedFault> = serde_json::from_str(
        r#"[{"at_ms": 0, "for_ms": 100, "f": "loss", "nodes": ["n2"], "fraction": 0.5},
            {"at_ms": 150, "for_ms": 60000, "f": "partition", "shape": "one-way",
             "groups": [["n1"], ["n2"]], "blocked": [["n1", "n2"]]}]"#,
    )
    .unwrap();
    let nemesis = Nemesis::with_mesh(NemesisSpec::from_plan(plan), Some(mesh.clone()));
    let ops = Ops::default();
    let cluster = NoProcesses(2, None);
    nemesis
        .run(&cluster, &ops, Duration::from_millis(400))
        .await
        .unwrap();
    // the partition is left in place at the deadline
    let faults = mesh.faults();
    assert_eq!(faults.flow(0, 1).cut, Some(CutMode::Blackhole));
    assert_eq!(faults.flow(1, 0).cut, None);
    assert_eq!(
        faults.flow(0, 1).loss,
        0.0,
        "loss was not removed at its stop"
    );
    let mut c = Client::connect(mesh.link_addr(0, 1)).await;
    c.send("during").await;
    assert_eq!(c.recv(QUIET).await, None);
    assert!(!b.has("during"));
    nemesis.heal(&cluster, &ops).await.unwrap();
    assert!(mesh.faults().is_clean());
    assert_eq!(c.recv(SOON).await.as_deref(), Some("during"));
    let fs: Vec<String> = ops
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(f, _)| f.clone())
        .collect();
    assert_eq!(
        fs,
        vec![
            "start-loss",
            "stop-loss",
            "start-partition",
            "stop-partition",
            "heal"
        ]
    );
    let start = ops.0.lock().unwrap()[2].1.clone();
    assert_eq!(start["one-way"], serde_json::json!([["n1"], ["n2"]]));
    assert_eq!(start["blocked"], serde_json::json!([["n1", "n2"]]));
    mesh.shutdown().await;
}

/// For random one-way cut sets on 4 nodes, every link delivers exactly what the flow model
/// says: i's request reaches j iff flow i->j is open; j's reply reaches i iff j->i is open.
#[tokio::test]
async fn every_link_matches_the_flow_model() {
    use rand::{Rng, SeedableRng};
    use splitbrain_nemesis::{NetFaults, NetworkFaults};
    let servers = [
        EchoServer::start().await,
        EchoServer::start().await,
        EchoServer::start().await,
        EchoServer::start().await,
    ];
    let mesh = ProxyMesh::start(servers.iter().map(|s| s.addr).collect())
        .await
        .unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    for round in 0..3 {
        let mut faults = NetFaults::new();
        for i in 0..4 {
            for j in 0..4 {
                if i != j && rng.gen_bool(0.4) {
                    faults.cut(i, j, CutMode::Blackhole);
                }
            }
        }
        mesh.apply(&faults).unwrap();
        let mut checks = Vec::new();
        for i in 0..4 {
            for j in 0..4 {
                if i == j {
                    continue;
                }
                let addr = mesh.link_addr(i, j);
                let tag = format!("r{round}-{i}-{j}");
                checks.push(tokio::spawn(async move {
                    let mut c = Client::connect(addr).await;
                    c.send(&tag).await;
                    let echoed = c.recv(QUIET).await.is_some();
                    (i, j, tag, echoed)
                }));
            }
        }
        for check in checks {
            let (i, j, tag, echoed) = check.await.unwrap();
            let request_open = faults.flow(i, j).cut.is_none();
            let reply_open = faults.flow(j, i).cut.is_none();
            assert_eq!(
                servers[j].has(&tag),
                request_open,
                "round {round}: n{} -> n{}",
                i + 1,
                j + 1
            );
            assert_eq!(
                echoed,
                request_open && reply_open,
                "round {round}: reply n{} -> n{}",
                j + 1,
                i + 1
            );
        }
        mesh.heal();
    }
    mesh.shutdown().await;
}

#[tokio::test]
async fn leader_churn_cuts_off_each_new_leader_three_times_then_heals() {
    use splitbrain_nemesis::{Nemesis, NemesisSpec, PlannedFault};
    let servers = [
        EchoServer::start().await,
        EchoServer::start().await,
        EchoServer::start().await,
    ];
    let mesh = Arc::new(
        ProxyMesh::start(servers.iter().map(|s| s.addr).collect())
            .await
            .unwrap(),
    );
    let plan: Vec<PlannedFault> = serde_json::from_str(
        r#"[{"at_ms": 0, "for_ms": 60000, "f": "partition", "shape": "leader-churn"}]"#,
    )
    .unwrap();
    let nemesis = Nemesis::with_mesh(NemesisSpec::from_plan(plan), Some(mesh.clone()));
    let ops = Ops::default();
    let cluster = NoProcesses(3, Some(mesh.clone()));
    nemesis
        .run(&cluster, &ops, Duration::from_millis(600))
        .await
        .unwrap();
    let recorded = ops.0.lock().unwrap().clone();
    let isolated: Vec<&str> = recorded
        .iter()
        .filter(|(f, _)| f == "churn-partition")
        .map(|(_, v)| v["isolated"].as_str().unwrap())
        .collect();
    // n1 led first; each hand-over moves the cut to the node that took over
    assert_eq!(
        recorded[0].1["leader-churn"],
        serde_json::json!([["n1"], ["n2", "n3"]])
    );
    assert_eq!(isolated, vec!["n2", "n1", "n2"], "{recorded:?}");
    let faults = mesh.faults();
    for j in [0, 2] {
        assert!(faults.flow(1, j).cut.is_some() && faults.flow(j, 1).cut.is_some());
    }
    assert!(faults.flow(0, 2).cut.is_none() && faults.flow(2, 0).cut.is_none());
    nemesis.heal(&cluster, &ops).await.unwrap();
    assert!(mesh.faults().is_clean());
    mesh.shutdown().await;
}

#[tokio::test]
async fn slow_client_holds_only_that_nodes_answers_and_heals() {
    use splitbrain_nemesis::{Nemesis, NemesisSpec, PlannedFault};
    let (a, b) = (EchoServer::start().await, EchoServer::start().await);
    let (client_a, client_b) = (EchoServer::start().await, EchoServer::start().await);
    let mesh =
        ProxyMesh::start_with_clients(vec![a.addr, b.addr], vec![client_a.addr, client_b.addr], 3)
            .await
            .unwrap();
    let mesh = Arc::new(mesh);
    assert!(mesh.proxies_clients());
    assert_eq!(mesh.client_addr(2), None);
    // A delay no test waits for: an answer held by it is simply never seen.
    let plan: Vec<PlannedFault> = serde_json::from_str(
        r#"[{"at_ms": 0, "for_ms": 60000, "f": "slow-client", "nodes": ["n2"],
             "delay_ms": 600000}]"#,
    )
    .unwrap();
    let nemesis = Nemesis::with_mesh(NemesisSpec::from_plan(plan), Some(mesh.clone()));
    let ops = Ops::default();
    let cluster = NoProcesses(2, None);
    nemesis
        .run(&cluster, &ops, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(
        mesh.faults().client(1).delay,
        Duration::from_secs(600),
        "the fault is in place at the deadline"
    );
    // n2's client: the request reaches the node, the answer is held back.
    let mut slow = Client::connect(mesh.client_addr(1).unwrap()).await;
    slow.send("question").await;
    assert!(client_b.wait_for("question", SOON).await);
    assert_eq!(slow.recv(QUIET).await, None);
    // n1's client link and the peer links are untouched.
    let mut fast = Client::connect(mesh.client_addr(0).unwrap()).await;
    fast.round_trip("fast").await;
    let mut peer = Client::connect(mesh.link_addr(0, 1)).await;
    peer.round_trip("peer").await;
    nemesis.heal(&cluster, &ops).await.unwrap();
    assert!(mesh.faults().is_clean());
    let mut after = Client::connect(mesh.client_addr(1).unwrap()).await;
    after.round_trip("healed").await;
    let fs: Vec<String> = ops
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(f, _)| f.clone())
        .collect();
    assert_eq!(fs, vec!["start-slow-client", "stop-slow-client", "heal"]);
    assert_eq!(
        ops.0.lock().unwrap()[0].1["nodes"],
        serde_json::json!(["n2"])
    );
    mesh.shutdown().await;
}

#[tokio::test]
async fn slow_client_without_client_proxies_is_recorded_as_failed() {
    use splitbrain_nemesis::{Nemesis, NemesisSpec, PlannedFault};
    let (_a, _b, mesh) = two_nodes().await;
    let mesh = Arc::new(mesh);
    let plan: Vec<PlannedFault> = serde_json::from_str(
        r#"[{"at_ms": 0, "for_ms": 60000, "f": "slow-client", "nodes": ["n1"], "delay_ms": 50}]"#,
    )
    .unwrap();
    let nemesis = Nemesis::with_mesh(NemesisSpec::from_plan(plan), Some(mesh.clone()));
    let ops = Ops::default();
    let cluster = NoProcesses(2, None);
    nemesis
        .run(&cluster, &ops, Duration::from_millis(50))
        .await
        .unwrap();
    let start = ops.0.lock().unwrap()[0].clone();
    assert_eq!(start.0, "start-slow-client");
    assert!(start.1["error"].is_string(), "{start:?}");
    assert!(mesh.faults().is_clean());
    nemesis.heal(&cluster, &ops).await.unwrap();
    mesh.shutdown().await;
}
