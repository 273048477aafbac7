//! The protocol as a sans-IO state machine: messages, client requests and time go in;
//! WAL records, messages and client replies come out ([`Output`]).
//!
//! One [`Core`] is one node. It plays two roles at once:
//!
//! - **participant** (`participant.rs`): owns the keys that hash to this node, runs
//!   their lock table, buffers each txn's writes in a workspace, prepares, applies on
//!   commit, and resolves in-doubt txns by asking their coordinator;
//! - **coordinator** (`coordinator.rs`): runs the txns its clients send, op by op at each
//!   key's owner, then two-phase commit with presumed abort.
//!
//! Messages a node sends to itself are delivered inside the same call, through the same
//! code. The driver must execute outputs in order with one rule: a `Log` record with
//! `force` is on disk (fsync) before any later `Send` or `Reply` leaves the node.

mod coordinator;
mod participant;
#[cfg(test)]
mod tests;

use crate::locks::LockTable;
use crate::types::{Key, Message, NodeId, Record, TxnId, TxnReply, Val, Write};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub use coordinator::CoordTxn;
pub use participant::{PartState, PartTxn};

/// Most self-addressed messages handled in one call (a guard; real chains are short).
const MAX_LOCAL: usize = 100_000;

/// The isolation level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Strict two-phase locking: reads take shared locks held to commit.
    Serializable,
    /// Reads take no locks and see the last committed value (plus own writes).
    ReadCommitted,
}

impl Isolation {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Serializable => "serializable",
            Isolation::ReadCommitted => "read-committed",
        }
    }
}

/// The deliberate bugs (all off by default). See the crate README's bug table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bugs {
    /// Reads ignore locks and see the latest pending (uncommitted) write.
    pub dirty_read: bool,
    /// A participant releases its locks when it votes yes.
    pub early_lock_release: bool,
    /// A prepared participant that hears nothing aborts on its own.
    pub unilateral_abort: bool,
    /// Participant records are not forced to disk.
    pub no_prepare_fsync: bool,
}

/// Static settings of a core. Times are milliseconds on the node's clock.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// This node.
    pub id: NodeId,
    /// Cluster size; ids are `1..=nodes`.
    pub nodes: u64,
    /// Isolation level.
    pub isolation: Isolation,
    /// Bugs turned on.
    pub bugs: Bugs,
    /// A coordinator aborts a txn with no decision after this long.
    pub request_timeout_ms: i64,
    /// Longest wait for a lock before the op is refused.
    pub lock_wait_ms: i64,
    /// A prepared participant without a decision starts asking after this long.
    pub in_doubt_timeout_ms: i64,
    /// Resend period for unanswered Exec / Prepare / Commit messages.
    pub resend_ms: i64,
}

impl CoreConfig {
    /// Defaults matching the command line: 1500 / 300 / 1000 ms, resend every 100 ms.
    pub fn new(id: NodeId, nodes: u64) -> Self {
        CoreConfig {
            id,
            nodes,
            isolation: Isolation::Serializable,
            bugs: Bugs::default(),
            request_timeout_ms: 1500,
            lock_wait_ms: 300,
            in_doubt_timeout_ms: 1000,
            resend_ms: 100,
        }
    }

    /// An un-prepared participant txn idle this long is aborted (its coordinator has
    /// certainly given up, or its Abort was lost).
    fn idle_abort_ms(&self) -> i64 {
        2 * self.request_timeout_ms.max(1) + self.lock_wait_ms
    }
}

/// What the driver must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Append a record to the WAL; with `force`, fsync it before later sends/replies.
    Log {
        /// The record.
        record: Record,
        /// Must be durable before anything that follows leaves the node.
        force: bool,
    },
    /// Send a message to another node.
    Send {
        /// Destination.
        to: NodeId,
        /// The message.
        msg: Message,
    },
    /// Answer client request `req`.
    Reply {
        /// The request id the driver gave [`Core::client_txn`].
        req: u64,
        /// The answer.
        reply: TxnReply,
    },
}

/// Counters for `/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// (key, txn) locks held.
    pub locks: usize,
    /// Prepared participant txns awaiting a decision.
    pub in_doubt: usize,
    /// Txns this node coordinates that are not finished (including commits not yet acked).
    pub active: usize,
}

/// One node's protocol state.
#[derive(Debug)]
pub struct Core {
    cfg: CoreConfig,
    boot: u64,
    next_seq: u64,
    /// Committed values of the keys this node owns.
    store: BTreeMap<Key, Val>,
    locks: LockTable,
    parts: BTreeMap<TxnId, PartTxn>,
    /// Participant txns applied or aborted here since boot (late Execs are refused).
    finished: BTreeSet<TxnId>,
    /// `dirty-read` bug: the latest buffered write per key.
    pending_writes: BTreeMap<Key, (TxnId, Val)>,
    coords: BTreeMap<TxnId, CoordTxn>,
    /// Committed txns whose participants have not all acknowledged: waiting set, next resend.
    committing: BTreeMap<TxnId, (BTreeSet<NodeId>, i64)>,
    /// Every txn this node decided to commit (answers in-doubt queries).
    committed: BTreeSet<TxnId>,
    last_heard: BTreeMap<NodeId, i64>,
    local: VecDeque<Message>,
    outputs: Vec<Output>,
}

impl Core {
    /// Starts a node from its replayed WAL (empty for a fresh node). Emits a forced `Boot`
    /// record: the boot counter keeps txn ids unique across restarts.
    pub fn new(cfg: CoreConfig, wal: &[Record], now: i64) -> Core {
        let mut core = Core {
            boot: 1,
            next_seq: 1,
            store: BTreeMap::new(),
            locks: LockTable::new(),
            parts: BTreeMap::new(),
            finished: BTreeSet::new(),
            pending_writes: BTreeMap::new(),
            coords: BTreeMap::new(),
            committing: BTreeMap::new(),
            committed: BTreeSet::new(),
            last_heard: BTreeMap::new(),
            local: VecDeque::new(),
            outputs: Vec::new(),
            cfg,
        };
        core.recover(wal, now);
        core.outputs.push(Output::Log {
            record: Record::Boot,
            force: true,
        });
        core
    }

    fn recover(&mut self, wal: &[Record], now: i64) {
        let mut prepared: BTreeMap<TxnId, (NodeId, Vec<(Key, Write)>)> = BTreeMap::new();
        for record in wal {
            match record {
                Record::Boot => self.boot += 1,
                Record::Prepared { txn, coord, writes } => {
                    prepared.insert(*txn, (*coord, writes.clone()));
                }
                Record::Applied { txn } => {
                    if let Some((_, writes)) = prepared.remove(txn) {
                        self.install(&writes);
                    }
                }
                Record::Aborted { txn } => {
                    prepared.remove(txn);
                }
                Record::Committed { txn, participants } => {
                    self.committed.insert(*txn);
                    let waiting = participants.iter().copied().collect();
                    self.committing.insert(*txn, (waiting, now));
                }
                Record::End { txn } => {
                    self.committing.remove(txn);
                }
            }
        }
        // Prepared without an outcome: in doubt. Re-take the write locks and ask.
        for (txn, (coord, writes)) in prepared {
            self.restore_prepared(txn, coord, writes, now);
        }
    }

    /// Applies logged writes to the committed store (at commit and in replay alike).
    fn install(&mut self, writes: &[(Key, Write)]) {
        for (key, write) in writes {
            let value = write.apply(self.store.get(key));
            self.store.insert(key.clone(), value);
        }
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.cfg.id
    }

    /// The boot counter (1 for a fresh node).
    pub fn boot(&self) -> u64 {
        self.boot
    }

    /// The settings.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// The committed value of an owned key (for tests and inspection).
    pub fn committed_value(&self, key: &Key) -> Option<&Val> {
        self.store.get(key)
    }

    /// All committed values this node owns.
    pub fn store(&self) -> &BTreeMap<Key, Val> {
        &self.store
    }

    /// Counters for `/status`.
    pub fn status(&self) -> Status {
        Status {
            locks: self.locks.held_count(),
            in_doubt: self
                .parts
                .values()
                .filter(|p| matches!(p.state, PartState::Prepared { .. }))
                .count(),
            active: self.coords.len() + self.committing.len(),
        }
    }

    /// True if nothing is in flight: no coordinated txn, no unacked commit, no
    /// participant txn.
    pub fn is_quiet(&self) -> bool {
        self.coords.is_empty() && self.committing.is_empty() && self.parts.is_empty()
    }

    /// Takes the outputs produced so far.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outputs)
    }

    /// A message from node `from`.
    pub fn receive(&mut self, from: NodeId, msg: Message, now: i64) {
        self.last_heard.insert(from, now);
        self.dispatch(from, msg, now);
        self.drain_local(now);
    }

    /// Time passes: lock waits expire, in-doubt txns ask, timeouts abort, resends go out.
    pub fn tick(&mut self, now: i64) {
        self.participant_tick(now);
        self.coordinator_tick(now);
        self.drain_local(now);
    }

    fn dispatch(&mut self, from: NodeId, msg: Message, now: i64) {
        match msg {
            Message::Exec { txn, idx, seen, op } => self.on_exec(from, txn, idx, seen, op, now),
            Message::Prepare { txn, ops } => self.on_prepare(from, txn, ops, now),
            Message::Commit { txn } => self.on_commit(from, txn, true),
            Message::Abort { txn } => self.abort_local(txn),
            Message::Decision { txn, commit } => {
                if commit {
                    self.on_commit(from, txn, false);
                } else {
                    self.abort_local(txn);
                }
            }
            Message::ExecReply { txn, idx, result } => {
                self.on_exec_reply(from, txn, idx, result, now)
            }
            Message::Vote { txn, yes } => self.on_vote(from, txn, yes, now),
            Message::CommitAck { txn } => self.on_commit_ack(from, txn),
            Message::Query { txn } => self.on_query(from, txn),
        }
    }

    fn send(&mut self, to: NodeId, msg: Message) {
        if to == self.cfg.id {
            self.local.push_back(msg);
        } else {
            self.outputs.push(Output::Send { to, msg });
        }
    }

    fn log(&mut self, record: Record, force: bool) {
        self.outputs.push(Output::Log { record, force });
    }

    fn drain_local(&mut self, now: i64) {
        for _ in 0..MAX_LOCAL {
            let Some(msg) = self.local.pop_front() else {
                return;
            };
            self.dispatch(self.cfg.id, msg, now);
        }
    }
}
