//! Bringing a Galera node back after kill -9, as an operator would (MariaDB's "Galera
//! Cluster Recovery", and Debian's service, which runs `galera_recovery` before every
//! start). After a crash `grastate.dat` says `seqno: -1`, so the node's last committed
//! position is recovered from InnoDB (`mariadbd --wsrep-recover`) and given to the start
//! (`wsrep_start_position`): without it the node joins at an unknown position and, when
//! every node was down, `pc.recovery` re-forms the cluster at `00000000-...:0`, a new
//! history in which no node's data is compared with another's. While another node runs,
//! the killed node joins it from its position. When every node is down, each one's
//! `grastate.dat` says `safe_to_bootstrap: 0`: the most advanced node is marked safe,
//! founds the cluster (`wsrep-new-cluster`) and is started first; the others join it.

use super::config;
use super::connection;
use super::server::{self, WorkDir};
use crate::run::node_layout::{NodeLayout, RunAs};
use crate::systems::sql;
use mysql_async::prelude::Queryable;
use std::time::Duration;

/// The longest `mariadbd --wsrep-recover` may take (InnoDB crash recovery on a loaded
/// machine).
const RECOVER_BOUND: Duration = Duration::from_secs(120);
/// How long one status probe of a running node may take.
const PROBE: Duration = Duration::from_millis(500);

/// A node's position in the cluster's history: the cluster's UUID and the sequence
/// number of the last write set it committed (-1: unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The cluster state UUID.
    pub uuid: String,
    /// The last committed write set, -1 when unknown.
    pub seqno: i64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.uuid, self.seqno)
    }
}

/// The position `grastate.dat` records (`seqno: -1` while the node runs and after it
/// crashed), or None for a file without one.
pub fn grastate_position(text: &str) -> Option<Position> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    Some(Position {
        uuid: field("uuid")?.to_string(),
        seqno: field("seqno")?.parse().ok()?,
    })
}

/// `grastate.dat` with `safe_to_bootstrap: 1`: what the operator edits by hand on the
/// node chosen to found the cluster again.
pub fn safe_to_bootstrap(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("safe_to_bootstrap:") {
                "safe_to_bootstrap: 1\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect()
}

/// The position `mariadbd --wsrep-recover` printed (`WSREP: Recovered position:
/// UUID:SEQNO`; the last such line), or None.
pub fn recovered_position(output: &str) -> Option<Position> {
    let marker = "WSREP: Recovered position:";
    let line = output.lines().rev().find(|l| l.contains(marker))?;
    let (_, rest) = line.split_once(marker)?;
    let (uuid, seqno) = rest.split_whitespace().next()?.rsplit_once(':')?;
    Some(Position {
        uuid: uuid.to_string(),
        seqno: seqno.trim().parse().ok()?,
    })
}

/// The node to found the cluster again: the most advanced by `positions` (an unknown
/// position counting as -1); of equals, `preferred` (the node being restarted, so no
/// other starts before its fault ends), then the first.
pub fn founder(positions: &[Option<Position>], preferred: usize) -> usize {
    let seqno = |j: usize| positions[j].as_ref().map_or(-1, |p| p.seqno);
    let best = (0..positions.len()).map(seqno).max().unwrap_or(-1);
    if positions.get(preferred).is_some() && seqno(preferred) == best {
        return preferred;
    }
    (0..positions.len())
        .find(|&j| seqno(j) == best)
        .unwrap_or(preferred)
}

/// Before node `i` of a Galera cluster starts again after a kill: makes it join when
/// another node runs, else recovers every node's position and makes the most advanced
/// found the cluster. Returns the nodes to start, in order.
pub async fn before_restart(
    i: usize,
    layouts: &[NodeLayout],
    running: &[bool],
    user: Option<&RunAs>,
) -> Result<Vec<usize>, String> {
    if layouts.len() < 2 {
        return Ok(vec![i]);
    }
    if running.iter().any(|&r| r) {
        let at = position(&layouts[i], user).await;
        if let Some(order) = reset_quorum(i, layouts, running, at.as_ref()).await? {
            return Ok(order);
        }
        set_restart_options(&layouts[i], false, at.as_ref())?;
        let at = at.map_or_else(|| "an unknown position".into(), |p| p.to_string());
        note(
            &layouts[i],
            &format!(
                "splitbrain: {} joins the running nodes from {at}\n",
                layouts[i].name
            ),
        );
        return Ok(vec![i]);
    }
    // Each node's InnoDB recovery at once: they are independent, and the cluster
    // serves nothing until the founder is chosen.
    let mut recoveries = tokio::task::JoinSet::new();
    for (j, layout) in layouts.iter().enumerate() {
        let (layout, user) = (layout.clone(), user.cloned());
        recoveries.spawn(async move { (j, position(&layout, user.as_ref()).await) });
    }
    let mut positions = vec![None; layouts.len()];
    while let Some(done) = recoveries.join_next().await {
        if let Ok((j, at)) = done {
            positions[j] = at;
        }
    }
    let first = founder(&positions, i);
    for (j, layout) in layouts.iter().enumerate() {
        set_restart_options(layout, j == first, positions[j].as_ref())?;
    }
    let grastate = WorkDir::for_node(&layouts[first].data_dir)
        .data()
        .join("grastate.dat");
    if let Ok(text) = std::fs::read_to_string(&grastate) {
        // Rewritten in place, so the file keeps its owner (the server's account).
        std::fs::write(&grastate, safe_to_bootstrap(&text))
            .map_err(|e| format!("writing {}: {e}", grastate.display()))?;
    }
    let shown: Vec<String> = layouts
        .iter()
        .zip(&positions)
        .map(|(l, p)| match p {
            Some(p) => format!("{} at {p}", l.name),
            None => format!("{} at an unknown position", l.name),
        })
        .collect();
    let note_text = format!(
        "splitbrain: every node was down ({}); {} founds the cluster again, the others join it\n",
        shown.join(", "),
        layouts[first].name
    );
    note_all(layouts, &note_text);
    Ok(if first == i { vec![i] } else { vec![first, i] })
}

/// How long a restart waits for the running nodes to settle into a primary component or
/// lose it: Galera notices a killed member only after `evs.suspect_timeout` (5 s), later
/// on a loaded machine.
const QUORUM_BOUND: Duration = Duration::from_secs(30);
/// How often the running nodes are asked while they settle.
const QUORUM_POLL: Duration = Duration::from_millis(250);

/// What a running Galera node says of its component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeState {
    /// The node's index.
    pub node: usize,
    /// `wsrep_cluster_status` is `Primary`.
    pub primary: bool,
    /// `wsrep_last_committed`; for a node that did not answer, the position it started
    /// from (it has applied nothing since: it was never in a primary component).
    pub last_committed: i64,
    /// `wsrep_cluster_size`: the members of its current view, killed ones included until
    /// it has noticed they are gone.
    pub size: usize,
    /// It answered SQL; else this is what its log says (a node that waits for its first
    /// state transfer runs no SQL).
    pub answered: bool,
}

/// What the running nodes' answers say about the quorum, just before a killed node
/// starts again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quorum {
    /// A primary component that keeps a majority of its view among the running nodes:
    /// the killed node joins it.
    Held,
    /// No running node is in a primary component, and none will form one by itself: the
    /// quorum is to be reset on `best`, the most advanced of them (`answered`: it runs
    /// SQL, so `pc.bootstrap` can reach it).
    Lost {
        best: usize,
        last_committed: i64,
        answered: bool,
    },
    /// Not known yet: no node answered, or a node still reports the primary view it had
    /// before the kill, counting killed members, without which it will lose quorum once
    /// it notices (after `evs.suspect_timeout`), or nodes enough to keep quorum are
    /// between views.
    Unsettled,
}

/// Judges `states` (what the running nodes said, by SQL or in their logs), `live` nodes
/// running of a cluster of `n`; `settled`: the states have not changed for
/// [`QUORUM_SETTLE`].
///
/// A primary view is only trusted when its running members alone would be a majority
/// of it: right after a majority is killed the survivor still reports `Primary` with
/// the killed nodes in its view until `evs.suspect_timeout` has passed, and a restarted
/// node that joins it then is left with it in a non-primary component that never
/// becomes primary again (no member of the old primary view but the survivor is in it).
///
/// With a minority running, a component of them can never be primary by itself, so the
/// first answer that they are all non-primary decides. With a majority running (a node
/// restarted while another is down), a non-primary component may still become primary
/// by itself (its members merging into the last primary view), so every running node
/// has to have said where it is, non-primary, unchanged for [`QUORUM_SETTLE`]. That is
/// the state of nodes restarted into a cluster whose only primary member was killed
/// again before they joined it (they wait for a primary forever, answering no SQL), and
/// of a survivor whose primary view lost its other member while a restarted node was
/// connecting (it is non-primary with the newcomer, which never was in that view).
pub fn quorum(states: &[NodeState], live: usize, n: usize, settled: bool) -> Quorum {
    if states.iter().any(|s| s.primary && 2 * live > s.size) {
        return Quorum::Held;
    }
    let all_non_primary = !states.is_empty() && states.iter().all(|s| !s.primary);
    let majority_running = 2 * live > n;
    if !all_non_primary || (majority_running && !(settled && states.len() >= live)) {
        return Quorum::Unsettled;
    }
    states
        .iter()
        .max_by_key(|s| (s.last_committed, s.answered, std::cmp::Reverse(s.node)))
        .map_or(Quorum::Unsettled, |s| Quorum::Lost {
            best: s.node,
            last_committed: s.last_committed,
            answered: s.answered,
        })
}

/// What node logs say of the component of a node that does not answer SQL, from the
/// lines since its latest start: `WSREP: New COMPONENT: primary = no, bootstrap = no,
/// my_idx = 0, memb_num = 2` (the last), and the position it started from (`WSREP:
/// Setting GCS initial position to UUID:SEQNO`). None before it reached the group, or
/// when it has been in a primary component since it started (it may have applied write
/// sets since, so its start position says nothing of what it holds).
pub fn logged_state(node: usize, log: &str) -> Option<NodeState> {
    let since_start = log.rfind("] Starting MariaDB").map_or(log, |at| &log[at..]);
    let mut component = None;
    let mut start_seqno = None;
    for line in since_start.lines() {
        if let Some((_, rest)) = line.split_once("WSREP: New COMPONENT: primary = ") {
            let primary = rest.starts_with("yes");
            if primary {
                return None;
            }
            let members = rest
                .split_once("memb_num = ")?
                .1
                .trim()
                .parse::<usize>()
                .ok()?;
            component = Some(members);
        } else if let Some((_, at)) = line.split_once("Setting GCS initial position to ") {
            start_seqno = at.trim().rsplit_once(':')?.1.parse::<i64>().ok();
        }
    }
    Some(NodeState {
        node,
        primary: false,
        last_committed: start_seqno?,
        size: component?,
        answered: false,
    })
}

/// How long every running node's component must stay as it is before a restart, with
/// a majority of nodes running, takes them for unable to form a primary component:
/// members that can merge into one do within about a second of seeing each other.
const QUORUM_SETTLE: Duration = Duration::from_secs(3);

/// When no running node is in a primary component and none will form one by itself (a
/// majority was killed: the survivors lose quorum and wait; or the one primary member
/// was killed again before the restarted nodes joined it), resets the quorum as
/// MariaDB's recovery guide tells an operator, once [`quorum`] says so (waiting up to
/// [`QUORUM_BOUND`] for the survivors to notice the kill): on the most advanced node,
/// a running one by `SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'` (node `i`
/// then joins it), or node `i` itself when it holds as much as any (it founds the
/// cluster, which the running nodes join). None while a primary component holds: node
/// `i` just joins; also when the nodes did not settle within the bound, or the most
/// advanced is a node no SQL reaches (said in the logs).
async fn reset_quorum(
    i: usize,
    layouts: &[NodeLayout],
    running: &[bool],
    at: Option<&Position>,
) -> Result<Option<Vec<usize>>, String> {
    let live: Vec<usize> = (0..layouts.len())
        .filter(|&j| running.get(j).copied().unwrap_or(false))
        .collect();
    let start = std::time::Instant::now();
    // The components last seen, and since when they have been as they are.
    let mut seen: Vec<(usize, bool, usize)> = Vec::new();
    let mut unchanged_since = start;
    let (states, best, best_seqno, best_answered) = loop {
        let mut states = Vec::new();
        for &j in &live {
            // A node that runs no SQL (starting, waiting for a state transfer, paused)
            // may still say in its log where it is.
            let state = match cluster_state(j, layouts[j].client_addr).await {
                Some(state) => Some(state),
                None => std::fs::read_to_string(&layouts[j].log_file)
                    .ok()
                    .and_then(|log| logged_state(j, &log)),
            };
            states.extend(state);
        }
        let now_seen: Vec<(usize, bool, usize)> =
            states.iter().map(|s| (s.node, s.primary, s.size)).collect();
        if now_seen != seen {
            seen = now_seen;
            unchanged_since = std::time::Instant::now();
        }
        let settled = unchanged_since.elapsed() >= QUORUM_SETTLE;
        match quorum(&states, live.len(), layouts.len(), settled) {
            Quorum::Held => return Ok(None),
            Quorum::Lost {
                best,
                last_committed,
                answered,
            } => break (states, best, last_committed, answered),
            Quorum::Unsettled if start.elapsed() >= QUORUM_BOUND => {
                let text = format!(
                    "splitbrain: the running nodes neither held nor lost a primary component within {QUORUM_BOUND:?} ({}); {} joins them as they are\n",
                    describe(&states, layouts),
                    layouts[i].name
                );
                note_all(layouts, &text);
                return Ok(None);
            }
            Quorum::Unsettled => tokio::time::sleep(QUORUM_POLL).await,
        }
    };
    let waited = start.elapsed().as_secs_f64();
    let seen = describe(&states, layouts);
    let mine = at.map_or(-1, |p| p.seqno);
    // A node that is down may hold more than any running one (it may have been the
    // one primary member while the others were still joining): founding at `mine` would
    // drop it, so the restarted node founds only when every other node runs.
    let down: Vec<&str> = (0..layouts.len())
        .filter(|&j| j != i && !live.contains(&j))
        .map(|j| layouts[j].name.as_str())
        .collect();
    let may_found = mine > best_seqno || (mine == best_seqno && !best_answered);
    if may_found && !down.is_empty() {
        let text = format!(
            "splitbrain: no running node is primary (seen {waited:.1} s into the restart: {seen}); {} at seqno {mine} holds as much as any running node, but {} is down and may hold more, so {} joins them as they are\n",
            layouts[i].name,
            down.join(", "),
            layouts[i].name
        );
        note_all(layouts, &text);
        return Ok(None);
    }
    // Of equals, the restarted node founds rather than a node no SQL reaches.
    let text = if may_found {
        set_restart_options(&layouts[i], true, at)?;
        let grastate = WorkDir::for_node(&layouts[i].data_dir)
            .data()
            .join("grastate.dat");
        if let Ok(text) = std::fs::read_to_string(&grastate) {
            std::fs::write(&grastate, safe_to_bootstrap(&text))
                .map_err(|e| format!("writing {}: {e}", grastate.display()))?;
        }
        format!(
            "splitbrain: no running node is primary nor will be by itself (seen {waited:.1} s into the restart: {seen}); {} at seqno {mine} holds as much as any and founds the cluster again\n",
            layouts[i].name
        )
    } else if best_answered {
        bootstrap_primary(best, layouts).await?;
        set_restart_options(&layouts[i], false, at)?;
        format!(
            "splitbrain: no running node was primary nor would be by itself (seen {waited:.1} s into the restart: {seen}); the quorum was reset on {} (seqno {best_seqno}, pc.bootstrap=YES), {} joins it\n",
            layouts[best].name, layouts[i].name
        )
    } else {
        // Founding at `mine` would drop what the most advanced node holds beyond it.
        let text = format!(
            "splitbrain: no running node is primary (seen {waited:.1} s into the restart: {seen}), but the most advanced, {} at seqno {best_seqno}, runs no SQL to reset the quorum on, and {} at seqno {mine} holds less; {} joins them as they are\n",
            layouts[best].name, layouts[i].name, layouts[i].name
        );
        note_all(layouts, &text);
        return Ok(None);
    };
    note_all(layouts, &text);
    Ok(Some(vec![i]))
}

/// How many times the quorum reset is tried on one node before the restart gives up.
const BOOTSTRAP_TRIES: u32 = 8;

/// `SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'` on node `best`, tried again
/// (a second apart, up to [`BOOTSTRAP_TRIES`]) while Galera refuses it: it answers 1210
/// ("Incorrect arguments to SET") while the node's view is still changing, e.g. with a
/// restarted member joining it. Done once the node reports a primary component.
async fn bootstrap_primary(best: usize, layouts: &[NodeLayout]) -> Result<(), String> {
    let layout = &layouts[best];
    let mut tries = 0;
    loop {
        tries += 1;
        let attempt = async {
            let mut conn = connection::connect_admin(layout.client_addr, PROBE).await?;
            tokio::time::timeout(
                PROBE * 4,
                conn.query_drop("SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'"),
            )
            .await
            .map_err(|_| "timeout".to_string())?
            .map_err(|e| e.to_string())
        };
        let error = match attempt.await {
            Ok(()) => return Ok(()),
            Err(e) => format!("resetting the quorum on {}: {e}", layout.name),
        };
        if cluster_state(best, layout.client_addr)
            .await
            .is_some_and(|s| s.primary)
        {
            return Ok(());
        }
        if tries >= BOOTSTRAP_TRIES {
            return Err(format!("{error} ({tries} tries)"));
        }
        let text = format!("splitbrain: {error}; trying again in 1 s\n");
        note_all(layouts, &text);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The running nodes' states for a node log: `n3 non-primary in a view of 2 at seqno
/// 62 (SQL)`, `(log)` for what a node's log said.
fn describe(states: &[NodeState], layouts: &[NodeLayout]) -> String {
    if states.is_empty() {
        return "none answered nor logged a component".into();
    }
    states
        .iter()
        .map(|s| {
            format!(
                "{} {} in a view of {} at seqno {} ({})",
                layouts[s.node].name,
                if s.primary { "primary" } else { "non-primary" },
                s.size,
                s.last_committed,
                if s.answered { "SQL" } else { "log" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What node `node` at `addr` says of its component; None when it does not answer.
async fn cluster_state(node: usize, addr: std::net::SocketAddr) -> Option<NodeState> {
    let mut conn = connection::connect_admin(addr, PROBE).await.ok()?;
    let rows: Vec<(String, String)> = tokio::time::timeout(
        PROBE,
        conn.query(
            "SHOW STATUS WHERE Variable_name IN ('wsrep_cluster_status', 'wsrep_last_committed', 'wsrep_cluster_size')",
        ),
    )
    .await
    .ok()?
    .ok()?;
    let value = |name: &str| {
        rows.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    Some(NodeState {
        node,
        primary: value("wsrep_cluster_status")? == "Primary",
        last_committed: value("wsrep_last_committed")?.parse().ok()?,
        size: value("wsrep_cluster_size")?.parse().ok()?,
        answered: true,
    })
}

/// Appends `text` to every node's log: a restart's decision concerns the whole cluster.
fn note_all(layouts: &[NodeLayout], text: &str) {
    for layout in layouts {
        note(layout, text);
    }
}

/// Appends `text` to node `layout`'s log (a note of what the harness decided).
fn note(layout: &NodeLayout, text: &str) {
    if let Ok(log) = sql::open_log(layout) {
        let _ = std::io::Write::write_all(&mut &log, text.as_bytes());
    }
}

/// Node `layout`'s option file for its next start: founding or joining, from `at`
/// when its position is known.
fn set_restart_options(
    layout: &NodeLayout,
    bootstrap: bool,
    at: Option<&Position>,
) -> Result<(), String> {
    let path = WorkDir::for_node(&layout.data_dir).option_file();
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let at = at.filter(|p| p.seqno >= 0).map(Position::to_string);
    std::fs::write(
        &path,
        config::restart_options(&text, bootstrap, at.as_deref()),
    )
    .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// The last position node `layout` committed, while it is down: from `grastate.dat`
/// when the node recorded one there (a clean shutdown), else from InnoDB by
/// `mariadbd --wsrep-recover`; None when neither says, or when the node was killed
/// during a full state transfer (its data directory is a partial copy; it needs a
/// whole one).
async fn position(layout: &NodeLayout, user: Option<&RunAs>) -> Option<Position> {
    let work = WorkDir::for_node(&layout.data_dir);
    if work.data().join("sst_in_progress").exists() {
        return None;
    }
    let recorded = std::fs::read_to_string(work.data().join("grastate.dat"))
        .ok()
        .and_then(|t| grastate_position(&t));
    if let Some(p) = recorded.filter(|p| p.seqno >= 0) {
        return Some(p);
    }
    wsrep_recover(layout, &work, user).await
}

/// Runs `mariadbd --wsrep-recover` on the node's data directory (InnoDB's crash recovery,
/// then the position of the last committed write set, printed; the server exits), its
/// output appended to the node's log.
async fn wsrep_recover(
    layout: &NodeLayout,
    work: &WorkDir,
    user: Option<&RunAs>,
) -> Option<Position> {
    let program = server::find("mariadbd")?;
    let out_file = work.root().join("wsrep-recover.log");
    let _ = std::fs::remove_file(&out_file);
    let mut cmd = tokio::process::Command::new(&program);
    cmd.arg(format!("--defaults-file={}", work.option_file().display()))
        .arg("--wsrep-recover")
        .arg(format!("--log-error={}", out_file.display()));
    sql::run_logged(cmd, &program, layout, user, RECOVER_BOUND)
        .await
        .ok()?;
    let output = std::fs::read_to_string(&out_file).ok()?;
    let _ = std::io::Write::write_all(&mut &sql::open_log(layout).ok()?, output.as_bytes());
    recovered_position(&output)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CRASHED: &str = "# GALERA saved state\nversion: 2.1\nuuid:    1b7bd4c2-d1c9-11f0-9f0e-6b1d0f3e1a11\nseqno:   -1\nsafe_to_bootstrap: 0\n";

    #[test]
    fn a_crashed_node_records_no_position_and_is_not_safe_to_bootstrap() {
        let p = grastate_position(CRASHED).unwrap();
        assert_eq!(p.uuid, "1b7bd4c2-d1c9-11f0-9f0e-6b1d0f3e1a11");
        assert_eq!(p.seqno, -1);
        let marked = safe_to_bootstrap(CRASHED);
        assert!(marked.contains("safe_to_bootstrap: 1\n"));
        assert!(!marked.contains("safe_to_bootstrap: 0"));
        assert_eq!(grastate_position(&marked), Some(p));
        assert_eq!(grastate_position("version: 2.1\n"), None);
    }

    #[test]
    fn the_recovered_position_is_read_from_the_servers_log() {
        let log = "2026-12-04 15:01:02 0 [Note] InnoDB: Starting crash recovery\n\
                   2026-12-04 15:01:03 0 [Note] WSREP: Recovered position: 1b7bd4c2-d1c9-11f0-9f0e-6b1d0f3e1a11:4711\n";
        let p = recovered_position(log).unwrap();
        assert_eq!(p.seqno, 4711);
        assert_eq!(p.to_string(), "1b7bd4c2-d1c9-11f0-9f0e-6b1d0f3e1a11:4711");
        assert_eq!(
            recovered_position("InnoDB: Starting crash recovery\n"),
            None
        );
        // A data directory that never joined a cluster (as 10.11 prints it).
        let empty = recovered_position(
            "2026-12-04 15:28:04 0 [Note] WSREP: Recovered position: 00000000-0000-0000-0000-000000000000:-1\n",
        )
        .unwrap();
        assert_eq!(empty.seqno, -1);
    }

    #[test]
    fn the_most_advanced_node_founds_and_the_restarted_one_wins_ties() {
        let at = |seqno| {
            Some(Position {
                uuid: "u".into(),
                seqno,
            })
        };
        assert_eq!(founder(&[at(10), at(12), at(11)], 0), 1);
        assert_eq!(founder(&[at(12), at(12), at(11)], 1), 1);
        assert_eq!(founder(&[at(12), at(12), at(11)], 2), 0);
        assert_eq!(founder(&[None, None, at(-1)], 1), 1);
        assert_eq!(founder(&[None, at(3), None], 0), 1);
    }

    fn state(node: usize, primary: bool, last_committed: i64, size: usize) -> NodeState {
        NodeState {
            node,
            primary,
            last_committed,
            size,
            answered: true,
        }
    }

    #[test]
    fn a_primary_view_counting_killed_members_is_not_trusted_until_it_settles() {
        // One of three killed: the two survivors keep a majority of their old view.
        assert_eq!(
            quorum(&[state(0, true, 9, 3), state(2, true, 9, 3)], 2, 3, false),
            Quorum::Held
        );
        // Two of three killed, the survivor not yet aware: its view still counts them.
        assert_eq!(
            quorum(&[state(0, true, 9, 3)], 1, 3, true),
            Quorum::Unsettled
        );
        // ... then aware: non-primary, and the reset goes to it at once (a minority
        // runs, so no primary can form without it).
        assert_eq!(
            quorum(&[state(0, false, 9, 1)], 1, 3, false),
            Quorum::Lost {
                best: 0,
                last_committed: 9,
                answered: true
            }
        );
        // After the reset the survivor is primary alone; the next node joins it.
        assert_eq!(quorum(&[state(0, true, 9, 1)], 2, 3, false), Quorum::Held);
        // Of several non-primary survivors (five nodes, three killed) the most advanced.
        assert_eq!(
            quorum(&[state(1, false, 7, 2), state(4, false, 8, 2)], 2, 5, false),
            Quorum::Lost {
                best: 4,
                last_committed: 8,
                answered: true
            }
        );
        // Nobody answered nor logged a component.
        assert_eq!(quorum(&[], 1, 3, true), Quorum::Unsettled);
    }

    #[test]
    fn a_majority_of_running_nodes_outside_a_primary_is_reset_only_once_it_settles() {
        // A survivor non-primary in a view with a restarted node that was never in its
        // primary view (n1 said so in its log): between views at first ...
        let joiner = NodeState {
            answered: false,
            ..state(0, false, 62, 2)
        };
        let survivor = state(2, false, 80, 2);
        assert_eq!(quorum(&[joiner, survivor], 2, 3, false), Quorum::Unsettled);
        // ... and unable to become primary once that lasts.
        assert_eq!(
            quorum(&[joiner, survivor], 2, 3, true),
            Quorum::Lost {
                best: 2,
                last_committed: 80,
                answered: true
            }
        );
        // A running node said nothing (still starting): it might yet be primary.
        assert_eq!(quorum(&[survivor], 2, 3, true), Quorum::Unsettled);
        // Restarted nodes waiting for a primary that was killed again: none answers,
        // both logged; of equals the one that answers would be preferred, here neither.
        let waiting = |node| NodeState {
            answered: false,
            ..state(node, false, 62, 2)
        };
        assert_eq!(
            quorum(&[waiting(0), waiting(1)], 2, 3, true),
            Quorum::Lost {
                best: 0,
                last_committed: 62,
                answered: false
            }
        );
        assert_eq!(
            quorum(&[waiting(0), state(1, false, 62, 2)], 2, 3, true),
            Quorum::Lost {
                best: 1,
                last_committed: 62,
                answered: true
            }
        );
    }

    #[test]
    fn a_node_waiting_for_a_primary_says_so_in_its_log() {
        let earlier = "2026-12-04 21:45:00 0 [Note] Starting MariaDB 10.11.19-MariaDB as process 1\n\
                       2026-12-04 21:45:01 0 [Note] WSREP: New COMPONENT: primary = yes, bootstrap = no, my_idx = 0, memb_num = 3\n";
        let restart = "2026-12-04 21:46:07 0 [Note] Starting MariaDB 10.11.19-MariaDB as process 2\n\
                       2026-12-04 21:46:08 0 [Note] WSREP: Setting GCS initial position to 10fd4e8e-f02c-11f1-88db-5684f54bcdb0:62\n\
                       2026-12-04 21:46:09 0 [Note] WSREP: New COMPONENT: primary = no, bootstrap = no, my_idx = 0, memb_num = 1\n\
                       2026-12-04 21:46:09 0 [Note] WSREP: New COMPONENT: primary = no, bootstrap = no, my_idx = 0, memb_num = 2\n";
        // Only the lines since the latest start count: the earlier primary view is gone.
        let log = format!("{earlier}{restart}");
        assert_eq!(
            logged_state(1, &log),
            Some(NodeState {
                node: 1,
                primary: false,
                last_committed: 62,
                size: 2,
                answered: false
            })
        );
        // Not yet in the group: nothing to say.
        let starting = restart.lines().take(2).collect::<Vec<_>>().join("\n");
        assert_eq!(logged_state(1, &format!("{earlier}{starting}")), None);
        // Primary since its start: it may have applied write sets beyond its start.
        let joined = format!(
            "{log}2026-12-04 21:46:20 0 [Note] WSREP: New COMPONENT: primary = yes, bootstrap = no, my_idx = 0, memb_num = 3\n\
             2026-12-04 21:46:25 0 [Note] WSREP: New COMPONENT: primary = no, bootstrap = no, my_idx = 0, memb_num = 1\n"
        );
        assert_eq!(logged_state(1, &joined), None);
    }
}
