//! One shard group member: a thread that drives a [`RaftCore`] with real time, real
//! storage and the network, and answers clients.
//!
//! The loop, every few milliseconds or when an event arrives: feed the core every queued
//! event (peer messages, client requests) and a tick; take its `Ready`; persist it
//! (fsync); only then send its messages, apply committed entries and answer the clients
//! whose requests completed. Batching many events per fsync is what makes it fast enough.

use crate::config::ReadMode;
use crate::core::{Apply, Config, Message, NodeId, RaftCore, Role};
use crate::peer::PeerNet;
use crate::state::{Command, KvState, Outcome};
use crate::storage::{Storage, StorageError};
use serde::Serialize;
use serde_json::{json, Value};
use splitbrain_target_runtime::turns::{run_turns, TurnLimits, TurnTaker};
use splitbrain_target_runtime::OffsetClock;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Compact the log after this many applied entries.
const SNAPSHOT_EVERY: u64 = 1000;
/// A turn (one fsync each): up to 5 ms idle (the timers' precision), at most 1024 events.
const LIMITS: TurnLimits = TurnLimits {
    tick: Duration::from_millis(5),
    max_batch: 1024,
};

/// A client operation, already validated.
#[derive(Clone, Debug)]
pub struct ClientOp {
    /// `read`, `write`, `cas` or `append`.
    pub f: String,
    /// The key.
    pub key: String,
    /// The value (for cas: `[expected, new]`).
    pub value: Value,
}

/// Input of a shard thread.
#[derive(Debug)]
pub enum ShardEvent {
    /// A message from a peer's member of this group.
    Peer {
        /// Sender.
        from: NodeId,
        /// The message.
        msg: Message,
    },
    /// A client request; the JSON answer goes to `reply`.
    Client {
        /// The operation.
        op: ClientOp,
        /// Where to send the answer body.
        reply: oneshot::Sender<Value>,
    },
}

/// What `/status` reports for one shard.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ShardStatus {
    /// Shard number.
    pub shard: u32,
    /// Replica node ids.
    pub replicas: Vec<NodeId>,
    /// This node's role, `null` if not a replica.
    pub role: Option<Role>,
    /// Known leader.
    pub leader: Option<NodeId>,
    /// Current term.
    pub term: u64,
    /// Commit index.
    pub commit_index: u64,
    /// Applied index.
    pub applied_index: u64,
}

/// The handle other tasks use to reach a shard thread.
#[derive(Clone, Debug)]
pub struct ShardHandle {
    /// Event queue of the thread.
    pub tx: Sender<ShardEvent>,
    /// Latest status, refreshed every loop turn.
    pub status: Arc<Mutex<ShardStatus>>,
}

/// Everything a shard member needs to start.
pub struct ShardSettings {
    /// Shard number.
    pub shard: u32,
    /// Core configuration (id, voters, timing, core bugs).
    pub core: Config,
    /// The shard's own data directory.
    pub data_dir: PathBuf,
    /// Read mode.
    pub read_mode: ReadMode,
    /// `stale-read` bug.
    pub stale_read: bool,
    /// `ack-before-commit` bug.
    pub ack_before_commit: bool,
    /// `no-fsync` bug.
    pub no_fsync: bool,
    /// How long clients wait.
    pub request_timeout: Duration,
    /// The node's clock.
    pub clock: OffsetClock,
    /// Outbound peer traffic.
    pub net: PeerNet,
}

/// Opens the shard's storage, restores its state and starts its thread.
pub fn spawn_shard(settings: ShardSettings) -> Result<ShardHandle, StorageError> {
    let (storage, persisted) = Storage::open(&settings.data_dir, settings.no_fsync)?;
    let state = match &persisted.snapshot {
        Some(s) => KvState::from_bytes(&s.data).map_err(|e| StorageError::Corrupt {
            path: settings.data_dir.join("snapshot.json"),
            detail: e.to_string(),
        })?,
        None => KvState::default(),
    };
    let now = settings.clock.now_ms();
    let replicas = settings.core.voters.clone();
    let core = RaftCore::new(settings.core.clone(), persisted, now);
    let status = Arc::new(Mutex::new(ShardStatus {
        shard: settings.shard,
        replicas,
        role: Some(Role::Follower),
        ..ShardStatus::default()
    }));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut runner = Runner {
        core,
        storage,
        state,
        rx,
        writes: BTreeMap::new(),
        reads: BTreeMap::new(),
        next_ctx: 1,
        status: status.clone(),
        settings,
        violations_logged: 0,
    };
    std::thread::Builder::new()
        .name(format!("shard-{}", runner.settings.shard))
        .spawn(move || run_turns(&mut runner, LIMITS))
        .map_err(|e| StorageError::Io {
            path: PathBuf::from("<thread>"),
            source: e,
        })?;
    Ok(ShardHandle { tx, status })
}

struct WriteWaiter {
    term: u64,
    reply: oneshot::Sender<Value>,
    deadline: Instant,
    /// `ack-before-commit`: answer as soon as the entry is persisted locally.
    early: bool,
}

struct ReadWaiter {
    key: String,
    reply: oneshot::Sender<Value>,
    deadline: Instant,
    /// Known once leadership is confirmed: serve when applied reaches it.
    index: Option<u64>,
}

struct Runner {
    core: RaftCore,
    storage: Storage,
    state: KvState,
    rx: Receiver<ShardEvent>,
    writes: BTreeMap<u64, WriteWaiter>,
    reads: BTreeMap<u64, ReadWaiter>,
    next_ctx: u64,
    status: Arc<Mutex<ShardStatus>>,
    settings: ShardSettings,
    violations_logged: u64,
}

fn not_leader(leader: Option<NodeId>) -> Value {
    json!({"type": "fail", "error": "not-leader", "leader": leader})
}

impl TurnTaker for Runner {
    type Event = ShardEvent;

    fn inbound(&self) -> &Receiver<ShardEvent> {
        &self.rx
    }

    fn end_turn(&mut self) {
        self.core.tick(self.settings.clock.now_ms());
        if self.core.violations() > self.violations_logged {
            // Only reachable with a bug on: make it visible in the node's log.
            self.violations_logged = self.core.violations();
            eprintln!(
                "splitbrain-kv: shard {}: SAFETY VIOLATION: asked to overwrite a committed entry ({} so far, term {})",
                self.settings.shard,
                self.violations_logged,
                self.core.term()
            );
        }
        // A bounded number of rounds: applying can trigger compaction, which needs
        // one more persist.
        for _ in 0..4 {
            if !self.process_ready() {
                break;
            }
        }
        if let Err(e) = self.storage.maybe_flush() {
            fatal(&e);
        }
        self.expire();
        self.publish_status();
    }

    fn handle(&mut self, ev: ShardEvent) {
        let now = self.settings.clock.now_ms();
        match ev {
            ShardEvent::Peer { from, msg } => self.core.step(now, from, msg),
            ShardEvent::Client { op, reply } => self.client(now, op, reply),
        }
    }
}

impl Runner {
    fn client(&mut self, now: i64, op: ClientOp, reply: oneshot::Sender<Value>) {
        let deadline = Instant::now() + self.settings.request_timeout;
        let cmd = match op.f.as_str() {
            "read" => return self.read(now, op.key, reply, deadline),
            "write" => Command::Write {
                key: op.key,
                value: op.value,
            },
            "append" => Command::Append {
                key: op.key,
                value: op.value,
            },
            _ => {
                // cas: validated by the HTTP layer as a two-element array.
                let mut pair = match op.value {
                    Value::Array(a) => a.into_iter(),
                    _ => Vec::new().into_iter(),
                };
                Command::Cas {
                    key: op.key,
                    expected: pair.next().unwrap_or(Value::Null),
                    new: pair.next().unwrap_or(Value::Null),
                }
            }
        };
        self.propose(now, cmd, reply, deadline, self.settings.ack_before_commit);
    }

    fn propose(
        &mut self,
        now: i64,
        cmd: Command,
        reply: oneshot::Sender<Value>,
        deadline: Instant,
        early: bool,
    ) {
        let data = serde_json::to_vec(&cmd).unwrap_or_default();
        match self.core.propose(now, data) {
            Err(e) => {
                let _ = reply.send(not_leader(e.leader));
            }
            Ok((index, term)) => {
                self.writes.insert(
                    index,
                    WriteWaiter {
                        term,
                        reply,
                        deadline,
                        early,
                    },
                );
            }
        }
    }

    fn read(&mut self, now: i64, key: String, reply: oneshot::Sender<Value>, deadline: Instant) {
        let mode = self.settings.read_mode;
        let leader = self.core.role() == Role::Leader;
        if mode == ReadMode::Follower || (self.settings.stale_read && leader) {
            let _ = reply.send(json!({"type": "ok", "value": self.state.get(&key)}));
            return;
        }
        if mode == ReadMode::Log {
            return self.propose(now, Command::Read { key }, reply, deadline, false);
        }
        if mode == ReadMode::Lease {
            if let Some(index) = self.core.lease_read(now) {
                let ctx = self.ctx();
                self.await_read(ctx, key, reply, deadline, Some(index));
                return;
            }
        }
        if !mode.any_replica() && !leader {
            let _ = reply.send(not_leader(self.core.leader()));
            return;
        }
        let ctx = self.ctx();
        match self.core.read_index(now, ctx) {
            Err(e) => {
                let _ = reply.send(not_leader(e.leader));
            }
            Ok(()) => self.await_read(ctx, key, reply, deadline, None),
        }
    }

    fn ctx(&mut self) -> u64 {
        self.next_ctx += 1;
        self.next_ctx
    }

    /// Parks a read under `ctx` until its index is known (if not already) and applied.
    fn await_read(
        &mut self,
        ctx: u64,
        key: String,
        reply: oneshot::Sender<Value>,
        deadline: Instant,
        index: Option<u64>,
    ) {
        let waiter = ReadWaiter {
            key,
            reply,
            deadline,
            index,
        };
        self.reads.insert(ctx, waiter);
    }

    /// Persists, sends, applies and answers; false if there was nothing to do.
    fn process_ready(&mut self) -> bool {
        let ready = self.core.take_ready();
        if ready.is_empty() {
            return false;
        }
        if let Err(e) = self.storage.persist(ready.hard_state, &ready.storage) {
            fatal(&e);
        }
        for (to, msg) in ready.messages {
            self.settings.net.send(to, self.settings.shard, &msg);
        }
        // ack-before-commit: persisted locally is enough for this buggy leader.
        let early: Vec<u64> = self
            .writes
            .iter()
            .filter(|(_, w)| w.early)
            .map(|(&i, _)| i)
            .collect();
        for index in early {
            if let Some(w) = self.writes.remove(&index) {
                let _ = w.reply.send(json!({"type": "ok"}));
            }
        }
        for item in ready.apply {
            match item {
                Apply::Entry(entry) => self.apply_entry(entry.index, entry.term, &entry.data),
                Apply::Snapshot(snapshot) => {
                    match KvState::from_bytes(&snapshot.data) {
                        Ok(state) => self.state = state,
                        Err(e) => fatal(&e),
                    }
                    // Our proposals below the snapshot point: their fate is unknown here.
                    let covered: Vec<u64> = self
                        .writes
                        .range(..=snapshot.index)
                        .map(|(&i, _)| i)
                        .collect();
                    for index in covered {
                        if let Some(w) = self.writes.remove(&index) {
                            let _ = w
                                .reply
                                .send(json!({"type": "info", "error": "leadership-lost"}));
                        }
                    }
                }
            }
        }
        for read in ready.reads {
            if let Some(w) = self.reads.get_mut(&read.ctx) {
                w.index = Some(read.index);
            }
        }
        for ctx in ready.failed_reads {
            if let Some(w) = self.reads.remove(&ctx) {
                let _ = w.reply.send(not_leader(self.core.leader()));
            }
        }
        self.serve_reads();
        let applied = self.core.applied_index();
        if applied >= self.core.log().snap_index() + SNAPSHOT_EVERY {
            self.core.compact(applied, self.state.to_bytes());
        }
        true
    }

    fn apply_entry(&mut self, index: u64, term: u64, data: &[u8]) {
        let outcome = if data.is_empty() {
            None // a leader's no-op
        } else {
            match serde_json::from_slice::<Command>(data) {
                Ok(cmd) => Some(self.state.apply(cmd)),
                Err(e) => fatal(&e),
            }
        };
        let Some(waiter) = self.writes.remove(&index) else {
            return;
        };
        let body = match (waiter.term == term, outcome) {
            (false, _) | (true, None) => json!({"type": "info", "error": "leadership-lost"}),
            (true, Some(Outcome::Ok(None))) => json!({"type": "ok"}),
            (true, Some(Outcome::Ok(Some(value)))) => json!({"type": "ok", "value": value}),
            (true, Some(Outcome::Fail(error))) => json!({"type": "fail", "error": error}),
        };
        let _ = waiter.reply.send(body);
    }

    fn serve_reads(&mut self) {
        let applied = self.core.applied_index();
        let ready: Vec<u64> = self
            .reads
            .iter()
            .filter(|(_, r)| r.index.is_some_and(|i| i <= applied))
            .map(|(&c, _)| c)
            .collect();
        for ctx in ready {
            if let Some(r) = self.reads.remove(&ctx) {
                let _ = r
                    .reply
                    .send(json!({"type": "ok", "value": self.state.get(&r.key)}));
            }
        }
    }

    /// Answers requests past their deadline: writes are of unknown outcome, reads simply
    /// did not happen.
    fn expire(&mut self) {
        let now = Instant::now();
        for w in drain_expired(&mut self.writes, now, |w| w.deadline) {
            let _ = w.reply.send(json!({"type": "info", "error": "timeout"}));
        }
        for r in drain_expired(&mut self.reads, now, |r| r.deadline) {
            let _ = r.reply.send(json!({"type": "fail", "error": "timeout"}));
        }
    }

    fn publish_status(&self) {
        if let Ok(mut s) = self.status.lock() {
            s.role = Some(self.core.role());
            s.leader = self.core.leader();
            s.term = self.core.term();
            s.commit_index = self.core.commit_index();
            s.applied_index = self.core.applied_index();
        }
    }
}

/// Storage or state-machine corruption: continuing could break safety, so stop.
fn fatal(e: &dyn std::fmt::Display) -> ! {
    eprintln!("splitbrain-kv: fatal: {e}");
    std::process::exit(70);
}

/// Removes and returns the waiters whose deadline has passed.
fn drain_expired<W>(
    waiters: &mut BTreeMap<u64, W>,
    now: Instant,
    deadline: impl Fn(&W) -> Instant,
) -> Vec<W> {
    let late: Vec<u64> = waiters
        .iter()
        .filter(|(_, w)| deadline(w) <= now)
        .map(|(&k, _)| k)
        .collect();
    late.into_iter()
        .filter_map(|k| waiters.remove(&k))
        .collect()
}
