//! The proxy of one host of a remote run (`splitbrain proxy-host`): the links that start
//! on this host, each listening on the host's address and forwarding to a node (another
//! host's peer port, or this host's own client port), with the same per-link code as the
//! local [`super::ProxyMesh`].
//!
//! It is driven over its stdin and stdout, one JSON object per line:
//!
//! - it prints `{"listen":["ip:port",...]}` once its listeners are bound (one per target,
//!   in order);
//! - `{"seq":N,"set":[[forward,backward],...]}` replaces every link's faults (forward: the
//!   direction from the dialler to the target) and is answered `{"applied":N}`; each
//!   direction whose faults change starts a fault window numbered N;
//! - `{"stats":true}` is answered `{"stats":[...]}`, what each link measured
//!   ([`LinkStats`]), over the whole run and per fault window, with times counted from
//!   the proxy's start;
//! - the end of its stdin (the harness released it, or died and its SSH session closed)
//!   closes every link and ends the process after printing the stats once more.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::windows::{FlowCounts, WindowStats};
use super::{send_state, spawn_link, Link, LossMode};
use crate::network::{CutMode, FlowFaults};
use crate::NemesisError;

/// The faults of one direction of a link, as sent to a host's proxy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireFlow {
    /// The link is cut (and how).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<CutMode>,
    /// Added delay, microseconds.
    #[serde(default)]
    pub delay_us: u64,
    /// Jitter around the delay, microseconds.
    #[serde(default)]
    pub jitter_us: u64,
    /// Fraction of messages (lines) dropped.
    #[serde(default)]
    pub loss: f64,
    /// Bandwidth cap, bytes per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<u64>,
}

impl From<&FlowFaults> for WireFlow {
    fn from(f: &FlowFaults) -> WireFlow {
        WireFlow {
            cut: f.cut,
            delay_us: f.delay.as_micros() as u64,
            jitter_us: f.jitter.as_micros() as u64,
            loss: f.loss,
            bandwidth: f.bandwidth,
        }
    }
}

impl From<&WireFlow> for FlowFaults {
    fn from(w: &WireFlow) -> FlowFaults {
        FlowFaults {
            cut: w.cut,
            delay: Duration::from_micros(w.delay_us),
            jitter: Duration::from_micros(w.jitter_us),
            loss: w.loss.clamp(0.0, 1.0),
            bandwidth: w.bandwidth.filter(|&b| b > 0),
        }
    }
}

/// What one direction of a link measured since the proxy started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirStats {
    /// Counted since the proxy started.
    #[serde(flatten)]
    pub counts: FlowCounts,
    /// The same per fault window, oldest first (empty from a proxy that keeps none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowStats>,
}

/// What one link measured: both directions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkStats {
    /// Where the link forwards to.
    pub target: String,
    /// Connections accepted.
    pub connections: u64,
    /// Dialler to target.
    pub forward: DirStats,
    /// Target to dialler.
    pub backward: DirStats,
}

/// A message to a host's proxy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HostRequest {
    /// Replace every link's faults.
    Set {
        /// Echoed in the answer.
        seq: u64,
        /// `[forward, backward]` per link, in the order of the targets.
        set: Vec<[WireFlow; 2]>,
    },
    /// Report what the links measured.
    Stats {
        /// Always true.
        stats: bool,
    },
}

/// A message from a host's proxy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HostReply {
    /// Where each link listens (once, first).
    Listen {
        /// One per target.
        listen: Vec<SocketAddr>,
    },
    /// A `set` was applied.
    Applied {
        /// Its `seq`.
        applied: u64,
    },
    /// What the links measured.
    Stats {
        /// One per link.
        stats: Vec<LinkStats>,
    },
    /// A request could not be read.
    Error {
        /// Why.
        error: String,
    },
}

/// A set of proxied links on one host, each to its own target.
pub struct ProxyLinks {
    links: Vec<Arc<Link>>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    live: Arc<AtomicUsize>,
    origin: Instant,
}

impl ProxyLinks {
    /// Binds one listener per target on `bind` (port chosen by the system); `loss_mode`
    /// is what `loss` does on every link.
    pub async fn start(
        bind: IpAddr,
        targets: &[SocketAddr],
        seed: u64,
        loss_mode: LossMode,
    ) -> Result<ProxyLinks, NemesisError> {
        let (shutdown, _) = watch::channel(false);
        let live = Arc::new(AtomicUsize::new(0));
        let origin = Instant::now();
        let mut links = Vec::new();
        let mut tasks = Vec::new();
        for (k, &t) in targets.iter().enumerate() {
            let link_seed = seed ^ (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let (link, task) =
                spawn_link(bind, t, link_seed, loss_mode, origin, &shutdown, &live).await?;
            links.push(link);
            tasks.push(task);
        }
        Ok(ProxyLinks {
            links,
            shutdown,
            tasks,
            live,
            origin,
        })
    }

    /// Where each link listens.
    pub fn listen_addrs(&self) -> Vec<SocketAddr> {
        self.links.iter().map(|l| l.listen).collect()
    }

    /// Sets link `k`'s faults; a direction whose faults change starts a fault window
    /// numbered `seq`.
    pub fn set(&self, k: usize, forward: FlowFaults, backward: FlowFaults, seq: u64) {
        if let Some(l) = self.links.get(k) {
            send_state(l, forward, backward, Some(seq));
        }
    }

    /// When these links started: window times count from here.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// What each link measured so far.
    pub fn stats(&self) -> Vec<LinkStats> {
        self.links.iter().map(|l| l.link_stats()).collect()
    }

    /// Closes every listener and connection (waiting up to 2 s for the connections).
    pub async fn shutdown(mut self) {
        self.shutdown.send_replace(true);
        for t in &self.tasks {
            t.abort();
        }
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while self.live.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn say<W: AsyncWrite + Unpin>(out: &mut W, reply: &HostReply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line).await?;
    out.flush().await
}

/// Runs a host's proxy: links on `bind` to `targets` (`loss_mode` on every one), driven
/// by `input` (see the module documentation), answering on `output`, until `input` ends.
pub async fn serve_host<R, W>(
    bind: IpAddr,
    targets: &[SocketAddr],
    seed: u64,
    loss_mode: LossMode,
    input: R,
    mut output: W,
) -> Result<(), NemesisError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let links = ProxyLinks::start(bind, targets, seed, loss_mode).await?;
    say(
        &mut output,
        &HostReply::Listen {
            listen: links.listen_addrs(),
        },
    )
    .await?;
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<HostRequest>(&line) {
            Ok(HostRequest::Set { seq, set }) => {
                for (k, [f, b]) in set.iter().enumerate() {
                    links.set(k, f.into(), b.into(), seq);
                }
                HostReply::Applied { applied: seq }
            }
            Ok(HostRequest::Stats { .. }) => HostReply::Stats {
                stats: links.stats(),
            },
            Err(e) => HostReply::Error {
                error: format!("unreadable request: {e}"),
            },
        };
        say(&mut output, &reply).await?;
    }
    let stats = links.stats();
    links.shutdown().await;
    // The harness may be gone: a failed write changes nothing now.
    let _ = say(&mut output, &HostReply::Stats { stats }).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use tokio::io::{AsyncReadExt, BufReader};
    use tokio::net::{TcpListener, TcpStream};

    /// A target that sends back every line it reads.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (r, mut w) = s.into_split();
                    let mut lines = BufReader::new(r).lines();
                    while let Ok(Some(l)) = lines.next_line().await {
                        if w.write_all(format!("{l}\n").as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn reply(lines: &mut tokio::io::Lines<BufReader<tokio::io::DuplexStream>>) -> HostReply {
        let l = lines.next_line().await.unwrap().expect("a reply");
        serde_json::from_str(&l).unwrap()
    }

    #[tokio::test]
    async fn a_host_proxy_reports_its_links_applies_faults_and_measures_them() {
        let target = echo().await;
        let (mut to_proxy, proxy_in) = tokio::io::duplex(1 << 16);
        let (proxy_out, from_proxy) = tokio::io::duplex(1 << 16);
        let server = tokio::spawn(async move {
            serve_host(
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                &[target],
                1,
                LossMode::Lines,
                BufReader::new(proxy_in),
                proxy_out,
            )
            .await
        });
        let mut lines = BufReader::new(from_proxy).lines();
        let HostReply::Listen { listen } = reply(&mut lines).await else {
            panic!("no listen first")
        };
        assert_eq!(listen.len(), 1);
        // 40 ms on the way there, every line dropped on the way back.
        let slow = WireFlow {
            delay_us: 40_000,
            ..WireFlow::default()
        };
        let lossy = WireFlow {
            loss: 1.0,
            ..WireFlow::default()
        };
        let set = HostRequest::Set {
            seq: 7,
            set: vec![[slow, lossy]],
        };
        to_proxy
            .write_all(format!("{}\n", serde_json::to_string(&set).unwrap()).as_bytes())
            .await
            .unwrap();
        assert!(matches!(
            reply(&mut lines).await,
            HostReply::Applied { applied: 7 }
        ));
        let mut c = TcpStream::connect(listen[0]).await.unwrap();
        for _ in 0..3 {
            c.write_all(b"hello\n").await.unwrap();
        }
        // Asks for the stats until the echoes of all three lines have passed the proxy.
        let mut stats = Vec::new();
        for _ in 0..200 {
            to_proxy.write_all(b"{\"stats\":true}\n").await.unwrap();
            let HostReply::Stats { stats: s } = reply(&mut lines).await else {
                panic!("no stats")
            };
            stats = s;
            if stats[0].backward.counts.lines >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // All dropped: nothing came back.
        let mut buf = [0u8; 16];
        let got = tokio::time::timeout(Duration::from_millis(100), c.read(&mut buf)).await;
        assert!(got.is_err(), "a dropped line came back: {got:?}");
        let s = &stats[0];
        assert_eq!(s.connections, 1);
        assert_eq!(s.forward.counts.lines, 3);
        assert_eq!(s.forward.counts.lines_dropped, 0);
        assert!(s.forward.counts.delayed_chunks >= 1, "{s:?}");
        assert!(
            s.forward.counts.delayed_held_us >= 40_000 * s.forward.counts.delayed_chunks,
            "a chunk left before its delay: {s:?}"
        );
        assert_eq!(s.backward.counts.lines, 3);
        assert_eq!(s.backward.counts.lines_dropped, 3);
        // Per window: the one from the start (no fault, nothing passed yet) and set 7's.
        for d in [&s.forward, &s.backward] {
            assert_eq!(d.windows.len(), 2, "{d:?}");
            assert_eq!((d.windows[0].seq, d.windows[0].counts.lines), (None, 0));
            assert_eq!(d.windows[1].seq, Some(7));
            assert_eq!(d.windows[1].end_us, None);
        }
        let fw = &s.forward.windows[1];
        assert_eq!((fw.asked.delay_us, fw.counts.lines), (40_000, 3));
        assert_eq!(fw.counts.delayed_chunks, s.forward.counts.delayed_chunks);
        assert!(
            fw.counts.delayed_held_us >= 40_000 * fw.counts.delayed_chunks,
            "{fw:?}"
        );
        let bw = &s.backward.windows[1];
        assert_eq!(
            (bw.asked.loss, bw.counts.lines, bw.counts.lines_dropped),
            (1.0, 3, 3)
        );
        // The end of its input ends it, after one last report.
        drop(to_proxy);
        assert!(matches!(reply(&mut lines).await, HostReply::Stats { .. }));
        server.await.unwrap().unwrap();
    }

    #[test]
    fn wire_flows_carry_every_fault_both_ways() {
        let f = FlowFaults {
            cut: Some(CutMode::Refuse),
            delay: Duration::from_millis(120),
            jitter: Duration::from_millis(30),
            loss: 0.25,
            bandwidth: Some(4096),
        };
        let w = WireFlow::from(&f);
        let back: WireFlow = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(FlowFaults::from(&back), f);
    }
}
