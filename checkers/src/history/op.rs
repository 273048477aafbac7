//! One operation of a history: Jepsen's op map, with Jepsen's field names.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// What kind of history event an op is.
///
/// An `Invoke` is followed by exactly one completion of the same process:
/// `Ok` (it took effect), `Fail` (it certainly did not) or `Info` (unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    /// The client started the operation.
    Invoke,
    /// The operation took effect; `value` is its result.
    Ok,
    /// The operation certainly did not take effect.
    Fail,
    /// The outcome is unknown: it may or may not have taken effect.
    Info,
}

impl OpType {
    /// The name used in histories (`invoke`, `ok`, `fail`, `info`).
    pub fn as_str(self) -> &'static str {
        match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        }
    }

    /// Parses a history name; `None` for anything else.
    pub fn parse(s: &str) -> Option<OpType> {
        match s {
            "invoke" => Some(OpType::Invoke),
            "ok" => Some(OpType::Ok),
            "fail" => Some(OpType::Fail),
            "info" => Some(OpType::Info),
            _ => None,
        }
    }
}

/// Who issued an op: a logical client (Jepsen's integer process) or the nemesis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    /// A logical client. A process whose op ended `info` never invokes again.
    Client(u64),
    /// The fault injector; its ops are `info` records of fault starts and stops.
    Nemesis,
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(p) => write!(f, "{p}"),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}

impl Serialize for Process {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(p) => s.serialize_u64(*p),
            Process::Nemesis => s.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Process;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer process id or \"nemesis\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Process, E> {
                Ok(Process::Client(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Process, E> {
                u64::try_from(v)
                    .map(Process::Client)
                    .map_err(|_| E::custom(format!("negative process id {v}")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Process, E> {
                if v == "nemesis" {
                    Ok(Process::Nemesis)
                } else {
                    Err(E::custom(format!(
                        "process must be an integer or \"nemesis\", got {v:?}"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// One history event, in Jepsen's shape.
///
/// `value` is the argument on an invoke and the result on an `ok`. For `cas` it is
/// `[expected, new]`; for `txn` a list of `[f, key, value]` micro-ops.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history, dense from 0. Readers keep the index the history carried
    /// until [`crate::History`] records it (see [`crate::History::op_index`]); one that
    /// carried none reads as [`NO_INDEX`].
    #[serde(default = "no_index")]
    pub index: u64,
    /// Nanoseconds since the test began, from a monotonic clock.
    #[serde(default)]
    pub time: u64,
    /// The logical client or the nemesis.
    pub process: Process,
    /// Invoke or one of the three completions.
    #[serde(rename = "type")]
    pub op_type: OpType,
    /// The operation's name: `read`, `write`, `cas`, `append`, `txn`, ... Elle's histories
    /// may omit it; readers then infer it (see [`crate::history::read`]).
    #[serde(default)]
    pub f: String,
    /// The key, for keyed workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Value>,
    /// Argument (invoke) or result (ok).
    #[serde(default)]
    pub value: Value,
    /// The node the client spoke to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Why an op failed or is unknown, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

/// The index of an op read from a history that gave it none.
pub const NO_INDEX: u64 = u64::MAX;

fn no_index() -> u64 {
    NO_INDEX
}

impl Op {
    /// A new op with no key, node or error.
    pub fn new(process: Process, op_type: OpType, f: impl Into<String>, value: Value) -> Op {
        Op {
            index: 0,
            time: 0,
            process,
            op_type,
            f: f.into(),
            key: None,
            value,
            node: None,
            error: None,
        }
    }

    /// Sets the key (builder style).
    pub fn with_key(mut self, key: impl Into<Value>) -> Op {
        self.key = Some(key.into());
        self
    }

    /// Sets the time in nanoseconds (builder style).
    pub fn at(mut self, time: u64) -> Op {
        self.time = time;
        self
    }

    /// True for client ops, false for the nemesis.
    pub fn is_client(&self) -> bool {
        matches!(self.process, Process::Client(_))
    }

    /// The key rendered as a stable string (`"k7"` stays `k7`, `7` becomes `7`), for
    /// partitioning and display. `None` when the op has no key.
    pub fn key_string(&self) -> Option<String> {
        self.key.as_ref().map(value_key_string)
    }
}

/// Renders a JSON key as a stable string: strings without quotes, anything else as JSON.
pub fn value_key_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
