//! What an online result may claim for the whole history: the anomaly types a prefix
//! shows for good (each checker's, and Elle's monotone classes whose transactions all
//! completed), and the span of the ops that make each finding, which the guided nemesis
//! credits faults by.

use serde_json::Value;
use splitbrain_checkers::{CheckResult, History, Validity};
use std::collections::HashSet;

/// The checkers that decide on a prefix of the history (how each does: `online.rs`).
pub const ONLINE_CHECKERS: [&str; 7] = [
    "linearizable",
    "elle-list-append",
    "elle-rw-register",
    "bank",
    "ddp-replicas",
    "committed-prefix",
    "session-guarantees",
];

/// Anomaly types of `bank` that a completed read shows for good.
const BANK_ANOMALIES: [&str; 2] = ["wrong-total", "negative-value"];

/// Anomaly types of `ddp-replicas`, each shown by reports of committed steps.
const DDP_ANOMALIES: [&str; 3] = [
    "replica-divergence",
    "member-divergence",
    "non-member-report",
];

/// Anomaly types of `committed-prefix`, each shown by one or two completed reads.
const PREFIX_ANOMALIES: [&str; 2] = ["committed-prefix-changed", "committed-duplicate"];

/// Guarantees of `session-guarantees` that one session's completed read shows for good
/// (sets and bookings; the other two, and counters, wait for the final check).
const SESSION_ANOMALIES: [&str; 2] = ["read-your-writes", "monotonic-reads"];

/// An Elle anomaly class that later operations cannot take away, once every transaction
/// it names has completed: a cycle among transactions (its edges come from completed
/// reads, writes, process and real-time order, all fixed), an aborted or intermediate
/// read, an internal inconsistency, a lost update, two reads of one key in incompatible
/// orders.
pub fn monotone_elle_anomaly(anomaly: &str) -> bool {
    const CYCLES: [&str; 5] = ["G0", "G1c", "G-single", "G-nonadjacent", "G2"];
    matches!(
        anomaly,
        "G1a" | "G1b" | "internal" | "lost-update" | "incompatible-order"
    ) || (CYCLES.iter().any(|c| anomaly.starts_with(c)) && !anomaly.ends_with("cycle-exists"))
}

/// True when the online checker can find `name` (a checker or an anomaly type), so that
/// a run may wait for it before it stops early (`suite`'s cells).
pub fn decides_online(name: &str) -> bool {
    ONLINE_CHECKERS.contains(&name)
        || BANK_ANOMALIES.contains(&name)
        || DDP_ANOMALIES.contains(&name)
        || PREFIX_ANOMALIES.contains(&name)
        || SESSION_ANOMALIES.contains(&name)
        || monotone_elle_anomaly(name)
}

/// The op indices an Elle anomaly instance names (`op`, `writer`, the `cycle`, `txns`).
pub(super) fn named_indices(v: &Value, out: &mut Vec<u64>) {
    match v {
        Value::Object(m) => {
            if let Some(i) = m.get("index").and_then(Value::as_u64) {
                out.push(i);
            }
            for (k, x) in m {
                // A cycle's steps name its own members again.
                if k != "steps" {
                    named_indices(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| named_indices(x, out)),
        _ => {}
    }
}

/// The span (history clock, ns) of `ops` named by index: from the earliest invocation to
/// the latest completion.
pub(super) fn span_of(h: &History, named: &HashSet<u64>) -> Option<(u64, u64)> {
    let mut span: Option<(u64, u64)> = None;
    for p in h.pairs() {
        let invoke = h.op_index(p.invoke_pos);
        let done = p.complete_pos.map(|c| h.op_index(c));
        if named.contains(&invoke) || done.is_some_and(|d| named.contains(&d)) {
            let end = p.complete_time.unwrap_or(p.invoke_time);
            span = Some(span.map_or((p.invoke_time, end), |(a, b)| {
                (a.min(p.invoke_time), b.max(end))
            }));
        }
    }
    span
}

/// Elle's evidence: the transactions named by the first instance of each monotone class
/// that names no pending transaction (as [`certain_anomalies`] takes them).
pub(super) fn elle_evidence(
    result: &CheckResult,
    h: &History,
    pending: &HashSet<u64>,
) -> Option<(u64, u64)> {
    let anomalies = result.details.get("anomalies")?.as_object()?;
    let mut named_all: HashSet<u64> = HashSet::new();
    for (t, found) in anomalies.iter().filter(|(t, _)| monotone_elle_anomaly(t)) {
        let instances = found["instances"].as_array().cloned().unwrap_or_default();
        let first = instances.iter().find_map(|inst| {
            if is_cycle(t) && !inst.get("cycle").is_some_and(Value::is_array) {
                return None;
            }
            let mut named = Vec::new();
            named_indices(inst, &mut named);
            named.iter().all(|i| !pending.contains(i)).then_some(named)
        });
        named_all.extend(first.into_iter().flatten());
    }
    span_of(h, &named_all)
}

/// The bank's evidence: the first wrong read (by index), from the completion of the last
/// complete read before it (in `h`, or `read_before_ns` from earlier ticks) to its own.
pub(super) fn bank_evidence(
    result: &CheckResult,
    h: &History,
    read_before_ns: u64,
) -> Option<(u64, u64)> {
    let errors = result.details.get("errors")?.as_object()?;
    let bad = errors
        .values()
        .filter_map(|e| e.get("instances")?.as_array())
        .flatten()
        .filter_map(|i| i.get("index")?.as_u64())
        .min()?;
    let (_, to) = span_of(h, &HashSet::from([bad]))?;
    let from = h
        .pairs()
        .iter()
        .filter(|p| p.outcome == splitbrain_checkers::Outcome::Ok && p.f == "read")
        .filter(|p| p.complete_pos.is_some_and(|c| h.op_index(c) < bad))
        .filter(|p| splitbrain_checkers::bank::read_sum(&p.value).is_some())
        .filter_map(|p| p.complete_time)
        .max()
        .unwrap_or(0)
        .max(read_before_ns)
        .min(to);
    Some((from, to))
}

/// The part of an online result that stands for the whole history: the anomaly types it
/// may report, or `None` when nothing in it is certain (see the module docs).
pub fn certain_anomalies(result: &CheckResult, pending: &HashSet<u64>) -> Option<Vec<String>> {
    if result.valid != Validity::Invalid {
        return None;
    }
    match result.checker.as_str() {
        // Decided segment by segment, over-approximating what came before.
        "linearizable" => Some(Vec::new()),
        // Reports of committed steps, committed lists, and a session's own past, which
        // never change.
        "ddp-replicas" | "committed-prefix" | "session-guarantees" => {
            let found: Vec<String> = result
                .anomaly_types
                .iter()
                .filter(|t| {
                    DDP_ANOMALIES.contains(&t.as_str())
                        || PREFIX_ANOMALIES.contains(&t.as_str())
                        || SESSION_ANOMALIES.contains(&t.as_str())
                })
                .cloned()
                .collect();
            (!found.is_empty()).then_some(found)
        }
        "bank" => {
            let found: Vec<String> = result
                .anomaly_types
                .iter()
                .filter(|t| BANK_ANOMALIES.contains(&t.as_str()))
                .cloned()
                .collect();
            (!found.is_empty()).then_some(found)
        }
        "elle-list-append" | "elle-rw-register" => {
            let anomalies = result.details.get("anomalies")?.as_object()?;
            let found: Vec<String> = anomalies
                .iter()
                .filter(|(t, _)| monotone_elle_anomaly(t))
                .filter(|(t, found)| {
                    let instances = found["instances"].as_array().cloned().unwrap_or_default();
                    instances.iter().any(|inst| {
                        // A cycle must name its members; a proof of one without them
                        // may rest on transactions still pending.
                        if is_cycle(t) && !inst.get("cycle").is_some_and(Value::is_array) {
                            return false;
                        }
                        let mut named = Vec::new();
                        named_indices(inst, &mut named);
                        named.iter().all(|i| !pending.contains(i))
                    })
                })
                .map(|(t, _)| t.clone())
                .collect();
            (!found.is_empty()).then_some(found)
        }
        _ => None,
    }
}

pub(super) fn is_cycle(anomaly: &str) -> bool {
    !matches!(
        anomaly,
        "G1a" | "G1b" | "internal" | "lost-update" | "incompatible-order"
    )
}
