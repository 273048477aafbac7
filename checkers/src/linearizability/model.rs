//! The [`Model`] trait: a sequential specification the search linearizes against.

use crate::history::OpPair;
use serde_json::Value;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

/// What is known about how a client op ended, as handed to [`Model::op`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Completed `ok`: it took effect once and its result (`OpPair::value`) is known.
    Ok,
    /// `info` or never completed: it may have taken effect at any point after its invoke,
    /// or never, and its result is unknown.
    Unknown,
    /// Completed `fail`. Usually it never took effect (return `None`), but a model may turn
    /// it into an observation (a failed compare-and-set saw a different value).
    Failed,
}

/// A sequential specification: an initial state and a deterministic step function.
///
/// The checker turns each client op into a model op with [`Model::op`], then searches for
/// an order of those ops, consistent with real time, in which every step succeeds.
/// States are interned (hashed once, then handled as small ids), so they need `Hash + Eq`.
pub trait Model: Send + Sync {
    /// The object's state. Hashed and compared for the search's memo. (`'static` so a
    /// large search's states can be freed on a background thread.)
    type State: Clone + Eq + Hash + Debug + Send + Sync + 'static;
    /// A model op: the operation with its argument and, when known, its result.
    type Op: Clone + Eq + Hash + Debug + Send + Sync;

    /// The state before any op.
    fn init(&self) -> Self::State;

    /// Translates a client op. `Ok(None)` means the op constrains nothing and is dropped
    /// (a failed write, a read whose result is unknown). `Err` explains a malformed op.
    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<Self::Op>, String>;

    /// Applies `op` to `state`: the new state, or `None` if the op cannot happen in
    /// `state` (a read returning another value, a cas whose expected value differs).
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;

    /// The state as JSON, for counterexamples.
    fn state_json(&self, state: &Self::State) -> Value {
        Value::String(format!("{state:?}"))
    }

    /// Approximate bytes one state occupies, heap included, for the memory bound. The
    /// default counts only the inline size; override it for states that own heap data.
    fn state_bytes(&self, state: &Self::State) -> usize {
        std::mem::size_of_val(state)
    }

    /// True if a bounded number of states is reachable, so the search may first try a
    /// relaxation in which indeterminate ops can be used repeatedly (see `search.rs`).
    fn small_state_space(&self) -> bool {
        false
    }

    /// The parts of the state `op` reads or writes ("atoms", e.g. hashed keys of a map), or
    /// `None` (the default) for "may touch anything". Ops whose atom sets are disjoint
    /// must commute, and an op may read and change only its own atoms. With footprints on
    /// every op (and [`Model::project`]), a part is still searched as one object, but one
    /// component at a time and with a memo factored by component (see the module docs).
    fn footprint(&self, _op: &Self::Op) -> Option<Vec<u64>> {
        None
    }

    /// The state restricted to the given atoms (the values [`Model::footprint`] returns).
    /// The factored search steps these projections directly, so for an op whose atoms
    /// are among `atoms`, `step(project(s), op)` must equal `project(step(s, op))` (and
    /// fail exactly when it fails). `None` (the default) turns the factoring off.
    fn project(&self, _state: &Self::State, _atoms: &[u64]) -> Option<Self::State> {
        None
    }

    /// True if `op` never changes the state (it only observes it: a read). The search
    /// places such an op as soon as it fits, without trying the alternatives first.
    fn read_only(&self, _op: &Self::Op) -> bool {
        false
    }

    /// True if `op` only grows the state along the order [`Model::may_reach`] knows (an
    /// append to a string or list, or a read). Together with `may_reach` this lets the
    /// search cut a configuration that no sequence of growing ops can carry to a pending
    /// read's value. The default, `false`, turns that lookahead off.
    fn grows(&self, _op: &Self::Op) -> bool {
        false
    }

    /// Whether some sequence of ops for which [`Model::grows`] holds (possibly none) can
    /// lead from `state` to a state in which the read-only `read` succeeds. Must be `true`
    /// whenever such a sequence exists (a `false` is a proof); the default is `true`.
    fn may_reach(&self, _state: &Self::State, _read: &Self::Op) -> bool {
        true
    }

    /// Which indeterminate ops can be dropped up front because nothing observes them.
    /// `required` are the ops that surely happened; returns one flag per `optional`
    /// entry, `true` meaning "drop". Must be sound: dropping may not change the verdict.
    fn prunable(&self, _required: &[&Self::Op], optional: &[&Self::Op]) -> Vec<bool> {
        vec![false; optional.len()]
    }
}

/// A reference to a model is a model (lets wrappers borrow one).
impl<M: Model + ?Sized> Model for &M {
    type State = M::State;
    type Op = M::Op;
    fn init(&self) -> Self::State {
        (**self).init()
    }
    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<Self::Op>, String> {
        (**self).op(pair, completion)
    }
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State> {
        (**self).step(state, op)
    }
    fn state_json(&self, state: &Self::State) -> Value {
        (**self).state_json(state)
    }
    fn small_state_space(&self) -> bool {
        (**self).small_state_space()
    }
    fn read_only(&self, op: &Self::Op) -> bool {
        (**self).read_only(op)
    }
    fn prunable(&self, required: &[&Self::Op], optional: &[&Self::Op]) -> Vec<bool> {
        (**self).prunable(required, optional)
    }
    fn grows(&self, op: &Self::Op) -> bool {
        (**self).grows(op)
    }
    fn may_reach(&self, state: &Self::State, read: &Self::Op) -> bool {
        (**self).may_reach(state, read)
    }
    fn footprint(&self, op: &Self::Op) -> Option<Vec<u64>> {
        (**self).footprint(op)
    }
    fn project(&self, state: &Self::State, atoms: &[u64]) -> Option<Self::State> {
        (**self).project(state, atoms)
    }
}

/// A JSON scalar or compound value in a hashable form. Integers stay integers (cheap to
/// compare); everything else is kept as its canonical JSON text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Val {
    /// JSON `null`: for registers, "never written".
    Null,
    /// An integer.
    Int(i64),
    /// A string.
    Str(Arc<str>),
    /// Anything else, as JSON text.
    Json(Arc<str>),
}

impl Val {
    /// Converts a JSON value.
    pub fn from_json(v: &Value) -> Val {
        match v {
            Value::Null => Val::Null,
            Value::Number(n) if n.as_i64().is_some() => Val::Int(n.as_i64().unwrap_or(0)),
            Value::String(s) => Val::Str(Arc::from(s.as_str())),
            other => Val::Json(Arc::from(other.to_string().as_str())),
        }
    }

    /// Converts back to JSON.
    pub fn to_json(&self) -> Value {
        match self {
            Val::Null => Value::Null,
            Val::Int(i) => Value::from(*i),
            Val::Str(s) => Value::String(s.to_string()),
            Val::Json(s) => serde_json::from_str(s).unwrap_or(Value::Null),
        }
    }
}

/// Runs a model over an op sequence, the whole history as one object: a helper for tests
/// and for users checking a model by hand. Returns the final state, or the index of the
/// first op that could not step.
pub fn run_sequential<M: Model>(model: &M, ops: &[M::Op]) -> Result<M::State, usize> {
    let mut state = model.init();
    for (i, op) in ops.iter().enumerate() {
        state = model.step(&state, op).ok_or(i)?;
    }
    Ok(state)
}
