//! One SSH connection per host: an OpenSSH master (ControlMaster) started by the
//! `openssh` crate, over which every command of the run is multiplexed.

use super::hosts::Host;
use super::RemoteError;
use openssh::{ControlPersist, KnownHosts, SessionBuilder, Stdio};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::oneshot;

/// How long a connection attempt may take before the host counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one remote command may take before it is an error (the longest the harness
/// runs, a node's stop with its bounded wait, takes seconds).
const REMOTE_COMMAND_BOUND: Duration = Duration::from_secs(120);
/// A master left by a harness that died exits after this long without sessions.
const MASTER_IDLE_S: usize = 30;

/// A live, multiplexed SSH session to one host.
pub struct HostSession {
    /// The host.
    pub host: Host,
    session: openssh::Session,
}

/// Quotes `s` for a POSIX shell.
pub fn quote(s: &str) -> String {
    shell_escape::unix::escape(s.into()).into_owned()
}

impl HostSession {
    /// Connects (batch mode: keys only, never a password prompt). The control socket
    /// lives in a private temporary directory under `control_dir`.
    pub async fn connect(host: &Host, control_dir: &Path) -> Result<HostSession, RemoteError> {
        if let Some(key) = &host.identity {
            if !key.is_file() {
                return Err(RemoteError::Missing {
                    host: host.label(),
                    what: format!("the identity file {} does not exist here", key.display()),
                });
            }
        }
        let mut b = SessionBuilder::default();
        b.port(host.port)
            .connect_timeout(CONNECT_TIMEOUT)
            .server_alive_interval(Duration::from_secs(5))
            .control_directory(control_dir)
            .control_persist(ControlPersist::IdleFor(
                std::num::NonZeroUsize::new(MASTER_IDLE_S).unwrap_or(std::num::NonZeroUsize::MIN),
            ));
        if let Some(u) = &host.user {
            b.user(u.clone());
        }
        if let Some(k) = &host.identity {
            b.keyfile(k);
        }
        match &host.known_hosts {
            Some(f) => {
                b.user_known_hosts_file(f)
                    .known_hosts_check(KnownHosts::Strict);
            }
            None => {
                b.known_hosts_check(KnownHosts::Strict);
            }
        }
        let session = b
            .connect(&host.address)
            .await
            .map_err(|e| RemoteError::Connect {
                host: host.label(),
                why: explain_connect_error(&error_chain(&e), host),
            })?;
        Ok(HostSession {
            host: host.clone(),
            session,
        })
    }

    /// Runs `script` with `sh -c` on the host; its exit status and output.
    pub async fn run_status(&self, script: &str) -> Result<std::process::Output, RemoteError> {
        // Bounded: a command whose channel never closes must not hang the whole run.
        let mut cmd = self.session.command("sh");
        cmd.arg("-c").arg(script);
        match tokio::time::timeout(REMOTE_COMMAND_BOUND, cmd.output()).await {
            Ok(out) => out.map_err(|e| self.lost(e)),
            Err(_) => Err(RemoteError::Command {
                host: self.host.label(),
                what: "a remote command".into(),
                detail: format!(
                    "no answer within {} s: {}",
                    REMOTE_COMMAND_BOUND.as_secs(),
                    script.lines().last().unwrap_or("").trim()
                ),
            }),
        }
    }

    /// Runs `script` (`what` names it in errors) and returns its stdout; a non-zero exit
    /// is an error carrying stderr.
    pub async fn run(&self, what: &str, script: &str) -> Result<String, RemoteError> {
        let out = self.run_status(script).await?;
        if !out.status.success() {
            return Err(RemoteError::Command {
                host: self.host.label(),
                what: what.to_string(),
                detail: format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Puts the local file `local` at `remote` (mode 0755) unless a file with the same
    /// SHA-256 is there already. Returns whether it was sent.
    pub async fn upload_if_changed(&self, local: &Path, remote: &str) -> Result<bool, RemoteError> {
        let bytes = std::fs::read(local).map_err(|e| RemoteError::Local {
            what: format!("reading {}", local.display()),
            source: e,
        })?;
        let want = format!("{:x}", Sha256::digest(&bytes));
        let q = quote(remote);
        let have = self
            .run_status(&format!("sha256sum {q} 2>/dev/null"))
            .await?;
        let have = String::from_utf8_lossy(&have.stdout);
        if have.split_whitespace().next() == Some(want.as_str()) {
            return Ok(false);
        }
        // Written beside the target and renamed, so a node never runs a half-sent file.
        let script = format!(
            "mkdir -p \"$(dirname {q})\" && cat > {q}.part && chmod 755 {q}.part && mv {q}.part {q}"
        );
        let mut child = self
            .session
            .command("sh")
            .arg("-c")
            .arg(&script)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .await
            .map_err(|e| self.lost(e))?;
        if let Some(mut stdin) = child.stdin().take() {
            let sent = stdin.write_all(&bytes).await;
            let _ = stdin.shutdown().await;
            drop(stdin);
            sent.map_err(|e| RemoteError::Command {
                host: self.host.label(),
                what: format!("uploading {}", local.display()),
                detail: e.to_string(),
            })?;
        }
        let out = child.wait_with_output().await.map_err(|e| self.lost(e))?;
        if !out.status.success() {
            return Err(RemoteError::Command {
                host: self.host.label(),
                what: format!("uploading {} to {remote}", local.display()),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(true)
    }

    /// Copies the host's directory `remote` into the local directory `local` (a tar
    /// stream over the session, unpacked by the local `tar`).
    pub async fn fetch_dir(&self, remote: &str, local: &Path) -> Result<(), RemoteError> {
        let out = self
            .run_status(&format!("tar -C {} -cf - .", quote(remote)))
            .await?;
        if !out.status.success() {
            return Err(RemoteError::Command {
                host: self.host.label(),
                what: format!("archiving {remote}"),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        let local_err = |e: std::io::Error| RemoteError::Local {
            what: format!("unpacking {remote} into {}", local.display()),
            source: e,
        };
        std::fs::create_dir_all(local).map_err(local_err)?;
        let mut tar = tokio::process::Command::new("tar")
            .arg("-C")
            .arg(local)
            .arg("-xf")
            .arg("-")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .map_err(local_err)?;
        if let Some(mut stdin) = tar.stdin.take() {
            stdin.write_all(&out.stdout).await.map_err(local_err)?;
        }
        let status = tar.wait().await.map_err(local_err)?;
        if !status.success() {
            return Err(local_err(std::io::Error::other(format!("tar: {status}"))));
        }
        Ok(())
    }

    /// Starts `script` with its stdin held open by this process, for as long as the
    /// returned [`HeldCommand`] is not released. Its stdin ends when it is released or
    /// when this process dies, however (the pipe's write end closes with the process), so
    /// the script can act on the harness's death.
    pub async fn hold(self: &Arc<Self>, script: String) -> Result<HeldCommand, RemoteError> {
        let (started_tx, started_rx) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let host = self.clone();
        let done = tokio::spawn(async move {
            let spawned = host
                .session
                .command("sh")
                .arg("-c")
                .arg(&script)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .await;
            let mut child = match spawned {
                Ok(c) => c,
                Err(e) => {
                    let _ = started_tx.send(Err(host.lost(e)));
                    return;
                }
            };
            let stdin = child.stdin().take();
            let _ = started_tx.send(Ok(()));
            // Released, or the handle dropped: either way the stdin closes.
            let _ = release_rx.await;
            drop(stdin);
            let _ = tokio::time::timeout(HELD_EXIT_BOUND, child.wait()).await;
        });
        match started_rx.await {
            Ok(Ok(())) => Ok(HeldCommand {
                release: Some(release_tx),
                done,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(RemoteError::Command {
                host: self.host.label(),
                what: "starting a held command".into(),
                detail: "its task ended before it started".into(),
            }),
        }
    }

    /// Starts `script` with its stdin and stdout piped to this process (stderr discarded),
    /// for a long-lived command driven over them; the caller bounds its waits.
    pub async fn spawn_piped(
        &self,
        script: &str,
    ) -> Result<openssh::Child<&openssh::Session>, RemoteError> {
        self.session
            .command("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .await
            .map_err(|e| self.lost(e))
    }

    /// Ends the master connection.
    pub async fn close(self) {
        let _ = self.session.close().await;
    }

    fn lost(&self, e: openssh::Error) -> RemoteError {
        RemoteError::Connect {
            host: self.host.label(),
            why: format!("the SSH session failed: {}", error_chain(&e)),
        }
    }
}

/// How long a released [`HeldCommand`] may take to finish before it is left to the host.
const HELD_EXIT_BOUND: Duration = Duration::from_secs(10);

/// A command on a host whose stdin this process holds open (see [`HostSession::hold`]).
pub struct HeldCommand {
    release: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<()>,
}

impl HeldCommand {
    /// Closes the command's stdin and waits (bounded) for it to exit.
    pub async fn release(mut self) {
        if let Some(r) = self.release.take() {
            let _ = r.send(());
        }
        let _ = (&mut self.done).await;
    }
}

/// An error with its causes (openssh keeps ssh's own message in the source).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Says in plain words what ssh's message means.
fn explain_connect_error(msg: &str, host: &Host) -> String {
    let key = match &host.identity {
        Some(k) => format!("the key {}", k.display()),
        None => "ssh's default keys".to_string(),
    };
    let user = host.user.as_deref().unwrap_or("the default user");
    let hint = if msg.contains("Permission denied") {
        format!("the host refused {key} for {user} (wrong key or user; password logins are never tried)")
    } else if msg.contains("Host key verification failed")
        || msg.contains("REMOTE HOST IDENTIFICATION")
    {
        "its host key is not the one in known_hosts (add it, or set known_hosts in the hosts file)"
            .to_string()
    } else if msg.contains("refused") {
        format!(
            "unreachable: nothing accepts SSH connections on port {}",
            host.port
        )
    } else if msg.contains("timed out") || msg.contains("unreachable") || msg.contains("No route") {
        "unreachable: no answer from the host".to_string()
    } else if msg.contains("resolve") {
        "unreachable: the name does not resolve".to_string()
    } else {
        "could not connect".to_string()
    };
    format!("{hint} (ssh: {})", msg.trim())
}
