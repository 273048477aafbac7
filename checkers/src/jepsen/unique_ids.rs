//! Jepsen's `unique-ids` checker: every ok `generate` op returns an id, and no id may be
//! returned twice. Duplicates are named with how often each came back.

use super::{plural, MAX_LISTED};
use crate::history::{value_key_string, History, Outcome};
use crate::verdict::{CheckResult, Checker, Validity};
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
        r
    }
}
