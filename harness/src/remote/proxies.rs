//! Link faults on remote hosts through proxies, as the local mesh does them: every host
//! runs `splitbrain proxy-host` (this binary, uploaded beside the nodes) with one link per
//! other node, listening on the host's address and forwarding to that node's peer port,
//! and (when client-link faults are asked for) one in front of its own node's client
//! port. Node `i` dials node `j` through host `i`'s link to `j`, so a peer connection is
//! carried host to host by the dialler's proxy, which delays, drops, caps or cuts it
//! exactly as [`splitbrain_nemesis::proxy::ProxyMesh`] does: the per-link code is the
//! same ([`splitbrain_nemesis::proxy::host`]).
//!
//! Each proxy is driven over its SSH session's stdin and stdout (JSON lines); it ends when
//! its stdin does (released here, or the harness died and the session closed). What the
//! links measured (the time delayed chunks spent in them, the messages dropped) is asked
//! for at the end and written to the run directory as `links.json`.

use super::session::{quote, HostSession};
use super::RemoteError;
use splitbrain_nemesis::proxy::host::{HostReply, HostRequest, LinkStats, WireFlow};
use splitbrain_nemesis::proxy::windows::{FlowCounts, WindowStats};
use splitbrain_nemesis::proxy::ProxyMesh;
use splitbrain_nemesis::{FlowFaults, NemesisError, NetFaults, NetworkFaults};
use splitbrain_reports::{AskedLink, LinkFault, LinkMeasure, LinkMeasures, LinkWindow};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// How long a proxy may take to start and say where it listens.
const START_BOUND: Duration = Duration::from_secs(30);
/// How long a released proxy may take to report and exit.
const STOP_BOUND: Duration = Duration::from_secs(10);

enum Msg {
    Line(String),
}

struct HostProxy {
    label: String,
    /// Where each link listens: the other nodes' links in node order (this host's own
    /// node skipped), then the client link if any.
    listen: Vec<SocketAddr>,
    /// `None` once released.
    tx: std::sync::Mutex<Option<mpsc::UnboundedSender<Msg>>>,
    done: tokio::sync::Mutex<Option<tokio::task::JoinHandle<Option<Vec<LinkStats>>>>>,
    /// When it said where it listens (its own start, within a round trip).
    started: std::time::Instant,
}

/// The proxies of a remote run, one per host; the run's network backend.
pub struct RemoteProxies {
    hosts: Vec<HostProxy>,
    client_links: bool,
    seq: AtomicU64,
}

impl RemoteProxies {
    /// Uploads `binary` (this program) to `bin_dir` on every host and starts its proxy:
    /// host `i`'s links go to `peer_addrs[j]` for every other `j`, and with
    /// `client_links` one to `client_addrs[i]`; with `binary_streams`, `loss` holds the
    /// peer streams up by retransmission timeouts instead of dropping lines.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        hosts: &[Arc<HostSession>],
        binary: &Path,
        bin_dirs: &[String],
        peer_addrs: &[SocketAddr],
        client_addrs: &[SocketAddr],
        client_links: bool,
        binary_streams: bool,
        seed: u64,
    ) -> Result<RemoteProxies, RemoteError> {
        let mut out = RemoteProxies {
            hosts: Vec::new(),
            client_links,
            seq: AtomicU64::new(0),
        };
        for (i, h) in hosts.iter().enumerate() {
            let dest = format!("{}/splitbrain", bin_dirs[i]);
            h.upload_if_changed(binary, &dest).await?;
            let mut targets: Vec<SocketAddr> = (0..peer_addrs.len())
                .filter(|&j| j != i)
                .map(|j| peer_addrs[j])
                .collect();
            if client_links {
                targets.push(client_addrs[i]);
            }
            let mut script = format!(
                "exec {} proxy-host --bind {} --seed {}",
                quote(&dest),
                h.host.ip,
                seed ^ (i as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d)
            );
            if binary_streams {
                script.push_str(" --binary-streams");
            }
            for t in &targets {
                script.push_str(&format!(" --target {t}"));
            }
            out.hosts.push(start_one(h.clone(), script).await?);
        }
        Ok(out)
    }

    /// Where node `i` must dial node `j` (through its own host's proxy).
    pub fn dial_addr(&self, i: usize, j: usize, own_listen: SocketAddr) -> SocketAddr {
        if i == j {
            return own_listen;
        }
        let k = if j < i { j } else { j - 1 };
        self.hosts[i].listen[k]
    }

    /// Where clients dial node `i`: its client link, when there are client links.
    pub fn client_addr(&self, i: usize) -> Option<SocketAddr> {
        self.client_links
            .then(|| self.hosts[i].listen.last().copied())
            .flatten()
    }

    /// Where each host's proxy started on a clock that reads `now_s` now (seconds): the
    /// origins [`summarize`] places their fault windows with.
    pub fn origins(&self, now_s: f64) -> Vec<f64> {
        self.hosts
            .iter()
            .map(|h| now_s - h.started.elapsed().as_secs_f64())
            .collect()
    }

    /// Releases every proxy and collects what its links measured, per host (`None`: it
    /// did not report). Faults applied afterwards fail; a second call reports nothing.
    pub async fn finish(&self) -> Vec<(String, Option<Vec<LinkStats>>)> {
        let mut out = Vec::new();
        for h in &self.hosts {
            drop(h.tx.lock().unwrap_or_else(|p| p.into_inner()).take());
            let done = h.done.lock().await.take();
            let stats = match done {
                Some(d) => tokio::time::timeout(STOP_BOUND * 3, d)
                    .await
                    .ok()
                    .and_then(|r| r.ok())
                    .flatten(),
                None => None,
            };
            out.push((h.label.clone(), stats));
        }
        out
    }

    fn set_line(&self, i: usize, n: usize, faults: &NetFaults, seq: u64) -> String {
        let mut set: Vec<[WireFlow; 2]> = (0..n)
            .filter(|&j| j != i)
            .map(|j| {
                [
                    WireFlow::from(&faults.flow(i, j)),
                    WireFlow::from(&faults.flow(j, i)),
                ]
            })
            .collect();
        if self.client_links {
            set.push([
                WireFlow::from(&FlowFaults::default()),
                WireFlow::from(&faults.client(i)),
            ]);
        }
        let req = HostRequest::Set { seq, set };
        serde_json::to_string(&req).unwrap_or_default()
    }
}

/// Starts one host's proxy and waits (bounded) for the addresses it listens on.
async fn start_one(host: Arc<HostSession>, script: String) -> Result<HostProxy, RemoteError> {
    let label = host.host.label();
    let (listen_tx, listen_rx) = oneshot::channel::<Result<Vec<SocketAddr>, RemoteError>>();
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let done = tokio::spawn(async move {
        let fail = |why: String| RemoteError::Command {
            host: host.host.label(),
            what: "starting the link proxy".into(),
            detail: why,
        };
        let spawned = host.spawn_piped(&script).await;
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = listen_tx.send(Err(e));
                return None;
            }
        };
        let (Some(mut stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            let _ = listen_tx.send(Err(fail("no stdin or stdout".into())));
            return None;
        };
        let mut lines = BufReader::new(stdout).lines();
        match lines.next_line().await {
            Ok(Some(l)) => match serde_json::from_str::<HostReply>(&l) {
                Ok(HostReply::Listen { listen }) => {
                    let _ = listen_tx.send(Ok(listen));
                }
                _ => {
                    let _ = listen_tx.send(Err(fail(format!("it said {l:?}"))));
                    return None;
                }
            },
            other => {
                let _ = listen_tx.send(Err(fail(format!("it ended first ({other:?})"))));
                return None;
            }
        }
        let mut last_stats = None;
        let mut alive = true;
        loop {
            tokio::select! {
                m = rx.recv() => match m {
                    Some(Msg::Line(mut line)) => {
                        line.push('\n');
                        if stdin.write_all(line.as_bytes()).await.is_err()
                            || stdin.flush().await.is_err()
                        {
                            alive = false;
                            break;
                        }
                    }
                    None => break,
                },
                l = lines.next_line(), if alive => match l {
                    Ok(Some(l)) => match serde_json::from_str::<HostReply>(&l) {
                        Ok(HostReply::Stats { stats }) => last_stats = Some(stats),
                        Ok(HostReply::Error { error }) => {
                            eprintln!("splitbrain: link proxy on {}: {error}", host.host.label());
                        }
                        _ => {}
                    },
                    _ => {
                        alive = false;
                        break;
                    }
                },
            }
        }
        if alive {
            // Ask once more, then end its stdin: it prints its stats and exits.
            let ask = serde_json::to_string(&HostRequest::Stats { stats: true })
                .unwrap_or_default()
                + "\n";
            let _ = stdin.write_all(ask.as_bytes()).await;
            let _ = stdin.flush().await;
        }
        drop(stdin);
        let _ = tokio::time::timeout(STOP_BOUND, async {
            while let Ok(Some(l)) = lines.next_line().await {
                if let Ok(HostReply::Stats { stats }) = serde_json::from_str::<HostReply>(&l) {
                    last_stats = Some(stats);
                }
            }
        })
        .await;
        let _ = tokio::time::timeout(STOP_BOUND, child.wait()).await;
        last_stats
    });
    match tokio::time::timeout(START_BOUND, listen_rx).await {
        Ok(Ok(Ok(listen))) => Ok(HostProxy {
            label,
            listen,
            started: std::time::Instant::now(),
            tx: std::sync::Mutex::new(Some(tx)),
            done: tokio::sync::Mutex::new(Some(done)),
        }),
        Ok(Ok(Err(e))) => Err(e),
        _ => {
            done.abort();
            Err(RemoteError::Command {
                host: label,
                what: "starting the link proxy".into(),
                detail: format!("it did not say where it listens within {START_BOUND:?}"),
            })
        }
    }
}

impl NetworkFaults for RemoteProxies {
    fn node_count(&self) -> usize {
        self.hosts.len()
    }

    /// Sends every host its links' new faults (in order, on its session). Returns once
    /// they are sent, not applied: the proxies apply them within a round trip.
    fn apply(&self, faults: &NetFaults) -> Result<(), NemesisError> {
        if faults.faulty_clients().next().is_some() && !self.client_links {
            return Err(NemesisError::Unsupported(
                "client links are not proxied in this run".into(),
            ));
        }
        let n = self.hosts.len();
        let seq = self.seq.fetch_add(1, Ordering::SeqCst);
        let mut gone = Vec::new();
        for (i, h) in self.hosts.iter().enumerate() {
            let line = self.set_line(i, n, faults, seq);
            let sent = match &*h.tx.lock().unwrap_or_else(|p| p.into_inner()) {
                Some(tx) => tx.send(Msg::Line(line)).is_ok(),
                None => false,
            };
            if !sent {
                gone.push(h.label.clone());
            }
        }
        if gone.is_empty() {
            Ok(())
        } else {
            Err(NemesisError::Fault(format!(
                "the link proxy has gone on {}",
                gone.join(", ")
            )))
        }
    }
}

/// What the proxies measured, per directed link between nodes (`n1->n2`: node 1's
/// messages to node 2, whichever side dialled) and, where client links were proxied, per
/// node's answers to its clients (`n1->clients`), as written to `links.json` and shown in
/// the run's summary and report. `origins_s[i]` places host `i`'s proxy start on the
/// run's clock (seconds), for the times of its fault windows.
pub fn summarize(
    n: usize,
    per_host: &[(String, Option<Vec<LinkStats>>)],
    origins_s: &[f64],
) -> LinkMeasures {
    let mut flows = vec![Counts::default(); n * n];
    for (i, (_, stats)) in per_host.iter().enumerate() {
        let Some(stats) = stats else { continue };
        for (k, link) in stats.iter().enumerate() {
            // Links in node order without i itself; a client link (k == n - 1) is skipped.
            if k >= n.saturating_sub(1) {
                continue;
            }
            let j = if k < i { k } else { k + 1 };
            for (from, to, d) in [(i, j, &link.forward), (j, i, &link.backward)] {
                flows[from * n + to].add(&d.counts);
            }
        }
    }
    // Each node's answers to its clients, where its client link was proxied.
    let mut answers = vec![None; n];
    for (i, (_, stats)) in per_host.iter().enumerate() {
        if let Some(client) = stats.as_ref().and_then(|s| s.get(n.saturating_sub(1))) {
            answers[i] = Some(client.backward.counts);
        }
    }
    let mut links = Vec::new();
    let mut total = Counts::default();
    let mut add = |f: Counts| total.add(&f);
    for (i, f) in answers.iter().enumerate() {
        if let Some(f) = *f {
            add(f);
            links.push(measure(&format!("n{}", i + 1), "clients", f));
        }
    }
    for from in 0..n {
        for to in 0..n {
            if from == to {
                continue;
            }
            let f = flows[from * n + to];
            add(f);
            links.push(measure(
                &format!("n{}", from + 1),
                &format!("n{}", to + 1),
                f,
            ));
        }
    }
    let windows = flow_windows(n, per_host, origins_s);
    let (faults, outside) = per_fault(&windows);
    let windows = windows.into_iter().map(|(w, _)| w).collect();
    LinkMeasures {
        links,
        total: measure("*", "*", total),
        hosts_reporting: per_host.iter().filter(|(_, s)| s.is_some()).count(),
        hosts: per_host.len(),
        windows,
        faults,
        outside,
    }
}

/// What a local run's proxy mesh measured, summarized as a run on hosts is (one "host"
/// per node); `now_s` is the run's clock now, seconds.
pub fn summarize_mesh(mesh: &ProxyMesh, now_s: f64) -> LinkMeasures {
    let per_host: Vec<(String, Option<Vec<LinkStats>>)> = mesh
        .host_stats()
        .into_iter()
        .enumerate()
        .map(|(i, s)| (format!("n{}", i + 1), Some(s)))
        .collect();
    let origin = now_s - mesh.origin().elapsed().as_secs_f64();
    let mut m = summarize(mesh.nodes(), &per_host, &vec![origin; mesh.nodes()]);
    // no hosts: the mesh is in the harness and always reports
    (m.hosts, m.hosts_reporting) = (0, 0);
    m
}

/// What the client-link proxies of a local run measured (a run whose peer links go
/// through namespace rules, so only the client links are the harness's to count): each
/// node's answers to its clients, for `n` nodes; `now_s` as in [`summarize_mesh`].
pub fn summarize_client_mesh(clients: &ProxyMesh, n: usize, now_s: f64) -> LinkMeasures {
    let per_host: Vec<(String, Option<Vec<LinkStats>>)> = clients
        .client_stats()
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            // no peer links of its own: empty ones in their places, then the client link
            let mut links = vec![LinkStats::default(); n.saturating_sub(1)];
            links.push(c);
            (format!("n{}", i + 1), Some(links))
        })
        .collect();
    let origin = now_s - clients.origin().elapsed().as_secs_f64();
    let mut m = summarize(n, &per_host, &vec![origin; n]);
    m.links.retain(|l| l.to == "clients");
    (m.hosts, m.hosts_reporting) = (0, 0);
    m
}

/// Shows what the proxies measured on stderr (the whole run, then per fault) and writes
/// it to `links.json` in `run_dir`.
pub fn record_links(run_dir: &Path, measured: &LinkMeasures) {
    eprintln!("splitbrain: links {}", measured.describe());
    for line in measured.describe_faults() {
        eprintln!("splitbrain:   {line}");
    }
    let file = run_dir.join("links.json");
    let text = serde_json::to_vec_pretty(measured).unwrap_or_default();
    if let Err(e) = std::fs::write(&file, text) {
        eprintln!("splitbrain: writing {}: {e}", file.display());
    }
}

/// The counters [`measure`] reads, summed over links and windows.
type Counts = FlowCounts;

fn asked_of(w: &WindowStats) -> AskedLink {
    AskedLink {
        delay_ms: w.asked.delay_us as f64 / 1000.0,
        jitter_ms: w.asked.jitter_us as f64 / 1000.0,
        loss: w.asked.loss,
        cut: w.asked.cut.is_some(),
    }
}

/// Every flow's fault windows: a flow i->j is carried by two link directions (host i's
/// link to j forward, host j's link to i backward) whose windows the same change of
/// faults (`seq`) opens, so they are summed per (flow, seq); client links give the
/// `n{i}->clients` flows.
fn flow_windows(
    n: usize,
    per_host: &[(String, Option<Vec<LinkStats>>)],
    origins_s: &[f64],
) -> Vec<(LinkWindow, Counts)> {
    // (from, to, seq) -> (asked, start s, end s, counters); `to == n` is the clients
    type Key = (usize, usize, Option<u64>);
    let mut acc: BTreeMap<Key, (AskedLink, f64, Option<f64>, Counts)> = BTreeMap::new();
    let mut add = |key: Key, w: &WindowStats, origin: f64| {
        let start = origin + w.start_us as f64 / 1e6;
        let end = w.end_us.map(|e| origin + e as f64 / 1e6);
        let e = acc
            .entry(key)
            .or_insert_with(|| (asked_of(w), start, end, Counts::default()));
        e.1 = e.1.min(start);
        e.2 = match (e.2, end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        };
        e.3.add(&w.counts);
    };
    for (i, (_, stats)) in per_host.iter().enumerate() {
        let Some(stats) = stats else { continue };
        let origin = origins_s.get(i).copied().unwrap_or(0.0);
        for (k, link) in stats.iter().enumerate() {
            if k >= n.saturating_sub(1) {
                // the client link: its backward direction is node i's answers
                for w in &link.backward.windows {
                    add((i, n, w.seq), w, origin);
                }
                continue;
            }
            let j = if k < i { k } else { k + 1 };
            for w in &link.forward.windows {
                add((i, j, w.seq), w, origin);
            }
            for w in &link.backward.windows {
                add((j, i, w.seq), w, origin);
            }
        }
    }
    let mut out: Vec<(LinkWindow, Counts)> = acc
        .into_iter()
        .map(|((from, to, seq), (asked, start_s, end_s, f))| {
            let to = if to == n {
                "clients".to_string()
            } else {
                format!("n{}", to + 1)
            };
            let w = LinkWindow {
                seq,
                start_s,
                end_s,
                asked,
                measured: measure(&format!("n{}", from + 1), &to, f),
            };
            (w, f)
        })
        .collect();
    out.sort_by(|a, b| a.0.start_s.total_cmp(&b.0.start_s));
    out
}

/// The windows grouped per fault: those one change (`seq`) opened with the same asked
/// faults, summed; and the sum over the windows with nothing asked.
fn per_fault(windows: &[(LinkWindow, Counts)]) -> (Vec<LinkFault>, Option<LinkMeasure>) {
    let mut faults: Vec<(LinkFault, Counts)> = Vec::new();
    let mut outside = Counts::default();
    let mut any_outside = false;
    for (w, f) in windows {
        let (m, f) = (&w.measured, *f);
        if !w.asked.is_fault() {
            any_outside = true;
            outside.add(&f);
            continue;
        }
        let link = format!("{}->{}", m.from, m.to);
        match faults
            .iter_mut()
            .find(|(g, _)| g.seq == w.seq && g.asked == w.asked)
        {
            Some((g, counts)) => {
                g.start_s = g.start_s.min(w.start_s);
                g.end_s = match (g.end_s, w.end_s) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                g.links.push(link);
                counts.add(&f);
            }
            None => faults.push((
                LinkFault {
                    seq: w.seq,
                    start_s: w.start_s,
                    end_s: w.end_s,
                    asked: w.asked.clone(),
                    links: vec![link],
                    measured: LinkMeasure::default(),
                },
                f,
            )),
        }
    }
    let faults = faults
        .into_iter()
        .map(|(mut g, counts)| {
            g.measured = measure("*", "*", counts);
            g
        })
        .collect();
    (faults, any_outside.then(|| measure("*", "*", outside)))
}

fn measure(from: &str, to: &str, f: Counts) -> LinkMeasure {
    LinkMeasure {
        from: from.to_string(),
        to: to.to_string(),
        messages: f.lines,
        dropped: f.lines_dropped,
        measured_loss: (f.lines > 0).then(|| f.lines_dropped as f64 / f.lines as f64),
        delayed_chunks: f.delayed_chunks,
        mean_delay_ms: (f.delayed_chunks > 0)
            .then(|| f.delayed_held_us as f64 / f.delayed_chunks as f64 / 1000.0),
        max_held_ms: f.max_held_us as f64 / 1000.0,
        stalled_chunks: f.stalled_chunks,
        mean_stall_ms: (f.stalled_chunks > 0)
            .then(|| f.stalled_held_us as f64 / f.stalled_chunks as f64 / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitbrain_nemesis::proxy::host::DirStats;

    fn dir(lines: u64, dropped: u64, chunks: u64, held_us: u64) -> DirStats {
        DirStats {
            counts: FlowCounts {
                lines,
                lines_dropped: dropped,
                chunks,
                delayed_chunks: chunks,
                delayed_held_us: held_us,
                max_held_us: held_us / chunks.max(1),
                ..FlowCounts::default()
            },
            ..DirStats::default()
        }
    }

    #[test]
    fn each_hosts_links_are_counted_on_the_flows_they_carry() {
        // Three nodes; host 1 (index 0) links to n2, n3; host 2 to n1, n3; host 3 to n1, n2.
        let link = |fwd: DirStats, back: DirStats| LinkStats {
            forward: fwd,
            backward: back,
            ..LinkStats::default()
        };
        let zero = DirStats::default();
        let per_host = vec![
            // n1 -> n2: 10 messages, 1 dropped; n2's replies to n1 on the same link: 5.
            (
                "h1".to_string(),
                Some(vec![
                    link(dir(10, 1, 2, 200_000), dir(5, 0, 0, 0)),
                    link(zero.clone(), zero.clone()),
                ]),
            ),
            // n2 -> n1 on n2's own link: 4 more messages of the n2 -> n1 flow.
            (
                "h2".to_string(),
                Some(vec![
                    link(dir(4, 2, 1, 50_000), zero.clone()),
                    link(zero.clone(), zero.clone()),
                ]),
            ),
            ("h3".to_string(), None),
        ];
        let m = summarize(3, &per_host, &[0.0; 3]);
        let flow = |from: &str, to: &str| {
            m.links
                .iter()
                .find(|l| l.from == from && l.to == to)
                .unwrap()
        };
        assert_eq!(
            (flow("n1", "n2").messages, flow("n1", "n2").dropped),
            (10, 1)
        );
        assert_eq!(
            (flow("n2", "n1").messages, flow("n2", "n1").dropped),
            (9, 2)
        );
        assert_eq!(flow("n1", "n2").mean_delay_ms, Some(100.0));
        assert_eq!(flow("n2", "n3").messages, 0);
        assert_eq!(flow("n2", "n3").measured_loss, None);
        assert_eq!(
            (m.total.messages, m.total.dropped, m.total.delayed_chunks),
            (19, 3, 3)
        );
        assert_eq!(m.total.mean_delay_ms, Some(250.0 / 3.0));
        assert_eq!((m.hosts_reporting, m.hosts), (2, 3));
        assert!(m.links.iter().all(|l| l.to != "clients"));
        // With client links: a third link per host, whose backward direction is the
        // node's answers.
        let with_client = vec![(
            "h1".to_string(),
            Some(vec![
                LinkStats::default(),
                LinkStats::default(),
                link(zero.clone(), dir(7, 0, 7, 7 * 50_000)),
            ]),
        )];
        let m2 = summarize(3, &with_client, &[0.0]);
        let answers = m2
            .links
            .iter()
            .find(|l| l.from == "n1" && l.to == "clients");
        let answers = answers.expect("n1's answers to its clients");
        assert_eq!((answers.messages, answers.mean_delay_ms), (7, Some(50.0)));
    }

    fn window(seq: Option<u64>, start_us: u64, end_us: Option<u64>, delay_ms: u64) -> WindowStats {
        WindowStats {
            seq,
            start_us,
            end_us,
            asked: WireFlow {
                delay_us: delay_ms * 1000,
                ..WireFlow::default()
            },
            ..WindowStats::default()
        }
    }

    #[test]
    fn the_two_halves_of_a_flow_are_summed_per_window_and_grouped_per_fault() {
        // Two nodes. Flow n1->n2 is host 1's link forward and host 2's link backward;
        // set 1 slows it by 80 ms from 1 s to 3 s (host 2's proxy started 0.5 s later).
        let mut fwd = DirStats {
            windows: vec![
                window(None, 0, Some(1_000_000), 0),
                window(Some(1), 1_000_000, Some(3_000_000), 80),
                window(Some(2), 3_000_000, None, 0),
            ],
            ..DirStats::default()
        };
        fwd.windows[0].counts.lines = 5;
        fwd.windows[1].counts.lines = 4;
        fwd.windows[1].counts.delayed_chunks = 2;
        fwd.windows[1].counts.delayed_held_us = 162_000;
        fwd.windows[1].counts.max_held_us = 82_000;
        let mut back = DirStats {
            windows: vec![
                window(None, 0, Some(500_000), 0),
                window(Some(1), 500_000, Some(2_500_000), 80),
                window(Some(2), 2_500_000, None, 0),
            ],
            ..DirStats::default()
        };
        back.windows[1].counts.lines = 6;
        back.windows[1].counts.lines_dropped = 0;
        back.windows[1].counts.delayed_chunks = 1;
        back.windows[1].counts.delayed_held_us = 84_000;
        back.windows[1].counts.max_held_us = 84_000;
        back.windows[2].counts.lines = 3;
        let per_host = vec![
            (
                "h1".to_string(),
                Some(vec![LinkStats {
                    forward: fwd,
                    ..LinkStats::default()
                }]),
            ),
            (
                "h2".to_string(),
                Some(vec![LinkStats {
                    backward: back,
                    ..LinkStats::default()
                }]),
            ),
        ];
        let m = summarize(2, &per_host, &[-2.0, -1.5]);
        let slowed: Vec<&LinkWindow> = m.windows.iter().filter(|w| w.seq == Some(1)).collect();
        // n1->n2's two halves are one window; n2->n1 has its own (nothing passed on it).
        let w = slowed
            .iter()
            .find(|w| w.measured.from == "n1" && w.measured.to == "n2")
            .expect("n1->n2 in set 1");
        assert_eq!((w.start_s, w.end_s), (-1.0, Some(1.0)));
        assert_eq!(w.asked.delay_ms, 80.0);
        assert_eq!((w.measured.messages, w.measured.delayed_chunks), (10, 3));
        assert_eq!(w.measured.mean_delay_ms, Some(82.0));
        assert_eq!(w.measured.max_held_ms, 84.0);
        // One fault: set 1's +80 ms, over the links it slowed that carried anything.
        assert_eq!(m.faults.len(), 1, "{:?}", m.faults);
        let f = &m.faults[0];
        assert_eq!(f.seq, Some(1));
        assert!(f.links.contains(&"n1->n2".to_string()), "{:?}", f.links);
        assert_eq!(
            (f.measured.delayed_chunks, f.measured.mean_delay_ms),
            (3, Some(82.0))
        );
        // Outside it: the 5 messages before and the 3 after, none dropped.
        let o = m.outside.as_ref().expect("unfaulted windows");
        assert_eq!((o.messages, o.dropped), (8, 0));
    }

    /// A line-echo server on loopback, standing in for a node's client port.
    async fn echo_server() -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (read, mut write) = conn.into_split();
                    let mut lines = BufReader::new(read).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        if write
                            .write_all(format!("{line}\n").as_bytes())
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_client_mesh_reports_each_nodes_client_link_and_its_delay() {
        // Three nodes, each with a client proxy; n2's answers to its clients are slowed by
        // 40 ms, n1's and n3's are not.
        let nodes = vec![
            echo_server().await,
            echo_server().await,
            echo_server().await,
        ];
        let mesh = ProxyMesh::start_with_clients(nodes.clone(), nodes, 7)
            .await
            .unwrap();
        mesh.set_client_delay(1, Duration::from_millis(40), Duration::ZERO);
        for i in 0..3 {
            let conn = tokio::net::TcpStream::connect(mesh.client_addr(i).unwrap())
                .await
                .unwrap();
            let (read, mut write) = conn.into_split();
            let mut lines = BufReader::new(read).lines();
            for k in 0..3 {
                write
                    .write_all(format!("op {k}\n").as_bytes())
                    .await
                    .unwrap();
                let answer = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                    .await
                    .expect("the proxy answers")
                    .unwrap();
                assert_eq!(answer.as_deref(), Some(format!("op {k}").as_str()));
            }
        }
        let m = summarize_client_mesh(&mesh, 3, 5.0);
        let names: Vec<(&str, &str)> = m
            .links
            .iter()
            .map(|l| (l.from.as_str(), l.to.as_str()))
            .collect();
        assert_eq!(
            names,
            [("n1", "clients"), ("n2", "clients"), ("n3", "clients")],
            "only the client links, no peer link"
        );
        assert_eq!((m.hosts, m.hosts_reporting), (0, 0), "a local mesh");
        let slow = &m.links[1];
        assert!(slow.delayed_chunks >= 3, "{slow:?}");
        assert!(slow.mean_delay_ms.unwrap() >= 39.0, "{slow:?}");
        for fast in [&m.links[0], &m.links[2]] {
            assert_eq!(fast.delayed_chunks, 0, "{fast:?}");
            assert_eq!(fast.dropped, 0, "{fast:?}");
        }
        mesh.shutdown().await;
    }
}
