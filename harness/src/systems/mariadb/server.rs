//! Starting MariaDB: the programs, the account it runs as (the `mysql` account Debian's
//! package makes, when the harness is root), each node's work directory outside the run
//! store (option file, data directory, socket), `mariadb-install-db` for a server that
//! starts from nothing, the handover from bootstrapping to joining, and removing what a
//! run left.

use super::config::{self, GaleraAddrs, NodeConfig};
use super::connection;
use crate::run::node_layout::{NodeLayout, RunAs};
use crate::systems::sql;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where Debian's `mariadb-server` package installs the server.
pub const MARIADBD: &str = "/usr/sbin/mariadbd";
/// The account Debian's package creates. MariaDB refuses to run as root unless told to,
/// and its rsync state transfer cannot write a root-owned data directory (the rsync
/// daemon it starts as root drops to `nobody`), so a root harness runs it as this.
pub const OS_USER: &str = "mysql";
/// The longest `mariadb-install-db` may take.
const INSTALL_BOUND: Duration = Duration::from_secs(120);
/// How long a joining node's preparation waits for the node before it to be synced.
const SYNCED_BOUND: Duration = Duration::from_secs(120);
/// How long one status probe may take.
const PROBE: Duration = Duration::from_millis(500);

/// The SQL `mariadb-install-db --extra-file` runs: the account clients log in as (no
/// password; the server listens on loopback or inside the run's namespaces only) and
/// its database. The grant tables are written directly: the bootstrap runs without them.
const SETUP_SQL: &str = "INSERT INTO mysql.global_priv (Host, User, Priv) VALUES ('%', 'splitbrain', '{\"access\":18446744073709551615}');
CREATE DATABASE splitbrain;
";

/// What to say when a MariaDB program or file is missing.
pub fn missing(what: &str, package: &str) -> String {
    format!("MariaDB's {what} is missing: install the Debian package {package}")
}

/// The account to run the server as: none unless the harness is root, then `mysql`.
pub fn os_user() -> Result<Option<RunAs>, String> {
    sql::run_as_if_root(OS_USER, "MariaDB", "mariadb-server")
}

/// A node's work directory in the system's temporary directory: the option file, the
/// data directory, the socket and pid file. Outside the run store because the store may
/// sit below directories closed to the `mysql` account; 0700 and owned by it.
#[derive(Debug, Clone)]
pub struct WorkDir {
    root: PathBuf,
}

impl WorkDir {
    /// The work directory of the node whose run data directory is `data_dir`.
    pub fn for_node(data_dir: &Path) -> WorkDir {
        WorkDir {
            root: sql::short_work_dir("splitbrain-mdb", data_dir),
        }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The option file (`--defaults-file`).
    pub fn option_file(&self) -> PathBuf {
        self.root.join("my.cnf")
    }

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.root.join("data")
    }
}

/// A name for the run's cluster, the same for its nodes and no other run's: derived from
/// the run directory their data directories live in (`RUN/nodes/nI/data`).
fn cluster_name(data_dir: &Path) -> String {
    let run_dir = data_dir.ancestors().nth(3).unwrap_or(data_dir);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    run_dir.hash(&mut h);
    format!("splitbrain-{:016x}", h.finish())
}

/// Node `i`'s Galera addresses, in its namespace or on loopback.
fn galera_addrs(layout: &NodeLayout) -> GaleraAddrs {
    match layout.netns {
        Some(_) => GaleraAddrs::in_namespace(layout.peer_addr),
        None => GaleraAddrs::on_loopback(layout.peer_addr),
    }
}

/// Prepares node `i` of `layouts` before its first start: for a joining Galera node,
/// waits until the node before it is synced (one state transfer at a time) and, for n2,
/// turns n1 from founding the cluster to joining it on any later start; then makes the
/// work directory and option file, and (a single server, or Galera's n1) the data
/// directory with `mariadb-install-db`. A joiner's data directory comes by state transfer.
pub async fn prepare(
    i: usize,
    layouts: &[NodeLayout],
    settings: &[(String, String)],
    user: Option<&RunAs>,
) -> Result<(), String> {
    let layout = layouts
        .get(i)
        .ok_or_else(|| format!("no layout for node {}", i + 1))?;
    let galera = layouts.len() > 1;
    if galera && !Path::new(config::GALERA_PROVIDER).is_file() {
        return Err(missing(
            &format!("Galera provider {}", config::GALERA_PROVIDER),
            "galera-4",
        ));
    }
    if galera && i > 0 {
        let before = &layouts[i - 1];
        wait_synced(before.client_addr, &before.name).await?;
        if i == 1 {
            let first = WorkDir::for_node(&layouts[0].data_dir).option_file();
            let text = std::fs::read_to_string(&first)
                .map_err(|e| format!("reading {}: {e}", first.display()))?;
            std::fs::write(&first, config::without_bootstrap(&text))
                .map_err(|e| format!("writing {}: {e}", first.display()))?;
        }
    }
    let work = WorkDir::for_node(&layout.data_dir);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(work.root())
        .map_err(|e| format!("creating {}: {e}", work.root().display()))?;
    let peers: Vec<SocketAddr> = layouts.iter().map(|l| galera_addrs(l).group).collect();
    let text = config::option_file(&NodeConfig {
        name: &layout.name,
        client: layout.client_addr,
        work: work.root(),
        galera: galera.then(|| (galera_addrs(layout), peers)),
        cluster_name: &cluster_name(&layout.data_dir),
        bootstrap: galera && i == 0,
        settings,
    });
    write(&work.option_file(), &text)?;
    let note = format!(
        "splitbrain: MariaDB work directory {} (removed after the run)\n",
        work.root().display()
    );
    std::io::Write::write_all(&mut &sql::open_log(layout)?, note.as_bytes())
        .map_err(|e| format!("writing {}: {e}", layout.log_file.display()))?;
    if galera && i > 0 {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(work.data())
            .map_err(|e| format!("creating {}: {e}", work.data().display()))?;
    }
    // The account needs the directory before install runs the server in it.
    if let Some(u) = user {
        sql::chown_tree(work.root(), u)?;
    }
    if !(galera && i > 0) {
        install_db(layout, &work, user).await?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// `mariadb-install-db` into the work directory, the account and database made.
async fn install_db(
    layout: &NodeLayout,
    work: &WorkDir,
    user: Option<&RunAs>,
) -> Result<(), String> {
    let program = find("mariadb-install-db")
        .ok_or_else(|| missing("mariadb-install-db", "mariadb-server"))?;
    let setup = work.root().join("setup.sql");
    write(&setup, SETUP_SQL)?;
    let mut cmd = tokio::process::Command::new(&program);
    cmd.arg("--no-defaults")
        .arg(format!("--datadir={}", work.data().display()))
        .args([
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
            "--skip-name-resolve",
        ])
        .arg(format!("--extra-file={}", setup.display()));
    if let Some(u) = user {
        cmd.arg(format!("--user={}", u.name));
    }
    // Run as the harness: with --user it hands the files to that account itself.
    sql::run_logged(cmd, &program, layout, None, INSTALL_BOUND).await
}

/// Waits until the node at `addr` says it is synced with its cluster.
async fn wait_synced(addr: SocketAddr, name: &str) -> Result<(), String> {
    let synced = crate::systems::poll_until(SYNCED_BOUND, || async {
        connection::status(addr, "wsrep_local_state_comment", PROBE)
            .await
            .as_deref()
            == Some("Synced")
    })
    .await;
    synced.map_err(|()| {
        format!("node {name} was not synced with its cluster within {SYNCED_BOUND:?}; see its log")
    })
}

/// A MariaDB program: Debian's directories first, then PATH.
pub fn find(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/usr/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
}

/// Removes node `layout`'s work directory.
pub fn cleanup(layout: &NodeLayout) {
    let _ = std::fs::remove_dir_all(WorkDir::for_node(&layout.data_dir).root());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_name_is_the_runs() {
        let a = cluster_name(Path::new("/store/t/run1/nodes/n1/data"));
        assert_eq!(a, cluster_name(Path::new("/store/t/run1/nodes/n2/data")));
        assert_ne!(a, cluster_name(Path::new("/store/t/run2/nodes/n1/data")));
    }
}
