//! Jepsen's `unique-ids` checker: every ok `generate` op returns an id, and no id may be
//! returned twice. Duplicates are named with how often each came back.

use super::{plural, MAX_LISTED};
use crate::history::{value_key_string, History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Checks unique-id histories; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct UniqueIdsChecker;

impl Checker for UniqueIdsChecker {
    fn name(&self) -> String {
        "unique-ids".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let mut attempted = 0usize;
        // id -> (times returned, history indices of the ops that returned it)
        let mut seen: HashMap<String, (Value, Vec<u64>)> = HashMap::new();
        let mut acknowledged = 0usize;
        for p in history.pairs().iter().filter(|p| p.f == "generate") {
            attempted += 1;
            if p.outcome != Outcome::Ok {
                continue;
            }
            acknowledged += 1;
            let index = history.op_index(p.complete_pos.unwrap_or(p.invoke_pos));
            seen.entry(value_key_string(&p.value))
                .or_insert_with(|| (p.value.clone(), Vec::new()))
                .1
                .push(index);
        }
        let mut dups: Vec<(&Value, &Vec<u64>)> = seen
            .values()
            .filter(|(_, at)| at.len() > 1)
            .map(|(v, at)| (v, at))
            .collect();
        dups.sort_by_key(|(_, at)| at[0]);
        let listed: Vec<Value> = dups
            .iter()
            .take(MAX_LISTED)
            .map(|(v, at)| json!({"id": v, "count": at.len(), "indices": at}))
            .collect();
        let details = json!({
            "attempted_count": attempted,
            "acknowledged_count": acknowledged,
            "duplicated_count": dups.len(),
            "duplicated": listed,
        });
        let mut r = match dups.first() {
            Some((v, at)) => {
                let mut r = CheckResult::new(
                    "unique-ids",
                    Validity::Invalid,
                    format!(
                        "{} returned more than once; the first, {v}, came back {} times (ops at indices {})",
                        plural(dups.len(), "id"),
                        at.len(),
                        at.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
                    ),
                );
                r.anomaly_types = vec!["duplicated".into()];
                r.evidence = listed;
                r
            }
            None => CheckResult::new(
                "unique-ids",
                Validity::Valid,
                format!("{acknowledged} acknowledged ids of {attempted} attempted, all distinct"),
            ),
        };
        r.details = details;
        r.with_coverage(Coverage::of([
            ("attempted", attempted as u64),
            ("ids", acknowledged as u64),
        ]))
        .unless_unobserved(
            acknowledged as u64,
            "no acknowledged generate (no id returned)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    fn generate(p: u64, done: OpType, id: Value) -> [Op; 2] {
        [
            Op::new(Process::Client(p), OpType::Invoke, "generate", Value::Null),
            Op::new(Process::Client(p), done, "generate", id),
        ]
    }

    #[test]
    fn no_acknowledged_id_is_unknown() {
        let mut ops = generate(0, OpType::Info, Value::Null).to_vec();
        ops.extend(generate(1, OpType::Fail, Value::Null));
        let r = UniqueIdsChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(
            r.explanation.contains("no acknowledged generate"),
            "{}",
            r.explanation
        );
        assert_eq!(r.coverage.get("ids"), Some(0));
    }

    #[test]
    fn distinct_ids_are_valid_and_a_repeat_is_invalid() {
        let mut ops = generate(0, OpType::Ok, json!(1)).to_vec();
        ops.extend(generate(1, OpType::Ok, json!(2)));
        let r = UniqueIdsChecker.check(&History::new(ops.clone()).unwrap());
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        ops.extend(generate(2, OpType::Ok, json!(1)));
        let r = UniqueIdsChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    }
}
