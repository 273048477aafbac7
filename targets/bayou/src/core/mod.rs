//! One Bayou replica as a sans-IO state machine: client requests, anti-entropy messages
//! and time go in; log records, checkpoints, messages and client replies come out
//! ([`Effect`]).
//!
//! State (Terry et al., SOSP'95 §5; Petersen et al., SOSP'97 §3-4):
//!
//! - the write log: the committed writes in CSN order (after the checkpoint that holds the
//!   truncated committed prefix), then the tentative writes in (accept stamp, replica)
//!   order;
//! - the version vector (highest stamp held per replica) and a Lamport clock, advanced on
//!   every write received, that stamps the writes this replica accepts;
//! - the database: the committed database (checkpoint + committed writes, maintained as
//!   they commit), and for a read the key's tentative writes replayed on top of it in
//!   order — so a write that sorts before applied ones is a rollback to the committed state
//!   and a replay, by construction.
//!
//! The driver executes effects in order with one rule: every `Append`/`Checkpoint` of a
//! call is durable (fsync) before any `Send` or `Reply` of that call leaves the replica
//! (`Note`s are written but not waited for).

mod sync;
#[cfg(test)]
mod tests;

use crate::db::{Db, Object};
use crate::types::{
    vv_get, vv_le, vv_raise, Checkpoint, Csn, Kind, Message, Op, Record, ReplicaId, Session, Vv,
    Wid, Write,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The deliberate bugs (all off by default). See the crate README's bug table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bugs {
    /// Apply writes in arrival order and never roll back.
    pub no_rollback: bool,
    /// Tentative writes are not persisted (acknowledged before any fsync).
    pub lose_tentative: bool,
    /// A restarted primary forgets its CSN assignments and commits again, in reverse.
    pub reorder_commit: bool,
    /// Anti-entropy sends no commit knowledge for writes the peer already holds.
    pub stale_commit_sync: bool,
    /// Session vectors are ignored.
    pub stale_session: bool,
}

/// Static settings of a replica. Times are milliseconds on the replica's clock.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// This replica.
    pub id: ReplicaId,
    /// Group size; ids are `1..=nodes`.
    pub nodes: u64,
    /// The replica that assigns CSNs.
    pub primary: ReplicaId,
    /// Bugs turned on.
    pub bugs: Bugs,
    /// Period of anti-entropy rounds.
    pub anti_entropy_ms: i64,
    /// Longest wait for a session's vectors to be covered before `session-behind`.
    pub session_wait_ms: i64,
    /// Fold the committed prefix into a checkpoint every this many commits, keeping this
    /// many committed writes in the log.
    pub checkpoint_every: u64,
    /// Most writes (and commits) in one anti-entropy batch.
    pub max_batch: usize,
}

impl CoreConfig {
    /// Defaults matching the command line: primary 1, anti-entropy every 100 ms, session
    /// wait 300 ms, checkpoint every 500 commits, batches of at most 2000 writes.
    pub fn new(id: ReplicaId, nodes: u64) -> Self {
        CoreConfig {
            id,
            nodes,
            primary: 1,
            bugs: Bugs::default(),
            anti_entropy_ms: 100,
            session_wait_ms: 300,
            checkpoint_every: 500,
            max_batch: 2000,
        }
    }
}

/// A client request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Read one key; `kind` (optional) says what an unwritten key reads as.
    Read {
        /// The key.
        key: String,
        /// Expected type, for the empty value of a key never written.
        kind: Option<Kind>,
        /// The client's session.
        session: Session,
    },
    /// Write one key.
    Write {
        /// The key.
        key: String,
        /// The op.
        op: Op,
        /// The client's session.
        session: Session,
    },
}

impl Request {
    fn session(&self) -> &Session {
        match self {
            Request::Read { session, .. } | Request::Write { session, .. } => session,
        }
    }
}

/// The answer to a client request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// The write was accepted (and is durable unless `lose-tentative`).
    Written {
        /// Its stamp and replica.
        wid: Wid,
        /// This replica's vector after accepting it.
        vv: Vv,
    },
    /// A read's value.
    Read {
        /// The READ value of the contract.
        value: Value,
        /// This replica's vector.
        vv: Vv,
    },
    /// Certainly not done: `session-behind` or `wrong-type`.
    Fail {
        /// The error name.
        error: String,
    },
}

impl Reply {
    /// The JSON answer of the HTTP API.
    pub fn to_json(&self) -> Value {
        match self {
            Reply::Written { wid, vv } => {
                json!({"type": "ok", "stamp": wid.stamp, "replica": wid.replica, "vv": vv})
            }
            Reply::Read { value, vv } => json!({"type": "ok", "value": value, "vv": vv}),
            Reply::Fail { error } => json!({"type": "fail", "error": error}),
        }
    }
}

/// What the driver must do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Append a record to the log.
    Append(Record),
    /// Append a record to the log without waiting for it to be durable: a process kill
    /// keeps it (it reached the OS), an OS crash may not (`lose-tentative`'s metadata).
    Note(Record),
    /// Atomically replace the checkpoint, then the log with these records.
    Checkpoint {
        /// The new checkpoint.
        checkpoint: Checkpoint,
        /// The whole log after it.
        log: Vec<Record>,
    },
    /// Send a message to another replica.
    Send {
        /// Destination.
        to: ReplicaId,
        /// The message.
        msg: Message,
    },
    /// Answer client request `req`.
    Reply {
        /// The id the driver gave [`Core::client`].
        req: u64,
        /// The answer.
        reply: Reply,
    },
}

/// Counters for `/status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Version vector.
    pub vv: Vv,
    /// Committed writes known here.
    pub csn: Csn,
    /// Writes in the log (committed after the checkpoint, and tentative).
    pub log_len: usize,
    /// Tentative writes.
    pub tentative: usize,
    /// Committed writes folded into the checkpoint.
    pub checkpoint_csn: Csn,
    /// Lamport clock.
    pub clock: u64,
}

struct Pending {
    req: u64,
    request: Request,
    deadline: i64,
}

/// One replica's state.
pub struct Core {
    cfg: CoreConfig,
    clock: u64,
    vv: Vv,
    ckpt: Checkpoint,
    /// Committed writes after the checkpoint; `committed[i]` has CSN `ckpt.csn + 1 + i`.
    committed: Vec<Write>,
    /// The checkpoint's database plus the committed writes, in CSN order.
    committed_db: Db,
    tentative: BTreeMap<Wid, Write>,
    /// Tentative writes per key.
    by_key: HashMap<String, BTreeSet<Wid>>,
    /// CSN of every committed write known (beyond the checkpoint, and any seen).
    csn_of: HashMap<Wid, Csn>,
    /// `no-rollback`: every write applied once, in arrival order.
    arrival_db: Db,
    /// `lose-tentative`: writes held but not in the log file.
    unlogged: HashSet<Wid>,
    pending: Vec<Pending>,
    next_round: i64,
    round_robin: u64,
    effects: Vec<Effect>,
}

impl Core {
    /// Starts a replica from its durable state (`None` and `[]` for a fresh one): the
    /// checkpoint, then the log records in file order.
    pub fn new(cfg: CoreConfig, checkpoint: Option<Checkpoint>, log: &[Record], now: i64) -> Core {
        let mut core = Core {
            clock: 0,
            vv: Vv::new(),
            ckpt: Checkpoint::default(),
            committed: Vec::new(),
            committed_db: Db::default(),
            tentative: BTreeMap::new(),
            by_key: HashMap::new(),
            csn_of: HashMap::new(),
            arrival_db: Db::default(),
            unlogged: HashSet::new(),
            pending: Vec::new(),
            next_round: now,
            round_robin: cfg.id,
            effects: Vec::new(),
            cfg,
        };
        core.recover(checkpoint, log);
        core
    }

    /// This replica's id.
    pub fn id(&self) -> ReplicaId {
        self.cfg.id
    }

    /// The settings.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// True if this replica assigns CSNs.
    pub fn is_primary(&self) -> bool {
        self.cfg.id == self.cfg.primary
    }

    /// Committed writes known here (CSN of the last one).
    pub fn csn(&self) -> Csn {
        self.ckpt.csn + self.committed.len() as u64
    }

    /// The version vector.
    pub fn vv(&self) -> &Vv {
        &self.vv
    }

    /// Counters for `/status`.
    pub fn status(&self) -> Status {
        Status {
            vv: self.vv.clone(),
            csn: self.csn(),
            log_len: self.committed.len() + self.tentative.len(),
            tentative: self.tentative.len(),
            checkpoint_csn: self.ckpt.csn,
            clock: self.clock,
        }
    }

    /// The committed writes after the checkpoint, as `(csn, wid)` in CSN order.
    pub fn committed_ids(&self) -> impl Iterator<Item = (Csn, Wid)> + '_ {
        let base = self.ckpt.csn;
        self.committed
            .iter()
            .enumerate()
            .map(move |(i, w)| (base + 1 + i as u64, w.wid))
    }

    /// The committed writes after the checkpoint, as `(csn, wid)`, then the tentative
    /// ones in order (`csn` None): this replica's log order.
    pub fn log_order(&self) -> Vec<(Option<Csn>, Wid)> {
        self.committed_ids()
            .map(|(csn, wid)| (Some(csn), wid))
            .chain(self.tentative.keys().map(|wid| (None, *wid)))
            .collect()
    }

    /// Every key with an object (committed or tentative).
    pub fn keys(&self) -> BTreeSet<String> {
        let mut keys: BTreeSet<String> = self.committed_db.keys().cloned().collect();
        keys.extend(self.arrival_db.keys().cloned());
        keys.extend(self.by_key.keys().cloned());
        keys
    }

    /// Takes the effects produced so far.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// A client request, answered now or (session not yet covered) within the session
    /// wait.
    pub fn client(&mut self, req: u64, request: Request, now: i64) {
        if self.session_ok(request.session()) {
            self.serve(req, request);
        } else if self.cfg.session_wait_ms <= 0 {
            self.fail(req, "session-behind");
        } else {
            let deadline = now + self.cfg.session_wait_ms;
            self.pending.push(Pending {
                req,
                request,
                deadline,
            });
        }
        self.settle();
    }

    /// A message from replica `from`. (`_now` is unused: anti-entropy needs no time, only
    /// the Lamport clock; it is passed like to every other input of the core.)
    pub fn receive(&mut self, from: ReplicaId, msg: Message, _now: i64) {
        match msg {
            Message::Hello { vv, csn } => {
                let batch = self.batch_for(&vv, csn);
                let back = Some((self.vv.clone(), self.csn()));
                self.send(from, Message::Push { batch, back });
            }
            Message::Push { batch, back } => {
                self.absorb(batch);
                // The primary commits what it just received before answering, so the push
                // back carries the new commit knowledge too.
                self.settle();
                if let Some((vv, csn)) = back {
                    let batch = self.batch_for(&vv, csn);
                    self.send(from, Message::Push { batch, back: None });
                }
            }
        }
        self.settle();
    }

    /// Time passes: an anti-entropy round starts when due; session waits expire.
    pub fn tick(&mut self, now: i64) {
        // A clock moved backwards must not stall anti-entropy: a round due further away
        // than one period is due now.
        let period = self.cfg.anti_entropy_ms.max(1);
        if (now >= self.next_round || self.next_round - now > period) && self.cfg.nodes > 1 {
            self.next_round = now + period;
            // Round-robin over the other replicas (SOSP'97 §3: any partner will do).
            let mut peer = self.round_robin % self.cfg.nodes + 1;
            if peer == self.cfg.id {
                peer = peer % self.cfg.nodes + 1;
            }
            self.round_robin = peer;
            let msg = Message::Hello {
                vv: self.vv.clone(),
                csn: self.csn(),
            };
            self.send(peer, msg);
        }
        // Likewise a wait whose deadline moved further away than the session wait is over.
        let wait = self.cfg.session_wait_ms;
        let (expired, waiting): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| p.deadline <= now || p.deadline - now > wait);
        self.pending = waiting;
        for p in expired {
            self.fail(p.req, "session-behind");
        }
    }

    fn session_ok(&self, s: &Session) -> bool {
        // Terry et al. 1994: read-your-writes and monotonic writes need `write <= vv`,
        // monotonic reads and writes-follow-reads need `read <= vv`.
        self.cfg.bugs.stale_session || (vv_le(&s.read, &self.vv) && vv_le(&s.write, &self.vv))
    }

    /// After any change: the primary commits, the log may be checkpointed, and waiting
    /// requests whose sessions are now covered are served.
    fn settle(&mut self) {
        if self.is_primary() {
            self.commit_tentative(false);
        }
        self.maybe_checkpoint();
        if self.pending.is_empty() {
            return;
        }
        let (ready, waiting): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| self.session_ok(p.request.session()));
        self.pending = waiting;
        for p in ready {
            self.serve(p.req, p.request);
        }
        if self.is_primary() {
            self.commit_tentative(false);
        }
    }

    fn serve(&mut self, req: u64, request: Request) {
        match request {
            Request::Read { key, kind, .. } => {
                let value = self.read_value(&key, kind);
                let vv = self.vv.clone();
                self.reply(req, Reply::Read { value, vv });
            }
            Request::Write { key, op, .. } => {
                if self.kind_of(&key).is_some_and(|k| k != op.kind()) {
                    self.fail(req, "wrong-type");
                    return;
                }
                self.clock += 1;
                let wid = Wid {
                    stamp: self.clock,
                    replica: self.cfg.id,
                };
                self.insert_tentative(Write { wid, key, op }, true);
                let vv = self.vv.clone();
                self.reply(req, Reply::Written { wid, vv });
            }
        }
    }

    /// The key's READ value as this replica sees it now.
    pub fn read_value(&self, key: &str, kind: Option<Kind>) -> Value {
        if self.cfg.bugs.no_rollback {
            let csn_of = |wid: Wid| self.csn_of.get(&wid).copied();
            return match self.arrival_db.get(key) {
                Some(o) => o.render(&csn_of, true),
                None => Object::empty_value(kind),
            };
        }
        // Roll back to the committed state of the key and replay its tentative writes.
        let mut db = self.committed_db.only(key);
        for wid in self.by_key.get(key).into_iter().flatten() {
            if let Some(w) = self.tentative.get(wid) {
                db.apply(w, None);
            }
        }
        match db.get(key) {
            Some(o) => o.render(&|_| None, false),
            None => Object::empty_value(kind),
        }
    }

    /// The type the key has in this replica's current order, if written.
    fn kind_of(&self, key: &str) -> Option<Kind> {
        let db = if self.cfg.bugs.no_rollback {
            &self.arrival_db
        } else {
            &self.committed_db
        };
        db.get(key).map(Object::kind).or_else(|| {
            let first = self.by_key.get(key)?.iter().next()?;
            self.tentative.get(first).map(|w| w.op.kind())
        })
    }

    fn reply(&mut self, req: u64, reply: Reply) {
        self.effects.push(Effect::Reply { req, reply });
    }

    fn fail(&mut self, req: u64, error: &str) {
        self.reply(
            req,
            Reply::Fail {
                error: error.into(),
            },
        );
    }

    fn send(&mut self, to: ReplicaId, msg: Message) {
        if to != self.cfg.id {
            self.effects.push(Effect::Send { to, msg });
        }
    }

    /// True if this replica holds `wid` (in the checkpoint, committed or tentative).
    fn holds(&self, wid: Wid) -> bool {
        wid.stamp <= vv_get(&self.ckpt.omitted, wid.replica)
            || self.tentative.contains_key(&wid)
            || self.csn_of.contains_key(&wid)
    }

    /// Adds a write to the tentative log (logging it unless replaying).
    fn insert_tentative(&mut self, write: Write, log: bool) {
        let wid = write.wid;
        vv_raise(&mut self.vv, wid.replica, wid.stamp);
        self.clock = self.clock.max(wid.stamp);
        self.by_key
            .entry(write.key.clone())
            .or_default()
            .insert(wid);
        if self.cfg.bugs.no_rollback {
            self.arrival_db.apply(&write, None);
        }
        if log {
            if self.cfg.bugs.lose_tentative {
                self.unlogged.insert(wid);
                self.effects.push(Effect::Note(Record::Seen(wid)));
            } else {
                self.effects
                    .push(Effect::Append(Record::Write(write.clone())));
            }
        }
        self.tentative.insert(wid, write);
    }

    /// Moves tentative `wid` to the committed log with the next CSN. False if not held
    /// tentatively.
    fn commit_one(&mut self, wid: Wid, log: bool) -> bool {
        let Some(write) = self.tentative.remove(&wid) else {
            return false;
        };
        if let Some(set) = self.by_key.get_mut(&write.key) {
            set.remove(&wid);
            if set.is_empty() {
                self.by_key.remove(&write.key);
            }
        }
        let csn = self.csn() + 1;
        self.committed_db.apply(&write, Some(csn));
        self.csn_of.insert(wid, csn);
        if log {
            if self.unlogged.remove(&wid) {
                self.effects
                    .push(Effect::Append(Record::Write(write.clone())));
            }
            self.effects
                .push(Effect::Append(Record::Commit { csn, wid }));
        }
        self.committed.push(write);
        true
    }

    /// The primary's job: every tentative write it holds gets the next CSN, in its log
    /// order (`reverse` only for the `reorder-commit` bug).
    fn commit_tentative(&mut self, reverse: bool) {
        let mut order: Vec<Wid> = self.tentative.keys().copied().collect();
        if reverse {
            order.reverse();
        }
        for wid in order {
            self.commit_one(wid, true);
        }
    }
}
