//! Jepsen's `counter` checker: a counter with `add` (value: the increment) and `read`
//! (ok value: the count). Each ok read must lie within bounds: at least the initial value
//! plus every increment acknowledged before the read began, at most the initial value plus
//! every increment attempted (invoked, not failed) before the read completed. A negative
//! increment widens the bounds the other way. Failed adds never happened; `info` and
//! pending ones may have.

use super::{pair_json, plural, MAX_LISTED};
use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Value};

/// Checks counter histories; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct CounterChecker {
    /// The counter's value before the history began (Jepsen's is 0).
    pub initial: i64,
}

impl Checker for CounterChecker {
    fn name(&self) -> String {
        "counter".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let pairs = history.pairs();
        let n = history.len() + 1;
        // By history position: increments acknowledged (split by sign) up to each
        // completion, and attempted (split by sign) up to each invoke.
        let (mut done_pos, mut done_neg) = (vec![0i128; n], vec![0i128; n]);
        let (mut tried_pos, mut tried_neg) = (vec![0i128; n], vec![0i128; n]);
        let mut malformed: Vec<Value> = Vec::new();
        let mut adds = 0usize;
        for p in pairs.iter().filter(|p| p.f == "add") {
            let Some(v) = p.invoke_value.as_i64().or_else(|| p.value.as_i64()) else {
                malformed.push(pair_json(history, p));
                continue;
            };
            adds += 1;
            if p.outcome == Outcome::Fail {
                continue;
            }
            let tried = if v >= 0 {
                &mut tried_pos
            } else {
                &mut tried_neg
            };
            tried[p.invoke_pos + 1] += v as i128;
            if let (Outcome::Ok, Some(c)) = (p.outcome, p.complete_pos) {
                let done = if v >= 0 { &mut done_pos } else { &mut done_neg };
                done[c + 1] += v as i128;
            }
        }
        for a in [&mut done_pos, &mut done_neg, &mut tried_pos, &mut tried_neg] {
            for i in 1..n {
                a[i] += a[i - 1];
            }
        }
        let init = self.initial as i128;
        let mut reads = 0usize;
        let mut errors: Vec<Value> = Vec::new();
        let mut error_count = 0usize;
        let mut first_text = String::new();
        for p in pairs
            .iter()
            .filter(|p| p.f == "read" && p.outcome == Outcome::Ok)
        {
            let Some(c) = p.complete_pos else { continue };
            let Some(v) = p.value.as_i64() else {
                malformed.push(pair_json(history, p));
                continue;
            };
            reads += 1;
            // Acknowledged before the read's invoke (prefix up to its position), and
            // attempted before its completion.
            let i = p.invoke_pos;
            let lower = init + done_pos[i] + tried_neg[c];
            let upper = init + done_neg[i] + tried_pos[c];
            if (v as i128) < lower || (v as i128) > upper {
                error_count += 1;
                if errors.len() < MAX_LISTED {
                    if first_text.is_empty() {
                        first_text = format!(
                            "the read at index {} returned {v}, outside [{lower}, {upper}]: at least {lower} had been acknowledged before it began and at most {upper} attempted before it ended",
                            history.op_index(c)
                        );
                    }
                    let mut e = pair_json(history, p);
                    e["bounds"] = json!([lower as i64, upper as i64]);
                    errors.push(e);
                }
            }
        }
        let details = json!({
            "reads": reads, "adds": adds, "initial": self.initial,
            "error_count": error_count, "errors": errors,
            "malformed": malformed.iter().take(MAX_LISTED).collect::<Vec<_>>(),
        });
        let mut r = if error_count > 0 {
            let mut r = CheckResult::new(
                "counter",
                Validity::Invalid,
                format!(
                    "{} of {reads} out of bounds; {first_text}",
                    plural(error_count, "read")
                ),
            );
            r.evidence = errors;
            r.anomaly_types = vec!["out-of-bounds-read".into()];
            r
        } else if !malformed.is_empty() {
            let mut r = CheckResult::new(
                "counter",
                Validity::Unknown,
                format!(
                    "{} have no integer value (add needs its increment, an ok read its count), so the bounds are unknown",
                    plural(malformed.len(), "op")
                ),
            );
            r.evidence = malformed.into_iter().take(MAX_LISTED).collect();
            r
        } else {
            CheckResult::new(
                "counter",
                Validity::Valid,
                format!(
                    "all {} within the acknowledged and attempted increments",
                    plural(reads, "read")
                ),
            )
        };
        r.details = details;
        r.with_coverage(Coverage::of([
            ("adds", adds as u64),
            ("reads", reads as u64),
        ]))
        .unless_unobserved(reads as u64, "no ok read of the counter")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    fn op(p: u64, t: OpType, f: &str, v: Value) -> Op {
        Op::new(Process::Client(p), t, f, v)
    }

    #[test]
    fn a_counter_never_read_is_unknown() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "add", json!(1)),
            op(0, OpType::Ok, "add", json!(1)),
            op(1, OpType::Invoke, "read", Value::Null),
            op(1, OpType::Info, "read", Value::Null),
        ])
        .unwrap();
        let r = CounterChecker::default().check(&h);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(r.explanation.contains("no ok read"), "{}", r.explanation);
        assert_eq!(r.coverage.get("reads"), Some(0));
        assert_eq!(r.coverage.get("adds"), Some(1));
    }

    #[test]
    fn a_read_that_is_not_a_count_is_reported_not_judged() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "add", json!(1)),
            op(0, OpType::Ok, "add", json!(1)),
            op(1, OpType::Invoke, "read", Value::Null),
            op(1, OpType::Ok, "read", json!("lots")),
        ])
        .unwrap();
        let r = CounterChecker::default().check(&h);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert_eq!(r.evidence.len(), 1);
    }

    #[test]
    fn reads_within_bounds_are_valid_and_counted() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "add", json!(2)),
            op(0, OpType::Ok, "add", json!(2)),
            op(1, OpType::Invoke, "read", Value::Null),
            op(1, OpType::Ok, "read", json!(2)),
        ])
        .unwrap();
        let r = CounterChecker::default().check(&h);
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        assert_eq!(r.coverage.to_string(), "1 adds, 1 reads");
    }
}
