//! The history model: ops, their pairing into invoke/completion pairs, and readers/writers.
//!
//! A [`History`] is a list of [`Op`]s in the order they happened. Every client op is an
//! `invoke` followed, later, by exactly one completion from the same process. Checkers do
//! not look at raw ops; they look at [`OpPair`]s, which carry the invoke and completion
//! positions (real-time order), the outcome and the effective value.

mod error;
mod op;
pub mod read;
pub mod write;

pub use error::HistoryError;
pub use op::{value_key_string, Op, OpType, Process};

use serde_json::Value;
use std::collections::HashMap;

/// How a client op ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Completed `ok`: took effect exactly once between invoke and completion.
    Ok,
    /// Completed `fail`: certainly never took effect.
    Fail,
    /// Completed `info`: may have taken effect at any point after its invoke, or never.
    Info,
    /// Never completed before the history ended; treated exactly like `Info`.
    Pending,
}

impl Outcome {
    /// True for `Info` and `Pending`: the op may or may not have taken effect.
    pub fn is_indeterminate(self) -> bool {
        matches!(self, Outcome::Info | Outcome::Pending)
    }
}

/// One client operation: its invoke paired with its completion.
#[derive(Debug, Clone, PartialEq)]
pub struct OpPair {
    /// The client process.
    pub process: u64,
    /// The operation's name.
    pub f: String,
    /// The key, if the op had one (taken from the invoke, or the completion if the
    /// invoke had none).
    pub key: Option<Value>,
    /// The invoke's argument.
    pub invoke_value: Value,
    /// The completion's value: the result of an `ok`; the invoke's value otherwise.
    pub value: Value,
    /// How the op ended.
    pub outcome: Outcome,
    /// Position of the invoke in [`History::ops`].
    pub invoke_pos: usize,
    /// Position of the completion in [`History::ops`]; `None` for `Pending`.
    pub complete_pos: Option<usize>,
    /// Time of the invoke (ns).
    pub invoke_time: u64,
    /// Time of the completion (ns); `None` for `Pending`.
    pub complete_time: Option<u64>,
    /// The node the client spoke to, if recorded.
    pub node: Option<String>,
    /// The completion's error, if any.
    pub error: Option<Value>,
}

impl OpPair {
    /// The key as a stable string, for partitioning and display.
    pub fn key_string(&self) -> Option<String> {
        self.key.as_ref().map(value_key_string)
    }

    /// The end of the op's interval in history positions; `usize::MAX` if it never ended.
    pub fn end_pos(&self) -> usize {
        self.complete_pos.unwrap_or(usize::MAX)
    }

    /// True if this op completed before `other` was invoked (real-time precedence).
    pub fn precedes(&self, other: &OpPair) -> bool {
        self.end_pos() < other.invoke_pos
    }
}

/// A recorded history, validated and paired.
#[derive(Debug, Clone, Default)]
pub struct History {
    ops: Vec<Op>,
    pairs: Vec<OpPair>,
}

impl History {
    /// Builds a history from ops in the order they happened.
    ///
    /// Indices are rewritten to be dense (0..n) in the given order. Returns an error if a
    /// process completes an op it never invoked, or invokes while its previous op is still
    /// open.
    pub fn new(mut ops: Vec<Op>) -> Result<History, HistoryError> {
        for (i, op) in ops.iter_mut().enumerate() {
            op.index = i as u64;
        }
        let pairs = pair_ops(&ops)?;
        Ok(History { ops, pairs })
    }

    /// Every op, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Consumes the history, returning its ops.
    pub fn into_ops(self) -> Vec<Op> {
        self.ops
    }

    /// Client operations (invoke + completion), ordered by invoke position.
    pub fn pairs(&self) -> &[OpPair] {
        &self.pairs
    }

    /// The nemesis's ops, in order.
    pub fn nemesis_ops(&self) -> impl Iterator<Item = &Op> {
        self.ops.iter().filter(|o| o.process == Process::Nemesis)
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the history has no ops.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Counts of client completions: (ok, fail, info-or-pending).
    pub fn outcome_counts(&self) -> OutcomeCounts {
        let mut c = OutcomeCounts::default();
        for p in &self.pairs {
            match p.outcome {
                Outcome::Ok => c.ok += 1,
                Outcome::Fail => c.fail += 1,
                Outcome::Info => c.info += 1,
                Outcome::Pending => c.pending += 1,
            }
        }
        c
    }
}

/// Counts of client op outcomes in a history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct OutcomeCounts {
    /// Ops that completed `ok`.
    pub ok: usize,
    /// Ops that completed `fail`.
    pub fail: usize,
    /// Ops that completed `info`.
    pub info: usize,
    /// Ops never completed.
    pub pending: usize,
}

fn pair_ops(ops: &[Op]) -> Result<Vec<OpPair>, HistoryError> {
    let mut open: HashMap<u64, usize> = HashMap::new();
    // Slot in `pairs` for each open invoke, so pairs stay in invoke order.
    let mut pairs: Vec<OpPair> = Vec::new();
    let mut slot_of_invoke: HashMap<usize, usize> = HashMap::new();
    for (pos, op) in ops.iter().enumerate() {
        let Process::Client(p) = op.process else {
            continue;
        };
        match op.op_type {
            OpType::Invoke => {
                if let Some(prev) = open.get(&p) {
                    return Err(HistoryError::Structure {
                        index: pos as u64,
                        reason: format!(
                            "process {p} invokes while its op at index {prev} is still open"
                        ),
                    });
                }
                open.insert(p, pos);
                slot_of_invoke.insert(pos, pairs.len());
                pairs.push(OpPair {
                    process: p,
                    f: op.f.clone(),
                    key: op.key.clone(),
                    invoke_value: op.value.clone(),
                    value: op.value.clone(),
                    outcome: Outcome::Pending,
                    invoke_pos: pos,
                    complete_pos: None,
                    invoke_time: op.time,
                    complete_time: None,
                    node: op.node.clone(),
                    error: None,
                });
            }
            t => {
                let Some(inv) = open.remove(&p) else {
                    // Jepsen records crashed-client `info` ops without an invoke; a lone
                    // `info` completion carries no information, so skip it.
                    if t == OpType::Info {
                        continue;
                    }
                    return Err(HistoryError::Structure {
                        index: pos as u64,
                        reason: format!(
                            "process {p} completes `{}` with {} but has no open invoke",
                            op.f,
                            t.as_str()
                        ),
                    });
                };
                let pair = &mut pairs[slot_of_invoke[&inv]];
                pair.complete_pos = Some(pos);
                pair.complete_time = Some(op.time);
                pair.error = op.error.clone();
                if pair.key.is_none() {
                    pair.key = op.key.clone();
                }
                if op.node.is_some() {
                    pair.node = op.node.clone();
                }
                pair.outcome = match t {
                    OpType::Ok => {
                        pair.value = op.value.clone();
                        Outcome::Ok
                    }
                    OpType::Fail => Outcome::Fail,
                    _ => Outcome::Info,
                };
            }
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op(p: u64, t: OpType, f: &str, v: Value) -> Op {
        Op::new(Process::Client(p), t, f, v)
    }

    #[test]
    fn pairs_ops_and_classifies_outcomes() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "write", json!(1)),
            op(1, OpType::Invoke, "read", Value::Null),
            op(0, OpType::Ok, "write", json!(1)),
            op(2, OpType::Invoke, "cas", json!([1, 2])),
            op(1, OpType::Info, "read", Value::Null),
            op(2, OpType::Fail, "cas", json!([1, 2])),
            op(3, OpType::Invoke, "write", json!(9)),
        ])
        .unwrap();
        let outcomes: Vec<_> = h.pairs().iter().map(|p| p.outcome).collect();
        assert_eq!(
            outcomes,
            [Outcome::Ok, Outcome::Info, Outcome::Fail, Outcome::Pending]
        );
        assert_eq!(h.pairs()[0].complete_pos, Some(2));
        assert!(h.pairs()[0].precedes(&h.pairs()[2]));
        assert!(!h.pairs()[1].precedes(&h.pairs()[2]));
        assert_eq!(h.pairs()[3].end_pos(), usize::MAX);
    }

    #[test]
    fn rejects_double_invoke_and_orphan_completion() {
        let e = History::new(vec![
            op(0, OpType::Invoke, "write", json!(1)),
            op(0, OpType::Invoke, "write", json!(2)),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("still open"), "{e}");
        let e = History::new(vec![op(4, OpType::Ok, "read", json!(1))]).unwrap_err();
        assert!(e.to_string().contains("no open invoke"), "{e}");
    }

    #[test]
    fn ok_value_replaces_invoke_value() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "read", Value::Null),
            op(0, OpType::Ok, "read", json!(5)),
        ])
        .unwrap();
        assert_eq!(h.pairs()[0].value, json!(5));
        assert_eq!(h.pairs()[0].invoke_value, Value::Null);
    }
}
