//! The history model: ops, their pairing into invoke/completion pairs, and readers/writers.
//!
//! A [`History`] is a list of [`Op`]s in the order they happened. Every client op is an
//! `invoke` followed, later, by exactly one completion from the same process. Checkers do
//! not look at raw ops; they look at [`OpPair`]s, which carry the invoke and completion
//! positions (real-time order), the outcome and the effective value.
//!
//! Big histories are cheap to hold: a history read from JSON Lines keeps the file's text
//! and parses ops' values only when [`History::ops`] or [`History::pairs`] is first called.
//! [`History::pair_slots`] (positions and outcomes), [`History::op_time`],
//! [`History::op_f`], [`History::op_value`] and [`History::op`] answer without that, so
//! summaries and checkers that read values themselves never pay for a `Value` per op.

mod error;
mod lazy;
mod mapped;
mod micro_ops;
mod op;
mod pairing;
pub mod read;
pub(crate) mod simple_json;
pub mod write;

pub use error::HistoryError;
pub use op::{value_key_string, Op, OpType, Process, NO_INDEX};

pub(crate) use lazy::{KeyText, LineSource, NameTable, OpHead, Spans, Text};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

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

/// A client op's pairing without its values: cheap to build and to keep, so checkers
/// and summaries that only need positions and outcomes never touch the ops' JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairSlot {
    /// The client process.
    pub process: u64,
    /// How the op ended.
    pub outcome: Outcome,
    /// Position of the invoke in [`History::ops`].
    pub invoke_pos: usize,
    /// Position of the completion in [`History::ops`]; `None` for `Pending`.
    pub complete_pos: Option<usize>,
}

impl PairSlot {
    /// Position of the op whose value is the pair's effective value: the completion of
    /// an `ok`, the invoke otherwise (as [`OpPair::value`]).
    pub fn value_pos(&self) -> usize {
        match (self.outcome, self.complete_pos) {
            (Outcome::Ok, Some(c)) => c,
            _ => self.invoke_pos,
        }
    }
}

/// A recorded history, validated and paired.
///
/// Histories read from JSON Lines keep the file's text and materialize [`History::ops`]
/// and [`History::pairs`] only when first asked for; [`History::pair_slots`],
/// [`History::op_time`], [`History::op_f`] and [`History::op`] answer without that.
#[derive(Debug, Clone, Default)]
pub struct History {
    ops: OnceLock<Vec<Op>>,
    source: Option<Arc<LineSource>>,
    heads: Vec<OpHead>,
    names: Vec<String>,
    slots: Vec<PairSlot>,
    pairs: OnceLock<Vec<OpPair>>,
    /// The index each op carried in its file, kept only when some differ from positions.
    indices: Option<Vec<u64>>,
    /// The sets of micro-op names the reader recorded (`OpHead::mop_names` index them).
    mop_sets: Vec<Vec<String>>,
}

impl History {
    /// Builds a history from ops in the order they happened.
    ///
    /// Indices are rewritten to be dense (0..n) in the given order; the ones the ops
    /// carried are kept for [`History::op_index`] when they differ from positions (ops
    /// that all carry index 0 are taken to carry none). Returns an error if a process
    /// completes an op it never invoked, or invokes while its previous op is still open.
    pub fn new(mut ops: Vec<Op>) -> Result<History, HistoryError> {
        let carried = |i: usize, op: &Op| {
            if op.index == NO_INDEX {
                i as u64
            } else {
                op.index
            }
        };
        let meaningful = ops.iter().any(|o| o.index != 0 && o.index != NO_INDEX);
        let indices = (meaningful
            && ops
                .iter()
                .enumerate()
                .any(|(i, o)| carried(i, o) != i as u64))
        .then(|| ops.iter().enumerate().map(|(i, o)| carried(i, o)).collect());
        let mut names = NameTable::default();
        let mut heads = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter_mut().enumerate() {
            op.index = i as u64;
            heads.push(OpHead::new(
                op.time,
                op.process,
                op.op_type,
                names.intern(&op.f),
            ));
        }
        let mut h = History::from_heads(heads, names.names, None, indices)?;
        h.ops = OnceLock::from(ops);
        Ok(h)
    }

    /// A history whose ops stay as text in `source` until asked for. `indices` are the
    /// ones the ops carried (one per op), kept unless they are simply the positions; a
    /// malformed pairing is reported by them.
    pub(crate) fn from_heads(
        heads: Vec<OpHead>,
        names: Vec<String>,
        source: Option<Arc<LineSource>>,
        indices: Option<Vec<u64>>,
    ) -> Result<History, HistoryError> {
        let indices = indices.filter(|ix| {
            ix.len() == heads.len() && ix.iter().enumerate().any(|(i, &x)| x != i as u64)
        });
        let slots = pairing::pair_heads(&heads, &names, indices.as_deref())?;
        Ok(History {
            ops: OnceLock::new(),
            source,
            heads,
            names,
            slots,
            pairs: OnceLock::new(),
            indices,
            mop_sets: Vec::new(),
        })
    }

    /// The index by which the history's own file names the op at `pos`: its `index` field
    /// where the history carried one, else its position. Results name ops by it, so a
    /// user finds them in their own file.
    pub fn op_index(&self, pos: usize) -> u64 {
        self.indices
            .as_ref()
            .and_then(|ix| ix.get(pos).copied())
            .unwrap_or(pos as u64)
    }

    /// The op at `pos` as its file had it: carrying its own index, not its position.
    pub fn carried_op(&self, pos: usize) -> Option<Op> {
        let mut op = self.op(pos)?.into_owned();
        op.index = self.op_index(pos);
        Some(op)
    }

    /// Every op, in order.
    pub fn ops(&self) -> &[Op] {
        self.ops.get_or_init(|| match &self.source {
            Some(s) => s.materialize(&self.heads, &self.names),
            None => Vec::new(),
        })
    }

    /// Consumes the history, returning its ops.
    pub fn into_ops(self) -> Vec<Op> {
        self.ops();
        self.ops.into_inner().unwrap_or_default()
    }

    /// Client operations (invoke + completion), ordered by invoke position.
    ///
    /// Built (cloning every op's value) on first use; prefer [`History::pair_slots`] when
    /// values are not needed.
    pub fn pairs(&self) -> &[OpPair] {
        self.pairs
            .get_or_init(|| pairing::build_pairs(self.ops(), &self.slots))
    }

    /// Client operation `i` (as `pairs()[i]`), built from its two ops alone when the
    /// pairs are not materialized: a checker that translates ops one by one (the
    /// linearizability checker's preparation) never holds every op's `Value` at once.
    pub fn pair(&self, i: usize) -> Option<Cow<'_, OpPair>> {
        if let Some(pairs) = self.pairs.get() {
            return pairs.get(i).map(Cow::Borrowed);
        }
        let slot = self.slots.get(i)?;
        let inv = self.op(slot.invoke_pos)?;
        let done = slot.complete_pos.and_then(|c| self.op(c));
        Some(Cow::Owned(pairing::pair_of(slot, &inv, done.as_deref())))
    }

    /// Client operations' positions and outcomes, ordered by invoke position (the same
    /// order and length as [`History::pairs`]).
    pub fn pair_slots(&self) -> &[PairSlot] {
        &self.slots
    }

    /// The op at `pos`, borrowed if the ops are materialized, else parsed on its own.
    pub fn op(&self, pos: usize) -> Option<Cow<'_, Op>> {
        if let Some(ops) = self.ops.get() {
            return ops.get(pos).map(Cow::Borrowed);
        }
        let head = self.heads.get(pos)?;
        let source = self.source.as_ref()?;
        Some(Cow::Owned(source.op(pos, head, &self.names)))
    }

    /// The value of the op at `pos`, without materializing the other ops.
    pub fn op_value(&self, pos: usize) -> Option<Cow<'_, Value>> {
        match self.value_ref(pos)? {
            ValueRef::Json(v) => Some(Cow::Borrowed(v)),
            ValueRef::Text(t) => Some(Cow::Owned(serde_json::from_str(t).unwrap_or(Value::Null))),
        }
    }

    /// The key of the op at `pos` (`None` when it has none, or past the end), without
    /// materializing the other ops: of a history read lazily, from the key's own text
    /// recorded when it was read, not from its whole line.
    pub fn op_key(&self, pos: usize) -> Option<Value> {
        if let Some(ops) = self.ops.get() {
            return ops.get(pos)?.key.clone();
        }
        self.heads.get(pos)?;
        match self.source.as_ref()?.key_text(pos)? {
            KeyText::Absent => None,
            KeyText::Text(t) => Some(
                simple_json::plain_string_value(t)
                    .unwrap_or_else(|| serde_json::from_str(t).unwrap_or(Value::Null)),
            ),
            KeyText::Unrecorded => self.op(pos)?.into_owned().key,
        }
    }

    /// The value of the op at `pos`: a parsed value, or its JSON text when the ops have
    /// not been materialized.
    pub(crate) fn value_ref(&self, pos: usize) -> Option<ValueRef<'_>> {
        if let Some(ops) = self.ops.get() {
            return ops.get(pos).map(|o| ValueRef::Json(&o.value));
        }
        self.heads.get(pos)?;
        Some(match self.source.as_ref()?.value_text(pos) {
            Some(t) => ValueRef::Text(t),
            None => ValueRef::Json(&Value::Null),
        })
    }

    /// The JSON text of the op at `pos` as it was read (JSON Lines histories only), for
    /// checkers that pick a few fields out of big histories without parsing the rest.
    pub(crate) fn op_text(&self, pos: usize) -> Option<&str> {
        self.source.as_ref()?.line_text(pos)
    }

    /// Tells the history that a pass is done with the ops before `pos`: a history mapped
    /// from a big file hands their pages back. Reading them later stays correct.
    pub fn release_before(&self, pos: usize) {
        if let Some(s) = &self.source {
            s.release_before(pos);
        }
    }

    /// Time (ns) of the op at `pos`.
    pub fn op_time(&self, pos: usize) -> Option<u64> {
        self.heads.get(pos).map(|h| h.time)
    }

    /// Name (`f`) of the op at `pos`.
    pub fn op_f(&self, pos: usize) -> Option<&str> {
        self.heads
            .get(pos)
            .and_then(|h| self.names.get(h.f as usize))
            .map(String::as_str)
    }

    /// Process of the op at `pos`.
    pub fn op_process(&self, pos: usize) -> Option<Process> {
        self.heads.get(pos).map(|h| h.process())
    }

    /// The nemesis's ops, in order.
    pub fn nemesis_ops(&self) -> impl Iterator<Item = &Op> {
        self.ops().iter().filter(|o| o.process == Process::Nemesis)
    }

    /// Number of nemesis ops (without materializing the ops).
    pub fn nemesis_count(&self) -> usize {
        self.heads
            .iter()
            .filter(|h| h.process() == Process::Nemesis)
            .count()
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.heads.len()
    }

    /// True when the history has no ops.
    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// Counts of client completions: (ok, fail, info-or-pending).
    pub fn outcome_counts(&self) -> OutcomeCounts {
        let mut c = OutcomeCounts::default();
        for p in &self.slots {
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

/// An op's value as stored: parsed, or the JSON text of a not-yet-materialized op.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ValueRef<'a> {
    Json(&'a Value),
    Text(&'a str),
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
