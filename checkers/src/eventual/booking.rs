//! Booking: the converged schedule of Bayou's meeting-room scheduler (Terry et al., SOSP
//! 1995 §3: dependency check and merge procedure) is sound.
//!
//! Each replica's schedule is judged from its last final read of a key:
//! - no (room, slot) is held by two reservations, and no reservation has two rows;
//! - a reservation holds one of its own alternatives, or is rejected only when every one
//!   of its alternatives is held by another reservation;
//! - no reservation appears that was never (successfully) attempted;
//! - replaying the read's order (committed ids, then tentative ones) with the merge
//!   procedure — take the first alternative not held by an earlier reservation, else
//!   reject — gives exactly the schedule (a non-deterministic or order-dependent merge
//!   shows here);
//! - once all replicas agree (and every replica has a final read), every acknowledged
//!   reservation appears exactly once.
//!
//! Disagreeing replicas leave the verdict unknown unless a schedule is unsound by itself;
//! the convergence checker reports the disagreement.

use super::convergence::{
    final_reads_by_replica, missing_reason, missing_replicas, row_text, FinalValue,
};
use super::view::{
    KeyOps, ReadOp, ReadValue, ReadValues, Reservation, ScheduleRow, UpdateArg, View,
};
use super::{
    key_label, malformed_reason, op_index, short_list, EventualDataType, Verdict, MAX_CASES,
};
use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};

/// Checks the converged booking schedule; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct BookingChecker;

/// One violation with the ops that show it.
struct Case {
    kind: &'static str,
    text: String,
    positions: Vec<usize>,
}

/// What the history says about the reservations of one key.
struct Bookings<'a> {
    /// id -> (its first not-failed book op, whether some book of it was acknowledged).
    attempted: HashMap<i64, (&'a Reservation, usize, bool)>,
    /// id -> a failed book of it.
    failed: HashMap<i64, usize>,
}

fn bookings(key: &KeyOps) -> Bookings<'_> {
    let mut b = Bookings {
        attempted: HashMap::new(),
        failed: HashMap::new(),
    };
    for u in &key.updates {
        let UpdateArg::Book(res) = &u.arg else {
            continue;
        };
        if u.outcome == Outcome::Fail {
            b.failed.entry(res.id).or_insert(u.invoke_pos);
            continue;
        }
        let e = b
            .attempted
            .entry(res.id)
            .or_insert((res, u.invoke_pos, false));
        e.2 |= u.outcome == Outcome::Ok;
    }
    b
}

/// Checks one replica's final schedule read `r` on its own.
fn check_schedule(
    history: &History,
    view: &View,
    key: &KeyOps,
    b: &Bookings<'_>,
    r: &ReadOp,
    cases: &mut Vec<Case>,
) {
    let idx = |p: usize| op_index(history, p);
    let kl = key_label(&key.name);
    let ReadValue::Split {
        committed,
        tentative,
        schedule: Some(rows),
    } = &r.value
    else {
        return;
    };
    let at = format!(
        "key {kl}, final read op {} ({})",
        idx(r.complete_pos),
        view.node_name(r.node)
    );
    let book_pos = |id: i64| b.attempted.get(&id).map(|a| a.1);
    let mut with = |kind, text: String, ids: &[i64]| {
        let mut positions = vec![r.complete_pos];
        positions.extend(
            ids.iter()
                .filter_map(|id| book_pos(*id).or_else(|| b.failed.get(id).copied())),
        );
        cases.push(Case {
            kind,
            text,
            positions,
        });
    };
    let mut row_of: BTreeMap<i64, Option<(i64, i64)>> = BTreeMap::new();
    let mut holder: HashMap<(i64, i64), i64> = HashMap::new();
    for &(id, slot) in rows {
        if row_of.insert(id, slot).is_some() {
            with(
                "duplicate-reservation",
                format!("{at}: reservation {id} has two schedule rows"),
                &[id],
            );
        }
        if let Some(s) = slot {
            if let Some(&other) = holder.get(&s) {
                if other != id {
                    with(
                        "double-booking",
                        format!(
                            "{at}: room {} slot {} is held by both reservation {other} and {id}",
                            s.0, s.1
                        ),
                        &[other, id],
                    );
                }
            } else {
                holder.insert(s, id);
            }
        }
    }
    let unexpected: Vec<i64> = row_of
        .keys()
        .chain(committed)
        .chain(tentative)
        .filter(|id| !b.attempted.contains_key(id))
        .copied()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !unexpected.is_empty() {
        with(
            "unexpected",
            format!(
                "{at}: reservation(s) {} were never successfully attempted",
                short_list(&unexpected)
            ),
            &unexpected,
        );
    }
    for (&id, &slot) in &row_of {
        let Some((res, _, _)) = b.attempted.get(&id) else {
            continue;
        };
        match slot {
            Some(s) if !res.alternatives.contains(&s) => with(
                "not-an-alternative",
                format!("{at}: reservation {id} holds room {} slot {}, which is not among its alternatives {:?}", s.0, s.1, res.alternatives),
                &[id],
            ),
            None => {
                if let Some(free) = res.alternatives.iter().find(|a| holder.get(*a).is_none_or(|h| *h == id)) {
                    with(
                        "wrongly-rejected",
                        format!("{at}: reservation {id} is rejected though its alternative room {} slot {} is held by no other reservation", free.0, free.1),
                        &[id],
                    );
                }
            }
            _ => {}
        }
    }
    // Replay the merge procedure in the read's order.
    let order: Vec<i64> = committed.iter().chain(tentative).copied().collect();
    if order.iter().any(|id| !b.attempted.contains_key(id)) {
        return; // alternatives unknown: reported as unexpected above
    }
    let mut held: HashMap<(i64, i64), i64> = HashMap::new();
    let mut replayed: BTreeMap<i64, Option<(i64, i64)>> = BTreeMap::new();
    for id in &order {
        if replayed.contains_key(id) {
            continue;
        }
        let alts = b
            .attempted
            .get(id)
            .map(|a| a.0.alternatives.as_slice())
            .unwrap_or(&[]);
        let got = alts.iter().find(|a| !held.contains_key(*a)).copied();
        if let Some(s) = got {
            held.insert(s, *id);
        }
        replayed.insert(*id, got);
    }
    if replayed != row_of {
        let diff: Vec<i64> = replayed
            .keys()
            .chain(row_of.keys())
            .filter(|id| replayed.get(id) != row_of.get(id))
            .copied()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let show = |m: &BTreeMap<i64, Option<(i64, i64)>>| {
            diff.iter()
                .take(4)
                .map(|id| {
                    m.get(id)
                        .map_or(format!("{id}->absent"), |s| row_text((*id, *s)))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        with(
            "merge-mismatch",
            format!(
                "{at}: replaying its order (committed then tentative) with the merge procedure gives {} but the schedule has {}",
                show(&replayed), show(&row_of)
            ),
            &diff.iter().take(4).copied().collect::<Vec<_>>(),
        );
    }
}

impl Checker for BookingChecker {
    fn name(&self) -> String {
        "booking".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let view = View::build(history, EventualDataType::Booking, ReadValues::Final);
        let mut cases: Vec<Case> = Vec::new();
        let mut unknown: Vec<String> = Vec::new();
        let (mut schedules, mut reservations) = (0usize, 0usize);
        for key in &view.keys {
            let b = bookings(key);
            reservations += b.attempted.len();
            let by = final_reads_by_replica(&view, key);
            let missing = missing_replicas(&view, &by);
            if by.is_empty() || !missing.is_empty() {
                unknown.push(missing_reason(
                    &view,
                    history,
                    key,
                    &missing,
                    !by.is_empty(),
                ));
            }
            // Each distinct last final read is judged once.
            let mut distinct: BTreeMap<FinalValue, &ReadOp> = BTreeMap::new();
            for reads in by.values() {
                if let Some(last) = reads.last() {
                    distinct.entry(FinalValue::of(&last.value)).or_insert(last);
                }
            }
            for r in distinct.values() {
                if !matches!(
                    r.value,
                    ReadValue::Split {
                        schedule: Some(_),
                        ..
                    }
                ) {
                    unknown.push(format!(
                        "key {}: final read op {} carries no schedule",
                        key_label(&key.name),
                        op_index(history, r.complete_pos)
                    ));
                    continue;
                }
                schedules += 1;
                check_schedule(history, &view, key, &b, r, &mut cases);
            }
            if distinct.len() > 1 {
                unknown.push(format!("key {}: replicas' final schedules disagree (the convergence checker reports how)", key_label(&key.name)));
                continue;
            }
            // Converged: every acknowledged reservation must be there.
            let converged = distinct.iter().next().filter(|_| missing.is_empty());
            if let Some((
                FinalValue::Schedule(rows)
                | FinalValue::Ordered {
                    schedule: Some(rows),
                    ..
                },
                r,
            )) = converged
            {
                let ids: std::collections::BTreeSet<i64> =
                    rows.iter().map(|x: &ScheduleRow| x.0).collect();
                let mut lost: Vec<(i64, usize)> = b
                    .attempted
                    .iter()
                    .filter(|(id, a)| a.2 && !ids.contains(id))
                    .map(|(id, a)| (*id, a.1))
                    .collect();
                lost.sort_unstable();
                if !lost.is_empty() {
                    let mut positions = vec![r.complete_pos];
                    positions.extend(lost.iter().take(MAX_CASES).map(|l| l.1));
                    cases.push(Case {
                        kind: "lost",
                        text: format!(
                            "key {}: acknowledged reservation(s) {} are in no replica's converged schedule (final read op {})",
                            key_label(&key.name),
                            lost.iter().take(MAX_CASES).map(|(id, p)| format!("{id} (op {})", op_index(history, *p))).collect::<Vec<_>>().join(", "),
                            op_index(history, r.complete_pos)
                        ),
                        positions,
                    });
                }
            }
        }
        let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &cases {
            *kinds.entry(c.kind).or_default() += 1;
        }
        let shown = &cases[..cases.len().min(MAX_CASES)];
        let texts: Vec<&str> = shown.iter().map(|c| c.text.as_str()).collect();
        Verdict {
            checker: self.name(),
            invalid: (!cases.is_empty()).then(|| {
                (
                    format!("{} booking violation(s): {}", cases.len(), texts.join("; ")),
                    shown.iter().flat_map(|c| c.positions.iter().copied()).collect(),
                    kinds.keys().map(|k| k.to_string()).collect(),
                )
            }),
            unknown: if view.keys.is_empty() {
                Some("no booking op in the history".to_string())
            } else if !unknown.is_empty() {
                Some(unknown[..unknown.len().min(MAX_CASES)].join("; "))
            } else {
                malformed_reason(&view, history)
            },
            valid: format!(
                "{schedules} converged schedule(s) over {} key(s): no double booking, every acknowledged reservation placed once or rightly rejected, and the merge replays to the same schedule",
                view.keys.len()
            ),
            details: json!({
                "keys": view.keys.len(),
                "reservations": reservations,
                "schedules_checked": schedules,
                "violations": kinds,
                "unknown_reasons": unknown,
            }),
            coverage: crate::verdict::Coverage::of([
                ("keys", view.keys.len() as u64),
                ("reservations", reservations as u64),
                ("schedules", schedules as u64),
            ]),
        }
        .into_result(history)
    }
}
