//! Running a database server nobody here wrote: the OS account it runs as when the
//! harness is root, a work directory outside the run store (which may sit below
//! directories closed to that account), and its setup programs (initdb,
//! mariadb-install-db) run with their output in the node's log.

use crate::run::node_layout::{NodeLayout, RunAs};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The account `name` from the system's user database.
pub fn lookup_user(name: &str) -> Option<RunAs> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: an all-zero passwd is a valid value of a plain C struct; getpwnam_r fills it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to live memory of the given size; the strings getpwnam_r
    // writes into `buf` are not read after it.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (rc == 0 && !result.is_null()).then(|| RunAs {
        name: name.to_string(),
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    })
}

/// The account a root harness runs `system`'s server as (`user`, which Debian's package
/// `package` creates); none when the harness is not root, and an error naming the
/// package when the account is missing.
pub fn run_as_if_root(user: &str, system: &str, package: &str) -> Result<Option<RunAs>, String> {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    lookup_user(user).map(Some).ok_or_else(|| {
        format!(
            "the harness runs as root, which {system} refuses, and there is no OS user `{user}` to run it as (the Debian package {package} creates it)"
        )
    })
}

/// A short directory in the system's temporary directory, named `PREFIX-<hash of
/// data_dir>`: known before it exists, unique per node of a run, and short enough for a
/// Unix socket path inside it.
pub fn short_work_dir(prefix: &str, data_dir: &Path) -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data_dir.hash(&mut h);
    std::env::temp_dir().join(format!("{prefix}-{:016x}", h.finish()))
}

/// Gives `path` and everything below it to `user`.
pub fn chown_tree(path: &Path, user: &RunAs) -> Result<(), String> {
    std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))
        .map_err(|e| format!("giving {} to {}: {e}", path.display(), user.name))?;
    if path.is_dir() && !path.is_symlink() {
        let entries =
            std::fs::read_dir(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        for entry in entries.flatten() {
            chown_tree(&entry.path(), user)?;
        }
    }
    Ok(())
}

/// Node `layout`'s log, opened for appending (its directory made if need be).
pub fn open_log(layout: &NodeLayout) -> Result<std::fs::File, String> {
    if let Some(dir) = layout.log_file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&layout.log_file)
        .map_err(|e| format!("opening {}: {e}", layout.log_file.display()))
}

/// Runs `cmd` (the program at `program`) as `user`, its output appended to node
/// `layout`'s log, bounded by `bound`.
pub async fn run_logged(
    mut cmd: tokio::process::Command,
    program: &Path,
    layout: &NodeLayout,
    user: Option<&RunAs>,
    bound: Duration,
) -> Result<(), String> {
    let log = open_log(layout)?;
    cmd.current_dir("/")
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .kill_on_drop(true);
    if let Some(u) = user {
        cmd.uid(u.uid).gid(u.gid);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("starting {}: {e}", program.display()))?;
    match tokio::time::timeout(bound, child.wait()).await {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!(
            "{} exited with {status}; see {}",
            program.display(),
            layout.log_file.display()
        )),
        Ok(Err(e)) => Err(format!("waiting for {}: {e}", program.display())),
        Err(_) => Err(format!(
            "{} did not finish within {bound:?}",
            program.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_directories_are_per_node_and_short() {
        let a = short_work_dir("sb-x", Path::new("/store/run/nodes/n1/data"));
        let b = short_work_dir("sb-x", Path::new("/store/run/nodes/n2/data"));
        assert_ne!(a, b);
        assert_eq!(
            a,
            short_work_dir("sb-x", Path::new("/store/run/nodes/n1/data"))
        );
        assert!(a.join("mariadbd.sock").as_os_str().len() < 100);
    }

    #[test]
    fn root_is_in_the_user_database() {
        assert_eq!(lookup_user("root").map(|u| u.uid), Some(0));
        assert!(lookup_user("no-such-user-splitbrain").is_none());
    }
}
