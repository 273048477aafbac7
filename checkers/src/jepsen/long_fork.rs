//! Jepsen's `long-fork` checker: the anomaly snapshot isolation forbids and parallel
//! snapshot isolation allows. Writes insert keys, each key written once (`[w k v]` or
//! `[append k v]` micro-ops); reads read several keys at once (`[r k v]`, nil or an empty
//! list when unseen). Under a single order of snapshots every two reads are ordered: one
//! saw every write (of their common keys) the other saw. Two reads where each saw a
//! write the other missed observed two writes in opposite orders: a long fork.

use super::{pair_json, plural, MAX_LISTED};
use crate::history::{value_key_string, History, OpPair, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Checks long-fork histories; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct LongForkChecker;

/// Pairwise comparisons of distinct reads allowed before the check says unknown.
const MAX_COMPARISONS: u64 = 200_000_000;

/// The micro-ops of a transaction value: (f, key, value).
fn mops(v: &Value) -> impl Iterator<Item = (&str, &Value, &Value)> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| match m.as_array().map(Vec::as_slice) {
            Some([f, k, v]) => Some((f.as_str()?, k, v)),
            _ => None,
        })
}

/// True if a read's value shows the key's write.
fn seen(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        _ => true,
    }
}

/// A read: its pair and (key id, saw the write), sorted by key.
struct Read<'a> {
    pair: &'a OpPair,
    keys: Vec<(u32, bool)>,
}

/// A key the first read saw and the second did not, if any, merging sorted key lists.
fn saw_only_first(a: &[(u32, bool)], b: &[(u32, bool)]) -> Option<u32> {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                if a[i].1 && !b[j].1 {
                    return Some(a[i].0);
                }
                i += 1;
                j += 1;
            }
        }
    }
    None
}

impl Checker for LongForkChecker {
    fn name(&self) -> String {
        "long-fork".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let mut key_ids: HashMap<String, u32> = HashMap::new();
        let mut key_values: Vec<Value> = Vec::new();
        let mut id = |k: &Value| -> u32 {
            let next = key_values.len() as u32;
            *key_ids.entry(value_key_string(k)).or_insert_with(|| {
                key_values.push(k.clone());
                next
            })
        };
        let mut writer: HashMap<u32, &OpPair> = HashMap::new();
        let mut multiply_written: Option<(u32, &OpPair, &OpPair)> = None;
        let mut reads: Vec<Read> = Vec::new();
        for p in history.pairs() {
            if p.outcome == Outcome::Fail {
                continue;
            }
            let mut keys = Vec::new();
            for (f, k, _) in mops(&p.invoke_value) {
                if matches!(f, "w" | "write" | "append") {
                    let k = id(k);
                    if let Some(prev) = writer.insert(k, p) {
                        if !std::ptr::eq(prev, p) && multiply_written.is_none() {
                            multiply_written = Some((k, prev, p));
                        }
                    }
                }
            }
            if p.outcome != Outcome::Ok {
                continue;
            }
            for (f, k, v) in mops(&p.value) {
                if matches!(f, "r" | "read") {
                    keys.push((id(k), seen(v)));
                }
            }
            if keys.len() >= 2 {
                keys.sort_unstable();
                keys.dedup_by_key(|k| k.0);
                reads.push(Read { pair: p, keys });
            }
        }
        let coverage = Coverage::of([
            ("written keys", writer.len() as u64),
            ("reads", reads.len() as u64),
        ]);
        if let Some((k, a, b)) = multiply_written {
            let mut r = CheckResult::new(
                "long-fork",
                Validity::Unknown,
                format!(
                    "key {} is written by more than one op (indices {} and {}); long-fork needs each key written once",
                    key_values[k as usize],
                    history.op_index(a.invoke_pos),
                    history.op_index(b.invoke_pos)
                ),
            );
            r.evidence = vec![pair_json(history, a), pair_json(history, b)];
            return r.with_coverage(coverage);
        }
        // Reads with the same observations are interchangeable: compare one of each.
        let mut distinct: Vec<&Read> = Vec::new();
        let mut signatures: HashMap<&[(u32, bool)], ()> = HashMap::new();
        for r in &reads {
            if signatures.insert(&r.keys, ()).is_none() {
                distinct.push(r);
            }
        }
        let n = distinct.len() as u64;
        if n * n.saturating_sub(1) / 2 > MAX_COMPARISONS {
            return CheckResult::new(
                "long-fork",
                Validity::Unknown,
                format!(
                    "{} distinct reads would need more than {MAX_COMPARISONS} comparisons",
                    n
                ),
            )
            .with_coverage(coverage);
        }
        let mut forks: Vec<Value> = Vec::new();
        let mut fork_count = 0usize;
        let mut first_text = String::new();
        for (i, a) in distinct.iter().enumerate() {
            for b in &distinct[i + 1..] {
                let (Some(x), Some(y)) = (
                    saw_only_first(&a.keys, &b.keys),
                    saw_only_first(&b.keys, &a.keys),
                ) else {
                    continue;
                };
                fork_count += 1;
                if forks.len() >= MAX_LISTED {
                    continue;
                }
                let (kx, ky) = (&key_values[x as usize], &key_values[y as usize]);
                let (ia, ib) = (
                    history.op_index(a.pair.complete_pos.unwrap_or(a.pair.invoke_pos)),
                    history.op_index(b.pair.complete_pos.unwrap_or(b.pair.invoke_pos)),
                );
                if first_text.is_empty() {
                    first_text = format!(
                        "the read at index {ia} saw the write of {kx} but not of {ky}, while the read at index {ib} saw {ky} but not {kx}: they observed the two writes in opposite orders"
                    );
                }
                forks.push(json!({
                    "keys": [kx, ky],
                    "reads": [pair_json(history, a.pair), pair_json(history, b.pair)],
                    "writes": [writer.get(&x).map(|w| pair_json(history, w)), writer.get(&y).map(|w| pair_json(history, w))],
                }));
            }
        }
        let details = json!({"reads": reads.len(), "distinct_reads": distinct.len(),
                             "fork_count": fork_count, "forks": forks});
        let mut r = if fork_count == 0 {
            CheckResult::new(
                "long-fork",
                Validity::Valid,
                format!(
                    "{} over several keys, all ordered by what they saw",
                    plural(reads.len(), "read")
                ),
            )
        } else {
            let mut r = CheckResult::new(
                "long-fork",
                Validity::Invalid,
                format!("{} found; {first_text}", plural(fork_count, "long fork")),
            );
            r.anomaly_types = vec!["long-fork".into()];
            r.not = vec!["snapshot-isolation".into()];
            r.evidence = forks
                .first()
                .and_then(|f| f["reads"].as_array().cloned())
                .unwrap_or_default();
            r
        };
        r.details = details;
        // A fork shows only between two reads: with fewer, nothing was compared.
        let compared = reads.len() >= 2;
        r.with_coverage(coverage).unless_unobserved(
            u64::from(compared),
            &format!(
                "{} over several keys, and a long fork shows only between two",
                plural(reads.len(), "ok read")
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    fn txn(p: u64, t: OpType, mops: Value) -> Op {
        Op::new(Process::Client(p), t, "txn", mops)
    }

    #[test]
    fn writes_without_reads_are_unknown() {
        let h = History::new(vec![
            txn(0, OpType::Invoke, json!([["w", 1, 1]])),
            txn(0, OpType::Ok, json!([["w", 1, 1]])),
            txn(1, OpType::Invoke, json!([["r", 1, null], ["r", 2, null]])),
            txn(1, OpType::Info, json!([["r", 1, null], ["r", 2, null]])),
        ])
        .unwrap();
        let r = LongForkChecker.check(&h);
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(r.explanation.contains("0 ok reads"), "{}", r.explanation);
        assert_eq!(r.coverage.get("reads"), Some(0));
    }

    #[test]
    fn two_reads_that_agree_are_valid_and_two_that_cross_are_a_long_fork() {
        let w = |p, k| {
            [
                txn(p, OpType::Invoke, json!([["w", k, 1]])),
                txn(p, OpType::Ok, json!([["w", k, 1]])),
            ]
        };
        let read = |p, a: Value, b: Value| {
            [
                txn(p, OpType::Invoke, json!([["r", 1, null], ["r", 2, null]])),
                txn(p, OpType::Ok, json!([["r", 1, a], ["r", 2, b]])),
            ]
        };
        let mut ops: Vec<Op> = w(0, 1).into_iter().chain(w(1, 2)).collect();
        ops.extend(read(2, json!(1), json!(null)));
        ops.extend(read(3, json!(1), json!(1)));
        let r = LongForkChecker.check(&History::new(ops.clone()).unwrap());
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        ops.extend(read(4, json!(null), json!(1)));
        let r = LongForkChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    }
}
