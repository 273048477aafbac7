//! `--target mariadb`: MariaDB 10.11 from Debian's `mariadb-server`, unmodified, servers
//! started as children of the harness (`mariadbd --defaults-file`, no service). One node
//! is a single server; two or more a Galera cluster (`galera-4`), every node taking
//! writes. The read mode is the isolation level of every transaction; `--setting
//! NAME=VALUE` adds server variables (`innodb_flush_log_at_trx_commit`,
//! `innodb_snapshot_isolation`, `wsrep_sync_wait`, ...). Clients speak to it through the
//! shared SQL layer (`target::sql`) over mysql_async.
//!
//! As root each node runs in a network namespace of its own (Galera members dial each
//! other at the addresses they announce, so the proxy mesh cannot sit between them), as
//! the `mysql` account (`setpriv`, which execs, so the PID the harness signals is the
//! server's); otherwise on loopback ports, where no network fault can reach the
//! traffic between members, so those faults are refused.
//!
//! `config.rs` the option file; `server.rs` the account, work directory, install and
//! bootstrap; `recovery.rs` how a killed Galera node comes back (joining, or founding
//! the cluster again from the most advanced node when all were down); `connection.rs`
//! the sessions, SQL and error codes. See
//! `docs/targets/mariadb.md`.

mod config;
mod connection;
mod recovery;
mod server;

pub use server::{WorkDir, OS_USER};

use super::{
    poll_until, BoxFuture, Client, ClockSource, NodeNetwork, Profile, RequiredProgram, Target,
    TargetOptions,
};
use crate::run::node_layout::NodeLayout;
use crate::systems::sql::{RunStatementLog, SqlClient, Table};
use connection::{connect, status, MariaDbServer};
use mysql_async::prelude::Queryable;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The port clients use on every node (inside its own namespace).
pub const CLIENT_PORT: u16 = 3306;
/// Galera's group communication port on every node.
pub const PEER_PORT: u16 = 4567;
/// How long one readiness or status probe may take.
const PROBE: Duration = Duration::from_millis(500);
/// Read modes: the isolation levels, MariaDB's default first.
const READ_MODES: [&str; 3] = ["repeatable-read", "read-committed", "serializable"];

/// MariaDB, one server or a Galera cluster, with the server settings of `--setting`.
#[derive(Debug, Clone)]
pub struct MariaDbTarget {
    settings: Vec<(String, String)>,
    /// `splitbrain.statement_log=on|off` (default on): every statement in the run's
    /// `statements.jsonl`.
    statement_log: bool,
    /// The run's log, opened when n1's arguments are made.
    log: RunStatementLog,
}

impl Default for MariaDbTarget {
    fn default() -> MariaDbTarget {
        MariaDbTarget {
            settings: Vec::new(),
            statement_log: true,
            log: RunStatementLog::default(),
        }
    }
}

/// Splits `--setting`s into the client's own (`splitbrain.statement_log`) and the
/// server's variables.
fn target_of_settings(given: &[String]) -> Result<MariaDbTarget, String> {
    let mut target = MariaDbTarget::default();
    let mut server = Vec::new();
    for g in given {
        match g.split_once('=') {
            Some(("splitbrain.statement_log", "on")) => target.statement_log = true,
            Some(("splitbrain.statement_log", "off")) => target.statement_log = false,
            Some((name, _)) if name.starts_with("splitbrain.") => {
                return Err(format!(
                    "--setting {g}: the client's one setting is splitbrain.statement_log=on|off"
                ))
            }
            _ => server.push(g.clone()),
        }
    }
    target.settings = config::parse_settings(&server)?;
    Ok(target)
}

impl MariaDbTarget {
    /// True when the harness is root: the servers then run as the `mysql` account.
    fn root() -> bool {
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        unsafe { libc::geteuid() == 0 }
    }

    /// True when nodes get network namespaces here (root, `ip` and nftables present);
    /// found out once per process (the probe makes and removes a namespace).
    fn namespaced() -> bool {
        static NAMESPACED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *NAMESPACED.get_or_init(|| {
            Self::root() && splitbrain_nemesis::netns::unavailable_reason().is_none()
        })
    }

    /// The node program: `setpriv` (which starts the server as `mysql`) when root, else
    /// Debian's server, else `mariadbd` on PATH.
    fn binary() -> &'static str {
        if Self::root() {
            "setpriv"
        } else if std::path::Path::new(server::MARIADBD).is_file() {
            server::MARIADBD
        } else {
            "mariadbd"
        }
    }
}

impl Target for MariaDbTarget {
    fn profile(&self) -> Profile<'_> {
        Profile::new(
            "mariadb",
            "MariaDB 10.11 (Debian mariadb-server, unmodified): --nodes 1 one server, more a Galera cluster (galera-4) taking writes at every node; read modes = isolation levels; --setting NAME=VALUE for server variables (innodb_flush_log_at_trx_commit, innodb_snapshot_isolation, wsrep_sync_wait), splitbrain.statement_log=on|off (default on: statements.jsonl); as root one network namespace per node",
            Self::binary(),
        )
        .read_modes(&READ_MODES)
        .workloads(&["list-append", "rw-register", "bank", "register", "append"])
        .accepted_flags(&["setting"])
    }
    fn install_hint(&self) -> Option<String> {
        Some(server::missing("mariadbd", "mariadb-server"))
    }
    fn network(&self) -> NodeNetwork {
        if Self::namespaced() {
            NodeNetwork::Namespaces {
                client_port: CLIENT_PORT,
                peer_port: PEER_PORT,
            }
        } else {
            NodeNetwork::Mesh
        }
    }
    fn clock_source(&self) -> ClockSource {
        // The nodes run as `mysql`, which may not reach libfaketime's offset files
        // under the run store.
        ClockSource::Unsupported
    }
    fn required_programs(&self) -> Vec<RequiredProgram<'_>> {
        let mut programs = vec![
            RequiredProgram {
                program: "mariadb-install-db",
                package: "mariadb-server",
            },
            RequiredProgram {
                program: "rsync",
                package: "rsync",
            },
        ];
        if Self::root() {
            programs.push(RequiredProgram {
                program: "setpriv",
                package: "util-linux",
            });
        }
        programs
    }
    fn with_settings(&self, settings: &[String]) -> Option<Result<Arc<dyn Target>, String>> {
        Some(target_of_settings(settings).map(|t| Arc::new(t) as Arc<dyn Target>))
    }
    fn refuses_fault(&self, fault: &str) -> Option<String> {
        (!Self::namespaced() && splitbrain_nemesis::NETWORK_FAULTS.contains(&fault)).then(|| {
            format!(
                "--nemesis {fault}: MariaDB's nodes run on loopback here (network namespaces need root), and Galera members dial each other at the addresses they announce, so no network fault could reach them; run as root, or use kill and pause"
            )
        })
    }

    fn node_args(
        &self,
        i: usize,
        _client_addr: SocketAddr,
        _peer_listen: SocketAddr,
        _peer_addrs: &[SocketAddr],
        data_dir: &std::path::Path,
        _opts: &TargetOptions,
    ) -> Vec<String> {
        if i == 0 && self.statement_log {
            self.log.open_above(data_dir);
        }
        let defaults = format!(
            "--defaults-file={}",
            WorkDir::for_node(data_dir).option_file().display()
        );
        if !Self::root() {
            return vec![defaults];
        }
        // setpriv gives up root before it execs the server, and asks for SIGKILL when
        // the harness goes (a change of user clears what the harness asked for).
        vec![
            format!("--reuid={OS_USER}"),
            format!("--regid={OS_USER}"),
            "--init-groups".into(),
            "--pdeathsig=KILL".into(),
            server::find("mariadbd")
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| server::MARIADBD.into()),
            defaults,
        ]
    }

    fn is_ready<'a>(&'a self, _http: &'a reqwest::Client, addr: SocketAddr) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            match connect(addr, PROBE, Vec::new()).await {
                Ok(mut c) => matches!(
                    tokio::time::timeout(PROBE, c.query_drop("SELECT 1")).await,
                    Ok(Ok(()))
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
        // Formed once n1 holds the tables (made here; Galera replicates the DDL) and,
        // in a cluster, every node is synced, sees all members and has the tables.
        Box::pin(poll_until(bound, move || async move {
            let Some(first) = addrs.first() else {
                return false;
            };
            if !create_tables(*first).await {
                return false;
            }
            if addrs.len() == 1 {
                return true;
            }
            for addr in addrs {
                if !member_formed(*addr, addrs.len()).await {
                    return false;
                }
            }
            true
        }))
    }

    fn leaders<'a>(
        &'a self,
        _http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
    ) -> BoxFuture<'a, Vec<usize>> {
        // Every node of a Galera primary component takes writes; a single server leads.
        Box::pin(async move {
            if addrs.len() == 1 {
                return vec![0];
            }
            let mut out = Vec::new();
            for (i, addr) in addrs.iter().enumerate() {
                if status(*addr, "wsrep_cluster_status", PROBE)
                    .await
                    .as_deref()
                    == Some("Primary")
                {
                    out.push(i);
                }
            }
            out
        })
    }

    fn prepare_node<'a>(
        &'a self,
        i: usize,
        layouts: &'a [NodeLayout],
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let user = server::os_user()?;
            server::prepare(i, layouts, &self.settings, user.as_ref()).await
        })
    }

    fn before_restart<'a>(
        &'a self,
        i: usize,
        layouts: &'a [NodeLayout],
        running: &'a [bool],
    ) -> BoxFuture<'a, Result<Vec<usize>, String>> {
        Box::pin(async move {
            let user = server::os_user()?;
            recovery::before_restart(i, layouts, running, user.as_ref()).await
        })
    }

    fn signal_process_tree(&self) -> bool {
        // A state transfer runs as the server's children (a shell script and an rsync
        // daemon holding its port): a kill must not leave them to block the restart.
        true
    }

    fn cleanup_node(&self, _i: usize, layout: &NodeLayout) {
        server::cleanup(layout);
    }

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        // Processes are spread over the nodes: with Galera every node takes writes.
        let i = home % addrs.len().max(1);
        let mode = opts.read_mode.as_deref().unwrap_or(READ_MODES[0]);
        let server = MariaDbServer {
            addr: addrs
                .get(i)
                .copied()
                .unwrap_or(SocketAddr::from(([127, 0, 0, 1], CLIENT_PORT))),
            node: format!("n{}", i + 1),
            isolation: config::isolation_level(mode).unwrap_or("REPEATABLE READ"),
        };
        Box::new(
            SqlClient::new(server, Table::for_workload(&opts.workload), opts.op_timeout)
                .with_log(self.log.get(), home),
        )
    }
}

/// Creates the tables on the server at `addr`; true once they exist.
async fn create_tables(addr: SocketAddr) -> bool {
    let Ok(mut c) = connect(addr, PROBE, Vec::new()).await else {
        return false;
    };
    for ddl in connection::SCHEMA {
        if !matches!(
            tokio::time::timeout(PROBE * 4, c.query_drop(ddl)).await,
            Ok(Ok(()))
        ) {
            return false;
        }
    }
    true
}

/// True when the Galera node at `addr` is synced in a primary component of `n` members
/// and has the tables.
async fn member_formed(addr: SocketAddr, n: usize) -> bool {
    let Ok(mut c) = connect(addr, PROBE, Vec::new()).await else {
        return false;
    };
    let query = "SELECT
        (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'),
        (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_SIZE'),
        (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'splitbrain')";
    let row: Option<(String, String, i64)> =
        match tokio::time::timeout(PROBE, c.query_first(query)).await {
            Ok(Ok(row)) => row,
            _ => None,
        };
    matches!(row, Some((state, size, tables))
        if state == "Synced" && size == n.to_string() && tables as usize == connection::SCHEMA.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_modes_are_isolation_levels_mariadbs_default_first() {
        let t = MariaDbTarget::default();
        assert_eq!(t.read_modes()[0], "repeatable-read");
        for mode in t.read_modes() {
            assert!(config::isolation_level(mode).is_some(), "{mode}");
        }
        assert!(t.workloads().contains(&"register"));
    }

    #[test]
    fn settings_make_a_target_of_their_own() {
        let t = MariaDbTarget::default();
        let with = t
            .with_settings(&["innodb_snapshot_isolation=ON".into()])
            .unwrap()
            .unwrap();
        assert_eq!(with.name(), "mariadb");
        assert!(t.with_settings(&["bad setting".into()]).unwrap().is_err());
    }

    #[test]
    fn the_statement_log_is_on_unless_turned_off_and_other_client_settings_are_refused() {
        let on = target_of_settings(&["innodb_flush_log_at_trx_commit=0".into()]).unwrap();
        assert!(on.statement_log);
        assert_eq!(on.settings.len(), 1);
        let off = target_of_settings(&["splitbrain.statement_log=off".into()]).unwrap();
        assert!(!off.statement_log);
        assert!(off.settings.is_empty());
        assert!(target_of_settings(&["splitbrain.append=upsert".into()]).is_err());
    }
}
