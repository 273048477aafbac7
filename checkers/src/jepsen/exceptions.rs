//! Jepsen's `exceptions` view (its unhandled-exceptions checker): the `info` and `fail`
//! client ops grouped by their `error`, most frequent first, each with its count, the
//! `f`s it hit and one example op. Informational, as in Jepsen: errors are what faults
//! cause, so the verdict is always valid and the groups are the result.

use super::{pair_json, plural};
use crate::history::{value_key_string, History, Outcome};
use crate::verdict::{CheckResult, Checker, Validity};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};

/// Groups failed and indeterminate ops by error; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExceptionsChecker;

struct Group {
    error: Value,
    count: usize,
    fail: usize,
    info: usize,
    fs: BTreeSet<String>,
    example: Value,
    first: usize,
}

impl Checker for ExceptionsChecker {
    fn name(&self) -> String {
        "exceptions".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let mut groups: HashMap<String, Group> = HashMap::new();
        for p in history.pairs() {
            if !matches!(p.outcome, Outcome::Fail | Outcome::Info) {
                continue;
            }
            let error = p.error.clone().unwrap_or(Value::Null);
            let g = groups
                .entry(value_key_string(&error))
                .or_insert_with(|| Group {
                    error,
                    count: 0,
                    fail: 0,
                    info: 0,
                    fs: BTreeSet::new(),
                    example: pair_json(history, p),
                    first: p.invoke_pos,
                });
            g.count += 1;
            if p.outcome == Outcome::Fail {
                g.fail += 1;
            } else {
                g.info += 1;
            }
            g.fs.insert(p.f.clone());
        }
        let mut sorted: Vec<Group> = groups.into_values().collect();
        sorted.sort_by(|a, b| b.count.cmp(&a.count).then(a.first.cmp(&b.first)));
        let total: usize = sorted.iter().map(|g| g.count).sum();
        let listed: Vec<Value> = sorted
            .iter()
            .map(|g| {
                json!({"error": g.error, "count": g.count, "fail_count": g.fail,
                       "info_count": g.info, "fs": g.fs, "example": g.example})
            })
            .collect();
        let text = match sorted.first() {
            None => "no op failed or ended with an unknown outcome".to_string(),
            Some(g) => format!(
                "{} failed or ended unknown, with {}; the most frequent, {} ({} ops)",
                plural(total, "op"),
                plural(sorted.len(), "distinct error"),
                if g.error.is_null() {
                    "no error recorded".to_string()
                } else {
                    g.error.to_string()
                },
                g.count
            ),
        };
        let mut r = CheckResult::new("exceptions", Validity::Valid, text);
        r.details = json!({"count": total, "groups": listed});
        r
    }
}
