//! Test support for the bundled targets' `tests/cluster.rs` (used by tests only): free
//! ports, a minimal blocking HTTP client, and a [`Cluster`] of real server processes on
//! loopback, started with the flags of [`crate::cli::NodeArgs`], killed (SIGKILL, by
//! PID) on drop — also when a test fails. Every wait has a deadline.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a node may take to answer `GET /health` after it is started.
const HEALTHY_WITHIN: Duration = Duration::from_secs(20);

/// A port that is free now and outside the kernel's ephemeral range, so that no
/// connecting socket (this test's clients, another test's) is given it before the node
/// binds it; a port from `bind(0)` is in that range and was seen taken in CI. Each call
/// in this process gets a different port; the PID spreads concurrent test binaries.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (low, span) = (10_000, ephemeral_low.saturating_sub(10_000).max(1_000));
    let base = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (low + base.wrapping_add(n) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {low}..{}", low + span);
}

/// Minimal blocking HTTP/1.1 client: one request per connection to `127.0.0.1:port`, a
/// JSON body; the status and the JSON answer, or `None` if either is missing.
pub fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> Option<(u16, Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(6))).ok()?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status: u16 = response.split_whitespace().nth(1)?.parse().ok()?;
    let (_, payload) = response.split_once("\r\n\r\n")?;
    Some((status, serde_json::from_str(payload).ok()?))
}

/// Running server processes `n1..nN`, one per node, on free loopback ports; each with
/// its data directory `DIR/nI` and its stdout and stderr appended to `DIR/nI.log`.
pub struct Cluster {
    /// The server binary.
    pub bin: PathBuf,
    /// Each node's `--client-listen` port.
    pub client_ports: Vec<u16>,
    /// Each node's `--peer-listen` port.
    pub peer_ports: Vec<u16>,
    /// The directory holding the nodes' data directories and logs.
    pub dir: PathBuf,
    /// Flags given to every node after the common ones.
    pub extra: Vec<String>,
    children: Vec<Option<Child>>,
}

impl Cluster {
    /// Starts `n` nodes of `bin` and waits until each answers `GET /health`.
    pub fn start(bin: &str, n: usize, dir: &Path, extra: &[&str]) -> Cluster {
        let mut cluster = Cluster {
            bin: PathBuf::from(bin),
            client_ports: (0..n).map(|_| free_port()).collect(),
            peer_ports: (0..n).map(|_| free_port()).collect(),
            dir: dir.to_path_buf(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            children: (0..n).map(|_| None).collect(),
        };
        for i in 0..n {
            cluster.spawn(i);
        }
        for i in 0..n {
            cluster.wait_healthy(i);
        }
        cluster
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.client_ports.len()
    }

    /// True if the cluster has no node.
    pub fn is_empty(&self) -> bool {
        self.client_ports.is_empty()
    }

    /// Node `i`'s data directory (`DIR/n{i+1}`).
    pub fn data_dir(dir: &Path, i: usize) -> PathBuf {
        dir.join(format!("n{}", i + 1))
    }

    /// Starts node `i` (id `i + 1`), without waiting for it.
    pub fn spawn(&mut self, i: usize) {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--id")
            .arg((i + 1).to_string())
            .arg("--client-listen")
            .arg(format!("127.0.0.1:{}", self.client_ports[i]))
            .arg("--peer-listen")
            .arg(format!("127.0.0.1:{}", self.peer_ports[i]))
            .arg("--data-dir")
            .arg(Self::data_dir(&self.dir, i));
        for (j, port) in self.peer_ports.iter().enumerate() {
            if j != i {
                cmd.arg("--peer").arg(format!("{}=127.0.0.1:{port}", j + 1));
            }
        }
        cmd.args(&self.extra);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("n{}.log", i + 1)))
            .expect("log file");
        let err = log.try_clone().expect("log file");
        cmd.stdout(Stdio::from(log)).stderr(Stdio::from(err));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));
        self.children[i] = Some(child);
    }

    /// SIGKILL (kill -9) node `i`, by PID, and reaps it.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.children[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGKILL every node.
    pub fn kill_all(&mut self) {
        for i in 0..self.len() {
            self.kill(i);
        }
    }

    /// Kills node `i`, starts it again and waits until it is healthy.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        self.wait_healthy(i);
    }

    /// Kills every node, starts them all again and waits until each is healthy.
    pub fn restart_all(&mut self) {
        self.kill_all();
        for i in 0..self.len() {
            self.spawn(i);
        }
        for i in 0..self.len() {
            self.wait_healthy(i);
        }
    }

    /// Waits until node `i` answers `GET /health` with `{"ok": true}`, and with its own
    /// id where the answer names one.
    pub fn wait_healthy(&self, i: usize) {
        let deadline = Instant::now() + HEALTHY_WITHIN;
        loop {
            if let Some((200, body)) = http(self.client_ports[i], "GET", "/health", None) {
                assert_eq!(body["ok"], true, "node {}: {body}", i + 1);
                if let Some(id) = body.get("id") {
                    assert_eq!(*id, i + 1, "node {} answered as another", i + 1);
                }
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {} never became healthy",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `GET path` on node `i`.
    pub fn get(&self, i: usize, path: &str) -> Option<(u16, Value)> {
        http(self.client_ports[i], "GET", path, None)
    }

    /// `POST path` with `body` on node `i`.
    pub fn post(&self, i: usize, path: &str, body: &Value) -> Option<(u16, Value)> {
        http(self.client_ports[i], "POST", path, Some(body))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_below_the_ephemeral_range_and_bindable() {
        let ports: Vec<u16> = (0..20).map(|_| free_port()).collect();
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        assert!(ports.iter().all(|p| *p >= 10_000));
        assert!(TcpListener::bind(("127.0.0.1", ports[0])).is_ok());
    }

    #[test]
    fn the_client_reads_status_and_json_and_gives_none_without_a_server() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).unwrap();
            let asked = String::from_utf8_lossy(&buf[..n]).to_string();
            s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n{\"x\":[1]}")
                .unwrap();
            asked
        });
        let answer = http(port, "POST", "/kv", Some(&serde_json::json!({"k": 1})));
        assert_eq!(answer, Some((404, serde_json::json!({"x": [1]}))));
        let asked = server.join().unwrap();
        assert!(asked.starts_with("POST /kv HTTP/1.1\r\n"), "{asked}");
        assert!(asked.ends_with("\r\n\r\n{\"k\":1}"), "{asked}");
        assert_eq!(http(free_port(), "GET", "/health", None), None);
    }
}
