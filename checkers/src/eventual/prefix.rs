//! Committed-prefix stability (Bayou's commit order is final, Terry et al. SOSP 1995
//! §4.3): once any read showed element (or reservation id) `w` at position `i` of a key's
//! committed list, no read anywhere — any replica, any time — shows a different one at
//! `i`; and no committed list holds an element twice.
//!
//! Replicas may lag (a shorter committed list is fine); only conflicting positions count.
//! Reads without a `committed` list (plain lists, counters) are not judged.

use super::view::{KeyOps, ReadOp, ReadValue, ReadValues, View};
use super::{key_label, op_index, EventualDataType, Verdict, MAX_CASES};
use crate::history::History;
use crate::verdict::{CheckResult, Checker};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Checks that committed prefixes never change; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommittedPrefixChecker;

/// A violation found on one key.
struct Case {
    text: String,
    positions: Vec<usize>,
    detail: Value,
}

fn committed(r: &ReadOp) -> Option<&[i64]> {
    match &r.value {
        ReadValue::Split { committed, .. } => Some(committed),
        _ => None,
    }
}

/// Checks one key; returns (reads judged, conflicting reads, duplicate reads, cases).
fn check_key(history: &History, view: &View, key: &KeyOps) -> (usize, usize, usize, Vec<Case>) {
    let idx = |p: usize| op_index(history, p);
    let kl = key_label(&key.name);
    let mut reads: Vec<&ReadOp> = key
        .reads
        .iter()
        .filter(|r| committed(r).is_some())
        .collect();
    reads.sort_by_key(|r| r.complete_pos);
    // canon[i] = (element, the read that first showed it at i).
    let mut canon: Vec<(i64, &ReadOp)> = Vec::new();
    let (mut conflicts, mut duplicates) = (0, 0);
    let mut cases = Vec::new();
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for r in &reads {
        let list = committed(r).unwrap_or(&[]);
        seen.clear();
        if let Some((first, second, e)) = list
            .iter()
            .enumerate()
            .find_map(|(i, e)| seen.insert(*e, i).map(|f| (f, i, *e)))
        {
            duplicates += 1;
            if cases.len() < MAX_CASES {
                cases.push(Case {
                    text: format!(
                        "key {kl}: read op {} ({}) holds {e} twice in its committed list, at positions {first} and {second}",
                        idx(r.complete_pos),
                        view.node_name(r.node)
                    ),
                    positions: vec![r.complete_pos],
                    detail: json!({"kind": "duplicate", "key": key.name, "read": idx(r.complete_pos),
                        "node": view.node_name(r.node), "element": e, "positions": [first, second]}),
                });
            }
        }
        let mut conflict = None;
        for (i, &e) in list.iter().enumerate() {
            match canon.get(i) {
                Some(&(w, first)) if w != e => {
                    conflict = conflict.or(Some((i, w, first, e)));
                }
                Some(_) => {}
                None => canon.push((e, r)),
            }
        }
        if let Some((i, w, first, e)) = conflict {
            conflicts += 1;
            if cases.len() < MAX_CASES {
                cases.push(Case {
                    text: format!(
                        "key {kl}: committed position {i} held {w} in read op {} ({}) but {e} in read op {} ({})",
                        idx(first.complete_pos),
                        view.node_name(first.node),
                        idx(r.complete_pos),
                        view.node_name(r.node)
                    ),
                    positions: vec![first.complete_pos, r.complete_pos],
                    detail: json!({"kind": "conflict", "key": key.name, "position": i,
                        "first": {"read": idx(first.complete_pos), "node": view.node_name(first.node), "value": w},
                        "second": {"read": idx(r.complete_pos), "node": view.node_name(r.node), "value": e}}),
                });
            }
        }
    }
    (reads.len(), conflicts, duplicates, cases)
}

impl Checker for CommittedPrefixChecker {
    fn name(&self) -> String {
        "committed-prefix".into()
    }

    /// Committed positions are final: a read that contradicts an earlier one stays in
    /// every longer history (`prefix_online.rs`).
    fn online(&self) -> Option<Box<dyn crate::verdict::OnlineCheck>> {
        Some(Box::new(super::prefix_online::OnlinePrefix::default()))
    }

    fn check(&self, history: &History) -> CheckResult {
        // Set decoding reads every committed list; a booking's schedule is not needed here.
        let view = View::build(history, EventualDataType::Set, ReadValues::All);
        let (mut judged, mut conflicts, mut duplicates) = (0, 0, 0);
        let mut cases = Vec::new();
        for key in &view.keys {
            let (j, c, d, mut k) = check_key(history, &view, key);
            judged += j;
            conflicts += c;
            duplicates += d;
            cases.append(&mut k);
        }
        let shown: Vec<&Case> = cases.iter().take(MAX_CASES).collect();
        let mut kinds = Vec::new();
        if conflicts > 0 {
            kinds.push("committed-prefix-changed".to_string());
        }
        if duplicates > 0 {
            kinds.push("committed-duplicate".to_string());
        }
        Verdict {
            checker: self.name(),
            invalid: (!cases.is_empty()).then(|| {
                (
                    format!(
                        "{conflicts} read(s) contradict an earlier committed position, {duplicates} hold an element twice: {}",
                        shown.iter().map(|c| c.text.as_str()).collect::<Vec<_>>().join("; ")
                    ),
                    shown.iter().flat_map(|c| c.positions.iter().copied()).collect(),
                    kinds,
                )
            }),
            unknown: (judged == 0).then(|| {
                "no ok read carries a committed list, so no committed prefix could be judged".to_string()
            }),
            valid: format!("{judged} read(s) with a committed list agree on every committed position"),
            details: json!({
                "reads_with_committed": judged,
                "conflicting_reads": conflicts,
                "duplicate_reads": duplicates,
                "cases": shown.iter().map(|c| c.detail.clone()).collect::<Vec<_>>(),
            }),
            coverage: crate::verdict::Coverage::of([
                ("keys", view.keys.len() as u64),
                ("committed reads", judged as u64),
            ]),
        }
        .into_result(history)
    }
}
