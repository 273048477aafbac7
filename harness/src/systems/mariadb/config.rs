//! The option file of a MariaDB node (`my.cnf` in its work directory, which the Galera
//! state-transfer scripts read too) and the `--setting NAME=VALUE`s a run adds to it.
//!
//! One node is a plain server. Two or more form a Galera cluster: every node lists every
//! other in `wsrep_cluster_address`, n1 bootstraps it on its first start
//! (`wsrep-new-cluster`, removed from its file once n2 is about to join, so a restarted n1
//! joins the others instead of founding a second cluster), the others join by state
//! transfer (rsync, Debian's default).

use std::net::SocketAddr;
use std::path::Path;

/// Where Debian's `galera-4` package puts the provider.
pub const GALERA_PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";
/// The line that makes a node found a new cluster on its start.
pub const BOOTSTRAP_LINE: &str = "wsrep-new-cluster";

/// Galera's ports for one node: group communication, incremental and full state transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GaleraAddrs {
    /// `gmcast.listen_addr`: the group communication (the layout's peer address).
    pub group: SocketAddr,
    /// `ist.recv_addr`: incremental state transfer, received.
    pub ist: SocketAddr,
    /// `wsrep_sst_receive_address`: a full state transfer (rsync daemon), received.
    pub sst: SocketAddr,
}

impl GaleraAddrs {
    /// Inside a node's own network namespace: Galera's usual ports on its address.
    pub fn in_namespace(peer: SocketAddr) -> GaleraAddrs {
        let at = |port| SocketAddr::new(peer.ip(), port);
        GaleraAddrs {
            group: peer,
            ist: at(4568),
            sst: at(4444),
        }
    }

    /// On the host's loopback (no namespaces): the peer port the harness reserved on
    /// 127.0.0.1 for the group, and the same port number on 127.0.1.1 and 127.0.2.1 for
    /// the state transfers (free there, as nothing else binds those addresses).
    pub fn on_loopback(peer: SocketAddr) -> GaleraAddrs {
        let port = peer.port();
        GaleraAddrs {
            group: peer,
            ist: SocketAddr::from(([127, 0, 1, 1], port)),
            sst: SocketAddr::from(([127, 0, 2, 1], port)),
        }
    }
}

/// What a node's option file is made of.
pub struct NodeConfig<'a> {
    /// The node's name (`n1`).
    pub name: &'a str,
    /// Where clients reach it.
    pub client: SocketAddr,
    /// Its work directory (data, socket, pid file).
    pub work: &'a Path,
    /// Galera: this node's addresses and every node's group address (this one included);
    /// none for a single server.
    pub galera: Option<(GaleraAddrs, Vec<SocketAddr>)>,
    /// A name shared by the run's nodes only.
    pub cluster_name: &'a str,
    /// Whether this node founds the cluster on its next start.
    pub bootstrap: bool,
    /// `--setting NAME=VALUE`s, written last (a later line wins).
    pub settings: &'a [(String, String)],
}

/// The `[mysqld]` option file of one node.
pub fn option_file(c: &NodeConfig<'_>) -> String {
    let work = c.work.display();
    let mut lines = vec![
        "[mysqld]".to_string(),
        format!("datadir={work}/data"),
        format!("socket={work}/mariadbd.sock"),
        format!("pid-file={work}/mariadbd.pid"),
        format!("bind-address={}", c.client.ip()),
        format!("port={}", c.client.port()),
        "skip-name-resolve".into(),
        // Small, so a node starts and copies fast on a shared machine.
        "innodb_buffer_pool_size=64M".into(),
        "innodb_log_file_size=32M".into(),
        // InnoDB's default, stated: every commit's redo is written and fsync'd (Galera's
        // runs set it with --setting to compare).
        "innodb_flush_log_at_trx_commit=1".into(),
        // A blocked statement gives up (1205) within a second instead of 50, so the
        // server answers before the client's op timeout; deadlocks are found at once.
        "innodb_lock_wait_timeout=1".into(),
        "max_connections=500".into(),
    ];
    if let Some((me, group)) = &c.galera {
        let peers: Vec<String> = group.iter().map(|a| a.to_string()).collect();
        lines.extend([
            // The settings Galera requires (MariaDB's "Configuring MariaDB Galera Cluster").
            "binlog_format=ROW".to_string(),
            "default_storage_engine=InnoDB".into(),
            "innodb_autoinc_lock_mode=2".into(),
            "innodb_doublewrite=1".into(),
            "wsrep_on=ON".into(),
            format!("wsrep_provider={GALERA_PROVIDER}"),
            format!("wsrep_cluster_name={}", c.cluster_name),
            format!("wsrep_cluster_address=gcomm://{}", peers.join(",")),
            format!("wsrep_node_name={}", c.name),
            format!("wsrep_node_address={}", me.group),
            format!("wsrep_node_incoming_address={}", c.client),
            "wsrep_sst_method=rsync".into(),
            format!("wsrep_sst_receive_address={}", me.sst),
            format!(
                "wsrep_provider_options=\"gmcast.listen_addr=tcp://{};ist.recv_addr={}\"",
                me.group, me.ist
            ),
        ]);
        if c.bootstrap {
            lines.push(BOOTSTRAP_LINE.into());
        }
    }
    lines.extend(c.settings.iter().map(|(k, v)| format!("{k}={v}")));
    lines.push(String::new());
    lines.join("\n")
}

/// The option file without its bootstrap line: what a founding node starts with after
/// its first start.
pub fn without_bootstrap(text: &str) -> String {
    text.lines()
        .filter(|l| l.trim() != BOOTSTRAP_LINE)
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The option key that tells a node the position its data holds, so it rejoins from
/// there (an incremental transfer, or none) instead of asking for everything.
pub const START_POSITION: &str = "wsrep_start_position";

/// The option file for a start after a kill: with the bootstrap line when `bootstrap`
/// (founding the cluster again), else without it (joining it), and with
/// `wsrep_start_position` when the node's position is known (`UUID:SEQNO`). Debian's
/// service does the same at every start (`galera_recovery` passes the position
/// `mariadbd --wsrep-recover` found).
pub fn restart_options(text: &str, bootstrap: bool, start_position: Option<&str>) -> String {
    let mut out: String = without_bootstrap(text)
        .lines()
        .filter(|l| l.split('=').next().map(str::trim) != Some(START_POSITION))
        .map(|l| format!("{l}\n"))
        .collect();
    if let Some(p) = start_position {
        out.push_str(&format!("{START_POSITION}={p}\n"));
    }
    if bootstrap {
        out.push_str(BOOTSTRAP_LINE);
        out.push('\n');
    }
    out
}

/// Parses `--setting NAME=VALUE`s: a name of letters, digits, `_` and `-`, a value
/// with no whitespace (one option-file line each).
pub fn parse_settings(settings: &[String]) -> Result<Vec<(String, String)>, String> {
    settings
        .iter()
        .map(|s| {
            let (name, value) = s
                .split_once('=')
                .ok_or_else(|| format!("--setting {s:?}: expected NAME=VALUE"))?;
            let name_ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !name_ok || value.is_empty() || value.chars().any(char::is_whitespace) {
                return Err(format!(
                    "--setting {s:?}: expected NAME=VALUE, a server variable and a value without spaces"
                ));
            }
            Ok((name.to_string(), value.to_string()))
        })
        .collect()
}

/// The isolation level of read mode `mode` as MariaDB names it.
pub fn isolation_level(mode: &str) -> Option<&'static str> {
    match mode {
        "serializable" => Some("SERIALIZABLE"),
        "repeatable-read" => Some("REPEATABLE READ"),
        "read-committed" => Some("READ COMMITTED"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_galera_node_lists_every_peer_and_only_n1_bootstraps_once() {
        let group: Vec<SocketAddr> = (0..3)
            .map(|i| SocketAddr::from(([10, 9, 0, 10 + i], 4567)))
            .collect();
        let settings = vec![(
            "innodb_flush_log_at_trx_commit".to_string(),
            "0".to_string(),
        )];
        let config = |i: usize, bootstrap| {
            option_file(&NodeConfig {
                name: &format!("n{}", i + 1),
                client: SocketAddr::new(group[i].ip(), 3306),
                work: Path::new("/tmp/w"),
                galera: Some((GaleraAddrs::in_namespace(group[i]), group.clone())),
                cluster_name: "sb-1",
                bootstrap,
                settings: &settings,
            })
        };
        let n1 = config(0, true);
        assert!(n1.contains(
            "wsrep_cluster_address=gcomm://10.9.0.10:4567,10.9.0.11:4567,10.9.0.12:4567"
        ));
        assert!(n1.contains("wsrep_sst_receive_address=10.9.0.10:4444"));
        assert!(n1.contains("ist.recv_addr=10.9.0.10:4568"));
        assert!(n1.lines().any(|l| l == BOOTSTRAP_LINE));
        assert!(!without_bootstrap(&n1).lines().any(|l| l == BOOTSTRAP_LINE));
        // After a kill: founding again from a known position, or joining; a second
        // restart replaces what the first wrote.
        let n2 = config(1, false);
        let founding = restart_options(&n2, true, Some("u:42"));
        assert_eq!(founding.lines().filter(|l| *l == BOOTSTRAP_LINE).count(), 1);
        assert!(founding.lines().any(|l| l == "wsrep_start_position=u:42"));
        let joining = restart_options(&founding, false, Some("u:43"));
        assert!(!joining.contains(BOOTSTRAP_LINE) && !joining.contains("u:42"));
        assert!(joining.lines().any(|l| l == "wsrep_start_position=u:43"));
        assert_eq!(restart_options(&joining, false, None), n2);
        assert!(!config(1, false).contains(BOOTSTRAP_LINE));
        // The run's setting comes after the stated default, so it wins.
        let pos = |t: &str, l: &str| t.find(l).unwrap();
        assert!(
            pos(&n1, "innodb_flush_log_at_trx_commit=0")
                > pos(&n1, "innodb_flush_log_at_trx_commit=1")
        );
    }

    #[test]
    fn one_node_is_a_plain_server() {
        let text = option_file(&NodeConfig {
            name: "n1",
            client: "127.0.0.1:13306".parse().unwrap(),
            work: Path::new("/tmp/w"),
            galera: None,
            cluster_name: "sb-1",
            bootstrap: true,
            settings: &[],
        });
        assert!(text.contains("port=13306") && text.contains("datadir=/tmp/w/data"));
        assert!(!text.contains("wsrep"));
    }

    #[test]
    fn settings_are_name_value_pairs_without_spaces() {
        let ok = parse_settings(&[
            "innodb_snapshot_isolation=ON".into(),
            "wsrep-sync-wait=1".into(),
        ]);
        assert_eq!(ok.unwrap().len(), 2);
        for bad in ["x", "=1", "a b=1", "a=", "a=1 2", "a=1\nb=2"] {
            assert!(parse_settings(&[bad.to_string()]).is_err(), "{bad}");
        }
        assert_eq!(isolation_level("repeatable-read"), Some("REPEATABLE READ"));
        assert_eq!(isolation_level("snapshot"), None);
    }

    #[test]
    fn loopback_galera_ports_do_not_collide() {
        let a = GaleraAddrs::on_loopback("127.0.0.1:20001".parse().unwrap());
        assert_ne!(a.group.ip(), a.ist.ip());
        assert_ne!(a.ist.ip(), a.sst.ip());
    }
}
