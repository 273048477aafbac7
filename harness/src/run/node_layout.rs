//! Where one node lives: its name, addresses, paths and the account it runs as. A leaf
//! (std and serde only), so the `Target` trait's hooks and `cluster.rs`, which starts a
//! target's nodes, can both name these types without importing each other.

use std::net::SocketAddr;
use std::path::PathBuf;

/// An OS account node processes run as, instead of the harness's own (a server that
/// refuses to run as root, started by a harness that is root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// The account's name.
    pub name: String,
    /// Its user id.
    pub uid: u32,
    /// Its primary group id.
    pub gid: u32,
}

/// The static layout of one node: its name, addresses and paths.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeLayout {
    /// `n1`..`nN`.
    pub name: String,
    /// Where clients reach the node.
    pub client_addr: SocketAddr,
    /// Where peers reach the node (behind the proxy mesh).
    pub peer_addr: SocketAddr,
    /// The node's data directory.
    pub data_dir: PathBuf,
    /// The node's log file (stdout and stderr).
    pub log_file: PathBuf,
    /// The network namespace the node runs in (`ip netns exec`, which execs the binary, so
    /// the PID the harness signals is the node's own), or none for the caller's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
}
