//! Verdicts and the [`Checker`] interface every checker implements.

use crate::history::History;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// A checker's verdict: valid, invalid, or unknown (a bound was hit before deciding).
///
/// Serialized as Jepsen does: `true`, `false` or `"unknown"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Validity {
    /// The history satisfies the property.
    Valid,
    /// The history violates the property; the result carries the evidence.
    Invalid,
    /// The checker could not decide within its bounds; the result says which and how far.
    Unknown,
}

impl Validity {
    /// Combines verdicts of several checkers: any invalid wins, then any unknown.
    pub fn merge(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (Invalid, _) | (_, Invalid) => Invalid,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => Valid,
        }
    }

    /// The process exit code DESIGN.md assigns: 0 valid, 1 invalid, 3 unknown.
    pub fn exit_code(self) -> i32 {
        match self {
            Validity::Valid => 0,
            Validity::Invalid => 1,
            Validity::Unknown => 3,
        }
    }

    /// `valid`, `INVALID` or `unknown`, for terminal output.
    pub fn label(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::Invalid => "INVALID",
            Validity::Unknown => "unknown",
        }
    }
}

impl Serialize for Validity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::Valid => s.serialize_bool(true),
            Validity::Invalid => s.serialize_bool(false),
            Validity::Unknown => s.serialize_str("unknown"),
        }
    }
}

impl<'de> Deserialize<'de> for Validity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(true) => Ok(Validity::Valid),
            Value::Bool(false) => Ok(Validity::Invalid),
            Value::String(s) if s == "unknown" => Ok(Validity::Unknown),
            other => Err(serde::de::Error::custom(format!(
                "valid must be true, false or \"unknown\", got {other}"
            ))),
        }
    }
}

/// What one checker concluded about a history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// The checker's name (`linearizable`, `elle-list-append`, `bank`, ...).
    pub checker: String,
    /// The verdict.
    pub valid: Validity,
    /// A plain-language explanation a person can follow: why invalid, or which bound
    /// stopped the search and how far it got.
    #[serde(default)]
    pub explanation: String,
    /// The smallest set of ops that shows the anomaly (as history ops), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Value>,
    /// Elle's anomaly names found (`G1c`, `G-single-item`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anomaly_types: Vec<String>,
    /// The weakest consistency models ruled out (Elle's `not`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not: Vec<String>,
    /// Models ruled out because they imply one in `not` (Elle's `also_not`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_not: Vec<String>,
    /// Checker-specific detail (counterexample structure, statistics).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub details: Value,
}

impl CheckResult {
    /// A result with just a verdict and explanation.
    pub fn new(
        checker: impl Into<String>,
        valid: Validity,
        explanation: impl Into<String>,
    ) -> Self {
        CheckResult {
            checker: checker.into(),
            valid,
            explanation: explanation.into(),
            evidence: Vec::new(),
            anomaly_types: Vec::new(),
            not: Vec::new(),
            also_not: Vec::new(),
            details: Value::Null,
        }
    }
}

/// Resource bounds for a check. Hitting one yields [`Validity::Unknown`], never a hang
/// or an out-of-memory kill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckBounds {
    /// Wall-clock budget for the whole check.
    pub time_limit: Option<Duration>,
    /// Approximate memory budget in bytes for the checker's own search state.
    pub max_memory: Option<u64>,
}

/// A consistency checker: a pure function from a history to a verdict with evidence.
pub trait Checker: Send + Sync {
    /// The checker's name, as it appears in results.json.
    fn name(&self) -> String;
    /// Checks the history. Must return (with `Unknown` if need be) within its bounds.
    fn check(&self, history: &History) -> CheckResult;
}
