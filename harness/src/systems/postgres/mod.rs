//! `--target postgres`: PostgreSQL 15 from Debian's package, servers started as
//! children of the harness (`postgres -D`, no daemonizing wrapper), spoken to with
//! tokio-postgres. The read mode is the isolation level of every transaction. With
//! `--nodes N` (N >= 2) n1 is the primary and n2..nN hot standbys streaming from it.
//!
//! `server.rs` finds the programs, the account and the work directory and runs
//! `initdb` or `pg_basebackup`; `replication.rs` the standbys' settings; `session.rs`
//! the tables, the statements and how PostgreSQL's errors are judged. A process's
//! transactions are the shared SQL client's (`target/sql`), as MariaDB's are.

pub mod evidence;
mod replication;
mod server;
mod session;

use super::sql::{AppendMode, RunStatementLog, SqlClient, Table};
use super::{BoxFuture, Client, ClockSource, Profile, Target, TargetOptions};
use crate::run::node_layout::{NodeLayout, RunAs};
use session::{connect, PgServer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use server::{find_program, missing_program, WorkDir, DEBIAN_BIN_DIR, OS_USER};

/// PostgreSQL: a primary and its hot standbys, at the isolation level of `--read-mode`,
/// with the settings of `--setting`.
#[derive(Default)]
pub struct PostgresTarget {
    settings: Settings,
    /// The run's statement log, opened when the primary's arguments are made.
    log: RunStatementLog,
}

/// What `--setting NAME=VALUE` set: names under `splitbrain.` are the clients' own (a
/// prefix PostgreSQL itself reserves for extensions' settings), every other one is a
/// server setting passed as `-c NAME=VALUE`.
#[derive(Debug, Clone, PartialEq)]
struct Settings {
    /// `splitbrain.append=update-insert|upsert`: how list-append appends.
    append: AppendMode,
    /// `splitbrain.statement_log=on|off` (default on): record every statement in the
    /// run's `statements.jsonl`.
    statement_log: bool,
    /// Server settings, in the order given.
    server: Vec<(String, String)>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            append: AppendMode::default(),
            statement_log: true,
            server: Vec::new(),
        }
    }
}

impl Settings {
    fn parse(given: &[String]) -> Result<Settings, String> {
        let mut s = Settings::default();
        for g in given {
            let Some((name, value)) = g.split_once('=') else {
                return Err(format!("--setting {g}: expected NAME=VALUE"));
            };
            let (name, value) = (name.trim(), value.trim());
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                return Err(format!("--setting {g}: not a PostgreSQL setting name"));
            }
            match name {
                "splitbrain.append" => s.append = AppendMode::parse(value)?,
                "splitbrain.statement_log" => {
                    s.statement_log = match value {
                        "on" => true,
                        "off" => false,
                        other => return Err(format!("splitbrain.statement_log={other}: expected on or off")),
                    }
                }
                n if n.starts_with("splitbrain.") => {
                    return Err(format!("--setting {g}: the client settings are splitbrain.append and splitbrain.statement_log"))
                }
                _ => s.server.push((name.to_string(), value.to_string())),
            }
        }
        Ok(s)
    }
}

/// Read modes: the isolation levels, strongest first (the default).
const ISOLATION_LEVELS: &[(&str, &str)] = &[
    ("serializable", "BEGIN ISOLATION LEVEL SERIALIZABLE"),
    ("repeatable-read", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
    ("read-committed", "BEGIN ISOLATION LEVEL READ COMMITTED"),
];

/// How long one readiness probe may take.
const PROBE_BOUND: Duration = Duration::from_millis(500);

/// The `BEGIN` of read mode `mode` (the default: serializable).
fn begin_statement(mode: Option<&str>) -> &'static str {
    ISOLATION_LEVELS
        .iter()
        .find(|(name, _)| Some(*name) == mode)
        .unwrap_or(&ISOLATION_LEVELS[0])
        .1
}

/// `splitbrain list`'s line for the target.
const DESCRIPTION: &str = "PostgreSQL 15 (Debian package postgresql), servers as child processes: n1 the primary, n2.. hot standbys streaming from it; read modes = isolation levels; --read-from primary|replica (read-only txns to a standby, at REPEATABLE READ READ ONLY); --replication async|sync (sync: remote_apply on every standby); kill -9 and pause reach the postmaster and every backend; no failover; --setting NAME=VALUE: server settings (-c), splitbrain.append=update-insert|upsert, splitbrain.statement_log=on|off (default on: statements.jsonl)";

impl PostgresTarget {
    /// The server program: Debian's directory first (a fresh machine may have only
    /// that), then PATH.
    fn binary() -> &'static str {
        if std::path::Path::new(DEBIAN_BIN_DIR)
            .join("postgres")
            .is_file()
        {
            "/usr/lib/postgresql/15/bin/postgres"
        } else {
            "postgres"
        }
    }
}

impl Target for PostgresTarget {
    fn profile(&self) -> Profile<'_> {
        Profile {
            read_modes: ISOLATION_LEVELS.iter().map(|(name, _)| *name).collect(),
            ..Profile::new("postgres", DESCRIPTION, Self::binary())
        }
        .workloads(&["list-append", "rw-register", "bank", "register", "append"])
        .accepted_flags(&["read-from", "replication"])
    }
    fn install_hint(&self) -> Option<String> {
        Some(missing_program("postgres"))
    }
    fn clock_source(&self) -> ClockSource {
        // libfaketime would need the offset files under the run store, which the
        // `postgres` account may not be able to reach.
        ClockSource::Unsupported
    }
    fn with_settings(&self, settings: &[String]) -> Option<Result<Arc<dyn Target>, String>> {
        Some(Settings::parse(settings).map(|settings| {
            Arc::new(PostgresTarget {
                settings,
                log: RunStatementLog::default(),
            }) as Arc<dyn Target>
        }))
    }

    fn node_args(
        &self,
        i: usize,
        client_addr: SocketAddr,
        _peer_listen: SocketAddr,
        peer_addrs: &[SocketAddr],
        data_dir: &std::path::Path,
        opts: &TargetOptions,
    ) -> Vec<String> {
        let work = WorkDir::for_node(data_dir);
        if i == 0 && self.settings.statement_log {
            self.log.open_above(data_dir);
        }
        let mut args = vec![
            "-D".to_string(),
            work.pgdata().display().to_string(),
            "-p".into(),
            client_addr.port().to_string(),
            "-k".into(),
            work.socket_dir().display().to_string(),
        ];
        let replication = replication::Replication::parse(opts.replication.as_deref());
        // `peer_addrs` has one entry per node: the cluster's size.
        let nodes = peer_addrs.len().max(1);
        for setting in [
            format!("listen_addresses={}", client_addr.ip()),
            // PostgreSQL's defaults, stated: every WAL write is fsync'd.
            "fsync=on".into(),
            "full_page_writes=on".into(),
            // Dynamic shared memory as files in the data directory, which the run
            // removes, rather than in /dev/shm, where a killed server leaves them.
            "dynamic_shared_memory_type=mmap".into(),
            // Deadlocks (40P01, a definite failure) found in 100 ms rather than the
            // default second, which is the clients' whole op timeout.
            "deadlock_timeout=100ms".into(),
        ]
        .into_iter()
        .chain(replication::settings(nodes, replication))
        .chain(self.settings.server.iter().map(|(n, v)| format!("{n}={v}")))
        // A standby streams from where it dials the primary: the mesh's proxy for its
        // link when the run has faults, so partitions and slow links reach replication.
        // (A setting on the command line overrides the one `pg_basebackup -R` wrote.)
        .chain((i > 0).then(|| {
            let primary = peer_addrs.first().copied().unwrap_or(client_addr);
            format!(
                "primary_conninfo={}",
                server::standby_conninfo(primary, &replication::node_name(i))
            )
        })) {
            args.push("-c".into());
            args.push(setting);
        }
        args
    }

    fn is_ready<'a>(&'a self, _http: &'a reqwest::Client, addr: SocketAddr) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match connect(addr, PROBE_BOUND).await {
                Ok(c) => matches!(
                    tokio::time::timeout(PROBE_BOUND, c.simple_query("SELECT 1")).await,
                    Ok(Ok(_))
                ),
                Err(_) => false,
            }
        })
    }

    fn wait_formed<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        bound: Duration,
    ) -> BoxFuture<'a, Result<(), ()>> {
        // Formed once the primary holds the tables (made here, once per cluster; not
        // waiting for the standbys, which in sync mode may not stream yet) and every
        // standby streams and has them.
        Box::pin(super::poll_until(bound, move || async move {
            let Some(primary) = addrs.first() else {
                return false;
            };
            let made = match connect(*primary, PROBE_BOUND).await {
                Ok(c) => {
                    let schema = format!("SET synchronous_commit = local; {}", session::SCHEMA);
                    let made = tokio::time::timeout(PROBE_BOUND, c.batch_execute(&schema));
                    matches!(made.await, Ok(Ok(())))
                }
                Err(_) => false,
            };
            made && replication::every_standby_streams(addrs, PROBE_BOUND).await
        }))
    }

    fn leaders<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        // The primary (node 0) takes every write; there is no failover.
        let n = addrs.len().min(1);
        Box::pin(async move { (0..n).collect() })
    }

    fn run_as(&self) -> Result<Option<RunAs>, String> {
        server::run_as()
    }

    fn prepare_node<'a>(
        &'a self,
        i: usize,
        layouts: &'a [NodeLayout],
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let user = server::run_as()?;
            let (Some(layout), Some(primary)) = (layouts.get(i), layouts.first()) else {
                return Err(format!("no layout for node {}", i + 1));
            };
            // The primary is already spawned when a standby is prepared: its base backup
            // is taken from the running primary (the standard way, and the primary's
            // kills and restarts later need nothing else).
            if i == 0 {
                server::prepare(layout, user.as_ref()).await
            } else {
                server::prepare_standby(layout, primary.client_addr, user.as_ref()).await
            }
        })
    }

    fn peers_dial_the_client_port(&self) -> bool {
        // Replication connections go to the primary's client port.
        true
    }

    fn peer_streams_are_binary(&self) -> bool {
        // WAL streams in CopyData messages of the binary replication protocol.
        true
    }

    fn signal_process_tree(&self) -> bool {
        // A postmaster's backends serve the open connections: a pause must stop them
        // too, and a kill must not leave them holding the shared memory the restarted
        // postmaster refuses to share.
        true
    }

    fn cleanup_node(&self, _i: usize, layout: &NodeLayout) {
        server::cleanup(layout);
    }

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        let mode = opts.read_mode.as_deref();
        let log = self.log.get();
        let server = |i: usize, begin| PgServer {
            addr: addrs
                .get(i)
                .copied()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 5432))),
            node: replication::node_name(i),
            begin,
            table: Table::for_workload(&opts.workload),
            logged: log.is_some(),
        };
        let reader =
            reader_of(home, addrs.len(), opts).map(|i| server(i, replication::standby_begin(mode)));
        Box::new(
            SqlClient::new(
                server(0, begin_statement(mode)),
                Table::for_workload(&opts.workload),
                opts.op_timeout,
            )
            .with_reader(reader)
            .with_append(self.settings.append)
            .with_log(log, home),
        )
    }
}

/// The standby (index into the nodes) the read-only transactions of the process in
/// worker slot `home` go to, with `--read-from replica` and standbys present: fixed by
/// the slot, so one process's reads all see one standby's (monotonic) replay.
fn reader_of(home: usize, nodes: usize, opts: &TargetOptions) -> Option<usize> {
    (opts.read_from.as_deref() == Some("replica") && nodes > 1).then(|| 1 + home % (nodes - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_modes_are_isolation_levels_serializable_first() {
        assert_eq!(
            PostgresTarget::default().read_modes(),
            vec!["serializable", "repeatable-read", "read-committed"]
        );
        assert_eq!(begin_statement(None), "BEGIN ISOLATION LEVEL SERIALIZABLE");
        assert_eq!(
            begin_statement(Some("read-committed")),
            "BEGIN ISOLATION LEVEL READ COMMITTED"
        );
    }

    #[test]
    fn the_server_listens_on_loopback_with_fsync_and_its_own_socket_dir() {
        let data = std::path::Path::new("/store/run/nodes/n1/data");
        let args = PostgresTarget::default().node_args(
            0,
            "127.0.0.1:15432".parse().unwrap(),
            "127.0.0.1:15433".parse().unwrap(),
            &[],
            data,
            &TargetOptions {
                shards: 1,
                read_mode: None,
                bugs: vec![],
                op_timeout: Duration::from_secs(1),
                hedge_delay: Duration::from_millis(50),
                workload: "list-append".into(),
                wait: None,
                read_from: None,
                replication: None,
                transport: None,
            },
        );
        let work = WorkDir::for_node(data);
        let pos = |a: &str| args.iter().position(|x| x == a).unwrap();
        assert_eq!(args[pos("-D") + 1], work.pgdata().display().to_string());
        assert_eq!(args[pos("-p") + 1], "15432");
        assert_eq!(args[pos("-k") + 1], work.socket_dir().display().to_string());
        assert!(args.contains(&"listen_addresses=127.0.0.1".to_string()));
        assert!(args.contains(&"fsync=on".to_string()));
    }
}
