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
    /// What the checker actually checked (ops, keys, reads, ...): a verdict is only as
    /// good as what it saw. Absent in results written before it existed.
    #[serde(default, skip_serializing_if = "Coverage::is_empty")]
    pub coverage: Coverage,
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
            coverage: Coverage::default(),
        }
    }

    /// This result with `coverage` recorded.
    pub fn with_coverage(mut self, coverage: Coverage) -> Self {
        self.coverage = coverage;
        self
    }

    /// No verdict without evidence: a `valid` result whose checker observed none of what
    /// its property needs (`observed == 0`) becomes `unknown`, naming what was missing
    /// (`missing`, e.g. "no ok read"). Invalid and unknown results stand as they are: an
    /// anomaly found is evidence, and an unknown already says why. The checker's own
    /// explanation is kept after the reason.
    pub fn unless_unobserved(mut self, observed: u64, missing: &str) -> Self {
        if self.valid == Validity::Valid && observed == 0 {
            self.valid = Validity::Unknown;
            // What the checker said stays, after the reason: its counts and notes.
            self.explanation = format!("{missing}, so nothing was checked ({})", self.explanation);
        }
        self
    }
}

/// What a checker checked: named counts in the order the checker gives them (`ops`,
/// `keys`, `reads`, `transactions`, `steps`, ...). Serialized as a JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage(Vec<(String, u64)>);

impl Coverage {
    /// Coverage from `(name, count)` pairs, in that order.
    pub fn of<'a>(counts: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut c = Coverage::default();
        for (name, n) in counts {
            c.set(name, n);
        }
        c
    }

    /// Sets the count `name` (added at the end when new).
    pub fn set(&mut self, name: &str, n: u64) {
        match self.0.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = n,
            None => self.0.push((name.to_string(), n)),
        }
    }

    /// The count `name`, if recorded.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| *v)
    }

    /// True when nothing was recorded (results written before coverage existed).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// One short line: `120 ops, 4 keys, 60 reads`.
impl std::fmt::Display for Coverage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v} {k}")?;
        }
        Ok(())
    }
}

impl Serialize for Coverage {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Coverage {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Counts;
        impl<'de> serde::de::Visitor<'de> for Counts {
            type Value = Coverage;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of named counts")
            }
            // Visiting the map keeps the order the counts were written in.
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<Coverage, A::Error> {
                let mut c = Coverage::default();
                while let Some((k, v)) = a.next_entry::<String, u64>()? {
                    c.set(&k, v);
                }
                Ok(c)
            }
        }
        d.deserialize_map(Counts)
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
    /// A checker of the same property that takes the history an op at a time while it is
    /// recorded, holding only what is still undecided; `None` (the default) when this
    /// checker has none.
    fn online(&self) -> Option<Box<dyn OnlineCheck>> {
        None
    }
}

/// A checker fed the history one op at a time, in index order, as it is recorded
/// ([`Checker::online`]). It may only ever say INVALID, and only for what the whole
/// history's check will also find invalid: a longer history can never repair it.
pub trait OnlineCheck: Send {
    /// Takes the next op; an INVALID result when what it completed cannot be repaired.
    fn push(&mut self, op: crate::history::Op) -> Option<CheckResult>;
    /// Ops (invokes, with their completions once they came) held because what they
    /// belong to is still undecided.
    fn held_ops(&self) -> usize;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_round_trips_in_order_and_old_results_still_parse() {
        let mut r = CheckResult::new("x", Validity::Valid, "fine").with_coverage(Coverage::of([
            ("ops", 12),
            ("keys", 3),
            ("reads", 0),
        ]));
        let text = serde_json::to_string(&r).unwrap();
        assert!(
            text.contains(r#""coverage":{"ops":12,"keys":3,"reads":0}"#),
            "{text}"
        );
        let back: CheckResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.coverage.to_string(), "12 ops, 3 keys, 0 reads");
        r.coverage = Coverage::default();
        let old = serde_json::to_string(&r).unwrap();
        assert!(!old.contains("coverage"), "{old}");
        let parsed: CheckResult =
            serde_json::from_str(r#"{"checker":"x","valid":true,"explanation":"e"}"#).unwrap();
        assert!(parsed.coverage.is_empty());
    }

    #[test]
    fn a_valid_verdict_without_observations_becomes_unknown_naming_what_was_missing() {
        let r = CheckResult::new("x", Validity::Valid, "all 0 reads fine")
            .unless_unobserved(0, "no ok read");
        assert_eq!(r.valid, Validity::Unknown);
        assert!(r.explanation.starts_with("no ok read"), "{}", r.explanation);
        let kept =
            CheckResult::new("x", Validity::Valid, "fine").unless_unobserved(1, "no ok read");
        assert_eq!(kept.valid, Validity::Valid);
        let invalid =
            CheckResult::new("x", Validity::Invalid, "bad").unless_unobserved(0, "no ok read");
        assert_eq!(invalid.valid, Validity::Invalid);
    }
}
