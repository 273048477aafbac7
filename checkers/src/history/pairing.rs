//! Pairing invokes with completions: a cheap pass over op heads that validates the
//! history, and the (value-cloning) construction of [`OpPair`]s when a checker wants them.

use super::{HistoryError, Op, OpHead, OpPair, OpType, Outcome, PairSlot, Process};
use std::collections::HashMap;

/// Pairs every client invoke with its completion; slots are in invoke order. Errors name
/// ops by `indices` (the history's own) where given, else by position.
pub(crate) fn pair_heads(
    heads: &[OpHead],
    names: &[String],
    indices: Option<&[u64]>,
) -> Result<Vec<PairSlot>, HistoryError> {
    let index = |pos: usize| {
        indices
            .and_then(|ix| ix.get(pos).copied())
            .unwrap_or(pos as u64)
    };
    if let Some(ix) = indices {
        let mut seen: HashMap<u64, usize> = HashMap::with_capacity(ix.len());
        for (pos, &i) in ix.iter().enumerate() {
            if let Some(first) = seen.insert(i, pos) {
                return Err(HistoryError::Structure {
                    index: i,
                    reason: format!(
                        "two ops carry index {i} (the {} and the {} op of the file); \
                         an index names one op",
                        ordinal(first),
                        ordinal(pos)
                    ),
                });
            }
        }
    }
    // Open invoke of each process: (its position, its slot in `slots`).
    let mut open = OpenInvokes::new(heads.len());
    let mut slots: Vec<PairSlot> = Vec::new();
    let mut latest = (0u64, 0usize);
    for (pos, head) in heads.iter().enumerate() {
        // Checkers take file order as the order things happened and times as real time;
        // a history whose times run backwards contradicts itself, so neither can be trusted.
        // Time 0 is no time (Jepsen text logs, EDN ops without :time).
        if head.time != 0 && head.time < latest.0 {
            return Err(HistoryError::Structure {
                index: index(pos),
                reason: format!(
                    "time goes backwards: this op is at time {} but the op at index {} before \
                     it is at {}; ops must be listed in the order they happened",
                    head.time,
                    index(latest.1),
                    latest.0
                ),
            });
        }
        if head.time != 0 {
            latest = (head.time, pos);
        }
        let Process::Client(p) = head.process() else {
            continue;
        };
        match head.op_type {
            OpType::Invoke => {
                if let Some((prev, _)) = open.get(p) {
                    return Err(HistoryError::Structure {
                        index: index(pos),
                        reason: format!(
                            "process {p} invokes while its op at index {} is still open",
                            index(prev)
                        ),
                    });
                }
                open.insert(p, (pos, slots.len()));
                slots.push(PairSlot {
                    process: p,
                    outcome: Outcome::Pending,
                    invoke_pos: pos,
                    complete_pos: None,
                });
            }
            t => {
                let Some((_, slot)) = open.remove(p) else {
                    // Jepsen records crashed-client `info` ops without an invoke; a lone
                    // `info` completion carries no information, so skip it.
                    if t == OpType::Info {
                        continue;
                    }
                    let f = names.get(head.f as usize).map(String::as_str).unwrap_or("");
                    return Err(HistoryError::Structure {
                        index: index(pos),
                        reason: format!(
                            "process {p} completes `{f}` with {} but has no open invoke",
                            t.as_str()
                        ),
                    });
                };
                let s = &mut slots[slot];
                s.complete_pos = Some(pos);
                s.outcome = match t {
                    OpType::Ok => Outcome::Ok,
                    OpType::Fail => Outcome::Fail,
                    _ => Outcome::Info,
                };
            }
        }
    }
    Ok(slots)
}

/// `1st`, `2nd`, ... for a 0-based position.
fn ordinal(pos: usize) -> String {
    let n = pos + 1;
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Each process's open invoke: a plain vector for the usual small process ids (they are
/// dense from 0), a map for the rest.
struct OpenInvokes {
    dense: Vec<Option<(usize, usize)>>,
    dense_limit: u64,
    sparse: HashMap<u64, (usize, usize)>,
}

impl OpenInvokes {
    fn new(ops: usize) -> OpenInvokes {
        OpenInvokes {
            dense: Vec::new(),
            dense_limit: ops as u64 + 1024,
            sparse: HashMap::new(),
        }
    }

    fn get(&self, p: u64) -> Option<(usize, usize)> {
        if p < self.dense_limit {
            self.dense.get(p as usize).copied().flatten()
        } else {
            self.sparse.get(&p).copied()
        }
    }

    fn insert(&mut self, p: u64, open: (usize, usize)) {
        if p < self.dense_limit {
            if p as usize >= self.dense.len() {
                self.dense.resize(p as usize + 1, None);
            }
            self.dense[p as usize] = Some(open);
        } else {
            self.sparse.insert(p, open);
        }
    }

    fn remove(&mut self, p: u64) -> Option<(usize, usize)> {
        if p < self.dense_limit {
            self.dense.get_mut(p as usize).and_then(Option::take)
        } else {
            self.sparse.remove(&p)
        }
    }
}

/// Full pairs (with cloned values) from validated slots.
pub(crate) fn build_pairs(ops: &[Op], slots: &[PairSlot]) -> Vec<OpPair> {
    slots
        .iter()
        .filter_map(|s| {
            let inv = ops.get(s.invoke_pos)?;
            Some(pair_of(s, inv, s.complete_pos.and_then(|c| ops.get(c))))
        })
        .collect()
}

/// The pair of slot `s`, from its invoke and its completion (if any).
pub(crate) fn pair_of(s: &PairSlot, inv: &Op, done: Option<&Op>) -> OpPair {
    let mut pair = OpPair {
        process: s.process,
        f: inv.f.clone(),
        key: inv.key.clone(),
        invoke_value: inv.value.clone(),
        value: Default::default(),
        outcome: s.outcome,
        invoke_pos: s.invoke_pos,
        complete_pos: s.complete_pos,
        invoke_time: inv.time,
        complete_time: done.map(|d| d.time),
        node: inv.node.clone(),
        error: None,
    };
    pair.value = match (s.outcome, done) {
        (Outcome::Ok, Some(d)) => d.value.clone(),
        _ => inv.value.clone(),
    };
    if let Some(d) = done {
        pair.error = d.error.clone();
        if pair.key.is_none() {
            pair.key = d.key.clone();
        }
        if d.node.is_some() {
            pair.node = d.node.clone();
        }
    }
    pair
}
