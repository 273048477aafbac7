//! Eventual-consistency checkers: convergence, set-full, committed-prefix stability,
//! session guarantees and the booking schedule.
//!
//! They read the generic history shapes of `notes/bayou-contract.md` ("History shapes"),
//! so any eventually consistent store's history can be judged, not only Bayou's:
//! - updates: `add` (set element, or counter delta; `incr` is accepted for counters) and
//!   `book` (`{"id": ID, "alternatives": [[room, slot], ...]}`), each on an optional `key`;
//! - ok reads (`f` = `read`): a plain list of set elements (Jepsen's shape, no order), an
//!   object `{"committed": [...], "tentative": [...]}` (plus `"schedule": [[id, room,
//!   slot], ...]` for bookings), or an integer for counters;
//! - `node`: the replica that served the op; `process`: the client session.
//!
//! **Final reads** are the ok reads invoked after the *quiescence point*: the latest of the
//! last nemesis op, the last completion of any update, and the invoke of any update that
//! never completed. Ops are named in results by their history index.
//!
//! ```
//! use splitbrain_checkers::eventual::{ConvergenceChecker, EventualDataType, SetFullChecker};
//! use splitbrain_checkers::Checker;
//! assert_eq!(ConvergenceChecker::new(EventualDataType::Set).name(), "convergence");
//! assert_eq!(SetFullChecker.name(), "set-full");
//! ```

pub mod bench;
mod booking;
mod convergence;
mod follow;
mod prefix;
mod prefix_online;
mod scan;
mod session;
mod session_online;
mod set_full;
mod view;

pub use booking::BookingChecker;
pub use convergence::ConvergenceChecker;
pub use prefix::CommittedPrefixChecker;
pub use session::SessionGuaranteesChecker;
pub use set_full::{
    ElementOutcome, ElementReport, SetFullAnalysis, SetFullChecker, UnexpectedElement,
};

use crate::history::History;
use crate::verdict::{CheckResult, Coverage, Validity};
use serde_json::{json, Value};

/// The kind of replicated object a history's keys hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventualDataType {
    /// A grow-only set of integer elements (`add`, reads of the elements).
    Set,
    /// A counter (`add`/`incr` of integer deltas, reads of the integer value); negative
    /// deltas make it a PN-counter.
    Counter,
    /// A meeting-room schedule (`book` reservations, reads of ids and the schedule).
    Booking,
}

impl EventualDataType {
    /// `set`, `counter` or `booking`.
    pub fn name(self) -> &'static str {
        match self {
            EventualDataType::Set => "set",
            EventualDataType::Counter => "counter",
            EventualDataType::Booking => "booking",
        }
    }

    /// Parses a name given by [`EventualDataType::name`].
    pub fn parse(s: &str) -> Option<EventualDataType> {
        match s {
            "set" => Some(EventualDataType::Set),
            "counter" => Some(EventualDataType::Counter),
            "booking" => Some(EventualDataType::Booking),
            _ => None,
        }
    }
}

/// How many cases of each violation are kept as evidence (all are counted).
const MAX_CASES: usize = 5;

/// The index by which results name the op at `pos`: the history's own.
fn op_index(history: &History, pos: usize) -> u64 {
    history.op_index(pos)
}

/// The op at `pos` as history JSON (with the history's own index), for evidence.
fn op_json(history: &History, pos: usize) -> Value {
    history
        .carried_op(pos)
        .and_then(|op| serde_json::to_value(op).ok())
        .unwrap_or(Value::Null)
}

/// Evidence ops at the given positions, each once, in history order.
fn ops_json(history: &History, positions: &[usize]) -> Vec<Value> {
    let mut ps = positions.to_vec();
    ps.sort_unstable();
    ps.dedup();
    ps.into_iter().map(|p| op_json(history, p)).collect()
}

/// What a checker found, turned into its result.
struct Verdict {
    /// The checker's name.
    checker: String,
    /// Violations: (explanation, evidence positions, anomaly types). `None` if none.
    invalid: Option<(String, Vec<usize>, Vec<String>)>,
    /// Why nothing could be decided, when no violation was found.
    unknown: Option<String>,
    /// The explanation of a valid verdict.
    valid: String,
    /// Checker-specific details.
    details: Value,
    /// What the checker saw (keys, reads, final reads, ...).
    coverage: Coverage,
}

impl Verdict {
    /// Invalid beats unknown beats valid; invalid results carry the evidence ops.
    fn into_result(self, history: &History) -> CheckResult {
        let (valid, explanation, evidence, anomalies) = match (self.invalid, self.unknown) {
            (Some((text, positions, kinds)), _) => (
                Validity::Invalid,
                text,
                ops_json(history, &positions),
                kinds,
            ),
            (None, Some(reason)) => (Validity::Unknown, reason, Vec::new(), Vec::new()),
            (None, None) => (Validity::Valid, self.valid, Vec::new(), Vec::new()),
        };
        let mut r = CheckResult::new(self.checker, valid, explanation);
        r.evidence = evidence;
        r.anomaly_types = anomalies;
        r.details = self.details;
        r.with_coverage(self.coverage)
    }
}

/// Why a check is unknown when some ops could not be read, if any could not.
fn malformed_reason(view: &view::View, history: &History) -> Option<String> {
    view.malformed.first().map(|(pos, why)| {
        format!(
            "{} op(s) could not be read, e.g. op {}: {why}",
            view.malformed_count,
            op_index(history, *pos)
        )
    })
}

/// FNV-1a: a fast hash for the short keys, node names and ids these checkers index by,
/// which are not chosen by an adversary.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x0100_0000_01b3);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// A hash map with [`Fnv`] hashing.
type FastMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

/// Numbers a key's distinct elements 0..n (their rank in sorted order): a direct table
/// when the elements are dense integers (the usual case), binary search otherwise.
struct LocalIds<'a> {
    sorted: &'a [i64],
    /// `table[e - min]` = 1 + the element's rank, or 0 when absent.
    table: Vec<u32>,
    min: i64,
}

impl<'a> LocalIds<'a> {
    /// `sorted` must be sorted and deduplicated.
    fn new(sorted: &'a [i64]) -> LocalIds<'a> {
        let (min, max) = match (sorted.first(), sorted.last()) {
            (Some(&a), Some(&b)) => (a, b),
            _ => (0, -1),
        };
        let span = (max as i128 - min as i128 + 1).max(0) as u128;
        let table = if span <= 4 * sorted.len() as u128 + 64 {
            let mut t = vec![0u32; span as usize];
            for (i, &e) in sorted.iter().enumerate() {
                t[(e - min) as usize] = i as u32 + 1;
            }
            t
        } else {
            Vec::new()
        };
        LocalIds { sorted, table, min }
    }

    /// The rank of `e`, if it is one of the elements.
    #[inline]
    fn get(&self, e: i64) -> Option<u32> {
        if self.table.is_empty() {
            return self.sorted.binary_search(&e).ok().map(|i| i as u32);
        }
        let off = e.checked_sub(self.min)?;
        match usize::try_from(off).ok().and_then(|o| self.table.get(o)) {
            Some(&r) if r > 0 => Some(r - 1),
            _ => None,
        }
    }
}

/// Nanoseconds to milliseconds.
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Quantiles p50/p95/p99/max of `v` (sorted here; [`crate::quantile`]'s nearest rank),
/// or null when empty.
fn quantiles(v: &mut [f64]) -> Value {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| crate::quantile::quantile_of_sorted(v, p);
    match (q(0.50), q(0.95), q(0.99), q(1.0)) {
        (Some(p50), Some(p95), Some(p99), Some(max)) => {
            json!({"p50": p50, "p95": p95, "p99": p99, "max": max, "count": v.len()})
        }
        _ => Value::Null,
    }
}

/// Renders up to 10 integers, then how many more.
fn short_list(v: &[i64]) -> String {
    let mut s: Vec<String> = v.iter().take(10).map(i64::to_string).collect();
    if v.len() > 10 {
        s.push(format!("... {} more", v.len() - 10));
    }
    format!("[{}]", s.join(", "))
}

/// The key as shown in explanations.
fn key_label(name: &str) -> String {
    if name.is_empty() {
        "(no key)".into()
    } else {
        format!("{name:?}")
    }
}
