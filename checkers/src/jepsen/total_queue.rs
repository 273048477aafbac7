//! Jepsen's `total-queue` checker: `enqueue` (value: the element) and `dequeue` (ok
//! value: the element taken), plus `drain` (ok value: every element taken at the end).
//! With unique elements and the queue drained at the end, every acknowledged enqueue must
//! be dequeued (else `lost`), no element dequeued twice (`duplicated`) and none that was
//! never enqueued (`unexpected`). Elements of enqueues whose outcome is unknown that were
//! dequeued are `recovered` (fine).

use super::{plural, MAX_LISTED};
use crate::history::{value_key_string, History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// Checks queue histories; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct TotalQueueChecker;

/// How many elements `m` holds, and the first few of them.
fn listed(m: &BTreeMap<String, (Value, usize)>) -> (usize, Vec<Value>) {
    let shown = m
        .values()
        .take(MAX_LISTED)
        .map(|(v, _)| v.clone())
        .collect();
    (m.len(), shown)
}

impl Checker for TotalQueueChecker {
    fn name(&self) -> String {
        "total-queue".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        // element -> (value, how many) for attempted and acknowledged enqueues, and dequeues.
        let mut attempted: BTreeMap<String, (Value, usize)> = BTreeMap::new();
        let mut acknowledged: HashMap<String, ()> = HashMap::new();
        let mut dequeued: BTreeMap<String, (Value, usize)> = BTreeMap::new();
        // Ok dequeues and drains: what was observed of the queue.
        let mut observations = 0u64;
        // Drains whose value is not a list: what they took is unknown, not nothing.
        let mut malformed_drains: Vec<u64> = Vec::new();
        let mut take = |v: &Value| {
            dequeued
                .entry(value_key_string(v))
                .or_insert((v.clone(), 0))
                .1 += 1;
        };
        for p in history.pairs() {
            match (p.f.as_str(), p.outcome) {
                ("enqueue", Outcome::Fail) => {}
                ("enqueue", o) => {
                    let k = value_key_string(&p.invoke_value);
                    attempted
                        .entry(k.clone())
                        .or_insert((p.invoke_value.clone(), 0))
                        .1 += 1;
                    if o == Outcome::Ok {
                        acknowledged.insert(k, ());
                    }
                }
                ("dequeue", Outcome::Ok) => {
                    observations += 1;
                    if !p.value.is_null() {
                        take(&p.value)
                    }
                }
                ("drain", Outcome::Ok) => match p.value.as_array() {
                    Some(taken) => {
                        observations += 1;
                        taken.iter().for_each(&mut take);
                    }
                    None => malformed_drains
                        .push(history.op_index(p.complete_pos.unwrap_or(p.invoke_pos))),
                },
                _ => {}
            }
        }
        let lost_all: BTreeMap<String, (Value, usize)> = attempted
            .iter()
            .filter(|(k, _)| acknowledged.contains_key(*k) && !dequeued.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let unexpected_all: BTreeMap<String, (Value, usize)> = dequeued
            .iter()
            .filter(|(k, _)| !attempted.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let recovered_all: BTreeMap<String, (Value, usize)> = dequeued
            .iter()
            .filter(|(k, _)| attempted.contains_key(*k) && !acknowledged.contains_key(*k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (lost_n, lost) = listed(&lost_all);
        let (unexpected_n, unexpected) = listed(&unexpected_all);
        let (recovered_n, recovered) = listed(&recovered_all);
        // More dequeues of an element than enqueues of it (one, with unique elements).
        let duplicated_all: BTreeMap<String, (Value, usize)> = dequeued
            .iter()
            .filter(|(k, (_, n))| *n > attempted.get(*k).map_or(1, |a| a.1.max(1)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (duplicated_n, duplicated) = listed(&duplicated_all);
        let details = json!({
            "attempt_count": attempted.len(),
            "acknowledged_count": acknowledged.len(),
            "dequeued_count": dequeued.values().map(|(_, n)| n).sum::<usize>(),
            "lost_count": lost_n, "lost": lost,
            "unexpected_count": unexpected_n, "unexpected": unexpected,
            "duplicated_count": duplicated_n, "duplicated": duplicated,
            "recovered_count": recovered_n, "recovered": recovered,
        });
        let mut problems = Vec::new();
        let mut types = Vec::new();
        for (n, name, words, sample) in [
            (lost_n, "lost", "acknowledged but never dequeued", &lost),
            (
                duplicated_n,
                "duplicated",
                "dequeued more than once",
                &duplicated,
            ),
            (
                unexpected_n,
                "unexpected",
                "dequeued but never enqueued",
                &unexpected,
            ),
        ] {
            if n > 0 {
                types.push(name.to_string());
                problems.push(format!(
                    "{} {words} ({name}, e.g. {})",
                    plural(n, "element"),
                    sample.first().map(Value::to_string).unwrap_or_default()
                ));
            }
        }
        let coverage = Coverage::of([
            ("enqueues", acknowledged.len() as u64),
            ("dequeues", observations),
        ]);
        let mut r = if problems.is_empty() && !malformed_drains.is_empty() {
            CheckResult::new(
                "total-queue",
                Validity::Unknown,
                format!(
                    "{} returned a value that is not a list of elements (the first at index {}), so what the queue held is unknown",
                    plural(malformed_drains.len(), "ok drain"),
                    malformed_drains[0]
                ),
            )
        } else if problems.is_empty() {
            CheckResult::new(
                "total-queue",
                Validity::Valid,
                format!(
                    "every one of {} acknowledged enqueues dequeued exactly once; {recovered_n} of unknown outcome recovered",
                    acknowledged.len()
                ),
            )
        } else {
            let mut r = CheckResult::new("total-queue", Validity::Invalid, problems.join("; "));
            r.anomaly_types = types;
            r
        };
        r.details = details;
        r.with_coverage(coverage)
            .unless_unobserved(observations, "no ok dequeue or drain")
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
    fn a_queue_never_dequeued_from_is_unknown() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "enqueue", json!(1)),
            op(0, OpType::Info, "enqueue", json!(1)),
            op(1, OpType::Invoke, "dequeue", Value::Null),
            op(1, OpType::Fail, "dequeue", Value::Null),
        ])
        .unwrap();
        let r = TotalQueueChecker.check(&h);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(r.explanation.contains("no ok dequeue"), "{}", r.explanation);
    }

    #[test]
    fn a_drain_that_is_not_a_list_is_reported_not_read_as_empty() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "enqueue", json!(1)),
            op(0, OpType::Info, "enqueue", json!(1)),
            op(1, OpType::Invoke, "drain", Value::Null),
            op(1, OpType::Ok, "drain", json!("garbage")),
        ])
        .unwrap();
        let r = TotalQueueChecker.check(&h);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(r.explanation.contains("not a list"), "{}", r.explanation);
    }

    #[test]
    fn every_acknowledged_enqueue_dequeued_once_is_valid() {
        let h = History::new(vec![
            op(0, OpType::Invoke, "enqueue", json!(1)),
            op(0, OpType::Ok, "enqueue", json!(1)),
            op(1, OpType::Invoke, "dequeue", Value::Null),
            op(1, OpType::Ok, "dequeue", json!(1)),
        ])
        .unwrap();
        let r = TotalQueueChecker.check(&h);
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        assert_eq!(r.coverage.to_string(), "1 enqueues, 1 dequeues");
    }
}
