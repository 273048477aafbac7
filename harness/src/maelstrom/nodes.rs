//! The node processes: any program that speaks Maelstrom's protocol on stdin/stdout. Each
//! runs with its stderr appended to `nodes/nX/node.log` in the run directory, is killed
//! with the harness (`PR_SET_PDEATHSIG`), and is fed by one writer thread and read by one
//! reader thread that hands every line to the [`MaelstromNet`]. A killed node restarts
//! with a fresh `init` and no state but what it persisted itself (its working directory is
//! `nodes/nX/data`, kept across restarts).

use super::net::MaelstromNet;
use crate::run::cluster::log_tail;
use serde_json::{json, Map, Value};
use splitbrain_nemesis::{ClusterControl, NemesisError};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// How long a node has to answer `init` (and `topology`): Maelstrom's 10 s.
pub const INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where node `i` lives.
#[derive(Debug, Clone)]
pub struct NodeFiles {
    /// Its working directory (persist state here).
    pub data_dir: PathBuf,
    /// Its stderr.
    pub log_file: PathBuf,
}

/// A harness request on its way to a node.
struct SentRequest {
    kind: String,
    reply: tokio::sync::oneshot::Receiver<Map<String, Value>>,
}

struct NodeProc {
    child: Option<Child>,
    /// Bumped on every start, so a reader thread knows whether its process is current.
    generation: u64,
}

/// The running nodes.
pub struct MaelstromNodes {
    bin: PathBuf,
    args: Vec<String>,
    files: Vec<NodeFiles>,
    net: MaelstromNet,
    procs: Arc<Vec<Mutex<NodeProc>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl MaelstromNodes {
    /// Starts one process per entry of `files` and sends each its `init`; fails with the
    /// node's name (and its stderr's tail) when one exits or does not answer.
    pub async fn start(
        bin: PathBuf,
        args: Vec<String>,
        files: Vec<NodeFiles>,
        net: MaelstromNet,
    ) -> Result<MaelstromNodes, String> {
        let procs = Arc::new(
            (0..files.len())
                .map(|_| {
                    Mutex::new(NodeProc {
                        child: None,
                        generation: 0,
                    })
                })
                .collect(),
        );
        // Nodes run in their own directories: a relative path must not change meaning.
        let bin = std::fs::canonicalize(&bin).unwrap_or(bin);
        let nodes = MaelstromNodes {
            bin,
            args,
            files,
            net,
            procs,
        };
        for i in 0..nodes.files.len() {
            nodes.spawn(i)?;
        }
        // Every node gets its `init` at once, as Maelstrom sets its nodes up in parallel:
        // a node whose `init` handler talks to its peers finds them initialising too.
        let pending: Vec<_> = (0..nodes.files.len())
            .map(|i| nodes.send(i, nodes.init_body(i)))
            .collect();
        for (i, sent) in pending.into_iter().enumerate() {
            nodes.await_reply(i, sent?, "init_ok").await?;
            nodes.net.mark_initialized(i);
        }
        Ok(nodes)
    }

    fn name(&self, i: usize) -> &str {
        &self.net.node_ids()[i]
    }

    fn spawn(&self, i: usize) -> Result<(), String> {
        let name = self.name(i).to_string();
        let files = &self.files[i];
        std::fs::create_dir_all(&files.data_dir)
            .map_err(|e| format!("node {name}: creating {}: {e}", files.data_dir.display()))?;
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(&files.log_file)
            .map_err(|e| format!("node {name}: opening {}: {e}", files.log_file.display()))?;
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args)
            .current_dir(&files.data_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; the kernel SIGKILLs the node when the thread
        // that forked it dies, so nodes never outlive the harness.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("node {name}: cannot start {}: {e}", self.bin.display()))?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let generation = {
            let mut p = lock(&self.procs[i]);
            p.generation += 1;
            p.child = Some(child);
            p.generation
        };
        let (tx, rx) = mpsc::channel::<String>();
        self.net.set_inbox(i, Some(tx));
        if let Some(mut stdin) = stdin {
            std::thread::spawn(move || {
                // Ends when the node dies (broken pipe) or its inbox is replaced.
                for line in rx {
                    if stdin
                        .write_all(line.as_bytes())
                        .and_then(|_| stdin.write_all(b"\n"))
                        .and_then(|_| stdin.flush())
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        if let Some(stdout) = stdout {
            let (net, procs, log) = (self.net.clone(), self.procs.clone(), files.log_file.clone());
            std::thread::spawn(move || read_stdout(i, generation, stdout, net, procs, log));
        }
        Ok(())
    }

    fn init_body(&self, i: usize) -> Value {
        json!({
            "type": "init",
            "node_id": self.name(i),
            "node_ids": self.net.node_ids(),
        })
    }

    /// Sends `init` to node `i` and waits for `init_ok`.
    async fn init(&self, i: usize) -> Result<(), String> {
        self.ask(i, self.init_body(i), "init_ok").await?;
        self.net.mark_initialized(i);
        Ok(())
    }

    /// Sends one harness request to node `i` and waits up to [`INIT_TIMEOUT`] for a reply
    /// of type `want`.
    pub async fn ask(&self, i: usize, body: Value, want: &str) -> Result<(), String> {
        let sent = self.send(i, body)?;
        self.await_reply(i, sent, want).await
    }

    /// Sends one harness request (from a fresh client, `msg_id` 1) to node `i`.
    fn send(&self, i: usize, body: Value) -> Result<SentRequest, String> {
        let Value::Object(mut body) = body else {
            return Err("a request body must be an object".into());
        };
        let kind = body
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        body.insert("msg_id".into(), 1.into());
        let client = self.net.new_client_id();
        let reply = self.net.request(&client, i, body);
        Ok(SentRequest { kind, reply })
    }

    /// Waits up to [`INIT_TIMEOUT`] for the reply to `sent`, which must be of type `want`.
    async fn await_reply(&self, i: usize, sent: SentRequest, want: &str) -> Result<(), String> {
        let name = self.name(i).to_string();
        let SentRequest { kind, reply } = sent;
        let aborted = self.net.aborted();
        let tail = || log_tail(&self.files[i].log_file, 10);
        tokio::select! {
            r = tokio::time::timeout(INIT_TIMEOUT, reply) => match r {
                Ok(Ok(b)) if b.get("type").and_then(Value::as_str) == Some(want) => Ok(()),
                Ok(Ok(b)) => Err(format!("node {name} answered {kind} with {}", Value::Object(b))),
                Ok(Err(_)) => Err(format!("node {name}: {kind} was dropped")),
                Err(_) => Err(format!(
                    "node {name} did not answer {kind} within {} s; its stderr ends:\n{}",
                    INIT_TIMEOUT.as_secs(),
                    tail()
                )),
            },
            _ = aborted.cancelled() => Err(self.net.fatal().unwrap_or_default()),
        }
    }

    /// Sends one message to node `i` without waiting for an answer.
    pub fn tell(&self, i: usize, mut body: Map<String, Value>) {
        body.insert("msg_id".into(), 1.into());
        let client = self.net.new_client_id();
        // Nobody waits: a reply (or none) is fine.
        drop(self.net.request(&client, i, body));
    }

    /// Kills every node (SIGKILL) and reaps it. Idempotent.
    pub fn teardown(&self) {
        for i in 0..self.procs.len() {
            // The child first: closing its stdin makes a node exit, which must not look
            // like an exit of its own to the reader thread.
            let child = lock(&self.procs[i]).child.take();
            self.net.set_inbox(i, None);
            if let Some(mut c) = child {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    fn signal(&self, i: usize, sig: libc::c_int) -> Result<(), NemesisError> {
        let p = lock(&self.procs[i]);
        if let Some(c) = p.child.as_ref() {
            // SAFETY: kill(2) on a PID we spawned and have not reaped.
            if unsafe { libc::kill(c.id() as libc::pid_t, sig) } != 0 {
                return Err(NemesisError::Io(std::io::Error::last_os_error()));
            }
        }
        Ok(())
    }

    /// PIDs of the live node processes.
    pub fn pids(&self) -> Vec<u32> {
        self.procs
            .iter()
            .filter_map(|p| lock(p).child.as_ref().map(Child::id))
            .collect()
    }
}

/// Reads a node's stdout line by line into the network. At EOF, a process the harness did
/// not kill has exited on its own: that ends the run, with its exit status and stderr.
fn read_stdout(
    i: usize,
    generation: u64,
    stdout: std::process::ChildStdout,
    net: MaelstromNet,
    procs: Arc<Vec<Mutex<NodeProc>>>,
    log: PathBuf,
) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        line_no += 1;
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t.trim_end_matches(['\n', '\r']),
            Err(_) => {
                let name = &net.node_ids()[i];
                net.set_fatal(format!("node {name} stdout line {line_no}: not UTF-8 text"));
                break;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        net.on_node_line(i, line_no, text);
    }
    let status = {
        let mut p = lock(&procs[i]);
        if p.generation != generation || p.child.is_none() {
            return; // killed by the harness (or already restarted)
        }
        let status = p.child.as_mut().and_then(|c| {
            // The pipe closed; the process exits right after.
            for _ in 0..50 {
                if let Ok(Some(s)) = c.try_wait() {
                    return Some(s.to_string());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            None
        });
        p.child = None;
        status.unwrap_or_else(|| "closed its stdout".into())
    };
    net.set_inbox(i, None);
    let name = &net.node_ids()[i];
    net.set_fatal(format!(
        "node {name} exited on its own ({status}) after {line_no} lines of output; its stderr ({}) ends:\n{}",
        log.display(),
        log_tail(&log, 10)
    ));
}

impl Drop for MaelstromNodes {
    fn drop(&mut self) {
        self.teardown();
    }
}

impl ClusterControl for MaelstromNodes {
    fn node_count(&self) -> usize {
        self.files.len()
    }

    async fn kill(&self, i: usize) -> Result<(), NemesisError> {
        // As in teardown: the child first, then its stdin.
        let child = lock(&self.procs[i]).child.take();
        self.net.set_inbox(i, None);
        if let Some(mut c) = child {
            c.kill()?;
            let _ = c.wait();
        }
        Ok(())
    }

    async fn restart(&self, i: usize) -> Result<(), NemesisError> {
        if lock(&self.procs[i]).child.is_some() {
            return Ok(());
        }
        self.spawn(i).map_err(NemesisError::Fault)?;
        if let Err(e) = self.init(i).await {
            // A node that cannot come back is as broken as one that cannot start.
            self.net.set_fatal(e.clone());
            return Err(NemesisError::Fault(e));
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
        // A Maelstrom node has no way to say whether it leads.
        Vec::new()
    }

    async fn set_clock_offset(&self, i: usize, offset_ms: i64) -> Result<(), NemesisError> {
        // An optional message: nodes that keep time may honour it; others may ignore it.
        let mut body = Map::new();
        body.insert("type".into(), "clock".into());
        body.insert("offset_ms".into(), offset_ms.into());
        self.tell(i, body);
        Ok(())
    }
}
