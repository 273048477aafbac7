//! Starting PostgreSQL: where its programs are, the OS account it runs as, each node's
//! work directory (data and socket) outside the run store, `initdb` for the primary and
//! `pg_basebackup` for a standby, and removing what a run left (the work directory, the
//! System V shared memory segment of a killed postmaster). The account lookup, the work
//! directory's name and running a setup program into the node's log are the SQL
//! targets' shared code (`systems::sql::server`), as MariaDB uses them.

use super::session::{connect, SUPERUSER};
use crate::run::node_layout::{NodeLayout, RunAs};
use crate::systems::sql::{open_log, run_as_if_root, run_logged, short_work_dir};
use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where Debian's `postgresql-15` package installs the server programs.
pub const DEBIAN_BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
/// The account Debian's package creates; PostgreSQL refuses to run as root.
pub const OS_USER: &str = "postgres";
/// The longest `initdb` or `pg_basebackup` may take.
const PREPARE_BOUND: Duration = Duration::from_secs(120);
/// How long a standby's preparation waits for the primary to accept connections.
const PRIMARY_BOUND: Duration = Duration::from_secs(30);

/// A PostgreSQL program: Debian's directory first, then PATH.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let debian = Path::new(DEBIAN_BIN_DIR).join(name);
    if debian.is_file() {
        return Some(debian);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// What to say when a PostgreSQL program is missing.
pub fn missing_program(name: &str) -> String {
    format!(
        "PostgreSQL's `{name}` is neither in {DEBIAN_BIN_DIR} nor on PATH: install the Debian package postgresql (PostgreSQL 15)"
    )
}

/// The account to run the server as: none unless the harness is root, then `postgres`.
pub fn run_as() -> Result<Option<RunAs>, String> {
    run_as_if_root(OS_USER, "PostgreSQL", "postgresql")
}

/// A node's work directory: the data directory and the Unix socket directory. It lives
/// in the system's temporary directory, not under the run store, because the store may
/// sit below directories closed to the `postgres` account (0700 temporary directories);
/// it is made 0700 and owned by that account, so nothing outside the run is opened up.
/// Its name derives from the node's directory in the run, so it is known before it
/// exists and unique per run.
#[derive(Debug, Clone)]
pub struct WorkDir {
    root: PathBuf,
}

impl WorkDir {
    /// The work directory of the node whose run data directory is `data_dir`.
    pub fn for_node(data_dir: &Path) -> WorkDir {
        WorkDir {
            root: short_work_dir("splitbrain-pg", data_dir),
        }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `-D`: the data directory.
    pub fn pgdata(&self) -> PathBuf {
        self.root.join("data")
    }

    /// `-k`: where the server puts its Unix socket (short, unlike a run store path).
    pub fn socket_dir(&self) -> PathBuf {
        self.root.join("sock")
    }

    /// Makes the directories (failing if the work directory exists: it is never reused)
    /// and hands them to `user`.
    fn create(&self, user: Option<&RunAs>) -> Result<(), String> {
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        for dir in [self.root.clone(), self.socket_dir()] {
            builder
                .create(&dir)
                .map_err(|e| format!("creating {}: {e}", dir.display()))?;
            if let Some(u) = user {
                std::os::unix::fs::chown(&dir, Some(u.uid), Some(u.gid))
                    .map_err(|e| format!("giving {} to {}: {e}", dir.display(), u.name))?;
            }
        }
        Ok(())
    }
}

/// Makes node `layout`'s work directory and runs `initdb` in it as `user`, its output
/// appended to the node's log.
pub async fn prepare(layout: &NodeLayout, user: Option<&RunAs>) -> Result<(), String> {
    let initdb = find_program("initdb").ok_or_else(|| missing_program("initdb"))?;
    let work = begin_work_dir(layout, user)?;
    let mut cmd = tokio::process::Command::new(&initdb);
    cmd.arg("-D").arg(work.pgdata()).args([
        "-U",
        SUPERUSER,
        "--auth=trust",
        "--encoding=UTF8",
        "--no-locale",
    ]);
    // No --no-sync: otherwise the first crash recovery, which fsyncs the whole data
    // directory before redo, writes initdb's files back and takes seconds.
    run_logged(cmd, &initdb, layout, user, PREPARE_BOUND).await
}

/// Makes standby `layout`'s work directory and fills it with `pg_basebackup -R` from
/// the primary at `primary` (running, maybe not yet accepting connections), as `user`:
/// the copy, `standby.signal` and a `primary_conninfo` naming the standby (its
/// `application_name`, which `synchronous_standby_names` lists) and a physical
/// replication slot of its name on the primary, so the primary keeps every WAL segment
/// the standby has not received, however long it was paused or down.
pub async fn prepare_standby(
    layout: &NodeLayout,
    primary: SocketAddr,
    user: Option<&RunAs>,
) -> Result<(), String> {
    let basebackup =
        find_program("pg_basebackup").ok_or_else(|| missing_program("pg_basebackup"))?;
    let work = begin_work_dir(layout, user)?;
    let reachable = crate::systems::poll_until(PRIMARY_BOUND, || async {
        connect(primary, Duration::from_millis(500)).await.is_ok()
    })
    .await;
    if reachable.is_err() {
        return Err(format!(
            "the primary at {primary} accepted no connection within {PRIMARY_BOUND:?}, so standby {} has no base backup",
            layout.name
        ));
    }
    let mut cmd = tokio::process::Command::new(&basebackup);
    cmd.arg("-D")
        .arg(work.pgdata())
        .arg("-d")
        .arg(standby_conninfo(primary, &layout.name))
        .args(["-X", "stream", "-R", "-C", "-S"])
        .arg(&layout.name)
        .arg("--checkpoint=fast");
    // No --no-sync: the copy is fsync'd before the standby starts, as initdb's files are.
    run_logged(cmd, &basebackup, layout, user, PREPARE_BOUND).await
}

/// The connection string a standby named `name` streams from `primary` with.
pub fn standby_conninfo(primary: SocketAddr, name: &str) -> String {
    format!(
        "host={} port={} user={SUPERUSER} application_name={name}",
        primary.ip(),
        primary.port()
    )
}

/// Makes node `layout`'s work directory for `user` and notes it in the node's log.
fn begin_work_dir(layout: &NodeLayout, user: Option<&RunAs>) -> Result<WorkDir, String> {
    let work = WorkDir::for_node(&layout.data_dir);
    work.create(user)?;
    let note = format!(
        "splitbrain: PostgreSQL data directory {} (removed after the run)\n",
        work.pgdata().display()
    );
    std::io::Write::write_all(&mut &open_log(layout)?, note.as_bytes())
        .map_err(|e| format!("writing {}: {e}", layout.log_file.display()))?;
    Ok(work)
}

/// Removes node `layout`'s work directory and, first, the System V shared memory
/// segment its last postmaster left (a killed postmaster never removes it; the next one
/// would, but after the run there is none).
pub fn cleanup(layout: &NodeLayout) {
    let work = WorkDir::for_node(&layout.data_dir);
    if let Ok(pid_file) = std::fs::read_to_string(work.pgdata().join("postmaster.pid")) {
        if let Some((key, id)) = shmem_key_and_id(&pid_file) {
            remove_segment(key, id);
        }
    }
    let _ = std::fs::remove_dir_all(work.root());
}

/// The shared memory key and id from `postmaster.pid` (its seventh line: `KEY ID`).
fn shmem_key_and_id(pid_file: &str) -> Option<(libc::key_t, libc::c_int)> {
    let mut fields = pid_file.lines().nth(6)?.split_whitespace();
    let key = fields.next()?.parse().ok()?;
    let id = fields.next()?.parse().ok()?;
    Some((key, id))
}

/// Removes segment `id` if it is still the one with `key` (an id can be reused once the
/// segment is gone). A killed backend still exiting may be attached yet: the kernel then
/// destroys the segment when it detaches.
fn remove_segment(key: libc::key_t, id: libc::c_int) {
    // SAFETY: shmctl(2) with IPC_STAT writes one shmid_ds into the zeroed value we own;
    // IPC_RMID reads nothing from the pointer.
    unsafe {
        let mut ds: libc::shmid_ds = std::mem::zeroed();
        if libc::shmctl(id, libc::IPC_STAT, &mut ds) == 0 && ds.shm_perm.__key == key {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_directories_are_per_node_and_short() {
        let a = WorkDir::for_node(Path::new("/store/run/nodes/n1/data"));
        let b = WorkDir::for_node(Path::new("/store/run/nodes/n2/data"));
        assert_ne!(a.root(), b.root());
        assert_eq!(
            a.root(),
            WorkDir::for_node(Path::new("/store/run/nodes/n1/data")).root()
        );
        // A Unix socket path must stay under 108 bytes.
        let socket = a.socket_dir().join(".s.PGSQL.65535");
        assert!(socket.as_os_str().len() < 100, "{}", socket.display());
    }

    #[test]
    fn the_shared_memory_segment_is_read_from_the_pid_file() {
        let pid_file = "4242\n/tmp/x/data\n1700000000\n5432\n/tmp/x/sock\n127.0.0.1\n  5432001    32769\nready   \n";
        assert_eq!(shmem_key_and_id(pid_file), Some((5432001, 32769)));
        assert_eq!(shmem_key_and_id("4242\n/tmp\n"), None);
    }
}
