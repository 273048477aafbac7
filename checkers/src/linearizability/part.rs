//! What the search works on (a part of a history) and what it reports.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

/// One op of a part, ready for the search.
#[derive(Debug, Clone)]
pub(crate) struct PartOp {
    /// Index into `History::pairs()`.
    pub pair: usize,
    /// Interned model-op id (index into `Part::values`).
    pub op: u32,
    /// Surely took effect (ok, or an observation); otherwise optional.
    pub required: bool,
    /// Invoke position in the history.
    pub invoke: usize,
    /// Completion position; `usize::MAX` for optional ops.
    pub end: usize,
}

/// One independently checkable part of a history (one key, or everything).
#[derive(Debug, Clone)]
pub(crate) struct Part<O> {
    /// The key, or `None` for an unkeyed/unsplit part.
    pub key: Option<String>,
    /// Ops in invoke order.
    pub ops: Vec<PartOp>,
    /// Distinct model ops.
    pub values: Vec<O>,
    /// The required ops (indices into `ops`) in completion order, sorted once here for
    /// every search of the part (which merges them with `ops`' invokes).
    pub by_end: Vec<u32>,
}

impl<O> Part<O> {
    /// A part of `ops`, which must be in invoke order.
    pub fn new(key: Option<String>, ops: Vec<PartOp>, values: Vec<O>) -> Part<O> {
        let mut by_end: Vec<u32> = (0..ops.len() as u32)
            .filter(|&i| ops[i as usize].required)
            .collect();
        by_end.sort_by_key(|&i| ops[i as usize].end);
        Part {
            key,
            ops,
            values,
            by_end,
        }
    }

    /// The part's call and return events in history order (a call before a return at
    /// the same position): `(op, is_call)`. Optional ops have calls only.
    pub fn events(&self) -> impl Iterator<Item = (u32, bool)> + '_ {
        let mut calls = (0..self.ops.len() as u32).peekable();
        let mut returns = self.by_end.iter().copied().peekable();
        std::iter::from_fn(move || match (calls.peek(), returns.peek()) {
            (Some(&c), Some(&r)) => {
                if self.ops[c as usize].invoke <= self.ops[r as usize].end {
                    calls.next().map(|c| (c, true))
                } else {
                    returns.next().map(|r| (r, false))
                }
            }
            (Some(_), None) => calls.next().map(|c| (c, true)),
            (None, _) => returns.next().map(|r| (r, false)),
        })
    }
}

/// Shared limits and the cancellation flag of one check.
pub(crate) struct Budget {
    pub deadline: Option<Instant>,
    pub max_memory: Option<u64>,
    pub used_memory: AtomicU64,
    pub cancel: AtomicBool,
}

/// Why a search stopped without a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Time,
    Memory,
    Cancelled,
    /// The search's step allowance for this round ran out; the driver retries the part
    /// with a larger one, so no part can starve the others.
    Steps,
}

/// How far a search got.
#[derive(Debug, Clone)]
pub(crate) struct Progress<S> {
    /// Part-op indices of the longest linearizable prefix found, in order.
    pub best_prefix: Vec<u32>,
    /// The op that cannot follow that prefix, when the search knows it better than "the
    /// first to complete of the ops left out" (a factored refutation: the dead
    /// component's first such op).
    pub stuck: Option<u32>,
    /// Required ops in that prefix, and in the part.
    pub best_required: usize,
    pub total_required: usize,
    /// The model state after the best prefix.
    pub best_state: S,
    /// Memo entries, and the estimated bytes of memo, interned states and transitions.
    pub memo_entries: usize,
    pub memo_bytes: u64,
}

/// What one search concluded.
#[derive(Debug)]
pub(crate) enum Outcome<S> {
    /// A linearization exists. `exact` is false when a relaxed search found one that
    /// reuses an optional op, which proves nothing.
    Linearizable { exact: bool },
    /// No linearization exists.
    NotLinearizable(Progress<S>),
    /// A bound or cancellation stopped the search.
    Stopped(Stop, Progress<S>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(pair: usize, invoke: usize, end: Option<usize>) -> PartOp {
        PartOp {
            pair,
            op: 0,
            required: end.is_some(),
            invoke,
            end: end.unwrap_or(usize::MAX),
        }
    }

    /// The events are every op's call and every required op's return, in history order,
    /// whatever order the returns come in: what sorting them all would give.
    #[test]
    fn events_merge_calls_and_returns_in_history_order() {
        let ops = vec![
            op(0, 0, Some(9)),
            op(1, 1, None),
            op(2, 2, Some(4)),
            op(3, 3, Some(5)),
            op(4, 6, None),
            op(5, 7, Some(8)),
            op(6, 10, Some(11)),
        ];
        let part = Part::new(None, ops.clone(), vec![()]);
        assert_eq!(part.by_end, vec![2, 3, 5, 0, 6]);
        let mut sorted: Vec<(usize, u32, bool)> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            sorted.push((o.invoke, i as u32, true));
            if o.required {
                sorted.push((o.end, i as u32, false));
            }
        }
        sorted.sort_by_key(|e| (e.0, !e.2));
        let want: Vec<(u32, bool)> = sorted.iter().map(|&(_, o, c)| (o, c)).collect();
        let got: Vec<(u32, bool)> = part.events().collect();
        assert_eq!(got, want);
        assert_eq!(got.len(), 12);
        let empty: Part<()> = Part::new(None, Vec::new(), Vec::new());
        assert_eq!(empty.events().count(), 0);
    }
}
