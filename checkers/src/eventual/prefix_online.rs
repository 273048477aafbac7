//! `committed-prefix` online: a committed position that changes, found while the run
//! goes on.
//!
//! Bayou's commit order is final, so a read's committed list is a fact about every
//! longer history: once two ok reads of a key name different elements at one committed
//! position, or one names an element twice, the whole history's `committed-prefix`
//! check (which walks the same reads in the same completion order) finds it too. Held
//! per key: the committed list as first shown, position by position (element ids, not
//! the reads), and the key of each process's pending read. A read whose value does not
//! decode is skipped here as there.

use super::view::{decode_read, ReadValue};
use super::EventualDataType;
use crate::history::{value_key_string, Op, OpType, Process};
use crate::verdict::{CheckResult, OnlineCheck, Validity};
use serde_json::{json, Value};
use std::collections::HashMap;

/// The online `committed-prefix` check ([`crate::Checker::online`] of
/// [`super::CommittedPrefixChecker`]).
#[derive(Debug, Default)]
pub(crate) struct OnlinePrefix {
    /// Per key: the element first shown at each committed position, and the read op
    /// (its completion's index) that showed it.
    canon: HashMap<String, Vec<(i64, u64)>>,
    /// Per process: the key its pending read named (`None`: it named none).
    pending: HashMap<u64, Option<String>>,
}

fn key_string(k: &Value) -> String {
    value_key_string(k)
}

fn invalid(anomaly: &str, key: &str, text: String, reads: &[u64]) -> CheckResult {
    let mut r = CheckResult::new(
        "committed-prefix",
        Validity::Invalid,
        format!("{text} (found online)"),
    );
    r.anomaly_types.push(anomaly.to_string());
    r.details = json!({"key": key, "reads": reads});
    r
}

impl OnlineCheck for OnlinePrefix {
    fn push(&mut self, op: Op) -> Option<CheckResult> {
        let Process::Client(p) = op.process else {
            return None;
        };
        if op.f != "read" {
            return None;
        }
        if op.op_type == OpType::Invoke {
            self.pending.insert(p, op.key.as_ref().map(key_string));
            return None;
        }
        let invoked_key = self.pending.remove(&p).flatten();
        if op.op_type != OpType::Ok {
            return None;
        }
        let key = op
            .key
            .as_ref()
            .map(key_string)
            .or(invoked_key)
            .unwrap_or_default();
        let Ok(ReadValue::Split { committed, .. }) = decode_read(EventualDataType::Set, &op.value)
        else {
            return None;
        };
        let mut seen: HashMap<i64, usize> = HashMap::new();
        let twice = committed
            .iter()
            .enumerate()
            .find_map(|(i, e)| seen.insert(*e, i).map(|f| (f, i, *e)));
        if let Some((first, second, e)) = twice {
            return Some(invalid(
                "committed-duplicate",
                &key,
                format!(
                    "key {key}: read op {} holds {e} twice in its committed list, at positions {first} and {second}",
                    op.index
                ),
                &[op.index],
            ));
        }
        let canon = self.canon.entry(key.clone()).or_default();
        for (i, &e) in committed.iter().enumerate() {
            match canon.get(i) {
                Some(&(w, first)) if w != e => {
                    return Some(invalid(
                        "committed-prefix-changed",
                        &key,
                        format!(
                            "key {key}: committed position {i} held {w} in read op {first} but {e} in read op {}",
                            op.index
                        ),
                        &[first, op.index],
                    ));
                }
                Some(_) => {}
                None => canon.push((e, op.index)),
            }
        }
        None
    }

    /// No op is held: per key the committed positions seen, not reads.
    fn held_ops(&self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::super::CommittedPrefixChecker;
    use super::*;
    use crate::history::History;
    use crate::verdict::Checker;

    /// A read of `key` by process `p` returning `value`: invoke and completion.
    fn read(p: u64, key: &str, value: Value) -> [Op; 2] {
        let mut i = Op::new(Process::Client(p), OpType::Invoke, "read", Value::Null);
        i.key = Some(json!(key));
        let mut o = Op::new(Process::Client(p), OpType::Ok, "read", value);
        o.key = Some(json!(key));
        [i, o]
    }

    fn split(committed: &[i64]) -> Value {
        json!({"committed": committed, "tentative": []})
    }

    fn indexed(reads: Vec<[Op; 2]>) -> Vec<Op> {
        let mut ops: Vec<Op> = reads.into_iter().flatten().collect();
        for (i, o) in ops.iter_mut().enumerate() {
            o.index = i as u64;
        }
        ops
    }

    fn online(ops: &[Op]) -> Vec<CheckResult> {
        let mut o = CommittedPrefixChecker
            .online()
            .expect("committed-prefix checks online");
        ops.iter().filter_map(|op| o.push(op.clone())).collect()
    }

    fn whole(ops: &[Op]) -> CheckResult {
        CommittedPrefixChecker.check(&History::new(ops.to_vec()).unwrap())
    }

    #[test]
    fn no_observation_finds_nothing_and_the_whole_check_is_unknown() {
        assert!(online(&[]).is_empty());
        let ops = indexed(vec![read(0, "k", json!([1, 2]))]);
        assert!(online(&ops).is_empty());
        assert_eq!(whole(&ops).valid, Validity::Unknown);
    }

    #[test]
    fn garbage_is_never_invalid() {
        for junk in [
            json!("x"),
            json!({"committed": "no"}),
            json!(null),
            json!([1, "a"]),
        ] {
            let ops = indexed(vec![
                read(0, "k", split(&[1, 2])),
                read(1, "k", junk.clone()),
                read(0, "k", split(&[1, 2, 3])),
            ]);
            assert!(online(&ops).is_empty(), "{junk}");
            assert_ne!(whole(&ops).valid, Validity::Invalid, "{junk}");
        }
    }

    #[test]
    fn lagging_replicas_agree_and_the_whole_check_says_valid() {
        let ops = indexed(vec![
            read(0, "k", split(&[1])),
            read(1, "k", split(&[1, 2, 3])),
            read(0, "k", split(&[1, 2])),
            read(2, "other", split(&[2, 1])),
        ]);
        assert!(online(&ops).is_empty());
        assert_eq!(whole(&ops).valid, Validity::Valid);
    }

    #[test]
    fn a_changed_position_or_a_duplicate_is_found_and_confirmed_whole() {
        let cases = [
            (
                vec![
                    read(0, "k", split(&[1, 2])),
                    read(1, "k", split(&[1])),
                    read(1, "k", split(&[1, 3, 2])),
                ],
                "committed-prefix-changed",
            ),
            (
                vec![read(0, "k", split(&[1])), read(1, "k", split(&[1, 4, 4]))],
                "committed-duplicate",
            ),
        ];
        for (reads, anomaly) in cases {
            let ops = indexed(reads);
            // Nothing before the last read completes.
            assert!(online(&ops[..ops.len() - 1]).is_empty(), "{anomaly}");
            let found = online(&ops);
            assert_eq!(found.len(), 1, "{anomaly}: {found:?}");
            assert_eq!(found[0].anomaly_types, [anomaly]);
            assert_eq!(found[0].details["key"], "k");
            let w = whole(&ops);
            assert_eq!(w.valid, Validity::Invalid, "{anomaly}");
            assert!(
                w.anomaly_types.contains(&anomaly.to_string()),
                "{:?}",
                w.anomaly_types
            );
        }
    }

    #[test]
    fn a_key_named_only_by_the_invoke_is_the_reads_key() {
        let mut ops = indexed(vec![read(0, "k", split(&[1])), read(1, "k", split(&[2]))]);
        ops[3].key = None;
        let found = online(&ops);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(whole(&ops).valid, Validity::Invalid);
    }
}
