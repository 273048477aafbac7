//! The data model shared by the core, the shell and the tests: keys, values, operations,
//! transaction ids, node-to-node messages and WAL records.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use splitbrain_target_runtime::fnv1a64;

/// A node id, `1..=N`.
pub type NodeId = u64;

/// A key: an integer or a string, as the client sent it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Key {
    /// An integer key; owned by node `(k mod N) + 1`.
    Int(i64),
    /// A string key; owned by node `(FNV-1a-64(k) mod N) + 1`.
    Str(String),
}

impl Key {
    /// The node that owns this key in a cluster of `nodes` nodes.
    pub fn owner(&self, nodes: u64) -> NodeId {
        let nodes = nodes.max(1);
        match self {
            Key::Int(k) => (k.rem_euclid(nodes as i64) as u64) + 1,
            Key::Str(s) => fnv1a64(s.as_bytes()) % nodes + 1,
        }
    }

    /// The key as JSON, as the client sent it.
    pub fn to_json(&self) -> Value {
        match self {
            Key::Int(k) => json!(k),
            Key::Str(s) => json!(s),
        }
    }
}

/// A stored value: an integer register or a list of integers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Val {
    /// Set by `w` or `add`.
    Int(i64),
    /// Built by `append`.
    List(Vec<i64>),
}

impl Val {
    /// The value as JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Val::Int(v) => json!(v),
            Val::List(l) => json!(l),
        }
    }
}

/// A buffered write as the WAL records it. Lists are logged as a delta so records stay
/// small however long a list grows: under exclusive locks the committed list at apply time
/// is the one the delta was computed from, so applying it gives the txn's final value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Write {
    /// Install this value.
    Set(Val),
    /// Keep the first `keep` elements of the committed list, then append `then`.
    Extend {
        /// Elements of the committed list kept.
        keep: usize,
        /// Elements appended after them.
        then: Vec<i64>,
    },
}

impl Write {
    /// The write that turns `committed` into `target`.
    pub fn between(committed: Option<&Val>, target: &Val) -> Write {
        match (committed, target) {
            (None, Val::List(t)) => Write::Extend {
                keep: 0,
                then: t.clone(),
            },
            (Some(Val::List(c)), Val::List(t)) if t.starts_with(c) => Write::Extend {
                keep: c.len(),
                then: t[c.len()..].to_vec(),
            },
            _ => Write::Set(target.clone()),
        }
    }

    /// The value after applying this write to `committed`.
    pub fn apply(&self, committed: Option<&Val>) -> Val {
        match self {
            Write::Set(v) => v.clone(),
            Write::Extend { keep, then } => {
                let mut list = match committed {
                    Some(Val::List(l)) => l[..(*keep).min(l.len())].to_vec(),
                    _ => Vec::new(),
                };
                list.extend_from_slice(then);
                Val::List(list)
            }
        }
    }
}

/// The function of a micro-operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    /// Read the key.
    #[serde(rename = "r")]
    Read,
    /// Set the key to an integer.
    #[serde(rename = "w")]
    Write,
    /// Append an integer to the key's list.
    #[serde(rename = "append")]
    Append,
    /// Add an integer to the key's register; a negative result aborts the txn.
    #[serde(rename = "add")]
    Add,
}

impl OpKind {
    /// The client-facing name (`r`, `w`, `append`, `add`).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "r",
            OpKind::Write => "w",
            OpKind::Append => "append",
            OpKind::Add => "add",
        }
    }

    /// Parses a client-facing name.
    pub fn parse(s: &str) -> Option<OpKind> {
        match s {
            "r" => Some(OpKind::Read),
            "w" => Some(OpKind::Write),
            "append" => Some(OpKind::Append),
            "add" => Some(OpKind::Add),
            _ => None,
        }
    }
}

/// One micro-operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// What to do.
    pub f: OpKind,
    /// On which key.
    pub key: Key,
    /// The argument (`None` for reads).
    pub value: Option<i64>,
}

/// A transaction id, unique across restarts: coordinator node, its boot counter (persisted
/// in its WAL) and a sequence number within that boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxnId {
    /// The coordinating node.
    pub node: NodeId,
    /// The coordinator's boot counter.
    pub boot: u64,
    /// Sequence within the boot.
    pub seq: u64,
}

impl std::fmt::Display for TxnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "t{}.{}.{}", self.node, self.boot, self.seq)
    }
}

/// Why a participant refused an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpError {
    /// Lock wait timed out, or the txn is no longer known here.
    Aborted,
    /// An `add` would make the value negative.
    InsufficientFunds,
    /// The operation does not fit the key's value (e.g. append to a register).
    TypeMismatch,
}

/// Node-to-node protocol messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Coordinator -> owner: execute micro-op `idx` of `txn`.
    Exec {
        /// The txn.
        txn: TxnId,
        /// Index of the op within the txn (for de-duplicating resends).
        idx: usize,
        /// How many earlier ops of this txn went to this owner: an owner that executed
        /// fewer (it restarted and forgot them) must refuse.
        seen: usize,
        /// The op.
        op: Op,
    },
    /// Owner -> coordinator: the op's result (the read value or the new value).
    ExecReply {
        /// The txn.
        txn: TxnId,
        /// Index of the op.
        idx: usize,
        /// The result value, or why it failed.
        result: Result<Option<Val>, OpError>,
    },
    /// Coordinator -> participant: phase one.
    Prepare {
        /// The txn.
        txn: TxnId,
        /// How many ops of the txn this participant must have executed to vote yes.
        ops: usize,
    },
    /// Participant -> coordinator: the vote.
    Vote {
        /// The txn.
        txn: TxnId,
        /// True if prepared.
        yes: bool,
    },
    /// Coordinator -> participant: the txn committed; apply it.
    Commit {
        /// The txn.
        txn: TxnId,
    },
    /// Participant -> coordinator: applied.
    CommitAck {
        /// The txn.
        txn: TxnId,
    },
    /// Coordinator -> participant: the txn aborted; forget it.
    Abort {
        /// The txn.
        txn: TxnId,
    },
    /// In-doubt participant -> coordinator: what was decided?
    Query {
        /// The txn.
        txn: TxnId,
    },
    /// Coordinator -> participant: the decision.
    Decision {
        /// The txn.
        txn: TxnId,
        /// True for commit.
        commit: bool,
    },
}

/// One WAL record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// The node started; the count of these is the boot counter.
    Boot,
    /// Participant: prepared `txn` with these buffered writes.
    Prepared {
        /// The txn.
        txn: TxnId,
        /// Its coordinator.
        coord: NodeId,
        /// Final values to install at commit.
        writes: Vec<(Key, Write)>,
    },
    /// Participant: applied `txn`'s writes (from its `Prepared` record).
    Applied {
        /// The txn.
        txn: TxnId,
    },
    /// Participant: a prepared `txn` was aborted.
    Aborted {
        /// The txn.
        txn: TxnId,
    },
    /// Coordinator: the commit decision for `txn`, with every participant.
    Committed {
        /// The txn.
        txn: TxnId,
        /// Its participants.
        participants: Vec<NodeId>,
    },
    /// Coordinator: every participant acknowledged the commit.
    End {
        /// The txn.
        txn: TxnId,
    },
}

/// The answer to a client's transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnReply {
    /// Committed (durably); one result per op: `[f, key, result-or-arg]`.
    Ok(Vec<Value>),
    /// Certainly not committed.
    Fail {
        /// `aborted`, `unavailable`, `insufficient-funds` or `timeout`.
        error: &'static str,
        /// Human-readable reason.
        detail: String,
    },
}

impl TxnReply {
    /// The HTTP body for this reply.
    pub fn to_json(&self) -> Value {
        match self {
            TxnReply::Ok(results) => json!({"type": "ok", "value": results}),
            TxnReply::Fail { error, detail } => {
                json!({"type": "fail", "error": error, "detail": detail})
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_follow_the_documented_rule() {
        assert_eq!(Key::Int(0).owner(3), 1);
        assert_eq!(Key::Int(4).owner(3), 2);
        assert_eq!(Key::Int(-1).owner(3), 3);
        assert_eq!(Key::Str("a".into()).owner(3), 0xaf63_dc4c_8601_ec8c % 3 + 1);
    }

    #[test]
    fn list_writes_are_logged_as_deltas_that_rebuild_the_final_value() {
        let committed = Val::List(vec![1, 2]);
        let target = Val::List(vec![1, 2, 3]);
        let w = Write::between(Some(&committed), &target);
        assert_eq!(
            w,
            Write::Extend {
                keep: 2,
                then: vec![3]
            }
        );
        assert_eq!(w.apply(Some(&committed)), target);
        assert_eq!(Write::between(None, &target).apply(None), target);
        let reg = Val::Int(4);
        assert_eq!(
            Write::between(Some(&committed), &reg),
            Write::Set(reg.clone())
        );
    }

    #[test]
    fn keys_and_values_round_trip_as_plain_json() {
        let k: Key = serde_json::from_str("7").unwrap();
        assert_eq!(k, Key::Int(7));
        let k: Key = serde_json::from_str("\"x\"").unwrap();
        assert_eq!(k, Key::Str("x".into()));
        let v: Val = serde_json::from_str("[1,2]").unwrap();
        assert_eq!(v, Val::List(vec![1, 2]));
    }
}
