//! The clean-up that outlives the harness on each host.
//!
//! Node `i`'s pid file is `<run_dir>/n<i>/node.pid` (`node_dir` of the remote cluster).
//!
//! Teardown normally kills the nodes, deletes the nftables table and removes the run's
//! files itself. A harness killed with SIGKILL runs no teardown, and a node started with
//! `nohup` has no parent to die with on the host. So before any node starts, each host
//! runs one more command over the run's SSH session: it reads its stdin, which the harness
//! holds open ([`HostSession::hold`]), until it ends, then does the teardown's removals.
//! The stdin ends when teardown has finished (and there is nothing left to remove) or
//! when the harness dies, however it died.

use super::session::{quote, HeldCommand, HostSession};
use super::RemoteError;
use std::sync::Arc;

/// A shell function printing the start time of process `$1` (field 22 of its stat file;
/// the fields are counted after the parenthesised name, which may hold spaces).
pub(crate) const START_TIME_FN: &str =
    "st() { sed 's/^.*) //' \"/proc/$1/stat\" 2>/dev/null | cut -d' ' -f20; }";

/// What the leash removes on one host.
pub struct LeashSpec<'a> {
    /// `<data_dir>/splitbrain-<tag>`, holding `n<i>/node.pid`.
    pub run_dir: &'a str,
    /// The command that runs nft there, when the run uses the host's firewall.
    pub nft: Option<&'a str>,
    /// The data directory, when the run created it (removed if empty).
    pub made_data_dir: Option<&'a str>,
}

/// The shell script of a leash.
pub fn script(spec: &LeashSpec<'_>) -> String {
    // Signals of a closing session must not cut the clean-up short; output has nowhere to go.
    let mut s = String::from("trap '' HUP INT TERM PIPE\nexec >/dev/null 2>&1\ncat >/dev/null\n");
    // A pid file holds "PID START-TIME": only that very process is killed.
    s.push_str(&format!(
        "{st}\nr={run}\n\
         for f in \"$r\"/n*/node.pid; do\n  [ -f \"$f\" ] || continue\n  read -r p t < \"$f\"\n  \
         if [ -n \"$p\" ] && [ -n \"$t\" ] && [ \"$(st \"$p\")\" = \"$t\" ]; then kill -9 \"$p\"; fi\n\
         done\n",
        st = START_TIME_FN,
        run = quote(spec.run_dir),
    ));
    if let Some(nft) = spec.nft {
        s.push_str(&format!(
            "if {nft} list table inet {t} >/dev/null 2>&1; then {nft} delete table inet {t}; fi\n",
            t = super::firewall::TABLE
        ));
    }
    s.push_str("rm -rf \"$r\"\n");
    if let Some(d) = spec.made_data_dir {
        s.push_str(&format!("rmdir {} 2>/dev/null\n", quote(d)));
    }
    s.push_str("true\n");
    s
}

/// Starts the leash of one host.
pub async fn start(
    host: &Arc<HostSession>,
    spec: &LeashSpec<'_>,
) -> Result<HeldCommand, RemoteError> {
    host.hold(script(spec)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_waits_for_stdin_then_kills_by_pid_file_and_removes_only_its_own() {
        let spec = LeashSpec {
            run_dir: "/srv/sb/splitbrain-1 x",
            nft: Some("PATH=$PATH:/usr/sbin:/sbin nft"),
            made_data_dir: Some("/srv/sb"),
        };
        let s = script(&spec);
        let wait = s.find("cat >/dev/null").unwrap();
        let kill = s.find("kill -9").unwrap();
        assert!(wait < kill, "kills before its stdin ends:\n{s}");
        // The run directory's name has a space: quoted, one word to the shell.
        assert!(s.contains("r='/srv/sb/splitbrain-1 x'\n"));
        assert!(s.contains("delete table inet splitbrain"));
        assert!(s.contains("rmdir /srv/sb"));
        // Without a firewall or a data directory of its own, it touches neither.
        let bare = script(&LeashSpec {
            nft: None,
            made_data_dir: None,
            ..spec
        });
        assert!(!bare.contains("nft") && !bare.contains("rmdir"));
    }

    #[test]
    fn the_script_is_valid_shell_and_cleans_up_when_stdin_ends() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("splitbrain-t");
        std::fs::create_dir_all(run.join("n1")).unwrap();
        // Two "nodes", `sleep`s started here: n1's pid file names it with its start time;
        // n2's names its PID with another start time (a recycled PID): left alone.
        let mut node = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let start_of = |pid: u32| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split(' ').nth(19).unwrap().parse::<u64>().unwrap()
        };
        std::fs::write(
            run.join("n1/node.pid"),
            format!("{} {}\n", node.id(), start_of(node.id())),
        )
        .unwrap();
        std::fs::create_dir_all(run.join("n2")).unwrap();
        std::fs::write(
            run.join("n2/node.pid"),
            format!("{} {}\n", other.id(), start_of(other.id()) + 1),
        )
        .unwrap();
        let run_s = run.display().to_string();
        let s = script(&LeashSpec {
            run_dir: &run_s,
            nft: None,
            made_data_dir: None,
        });
        let status = std::process::Command::new("sh")
            .args(["-c", &s])
            .stdin(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        assert!(!run.exists(), "the run directory is still there");
        let status = node.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "the node was not killed");
        assert!(
            other.try_wait().unwrap().is_none(),
            "a process whose start time differs was killed"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
