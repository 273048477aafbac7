//! Node processes on remote hosts, controlled by PID over each host's SSH session.
//!
//! On host `i` the run keeps everything under `<data_dir>/splitbrain-<tag>/`:
//! `bin/<binary>` (unless the host keeps binaries across runs, in `<data_dir>/bin/`), and
//! `n<i>/` with the node's `data/`, `node.log` and `node.pid`. A node is started detached
//! (`nohup`, output to its log), so it outlives the SSH command that started it; every
//! signal checks first that the PID still runs the uploaded binary, so a recycled PID is
//! never touched.

use super::firewall::HostFirewall;
use super::leash::{self, LeashSpec, START_TIME_FN};
use super::session::{quote, HeldCommand, HostSession};
use super::RemoteError;
use crate::systems::{ClockSource, Target};
use splitbrain_nemesis::{ClusterControl, NemesisError};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Where the node binary comes from.
#[derive(Debug, Clone)]
pub enum BinarySource {
    /// A file here, uploaded to every host.
    Local(PathBuf),
    /// A program already on the hosts (a path or a name on their PATH).
    OnHost(String),
}

/// What one node needs to start.
#[derive(Debug, Clone)]
pub struct RemoteNodeSpec {
    /// `n1`..`nN`.
    pub name: String,
    /// Where clients reach it.
    pub client_addr: SocketAddr,
    /// Its command-line arguments.
    pub args: Vec<String>,
}

struct RemoteNode {
    spec: RemoteNodeSpec,
    /// The node's PID and its start time (clock ticks after boot): a process is the node
    /// only while both match, whatever program it has become by `exec` (a wrapper script,
    /// an interpreter found through a shim).
    pid: Option<(u32, u64)>,
}

/// Everything the run made on one host, to remove at the end.
struct HostFiles {
    /// `<data_dir>/splitbrain-<tag>`.
    run_dir: String,
    /// The binary as started on this host.
    binary: String,
    /// The data directory itself, when the run had to create it.
    made_data_dir: bool,
    /// The host's libfaketime, when the run moves clocks through it.
    faketime: Option<String>,
}

/// The offset file libfaketime reads for the node in `dir` (beside its log).
fn faketime_file(dir: &str) -> String {
    format!("{dir}/faketime")
}

/// The first of libfaketime's usual paths that is a file on `host`.
async fn find_faketime(host: &HostSession) -> Result<String, RemoteError> {
    let candidates: Vec<String> = splitbrain_nemesis::faketime::LIBRARY_CANDIDATES
        .iter()
        .map(|p| quote(p))
        .collect();
    let out = host
        .run(
            "looking for libfaketime",
            &format!(
                "for p in {}; do if [ -f \"$p\" ]; then echo \"$p\"; exit 0; fi; done; echo none",
                candidates.join(" ")
            ),
        )
        .await?;
    match out.trim() {
        "none" | "" => Err(RemoteError::Missing {
            host: host.host.label(),
            what:
                "libfaketime, which --nemesis clock needs for this target (Debian package faketime)"
                    .into(),
        }),
        lib => Ok(lib.to_string()),
    }
}

/// A shell command that replaces `file` with `text` atomically (a reader never sees
/// half of it).
fn write_atomically(file: &str, text: &str) -> String {
    format!(
        "printf %s {t} > {tmp} && mv -f {tmp} {f}",
        t = quote(text),
        tmp = quote(&format!("{file}.tmp")),
        f = quote(file)
    )
}

/// A cluster of node processes, node `i` on host `i`.
pub struct RemoteCluster {
    hosts: Vec<Arc<HostSession>>,
    files: Vec<HostFiles>,
    nodes: Vec<Mutex<RemoteNode>>,
    target: Arc<dyn Target>,
    http: reqwest::Client,
    torn_down: std::sync::atomic::AtomicBool,
    /// Each host's leash ([`leash`]), released once teardown has finished.
    leashes: Mutex<Vec<HeldCommand>>,
}

/// The directory of node `i`'s files on its host.
pub fn node_dir(run_dir: &str, name: &str) -> String {
    format!("{run_dir}/{name}")
}

/// `<data_dir>/splitbrain-<tag>` on `host`.
pub fn host_run_dir(host: &HostSession, tag: &str) -> String {
    format!("{}/splitbrain-{tag}", host.host.data_dir.display())
}

impl RemoteCluster {
    /// Lays out the run's directories on every host, puts the binary there (the upload
    /// skipped where the host's copy has the same checksum) and starts each host's leash,
    /// which removes what the run made there should the harness die. `firewalls` is empty
    /// when the run does not use the hosts' firewalls. With `faketime` (a target whose
    /// clocks move through libfaketime, under a clock nemesis) every host must have the
    /// library; each node's offset file starts at 0. No node runs yet.
    pub async fn prepare(
        target: Arc<dyn Target>,
        hosts: Vec<Arc<HostSession>>,
        firewalls: &[HostFirewall],
        binary: &BinarySource,
        nodes: Vec<RemoteNodeSpec>,
        tag: &str,
        faketime: bool,
    ) -> Result<RemoteCluster, RemoteError> {
        let mut cluster = RemoteCluster {
            files: Vec::new(),
            nodes: nodes
                .into_iter()
                .map(|spec| Mutex::new(RemoteNode { spec, pid: None }))
                .collect(),
            hosts,
            target,
            http: reqwest::Client::builder()
                .timeout(Duration::from_millis(500))
                .build()
                .map_err(|e| RemoteError::Local {
                    what: "making the HTTP client".into(),
                    source: std::io::Error::other(e),
                })?,
            torn_down: std::sync::atomic::AtomicBool::new(false),
            leashes: Mutex::new(Vec::new()),
        };
        for (i, h) in cluster.hosts.iter().enumerate() {
            // Looked for before anything is made there, so a host without it costs nothing.
            let faketime = match faketime {
                true => Some(find_faketime(h).await?),
                false => None,
            };
            let run_dir = host_run_dir(h, tag);
            let data_dir = h.host.data_dir.display().to_string();
            let made = h
                .run(
                    "creating the run directory",
                    &format!(
                        "if [ -d {d} ]; then m=0; else m=1; fi; mkdir -p {n} && echo $m",
                        d = quote(&data_dir),
                        n = quote(&node_dir(&run_dir, &cluster.node_name(i)))
                    ),
                )
                .await?;
            let binary = match binary {
                BinarySource::OnHost(p) => p.clone(),
                BinarySource::Local(path) => {
                    let file = path.file_name().unwrap_or_default().to_string_lossy();
                    let dest = if h.host.keep_binary {
                        format!("{data_dir}/bin/{file}")
                    } else {
                        format!("{run_dir}/bin/{file}")
                    };
                    let sent = h.upload_if_changed(path, &dest).await?;
                    if !sent {
                        eprintln!(
                            "splitbrain: {}: {dest} is up to date (same SHA-256); not uploaded",
                            h.host.label()
                        );
                    }
                    dest
                }
            };
            let made_data_dir = made.trim() == "1";
            let held = leash::start(
                h,
                &LeashSpec {
                    run_dir: &run_dir,
                    nft: firewalls.get(i).map(|f| f.nft.as_str()),
                    made_data_dir: made_data_dir.then_some(data_dir.as_str()),
                },
            )
            .await;
            let write_offset = faketime.is_some();
            cluster.files.push(HostFiles {
                run_dir: run_dir.clone(),
                binary,
                made_data_dir,
                faketime,
            });
            // Pushed after the files, so a failure here still finds them in teardown.
            cluster.leashes.get_mut().push(held?);
            if write_offset {
                let file = faketime_file(&node_dir(&run_dir, &cluster.node_name(i)));
                h.run(
                    "writing the clock offset file",
                    &write_atomically(&file, &splitbrain_nemesis::faketime::offset_text(0)),
                )
                .await?;
            }
        }
        Ok(cluster)
    }

    /// Replaces node `i`'s arguments (before it first starts: e.g. with the link proxies'
    /// addresses, known only once they run).
    pub fn set_args(&mut self, i: usize, args: Vec<String>) {
        if let Some(n) = self.nodes.get_mut(i) {
            n.get_mut().spec.args = args;
        }
    }

    fn node_name(&self, i: usize) -> String {
        format!("n{}", i + 1)
    }

    /// Starts every node and waits (up to `bound`) until each answers its health check and
    /// the cluster has formed. A node that exits meanwhile is reported with its log's end.
    pub async fn start(&self, bound: Duration) -> Result<(), RemoteError> {
        for i in 0..self.nodes.len() {
            self.spawn(i).await?;
        }
        self.wait_ready(bound).await
    }

    async fn spawn(&self, i: usize) -> Result<(), RemoteError> {
        let mut node = self.nodes[i].lock().await;
        if node.pid.is_some() {
            return Ok(());
        }
        let f = &self.files[i];
        let dir = node_dir(&f.run_dir, &node.spec.name);
        let mut cmd = quote(&f.binary);
        for a in &node.spec.args {
            cmd.push(' ');
            cmd.push_str(&quote(a));
        }
        let d = quote(&dir);
        // Assignments before `nohup` reach the node, which nohup execs.
        let env: String = f
            .faketime
            .iter()
            .flat_map(|lib| splitbrain_nemesis::faketime::preload_env(lib, &faketime_file(&dir)))
            .map(|(k, v)| format!("{k}={} ", quote(&v)))
            .collect();
        let script = format!(
            "{START_TIME_FN}\nmkdir -p {d}/data && cd {d} || exit 1\n{env}nohup {cmd} >> {d}/node.log 2>&1 < /dev/null &\np=$!; echo \"$p $(st $p)\" > {d}/node.pid && echo \"$p $(st $p)\""
        );
        let out = self.hosts[i].run("starting the node", &script).await?;
        let mut words = out.split_whitespace();
        let Some(pid) = words.next().and_then(|p| p.parse::<u32>().ok()) else {
            return Err(RemoteError::Command {
                host: self.hosts[i].host.label(),
                what: "starting the node".into(),
                detail: format!("expected its PID, got {out:?}"),
            });
        };
        // No start time: it has exited already. 0 matches no process, so the readiness
        // wait reports it as exited, with its log.
        let start = words
            .next()
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0);
        node.pid = Some((pid, start));
        Ok(())
    }

    /// Sends `sig` to node `i` if its PID is still the process started as the node (same
    /// start time); with `wait_gone`, waits (bounded) until the process has gone.
    async fn signal(&self, i: usize, sig: &str, wait_gone: bool) -> Result<bool, RemoteError> {
        let Some((pid, start)) = self.nodes[i].lock().await.pid else {
            return Ok(false);
        };
        let wait = if wait_gone {
            // A zombie counts as gone: its parent (init) reaps it in its own time.
            "n=0; while [ $n -lt 250 ] && [ -e /proc/$p ] && [ \"$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)\" != Z ]; do sleep 0.02; n=$((n+1)); done"
        } else {
            ":"
        };
        let script = format!(
            "{START_TIME_FN}\np={pid}; if [ \"$(st $p)\" = {start} ]; then kill -{sig} $p; {wait}; echo alive; else echo gone; fi"
        );
        let out = self.hosts[i].run("signalling the node", &script).await?;
        Ok(out.trim() == "alive")
    }

    async fn alive(&self, i: usize) -> Result<bool, RemoteError> {
        self.signal(i, "0", false).await
    }

    async fn wait_ready(&self, bound: Duration) -> Result<(), RemoteError> {
        let start = Instant::now();
        for i in 0..self.nodes.len() {
            let (addr, name) = {
                let n = self.nodes[i].lock().await;
                (n.spec.client_addr, n.spec.name.clone())
            };
            let mut polls = 0u32;
            loop {
                if self.target.is_ready(&self.http, addr).await {
                    break;
                }
                // Liveness over SSH costs a round trip: every tenth poll is enough.
                if polls.is_multiple_of(10) && !self.alive(i).await? {
                    let tail = self.log_tail(i).await;
                    self.nodes[i].lock().await.pid = None;
                    return Err(RemoteError::Command {
                        host: self.hosts[i].host.label(),
                        what: format!("starting node {name}"),
                        detail: format!("it exited; last log lines:\n{tail}"),
                    });
                }
                polls += 1;
                if start.elapsed() > bound {
                    return Err(RemoteError::Command {
                        host: self.hosts[i].host.label(),
                        what: format!("starting node {name}"),
                        detail: format!(
                            "not ready on {addr} after {:?}; last log lines:\n{}",
                            start.elapsed(),
                            self.log_tail(i).await
                        ),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let remaining = bound.saturating_sub(start.elapsed());
        let addrs = self.client_addrs().await;
        self.target
            .wait_formed(&self.http, &addrs, remaining)
            .await
            .map_err(|_| RemoteError::Command {
                host: "all".into(),
                what: "forming the cluster".into(),
                detail: format!("no leader after {:?}; see the node logs", start.elapsed()),
            })
    }

    async fn log_tail(&self, i: usize) -> String {
        let name = self.node_name(i);
        let log = format!("{}/node.log", node_dir(&self.files[i].run_dir, &name));
        self.hosts[i]
            .run("reading the log", &format!("tail -n 15 {}", quote(&log)))
            .await
            .unwrap_or_else(|e| e.to_string())
    }

    /// Where clients reach each node.
    pub async fn client_addrs(&self) -> Vec<SocketAddr> {
        let mut out = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            out.push(n.lock().await.spec.client_addr);
        }
        out
    }

    /// Kills every node, copies each node's directory (log, pid file, data) into
    /// `local_nodes/<name>/`, and removes every file the run made on the hosts. Runs once;
    /// every step is tried on every host, and the errors are returned together.
    pub async fn teardown(&self, local_nodes: &Path) -> Vec<RemoteError> {
        if self
            .torn_down
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Vec::new();
        }
        let mut errors = Vec::new();
        for i in 0..self.nodes.len() {
            if let Err(e) = self.signal(i, "9", true).await {
                errors.push(e);
            }
            self.nodes[i].lock().await.pid = None;
        }
        for (i, f) in self.files.iter().enumerate() {
            let h = &self.hosts[i];
            let name = self.node_name(i);
            let remote = node_dir(&f.run_dir, &name);
            if let Err(e) = h.fetch_dir(&remote, &local_nodes.join(&name)).await {
                errors.push(e);
            }
            // A kept binary lives outside run_dir, so this leaves it for the next run.
            let mut rm = format!("rm -rf {}", quote(&f.run_dir));
            if f.made_data_dir {
                rm.push_str(&format!(
                    " && rmdir {} 2>/dev/null; true",
                    quote(&h.host.data_dir.display().to_string())
                ));
            }
            if let Err(e) = h.run("removing the run's files", &rm).await {
                errors.push(e);
            }
        }
        // Nothing is left for the leashes to remove: let them end.
        for held in std::mem::take(&mut *self.leashes.lock().await) {
            held.release().await;
        }
        errors
    }
}

impl ClusterControl for RemoteCluster {
    fn node_count(&self) -> usize {
        self.nodes.len()
    }

    async fn kill(&self, i: usize) -> Result<(), NemesisError> {
        self.signal(i, "9", true)
            .await
            .map_err(|e| NemesisError::Fault(e.to_string()))?;
        self.nodes[i].lock().await.pid = None;
        Ok(())
    }

    async fn restart(&self, i: usize) -> Result<(), NemesisError> {
        self.spawn(i)
            .await
            .map_err(|e| NemesisError::Fault(e.to_string()))
    }

    async fn pause(&self, i: usize) -> Result<(), NemesisError> {
        self.signal(i, "STOP", false)
            .await
            .map(|_| ())
            .map_err(|e| NemesisError::Fault(e.to_string()))
    }

    async fn resume(&self, i: usize) -> Result<(), NemesisError> {
        self.signal(i, "CONT", false)
            .await
            .map(|_| ())
            .map_err(|e| NemesisError::Fault(e.to_string()))
    }

    async fn leaders(&self) -> Vec<usize> {
        let addrs = self.client_addrs().await;
        self.target.leaders(&self.http, &addrs).await
    }

    async fn set_clock_offset(&self, i: usize, offset_ms: i64) -> Result<(), NemesisError> {
        match self.target.clock_source() {
            ClockSource::Endpoint => {
                let addr = self.nodes[i].lock().await.spec.client_addr;
                self.target
                    .set_clock_offset(&self.http, addr, offset_ms)
                    .await
                    .map_err(NemesisError::Fault)
            }
            ClockSource::Faketime => {
                let Some(files) = self.files.get(i) else {
                    return Err(NemesisError::Fault(format!("no node n{}", i + 1)));
                };
                let name = self.node_name(i);
                if files.faketime.is_none() {
                    return Err(NemesisError::Unsupported(format!(
                        "the clock of {name} on host {}: libfaketime was not preloaded (the run has no clock nemesis)",
                        self.hosts[i].host.label()
                    )));
                }
                let dir = node_dir(&files.run_dir, &name);
                let text = splitbrain_nemesis::faketime::offset_text(offset_ms);
                self.hosts[i]
                    .run(
                        "moving the node's clock",
                        &write_atomically(&faketime_file(&dir), &text),
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| NemesisError::Fault(e.to_string()))
            }
            ClockSource::Unsupported => Err(NemesisError::Unsupported(format!(
                "the clock of target {} cannot be moved",
                self.target.name()
            ))),
        }
    }
}
