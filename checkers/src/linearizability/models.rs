//! The built-in models: registers, key-value strings, lists, sets, queues, counters, mutexes.
//!
//! Every model here describes ONE object. Keyed histories are split by key before the
//! search, or, unsplit, checked with [`PerKey`], which keeps one sub-state per key.

use super::model::{Completion, Model, Val};
use super::FailedCas;
use crate::history::OpPair;
use serde_json::Value;
use std::collections::{BTreeSet, HashSet, VecDeque};

fn is_read(f: &str) -> bool {
    matches!(f, "read" | "get" | "r")
}
fn is_write(f: &str) -> bool {
    matches!(f, "write" | "put" | "w")
}
pub(crate) fn unsupported(model: &str, f: &str) -> String {
    format!("the {model} model has no operation `{f}`")
}

/// A register op. `Cas` is used for `ok` and indeterminate cas alike: an indeterminate
/// cas either succeeded (state was `expected`) or did nothing, and "nothing" is the same
/// as never taking effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RegisterOp {
    /// A read that returned the value (`Null`: never written).
    Read(Val),
    /// A write of the value.
    Write(Val),
    /// A successful compare-and-set `[expected, new]`.
    Cas(Val, Val),
    /// A failed cas observed a value other than `expected` (FailedCas::Observed).
    CasFailed(Val),
}

/// `register` (read/write) and `cas-register` (read/write/cas). Initial value null.
#[derive(Debug, Clone)]
pub struct RegisterModel {
    /// Accept `cas` ops.
    pub cas: bool,
    /// What a failed cas means.
    pub failed_cas: FailedCas,
}

impl Model for RegisterModel {
    type State = Val;
    type Op = RegisterOp;

    fn read_only(&self, op: &RegisterOp) -> bool {
        matches!(op, RegisterOp::Read(_) | RegisterOp::CasFailed(_))
    }

    fn init(&self) -> Val {
        Val::Null
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<RegisterOp>, String> {
        let f = pair.f.as_str();
        if is_read(f) {
            return Ok(match completion {
                Completion::Ok => Some(RegisterOp::Read(Val::from_json(&pair.value))),
                // A read with an unknown result constrains nothing.
                _ => None,
            });
        }
        if is_write(f) {
            return Ok(match completion {
                Completion::Failed => None,
                _ => Some(RegisterOp::Write(Val::from_json(&pair.invoke_value))),
            });
        }
        if f == "cas" && self.cas {
            let (expected, new) = match &pair.invoke_value {
                Value::Array(a) if a.len() == 2 => (Val::from_json(&a[0]), Val::from_json(&a[1])),
                other => return Err(format!("cas value must be [expected, new], got {other}")),
            };
            return Ok(match (completion, self.failed_cas) {
                (Completion::Failed, FailedCas::Jepsen) => None,
                (Completion::Failed, FailedCas::Observed) => Some(RegisterOp::CasFailed(expected)),
                _ => Some(RegisterOp::Cas(expected, new)),
            });
        }
        Err(unsupported(
            if self.cas { "cas-register" } else { "register" },
            f,
        ))
    }

    fn step(&self, state: &Val, op: &RegisterOp) -> Option<Val> {
        match op {
            RegisterOp::Read(v) => (v == state).then(|| state.clone()),
            RegisterOp::Write(v) => Some(v.clone()),
            RegisterOp::Cas(e, n) => (e == state).then(|| n.clone()),
            RegisterOp::CasFailed(e) => (e != state).then(|| state.clone()),
        }
    }

    fn state_json(&self, state: &Val) -> Value {
        state.to_json()
    }

    fn small_state_space(&self) -> bool {
        true
    }

    /// Drops an indeterminate write of v (or cas to v) when no read returns v, no cas
    /// expects v and no failed cas is kept as an observation.
    ///
    /// Soundness: take a linearization that uses such an op X, which sets the register to
    /// v. Until the next write or successful cas, every op would observe v: a read would
    /// return v, a cas would expect v, a failed-cas observation could tell v from its
    /// previous value. None exists, so no op lies in that stretch; removing X leaves every
    /// other step's input unchanged. The converse (never using X) needs nothing.
    fn prunable(&self, required: &[&RegisterOp], optional: &[&RegisterOp]) -> Vec<bool> {
        let all = || required.iter().chain(optional.iter());
        if all().any(|o| matches!(o, RegisterOp::CasFailed(_))) {
            return vec![false; optional.len()];
        }
        let observed: BTreeSet<&Val> = all()
            .filter_map(|o| match o {
                RegisterOp::Read(v) | RegisterOp::Cas(v, _) => Some(v),
                _ => None,
            })
            .collect();
        optional
            .iter()
            .map(|o| match o {
                RegisterOp::Write(v) | RegisterOp::Cas(_, v) => !observed.contains(v),
                _ => false,
            })
            .collect()
    }
}

fn string_of(v: &Value) -> Result<String, String> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        other => Err(format!("kv values must be strings, got {other}")),
    }
}

/// A `kv` op on one key's string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KvOp {
    /// `get` returned this string.
    Get(String),
    /// `put` set the string.
    Put(String),
    /// `append` concatenated onto the string.
    Append(String),
}

/// `kv`: get/put/append on one key's string; initial "".
#[derive(Debug, Clone, Default)]
pub struct KvModel;

impl Model for KvModel {
    type State = String;
    type Op = KvOp;

    fn read_only(&self, op: &KvOp) -> bool {
        matches!(op, KvOp::Get(_))
    }

    /// Appends and gets only extend the string (or keep it); a put may replace it.
    fn grows(&self, op: &KvOp) -> bool {
        !matches!(op, KvOp::Put(_))
    }

    /// Appends extend the string, so a get can follow only a prefix of what it returned.
    fn may_reach(&self, state: &String, read: &KvOp) -> bool {
        match read {
            KvOp::Get(v) => v.starts_with(state.as_str()),
            _ => true,
        }
    }

    fn state_bytes(&self, state: &String) -> usize {
        std::mem::size_of::<String>() + state.capacity()
    }

    fn init(&self) -> String {
        String::new()
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<KvOp>, String> {
        let f = pair.f.as_str();
        if completion == Completion::Failed {
            return Ok(None);
        }
        if is_read(f) {
            if completion == Completion::Unknown {
                return Ok(None);
            }
            return Ok(Some(KvOp::Get(string_of(&pair.value)?)));
        }
        let arg = string_of(&pair.invoke_value)?;
        match f {
            "put" | "write" => Ok(Some(KvOp::Put(arg))),
            "append" => Ok(Some(KvOp::Append(arg))),
            _ => Err(unsupported("kv", f)),
        }
    }

    fn step(&self, state: &String, op: &KvOp) -> Option<String> {
        match op {
            KvOp::Get(v) => (v == state).then(|| state.clone()),
            KvOp::Put(v) => Some(v.clone()),
            KvOp::Append(v) => {
                let mut s = String::with_capacity(state.len() + v.len());
                s.push_str(state);
                s.push_str(v);
                Some(s)
            }
        }
    }

    fn state_json(&self, state: &String) -> Value {
        Value::String(state.clone())
    }
}

/// A `list-append` op: append an element, or read the whole list.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ListOp {
    /// Appends the element.
    Append(Val),
    /// A read returned this list.
    Read(Vec<Val>),
}

fn list_of(v: &Value) -> Result<Vec<Val>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) => Ok(a.iter().map(Val::from_json).collect()),
        other => Err(format!("a read must return a list, got {other}")),
    }
}

/// `list-append`: per key, append x to a list; read returns the list. Initial [].
#[derive(Debug, Clone, Default)]
pub struct ListAppendModel;

impl Model for ListAppendModel {
    type State = Vec<Val>;
    type Op = ListOp;

    fn read_only(&self, op: &ListOp) -> bool {
        matches!(op, ListOp::Read(_))
    }

    /// Every op appends or reads: lists only grow.
    fn grows(&self, _op: &ListOp) -> bool {
        true
    }

    /// Lists only grow, so a read can follow only a prefix of the list it returned.
    fn may_reach(&self, state: &Vec<Val>, read: &ListOp) -> bool {
        match read {
            ListOp::Read(l) => l.starts_with(state),
            ListOp::Append(_) => true,
        }
    }

    fn state_bytes(&self, state: &Vec<Val>) -> usize {
        std::mem::size_of::<Vec<Val>>() + state.capacity() * std::mem::size_of::<Val>()
    }

    fn init(&self) -> Vec<Val> {
        Vec::new()
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<ListOp>, String> {
        match (pair.f.as_str(), completion) {
            (_, Completion::Failed) => Ok(None),
            ("append", _) => Ok(Some(ListOp::Append(Val::from_json(&pair.invoke_value)))),
            (f, Completion::Ok) if is_read(f) => Ok(Some(ListOp::Read(list_of(&pair.value)?))),
            (f, _) if is_read(f) => Ok(None),
            (f, _) => Err(unsupported("list-append", f)),
        }
    }

    fn step(&self, state: &Vec<Val>, op: &ListOp) -> Option<Vec<Val>> {
        match op {
            ListOp::Append(v) => {
                let mut s = state.clone();
                s.push(v.clone());
                Some(s)
            }
            ListOp::Read(l) => (l == state).then(|| state.clone()),
        }
    }

    fn state_json(&self, state: &Vec<Val>) -> Value {
        Value::Array(state.iter().map(Val::to_json).collect())
    }

    /// Drops an indeterminate append of x when no read returns a list containing x.
    ///
    /// Soundness: in a linearization that uses such an append, every read after it would
    /// contain x (lists only grow), so none comes after it; only appends do, and an append
    /// fits any state. Removing it leaves every read's input unchanged.
    fn prunable(&self, required: &[&ListOp], optional: &[&ListOp]) -> Vec<bool> {
        let seen: HashSet<&Val> = required
            .iter()
            .chain(optional.iter())
            .filter_map(|o| match o {
                ListOp::Read(l) => Some(l.iter()),
                ListOp::Append(_) => None,
            })
            .flatten()
            .collect();
        optional
            .iter()
            .map(|o| matches!(o, ListOp::Append(x) if !seen.contains(x)))
            .collect()
    }
}

/// A `set` op.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SetOp {
    /// Adds the element.
    Add(Val),
    /// A read returned exactly these elements.
    Read(BTreeSet<Val>),
}

/// `set`: add elements; a read returns all of them, in any order. Initial empty.
#[derive(Debug, Clone, Default)]
pub struct SetModel;

impl Model for SetModel {
    type State = BTreeSet<Val>;
    type Op = SetOp;

    fn read_only(&self, op: &SetOp) -> bool {
        matches!(op, SetOp::Read(_))
    }

    fn state_bytes(&self, state: &BTreeSet<Val>) -> usize {
        // B-tree nodes hold up to 11 elements; count them about two-thirds full.
        std::mem::size_of::<BTreeSet<Val>>() + state.len() * (std::mem::size_of::<Val>() * 3 / 2)
    }

    fn init(&self) -> BTreeSet<Val> {
        BTreeSet::new()
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<SetOp>, String> {
        match (pair.f.as_str(), completion) {
            (_, Completion::Failed) => Ok(None),
            ("add", _) => Ok(Some(SetOp::Add(Val::from_json(&pair.invoke_value)))),
            (f, Completion::Ok) if is_read(f) => Ok(Some(SetOp::Read(
                list_of(&pair.value)?.into_iter().collect(),
            ))),
            (f, _) if is_read(f) => Ok(None),
            (f, _) => Err(unsupported("set", f)),
        }
    }

    fn step(&self, state: &BTreeSet<Val>, op: &SetOp) -> Option<BTreeSet<Val>> {
        match op {
            SetOp::Add(v) => {
                let mut s = state.clone();
                s.insert(v.clone());
                Some(s)
            }
            SetOp::Read(r) => (r == state).then(|| state.clone()),
        }
    }

    fn state_json(&self, state: &BTreeSet<Val>) -> Value {
        Value::Array(state.iter().map(Val::to_json).collect())
    }

    /// Drops an indeterminate add of x when no read returns x; sound for the reason given
    /// at [`ListAppendModel`]'s: every read after the add would contain x.
    fn prunable(&self, required: &[&SetOp], optional: &[&SetOp]) -> Vec<bool> {
        let seen: HashSet<&Val> = required
            .iter()
            .chain(optional.iter())
            .filter_map(|o| match o {
                SetOp::Read(r) => Some(r.iter()),
                SetOp::Add(_) => None,
            })
            .flatten()
            .collect();
        optional
            .iter()
            .map(|o| matches!(o, SetOp::Add(x) if !seen.contains(x)))
            .collect()
    }
}

/// A `queue` op.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueOp {
    /// Enqueues the element.
    Enqueue(Val),
    /// A dequeue returned this element (`Null`: the queue was empty).
    Dequeue(Val),
    /// A dequeue with unknown result: removes the head, if any.
    DequeueUnknown,
}

/// `queue`: FIFO enqueue/dequeue. Initial empty.
#[derive(Debug, Clone, Default)]
pub struct QueueModel;

impl Model for QueueModel {
    type State = VecDeque<Val>;
    type Op = QueueOp;

    fn state_bytes(&self, state: &VecDeque<Val>) -> usize {
        std::mem::size_of::<VecDeque<Val>>() + state.capacity() * std::mem::size_of::<Val>()
    }

    fn init(&self) -> VecDeque<Val> {
        VecDeque::new()
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<QueueOp>, String> {
        match (pair.f.as_str(), completion) {
            (_, Completion::Failed) => Ok(None),
            ("enqueue", _) => Ok(Some(QueueOp::Enqueue(Val::from_json(&pair.invoke_value)))),
            ("dequeue", Completion::Ok) => Ok(Some(QueueOp::Dequeue(Val::from_json(&pair.value)))),
            ("dequeue", _) => Ok(Some(QueueOp::DequeueUnknown)),
            (f, _) => Err(unsupported("queue", f)),
        }
    }

    fn step(&self, state: &VecDeque<Val>, op: &QueueOp) -> Option<VecDeque<Val>> {
        let mut s = state.clone();
        match op {
            QueueOp::Enqueue(v) => s.push_back(v.clone()),
            QueueOp::Dequeue(Val::Null) => return s.is_empty().then_some(s),
            QueueOp::Dequeue(v) => {
                if s.pop_front().as_ref() != Some(v) {
                    return None;
                }
            }
            QueueOp::DequeueUnknown => {
                s.pop_front();
            }
        }
        Some(s)
    }

    fn state_json(&self, state: &VecDeque<Val>) -> Value {
        Value::Array(state.iter().map(Val::to_json).collect())
    }
}

/// A `counter` op.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CounterOp {
    /// Adds n.
    Add(i64),
    /// A read returned n.
    Read(i64),
}

/// `counter`: add n / read. Initial 0.
#[derive(Debug, Clone, Default)]
pub struct CounterModel;

fn int_of(v: &Value, what: &str) -> Result<i64, String> {
    match v {
        Value::Null => Ok(0),
        v => v
            .as_i64()
            .ok_or_else(|| format!("{what} must be an integer, got {v}")),
    }
}

impl Model for CounterModel {
    type State = i64;
    type Op = CounterOp;

    fn read_only(&self, op: &CounterOp) -> bool {
        matches!(op, CounterOp::Read(_))
    }

    fn init(&self) -> i64 {
        0
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<CounterOp>, String> {
        match (pair.f.as_str(), completion) {
            (_, Completion::Failed) => Ok(None),
            ("add" | "inc" | "increment", _) => Ok(Some(CounterOp::Add(int_of(
                &pair.invoke_value,
                "an add's argument",
            )?))),
            (f, Completion::Ok) if is_read(f) => Ok(Some(CounterOp::Read(int_of(
                &pair.value,
                "a read's result",
            )?))),
            (f, _) if is_read(f) => Ok(None),
            (f, _) => Err(unsupported("counter", f)),
        }
    }

    fn step(&self, state: &i64, op: &CounterOp) -> Option<i64> {
        match op {
            CounterOp::Add(n) => state.checked_add(*n),
            CounterOp::Read(n) => (n == state).then_some(*state),
        }
    }

    fn state_json(&self, state: &i64) -> Value {
        Value::from(*state)
    }
}

/// A `mutex` op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MutexOp {
    /// Takes the lock; possible only when free.
    Acquire,
    /// Frees the lock; possible only when held.
    Release,
}

/// `mutex`: acquire/release. Initially free.
#[derive(Debug, Clone, Default)]
pub struct MutexModel;

impl Model for MutexModel {
    type State = bool;
    type Op = MutexOp;

    fn init(&self) -> bool {
        false
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<MutexOp>, String> {
        match (pair.f.as_str(), completion) {
            (_, Completion::Failed) => Ok(None),
            ("acquire" | "lock", _) => Ok(Some(MutexOp::Acquire)),
            ("release" | "unlock", _) => Ok(Some(MutexOp::Release)),
            (f, _) => Err(unsupported("mutex", f)),
        }
    }

    fn step(&self, held: &bool, op: &MutexOp) -> Option<bool> {
        match op {
            MutexOp::Acquire => (!held).then_some(true),
            MutexOp::Release => held.then_some(false),
        }
    }

    fn state_json(&self, held: &bool) -> Value {
        Value::String(if *held { "held" } else { "free" }.into())
    }

    fn small_state_space(&self) -> bool {
        true
    }
}

pub use super::multireg::{MicroOp, MultiRegisterModel};
pub use super::perkey::PerKey;
