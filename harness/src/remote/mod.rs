//! Real clusters on several machines, reached over SSH, as Jepsen's control node does.
//!
//! `--hosts FILE.toml` (or `--hosts h1,h2,h3` with `--ssh-user`, `--ssh-key`,
//! `--ssh-port`) puts node `i` of the target on host `i`:
//!
//! - [`hosts`]: the hosts file and its defaults.
//! - [`session`]: one multiplexed OpenSSH session per host (the `openssh` crate drives the
//!   system's `ssh` with a ControlMaster; every command of the run goes over it).
//! - [`cluster::RemoteCluster`]: uploads the node binary (skipped when the host's copy has
//!   the same SHA-256), starts each node detached with a pid file, kills / pauses /
//!   resumes it by that PID, and at the end collects each node's log and data directory
//!   into the local run directory and removes every file it made on the host.
//! - [`leash`]: one command per host, started before any node, that waits for the
//!   harness to go (its stdin, held open by the harness, ends) and then kills the run's
//!   nodes and removes its rules and files: the clean-up of a harness killed with SIGKILL.
//! - [`firewall::RemoteFirewall`]: partitions as nftables rules in a table of the
//!   harness's own on each host (dropping packets from the cut-off peers' addresses);
//!   healing deletes that table, which removes exactly what was added.
//! - [`run::run_remote_test`]: the run itself, on the controller's phases.
//! - [`testbed::SshTestbed`]: network-namespace "hosts" each running its own sshd on this
//!   machine, for tests and for trying the above by hand.
//!
//! Clients go from the harness straight to each host's client port, and the nodes dial
//! each other at the hosts' addresses: nothing else is contacted.

pub mod cluster;
pub mod firewall;
pub mod hosts;
pub mod leash;
pub mod proxies;
pub mod run;
pub mod session;
pub mod testbed;

pub use hosts::{parse_hosts_arg, Host, SshDefaults};
pub(crate) use run::run_remote_test;

/// Errors of remote runs. Each names the host it concerns.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The hosts file or list is malformed.
    #[error("hosts {path}: {msg}")]
    HostsFile {
        /// The file (or the `--hosts` text).
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// The host could not be reached or refused the login.
    #[error("host {host}: {why}")]
    Connect {
        /// `user@address:port`.
        host: String,
        /// What went wrong, in plain words, with ssh's own message.
        why: String,
    },
    /// The host lacks something the run needs.
    #[error("host {host}: {what}")]
    Missing {
        /// `user@address:port`.
        host: String,
        /// What is missing.
        what: String,
    },
    /// A command on the host failed.
    #[error("host {host}: {what} failed: {detail}")]
    Command {
        /// `user@address:port`.
        host: String,
        /// What the command was for.
        what: String,
        /// Exit status and stderr.
        detail: String,
    },
    /// Something on this machine failed.
    #[error("{what}: {source}")]
    Local {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
