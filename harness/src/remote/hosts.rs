//! The hosts a remote run uses: `--hosts FILE.toml` or `--hosts h1,h2,h3` with the
//! `--ssh-*` options. Node `i` of the target runs on host `i`.
//!
//! ```toml
//! # every [[host]] may override any of these
//! user = "splitbrain"
//! identity = "~/.ssh/id_ed25519"
//! port = 22
//! data_dir = "/var/tmp/splitbrain"
//! known_hosts = "~/.ssh/known_hosts"   # checked strictly; omit to use ssh's default
//! client_port = 17001                  # where the node serves clients
//! peer_port = 17002                    # where the node serves its peers
//! keep_binary = false                  # keep the uploaded binary for the next run
//!
//! [[host]]
//! address = "10.0.0.11"
//!
//! [[host]]
//! address = "10.0.0.12"
//! data_dir = "/data/splitbrain"
//! ```

use super::RemoteError;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

/// Default port a remote node serves clients on.
pub const DEFAULT_CLIENT_PORT: u16 = 17001;
/// Default port a remote node serves its peers on.
pub const DEFAULT_PEER_PORT: u16 = 17002;
/// Default directory under which a run keeps its files on a host.
pub const DEFAULT_DATA_DIR: &str = "/var/tmp/splitbrain";

/// One host, fully resolved: how to reach it and where its node lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// The address as given (name or IP), which ssh connects to.
    pub address: String,
    /// The address resolved here: where clients and peers reach the node.
    pub ip: IpAddr,
    /// sshd's port.
    pub port: u16,
    /// Login user (ssh's default when absent).
    pub user: Option<String>,
    /// Private key file (ssh's default keys when absent).
    pub identity: Option<PathBuf>,
    /// Known-hosts file checked strictly (ssh's default files when absent).
    pub known_hosts: Option<PathBuf>,
    /// Directory on the host under which the run keeps its files; it must exist or be
    /// creatable by the user.
    pub data_dir: PathBuf,
    /// Port the node serves clients on.
    pub client_port: u16,
    /// Port the node serves its peers on.
    pub peer_port: u16,
    /// Keep the uploaded binary (`<data_dir>/bin/`) after the run, so the next run finds
    /// it by checksum and skips the upload; otherwise it is removed with the rest.
    pub keep_binary: bool,
}

impl Host {
    /// `user@address:port`, for messages.
    pub fn label(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}:{}", self.address, self.port),
            None => format!("{}:{}", self.address, self.port),
        }
    }
}

/// Settings a `[[host]]` entry or the file's top level may give.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostFields {
    address: Option<String>,
    port: Option<u16>,
    user: Option<String>,
    identity: Option<PathBuf>,
    known_hosts: Option<PathBuf>,
    data_dir: Option<PathBuf>,
    client_port: Option<u16>,
    peer_port: Option<u16>,
    keep_binary: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostsFileText {
    #[serde(flatten)]
    defaults: HostFields,
    #[serde(default)]
    host: Vec<HostFields>,
}

/// What `--ssh-user`, `--ssh-key`, `--ssh-port` say; they fill what a hosts file leaves
/// open and apply to every host of a `--hosts h1,h2` list.
#[derive(Debug, Clone, Default)]
pub struct SshDefaults {
    /// `--ssh-user`.
    pub user: Option<String>,
    /// `--ssh-key`.
    pub identity: Option<PathBuf>,
    /// `--ssh-port`.
    pub port: Option<u16>,
}

/// Reads `--hosts`: a TOML file when `arg` names a file, else a comma-separated list of
/// addresses.
pub fn parse_hosts_arg(arg: &str, ssh: &SshDefaults) -> Result<Vec<Host>, RemoteError> {
    let path = Path::new(arg);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| RemoteError::HostsFile {
            path: path.display().to_string(),
            msg: e.to_string(),
        })?;
        return parse_hosts_file(&text, path, ssh);
    }
    let entries: Vec<HostFields> = arg
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| HostFields {
            address: Some(a.to_string()),
            ..HostFields::default()
        })
        .collect();
    if entries.is_empty() {
        return Err(RemoteError::HostsFile {
            path: arg.to_string(),
            msg: "expected a hosts file or a comma-separated list of addresses".into(),
        });
    }
    resolve_all(entries, &HostFields::default(), ssh, arg)
}

/// Parses the text of a hosts file (`path` names it in errors; relative key and
/// known-hosts paths are taken from the file's directory).
pub fn parse_hosts_file(
    text: &str,
    path: &Path,
    ssh: &SshDefaults,
) -> Result<Vec<Host>, RemoteError> {
    let file: HostsFileText = toml::from_str(text).map_err(|e| RemoteError::HostsFile {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    if file.host.is_empty() {
        return Err(RemoteError::HostsFile {
            path: path.display().to_string(),
            msg: "no [[host]] entries".into(),
        });
    }
    let base = path.parent().unwrap_or(Path::new("."));
    let rebase = |p: Option<PathBuf>| p.map(|p| expand_path(&p, base));
    let mut defaults = file.defaults;
    defaults.identity = rebase(defaults.identity);
    defaults.known_hosts = rebase(defaults.known_hosts);
    let hosts = file
        .host
        .into_iter()
        .map(|mut h| {
            h.identity = rebase(h.identity);
            h.known_hosts = rebase(h.known_hosts);
            h
        })
        .collect();
    resolve_all(hosts, &defaults, ssh, &path.display().to_string())
}

fn resolve_all(
    entries: Vec<HostFields>,
    defaults: &HostFields,
    ssh: &SshDefaults,
    source: &str,
) -> Result<Vec<Host>, RemoteError> {
    entries
        .into_iter()
        .enumerate()
        .map(|(i, h)| resolve(i, h, defaults, ssh, source))
        .collect()
}

fn resolve(
    i: usize,
    h: HostFields,
    d: &HostFields,
    ssh: &SshDefaults,
    source: &str,
) -> Result<Host, RemoteError> {
    let bad = |msg: String| RemoteError::HostsFile {
        path: source.to_string(),
        msg: format!("host {}: {msg}", i + 1),
    };
    let address = h
        .address
        .ok_or_else(|| bad("no address".into()))?
        .trim()
        .to_string();
    let ip = resolve_ip(&address).ok_or_else(|| bad(format!("cannot resolve {address:?}")))?;
    Ok(Host {
        ip,
        port: h.port.or(d.port).or(ssh.port).unwrap_or(22),
        user: h.user.or(d.user.clone()).or(ssh.user.clone()),
        identity: h.identity.or(d.identity.clone()).or(ssh
            .identity
            .clone()
            .map(|p| expand_path(&p, Path::new(".")))),
        known_hosts: h.known_hosts.or(d.known_hosts.clone()),
        data_dir: h
            .data_dir
            .or(d.data_dir.clone())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
        client_port: h
            .client_port
            .or(d.client_port)
            .unwrap_or(DEFAULT_CLIENT_PORT),
        peer_port: h.peer_port.or(d.peer_port).unwrap_or(DEFAULT_PEER_PORT),
        keep_binary: h.keep_binary.or(d.keep_binary).unwrap_or(false),
        address,
    })
}

/// An IP literal, or the first address a name resolves to here.
fn resolve_ip(address: &str) -> Option<IpAddr> {
    if let Ok(ip) = address.parse() {
        return Some(ip);
    }
    (address, 22).to_socket_addrs().ok()?.next().map(|a| a.ip())
}

/// `~/x` from `$HOME`; a relative path from `base`.
fn expand_path(p: &Path, base: &Path) -> PathBuf {
    if let Ok(rest) = p.strip_prefix("~") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    if p.is_relative() {
        base.join(p)
    } else {
        p.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_fills_each_host_from_its_defaults_and_the_flags() {
        let text = r#"
            user = "sb"
            data_dir = "/srv/sb"
            [[host]]
            address = "10.0.0.1"
            [[host]]
            address = "10.0.0.2"
            port = 2222
            identity = "keys/id"
            client_port = 9000
        "#;
        let ssh = SshDefaults {
            user: Some("other".into()),
            identity: None,
            port: Some(23),
        };
        let hosts = parse_hosts_file(text, Path::new("/etc/sb/hosts.toml"), &ssh).unwrap();
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts[0].user.as_deref(), Some("sb"));
        assert_eq!(hosts[0].port, 23);
        assert_eq!(hosts[0].data_dir, PathBuf::from("/srv/sb"));
        assert_eq!(hosts[0].client_port, DEFAULT_CLIENT_PORT);
        assert_eq!(hosts[1].port, 2222);
        assert_eq!(hosts[1].identity, Some(PathBuf::from("/etc/sb/keys/id")));
        assert_eq!(hosts[1].client_port, 9000);
        assert_eq!(hosts[1].ip, "10.0.0.2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn bad_files_name_the_file_and_the_host() {
        let p = Path::new("h.toml");
        let none = parse_hosts_file("user = \"x\"\n", p, &SshDefaults::default());
        assert!(none.unwrap_err().to_string().contains("no [[host]]"));
        let typo = parse_hosts_file("[[host]]\nadress = \"a\"\n", p, &SshDefaults::default());
        let msg = typo.unwrap_err().to_string();
        assert!(msg.contains("h.toml") && msg.contains("adress"), "{msg}");
        let noaddr = parse_hosts_file("[[host]]\nport = 22\n", p, &SshDefaults::default());
        assert!(noaddr
            .unwrap_err()
            .to_string()
            .contains("host 1: no address"));
    }

    #[test]
    fn a_list_takes_the_ssh_flags() {
        let ssh = SshDefaults {
            user: Some("root".into()),
            identity: Some("/k".into()),
            port: Some(2200),
        };
        let hosts = parse_hosts_arg("127.0.0.1, 127.0.0.2", &ssh).unwrap();
        assert_eq!(hosts.len(), 2);
        assert_eq!(hosts[1].label(), "root@127.0.0.2:2200");
        assert_eq!(hosts[1].identity, Some(PathBuf::from("/k")));
    }
}
