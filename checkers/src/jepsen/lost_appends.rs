//! `lost-appends`: on single-key list histories (`append` of a unique element, `read`
//! returning the key's whole list), every acknowledged append whose element is missing
//! from the last successful read of its key, a read invoked after the append completed,
//! is `lost`: the system said it had it and later shows it does not. The
//! linearizability check already rejects such a history; this one names the elements,
//! as Jepsen's set-full does, and counts them.

use super::{plural, MAX_LISTED};
use crate::history::{value_key_string, History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

/// Checks list-append histories; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct LostAppendsChecker;

/// One acknowledged append: the element and where its completion is in the history.
struct Acked {
    element: Value,
    completed: usize,
    index: u64,
}

impl Checker for LostAppendsChecker {
    fn name(&self) -> String {
        "lost-appends".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let mut acked: BTreeMap<String, Vec<Acked>> = BTreeMap::new();
        // key -> (invoke position, index, the list) of its last ok read, by invocation
        let mut last_read: BTreeMap<String, (usize, u64, Vec<Value>)> = BTreeMap::new();
        let mut reads = 0u64;
        // Indices of ok reads whose value is not a list (nil is the empty list): what
        // they saw is unknown, so they are reported, never taken as empty.
        let mut malformed: Vec<u64> = Vec::new();
        for p in history.pairs() {
            let (Some(key), Outcome::Ok) = (p.key_string(), p.outcome) else {
                continue;
            };
            match p.f.as_str() {
                "append" => acked.entry(key).or_default().push(Acked {
                    element: p.invoke_value.clone(),
                    completed: p.complete_pos.unwrap_or(p.invoke_pos),
                    index: history.op_index(p.invoke_pos),
                }),
                "read" => {
                    let list = match &p.value {
                        Value::Array(list) => list.clone(),
                        Value::Null => Vec::new(),
                        _ => {
                            malformed
                                .push(history.op_index(p.complete_pos.unwrap_or(p.invoke_pos)));
                            continue;
                        }
                    };
                    reads += 1;
                    let later = last_read
                        .get(&key)
                        .is_none_or(|(pos, _, _)| p.invoke_pos > *pos);
                    if later {
                        last_read.insert(key, (p.invoke_pos, history.op_index(p.invoke_pos), list));
                    }
                }
                _ => {}
            }
        }
        let mut lost = Vec::new();
        let mut keys_with_loss = 0usize;
        // Only appends a later read of their key could show count as checked.
        let mut checked = 0usize;
        for (key, appends) in &acked {
            let Some((read_pos, read_index, list)) = last_read.get(key) else {
                continue;
            };
            let seen: HashSet<String> = list.iter().map(value_key_string).collect();
            let before = lost.len();
            for a in appends.iter().filter(|a| a.completed < *read_pos) {
                checked += 1;
                if !seen.contains(&value_key_string(&a.element)) {
                    lost.push(json!({
                        "key": key,
                        "element": a.element,
                        "append_index": a.index,
                        "read_index": read_index,
                    }));
                }
            }
            keys_with_loss += usize::from(lost.len() > before);
        }
        let acknowledged: usize = acked.values().map(Vec::len).sum();
        let coverage = Coverage::of([
            ("appends", acknowledged as u64),
            ("reads", reads),
            ("checked appends", checked as u64),
        ]);
        let details = |lost: usize| {
            json!({ "lost": lost, "acknowledged": acknowledged, "checked": checked,
                    "malformed_reads": malformed.len(),
                    "malformed_read_indices": malformed.iter().take(MAX_LISTED).collect::<Vec<_>>() })
        };
        if lost.is_empty() && !malformed.is_empty() {
            let mut r = CheckResult::new(
                "lost-appends",
                Validity::Unknown,
                format!(
                    "{} returned a value that is not a list (the first at index {}), so what those keys held is unknown",
                    plural(malformed.len(), "ok read"),
                    malformed[0]
                ),
            );
            r.details = details(0);
            return r.with_coverage(coverage);
        }
        if lost.is_empty() {
            let mut r = CheckResult::new(
                "lost-appends",
                Validity::Valid,
                format!(
                    "every acknowledged append read afterwards is in its key's last read ({} checked of {acknowledged} acknowledged)",
                    plural(checked, "append")
                ),
            );
            r.details = details(0);
            return r.with_coverage(coverage).unless_unobserved(
                checked as u64,
                "no acknowledged append was followed by an ok read of its key",
            );
        }
        let shown: Vec<String> = lost
            .iter()
            .take(MAX_LISTED)
            .map(|l| format!("{} to {}", l["element"], l["key"].as_str().unwrap_or("?")))
            .collect();
        let mut r = CheckResult::new(
            "lost-appends",
            Validity::Invalid,
            format!(
                "{} acknowledged, then missing from the last read of {} ({} of {} keys): {}{}",
                plural(lost.len(), "append"),
                if keys_with_loss == 1 {
                    "its key"
                } else {
                    "their keys"
                },
                keys_with_loss,
                acked.len(),
                shown.join(", "),
                if lost.len() > MAX_LISTED { ", ..." } else { "" }
            ),
        );
        r.anomaly_types = vec!["lost-append".into()];
        r.details = details(lost.len());
        r.evidence = lost.into_iter().take(MAX_LISTED).collect();
        r.with_coverage(coverage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    fn op(p: u64, t: OpType, f: &str, key: &str, v: Value) -> Op {
        let mut o = Op::new(Process::Client(p), t, f.to_string(), v);
        o.key = Some(json!(key));
        o
    }

    fn check(ops: Vec<Op>) -> CheckResult {
        LostAppendsChecker.check(&History::new(ops).unwrap())
    }

    #[test]
    fn an_acknowledged_append_missing_from_a_later_read_is_lost() {
        let r = check(vec![
            op(0, OpType::Invoke, "append", "k1", json!(1)),
            op(0, OpType::Ok, "append", "k1", json!(1)),
            op(1, OpType::Invoke, "append", "k1", json!(2)),
            op(1, OpType::Ok, "append", "k1", json!(2)),
            op(0, OpType::Invoke, "read", "k1", Value::Null),
            op(0, OpType::Ok, "read", "k1", json!([1])),
        ]);
        assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
        assert_eq!(r.evidence.len(), 1);
        assert_eq!(r.evidence[0]["element"], json!(2));
        assert_eq!(r.anomaly_types, vec!["lost-append".to_string()]);
    }

    #[test]
    fn concurrent_unknown_and_unread_appends_are_not_lost() {
        let r = check(vec![
            // read concurrent with the append: it may precede it
            op(0, OpType::Invoke, "append", "k1", json!(1)),
            op(1, OpType::Invoke, "read", "k1", Value::Null),
            op(0, OpType::Ok, "append", "k1", json!(1)),
            op(1, OpType::Ok, "read", "k1", json!([])),
            // unknown outcome: may never have happened
            op(2, OpType::Invoke, "append", "k1", json!(2)),
            op(2, OpType::Info, "append", "k1", json!(2)),
            // a key never read
            op(3, OpType::Invoke, "append", "k2", json!(3)),
            op(3, OpType::Ok, "append", "k2", json!(3)),
            // a read after the unknown append, which checks nothing about acknowledged ones
            op(1, OpType::Invoke, "read", "k1", Value::Null),
            op(1, OpType::Ok, "read", "k1", json!([1])),
        ]);
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        // Only the append to k1 had a read after it; k2's was never checked.
        assert_eq!(r.coverage.get("checked appends"), Some(1));
        assert_eq!(r.coverage.get("appends"), Some(2));
    }

    #[test]
    fn appends_to_keys_never_read_afterwards_are_unknown_not_checked() {
        let r = check(vec![
            op(0, OpType::Invoke, "append", "k1", json!(1)),
            op(1, OpType::Invoke, "read", "k1", Value::Null),
            op(0, OpType::Ok, "append", "k1", json!(1)),
            op(1, OpType::Ok, "read", "k1", json!([])),
            op(3, OpType::Invoke, "append", "k2", json!(3)),
            op(3, OpType::Ok, "append", "k2", json!(3)),
        ]);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(
            r.explanation.contains("no acknowledged append"),
            "{}",
            r.explanation
        );
        assert_eq!(r.coverage.get("checked appends"), Some(0));
    }

    #[test]
    fn a_read_that_is_not_a_list_is_reported_not_taken_as_empty() {
        let r = check(vec![
            op(0, OpType::Invoke, "append", "k1", json!(1)),
            op(0, OpType::Ok, "append", "k1", json!(1)),
            op(1, OpType::Invoke, "read", "k1", Value::Null),
            op(1, OpType::Ok, "read", "k1", json!([1])),
            op(1, OpType::Invoke, "read", "k1", Value::Null),
            op(1, OpType::Ok, "read", "k1", json!("garbage")),
        ]);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(r.explanation.contains("not a list"), "{}", r.explanation);
        assert_eq!(r.details["malformed_read_indices"], json!([5]));
    }

    #[test]
    fn the_last_read_decides_not_an_earlier_stale_one() {
        let r = check(vec![
            op(0, OpType::Invoke, "append", "k1", json!(1)),
            op(0, OpType::Ok, "append", "k1", json!(1)),
            op(1, OpType::Invoke, "read", "k1", Value::Null),
            op(1, OpType::Ok, "read", "k1", json!([])),
            op(1, OpType::Invoke, "read", "k1", Value::Null),
            op(1, OpType::Ok, "read", "k1", json!([1])),
        ]);
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
    }
}
