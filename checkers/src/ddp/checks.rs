//! The four DDP checks over parsed step records (see the module docs of `ddp`).

use super::{Found, Seen, StepRecord};
use crate::history::History;
use crate::verdict::{CheckResult, Validity};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Sample ids listed per missing-sample case.
const LIST: usize = 20;

/// A membership rule a step record breaks: what to say first, and the case.
#[derive(Debug, Clone)]
pub(crate) struct Breach {
    pub(crate) explanation: String,
    pub(crate) case: Value,
}

/// What the membership rules say of one step record.
#[derive(Debug, Clone, Default)]
pub(crate) struct Membership {
    /// The record names a group without its own rank (`non-member-report`).
    pub(crate) non_member: Option<Breach>,
    /// The record names other members than the step's first record naming members
    /// (`member-divergence`).
    pub(crate) divergence: Option<Breach>,
    /// The record names members and no earlier record of its step did: it becomes the
    /// step's record to compare later ones with.
    pub(crate) names_first: bool,
}

/// The membership rules for one step record `rec`, the whole check's and the online
/// check's alike: only a member reports a step of a group, and every record of a step
/// names the same members as `first_named`, the step's first record naming members (its
/// rank and members). A record naming no members breaks neither rule.
pub(crate) fn membership(rec: &StepRecord, first_named: Option<(u64, &Vec<u64>)>) -> Membership {
    let Some(m) = &rec.members else {
        return Membership::default();
    };
    let non_member = (!m.contains(&rec.rank)).then(|| Breach {
        explanation: format!(
            "step {}: rank {} reported a step of the group {m:?} without it",
            rec.step, rec.rank
        ),
        case: json!({"step": rec.step, "rank": rec.rank, "members": m}),
    });
    let divergence = first_named
        .filter(|(_, prev)| *prev != m)
        .map(|(prev_rank, prev)| Breach {
            explanation: format!(
                "step {}: rank {prev_rank} names members {:?}, rank {} names {m:?}",
                rec.step,
                Some(prev),
                rec.rank
            ),
            case: json!({"step": rec.step, "sides": [
                {"rank": prev_rank, "members": prev},
                {"rank": rec.rank, "members": m}]}),
        });
    Membership {
        non_member,
        divergence,
        names_first: first_named.is_none(),
    }
}

/// Replica agreement: one digest per step across every rank and report.
pub(crate) fn replicas(seen: &[Seen]) -> CheckResult {
    let mut by_step: BTreeMap<u64, BTreeMap<&str, Vec<&Seen>>> = BTreeMap::new();
    for s in seen {
        by_step
            .entry(s.record.step)
            .or_default()
            .entry(s.record.digest.as_str())
            .or_default()
            .push(s);
    }
    let ranks: BTreeSet<u64> = seen.iter().map(|s| s.record.rank).collect();
    let mut found = Found::default();
    let mut first: Option<String> = None;
    for (step, digests) in &by_step {
        if digests.len() < 2 {
            continue;
        }
        let sides: Vec<Value> = digests
            .iter()
            .map(|(d, v)| {
                let rs: BTreeSet<u64> = v.iter().map(|s| s.record.rank).collect();
                json!({"digest": d, "ranks": rs})
            })
            .collect();
        if first.is_none() {
            let text: Vec<String> = digests
                .iter()
                .map(|(d, v)| {
                    let rs: BTreeSet<u64> = v.iter().map(|s| s.record.rank).collect();
                    format!("ranks {rs:?} hold {d}")
                })
                .collect();
            first = Some(format!("step {step}: {}", text.join(", ")));
        }
        let ops = digests
            .values()
            .filter_map(|v| v.first().map(|s| s.evidence()))
            .collect();
        found.add(
            "replica-divergence",
            json!({"step": step, "sides": sides}),
            ops,
        );
    }
    // Membership: one member set per step, and only members report it.
    let mut members_of: BTreeMap<u64, &Seen> = BTreeMap::new();
    let mut shrunk = 0usize;
    for s in seen {
        let prev = members_of.get(&s.record.step).copied();
        let named = prev.and_then(|p| p.record.members.as_ref().map(|m| (p.record.rank, m)));
        let rules = membership(&s.record, named);
        if let Some(b) = rules.non_member {
            first.get_or_insert(b.explanation);
            found.add("non-member-report", b.case, vec![s.evidence()]);
        }
        if let (Some(b), Some(prev)) = (rules.divergence, prev) {
            first.get_or_insert(b.explanation);
            found.add(
                "member-divergence",
                b.case,
                vec![prev.evidence(), s.evidence()],
            );
        }
        if rules.names_first {
            members_of.insert(s.record.step, s);
        }
    }
    let widest = members_of
        .values()
        .filter_map(|s| s.record.members.as_ref().map(Vec::len))
        .max()
        .unwrap_or(0);
    for s in members_of.values() {
        if s.record.members.as_ref().is_some_and(|m| m.len() < widest) {
            shrunk += 1;
        }
    }
    let details = json!({"steps": by_step.len(), "ranks": ranks, "reports": seen.len(), "steps_with_fewer_members": shrunk});
    let headline = match first {
        Some(f) => {
            let n = found
                .by_type
                .get("replica-divergence")
                .map(|e| e.0)
                .unwrap_or(0);
            format!(
                "replicas or memberships disagree ({n} of {} steps with differing digests); the first: {f}",
                by_step.len()
            )
        }
        None => format!(
            "all {} ranks agree on the parameters at each of {} steps ({} reports, {shrunk} steps run by a smaller group)",
            ranks.len(),
            by_step.len(),
            seen.len()
        ),
    };
    found.result("ddp-replicas", headline, details)
}

/// Exactly-once data per epoch across ranks.
pub(crate) fn data(seen: &[Seen], dataset_size: Option<u64>) -> CheckResult {
    let mut found = Found::default();
    // One record per (rank, step); a repeated report must say the same.
    let mut distinct: BTreeMap<(u64, u64), &Seen> = BTreeMap::new();
    for s in seen {
        let key = (s.record.rank, s.record.step);
        match distinct.get(&key) {
            Some(prev)
                if prev.record.samples != s.record.samples
                    || prev.record.epoch != s.record.epoch =>
            {
                found.add(
                    "changed-record",
                    json!({"rank": key.0, "step": key.1, "before": prev.record.samples, "after": s.record.samples}),
                    vec![prev.evidence(), s.evidence()],
                );
            }
            Some(_) => {}
            None => {
                distinct.insert(key, s);
            }
        }
    }
    let mut epochs: BTreeMap<u64, BTreeMap<u64, Vec<&Seen>>> = BTreeMap::new();
    let mut last_epoch: BTreeMap<u64, u64> = BTreeMap::new();
    for s in distinct.values() {
        let e = last_epoch.entry(s.record.rank).or_insert(0);
        *e = (*e).max(s.record.epoch);
        let ids = epochs.entry(s.record.epoch).or_default();
        for id in &s.record.samples {
            ids.entry(*id).or_default().push(s);
        }
    }
    let mut first: Option<String> = None;
    let mut complete = 0;
    for (epoch, ids) in &epochs {
        for (id, users) in ids {
            if users.len() > 1 {
                let by: Vec<Value> = users
                    .iter()
                    .map(|s| json!([s.record.rank, s.record.step]))
                    .collect();
                first.get_or_insert_with(|| {
                    let who: Vec<String> = users
                        .iter()
                        .map(|s| format!("rank {} at step {}", s.record.rank, s.record.step))
                        .collect();
                    format!(
                        "epoch {epoch}: sample {id} consumed {} times, by {}",
                        users.len(),
                        who.join(" and ")
                    )
                });
                let ops = users.iter().take(2).map(|s| s.evidence()).collect();
                found.add(
                    "duplicate-sample",
                    json!({"epoch": epoch, "sample": id, "consumed_by": by}),
                    ops,
                );
            }
        }
        // Every rank has moved past this epoch, so all its steps are recorded.
        let finished = !last_epoch.is_empty() && last_epoch.values().all(|e| e > epoch);
        if let (Some(n), true) = (dataset_size, finished) {
            complete += 1;
            let missing: Vec<u64> = (0..n).filter(|i| !ids.contains_key(i)).collect();
            if !missing.is_empty() {
                first.get_or_insert_with(|| {
                    format!(
                        "epoch {epoch}: {} of {n} samples never consumed, e.g. {:?}",
                        missing.len(),
                        &missing[..missing.len().min(5)]
                    )
                });
                found.add(
                    "missing-sample",
                    json!({"epoch": epoch, "count": missing.len(), "samples": &missing[..missing.len().min(LIST)]}),
                    Vec::new(),
                );
            }
        }
    }
    let details = json!({"epochs": epochs.len(), "complete_epochs_checked_for_gaps": complete, "dataset_size": dataset_size});
    let headline = match first {
        Some(f) => format!("samples not used exactly once per epoch; the first: {f}"),
        None => format!(
            "every sample consumed at most once in each of {} epochs{}",
            epochs.len(),
            match dataset_size {
                Some(n) => format!(", and all {n} in each of the {complete} finished ones"),
                None => " (no data set size given: gaps not checked)".into(),
            }
        ),
    };
    found.result("ddp-data", headline, details)
}

/// Gap-free steps per rank, a falling loss, and the time lost to recoveries.
pub(crate) fn progress(seen: &[Seen], history: &History) -> CheckResult {
    let mut found = Found::default();
    // Each process follows one rank from step 1 (a fresh process starts over), so steps
    // are checked per process: two processes may follow the same rank.
    // A rank skips the steps of groups it was not in (the group shrank without it):
    // a step some report shows was run without the rank is not due from it.
    let mut without: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut ranks_of: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for s in seen {
        if let Some(m) = &s.record.members {
            ranks_of
                .entry(s.record.step)
                .or_default()
                .extend(m.iter().copied());
        }
    }
    let all: BTreeSet<u64> = seen.iter().map(|s| s.record.rank).collect();
    for (step, m) in &ranks_of {
        without.insert(*step, all.difference(m).copied().collect());
    }
    let not_member = |rank: u64, step: u64| without.get(&step).is_some_and(|w| w.contains(&rank));
    let mut last: BTreeMap<u64, &Seen> = BTreeMap::new();
    let mut first_gap: Option<String> = None;
    let mut skipped = 0u64;
    for s in seen {
        let p = s.process;
        let r = s.record.rank;
        let mut expected = last.get(&p).map(|q| q.record.step + 1).unwrap_or(1);
        while expected < s.record.step && not_member(r, expected) {
            expected += 1;
            skipped += 1;
        }
        if s.record.step != expected {
            first_gap.get_or_insert_with(|| {
                format!(
                    "rank {r} (process {p}) reported step {} where step {expected} was due",
                    s.record.step
                )
            });
            let mut ops: Vec<Value> = last.get(&p).map(|q| vec![q.evidence()]).unwrap_or_default();
            ops.push(s.evidence());
            found.add(
                "step-gap",
                json!({"process": p, "rank": r, "expected": expected, "got": s.record.step}),
                ops,
            );
        }
        last.insert(p, s);
    }
    // Loss: mean over ranks per step; the last quarter must be below the first.
    let mut loss: BTreeMap<u64, (f64, u64)> = BTreeMap::new();
    for s in seen {
        if let Some(l) = s.record.loss.filter(|l| l.is_finite()) {
            let e = loss.entry(s.record.step).or_insert((0.0, 0));
            e.0 += l;
            e.1 += 1;
        }
    }
    let means: Vec<f64> = loss.values().map(|(sum, n)| sum / *n as f64).collect();
    let quarter = means.len() / 4;
    let mut loss_note = format!(
        "{} steps with a loss: too few to judge a trend",
        means.len()
    );
    if means.len() >= 20 {
        let avg = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
        let (head, tail) = (avg(&means[..quarter]), avg(&means[means.len() - quarter..]));
        loss_note =
            format!("mean loss {head:.4} over the first quarter of steps, {tail:.4} over the last");
        if tail >= head {
            found.add(
                "loss-not-decreasing",
                json!({"first_quarter": head, "last_quarter": tail}),
                Vec::new(),
            );
        }
    }
    // Recoveries: where the generation that committed consecutive steps changes, the
    // pause between their first commits beyond the typical pause. Steps commit in batches
    // (one per checkpoint), so the typical pause is the median of the non-zero ones.
    let mut first_commit: BTreeMap<u64, (u64, Option<u64>)> = BTreeMap::new();
    for s in seen {
        let e = first_commit
            .entry(s.record.step)
            .or_insert((s.time, s.record.gen));
        if s.time < e.0 {
            *e = (s.time, s.record.gen);
        }
    }
    // (step, (time, gen) of its first commit, the same for the next step).
    type Commit = (u64, Option<u64>);
    let pairs: Vec<(u64, Commit, Commit)> = first_commit
        .iter()
        .zip(first_commit.iter().skip(1))
        .map(|((s, a), (_, b))| (*s, *a, *b))
        .collect();
    let mut pauses: Vec<u64> = pairs
        .iter()
        .map(|(_, a, b)| b.0.saturating_sub(a.0))
        .filter(|g| *g > 1_000_000)
        .collect();
    pauses.sort_unstable();
    let typical = pauses.get(pauses.len() / 2).copied().unwrap_or(0);
    let recoveries: Vec<Value> = pairs
        .iter()
        .filter(|(_, a, b)| a.1.is_some() && b.1.is_some() && a.1 != b.1)
        .map(|(step, a, b)| {
            let lost = b.0.saturating_sub(a.0).saturating_sub(typical) / 1_000_000;
            json!({"after_step": step, "from_gen": a.1, "to_gen": b.1, "lost_ms": lost})
        })
        .collect();
    let lost_ms: u64 = recoveries
        .iter()
        .filter_map(|r| r["lost_ms"].as_u64())
        .sum();
    let median = typical;
    let details = json!({
        "ranks": last.values().map(|s| s.record.rank).collect::<BTreeSet<_>>(),
        "last_step_by_process": last.iter().map(|(p, s)| (p.to_string(), s.record.step)).collect::<BTreeMap<_, _>>(),
        "loss": loss_note,
        "recoveries": recoveries,
        "time_lost_ms": lost_ms,
        "steps_skipped_as_non_member": skipped,
        "nemesis_ops": history.nemesis_count(),
        "median_step_gap_ms": median as f64 / 1e6,
    });
    let headline = match (first_gap, found.by_type.contains_key("loss-not-decreasing")) {
        (Some(g), _) => format!("committed steps are not gap-free: {g}"),
        (None, true) => format!("the loss does not fall: {loss_note}"),
        (None, false) => format!(
            "every rank's committed steps are gap-free; {loss_note}; {} recoveries cost {lost_ms} ms",
            recoveries.len()
        ),
    };
    found.result("ddp-progress", headline, details)
}

/// Equality with the single-process reference run.
pub(crate) fn reference(seen: &[Seen], reference: Option<&BTreeMap<u64, String>>) -> CheckResult {
    let Some(reference) = reference else {
        return CheckResult::new(
            "ddp-reference",
            Validity::Unknown,
            "no reference digests were given: run the single-process replay (splitbrain-ddp --replay) to compare against",
        );
    };
    let mut found = Found::default();
    let mut first: Option<String> = None;
    let mut compared = 0usize;
    let mut unchecked = 0usize;
    let mut last_step = 0;
    for s in seen {
        let Some(want) = reference.get(&s.record.step) else {
            unchecked += 1;
            continue;
        };
        compared += 1;
        last_step = last_step.max(s.record.step);
        if *want != s.record.digest {
            first.get_or_insert_with(|| {
                format!(
                    "step {} on rank {}: digest {} but the reference has {want}",
                    s.record.step, s.record.rank, s.record.digest
                )
            });
            found.add(
                "reference-mismatch",
                json!({"step": s.record.step, "rank": s.record.rank, "digest": s.record.digest, "reference": want}),
                vec![s.evidence()],
            );
        }
    }
    let details = json!({"compared": compared, "beyond_reference": unchecked, "reference_steps": reference.len()});
    if compared == 0 && found.by_type.is_empty() {
        let mut r = CheckResult::new(
            "ddp-reference",
            Validity::Unknown,
            format!(
                "no committed step falls within the {} reference steps",
                reference.len()
            ),
        );
        r.details = details;
        return r;
    }
    let headline = match first {
        Some(f) => format!("the run differs from the single-process reference; the first: {f}"),
        None => format!(
            "all {compared} reports up to step {last_step} equal the single-process reference bit for bit"
        ),
    };
    found.result("ddp-reference", headline, details)
}
