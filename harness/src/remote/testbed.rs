//! "Hosts" on this one machine for testing remote runs: each is a network namespace with
//! its own address on a bridge and its own `sshd` (Debian's openssh-server), reachable
//! from the caller over the bridge's host link. Host keys and a client key are generated
//! with `ssh-keygen`; sshd accepts only that key (no passwords). All hosts share this
//! machine's file system, so each gets a data directory of its own.
//!
//! Everything is removed on drop: the sshd processes (killed by PID), the namespaces and
//! the temporary directory with keys, configs and data directories.

use splitbrain_nemesis::netns::NetnsCluster;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The sshd binary the testbed runs.
pub const SSHD: &str = "/usr/sbin/sshd";

/// Shell lines (run in sshd's private mount namespace) that put an empty file over each
/// startup file the login user's shell reads for a remote command (bash: ~/.bashrc when
/// started by sshd; zsh: ~/.zshenv).
const QUIET_SHELL_STARTUP: &str = "h=$(getent passwd \"$(id -un)\" | cut -d: -f6); h=${h:-$HOME}\n\
    for f in \"$h/.bashrc\" \"$h/.zshenv\"; do\n\
    if [ -f \"$f\" ]; then mount --bind /dev/null \"$f\" || exit 1; fi\n\
    done\n";

/// Why a testbed cannot be made here, if it cannot (not root, no sshd, no ip/nft).
pub fn unavailable_reason() -> Option<String> {
    if let Some(why) = splitbrain_nemesis::netns::unavailable_reason() {
        return Some(why);
    }
    if !Path::new(SSHD).is_file() {
        return Some(format!("{SSHD} is missing (Debian package openssh-server)"));
    }
    for tool in ["ssh", "ssh-keygen"] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found
            && !matches!(Command::new("which").arg(tool).output(), Ok(o) if o.status.success())
        {
            return Some(format!(
                "`{tool}` is missing (Debian package openssh-client)"
            ));
        }
    }
    None
}

/// Errors from making a testbed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// The namespaces could not be made.
    #[error("namespaces: {0}")]
    Netns(#[from] splitbrain_nemesis::NemesisError),
    /// A program failed.
    #[error("{what}: {detail}")]
    Step {
        /// What was being done.
        what: String,
        /// Why it failed.
        detail: String,
    },
    /// A file could not be written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// N namespace hosts, each with its own sshd.
pub struct SshTestbed {
    ns: NetnsCluster,
    dir: PathBuf,
    sshd: Vec<Child>,
}

fn step(what: &str, cmd: &mut Command) -> Result<(), TestbedError> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestbedError::Step {
            what: what.into(),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(TestbedError::Step {
            what: what.into(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

fn keygen(path: &Path) -> Result<(), TestbedError> {
    step(
        "ssh-keygen",
        Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "splitbrain-testbed",
                "-f",
            ])
            .arg(path),
    )
}

impl SshTestbed {
    /// Makes `n` hosts and waits until every sshd accepts connections.
    pub fn create(n: usize) -> Result<SshTestbed, TestbedError> {
        Self::create_with(n, &[])
    }

    /// [`SshTestbed::create`], where the hosts in `without_nft` look as if nftables were
    /// not installed: their sshd runs in a mount namespace of its own in which `nft` is
    /// covered by `/dev/null`.
    pub fn create_with(n: usize, without_nft: &[usize]) -> Result<SshTestbed, TestbedError> {
        let ns = NetnsCluster::create_reachable(n)?;
        let dir = std::env::temp_dir().join(format!(
            "sb-sshbed-{}-{}",
            std::process::id(),
            ns.namespace(0).rsplit('-').nth(1).unwrap_or("0")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut bed = SshTestbed {
            ns,
            dir,
            sshd: Vec::new(),
        };
        bed.build(n, without_nft)?;
        Ok(bed)
    }

    fn build(&mut self, n: usize, without_nft: &[usize]) -> Result<(), TestbedError> {
        // sshd insists on its privilege-separation directory (systemd makes it at boot).
        std::fs::create_dir_all("/run/sshd")?;
        keygen(&self.client_key())?;
        std::fs::copy(
            self.client_key().with_extension("pub"),
            self.dir.join("authorized_keys"),
        )?;
        let mut known = String::new();
        for i in 0..n {
            let h = self.host_dir(i);
            std::fs::create_dir_all(h.join("data"))?;
            keygen(&h.join("host_key"))?;
            let pubkey = std::fs::read_to_string(h.join("host_key.pub"))?;
            let mut parts = pubkey.split_whitespace();
            let (kind, key) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            known.push_str(&format!("{} {kind} {key}\n", self.ns.addr(i)));
            let config = format!(
                "Port 22\nListenAddress {addr}\nHostKey {h}/host_key\nPidFile {h}/sshd.pid\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nUsePAM no\nStrictModes no\n\
                 MaxSessions 64\nMaxStartups 64\nSubsystem sftp internal-sftp\n",
                addr = self.ns.addr(i),
                h = h.display(),
                d = self.dir.display()
            );
            std::fs::write(h.join("sshd_config"), config)?;
            let log = std::fs::File::create(h.join("sshd.log"))?;
            // Every sshd runs in a mount namespace of its own, where the login user's shell
            // startup files read for remote commands are empty: these hosts share this
            // machine's home directories, and a developer's ~/.bashrc (pyenv's rehash waits
            // up to 60 s on a lock file) would otherwise run before every remote command.
            // unshare and sh exec in turn, so the PID is still sshd's.
            let mut mounts = String::from(QUIET_SHELL_STARTUP);
            if without_nft.contains(&i) {
                mounts.push_str(
                    "mount --bind /dev/null \"$(command -v nft || echo /usr/sbin/nft)\" || exit 1\n",
                );
            }
            let mut cmd = self.ns.command(i, "unshare");
            cmd.args(["-m", "sh", "-c"])
                .arg(format!("{mounts}exec {SSHD} -D -e -f \"$0\""));
            let child = cmd
                .arg(h.join("sshd_config"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| TestbedError::Step {
                    what: format!("starting {SSHD}"),
                    detail: e.to_string(),
                })?;
            self.sshd.push(child);
        }
        std::fs::write(self.known_hosts(), known)?;
        for i in 0..n {
            self.wait_listening(i)?;
        }
        Ok(())
    }

    fn wait_listening(&mut self, i: usize) -> Result<(), TestbedError> {
        let addr = std::net::SocketAddr::from((self.ns.addr(i), 22));
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = self.sshd[i].try_wait() {
                let log =
                    std::fs::read_to_string(self.host_dir(i).join("sshd.log")).unwrap_or_default();
                return Err(TestbedError::Step {
                    what: format!("sshd of host {}", i + 1),
                    detail: format!("exited ({status}): {}", log.trim()),
                });
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(TestbedError::Step {
            what: format!("sshd of host {}", i + 1),
            detail: format!("not listening on {addr} after 10 s"),
        })
    }

    fn host_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("h{}", i + 1))
    }

    /// Number of hosts.
    pub fn len(&self) -> usize {
        self.ns.len()
    }

    /// True when there are no hosts (never, after `create`).
    pub fn is_empty(&self) -> bool {
        self.ns.is_empty()
    }

    /// Host `i`'s address.
    pub fn addr(&self, i: usize) -> std::net::Ipv4Addr {
        self.ns.addr(i)
    }

    /// The namespaces (for inspecting a host: `ip netns pids`, `ip netns exec .. nft`).
    pub fn netns(&self) -> &NetnsCluster {
        &self.ns
    }

    /// The private key sshd accepts.
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client_key")
    }

    /// A known-hosts file with every host's key.
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.join("known_hosts")
    }

    /// Host `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> PathBuf {
        self.host_dir(i).join("data")
    }

    /// PID of host `i`'s sshd.
    pub fn sshd_pid(&self, i: usize) -> u32 {
        self.sshd[i].id()
    }

    /// A hosts file for these hosts, logging in as root with [`SshTestbed::client_key`]
    /// (or `key` instead, to try a wrong one).
    pub fn hosts_toml(&self, key: Option<&Path>) -> String {
        let key = key
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.client_key());
        let mut s = format!(
            "user = \"root\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\n",
            key.display(),
            self.known_hosts().display()
        );
        for i in 0..self.len() {
            s.push_str(&format!(
                "\n[[host]]\naddress = \"{}\"\ndata_dir = \"{}\"\n",
                self.addr(i),
                self.data_dir(i).display()
            ));
        }
        s
    }

    /// Writes [`SshTestbed::hosts_toml`] to `path`.
    pub fn write_hosts_file(&self, path: &Path, key: Option<&Path>) -> std::io::Result<()> {
        std::fs::write(path, self.hosts_toml(key))
    }

    /// What the run may have left on host `i`: processes in its namespace other than its
    /// sshd and sshd's own session processes, its nftables tables, and entries in its data
    /// directory. Empty when the host is clean.
    pub fn leftovers(&self, i: usize) -> Vec<String> {
        let mut out = Vec::new();
        let ns = self.ns.namespace(i);
        let pids = Command::new("ip").args(["netns", "pids", ns]).output();
        if let Ok(o) = pids {
            for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
                if exe != Path::new(SSHD) {
                    let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                        .unwrap_or_default()
                        .replace('\0', " ");
                    if !cmd.is_empty() {
                        out.push(format!("process {pid}: {}", cmd.trim()));
                    }
                }
            }
        }
        let tables = self.ns.command(i, "nft").args(["list", "tables"]).output();
        if let Ok(o) = tables {
            for t in String::from_utf8_lossy(&o.stdout).lines() {
                out.push(format!("nftables: {t}"));
            }
        }
        if let Ok(entries) = std::fs::read_dir(self.data_dir(i)) {
            for e in entries.flatten() {
                out.push(format!("file: {}", e.path().display()));
            }
        }
        out
    }
}

impl Drop for SshTestbed {
    fn drop(&mut self) {
        for c in &mut self.sshd {
            // Its session processes first: one whose client went away after the host's
            // link did never hears the connection close, and outlives the testbed (three
            // did after a CI run on 2026-12-03). The listener is stopped meanwhile, so it
            // forks none the walk could miss.
            let pid = c.id();
            crate::run::cluster::send_signal(pid, libc::SIGSTOP);
            for session in crate::run::cluster::descendants(pid) {
                crate::run::cluster::send_signal(session, libc::SIGKILL);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = self.ns.teardown();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
