//! Jepsen's `exceptions` view (its unhandled-exceptions checker): the `info` and `fail`
//! client ops grouped by their `error`, most frequent first, each with its count, the
//! `f`s it hit and one example op. Informational, as in Jepsen: errors are what faults
//! cause, so the verdict is always valid and the groups are the result.

use super::{pair_json, plural};
use crate::history::{value_key_string, History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
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
        let (mut ops, mut ok) = (0u64, 0u64);
        for p in history.pairs() {
            ops += 1;
            ok += u64::from(p.outcome == Outcome::Ok);
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
        // Informational, but never a pass for a run in which nothing succeeded: there
        // the errors are the whole run.
        let (valid, text) = match (ops, ok) {
            (0, _) => (
                Validity::Unknown,
                "the history has no client operation".to_string(),
            ),
            (_, 0) => (
                Validity::Unknown,
                format!("no op completed ok, so the run observed nothing: {text}"),
            ),
            _ => (Validity::Valid, text),
        };
        let mut r = CheckResult::new("exceptions", valid, text);
        r.details = json!({"count": total, "groups": listed});
        r.with_coverage(Coverage::of([
            ("ops", ops),
            ("ok", ok),
            ("errors", total as u64),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    fn pair(p: u64, done: OpType, error: Option<&str>) -> [Op; 2] {
        let mut c = Op::new(Process::Client(p), done, "read", Value::Null);
        c.error = error.map(|e| json!(e));
        [
            Op::new(Process::Client(p), OpType::Invoke, "read", Value::Null),
            c,
        ]
    }

    #[test]
    fn a_run_in_which_nothing_succeeded_is_unknown() {
        let mut ops = pair(0, OpType::Fail, Some("timeout")).to_vec();
        ops.extend(pair(1, OpType::Info, None));
        let r = ExceptionsChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(
            r.explanation.contains("no op completed ok"),
            "{}",
            r.explanation
        );
        let r = ExceptionsChecker.check(&History::new(vec![]).unwrap());
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    }

    #[test]
    fn errors_beside_successes_are_grouped_and_valid() {
        let mut ops = pair(0, OpType::Fail, Some("timeout")).to_vec();
        ops.extend(pair(1, OpType::Ok, None));
        let r = ExceptionsChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        assert_eq!(r.details["groups"][0]["error"], "timeout");
    }
}
