//! The data model shared by the core, the shell and the tests: write ids, writes, version
//! vectors, sessions, anti-entropy messages and log records.

use crate::db::Db;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A replica id, `1..=N`.
pub type ReplicaId = u64;

/// A write's identity: its accept stamp and the replica that accepted it. Tentative writes
/// are ordered by this pair (stamp first), as in Bayou (SOSP'95 §5).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct Wid {
    /// Accept stamp (the accepting replica's Lamport clock when it accepted the write).
    pub stamp: u64,
    /// The accepting replica.
    pub replica: ReplicaId,
}

/// What a write does to its key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Op {
    /// Add an element to a set.
    Add {
        /// The element.
        element: i64,
    },
    /// Add a non-negative delta to a counter.
    Incr {
        /// The delta (>= 0).
        delta: i64,
    },
    /// Reserve a room and slot: the first alternative no earlier write holds (Bayou's
    /// dependency check and merge procedure, SOSP'95 §4), or rejected if all are taken.
    Book {
        /// Reservation id (unique per workload).
        id: i64,
        /// `[room, slot]` pairs in preference order.
        alternatives: Vec<(i64, i64)>,
    },
}

/// The type of object a key holds, fixed by its first write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A set of integers.
    Set,
    /// A counter.
    Counter,
    /// A meeting-room schedule.
    Schedule,
}

impl Op {
    /// The object type this op applies to.
    pub fn kind(&self) -> Kind {
        match self {
            Op::Add { .. } => Kind::Set,
            Op::Incr { .. } => Kind::Counter,
            Op::Book { .. } => Kind::Schedule,
        }
    }
}

/// One write as it travels and is logged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    /// Accept stamp and replica.
    pub wid: Wid,
    /// The key written.
    pub key: String,
    /// What it does.
    pub op: Op,
}

/// A version vector: replica -> highest accept stamp from it held here. Absent = 0.
/// In JSON the replica ids are strings (`{"1":12,"3":7}`).
pub type Vv = BTreeMap<ReplicaId, u64>;

/// `vv[r]`, 0 when absent.
pub fn vv_get(vv: &Vv, r: ReplicaId) -> u64 {
    vv.get(&r).copied().unwrap_or(0)
}

/// True if `a <= b` component-wise (b has seen everything a has).
pub fn vv_le(a: &Vv, b: &Vv) -> bool {
    a.iter().all(|(r, s)| *s <= vv_get(b, *r))
}

/// Raises `vv[r]` to at least `stamp`.
pub fn vv_raise(vv: &mut Vv, r: ReplicaId, stamp: u64) {
    let e = vv.entry(r).or_insert(0);
    *e = (*e).max(stamp);
}

/// A client session (Terry et al., PDIS 1994): the writes it has seen (`read`) and made
/// (`write`), as version vectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Everything the session's reads have seen.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub read: Vv,
    /// Everything the session has written.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub write: Vv,
}

/// An absent vector may also be sent as `null`.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vv, D::Error> {
    Ok(Option::<Vv>::deserialize(d)?.unwrap_or_default())
}

/// A commit sequence number: position in the final (committed) order, from 1.
pub type Csn = u64;

/// The committed prefix truncated out of the log (Petersen et al., SOSP'97 §4): the
/// database after the first `csn` committed writes, and which writes those are.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Number of committed writes folded in.
    pub csn: Csn,
    /// The "omitted" vector O: per replica, the highest stamp folded in. Every write
    /// `w` with `w.stamp <= O[w.replica]` is in the checkpoint.
    pub omitted: Vv,
    /// Highest Lamport clock seen when it was taken.
    pub clock: u64,
    /// The committed database.
    pub db: Db,
}

/// What one side of anti-entropy sends the other: the writes and commit knowledge the
/// other lacks (SOSP'97 §3), or the checkpoint when the other is behind the truncated log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// Per replica, the stamp after which `writes` holds every write the sender has.
    pub from: Vv,
    /// Sent when the receiver is behind the sender's truncated log.
    pub checkpoint: Option<Checkpoint>,
    /// Writes the receiver lacks, in (stamp, replica) order, each with its CSN if the
    /// sender knows it committed.
    pub writes: Vec<(Write, Option<Csn>)>,
    /// Commit knowledge the receiver lacks: (CSN, write) in CSN order.
    pub commits: Vec<(Csn, Wid)>,
}

/// A message between replicas (anti-entropy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    /// Opens a session: "this is what I hold, send me what I lack and your vector".
    Hello {
        /// Sender's version vector.
        vv: Vv,
        /// Sender's committed count.
        csn: Csn,
    },
    /// What the receiver lacks. With `vv`/`csn`, the sender's state, so the receiver
    /// pushes back what the sender lacks (two-way anti-entropy).
    Push {
        /// The payload.
        batch: Batch,
        /// Sender's state when a push back is wanted.
        back: Option<(Vv, Csn)>,
    },
}

/// One line of the append-only log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// A write entered the log (tentative until a `Commit` names it).
    Write(Write),
    /// The primary gave `wid` commit sequence number `csn`.
    Commit {
        /// Its CSN.
        csn: Csn,
        /// The write.
        wid: Wid,
    },
    /// `lose-tentative` only: the stamp of a write held but not logged. The version vector
    /// survives a restart, the write does not, so peers never send it again.
    Seen(Wid),
}
