//! Cluster control: start N node processes of a target, wait for readiness, kill, restart,
//! pause, resume, and always tear down.
//!
//! Every node gets its own ports, data directory and log file under the run directory.
//! Children are started with `PR_SET_PDEATHSIG = SIGKILL`, so even if the harness itself is
//! killed they do not outlive it; [`Cluster::teardown`] and `Drop` kill them explicitly.

use splitbrain_nemesis::{ClusterControl, NemesisError};
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::systems::{ClockSource, Sidecar, Target};
use splitbrain_nemesis::faketime::FaketimeClocks;

/// Errors from starting or controlling the cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The node binary could not be started.
    #[error("could not start node {node} ({binary}): {source}")]
    Spawn {
        /// Node name.
        node: String,
        /// Binary path.
        binary: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A node did not become ready within the bound.
    #[error("node {node} was not ready after {waited:?}; see its log {log}")]
    NotReady {
        /// Node name.
        node: String,
        /// How long we waited.
        waited: Duration,
        /// The node's log file.
        log: String,
    },
    /// A node exited during start-up.
    #[error("node {node} exited during start-up ({status}); last log lines:\n{tail}")]
    Exited {
        /// Node name.
        node: String,
        /// Exit status.
        status: String,
        /// The end of its log.
        tail: String,
    },
    /// The target's one-time preparation of a node (e.g. PostgreSQL's initdb) failed.
    #[error("preparing node {node}: {reason}")]
    Prepare {
        /// Node name.
        node: String,
        /// What went wrong, from the target.
        reason: String,
    },
    /// File system or port allocation failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub use crate::run::node_layout::{NodeLayout, RunAs};

/// Free loopback ports, held open (bound) until [`PortReservation::release`], so nothing
/// else started meanwhile in this process (e.g. the proxy mesh) can be handed the same
/// port by the kernel.
pub struct PortReservation {
    listeners: Vec<TcpListener>,
    ports: Vec<u16>,
}

impl PortReservation {
    /// Reserves `n` distinct free loopback ports, below the kernel's ephemeral range where
    /// there is room: a port from that range, once released for a node to bind, can be
    /// handed by the kernel to any outgoing connection in the meantime (a client's source
    /// port), and the node then fails with "address already in use".
    pub fn new(n: usize) -> std::io::Result<PortReservation> {
        let mut listeners: Vec<TcpListener> = Vec::with_capacity(n);
        if let Some((lo, hi)) = ports_outside_ephemeral_range() {
            let mut attempts = 0;
            while listeners.len() < n && attempts < 64 * n.max(1) {
                attempts += 1;
                let port = rand::Rng::gen_range(&mut rand::thread_rng(), lo..hi);
                if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                    listeners.push(l);
                }
            }
        }
        while listeners.len() < n {
            listeners.push(TcpListener::bind("127.0.0.1:0")?);
        }
        let ports = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<Result<_, _>>()?;
        Ok(PortReservation { listeners, ports })
    }

    /// The reserved ports.
    pub fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// Frees the ports for the node processes to bind.
    pub fn release(self) {
        drop(self.listeners);
    }
}

/// Ports the kernel never assigns by itself: from 10000 up to the start of its ephemeral
/// range (`/proc/sys/net/ipv4/ip_local_port_range`), if that leaves a useful span.
fn ports_outside_ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let low: u16 = text.split_whitespace().next()?.parse().ok()?;
    (low > 11_000).then_some((10_000, low))
}

struct NodeProcess {
    layout: NodeLayout,
    args: Vec<String>,
    child: Option<Child>,
    paused: bool,
    starts: u32,
    sidecar: Option<SidecarProcess>,
}

/// A node's sidecar: started with the node, stopped at teardown, never faulted.
struct SidecarProcess {
    spec: Sidecar,
    child: Option<Child>,
}

/// Starts `program args` (inside network namespace `netns`, through `ip netns exec`,
/// which execs it, so the child's PID is the program's own) with stdout and stderr
/// appended to `log_file`.
fn spawn_process(
    netns: Option<&str>,
    program: &std::ffi::OsStr,
    args: &[String],
    log_file: &Path,
    env: Vec<(String, String)>,
    run_as: Option<&RunAs>,
) -> std::io::Result<Child> {
    let log = File::options().create(true).append(true).open(log_file)?;
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            // found where the namespace backend found it (sbin may not be on PATH)
            c.env("PATH", splitbrain_nemesis::netns::tool_search_path());
            c.args(["netns", "exec", ns]).arg(program);
            c
        }
        None => Command::new(program),
    };
    if let Some(user) = run_as {
        // The harness's working directory may be closed to that account; / is not.
        cmd.uid(user.uid).gid(user.gid).current_dir("/");
    }
    cmd.envs(env)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: prctl is async-signal-safe; it only asks the kernel to SIGKILL the child
    // when the thread that forked it dies, so nodes never outlive the harness.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// A running cluster of node processes.
pub struct Cluster {
    binary: PathBuf,
    nodes: Vec<Mutex<NodeProcess>>,
    target: Arc<dyn Target>,
    http: reqwest::Client,
    /// The nodes' libfaketime offset files, for targets whose clocks move that way.
    clocks: Option<FaketimeClocks>,
    /// The account nodes run as, when not the harness's own.
    run_as: Option<RunAs>,
    /// Kills and pauses reach every process a node forked, not only the one spawned.
    whole_tree: bool,
    /// Held through a restart: the target decides how a node comes back from which
    /// nodes run, which another restart must not change meanwhile.
    restarting: tokio::sync::Mutex<()>,
}

impl Cluster {
    /// Lays out `layouts.len()` nodes and starts them with the argument lists `args`,
    /// then waits (up to `ready_timeout`) until every node reports ready. A target whose
    /// clocks move through libfaketime gets its offset files in `clock_dir`.
    pub async fn start(
        target: Arc<dyn Target>,
        binary: PathBuf,
        layouts: Vec<NodeLayout>,
        args: Vec<Vec<String>>,
        ready_timeout: Duration,
    ) -> Result<Cluster, ClusterError> {
        let none = vec![None; layouts.len()];
        Cluster::start_with_sidecars(target, binary, layouts, args, none, ready_timeout).await
    }

    /// [`Cluster::start`], with a sidecar process beside each node that has one in
    /// `sidecars` (started right after the nodes, before the readiness wait, so a
    /// target's [`Target::wait_formed`] may count on them).
    pub async fn start_with_sidecars(
        target: Arc<dyn Target>,
        binary: PathBuf,
        layouts: Vec<NodeLayout>,
        args: Vec<Vec<String>>,
        sidecars: Vec<Option<Sidecar>>,
        ready_timeout: Duration,
    ) -> Result<Cluster, ClusterError> {
        let clocks = match target.clock_source() {
            ClockSource::Faketime => {
                let dir = layouts
                    .first()
                    .and_then(|l| l.log_file.parent()?.parent().map(|d| d.join("clocks")))
                    .unwrap_or_else(std::env::temp_dir);
                // Without libfaketime the nodes still run; the clock nemesis then says why.
                FaketimeClocks::new(&dir, layouts.len()).ok()
            }
            ClockSource::Endpoint | ClockSource::Unsupported => None,
        };
        let nodes = layouts
            .into_iter()
            .zip(args)
            .zip(sidecars.into_iter().chain(std::iter::repeat(None)))
            .map(|((layout, args), sidecar)| {
                Mutex::new(NodeProcess {
                    layout,
                    args,
                    child: None,
                    paused: false,
                    starts: 0,
                    sidecar: sidecar.map(|spec| SidecarProcess { spec, child: None }),
                })
            })
            .collect();
        let run_as = target.run_as().map_err(|reason| ClusterError::Prepare {
            node: "every node".into(),
            reason,
        })?;
        let whole_tree = target.signal_process_tree();
        let cluster = Cluster {
            binary,
            nodes,
            run_as,
            whole_tree,
            restarting: tokio::sync::Mutex::new(()),
            target,
            http: reqwest::Client::builder()
                .timeout(Duration::from_millis(500))
                .build()
                .map_err(|e| std::io::Error::other(e.to_string()))?,
            clocks,
        };
        let layouts = cluster.layouts();
        for (i, layout) in layouts.iter().enumerate() {
            // Before the first spawn only: a restart after a kill finds the node as it left it.
            cluster
                .target
                .prepare_node(i, &layouts)
                .await
                .map_err(|reason| ClusterError::Prepare {
                    node: layout.name.clone(),
                    reason,
                })?;
            cluster.spawn_node(i)?;
        }
        for i in 0..cluster.nodes.len() {
            cluster.spawn_sidecar(i)?;
        }
        cluster.wait_ready(ready_timeout).await?;
        Ok(cluster)
    }

    /// The layouts of all nodes.
    pub fn layouts(&self) -> Vec<NodeLayout> {
        self.nodes.iter().map(|n| lock(n).layout.clone()).collect()
    }

    /// PIDs of the node processes currently alive (for tests and diagnostics).
    pub fn pids(&self) -> Vec<u32> {
        self.nodes
            .iter()
            .filter_map(|n| lock(n).child.as_ref().map(|c| c.id()))
            .collect()
    }

    fn spawn_node(&self, i: usize) -> Result<(), ClusterError> {
        let mut node = lock(&self.nodes[i]);
        if node.child.is_some() {
            return Ok(());
        }
        std::fs::create_dir_all(&node.layout.data_dir)?;
        let env = self.clocks.as_ref().map(|c| c.env(i)).unwrap_or_default();
        let child = spawn_process(
            node.layout.netns.as_deref(),
            self.binary.as_os_str(),
            &node.args,
            &node.layout.log_file,
            env,
            self.run_as.as_ref(),
        )
        .map_err(|source| ClusterError::Spawn {
            node: node.layout.name.clone(),
            binary: self.binary.display().to_string(),
            source,
        })?;
        node.child = Some(child);
        node.paused = false;
        node.starts += 1;
        Ok(())
    }

    /// Starts node `i`'s sidecar, if it has one and it is not running.
    fn spawn_sidecar(&self, i: usize) -> Result<(), ClusterError> {
        let mut guard = lock(&self.nodes[i]);
        let node = &mut *guard;
        let Some(sidecar) = node.sidecar.as_mut() else {
            return Ok(());
        };
        if sidecar.child.is_some() {
            return Ok(());
        }
        let child = spawn_process(
            node.layout.netns.as_deref(),
            sidecar.spec.program.as_ref(),
            &sidecar.spec.args,
            &sidecar.spec.log_file,
            Vec::new(),
            None,
        )
        .map_err(|source| ClusterError::Spawn {
            node: format!("{} (sidecar)", node.layout.name),
            binary: sidecar.spec.program.clone(),
            source,
        })?;
        sidecar.child = Some(child);
        Ok(())
    }

    async fn wait_ready(&self, bound: Duration) -> Result<(), ClusterError> {
        let start = Instant::now();
        for i in 0..self.nodes.len() {
            loop {
                let (addr, name, log) = {
                    let mut node = lock(&self.nodes[i]);
                    if let Some(child) = node.child.as_mut() {
                        if let Ok(Some(status)) = child.try_wait() {
                            let log = node.layout.log_file.clone();
                            node.child = None;
                            return Err(ClusterError::Exited {
                                node: node.layout.name.clone(),
                                status: status.to_string(),
                                tail: log_tail(&log, 15),
                            });
                        }
                    }
                    (
                        node.layout.client_addr,
                        node.layout.name.clone(),
                        node.layout.log_file.clone(),
                    )
                };
                if self.target.is_ready(&self.http, addr).await {
                    break;
                }
                if start.elapsed() > bound {
                    return Err(ClusterError::NotReady {
                        node: name,
                        waited: start.elapsed(),
                        log: log.display().to_string(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // A target may also need its cluster to be formed (leaders elected) to be useful.
        let remaining = bound.saturating_sub(start.elapsed());
        let addrs: Vec<SocketAddr> = self.layouts().iter().map(|l| l.client_addr).collect();
        self.target
            .wait_formed(&self.http, &addrs, remaining)
            .await
            .map_err(|_| ClusterError::NotReady {
                node: "cluster".into(),
                waited: start.elapsed(),
                log: "the node logs".into(),
            })
    }

    /// Kills every node and sidecar (SIGKILL), reaps them, and lets the target remove
    /// what it prepared outside the run directory. Idempotent; also run by `Drop`.
    pub fn teardown(&self) {
        for (i, n) in self.nodes.iter().enumerate() {
            let mut node = lock(n);
            let sidecar = node.sidecar.as_mut().and_then(|s| s.child.take());
            if let Some(child) = node.child.take() {
                self.kill_child(child);
            }
            if let Some(mut child) = sidecar {
                let _ = child.kill();
                let _ = child.wait();
            }
            node.paused = false;
            self.target.cleanup_node(i, &node.layout);
        }
    }

    /// SIGKILLs a node process and reaps it; with `whole_tree`, every process it forked
    /// too. The root is stopped first, so it forks nothing new and reaps nothing (no PID
    /// of a child can be reused) while its children are found and killed.
    fn kill_child(&self, mut child: Child) {
        let mut tree = Vec::new();
        if self.whole_tree {
            let root = child.id();
            send_signal(root, libc::SIGSTOP);
            tree = descendants(root);
            for &pid in &tree {
                send_signal(pid, libc::SIGKILL);
            }
        }
        let _ = child.kill();
        // wait() on a SIGKILLed child returns at once.
        let _ = child.wait();
        // The descendants are not ours to reap; wait (bounded) until they have exited, so
        // a restart or a cleanup finds nothing of them attached.
        let start = Instant::now();
        while tree.iter().any(|&pid| alive(pid)) && start.elapsed() < TREE_EXIT_BOUND {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// True while node `i`'s process runs. One that exited by itself is reaped and
    /// forgotten, so a restart starts it again.
    fn running(&self, i: usize) -> bool {
        let mut node = lock(&self.nodes[i]);
        let exited = match node.child.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => return false,
        };
        if exited {
            node.child = None;
        }
        !exited
    }

    fn signal(&self, i: usize, sig: libc::c_int) -> Result<(), NemesisError> {
        let mut node = lock(&self.nodes[i]);
        let Some(child) = node.child.as_ref() else {
            return Ok(());
        };
        let root = child.id();
        if !send_signal(root, sig) {
            return Err(NemesisError::Io(std::io::Error::last_os_error()));
        }
        // The root first: once it is stopped it forks no child the walk could miss.
        if self.whole_tree {
            for pid in descendants(root) {
                send_signal(pid, sig);
            }
        }
        node.paused = sig == libc::SIGSTOP;
        Ok(())
    }
}

/// How long a kill waits for a node's descendants to exit.
const TREE_EXIT_BOUND: Duration = Duration::from_secs(2);

/// True while `pid` runs (a zombie has exited: it holds no memory, files or sockets).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat_fields(&stat)?.next().map(|state| state != "Z"))
        .unwrap_or(false)
}

/// kill(2); true if the signal was sent.
pub(crate) fn send_signal(pid: u32, sig: libc::c_int) -> bool {
    // SAFETY: kill(2) on a node process we spawned and have not reaped, or on one of its
    // descendants found while it was stopped, so the PID is one the node started.
    unsafe { libc::kill(pid as libc::pid_t, sig) == 0 }
}

/// Every process descended from `root`, from the parent links in `/proc` (children first
/// found, grandchildren after). Empty where `/proc` cannot be read.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|stat| parent_pid(&stat))
        {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parent_of
                .iter()
                .filter(|&&(_, ppid)| ppid == parent)
                .map(|&(pid, _)| pid),
        );
        next += 1;
    }
    found.remove(0);
    found
}

/// The parent PID in a `/proc/PID/stat` line (its fourth field).
fn parent_pid(stat: &str) -> Option<u32> {
    stat_fields(stat)?.nth(1)?.parse().ok()
}

/// The fields of a `/proc/PID/stat` line from the third (the state) on, counted after
/// the command name's closing parenthesis (a name may hold spaces and parentheses).
fn stat_fields(stat: &str) -> Option<std::str::SplitWhitespace<'_>> {
    Some(stat[stat.rfind(')')? + 1..].split_whitespace())
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.teardown();
    }
}

impl ClusterControl for Cluster {
    fn node_count(&self) -> usize {
        self.nodes.len()
    }

    async fn kill(&self, i: usize) -> Result<(), NemesisError> {
        let child = lock(&self.nodes[i]).child.take();
        if let Some(child) = child {
            self.kill_child(child);
        }
        lock(&self.nodes[i]).paused = false;
        Ok(())
    }

    async fn restart(&self, i: usize) -> Result<(), NemesisError> {
        let _one = self.restarting.lock().await;
        if self.running(i) {
            // brought back already, by the restart of another node
            return Ok(());
        }
        let running: Vec<bool> = (0..self.nodes.len()).map(|j| self.running(j)).collect();
        let order = self
            .target
            .before_restart(i, &self.layouts(), &running)
            .await
            .map_err(NemesisError::Fault)?;
        for j in order {
            self.spawn_node(j)
                .map_err(|e| NemesisError::Fault(e.to_string()))?;
        }
        Ok(())
    }

    async fn pause(&self, i: usize) -> Result<(), NemesisError> {
        self.signal(i, libc::SIGSTOP)
    }

    async fn resume(&self, i: usize) -> Result<(), NemesisError> {
        self.signal(i, libc::SIGCONT)
    }

    async fn leaders(&self) -> Vec<usize> {
        let addrs: Vec<SocketAddr> = self.layouts().iter().map(|l| l.client_addr).collect();
        self.target.leaders(&self.http, &addrs).await
    }

    async fn status(&self) -> Option<Vec<Option<splitbrain_nemesis::NodeStatus>>> {
        let addrs: Vec<SocketAddr> = self.layouts().iter().map(|l| l.client_addr).collect();
        self.target.node_status(&self.http, &addrs).await
    }

    async fn set_clock_offset(&self, i: usize, offset_ms: i64) -> Result<(), NemesisError> {
        match self.target.clock_source() {
            ClockSource::Endpoint => {
                let addr = lock(&self.nodes[i]).layout.client_addr;
                self.target
                    .set_clock_offset(&self.http, addr, offset_ms)
                    .await
                    .map_err(NemesisError::Fault)
            }
            ClockSource::Faketime => match &self.clocks {
                Some(clocks) => clocks.set_offset(i, offset_ms),
                None => Err(NemesisError::Unsupported(
                    "libfaketime is not installed (Debian package faketime)".into(),
                )),
            },
            ClockSource::Unsupported => Err(NemesisError::Unsupported(format!(
                "the clock of target {} cannot be moved",
                self.target.name()
            ))),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding a node lock must not stop teardown.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The last `n` lines of a log file, for error messages.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::{descendants, parent_pid, ports_outside_ephemeral_range, PortReservation};

    #[test]
    fn parent_pids_are_read_past_names_with_spaces_and_parentheses() {
        assert_eq!(parent_pid("42 (postgres) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parent_pid("43 (a (b) c) R 9 1 1"), Some(9));
        assert_eq!(parent_pid("garbage"), None);
    }

    #[test]
    fn a_process_tree_is_found_through_proc() {
        // sh forks a sleep and waits for it: the sleep is sh's descendant, we are not.
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        let mut found = Vec::new();
        while found.is_empty() && start.elapsed() < std::time::Duration::from_secs(5) {
            found = descendants(sh.id());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(!found.contains(&std::process::id()));
        for pid in found {
            super::send_signal(pid, libc::SIGKILL);
        }
        let _ = sh.wait();
    }

    #[test]
    fn reserved_ports_are_distinct_and_outside_the_ephemeral_range() {
        let r = PortReservation::new(16).unwrap();
        let mut ports = r.ports().to_vec();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 16);
        if let Some((lo, hi)) = ports_outside_ephemeral_range() {
            assert!(ports.iter().all(|p| (lo..hi).contains(p)), "{ports:?}");
        }
        r.release();
    }
}
