//! The Raft consensus core, written sans-IO.
//!
//! [`RaftCore`] is a pure state machine: it is fed [`Message`]s from peers, `tick`s and
//! client proposals, each with the caller's idea of `now` (milliseconds on the node's
//! offset clock), and it accumulates its outputs in a [`Ready`]: hard state and log
//! entries to persist, messages to send, committed entries to apply, confirmed reads.
//! It does no I/O and reads no clock, so the same code runs in the networked node and in
//! the deterministic simulation (`tests/simulation.rs`).
//!
//! The caller's contract, which makes the core's answers safe (Raft §5, "persistent state
//! ... updated on stable storage before responding to RPCs"): take the `Ready`, persist its
//! `hard_state` and `storage` ops durably, and only then send its `messages`, apply its
//! `apply` list and answer clients.
//!
//! Module map: [`log`] (the in-memory log), `election` (§5.2, §5.4.1), `replication`
//! (§5.3, §5.4.2), `reads` (§6.4 read-index and leases), `snapshot` (§7).

mod election;
pub mod log;
mod reads;
mod replication;
mod snapshot;
#[cfg(test)]
mod tests;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub use self::log::RaftLog;

/// A node id (1-based in the KV store).
pub type NodeId = u64;

/// One log entry. An empty `data` is a no-op (appended by a new leader, Raft §8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Term of the leader that created the entry.
    pub term: u64,
    /// Position in the log, from 1.
    pub index: u64,
    /// Opaque command bytes for the state machine.
    pub data: Vec<u8>,
}

/// A state-machine snapshot covering the log up to and including `index`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Last log index the snapshot covers.
    pub index: u64,
    /// Term of that entry.
    pub term: u64,
    /// Opaque serialized state machine.
    pub data: Vec<u8>,
}

/// State that must be persisted before the node answers anyone: current term and vote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HardState {
    /// Latest term this node has seen.
    pub term: u64,
    /// Candidate voted for in `term`, if any.
    pub vote: Option<NodeId>,
}

/// A node's role in its Raft group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Follows a leader (or waits for one).
    Follower,
    /// Campaigning for votes.
    Candidate,
    /// Leads: accepts proposals and replicates them.
    Leader,
}

/// Deliberate protocol bugs the core can be told to have (see the README).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreBugs {
    /// Grant votes without the §5.4.1 log up-to-dateness check.
    pub vote_without_log_check: bool,
    /// Commit entries of earlier terms by counting replicas (breaks §5.4.2, figure 8);
    /// also skips the new leader's no-op, which would otherwise hide the bug.
    pub commit_old_term: bool,
    /// Lease measured from when acks arrive, lasting a full election timeout, with no
    /// margin for clock drift.
    pub lease_no_margin: bool,
    /// Leaders never step down for lack of a quorum (part of the `stale-read` bug: an
    /// isolated leader keeps believing it leads).
    pub no_check_quorum: bool,
    /// Proposals wait for the next heartbeat to be replicated (part of the
    /// `ack-before-commit` bug: a leader that answers clients before replicating has no
    /// reason to hurry, so a leader crash loses up to a heartbeat of acknowledged writes).
    pub lazy_replication: bool,
}

/// Static configuration of one Raft group member.
#[derive(Clone, Debug)]
pub struct Config {
    /// This node.
    pub id: NodeId,
    /// Every voting member, including `id`.
    pub voters: Vec<NodeId>,
    /// Minimum election timeout; each timeout is drawn from `[t, 2t)` (Raft §5.2).
    pub election_timeout_ms: i64,
    /// Leader heartbeat interval.
    pub heartbeat_ms: i64,
    /// Lease length for lease reads (should be below `election_timeout_ms`).
    pub lease_ms: i64,
    /// Clock-drift allowance subtracted from the lease.
    pub max_drift_ms: i64,
    /// Read-index requests (the leader's own and those forwarded by followers for replica
    /// reads) are answered at once from the leader's lease while it holds, instead of
    /// after a heartbeat round (§6.4.1 applied to §6.4's read index): the same bounded-
    /// drift assumption as lease reads, and no wait for a follower that is slow to ack.
    pub read_index_lease: bool,
    /// Most entries per AppendEntries message.
    pub max_batch: usize,
    /// Seed of the election-timeout randomness.
    pub seed: u64,
    /// Deliberate bugs.
    pub bugs: CoreBugs,
}

impl Config {
    /// A configuration with the KV store's defaults.
    pub fn new(id: NodeId, voters: Vec<NodeId>, seed: u64) -> Self {
        Config {
            id,
            voters,
            election_timeout_ms: 300,
            heartbeat_ms: 50,
            lease_ms: 200,
            max_drift_ms: 50,
            read_index_lease: false,
            max_batch: 64,
            seed,
            bugs: CoreBugs::default(),
        }
    }
}

/// Messages between members of one Raft group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t")]
pub enum Message {
    /// RequestVote RPC (Raft §5.2).
    Vote {
        /// Candidate's term.
        term: u64,
        /// Candidate's last log index.
        last_index: u64,
        /// Candidate's last log term.
        last_term: u64,
    },
    /// Reply to [`Message::Vote`].
    VoteResp {
        /// Voter's term.
        term: u64,
        /// Whether the vote was granted.
        granted: bool,
    },
    /// AppendEntries RPC (Raft §5.3); empty `entries` is a heartbeat.
    Append {
        /// Leader's term.
        term: u64,
        /// Index of the entry before `entries`.
        prev_index: u64,
        /// Term of that entry.
        prev_term: u64,
        /// Entries to store.
        entries: Vec<Entry>,
        /// Leader's commit index.
        commit: u64,
        /// Heartbeat round, echoed back to confirm leadership for reads and leases.
        round: u64,
    },
    /// Reply to [`Message::Append`] and [`Message::InstallSnapshot`].
    AppendResp {
        /// Follower's term.
        term: u64,
        /// Whether the entries matched and were stored.
        success: bool,
        /// On success: last index known to match the leader's log.
        match_index: u64,
        /// On failure: where the leader should retry from.
        hint: u64,
        /// Round echoed from the request.
        round: u64,
    },
    /// InstallSnapshot RPC (Raft §7), sent whole.
    InstallSnapshot {
        /// Leader's term.
        term: u64,
        /// The snapshot.
        snapshot: Snapshot,
        /// Heartbeat round.
        round: u64,
    },
    /// A follower asks the leader for a read index (replica reads, Raft §6.4).
    ReadIndex {
        /// Follower's request id.
        ctx: u64,
    },
    /// The leader's answer: the index to wait for, or `None` if it cannot serve.
    ReadIndexResp {
        /// The follower's request id.
        ctx: u64,
        /// Confirmed read index.
        index: Option<u64>,
    },
}

/// A log mutation to persist, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageOp {
    /// Append entries; an entry whose index is at or below the stored last index replaces
    /// it and everything after it (the conflict rule of §5.3).
    Append(Vec<Entry>),
    /// Store this snapshot, and make the stored log exactly `retained` (the entries after it).
    Snapshot {
        /// The snapshot.
        snapshot: Snapshot,
        /// Entries after the snapshot point.
        retained: Vec<Entry>,
    },
}

/// Something to apply to the state machine, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Apply {
    /// A committed entry.
    Entry(Entry),
    /// Replace the state machine with this snapshot.
    Snapshot(Snapshot),
}

/// A linearizable read is safe once the state machine has applied `index`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadState {
    /// The caller's request id.
    pub ctx: u64,
    /// Apply up to here, then read.
    pub index: u64,
}

/// Outputs accumulated since the last [`RaftCore::take_ready`].
#[derive(Clone, Debug, Default)]
pub struct Ready {
    /// New term/vote to persist (before sending anything).
    pub hard_state: Option<HardState>,
    /// Log mutations to persist (before sending anything).
    pub storage: Vec<StorageOp>,
    /// Messages to send, after persisting.
    pub messages: Vec<(NodeId, Message)>,
    /// Committed entries / snapshots to apply, after persisting.
    pub apply: Vec<Apply>,
    /// Reads confirmed.
    pub reads: Vec<ReadState>,
    /// Reads that cannot be served (leadership lost, no leader).
    pub failed_reads: Vec<u64>,
}

impl Ready {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.hard_state.is_none()
            && self.storage.is_empty()
            && self.messages.is_empty()
            && self.apply.is_empty()
            && self.reads.is_empty()
            && self.failed_reads.is_empty()
    }
}

/// What a node restarts from: the state it persisted.
#[derive(Clone, Debug, Default)]
pub struct Persisted {
    /// Term and vote.
    pub hard_state: HardState,
    /// Latest snapshot, if any.
    pub snapshot: Option<Snapshot>,
    /// Log entries after the snapshot.
    pub entries: Vec<Entry>,
}

/// The request needs the leader and this node is not it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not the leader (leader hint: {leader:?})")]
pub struct NotLeader {
    /// The leader this node knows of, if any.
    pub leader: Option<NodeId>,
}

/// Leader's view of one follower.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    /// Next index to send.
    next: u64,
    /// Highest index known replicated.
    matched: u64,
    /// Highest heartbeat round the follower answered in this term.
    acked_round: u64,
    /// When it last answered (for check-quorum).
    last_ack: i64,
    /// The commit index in the last AppendEntries sent to it.
    commit_sent: u64,
}

/// A read waiting for a heartbeat round (and the term's first commit).
#[derive(Clone, Copy, Debug)]
struct PendingRead {
    ctx: u64,
    round: u64,
    /// `None`: a local read; `Some(peer)`: forwarded by a follower.
    from: Option<NodeId>,
    /// The leader's commit index when the read arrived (Raft §6.4 step 1).
    commit_at_arrival: u64,
}

/// One member of a Raft group. See the module docs.
#[derive(Debug)]
pub struct RaftCore {
    cfg: Config,
    term: u64,
    vote: Option<NodeId>,
    log: RaftLog,
    snapshot: Option<Snapshot>,
    commit: u64,
    applied: u64,
    role: Role,
    leader: Option<NodeId>,
    now: i64,
    election_deadline: i64,
    heartbeat_due: i64,
    last_leader_contact: Option<i64>,
    votes: BTreeSet<NodeId>,
    progress: BTreeMap<NodeId, Progress>,
    round: u64,
    round_sent: BTreeMap<u64, i64>,
    quorum_round: u64,
    lease_until: i64,
    term_start_index: u64,
    pending_reads: Vec<PendingRead>,
    need_broadcast: bool,
    rng: ChaCha8Rng,
    ready: Ready,
    violations: u64,
}

impl RaftCore {
    /// A member restarting from `persisted` (use `Persisted::default()` for a fresh node).
    pub fn new(cfg: Config, persisted: Persisted, now: i64) -> Self {
        let (snap_index, snap_term) = persisted
            .snapshot
            .as_ref()
            .map_or((0, 0), |s| (s.index, s.term));
        let log = RaftLog::new(snap_index, snap_term, persisted.entries);
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ cfg.id.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut core = RaftCore {
            term: persisted.hard_state.term,
            vote: persisted.hard_state.vote,
            log,
            snapshot: persisted.snapshot,
            commit: snap_index,
            applied: snap_index,
            role: Role::Follower,
            leader: None,
            now,
            election_deadline: now,
            heartbeat_due: now,
            last_leader_contact: None,
            votes: BTreeSet::new(),
            progress: BTreeMap::new(),
            round: 0,
            round_sent: BTreeMap::new(),
            quorum_round: 0,
            lease_until: i64::MIN,
            term_start_index: 0,
            pending_reads: Vec::new(),
            need_broadcast: false,
            rng,
            ready: Ready::default(),
            violations: 0,
            cfg,
        };
        core.reset_election_deadline();
        core
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.cfg.id
    }
    /// Current role.
    pub fn role(&self) -> Role {
        self.role
    }
    /// The leader this node knows of in its current term.
    pub fn leader(&self) -> Option<NodeId> {
        self.leader
    }
    /// Current term.
    pub fn term(&self) -> u64 {
        self.term
    }
    /// Highest index known committed.
    pub fn commit_index(&self) -> u64 {
        self.commit
    }
    /// Highest index handed out for applying.
    pub fn applied_index(&self) -> u64 {
        self.applied
    }
    /// The in-memory log.
    pub fn log(&self) -> &RaftLog {
        &self.log
    }
    /// Times this node was asked to overwrite an entry it had already seen committed:
    /// impossible in correct Raft, so any count is a safety violation (bugs only).
    pub fn violations(&self) -> u64 {
        self.violations
    }
    /// Current term and vote.
    pub fn hard_state(&self) -> HardState {
        HardState {
            term: self.term,
            vote: self.vote,
        }
    }

    /// Takes the outputs accumulated so far. Coalesced work (a broadcast requested by
    /// several proposals or reads) is done here, once.
    pub fn take_ready(&mut self) -> Ready {
        if self.need_broadcast && self.role == Role::Leader {
            self.broadcast_append();
        }
        self.need_broadcast = false;
        std::mem::take(&mut self.ready)
    }

    /// Advances time: elections for followers and candidates, heartbeats and the
    /// check-quorum step-down for leaders.
    pub fn tick(&mut self, now: i64) {
        self.observe_time(now);
        let timeout = self.cfg.election_timeout_ms;
        if self.role == Role::Leader {
            if !self.cfg.bugs.no_check_quorum && !self.has_recent_quorum() {
                // Check-quorum (Raft §6.2): a leader cut off from a majority steps down, so
                // clients are redirected instead of waiting on it.
                self.become_follower(self.term, None);
                return;
            }
            // A clock that jumped backwards must not silence heartbeats.
            if now >= self.heartbeat_due || self.heartbeat_due - now > self.cfg.heartbeat_ms {
                self.broadcast_append();
            }
        } else {
            if self.election_deadline - now > 2 * timeout {
                self.reset_election_deadline();
            }
            if now >= self.election_deadline {
                self.start_election();
            }
        }
    }

    /// Handles one message from `from`.
    pub fn step(&mut self, now: i64, from: NodeId, msg: Message) {
        self.observe_time(now);
        if from == self.cfg.id || !self.cfg.voters.contains(&from) {
            return;
        }
        match msg {
            Message::Vote {
                term,
                last_index,
                last_term,
            } => self.handle_vote(from, term, last_index, last_term),
            Message::VoteResp { term, granted } => self.handle_vote_resp(from, term, granted),
            Message::Append {
                term,
                prev_index,
                prev_term,
                entries,
                commit,
                round,
            } => self.handle_append(from, term, prev_index, prev_term, entries, commit, round),
            Message::AppendResp {
                term,
                success,
                match_index,
                hint,
                round,
            } => self.handle_append_resp(from, term, success, match_index, hint, round),
            Message::InstallSnapshot {
                term,
                snapshot,
                round,
            } => self.handle_snapshot(from, term, snapshot, round),
            Message::ReadIndex { ctx } => self.handle_read_index(from, ctx),
            Message::ReadIndexResp { ctx, index } => match index {
                Some(index) => self.ready.reads.push(ReadState { ctx, index }),
                None => self.ready.failed_reads.push(ctx),
            },
        }
    }

    /// Proposes a command (non-empty `data`). On the leader, appends it and returns its
    /// `(index, term)`: it is committed when an applied entry has that index and term.
    pub fn propose(&mut self, now: i64, data: Vec<u8>) -> Result<(u64, u64), NotLeader> {
        self.observe_time(now);
        if self.role != Role::Leader {
            return Err(NotLeader {
                leader: self.leader,
            });
        }
        Ok(self.append_local(data))
    }

    fn quorum(&self) -> usize {
        self.cfg.voters.len() / 2 + 1
    }

    fn peers(&self) -> Vec<NodeId> {
        self.cfg
            .voters
            .iter()
            .copied()
            .filter(|&v| v != self.cfg.id)
            .collect()
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        self.ready.messages.push((to, msg));
    }

    fn persist_hard_state(&mut self) {
        self.ready.hard_state = Some(self.hard_state());
    }

    /// Records entries to persist, merging with a preceding append op.
    fn persist_entries(&mut self, entries: Vec<Entry>) {
        if entries.is_empty() {
            return;
        }
        if let Some(StorageOp::Append(prev)) = self.ready.storage.last_mut() {
            prev.extend(entries);
        } else {
            self.ready.storage.push(StorageOp::Append(entries));
        }
    }

    /// Takes the time of an input. A clock seen moving backwards would stretch every
    /// interval measured on it, so the lease and the check-quorum window are moved back by
    /// the jump and keep their length in real time (the node ticks every few
    /// milliseconds, so a jump is seen within one tick; the drift margin covers that).
    /// The `lease_no_margin` bug leaves them stretched.
    fn observe_time(&mut self, now: i64) {
        if now < self.now && !self.cfg.bugs.lease_no_margin {
            let back = self.now - now;
            if self.lease_until != i64::MIN {
                self.lease_until = self.lease_until.saturating_sub(back);
            }
            for progress in self.progress.values_mut() {
                progress.last_ack = progress.last_ack.saturating_sub(back);
            }
            for sent in self.round_sent.values_mut() {
                *sent = sent.saturating_sub(back);
            }
        }
        self.now = now;
    }

    fn reset_election_deadline(&mut self) {
        let t = self.cfg.election_timeout_ms.max(1);
        self.election_deadline = self.now + self.rng.gen_range(t..2 * t);
    }
}
