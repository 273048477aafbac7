//! Convergence: after quiescence every replica's final reads of a key agree, the agreed
//! value holds every acknowledged update and nothing never attempted, and the time from
//! the quiescence point to convergence is reported.
//!
//! Per key, each replica's converged value is its last final read. Reads that give an
//! order (`committed` then `tentative`) must agree on both lists, since a committed order
//! is final and shared (so a replica still holding a write as tentative, or committing in
//! another order, has not converged); schedules compare as sets of rows; plain lists as
//! sets of elements; counters as integers. A counter must lie between the sum of
//! acknowledged deltas and that sum plus the indeterminate ones. The time to converge of a key is the completion time of the
//! first final read of the last replica to settle (after which all its final reads return
//! the common value), minus the quiescence point's time.

use super::view::{KeyOps, ReadOp, ReadValue, ReadValues, ScheduleRow, View};
use super::{
    key_label, malformed_reason, ms, op_index, quantiles, short_list, EventualDataType, Verdict,
    MAX_CASES,
};
use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Checks convergence of the final reads; see the module docs.
#[derive(Debug, Clone)]
pub struct ConvergenceChecker {
    data_type: EventualDataType,
}

impl ConvergenceChecker {
    /// A convergence checker for histories of `data_type` objects.
    pub fn new(data_type: EventualDataType) -> Self {
        ConvergenceChecker { data_type }
    }
}

/// A replica's final value of a key, in a form that compares by content.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum FinalValue {
    /// Sorted, deduplicated elements (or reservation ids).
    Elements(Vec<i64>),
    /// A counter.
    Counter(i64),
    /// Sorted schedule rows.
    Schedule(Vec<ScheduleRow>),
    /// A read that gives an order (Bayou's committed prefix, then tentative writes): two
    /// replicas that hold the same writes but commit them in another order, or one that
    /// never learns a commit, have not converged. Bookings keep their schedule too.
    Ordered {
        committed: Vec<i64>,
        tentative: Vec<i64>,
        schedule: Option<Vec<ScheduleRow>>,
    },
}

impl FinalValue {
    pub(crate) fn of(v: &ReadValue) -> FinalValue {
        match v {
            ReadValue::Counter(n) => FinalValue::Counter(*n),
            ReadValue::Split {
                committed,
                tentative,
                schedule,
            } => FinalValue::Ordered {
                committed: committed.clone(),
                tentative: tentative.clone(),
                schedule: schedule.as_ref().map(|rows| {
                    let mut rows = rows.clone();
                    rows.sort_unstable();
                    rows
                }),
            },
            other => FinalValue::Elements(other.element_set()),
        }
    }

    /// The elements (ids) the value holds; empty for counters.
    fn ids(&self) -> BTreeSet<i64> {
        match self {
            FinalValue::Elements(v) => v.iter().copied().collect(),
            FinalValue::Schedule(rows) => rows.iter().map(|r| r.0).collect(),
            FinalValue::Ordered {
                committed,
                tentative,
                schedule,
            } => match schedule {
                Some(rows) => rows.iter().map(|r| r.0).collect(),
                None => committed.iter().chain(tentative).copied().collect(),
            },
            FinalValue::Counter(_) => BTreeSet::new(),
        }
    }

    /// How `self` (held by replicas `me`) differs from `reference` (held by `them`).
    fn diff(&self, me: &str, reference: &FinalValue, them: &str) -> String {
        fn sides<T: Ord + Clone>(a: &[T], b: &[T]) -> (Vec<T>, Vec<T>) {
            let sa: BTreeSet<&T> = a.iter().collect();
            let sb: BTreeSet<&T> = b.iter().collect();
            (
                sa.difference(&sb).map(|x| (*x).clone()).collect(),
                sb.difference(&sa).map(|x| (*x).clone()).collect(),
            )
        }
        fn both(
            me: &str,
            mine: String,
            them: &str,
            theirs: String,
            none: bool,
            none2: bool,
        ) -> String {
            let mut parts = Vec::new();
            if !none {
                parts.push(format!("{me} has {mine} that {them} lacks"));
            }
            if !none2 {
                parts.push(format!("{them} has {theirs} that {me} lacks"));
            }
            parts.join("; ")
        }
        match (self, reference) {
            (FinalValue::Elements(a), FinalValue::Elements(b)) => {
                let (mine, theirs) = sides(a, b);
                both(
                    me,
                    short_list(&mine),
                    them,
                    short_list(&theirs),
                    mine.is_empty(),
                    theirs.is_empty(),
                )
            }
            (FinalValue::Schedule(a), FinalValue::Schedule(b)) => {
                let (mine, theirs) = sides(a, b);
                let show = |rows: &[ScheduleRow]| {
                    let v: Vec<String> = rows.iter().take(6).map(|r| row_text(*r)).collect();
                    format!("rows [{}]", v.join(", "))
                };
                both(
                    me,
                    show(&mine),
                    them,
                    show(&theirs),
                    mine.is_empty(),
                    theirs.is_empty(),
                )
            }
            (
                FinalValue::Ordered {
                    committed: ca,
                    tentative: ta,
                    schedule: sa,
                },
                FinalValue::Ordered {
                    committed: cb,
                    tentative: tb,
                    schedule: sb,
                },
            ) => {
                // Content first (as for unordered values), then the order.
                let as_set = |c: &[i64], t: &[i64]| -> Vec<i64> {
                    let mut v: Vec<i64> = c.iter().chain(t).copied().collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                };
                let (ea, eb) = (as_set(ca, ta), as_set(cb, tb));
                if ea != eb {
                    return FinalValue::Elements(ea).diff(me, &FinalValue::Elements(eb), them);
                }
                if let (Some(a), Some(b)) = (sa, sb) {
                    if a != b {
                        return FinalValue::Schedule(a.clone()).diff(
                            me,
                            &FinalValue::Schedule(b.clone()),
                            them,
                        );
                    }
                }
                order_diff(me, (ca, ta), them, (cb, tb))
            }
            (FinalValue::Counter(a), FinalValue::Counter(b)) => {
                format!("{me} reads {a} where {them} reads {b}")
            }
            (a, b) => format!("{me} reads {a:?} where {them} reads {b:?}"),
        }
    }
}

/// How two replicas holding the same writes order them differently: the first committed
/// position where they differ, or which writes one has committed and the other still
/// holds as tentative.
fn order_diff(me: &str, mine: (&[i64], &[i64]), them: &str, theirs: (&[i64], &[i64])) -> String {
    let (ca, cb) = (mine.0, theirs.0);
    if let Some(i) = ca.iter().zip(cb).position(|(a, b)| a != b) {
        return format!(
            "same writes, committed in another order: committed position {i} holds {} at {me} but {} at {them}",
            ca[i], cb[i]
        );
    }
    let (longer, shorter, holder, other) = if ca.len() >= cb.len() {
        (ca, cb, me, them)
    } else {
        (cb, ca, them, me)
    };
    if longer.len() != shorter.len() {
        return format!(
            "same writes, but {holder} has committed {} that {other} still holds as tentative (committed prefix {} vs {})",
            short_list(&longer[shorter.len()..]),
            longer.len(),
            shorter.len()
        );
    }
    let (ta, tb) = (mine.1, theirs.1);
    let i = ta.iter().zip(tb).position(|(a, b)| a != b).unwrap_or(0);
    format!(
        "same committed prefix, tentative writes in another order: position {i} holds {:?} at {me} but {:?} at {them}",
        ta.get(i),
        tb.get(i)
    )
}

/// `id->(room, slot)` or `id->rejected`.
pub(crate) fn row_text(r: ScheduleRow) -> String {
    match r.1 {
        Some((room, slot)) => format!("{}->({room}, {slot})", r.0),
        None => format!("{}->rejected", r.0),
    }
}

/// A replica as the checker groups final reads: a node id, or `None` when the history
/// names no replicas at all (then every final read is one replica's).
type Replica = Option<u32>;

/// Per key: each replica's final reads, in invoke order.
pub(crate) fn final_reads_by_replica<'a>(
    view: &View,
    key: &'a KeyOps,
) -> BTreeMap<Replica, Vec<&'a ReadOp>> {
    let mut by: BTreeMap<Replica, Vec<&ReadOp>> = BTreeMap::new();
    let named = !view.nodes.is_empty();
    for r in key.reads.iter().filter(|r| view.is_final(r)) {
        if named && r.node.is_none() {
            continue;
        }
        by.entry(r.node).or_default().push(r);
    }
    by
}

/// The replicas without a final read of `key`, by name.
pub(crate) fn missing_replicas(view: &View, by: &BTreeMap<Replica, Vec<&ReadOp>>) -> Vec<String> {
    (0..view.nodes.len() as u32)
        .filter(|n| !by.contains_key(&Some(*n)))
        .map(|n| view.node_name(Some(n)).to_string())
        .collect()
}

/// Explains why a key has no (complete) set of final reads.
pub(crate) fn missing_reason(
    view: &View,
    history: &History,
    key: &KeyOps,
    missing: &[String],
    any: bool,
) -> String {
    let q = match view.quiescence_pos {
        Some(q) => format!("the quiescence point (op {})", op_index(history, q)),
        None => "the start of the history".into(),
    };
    if !any {
        format!(
            "key {}: no ok final read (a read invoked after {q})",
            key_label(&key.name)
        )
    } else {
        format!(
            "key {}: replica(s) {} appear in the history but have no ok final read of it (invoked after {q})",
            key_label(&key.name),
            missing.join(", ")
        )
    }
}

/// One finding, with the ops that show it.
struct Finding {
    kind: &'static str,
    text: String,
    positions: Vec<usize>,
}

/// The outcome of checking one key.
#[derive(Default)]
struct KeyResult {
    findings: Vec<Finding>,
    unknown: Option<String>,
    converge_ms: Option<f64>,
    final_reads: usize,
}

impl ConvergenceChecker {
    fn check_key(&self, history: &History, view: &View, key: &KeyOps) -> KeyResult {
        let mut out = KeyResult::default();
        let by = final_reads_by_replica(view, key);
        out.final_reads = by.values().map(Vec::len).sum();
        let missing = missing_replicas(view, &by);
        if by.is_empty() || !missing.is_empty() {
            out.unknown = Some(missing_reason(view, history, key, &missing, !by.is_empty()));
        }
        if by.is_empty() {
            return out;
        }
        let idx = |p: usize| op_index(history, p);
        let kl = key_label(&key.name);
        // Group replicas by their last final read's value.
        let mut groups: BTreeMap<FinalValue, Vec<(Replica, &ReadOp)>> = BTreeMap::new();
        for (replica, reads) in &by {
            if let Some(last) = reads.last() {
                groups
                    .entry(FinalValue::of(&last.value))
                    .or_default()
                    .push((*replica, *last));
            }
        }
        let mut groups: Vec<(FinalValue, Vec<(Replica, &ReadOp)>)> = groups.into_iter().collect();
        // The reference: the largest group, then the one with the first replica.
        groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.1[0].0.cmp(&b.1[0].0)));
        let names = |g: &[(Replica, &ReadOp)]| -> String {
            g.iter()
                .map(|(r, op)| format!("{} (op {})", view.node_name(*r), idx(op.complete_pos)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (reference, ref_group) = &groups[0];
        for (value, group) in groups.iter().skip(1) {
            out.findings.push(Finding {
                kind: "divergent",
                text: format!(
                    "key {kl}: replicas disagree after quiescence: {}",
                    value.diff(&names(group), reference, &names(ref_group))
                ),
                positions: vec![group[0].1.complete_pos, ref_group[0].1.complete_pos],
            });
        }
        self.check_content(history, key, &groups, &mut out);
        if groups.len() == 1 {
            // Converged: when did the last replica settle on the common value?
            let settled = by
                .values()
                .filter_map(|reads| {
                    let mut first = reads.len();
                    while first > 0 && FinalValue::of(&reads[first - 1].value) == *reference {
                        first -= 1;
                    }
                    reads
                        .get(first)
                        .and_then(|r| history.op_time(r.complete_pos))
                })
                .max();
            let q_time = view
                .quiescence_pos
                .and_then(|q| history.op_time(q))
                .unwrap_or(0);
            out.converge_ms = settled.map(|t| ms(t.saturating_sub(q_time)));
        }
        out
    }

    /// Lost and never-attempted content, judged on every replica's converged value.
    fn check_content(
        &self,
        history: &History,
        key: &KeyOps,
        groups: &[(FinalValue, Vec<(Replica, &ReadOp)>)],
        out: &mut KeyResult,
    ) {
        let idx = |p: usize| op_index(history, p);
        let kl = key_label(&key.name);
        if self.data_type == EventualDataType::Counter {
            // Indeterminate deltas may or may not have happened: each sign widens one bound.
            let (mut acked, mut maybe_up, mut maybe_down) = (0i64, 0i64, 0i64);
            let (mut acked_ops, mut maybe_ops) = (Vec::new(), Vec::new());
            for u in &key.updates {
                let super::view::UpdateArg::Delta(d) = u.arg else {
                    continue;
                };
                match u.outcome {
                    Outcome::Ok => {
                        acked = acked.saturating_add(d);
                        acked_ops.push(u.invoke_pos);
                    }
                    o if o.is_indeterminate() => {
                        if d >= 0 {
                            maybe_up = maybe_up.saturating_add(d);
                        } else {
                            maybe_down = maybe_down.saturating_add(d);
                        }
                        maybe_ops.push(u.invoke_pos);
                    }
                    _ => {}
                }
            }
            for (value, group) in groups {
                let FinalValue::Counter(n) = value else {
                    continue;
                };
                let read = group[0].1.complete_pos;
                let (low, high) = (
                    acked.saturating_add(maybe_down),
                    acked.saturating_add(maybe_up),
                );
                if *n < low {
                    let mut positions = vec![read];
                    positions.extend(acked_ops.iter().take(MAX_CASES));
                    out.findings.push(Finding {
                        kind: "lost",
                        text: format!(
                            "key {kl}: final value {n} (op {}) is below {low}, the sum of acknowledged deltas ({acked}) and every indeterminate negative one ({maybe_down}): some were lost",
                            idx(read)
                        ),
                        positions,
                    });
                } else if *n > high {
                    out.findings.push(Finding {
                        kind: "unexpected",
                        text: format!(
                            "key {kl}: final value {n} (op {}) exceeds {high}, the sum of acknowledged ({acked}) and indeterminate positive ({maybe_up}) deltas",
                            idx(read),
                        ),
                        positions: vec![read],
                    });
                }
            }
            return;
        }
        // Sets and bookings: by element (reservation id).
        let mut acked: BTreeMap<i64, usize> = BTreeMap::new();
        let mut attempted: BTreeSet<i64> = BTreeSet::new();
        let mut failed: BTreeMap<i64, usize> = BTreeMap::new();
        for u in &key.updates {
            let Some(e) = u.arg.element() else { continue };
            match u.outcome {
                Outcome::Ok => {
                    acked.entry(e).or_insert(u.invoke_pos);
                    attempted.insert(e);
                }
                Outcome::Fail => {
                    failed.entry(e).or_insert(u.invoke_pos);
                }
                _ => {
                    attempted.insert(e);
                }
            }
        }
        let ids: Vec<BTreeSet<i64>> = groups.iter().map(|g| g.0.ids()).collect();
        // Lost: acknowledged and absent from every replica's converged value.
        let lost: Vec<i64> = acked
            .keys()
            .filter(|e| ids.iter().all(|s| !s.contains(e)))
            .copied()
            .collect();
        if !lost.is_empty() {
            let read = groups[0].1[0].1.complete_pos;
            let mut positions = vec![read];
            positions.extend(lost.iter().take(MAX_CASES).filter_map(|e| acked.get(e)));
            let first = lost
                .iter()
                .take(MAX_CASES)
                .filter_map(|e| acked.get(e).map(|p| format!("{e} (op {})", idx(*p))))
                .collect::<Vec<_>>()
                .join(", ");
            out.findings.push(Finding {
                kind: "lost",
                text: format!(
                    "key {kl}: {} acknowledged update(s) missing from every replica's final read (e.g. op {}): {first}",
                    lost.len(),
                    idx(read)
                ),
                positions,
            });
        }
        // Unexpected: present but never attempted, or only attempted by failed updates.
        for (g, set) in groups.iter().zip(&ids) {
            let bad: Vec<i64> = set
                .iter()
                .filter(|e| !attempted.contains(e))
                .copied()
                .collect();
            if bad.is_empty() {
                continue;
            }
            let read = g.1[0].1.complete_pos;
            let mut positions = vec![read];
            positions.extend(bad.iter().filter_map(|e| failed.get(e)).take(MAX_CASES));
            let failed_note = if bad.iter().any(|e| failed.contains_key(e)) {
                " (some only by a failed update)"
            } else {
                ""
            };
            out.findings.push(Finding {
                kind: "unexpected",
                text: format!(
                    "key {kl}: final read op {} holds {} never successfully attempted{failed_note}: {}",
                    idx(read),
                    if self.data_type == EventualDataType::Booking { "reservation(s)" } else { "element(s)" },
                    short_list(&bad)
                ),
                positions,
            });
        }
    }
}

impl Checker for ConvergenceChecker {
    fn name(&self) -> String {
        "convergence".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let view = View::build(history, self.data_type, ReadValues::Final);
        let results: Vec<KeyResult> = view
            .keys
            .iter()
            .map(|k| self.check_key(history, &view, k))
            .collect();
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut texts = Vec::new();
        let mut positions = Vec::new();
        let mut unknown = Vec::new();
        let mut per_key = Map::new();
        let mut times = Vec::new();
        let mut final_reads = 0;
        for (key, r) in view.keys.iter().zip(&results) {
            final_reads += r.final_reads;
            for f in &r.findings {
                let n = counts.entry(f.kind).or_default();
                *n += 1;
                if texts.len() < MAX_CASES {
                    texts.push(f.text.clone());
                    positions.extend(&f.positions);
                }
            }
            if let Some(u) = &r.unknown {
                unknown.push(u.clone());
            }
            if let Some(t) = r.converge_ms {
                times.push(t);
                if per_key.len() < 1000 {
                    per_key.insert(key.name.clone(), json!(t));
                }
            }
        }
        let mut sorted = times.clone();
        let q = quantiles(&mut sorted);
        let mut details = json!({
            "data_type": self.data_type.name(),
            "keys": view.keys.len(),
            "replicas": view.nodes,
            "final_reads": final_reads,
            "quiescence": view.quiescence_pos.map(|p| json!({"index": op_index(history, p), "time_ms": history.op_time(p).map(ms)})),
            "convergence_ms": {
                "per_key": per_key,
                "max": q.get("max"),
                "median": q.get("p50"),
                "keys_converged": times.len(),
            },
            "violations": counts,
            "keys_without_final_reads": unknown.len(),
        });
        details["malformed_ops"] = json!(view.malformed_count);
        details["unknown_reasons"] = json!(unknown);
        let total: usize = counts.values().sum();
        let more = |n: usize| {
            if n > MAX_CASES {
                format!("; and {} more", n - MAX_CASES)
            } else {
                String::new()
            }
        };
        Verdict {
            checker: self.name(),
            invalid: (!texts.is_empty()).then(|| {
                (
                    format!("{total} convergence violation(s): {}{}", texts.join("; "), more(total)),
                    positions,
                    counts.keys().map(|k| k.to_string()).collect(),
                )
            }),
            unknown: if view.keys.is_empty() {
                Some("no update or ok read of the data type in the history, so there is nothing to converge".to_string())
            } else if !unknown.is_empty() {
                Some(format!(
                    "final reads missing: {}{}",
                    unknown[..unknown.len().min(MAX_CASES)].join("; "),
                    more(unknown.len())
                ))
            } else {
                malformed_reason(&view, history)
            },
            valid: format!(
                "all {} replica(s) agree on each of {} key(s) after quiescence, with every acknowledged update and nothing never attempted; converged {} ms (max) after the quiescence point",
                view.nodes.len().max(1),
                view.keys.len(),
                q.get("max").and_then(Value::as_f64).map_or("?".into(), |m| format!("{m:.1}"))
            ),
            details,
            coverage: crate::verdict::Coverage::of([
                ("keys", view.keys.len() as u64),
                ("replicas", view.nodes.len() as u64),
                ("final reads", final_reads as u64),
            ]),
        }
        .into_result(history)
    }
}
