//! `lost-appends`: on single-key list histories (`append` of a unique element, `read`
//! returning the key's whole list), every acknowledged append whose element is missing
//! from the last successful read of its key, a read invoked after the append completed,
//! is `lost`: the system said it had it and later shows it does not. The
//! linearizability check already rejects such a history; this one names the elements,
//! as Jepsen's set-full does, and counts them.

use super::{plural, MAX_LISTED};
use crate::history::{value_key_string, History, Outcome};
use crate::verdict::{CheckResult, Checker, Validity};
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
                    let list = p.value.as_array().cloned().unwrap_or_default();
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
        for (key, appends) in &acked {
            let Some((read_pos, read_index, list)) = last_read.get(key) else {
                continue;
            };
            let seen: HashSet<String> = list.iter().map(value_key_string).collect();
            let before = lost.len();
            for a in appends.iter().filter(|a| a.completed < *read_pos) {
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
        let checked: usize = acked.values().map(Vec::len).sum();
        if lost.is_empty() {
            let mut r = CheckResult::new(
                "lost-appends",
                Validity::Valid,
                format!(
                    "every acknowledged append read afterwards is in its key's last read ({} checked)",
                    plural(checked, "append")
                ),
            );
            r.details = json!({ "lost": 0, "acknowledged": checked });
            return r;
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
        r.details = json!({ "lost": lost.len(), "acknowledged": checked });
        r.evidence = lost.into_iter().take(MAX_LISTED).collect();
        r
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
        ]);
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
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
