//! The configuration files of a Redis node's place: `redis.conf` for the server and
//! `sentinel.conf` for the Sentinel beside it. Written once before the first start: both
//! programs rewrite their own file (Sentinel its state, the server `CONFIG REWRITE` when
//! Sentinel changes its role), so a restarted node comes back in the role it last had.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// The port every redis-server listens on (inside its own namespace).
pub const SERVER_PORT: u16 = 6379;
/// The port every redis-sentinel listens on.
pub const SENTINEL_PORT: u16 = 26379;
/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "sb";
/// How long a primary may be silent before a sentinel deems it down (subjectively).
pub const DOWN_AFTER_MS: u64 = 1000;
/// Sentinel's failover timeout: also the wait before a failed failover is retried and
/// the bound on reconfiguring replicas, so short enough to recover within a run.
pub const FAILOVER_TIMEOUT_MS: u64 = 3000;

/// Where node `i`'s files go: its node directory (the parent of its data directory).
pub fn node_dir(data_dir: &Path) -> PathBuf {
    data_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| data_dir.to_path_buf())
}

/// `redis.conf` of a server at `ip` keeping its data in `data_dir`; a replica of
/// `primary` unless it is the primary.
///
/// Persistence as commonly deployed: the append-only file, fsynced once a second
/// (`appendfsync everysec`), beside the default RDB snapshots. No `min-replicas-to-write`:
/// a primary cut off from its replicas keeps accepting writes, which is Redis's default
/// and what the failover anomaly needs. `replica-announce-ip`: a replica whose link runs
/// through a proxy reaches the primary from the proxy's address, so it names its own for
/// the primary's replica list, which the sentinels read.
pub fn server_conf(ip: Ipv4Addr, primary: Ipv4Addr, data_dir: &Path) -> String {
    let mut conf = format!(
        "# written by splitbrain; redis-server rewrites it when Sentinel changes its role\n\
         bind {ip}\n\
         port {SERVER_PORT}\n\
         protected-mode no\n\
         daemonize no\n\
         logfile \"\"\n\
         dir \"{dir}\"\n\
         appendonly yes\n\
         appendfsync everysec\n\
         repl-diskless-sync-delay 0\n\
         replica-announce-ip {ip}\n\
         proc-title-template \"{{title}} {{listen-addr}} {{server-mode}} {{config-file}}\"\n",
        dir = data_dir.display(),
    );
    if ip != primary {
        conf.push_str(&format!("replicaof {primary} {SERVER_PORT}\n"));
    }
    conf
}

/// The sentinel id of node `i`: fixed, so every sentinel's file can name the others.
fn sentinel_id(i: usize) -> String {
    format!("{:040x}", i + 1)
}

/// `sentinel.conf` of sentinel `me` of the sentinels at `ips` (one per node), watching
/// the server at `ips[0]`, the first primary: the quorum is a majority, so only a
/// majority side of a partition fails over. The replicas and the other sentinels are
/// named up front, as a sentinel's own rewritten file would name them, so the group can
/// fail over from the start rather than after its discovery rounds (hello messages every
/// 2 s, the primary's replica list every 10 s). It announces its own address in its hello
/// messages whichever address its links run through.
pub fn sentinel_conf(me: usize, ips: &[Ipv4Addr], dir: &Path) -> String {
    let quorum = ips.len() / 2 + 1;
    let ip = ips.get(me).copied().unwrap_or(Ipv4Addr::LOCALHOST);
    let primary = ips.first().copied().unwrap_or(ip);
    let mut known = format!("sentinel myid {}\n", sentinel_id(me));
    for other in ips.iter().skip(1) {
        known.push_str(&format!(
            "sentinel known-replica {MASTER_NAME} {other} {SERVER_PORT}\n"
        ));
    }
    for (j, other) in ips.iter().enumerate() {
        if j != me {
            known.push_str(&format!(
                "sentinel known-sentinel {MASTER_NAME} {other} {SENTINEL_PORT} {}\n",
                sentinel_id(j)
            ));
        }
    }
    let head = format!(
        "# written by splitbrain; redis-sentinel rewrites it with what it learns\n\
         bind {ip}\n\
         port {SENTINEL_PORT}\n\
         protected-mode no\n\
         daemonize no\n\
         logfile \"\"\n\
         dir \"{dir}\"\n\
         proc-title-template \"{{title}} {{listen-addr}} {{server-mode}} {{config-file}}\"\n\
         sentinel resolve-hostnames no\n\
         sentinel announce-ip {ip}\n\
         sentinel monitor {MASTER_NAME} {primary} {SERVER_PORT} {quorum}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        dir = dir.display(),
    );
    head + &known
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_primary_has_no_replicaof_and_replicas_follow_it() {
        let (p, r) = (Ipv4Addr::new(10, 77, 3, 10), Ipv4Addr::new(10, 77, 3, 11));
        let dir = Path::new("/run/x/nodes/n1/data");
        let primary = server_conf(p, p, dir);
        assert!(!primary.contains("replicaof"), "{primary}");
        assert!(primary.contains("appendonly yes\nappendfsync everysec\n"));
        assert!(primary.contains("bind 10.77.3.10\n"));
        let replica = server_conf(r, p, dir);
        assert!(replica.contains("replicaof 10.77.3.10 6379\n"), "{replica}");
    }

    #[test]
    fn the_sentinel_quorum_is_a_majority() {
        for (nodes, quorum) in [(1, 1), (3, 2), (4, 3), (5, 3)] {
            let ips: Vec<Ipv4Addr> = (0..nodes)
                .map(|i| Ipv4Addr::new(10, 77, 3, 10 + i as u8))
                .collect();
            let conf = sentinel_conf(nodes - 1, &ips, Path::new("/tmp"));
            assert!(
                conf.contains(&format!("sentinel monitor sb 10.77.3.10 6379 {quorum}\n")),
                "{nodes}: {conf}"
            );
        }
    }

    #[test]
    fn a_sentinel_knows_the_replicas_and_the_other_sentinels() {
        let ips: Vec<Ipv4Addr> = (0..3).map(|i| Ipv4Addr::new(10, 77, 3, 10 + i)).collect();
        let conf = sentinel_conf(1, &ips, Path::new("/tmp"));
        assert!(
            conf.contains(&format!("sentinel myid {:040x}\n", 2)),
            "{conf}"
        );
        assert!(conf.contains("sentinel known-replica sb 10.77.3.11 6379\n"));
        assert!(conf.contains("sentinel known-replica sb 10.77.3.12 6379\n"));
        assert!(!conf.contains("known-replica sb 10.77.3.10 "), "{conf}");
        assert!(conf.contains(&format!("known-sentinel sb 10.77.3.10 26379 {:040x}\n", 1)));
        assert!(!conf.contains("known-sentinel sb 10.77.3.11 "), "{conf}");
    }

    #[test]
    fn files_go_beside_the_data_directory() {
        assert_eq!(
            node_dir(Path::new("/s/nodes/n2/data")),
            PathBuf::from("/s/nodes/n2")
        );
    }
}
