//! Streaming replication: n1 is the primary, n2..nN hot standbys streaming its WAL
//! (each made by `pg_basebackup -R` with a replication slot of its name, see
//! `server::prepare_standby`). The settings every server gets, the replication mode
//! (`--replication async|sync`), how a standby's read-only transactions begin, and the
//! check that every standby streams and has the tables.

use super::session::{connect, TABLES};
use std::net::SocketAddr;
use std::time::Duration;

/// How a commit on the primary relates to the standbys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// PostgreSQL's default: a commit is acknowledged once the primary flushed its WAL;
    /// standbys apply it when it reaches them.
    Async,
    /// `synchronous_commit = remote_apply` with every standby in
    /// `synchronous_standby_names`: a commit is acknowledged once every standby applied it.
    Sync,
}

impl Replication {
    /// The mode of `--replication` (asynchronous when absent).
    pub fn parse(mode: Option<&str>) -> Replication {
        match mode {
            Some("sync") => Replication::Sync,
            _ => Replication::Async,
        }
    }
}

/// Node `i`'s name (`n1` is the primary).
pub fn node_name(i: usize) -> String {
    format!("n{}", i + 1)
}

/// The `-c` settings of every server of an `nodes`-server cluster (a standby inherits
/// the primary's configuration files from its base backup, so the same list serves all;
/// settings a role does not use are ignored there).
pub fn settings(nodes: usize, mode: Replication) -> Vec<String> {
    let mut out = vec![
        // PostgreSQL 15's defaults for the first three, stated: WAL a standby can
        // replay, hot standby reads.
        "wal_level=replica".to_string(),
        "hot_standby=on".into(),
        // Two senders per base backup (-X stream) and one per streaming standby.
        format!("max_wal_senders={}", 2 * nodes + 2),
        format!("max_replication_slots={}", nodes + 2),
        // A standby whose primary went away (killed, restarting) asks again every 100
        // ms rather than every 5 s, so it is streaming again soon after the primary is up.
        "wal_retrieve_retry_interval=100ms".into(),
    ];
    let standbys: Vec<String> = (1..nodes).map(node_name).collect();
    match mode {
        Replication::Sync if !standbys.is_empty() => {
            out.push("synchronous_commit=remote_apply".into());
            out.push(format!(
                "synchronous_standby_names=FIRST {} ({})",
                standbys.len(),
                standbys.join(", ")
            ));
        }
        // PostgreSQL's default, stated: every commit waits for its WAL fsync (locally).
        _ => out.push("synchronous_commit=on".into()),
    }
    out
}

/// The `BEGIN` of a read-only transaction on a standby at read mode `mode`: a hot
/// standby refuses SERIALIZABLE, so the serializable and repeatable-read modes both read
/// there at REPEATABLE READ (one snapshot, of what the standby has applied).
pub fn standby_begin(mode: Option<&str>) -> &'static str {
    match mode {
        Some("read-committed") => "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY",
        _ => "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
    }
}

/// True once the primary at `addrs[0]` streams to every standby `addrs[1..]`, each
/// connected under its node name and caught up to the tables.
pub async fn every_standby_streams(addrs: &[SocketAddr], bound: Duration) -> bool {
    let Some((primary, standbys)) = addrs.split_first() else {
        return false;
    };
    if standbys.is_empty() {
        return true;
    }
    let Ok(p) = connect(*primary, bound).await else {
        return false;
    };
    let names: Vec<String> = (1..addrs.len()).map(node_name).collect();
    let streaming = tokio::time::timeout(
        bound,
        p.query_one(
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name = ANY($1)",
            &[&names],
        ),
    )
    .await;
    let streaming: i64 = match streaming {
        Ok(Ok(row)) => row.try_get(0).unwrap_or(0),
        _ => return false,
    };
    if streaming != names.len() as i64 {
        return false;
    }
    for standby in standbys {
        let Ok(s) = connect(*standby, bound).await else {
            return false;
        };
        let tables: Vec<&str> = TABLES.to_vec();
        let seen = tokio::time::timeout(
            bound,
            s.query_one(
                "SELECT pg_is_in_recovery() AND (SELECT count(*) FROM pg_class WHERE relname = ANY($1)) = $2",
                &[&tables, &(TABLES.len() as i64)],
            ),
        )
        .await;
        if !matches!(seen, Ok(Ok(row)) if row.try_get::<_, bool>(0).unwrap_or(false)) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_mode_names_every_standby_and_waits_for_their_apply() {
        let s = settings(3, Replication::Sync);
        assert!(s.contains(&"synchronous_commit=remote_apply".to_string()));
        assert!(s.contains(&"synchronous_standby_names=FIRST 2 (n2, n3)".to_string()));
        let a = settings(3, Replication::Async);
        assert!(a.contains(&"synchronous_commit=on".to_string()));
        assert!(!a.iter().any(|x| x.starts_with("synchronous_standby_names")));
        // One server has no standby to wait for.
        assert!(settings(1, Replication::Sync).contains(&"synchronous_commit=on".to_string()));
        assert_eq!(Replication::parse(Some("sync")), Replication::Sync);
        assert_eq!(Replication::parse(None), Replication::Async);
    }

    #[test]
    fn standby_reads_never_ask_for_serializable() {
        assert_eq!(
            standby_begin(Some("serializable")),
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        );
        assert_eq!(standby_begin(None), standby_begin(Some("repeatable-read")));
        assert_eq!(
            standby_begin(Some("read-committed")),
            "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY"
        );
    }
}
