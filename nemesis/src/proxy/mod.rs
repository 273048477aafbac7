//! The proxy mesh: one TCP proxy per directed link i→j, owned by the harness.
//!
//! Node `i` dials node `j` at [`ProxyMesh::link_addr`]`(i, j)`; the proxy forwards to
//! node `j`'s real address. A *link* i→j carries the TCP connections node i opens to node
//! j, in both byte directions. A *flow* i→j is the messages node i sends to node j, which
//! travel on two links: forward on link i→j (i's requests) and backward on link j→i (i's
//! replies to j's requests). Every fault is set per flow and applied to both of its byte
//! directions, so a one-way cut i→j really loses only what i says to j, whichever side
//! opened the connection.
//!
//! Optionally the mesh also fronts each node's *client* port with one more proxy of the
//! same kind ([`ProxyMesh::start_with_clients`], [`ProxyMesh::client_addr`]): clients
//! dial the proxy, and a client-link fault (`NetFaults::client_mut`) applies to the
//! node's answers, e.g. "node 3 answers its clients 50 ms late".
//!
//! Loss, by default ([`LossMode::Lines`]), drops whole newline-terminated messages (the
//! bundled targets speak JSON lines), so a lossy link loses messages without corrupting
//! the framing of the ones that get through. On a binary protocol (PostgreSQL's
//! replication, etcd's protobuf, RESP's bulk strings) that would cut frames in two and
//! the receiver would drop the connection. Such a stream takes [`LossMode::Retransmit`]
//! instead: nothing is dropped, and a piece of the stream that a lost packet would have
//! held up waits out a retransmission timeout, as TCP makes the receiver wait on a lossy
//! network (see [`LossMode`]). Namespaced nodes get real packet loss instead
//! ([`crate::netns_mesh`]).

mod conn;
pub mod host;
pub mod windows;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::network::{CutMode, FlowFaults, NetFaults, NetworkFaults};
use crate::NemesisError;
use windows::WindowLog;

/// The fault settings of one link, per byte direction.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LinkState {
    /// Bytes from the dialing node to the dialed one (flow from→to).
    pub(crate) forward: FlowFaults,
    /// Bytes from the dialed node back to the dialing one (flow to→from).
    pub(crate) backward: FlowFaults,
    /// The fault window each direction is in (its index in [`Link::windows`]).
    pub(crate) epochs: [usize; 2],
}

/// What `loss` does on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LossMode {
    /// Drops `loss` of the newline-terminated messages (JSON-lines protocols).
    #[default]
    Lines,
    /// Drops no byte: TCP over a lossy network, seen from the receiving application. Each
    /// piece the proxy reads stands for ceil(len / 1448) packets (a loopback-sized MSS of
    /// an Ethernet path), each lost with probability `loss`; a piece with a lost packet is
    /// held back [`RTO_MIN`] (Linux's minimum retransmission timeout), doubled for each
    /// further loss of the retransmission (at most [`RTO_MAX_BACKOFFS`] doublings), and
    /// everything after it waits too (a receiver cannot read past a hole). Not modelled:
    /// the sender's congestion window shrinking, fast retransmit after three duplicate
    /// acknowledgements (which repairs a hole in about one round trip when more data
    /// follows); so stalls are as long as a lone lost packet's, the worst case.
    Retransmit,
}

/// The retransmission timeout a piece of a [`LossMode::Retransmit`] stream waits per loss:
/// Linux's TCP_RTO_MIN, what a path with a sub-millisecond round trip gets.
pub const RTO_MIN: Duration = Duration::from_millis(200);
/// The most times a retransmission timeout doubles for one piece.
pub const RTO_MAX_BACKOFFS: u32 = 5;

/// One directed link's proxy.
pub(crate) struct Link {
    pub(crate) listen: SocketAddr,
    pub(crate) target: SocketAddr,
    pub(crate) state: watch::Sender<LinkState>,
    /// Base seed for the link's loss and jitter randomness.
    pub(crate) seed: u64,
    pub(crate) connections: AtomicU64,
    /// What loss does on this link.
    pub(crate) loss_mode: LossMode,
    /// What each direction measured (forward, backward).
    pub(crate) stats: [DirCounters; 2],
    /// What each direction measured per fault window (forward, backward).
    pub(crate) windows: [Mutex<WindowLog>; 2],
    /// When the mesh (or host proxy) this link belongs to started: window times count
    /// from here.
    pub(crate) origin: Instant,
}

impl Link {
    /// Microseconds since [`Link::origin`].
    pub(crate) fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros().min(u64::MAX as u128) as u64
    }

    /// The window log of direction `d` (0 forward, 1 backward).
    pub(crate) fn window_log(&self, d: usize) -> std::sync::MutexGuard<'_, WindowLog> {
        self.windows[d].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What direction `d` measured, over the whole run and per window.
    pub(crate) fn dir_stats(&self, d: usize) -> host::DirStats {
        let mut s = self.stats[d].snapshot();
        s.windows = self.window_log(d).snapshot();
        s
    }

    /// What this link measured, both directions.
    pub(crate) fn link_stats(&self) -> host::LinkStats {
        host::LinkStats {
            target: self.target.to_string(),
            connections: self.connections.load(Ordering::SeqCst),
            forward: self.dir_stats(0),
            backward: self.dir_stats(1),
        }
    }
}

/// What one direction of a link measured (read by [`host::ProxyLinks::stats`]).
#[derive(Default)]
pub(crate) struct DirCounters {
    pub(crate) lines: AtomicU64,
    pub(crate) lines_dropped: AtomicU64,
    pub(crate) chunks: AtomicU64,
    pub(crate) delayed_chunks: AtomicU64,
    pub(crate) delayed_held_us: AtomicU64,
    pub(crate) max_held_us: AtomicU64,
    pub(crate) stalled_chunks: AtomicU64,
    pub(crate) stalled_held_us: AtomicU64,
}

impl DirCounters {
    pub(crate) fn snapshot(&self) -> host::DirStats {
        host::DirStats {
            counts: windows::FlowCounts {
                lines: self.lines.load(Ordering::Relaxed),
                lines_dropped: self.lines_dropped.load(Ordering::Relaxed),
                chunks: self.chunks.load(Ordering::Relaxed),
                delayed_chunks: self.delayed_chunks.load(Ordering::Relaxed),
                delayed_held_us: self.delayed_held_us.load(Ordering::Relaxed),
                max_held_us: self.max_held_us.load(Ordering::Relaxed),
                stalled_chunks: self.stalled_chunks.load(Ordering::Relaxed),
                stalled_held_us: self.stalled_held_us.load(Ordering::Relaxed),
            },
            windows: Vec::new(),
        }
    }
}

/// One TCP proxy per directed link between `n` nodes, with fault controls.
pub struct ProxyMesh {
    nodes: usize,
    targets: Vec<SocketAddr>,
    /// Indexed `from * nodes + to`; None on the diagonal.
    links: Vec<Option<Arc<Link>>>,
    /// One per node when client links are proxied, else empty.
    client_links: Vec<Arc<Link>>,
    current: Mutex<NetFaults>,
    shutdown: watch::Sender<bool>,
    accept_tasks: Mutex<Vec<JoinHandle<()>>>,
    live_connections: Arc<AtomicUsize>,
    /// Numbers each change of the faults (the `seq` of the windows it opens).
    seq: AtomicU64,
    /// When the mesh started (window times count from here).
    origin: Instant,
}

impl ProxyMesh {
    /// One TCP proxy per directed link i->j (i != j), listening on `127.0.0.1:<free port>`,
    /// forwarding to `targets[j]`. Loss and jitter randomness uses seed 0.
    pub async fn start(targets: Vec<SocketAddr>) -> Result<ProxyMesh, NemesisError> {
        ProxyMesh::start_seeded(targets, 0).await
    }

    /// Like [`ProxyMesh::start`], with the seed for loss and jitter randomness.
    pub async fn start_seeded(
        targets: Vec<SocketAddr>,
        seed: u64,
    ) -> Result<ProxyMesh, NemesisError> {
        ProxyMesh::start_with_clients(targets, Vec::new(), seed).await
    }

    /// Like [`ProxyMesh::start_seeded`], plus one proxy in front of each node's client
    /// port (`clients[i]` is node i's real client address; empty for none). Clients
    /// must then dial [`ProxyMesh::client_addr`].
    pub async fn start_with_clients(
        targets: Vec<SocketAddr>,
        clients: Vec<SocketAddr>,
        seed: u64,
    ) -> Result<ProxyMesh, NemesisError> {
        ProxyMesh::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST), targets, clients, seed).await
    }

    /// Like [`ProxyMesh::start_with_clients`], with every proxy listening on `bind` (a
    /// free port each) rather than loopback: the host end of a namespace cluster's link,
    /// for nodes in network namespaces (see [`crate::netns_mesh`]).
    pub async fn start_on(
        bind: IpAddr,
        targets: Vec<SocketAddr>,
        clients: Vec<SocketAddr>,
        seed: u64,
    ) -> Result<ProxyMesh, NemesisError> {
        ProxyMesh::start_with(bind, targets, clients, seed, LossMode::Lines).await
    }

    /// Like [`ProxyMesh::start_on`], with what loss does on the peer links (client links
    /// carry only delays).
    pub async fn start_with(
        bind: IpAddr,
        targets: Vec<SocketAddr>,
        clients: Vec<SocketAddr>,
        seed: u64,
        loss_mode: LossMode,
    ) -> Result<ProxyMesh, NemesisError> {
        let n = targets.len();
        let origin = Instant::now();
        let (shutdown, _) = watch::channel(false);
        let live_connections = Arc::new(AtomicUsize::new(0));
        let mut accept_tasks = Vec::new();
        let mut links = Vec::with_capacity(n * n);
        for from in 0..n {
            for (to, &target) in targets.iter().enumerate() {
                if from == to {
                    links.push(None);
                    continue;
                }
                let link_seed = seed ^ ((from * n + to) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let (link, task) = spawn_link(
                    bind,
                    target,
                    link_seed,
                    loss_mode,
                    origin,
                    &shutdown,
                    &live_connections,
                )
                .await?;
                accept_tasks.push(task);
                links.push(Some(link));
            }
        }
        let mut client_links = Vec::with_capacity(clients.len());
        for (i, &target) in clients.iter().enumerate() {
            let link_seed = seed ^ ((n * n + i) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let (link, task) = spawn_link(
                bind,
                target,
                link_seed,
                LossMode::Lines,
                origin,
                &shutdown,
                &live_connections,
            )
            .await?;
            accept_tasks.push(task);
            client_links.push(link);
        }
        Ok(ProxyMesh {
            nodes: n,
            targets,
            links,
            client_links,
            current: Mutex::new(NetFaults::new()),
            shutdown,
            accept_tasks: Mutex::new(accept_tasks),
            live_connections,
            seq: AtomicU64::new(0),
            origin,
        })
    }

    /// Where clients must dial node `i`: its client proxy, or None when client links are
    /// not proxied (or `i` is out of range).
    pub fn client_addr(&self, i: usize) -> Option<SocketAddr> {
        self.client_links.get(i).map(|l| l.listen)
    }

    /// True when the nodes' client links go through proxies.
    pub fn proxies_clients(&self) -> bool {
        !self.client_links.is_empty()
    }

    /// Delays node `i`'s answers to its clients by `delay` ± `jitter` (zero heals).
    pub fn set_client_delay(&self, i: usize, delay: Duration, jitter: Duration) {
        self.update(|f| {
            let link = f.client_mut(i);
            link.delay = delay;
            link.jitter = jitter;
        });
    }

    /// Number of nodes the mesh connects.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    fn link(&self, from: usize, to: usize) -> Option<&Arc<Link>> {
        if from >= self.nodes || to >= self.nodes {
            return None;
        }
        self.links[from * self.nodes + to].as_ref()
    }

    /// Where node `from` must dial node `to`. For `from == to` (no proxy) this is node
    /// `to`'s real address; for an index out of range, 127.0.0.1:0.
    pub fn link_addr(&self, from: usize, to: usize) -> SocketAddr {
        match self.link(from, to) {
            Some(l) => l.listen,
            None => self
                .targets
                .get(to)
                .copied()
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
        }
    }

    /// Number of proxied connections currently open.
    pub fn open_connections(&self) -> usize {
        self.live_connections.load(Ordering::SeqCst)
    }

    fn update(&self, f: impl FnOnce(&mut NetFaults)) {
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut cur);
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        self.push(&cur, seq);
    }

    /// When the mesh started: the times of [`ProxyMesh::host_stats`]' windows count from
    /// here.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// What the links measured, laid out as the host proxies of a run on hosts report it
    /// ([`host::ProxyLinks::stats`]): per node `i`, its links to every other node in node
    /// order, then its client link if client links are proxied.
    pub fn host_stats(&self) -> Vec<Vec<host::LinkStats>> {
        (0..self.nodes)
            .map(|i| {
                let mut v: Vec<host::LinkStats> = (0..self.nodes)
                    .filter_map(|j| self.link(i, j))
                    .map(|l| l.link_stats())
                    .collect();
                if let Some(c) = self.client_links.get(i) {
                    v.push(c.link_stats());
                }
                v
            })
            .collect()
    }

    /// What each node's client link measured (empty when client links are not proxied).
    pub fn client_stats(&self) -> Vec<host::LinkStats> {
        self.client_links.iter().map(|l| l.link_stats()).collect()
    }

    /// Sends every link its per-direction settings derived from the flow faults; `seq`
    /// numbers the change.
    fn push(&self, faults: &NetFaults, seq: u64) {
        for from in 0..self.nodes {
            for to in 0..self.nodes {
                if let Some(link) = self.link(from, to) {
                    send_state(
                        link,
                        faults.flow(from, to),
                        faults.flow(to, from),
                        Some(seq),
                    );
                }
            }
        }
        for (i, link) in self.client_links.iter().enumerate() {
            // requests pass untouched; the node's answers carry the fault
            send_state(link, FlowFaults::default(), faults.client(i), Some(seq));
        }
    }

    /// Blocks the messages `from` sends to `to` (one way).
    pub fn cut_one_way(&self, from: usize, to: usize, mode: CutMode) {
        self.update(|f| f.cut(from, to, mode));
    }

    /// Blocks messages between `a` and `b` in both directions.
    pub fn cut_both(&self, a: usize, b: usize, mode: CutMode) {
        self.update(|f| {
            f.cut(a, b, mode);
            f.cut(b, a, mode);
        });
    }

    /// Delays the messages `from` sends to `to` by `delay` ± `jitter`.
    pub fn set_delay(&self, from: usize, to: usize, delay: Duration, jitter: Duration) {
        self.update(|f| {
            let flow = f.flow_mut(from, to);
            flow.delay = delay;
            flow.jitter = jitter;
        });
    }

    /// Loses `fraction` (0..=1) of what `from` sends to `to`: newline-terminated messages,
    /// or packets whose retransmission holds the stream up ([`LossMode`]).
    pub fn set_loss(&self, from: usize, to: usize, fraction: f64) {
        self.update(|f| f.flow_mut(from, to).loss = fraction.clamp(0.0, 1.0));
    }

    /// Caps the bytes per second `from` sends to `to` (None removes the cap).
    pub fn set_bandwidth(&self, from: usize, to: usize, bytes_per_sec: Option<u64>) {
        self.update(|f| f.flow_mut(from, to).bandwidth = bytes_per_sec.filter(|&b| b > 0));
    }

    /// The faults currently applied.
    pub fn faults(&self) -> NetFaults {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Removes every fault; stalled bytes flow again.
    pub fn heal(&self) {
        self.update(|f| *f = NetFaults::new());
    }

    /// Closes every listener and connection, waiting (at most 2 s) for connections to go.
    pub async fn shutdown(&self) {
        self.shutdown.send_replace(true);
        let tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.accept_tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while self.open_connections() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Opens one proxy listener forwarding to `target` and starts accepting on it.
async fn spawn_link(
    bind: IpAddr,
    target: SocketAddr,
    seed: u64,
    loss_mode: LossMode,
    origin: Instant,
    shutdown: &watch::Sender<bool>,
    live: &Arc<AtomicUsize>,
) -> Result<(Arc<Link>, JoinHandle<()>), NemesisError> {
    let listener = TcpListener::bind((bind, 0)).await?;
    let link = Arc::new(Link {
        listen: listener.local_addr()?,
        target,
        state: watch::channel(LinkState::default()).0,
        seed,
        connections: AtomicU64::new(0),
        loss_mode,
        stats: Default::default(),
        windows: Default::default(),
        origin,
    });
    let task = tokio::spawn(conn::accept_loop(
        listener,
        link.clone(),
        shutdown.subscribe(),
        live.clone(),
    ));
    Ok((link, task))
}

/// Gives a link new settings, waking its connections only if they changed; each
/// direction whose faults change starts a new fault window, numbered `seq`.
fn send_state(link: &Link, forward: FlowFaults, backward: FlowFaults, seq: Option<u64>) {
    link.state.send_if_modified(|s| {
        let mut changed = false;
        for (d, want) in [forward, backward].into_iter().enumerate() {
            let cur = if d == 0 { &s.forward } else { &s.backward };
            if *cur == want {
                continue;
            }
            // (under the state's lock: a reader sees the faults and their window together)
            s.epochs[d] = link.window_log(d).open(seq, &want, link.now_us());
            if d == 0 {
                s.forward = want;
            } else {
                s.backward = want;
            }
            changed = true;
        }
        changed
    });
}

impl NetworkFaults for ProxyMesh {
    fn node_count(&self) -> usize {
        self.nodes
    }

    fn apply(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        if faults.faulty_clients().next().is_some() && !self.proxies_clients() {
            return Err(NemesisError::Unsupported(
                "client links are not proxied in this run".into(),
            ));
        }
        self.update(|f| *f = faults.clone());
        Ok(())
    }
}

impl Drop for ProxyMesh {
    fn drop(&mut self) {
        // connection tasks watch this flag; accept loops are aborted outright
        self.shutdown.send_replace(true);
        for t in self
            .accept_tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            t.abort();
        }
    }
}
