//! The checker: atomicity, no dirty reads, and one serial order over the final lists.

use splitbrain_txn::types::NodeId;
use std::collections::{BTreeMap, BTreeSet};

/// What went wrong, by kind (tests assert on the kind a bug must produce).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Violation {
    /// An append appears twice in one list.
    AppliedTwice(i64),
    /// A txn answered ok lacks its append on some key.
    LostCommittedWrite(i64),
    /// A txn answered fail has its append somewhere.
    AbortedWriteVisible(i64),
    /// A txn without an answer is applied on some of its keys only.
    PartialCommit(i64),
    /// A committed read is not a prefix of the key's final list.
    ReadNotPrefix(i64),
    /// The dependency graph of committed txns has a cycle.
    Cycle,
    /// After healing, some node still had txns in flight.
    NotQuiet,
}

/// What the client of a txn learned.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// No answer yet.
    Pending,
    /// Committed, with the op results.
    Ok(Vec<serde_json::Value>),
    /// Certainly not committed.
    Fail,
    /// The coordinator crashed before answering.
    Unknown,
}

/// One client txn: it appends its unique `tag` to each key in `appends`.
pub struct Txn {
    /// Unique value appended.
    pub tag: i64,
    /// The node the client sent it to.
    pub coordinator: NodeId,
    /// Keys appended to.
    pub appends: Vec<i64>,
    /// What the client learned.
    pub outcome: Outcome,
}

/// Checks the final per-key lists against what clients were told; returns every
/// violation found (empty when the run was atomic and serializable).
pub fn check<'a>(
    lists: &BTreeMap<i64, Vec<i64>>,
    txns: impl Iterator<Item = &'a Txn> + Clone,
) -> Vec<Violation> {
    let mut v = BTreeSet::new();
    let mut where_: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for (k, list) in lists {
        let mut seen = BTreeSet::new();
        for tag in list {
            if !seen.insert(*tag) {
                v.insert(Violation::AppliedTwice(*tag));
            }
            where_.entry(*tag).or_default().insert(*k);
        }
    }
    let mut present = BTreeSet::new();
    for txn in txns.clone() {
        let on: BTreeSet<i64> = where_.get(&txn.tag).cloned().unwrap_or_default();
        let wanted: BTreeSet<i64> = txn.appends.iter().copied().collect();
        match &txn.outcome {
            Outcome::Ok(_) if on != wanted => {
                v.insert(Violation::LostCommittedWrite(txn.tag));
            }
            Outcome::Fail if !on.is_empty() => {
                v.insert(Violation::AbortedWriteVisible(txn.tag));
            }
            Outcome::Unknown | Outcome::Pending if !on.is_empty() && on != wanted => {
                v.insert(Violation::PartialCommit(txn.tag));
            }
            _ => {}
        }
        if !on.is_empty() || matches!(txn.outcome, Outcome::Ok(_)) {
            present.insert(txn.tag);
        }
    }
    // Dependency graph over committed txns: ww from list order; wr/rw from reads.
    let mut edges: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for list in lists.values() {
        for w in list.windows(2) {
            edges.entry(w[0]).or_default().insert(w[1]);
        }
    }
    for txn in txns.clone() {
        let Outcome::Ok(results) = &txn.outcome else {
            continue;
        };
        for r in results {
            if r[0] != "r" {
                continue;
            }
            let (Some(k), Some(read)) = (r[1].as_i64(), r[2].as_array().cloned().or(Some(vec![])))
            else {
                continue;
            };
            let read: Vec<i64> = read.iter().filter_map(|x| x.as_i64()).collect();
            let list = lists.get(&k).cloned().unwrap_or_default();
            if read.len() > list.len() || list[..read.len()] != read[..] {
                v.insert(Violation::ReadNotPrefix(txn.tag));
                continue;
            }
            if let Some(last) = read.last() {
                if *last != txn.tag {
                    edges.entry(*last).or_default().insert(txn.tag);
                }
            }
            if let Some(next) = list.get(read.len()) {
                if *next != txn.tag {
                    edges.entry(txn.tag).or_default().insert(*next);
                }
            }
        }
    }
    if has_cycle(&present, &edges) {
        v.insert(Violation::Cycle);
    }
    v.into_iter().collect()
}

/// Kahn's algorithm over the nodes in `nodes` (edges to others are ignored).
fn has_cycle(nodes: &BTreeSet<i64>, edges: &BTreeMap<i64, BTreeSet<i64>>) -> bool {
    let mut indegree: BTreeMap<i64, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    for (from, tos) in edges {
        if !nodes.contains(from) {
            continue;
        }
        for to in tos {
            if let Some(d) = indegree.get_mut(to) {
                *d += 1;
            }
        }
    }
    let mut ready: Vec<i64> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(n, _)| *n)
        .collect();
    let mut done = 0;
    while let Some(n) = ready.pop() {
        done += 1;
        for to in edges.get(&n).into_iter().flatten() {
            if let Some(d) = indegree.get_mut(to) {
                *d -= 1;
                if *d == 0 {
                    ready.push(*to);
                }
            }
        }
    }
    done != nodes.len()
}
