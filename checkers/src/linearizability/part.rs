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
