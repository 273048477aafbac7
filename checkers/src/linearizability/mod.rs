//! Linearizability checking: is there an order of the ops, consistent with real time, in
//! which a sequential model explains every result?
//!
//! ```no_run
//! use splitbrain_checkers::linearizability::{LinearizabilityChecker, LinearizabilityOptions, FailedCas};
//! use splitbrain_checkers::{Checker, history::read::read_path};
//! let history = read_path(std::path::Path::new("etcd_002.log"))?;
//! let options = LinearizabilityOptions { failed_cas: FailedCas::Observed, ..Default::default() };
//! let checker = LinearizabilityChecker::new("cas-register", options).expect("known model");
//! let result = checker.check(&history);
//! println!("{}: {}", result.valid.label(), result.explanation);
//! # Ok::<(), splitbrain_checkers::history::HistoryError>(())
//! ```
//!
//! # Semantics
//!
//! - An `ok` op took effect exactly once between its invoke and its completion.
//! - A `fail` op never took effect and is dropped, except a failed `cas` under
//!   [`FailedCas::Observed`]: an observation that the register held a value other than the
//!   expected one at some point within the op's interval.
//! - An `info` or never-completed op may take effect at any point after its invoke, or
//!   never; its result is unknown, so a read with an unknown outcome constrains nothing.
//! - Op A precedes op B iff A completed before B was invoked, by history position.
//!
//! Keyed histories are split by key (each key is an independent object, so the history is
//! linearizable iff each key's sub-history is), and the parts are checked in parallel; the
//! first invalid part cancels the rest.
//!
//! With `split_by_key: false` a keyed history is one object, a map of per-key states, and
//! one search linearizes all of it. That search still exploits the map's structure, which
//! models declare with [`Model::footprint`] and [`Model::project`]: ops on disjoint parts
//! of the state commute, so only the ops in the component of the next op to complete are
//! tried, and dead configurations are remembered per component ("nogoods"), so the memo
//! grows with the sum of the keys' search spaces instead of their product. Ops that span
//! several keys (a `multi-register` txn) join those keys into one component, so the search
//! stays exact for them. The argument is in `factor.rs`; Porcupine's c50 kv histories,
//! which it cannot decide unsplit in 60 s, take about a second or a few.
//!
//! # Writing a model
//!
//! A model is an initial state, a translation of history ops, and a step function:
//!
//! ```
//! use splitbrain_checkers::linearizability::{check_model, Completion, LinearizabilityOptions, Model};
//! use splitbrain_checkers::history::{History, Op, OpPair, OpType, Process};
//! use serde_json::json;
//!
//! /// A flag that can be set once and read.
//! struct Flag;
//! #[derive(Clone, PartialEq, Eq, Hash, Debug)]
//! enum FlagOp { Set, Read(bool) }
//!
//! impl Model for Flag {
//!     type State = bool;
//!     type Op = FlagOp;
//!     fn init(&self) -> bool { false }
//!     fn op(&self, pair: &OpPair, c: Completion) -> Result<Option<FlagOp>, String> {
//!         match (pair.f.as_str(), c) {
//!             (_, Completion::Failed) => Ok(None),              // never happened
//!             ("set", _) => Ok(Some(FlagOp::Set)),
//!             ("read", Completion::Ok) => Ok(Some(FlagOp::Read(pair.value == json!(true)))),
//!             ("read", _) => Ok(None),                          // unknown result
//!             (f, _) => Err(format!("no op {f}")),
//!         }
//!     }
//!     fn step(&self, s: &bool, op: &FlagOp) -> Option<bool> {
//!         match op {
//!             FlagOp::Set => Some(true),
//!             FlagOp::Read(v) => (v == s).then_some(*s),
//!         }
//!     }
//! }
//!
//! let c = |p, t, f: &str, v| Op::new(Process::Client(p), t, f, v);
//! let history = History::new(vec![
//!     c(0, OpType::Invoke, "set", json!(null)),
//!     c(0, OpType::Ok, "set", json!(null)),
//!     c(1, OpType::Invoke, "read", json!(null)),
//!     c(1, OpType::Ok, "read", json!(false)), // stale: the set had completed
//! ]).unwrap();
//! let result = check_model(&Flag, &history, &LinearizabilityOptions::default());
//! assert_eq!(result.valid, splitbrain_checkers::Validity::Invalid);
//! ```

pub mod bench;
mod explain;
mod factor;
mod fxhash;
mod generate;
mod init;
mod model;
pub mod models;
mod multireg;
mod online;
mod part;
mod perkey;
mod prepare;
mod relaxed;
mod run;
mod search;
mod tables;

pub use generate::{generate_keyed_cas_history, write_keyed_cas_history};
pub use init::{InitFromJson, WithInit};
pub use model::{run_sequential, Completion, Model, Val};
pub use run::check_model;

use crate::history::History;
use crate::verdict::{CheckBounds, CheckResult, Checker, Validity};
use models::{
    CounterModel, KvModel, ListAppendModel, MultiRegisterModel, MutexModel, QueueModel,
    RegisterModel, SetModel,
};
use serde_json::Value;

/// What a `fail` completion of a `cas` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailedCas {
    /// Jepsen's reading: a failed cas never took effect, and is dropped.
    #[default]
    Jepsen,
    /// The compare failed: at its linearization point (within its interval) the register
    /// held a value other than the expected one. Behind Porcupine's etcd verdicts.
    Observed,
}

impl FailedCas {
    /// `Observed` when `observed` (the `--failed-cas observed` flag), else `Jepsen`.
    pub fn observed_if(observed: bool) -> FailedCas {
        if observed {
            FailedCas::Observed
        } else {
            FailedCas::Jepsen
        }
    }
}

/// Options of the linearizability checker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinearizabilityOptions {
    /// Check each key as an independent object (default). `false` checks a keyed history
    /// as one object (a map of per-key states).
    pub split_by_key: bool,
    /// What a failed cas means.
    pub failed_cas: FailedCas,
    /// Time and memory bounds; hitting one gives `unknown`.
    pub bounds: CheckBounds,
}

impl Default for LinearizabilityOptions {
    fn default() -> Self {
        LinearizabilityOptions {
            split_by_key: true,
            failed_cas: FailedCas::Jepsen,
            bounds: CheckBounds::default(),
        }
    }
}

/// The model name given to [`LinearizabilityChecker::new`] is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown linearizability model `{0}`; known models: {known}", known = model_names())]
pub struct UnknownModel(pub String);

fn model_names() -> String {
    models()
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

const MODELS: &[(&str, &str)] = &[
    ("register", "read/write register, initially null"),
    (
        "cas-register",
        "read/write/compare-and-set register, initially null",
    ),
    ("kv", "get/put/append on a string per key, initially \"\""),
    (
        "list-append",
        "append x / read the whole list, per key, initially []",
    ),
    (
        "multi-register",
        "txn of [\"r\"|\"w\", key, value] micro-ops over a map of registers",
    ),
    (
        "set",
        "add x / read all elements (order-insensitive), initially empty",
    ),
    (
        "queue",
        "FIFO enqueue x / dequeue (null when empty), initially empty",
    ),
    ("counter", "add n / read, initially 0"),
    ("mutex", "acquire / release, initially free"),
];

/// The built-in models: (name, one-line description).
pub fn models() -> &'static [(&'static str, &'static str)] {
    MODELS
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModelKind {
    Register,
    CasRegister,
    Kv,
    ListAppend,
    MultiRegister,
    Set,
    Queue,
    Counter,
    Mutex,
}

/// The linearizability checker over one of the built-in [`models()`].
#[derive(Debug, Clone)]
pub struct LinearizabilityChecker {
    model: ModelKind,
    options: LinearizabilityOptions,
    /// The model's initial state as JSON, when not its own (validated).
    init: Option<Value>,
}

/// The initial state given for a model is not one of its states.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad initial state for the {model} model: {reason}")]
pub struct BadInit {
    /// The model.
    pub model: String,
    /// Why the JSON is not one of its states.
    pub reason: String,
}

impl LinearizabilityChecker {
    /// A checker for the named model (see [`models()`]).
    pub fn new(model: &str, options: LinearizabilityOptions) -> Result<Self, UnknownModel> {
        let kind = match model {
            "register" => ModelKind::Register,
            "cas-register" => ModelKind::CasRegister,
            "kv" => ModelKind::Kv,
            "list-append" => ModelKind::ListAppend,
            "multi-register" => ModelKind::MultiRegister,
            "set" => ModelKind::Set,
            "queue" => ModelKind::Queue,
            "counter" => ModelKind::Counter,
            "mutex" => ModelKind::Mutex,
            other => return Err(UnknownModel(other.to_string())),
        };
        Ok(LinearizabilityChecker {
            model: kind,
            options,
            init: None,
        })
    }

    /// Starts the model at `init` (JSON, as the model's `state_json` shows it: a register
    /// at `0`, a counter at `100`, a multi-register at `{"x": 0, "y": 0}`, a list at
    /// `[1, 2]`) instead of its own initial state. For per-key models every key starts
    /// there.
    pub fn with_init(mut self, init: Value) -> Result<Self, BadInit> {
        let probe = self.dispatch(Some(&init), &History::default(), Probe::Parse);
        if let Err(reason) = probe {
            return Err(BadInit {
                model: self.model_name().to_string(),
                reason,
            });
        }
        self.init = Some(init);
        Ok(self)
    }

    fn model_name(&self) -> &'static str {
        MODELS
            .iter()
            .zip(ALL_KINDS)
            .find(|(_, k)| *k == self.model)
            .map_or("", |((n, _), _)| n)
    }

    /// Runs `what` on the model, started at `init` when given.
    fn dispatch(
        &self,
        init: Option<&Value>,
        history: &History,
        what: Probe,
    ) -> Result<Option<CheckResult>, String> {
        let o = &self.options;
        let register = |cas| RegisterModel {
            cas,
            failed_cas: o.failed_cas,
        };
        match self.model {
            ModelKind::Register => run_with(register(false), init, history, o, what),
            ModelKind::CasRegister => run_with(register(true), init, history, o, what),
            ModelKind::Kv => run_with(KvModel, init, history, o, what),
            ModelKind::ListAppend => run_with(ListAppendModel, init, history, o, what),
            ModelKind::MultiRegister => run_with(MultiRegisterModel, init, history, o, what),
            ModelKind::Set => run_with(SetModel, init, history, o, what),
            ModelKind::Queue => run_with(QueueModel, init, history, o, what),
            ModelKind::Counter => run_with(CounterModel, init, history, o, what),
            ModelKind::Mutex => run_with(MutexModel, init, history, o, what),
        }
    }
}

/// What [`LinearizabilityChecker::dispatch`] does with the model.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Only parse the initial state.
    Parse,
    /// Check the history.
    Check,
}

/// [`check_model`] on `model`, started at `init` when given.
fn run_with<M: InitFromJson>(
    model: M,
    init: Option<&Value>,
    history: &History,
    options: &LinearizabilityOptions,
    what: Probe,
) -> Result<Option<CheckResult>, String> {
    let init = init.map(|v| model.state_from_json(v)).transpose()?;
    if what == Probe::Parse {
        return Ok(None);
    }
    // Always through `WithInit` (its own initial state when none is given): checking the
    // bare model too would compile the whole search a second time for every model, and
    // `WithInit` changes nothing but where the search starts.
    let init = init.unwrap_or_else(|| model.init());
    Ok(Some(check_model(
        &WithInit { model, init },
        history,
        options,
    )))
}

/// The model kinds in [`MODELS`]' order.
const ALL_KINDS: [ModelKind; 9] = [
    ModelKind::Register,
    ModelKind::CasRegister,
    ModelKind::Kv,
    ModelKind::ListAppend,
    ModelKind::MultiRegister,
    ModelKind::Set,
    ModelKind::Queue,
    ModelKind::Counter,
    ModelKind::Mutex,
];

impl Checker for LinearizabilityChecker {
    fn name(&self) -> String {
        "linearizable".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        // The initial state was validated by `with_init`, so this cannot fail.
        let r = match self.dispatch(self.init.as_ref(), history, Probe::Check) {
            Ok(Some(r)) => r,
            Ok(None) => CheckResult::new("linearizable", Validity::Unknown, "nothing was checked"),
            Err(reason) => CheckResult::new("linearizable", Validity::Unknown, reason),
        };
        // Updates alone are always linearizable: only ops that observe the state test it.
        let (what, counted_as, n) = self.observations(history);
        let mut r = r.unless_unobserved(n, &format!("no ok {what}"));
        r.coverage.set(counted_as, n);
        r
    }

    /// Key by key, segment by segment between the key's quiet points (`online.rs`).
    fn online(&self) -> Option<Box<dyn crate::verdict::OnlineCheck>> {
        let o = &self.options;
        let (init, split) = (self.init.as_ref(), o.split_by_key);
        let register = |cas| RegisterModel {
            cas,
            failed_cas: o.failed_cas,
        };
        let checker = match self.model {
            ModelKind::Register => online::online_with(register(false), init, split),
            ModelKind::CasRegister => online::online_with(register(true), init, split),
            ModelKind::Kv => online::online_with(KvModel, init, split),
            ModelKind::ListAppend => online::online_with(ListAppendModel, init, split),
            ModelKind::MultiRegister => online::online_with(MultiRegisterModel, init, split),
            ModelKind::Set => online::online_with(SetModel, init, split),
            ModelKind::Queue => online::online_with(QueueModel, init, split),
            ModelKind::Counter => online::online_with(CounterModel, init, split),
            ModelKind::Mutex => online::online_with(MutexModel, init, split),
        };
        checker.ok()
    }
}

impl LinearizabilityChecker {
    /// The model's observing ops (what a valid verdict rests on), named, and how many
    /// completed: reads, an ok `cas` (it saw its expected value) or a failed one taken as
    /// an observation, dequeues, acquires, transactions that read.
    /// Returns (what one is called, its name in the coverage, how many).
    fn observations(&self, history: &History) -> (&'static str, &'static str, u64) {
        use crate::history::Outcome;
        let read = |f: &str| matches!(f, "read" | "get" | "r");
        let observed_fail = self.options.failed_cas == FailedCas::Observed;
        let mut n = 0u64;
        for s in history.pair_slots() {
            let f = history.op_f(s.invoke_pos).unwrap_or("");
            let counts = match (self.model, s.outcome) {
                (ModelKind::CasRegister, Outcome::Fail) => observed_fail && f == "cas",
                (_, Outcome::Ok) => match self.model {
                    ModelKind::CasRegister => read(f) || f == "cas",
                    ModelKind::Queue => f == "dequeue",
                    ModelKind::Mutex => matches!(f, "acquire" | "lock"),
                    ModelKind::MultiRegister => {
                        f == "txn"
                            && s.complete_pos
                                .and_then(|c| history.op_value(c))
                                .and_then(|v| {
                                    v.as_array().map(|mops| {
                                        mops.iter().any(|m| {
                                            m.get(0).and_then(Value::as_str).is_some_and(read)
                                        })
                                    })
                                })
                                .unwrap_or(false)
                    }
                    _ => read(f),
                },
                _ => false,
            };
            n += u64::from(counts);
        }
        let (what, counted_as) = match self.model {
            ModelKind::CasRegister => ("read or cas", "reads and cas"),
            ModelKind::Queue => ("dequeue", "dequeues"),
            ModelKind::Mutex => ("acquire", "acquires"),
            ModelKind::MultiRegister => ("transaction with a read", "reading txns"),
            _ => ("read", "reads"),
        };
        (what, counted_as, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};
    use serde_json::json;

    fn pair(p: u64, f: &str, done: OpType, v: Value) -> [Op; 2] {
        [
            Op::new(Process::Client(p), OpType::Invoke, f, v.clone()),
            Op::new(Process::Client(p), done, f, v),
        ]
    }

    fn check(model: &str, ops: Vec<Op>) -> CheckResult {
        let c = LinearizabilityChecker::new(model, LinearizabilityOptions::default()).unwrap();
        c.check(&History::new(ops).unwrap())
    }

    #[test]
    fn a_history_with_no_completed_op_is_unknown() {
        let mut ops = pair(0, "write", OpType::Info, json!(1)).to_vec();
        ops.extend(pair(1, "read", OpType::Fail, Value::Null));
        let r = check("register", ops);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(
            r.explanation.contains("no completed op"),
            "{}",
            r.explanation
        );
        assert_eq!(r.coverage.get("ops"), Some(0));
        let r = check("register", Vec::new());
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    }

    #[test]
    fn acknowledged_writes_never_read_are_unknown() {
        let mut ops = pair(0, "write", OpType::Ok, json!(1)).to_vec();
        ops.extend(pair(1, "write", OpType::Ok, json!(2)));
        let r = check("cas-register", ops);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(
            r.explanation.starts_with("no ok read or cas"),
            "{}",
            r.explanation
        );
        assert_eq!(r.coverage.get("reads and cas"), Some(0));
        let r = check("queue", pair(0, "enqueue", OpType::Ok, json!(1)).to_vec());
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(
            r.explanation.starts_with("no ok dequeue"),
            "{}",
            r.explanation
        );
    }

    #[test]
    fn a_read_earns_a_valid_verdict() {
        let mut ops = pair(0, "write", OpType::Ok, json!(1)).to_vec();
        ops.extend(pair(1, "read", OpType::Ok, json!(1)));
        let r = check("register", ops);
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        assert_eq!(r.coverage.to_string(), "2 ops, 0 unsure ops, 1 reads");
    }
}
