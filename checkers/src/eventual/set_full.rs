//! Set-full (after Jepsen's `set-full` checker): per key and element, when it was added,
//! first and last seen, and whether it was lost, read stale, or never read.
//!
//! Order is real time, by history position. For element `e` of key `k`:
//! - *known* at the earliest of its add's ok completion and the completion of the first
//!   read that contained it;
//! - *lost*: known, and at least one read of `k` began after both the known point and the
//!   completion of the last read containing `e` (every such read lacks `e`);
//! - a *stale read* of `e`: a read that began after `e` was known and lacks it;
//! - *stable*: the last read of `k` contains `e`; its *stable visibility* starts at the
//!   first read of the all-containing suffix (by invoke), and the latency reported is from
//!   the add's acknowledgement to that read's invoke (0 if the read began earlier);
//! - *never read*: no read contained it (and not lost); *unstable*: seen, not lost, but the
//!   last read lacks it (a read concurrent with the last one that had it);
//! - *unexpected*: an element in a read that no add attempted (or only failed adds did).
//!
//! Valid iff nothing is lost and nothing unexpected; stale reads are allowed under
//! eventual consistency but counted. Every pass is linear in the total size of the reads.

use super::view::{KeyOps, ReadValues, View};
use super::{
    key_label, malformed_reason, ms, op_index, quantiles, EventualDataType, FastMap, LocalIds,
    Verdict, MAX_CASES,
};
use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker};
use rayon::prelude::*;
use serde::Serialize;
use serde_json::json;

/// Runs the set-full analysis; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetFullChecker;

/// What became of an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ElementOutcome {
    /// Every read from some point on contains it.
    Stable,
    /// Known present, then absent from every read that began after its last appearance.
    Lost,
    /// No read ever contained it (and it is not lost).
    NeverRead,
    /// Seen and not lost, but the last read of its key lacks it.
    Unstable,
}

/// One element's story.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElementReport {
    /// The key (`""` when ops carry none).
    pub key: String,
    /// The element.
    pub element: i64,
    /// Index of the first (not failed) add's invoke.
    pub add_invoke_index: u64,
    /// Index of the first ok completion of an add of it, if acknowledged.
    pub add_ok_index: Option<u64>,
    /// Index (completion) of the earliest-completing read that contained it.
    pub first_seen_index: Option<u64>,
    /// Index (completion) of the latest-completing read that contained it.
    pub last_seen_index: Option<u64>,
    /// Reads that began after it was known present and lack it.
    pub stale_reads: usize,
    /// Its classification.
    pub outcome: ElementOutcome,
    /// Milliseconds from the acknowledgement to stable visibility (stable, acknowledged).
    pub stable_latency_ms: Option<f64>,
}

/// An element read but never (successfully) attempted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnexpectedElement {
    /// The key.
    pub key: String,
    /// The element.
    pub element: i64,
    /// Index (completion) of the first read that held it.
    pub read_index: u64,
    /// Index of a failed add of it, if there was one.
    pub failed_add_index: Option<u64>,
    #[serde(skip)]
    positions: Vec<usize>,
}

/// The whole analysis, for callers that want more than the verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SetFullAnalysis {
    /// Every attempted element, by key (in order of first appearance) then element.
    pub elements: Vec<ElementReport>,
    /// Elements read that were never attempted.
    pub unexpected: Vec<UnexpectedElement>,
    /// Ok reads of the keys.
    pub reads: usize,
    /// Reads that lacked at least one element known present when they began.
    pub stale_reads: usize,
    /// Evidence positions for each lost element (add ops, last containing read, first read
    /// after it), parallel to the lost entries of `elements`.
    #[serde(skip)]
    lost_evidence: Vec<Vec<usize>>,
    /// Why some ops could not be read as set ops, if any could not.
    #[serde(skip)]
    malformed: Option<String>,
}

/// Per element state during the passes.
#[derive(Clone, Copy)]
struct Track {
    known: usize,
    ack: Option<usize>,
    first_add: usize,
    first_seen: Option<usize>,
    last_seen: Option<usize>,
    last_seen_read: Option<usize>,
    prev_present: Option<usize>,
    run_start: usize,
    present_after_known: usize,
}

const NONE: usize = usize::MAX;

fn analyse_key(history: &History, key: &KeyOps) -> SetFullAnalysis {
    let idx = |p: usize| op_index(history, p);
    // Attempted elements (any add not failed), and failed-only ones for the report.
    let mut adds: Vec<(i64, usize, Outcome, Option<usize>)> = key
        .updates
        .iter()
        .filter_map(|u| Some((u.arg.element()?, u.invoke_pos, u.outcome, u.complete_pos)))
        .collect();
    adds.sort_unstable_by_key(|a| (a.0, a.1));
    let mut elems: Vec<i64> = Vec::new();
    let mut track: Vec<Track> = Vec::new();
    let mut failed: Vec<(i64, usize)> = Vec::new();
    for &(e, inv, outcome, comp) in &adds {
        if outcome == Outcome::Fail {
            failed.push((e, inv));
            continue;
        }
        if elems.last() != Some(&e) {
            elems.push(e);
            track.push(Track {
                known: NONE,
                ack: None,
                first_add: inv,
                first_seen: None,
                last_seen: None,
                last_seen_read: None,
                prev_present: None,
                run_start: 0,
                present_after_known: 0,
            });
        }
        if let (Outcome::Ok, Some(c), Some(t)) = (outcome, comp, track.last_mut()) {
            if t.ack.is_none_or(|a| c < a) {
                t.ack = Some(c);
                t.known = t.known.min(c);
            }
        }
    }
    let mut out = SetFullAnalysis {
        reads: key.reads.len(),
        ..SetFullAnalysis::default()
    };
    let mut unexpected_seen: FastMap<i64, ()> = FastMap::default();
    // Local ids of each read's known elements, all reads end to end.
    let mut present_flat: Vec<u32> = Vec::new();
    let mut bounds: Vec<usize> = Vec::with_capacity(key.reads.len() + 1);
    bounds.push(0);
    // marked[i] = 1 + the last read that held element i (to count it once per read).
    let mut marked: Vec<usize> = vec![0; elems.len()];
    let ids = LocalIds::new(&elems);
    // Pass 1: known points, first/last seen, the run of consecutive containing reads.
    for (j, r) in key.reads.iter().enumerate() {
        for e in r.value.elements() {
            let Some(i) = ids.get(e).map(|i| i as usize) else {
                if unexpected_seen.insert(e, ()).is_none() {
                    // `failed` is sorted by element, then invoke: the first failed add.
                    let k = failed.partition_point(|f| f.0 < e);
                    let failed_add = failed.get(k).filter(|f| f.0 == e).map(|f| f.1);
                    out.unexpected.push(UnexpectedElement {
                        key: key.name.clone(),
                        element: e,
                        read_index: idx(r.complete_pos),
                        failed_add_index: failed_add.map(idx),
                        positions: std::iter::once(r.complete_pos).chain(failed_add).collect(),
                    });
                }
                continue;
            };
            if marked[i] == j + 1 {
                continue;
            }
            marked[i] = j + 1;
            present_flat.push(i as u32);
            let t = &mut track[i];
            t.known = t.known.min(r.complete_pos);
            if t.first_seen.is_none_or(|f| r.complete_pos < f) {
                t.first_seen = Some(r.complete_pos);
            }
            if t.last_seen.is_none_or(|l| r.complete_pos > l) {
                t.last_seen = Some(r.complete_pos);
                t.last_seen_read = Some(j);
            }
            if t.prev_present.is_none_or(|p| p + 1 != j) {
                t.run_start = j;
            }
            t.prev_present = Some(j);
        }
        bounds.push(present_flat.len());
    }
    // Pass 2: stale reads, per element and per read.
    let invokes: Vec<usize> = key.reads.iter().map(|r| r.invoke_pos).collect();
    let mut known_sorted: Vec<usize> = track
        .iter()
        .map(|t| t.known)
        .filter(|&k| k != NONE)
        .collect();
    known_sorted.sort_unstable();
    for (r, w) in key.reads.iter().zip(bounds.windows(2)) {
        let mut known_present = 0;
        for &i in &present_flat[w[0]..w[1]] {
            let t = &mut track[i as usize];
            if t.known < r.invoke_pos {
                t.present_after_known += 1;
                known_present += 1;
            }
        }
        if known_sorted.partition_point(|&k| k < r.invoke_pos) > known_present {
            out.stale_reads += 1;
        }
    }
    let last_invoke = invokes.last().copied();
    for (e, t) in elems.iter().zip(&track) {
        let reads_after_known = if t.known == NONE {
            0
        } else {
            invokes.len() - invokes.partition_point(|&p| p <= t.known)
        };
        let horizon = t.known.max(t.last_seen.unwrap_or(0));
        let lost = t.known != NONE && last_invoke.is_some_and(|l| l > horizon);
        let stable = t.prev_present.is_some() && t.prev_present == invokes.len().checked_sub(1);
        let outcome = if lost {
            ElementOutcome::Lost
        } else if t.first_seen.is_none() {
            ElementOutcome::NeverRead
        } else if stable {
            ElementOutcome::Stable
        } else {
            ElementOutcome::Unstable
        };
        let stable_latency_ms = match (stable, t.ack) {
            (true, Some(ack)) => {
                let from = history.op_time(ack).unwrap_or(0);
                let to = history
                    .op_time(key.reads[t.run_start].invoke_pos)
                    .unwrap_or(0);
                Some(ms(to.saturating_sub(from)))
            }
            _ => None,
        };
        if lost {
            let mut ev: Vec<usize> = vec![t.first_add];
            ev.extend(t.ack);
            ev.extend(t.last_seen);
            let first_after = invokes.partition_point(|&p| p <= horizon);
            if let Some(r) = key.reads.get(first_after) {
                ev.push(r.complete_pos);
            }
            out.lost_evidence.push(ev);
        }
        out.elements.push(ElementReport {
            key: key.name.clone(),
            element: *e,
            add_invoke_index: idx(t.first_add),
            add_ok_index: t.ack.map(idx),
            first_seen_index: t.first_seen.map(idx),
            last_seen_index: t.last_seen.map(idx),
            stale_reads: reads_after_known - t.present_after_known,
            outcome,
            stable_latency_ms,
        });
    }
    out
}

impl SetFullChecker {
    /// The per-element analysis of every key of a set history.
    pub fn analyse(&self, history: &History) -> SetFullAnalysis {
        let view = View::build(history, EventualDataType::Set, ReadValues::All);
        let parts: Vec<SetFullAnalysis> = view
            .keys
            .par_iter()
            .map(|k| analyse_key(history, k))
            .collect();
        let mut all = SetFullAnalysis::default();
        for p in parts {
            all.elements.extend(p.elements);
            all.unexpected.extend(p.unexpected);
            all.reads += p.reads;
            all.stale_reads += p.stale_reads;
            all.lost_evidence.extend(p.lost_evidence);
        }
        all.malformed = malformed_reason(&view, history);
        all
    }
}

impl Checker for SetFullChecker {
    fn name(&self) -> String {
        "set-full".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let a = self.analyse(history);
        let count = |o: ElementOutcome| a.elements.iter().filter(|e| e.outcome == o).count();
        let lost: Vec<&ElementReport> = a
            .elements
            .iter()
            .filter(|e| e.outcome == ElementOutcome::Lost)
            .collect();
        let stale_elements = a.elements.iter().filter(|e| e.stale_reads > 0).count();
        let mut latencies: Vec<f64> = a
            .elements
            .iter()
            .filter_map(|e| e.stable_latency_ms)
            .collect();
        let details = json!({
            "elements": a.elements.len(),
            "acknowledged": a.elements.iter().filter(|e| e.add_ok_index.is_some()).count(),
            "stable": count(ElementOutcome::Stable),
            "lost": lost.len(),
            "never_read": count(ElementOutcome::NeverRead),
            "unstable": count(ElementOutcome::Unstable),
            "unexpected": a.unexpected.len(),
            "stale_elements": stale_elements,
            "reads": a.reads,
            "stale_reads": a.stale_reads,
            "stale_read_share": if a.reads == 0 { 0.0 } else { a.stale_reads as f64 / a.reads as f64 },
            "stable_latency_ms": quantiles(&mut latencies),
            "lost_elements": lost.iter().take(100).collect::<Vec<_>>(),
            "unexpected_elements": a.unexpected.iter().take(100).collect::<Vec<_>>(),
            "stale_examples": a.elements.iter().filter(|e| e.stale_reads > 0).take(MAX_CASES).collect::<Vec<_>>(),
        });
        let mut texts = Vec::new();
        let mut positions = Vec::new();
        for (e, ev) in lost.iter().zip(&a.lost_evidence).take(MAX_CASES) {
            let last = match e.last_seen_index {
                Some(l) => format!("last seen by read op {l}"),
                None => "never seen".into(),
            };
            let ack = match e.add_ok_index {
                Some(a) => format!("acknowledged by op {a}"),
                None => "observed".into(),
            };
            let after = ev
                .last()
                .filter(|_| ev.len() > 1)
                .map_or("?".into(), |p| op_index(history, *p).to_string());
            texts.push(format!(
                "element {} of key {} lost: added by op {}, {ack}, {last}, then absent from every later read (e.g. op {after})",
                e.element,
                key_label(&e.key),
                e.add_invoke_index,
            ));
            positions.extend(ev);
        }
        for u in a.unexpected.iter().take(MAX_CASES) {
            let why = match u.failed_add_index {
                Some(f) => format!("its only add, op {f}, failed"),
                None => "no add of it was ever attempted".into(),
            };
            texts.push(format!(
                "element {} of key {} unexpected: read by op {} but {why}",
                u.element,
                key_label(&u.key),
                u.read_index
            ));
            positions.extend(&u.positions);
        }
        let mut anomalies = Vec::new();
        if !lost.is_empty() {
            anomalies.push("lost".to_string());
        }
        if !a.unexpected.is_empty() {
            anomalies.push("unexpected".to_string());
        }
        Verdict {
            checker: self.name(),
            invalid: (!anomalies.is_empty()).then(|| {
                (
                    format!(
                        "{} lost and {} unexpected element(s): {}",
                        lost.len(),
                        a.unexpected.len(),
                        texts.join("; ")
                    ),
                    positions,
                    anomalies,
                )
            }),
            unknown: if a.reads == 0 {
                Some("no ok read of a set, so no element could be judged".to_string())
            } else {
                a.malformed.clone()
            },
            valid: format!(
                "no element lost or unexpected among {} element(s) and {} read(s); {} read(s) were stale ({} element(s) read stale at least once)",
                a.elements.len(),
                a.reads,
                a.stale_reads,
                stale_elements
            ),
            details,
            coverage: crate::verdict::Coverage::of([
                ("elements", a.elements.len() as u64),
                ("reads", a.reads as u64),
            ]),
        }
        .into_result(history)
    }
}
