//! History shrinking: the smallest sub-history that still fails the same way.
//!
//! A failing history of tens of thousands of operations is reduced, with the checker
//! itself as the oracle, to a sub-history in which every remaining operation matters:
//! removing any one of them makes the failure go away or change its kind (1-minimality,
//! Zeller and Hildebrandt's *delta debugging*, TSE 2002, §3–4).
//!
//! The units removed are whole client operations (an invoke with its completion, or an
//! invoke that never completed) and single nemesis events, so every candidate is a
//! well-formed history: completions keep their invokes, each process keeps its order,
//! times keep running forward, and every op keeps the index it carried, so the shrunk
//! history's explanation names the same ops as the original's.
//!
//! Before delta debugging, cheap guesses are tried in order, the first that still fails
//! being kept: the ops of the checker's own evidence; the client ops on the keys the
//! evidence names; each single key's ops. A failure that lives in one key of a keyed
//! history is so cut to that key in a handful of checks.
//!
//! "The same way" ([`SameFailure`]) is a [`FailureClass`] — the same checker, invalid,
//! and (when the checker names anomalies) still showing the anomaly named: a G2-item
//! stays a G2-item, a lost append stays lost — and two rules more. The checker names no
//! anomaly the original did not show: dropping the transaction that wrote a value makes
//! its reads a `garbage-read`, dropping an add makes the read that saw it `unexpected`,
//! and a history failing only with such reads besides is another failure than the
//! original's. And a read whose value the original explains by a write invoked before
//! the read completed keeps one such write: without it a stale read would shrink to the
//! read alone, or to the read and a later write of the same value, which fail only as a
//! read of a value nobody had written yet.

use crate::history::{History, HistoryError, Op, OpType, Process};
use crate::verdict::{CheckResult, Checker, Validity};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// What a shrunk history must still show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureClass {
    /// The checker's name, as in its results.
    pub checker: String,
    /// The anomaly that must remain, when the checker names anomalies.
    pub anomaly: Option<String>,
}

/// Checkers whose verdict rests on timing: linearizability orders operations by real
/// time, convergence asks that replicas agree within a time bound.
const TIMING_CHECKERS: [&str; 2] = ["linearizable", "convergence"];

impl FailureClass {
    /// The class of a failing result: its checker and `anomaly` if given, else the most
    /// robust anomaly the result names (see [`FailureClass::timing_rank`]; among those
    /// equally robust the most severe, [`FailureClass::severity_rank`], then the first).
    /// `None` if the result is not invalid, or names no such anomaly.
    pub fn of(result: &CheckResult, anomaly: Option<&str>) -> Option<FailureClass> {
        if result.valid != Validity::Invalid {
            return None;
        }
        let anomaly = match anomaly {
            Some(a) => Some(result.anomaly_types.iter().find(|t| *t == a)?.clone()),
            None => result
                .anomaly_types
                .iter()
                .min_by_key(|t| {
                    (
                        Self::timing_rank(&result.checker, Some(t.as_str())),
                        Self::severity_rank(t),
                    )
                })
                .cloned(),
        };
        Some(FailureClass {
            checker: result.checker.clone(),
            anomaly,
        })
    }

    /// The class to keep among a run's results: with `anomaly`, the first invalid result
    /// naming it; without, the most robust failure ([`FailureClass::timing_rank`]), the
    /// first result's among those equally robust. A replay is then most likely to fail
    /// the same way again.
    pub fn of_results(results: &[CheckResult], anomaly: Option<&str>) -> Option<FailureClass> {
        let mut classes = results.iter().filter_map(|r| FailureClass::of(r, anomaly));
        if anomaly.is_some() {
            return classes.next();
        }
        classes.min_by_key(|c| Self::timing_rank(&c.checker, c.anomaly.as_deref()))
    }

    /// Where a transactional anomaly stands in Adya's hierarchy, most severe first: the
    /// one the weakest consistency model already forbids (G0, then G1a, G1b, G1c,
    /// G-single, G-nonadjacent, G2), whatever its `-item`/`-process`/`-realtime` suffix;
    /// other anomalies after these, as equals. The most severe is the bug's signature
    /// (a dirty read is a G1a), and specific anomalies shrink smaller than general ones
    /// (a txn dirty-read run: G1a 11 operations, G-nonadjacent-item 51).
    pub fn severity_rank(anomaly: &str) -> u8 {
        const ORDER: [&str; 7] = ["G0", "G1a", "G1b", "G1c", "G-single", "G-nonadjacent", "G2"];
        ORDER
            .iter()
            .position(|p| {
                anomaly
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
            })
            .map_or(ORDER.len() as u8, |i| i as u8)
    }

    /// How much a failure depends on timing, 0 least: an anomaly that needs no order
    /// but the data's (G-single, G2-item, lost-append, wrong-total, a set-full or
    /// booking failure) is 0; one that needs process order (`-process`) 1; one that
    /// needs real-time order (`-realtime`), or a checker that rests on timing
    /// (linearizable, convergence), 2. A replay's timing differs from the run's, so the
    /// lower the rank, the more often a replay shows it again.
    pub fn timing_rank(checker: &str, anomaly: Option<&str>) -> u8 {
        match anomaly {
            Some(a) if a.ends_with("-realtime") => 2,
            _ if TIMING_CHECKERS.contains(&checker) => 2,
            Some(a) if a.ends_with("-process") => 1,
            _ => 0,
        }
    }

    /// Whether `result` fails in this class.
    pub fn matches(&self, result: &CheckResult) -> bool {
        result.valid == Validity::Invalid
            && result.checker == self.checker
            && self
                .anomaly
                .as_ref()
                .is_none_or(|a| result.anomaly_types.iter().any(|t| t == a))
    }
}

impl std::fmt::Display for FailureClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.anomaly {
            Some(a) => write!(f, "{}: {a}", self.checker),
            None => write!(f, "{}: invalid", self.checker),
        }
    }
}

/// Whether a sub-history of `original` fails as the original does: in `class`, naming
/// no anomaly the original's result did not, and without a read whose value the original
/// explains by a write that the sub-history dropped (see [`shrink`]). Candidates name ops
/// by the indices of the original.
pub struct SameFailure {
    class: FailureClass,
    shown: BTreeSet<String>,
    units: Units,
    provenance: Provenance,
    unit_of_index: HashMap<u64, usize>,
}

impl SameFailure {
    /// The test for sub-histories of `original`, on which the checker said `said`.
    pub fn new(original: &History, said: &CheckResult, class: FailureClass) -> SameFailure {
        let units = Units::of(original);
        let provenance = Provenance::of(&units, original.ops());
        let unit_of_index = units
            .ops
            .iter()
            .enumerate()
            .flat_map(|(u, ps)| ps.iter().map(move |&p| (original.op_index(p), u)))
            .collect();
        SameFailure {
            class,
            shown: said.anomaly_types.iter().cloned().collect(),
            units,
            provenance,
            unit_of_index,
        }
    }

    /// Whether `candidate` (ops carrying the original's indices), on which the checker
    /// said `result`, fails the same way.
    pub fn holds(&self, candidate: &History, result: &CheckResult) -> bool {
        let mut keep = vec![false; self.units.len()];
        for p in 0..candidate.len() {
            match self.unit_of_index.get(&candidate.op_index(p)) {
                Some(&u) => keep[u] = true,
                None => return false,
            }
        }
        self.provenance.holds(&keep)
            && self.class.matches(result)
            && names_only(&self.shown, result)
    }
}

/// Whether every anomaly `result` names is one of `shown` (the original's).
fn names_only(shown: &BTreeSet<String>, result: &CheckResult) -> bool {
    result.anomaly_types.iter().all(|t| shown.contains(t))
}

/// Bounds on a shrink: it stops at whichever comes first and says it did.
#[derive(Debug, Clone)]
pub struct ShrinkBounds {
    /// Most checks of candidate histories.
    pub max_checks: usize,
    /// Longest time spent.
    pub max_time: Duration,
}

impl Default for ShrinkBounds {
    fn default() -> Self {
        ShrinkBounds {
            max_checks: 20_000,
            max_time: Duration::from_secs(300),
        }
    }
}

/// The result of a shrink.
#[derive(Debug)]
pub struct Shrunk {
    /// The smallest failing sub-history found (ops keep the indices they carried).
    pub history: History,
    /// The checker's result on it.
    pub result: CheckResult,
    /// Ops and operations (units) before and after.
    pub ops_before: usize,
    /// Ops in the shrunk history.
    pub ops_after: usize,
    /// Units (client operations and nemesis events) before.
    pub units_before: usize,
    /// Units after.
    pub units_after: usize,
    /// Candidate histories checked.
    pub checks: usize,
    /// Which cheap guess (if any) cut the history before delta debugging.
    pub first_cut: Option<String>,
    /// `None` when delta debugging finished, so removing any one remaining unit no longer
    /// fails the same way; otherwise the bound that stopped it first.
    pub stopped_by: Option<String>,
}

/// Why a history could not be shrunk.
#[derive(Debug, thiserror::Error)]
pub enum ShrinkError {
    /// The checker does not fail on the history in the class asked for.
    #[error("the history does not fail as {class}: {checker} says {verdict:?}: {explanation}")]
    NotFailing {
        /// The class asked for.
        class: FailureClass,
        /// The checker.
        checker: String,
        /// Its verdict on the whole history.
        verdict: Validity,
        /// Its explanation.
        explanation: String,
    },
    /// A candidate could not be built (a bug: units keep histories well-formed).
    #[error("a candidate history was malformed: {0}")]
    Malformed(#[from] HistoryError),
}

/// Shrinks `history`, which `checker` must find failing as `class`.
pub fn shrink(
    history: &History,
    checker: &dyn Checker,
    class: &FailureClass,
    bounds: &ShrinkBounds,
) -> Result<Shrunk, ShrinkError> {
    let ops = history.ops();
    let units = Units::of(history);
    let provenance = Provenance::of(&units, ops);
    let mut oracle = Oracle {
        history,
        units: &units,
        provenance: &provenance,
        checker,
        class,
        shown: BTreeSet::new(),
        bounds,
        started: Instant::now(),
        checks: 0,
        stopped_by: None,
    };
    let all: Vec<usize> = (0..units.len()).collect();
    let whole = oracle.run(&all)?;
    oracle.shown = whole.anomaly_types.iter().cloned().collect();
    if !class.matches(&whole) {
        return Err(ShrinkError::NotFailing {
            class: class.clone(),
            checker: whole.checker,
            verdict: whole.valid,
            explanation: whole.explanation,
        });
    }
    let mut best = (all, whole);
    let mut first_cut = None;
    for (label, candidate) in units.guesses(history, &best.1) {
        if candidate.is_empty() || candidate.len() >= best.0.len() {
            continue;
        }
        if let Some(r) = oracle.fails(&candidate)? {
            best = (candidate, r);
            first_cut = Some(label);
            break;
        }
        if oracle.stopped_by.is_some() {
            break;
        }
    }
    let (kept, result) = ddmin(&mut oracle, best)?;
    Ok(Shrunk {
        history: units.history(history, &kept)?,
        result,
        ops_before: ops.len(),
        ops_after: kept.iter().map(|&u| units.ops[u].len()).sum(),
        units_before: units.len(),
        units_after: kept.len(),
        checks: oracle.checks,
        first_cut,
        stopped_by: oracle.stopped_by,
    })
}

/// Delta debugging (ddmin): split the kept units into `n` chunks; keep a chunk, or drop
/// one, when that still fails; otherwise split finer. Ends 1-minimal at `n` = units.
///
/// One change to Zeller and Hildebrandt's loop: after a chunk is dropped, the pass goes
/// on with the next chunk instead of starting over from the first (Hodován and Kiss,
/// *Practical Improvements to the Minimizing Delta Debugging Algorithm*, ICSOFT 2016).
/// When most single operations must stay (the "no new anomaly" rule keeps every writer
/// of what a read saw) and many others may go, starting over costs a pass of checks per
/// operation dropped, quadratic in the history: a 400-operation Elle history spent the
/// whole 20 000-check bound that way. Going on costs a pass per round; the loop still
/// ends only after a pass at single operations drops nothing, so the result is still
/// 1-minimal.
fn ddmin(
    oracle: &mut Oracle<'_>,
    (mut kept, mut result): (Vec<usize>, CheckResult),
) -> Result<(Vec<usize>, CheckResult), ShrinkError> {
    let mut n = 2usize;
    while kept.len() >= 2 && oracle.stopped_by.is_none() {
        let mut chunks = split(&kept, n);
        let mut reduced = false;
        // A chunk alone (only worth trying past two chunks: with two, each chunk is the
        // other's complement).
        if n > 2 {
            for c in &chunks {
                if let Some(r) = oracle.fails(c)? {
                    (kept, result, n, reduced) = (c.clone(), r, 2, true);
                    break;
                }
            }
        }
        if !reduced {
            let mut i = 0;
            while i < chunks.len() && chunks.len() >= 2 && oracle.stopped_by.is_none() {
                let complement: Vec<usize> = chunks
                    .iter()
                    .enumerate()
                    .filter(|&(j, _)| j != i)
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect();
                if let Some(r) = oracle.fails(&complement)? {
                    chunks.remove(i);
                    (kept, result, reduced) = (complement, r, true);
                } else {
                    i += 1;
                }
            }
            if reduced {
                n = chunks.len().max(2);
            }
        }
        if !reduced {
            if n >= kept.len() {
                break;
            }
            n = (n * 2).min(kept.len());
        }
    }
    Ok((kept, result))
}

/// `items` in `n` contiguous chunks of near-equal size (none empty).
fn split(items: &[usize], n: usize) -> Vec<Vec<usize>> {
    let n = n.min(items.len()).max(1);
    let (size, extra) = (items.len() / n, items.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = size + usize::from(i < extra);
        out.push(items[at..at + len].to_vec());
        at += len;
    }
    out
}

/// The checker as an oracle over sets of units, counting checks against the bounds.
struct Oracle<'a> {
    history: &'a History,
    units: &'a Units,
    provenance: &'a Provenance,
    checker: &'a dyn Checker,
    class: &'a FailureClass,
    /// The anomalies the checker named on the whole history; a candidate names no other.
    shown: BTreeSet<String>,
    bounds: &'a ShrinkBounds,
    started: Instant,
    checks: usize,
    stopped_by: Option<String>,
}

impl Oracle<'_> {
    fn run(&mut self, kept: &[usize]) -> Result<CheckResult, ShrinkError> {
        self.checks += 1;
        let h = self.units.history(self.history, kept)?;
        Ok(self.checker.check(&h))
    }

    /// The result if the candidate still fails in the class, `None` if it does not or a
    /// bound was reached (then `stopped_by` says which).
    fn fails(&mut self, kept: &[usize]) -> Result<Option<CheckResult>, ShrinkError> {
        if self.stopped_by.is_some() {
            return Ok(None);
        }
        if self.checks >= self.bounds.max_checks {
            self.stopped_by = Some(format!("the bound of {} checks", self.bounds.max_checks));
            return Ok(None);
        }
        if self.started.elapsed() >= self.bounds.max_time {
            self.stopped_by = Some(format!("the time bound of {:?}", self.bounds.max_time));
            return Ok(None);
        }
        let mut keep = vec![false; self.units.len()];
        for &u in kept {
            keep[u] = true;
        }
        if !self.provenance.holds(&keep) {
            return Ok(None);
        }
        let r = self.run(kept)?;
        Ok((self.class.matches(&r) && names_only(&self.shown, &r)).then_some(r))
    }
}

/// The history cut into removable units: each client operation (invoke and completion)
/// and each op outside an operation (a nemesis event), as positions in the history.
struct Units {
    ops: Vec<Vec<usize>>,
}

impl Units {
    fn of(history: &History) -> Units {
        let mut units: Vec<Vec<usize>> = Vec::new();
        let mut open: HashMap<Process, usize> = HashMap::new();
        for (pos, op) in history.ops().iter().enumerate() {
            if op.op_type == OpType::Invoke {
                open.insert(op.process, units.len());
                units.push(vec![pos]);
            } else if let Some(u) = open.remove(&op.process) {
                units[u].push(pos);
            } else {
                units.push(vec![pos]);
            }
        }
        Units { ops: units }
    }

    fn len(&self) -> usize {
        self.ops.len()
    }

    /// The sub-history of the `kept` units, in the original order, indices as carried.
    fn history(&self, history: &History, kept: &[usize]) -> Result<History, HistoryError> {
        let mut positions: Vec<usize> = kept
            .iter()
            .flat_map(|&u| self.ops[u].iter().copied())
            .collect();
        positions.sort_unstable();
        let picked = positions
            .into_iter()
            .filter_map(|pos| history.carried_op(pos))
            .collect();
        History::new(picked)
    }

    /// The keys a unit touches: its ops' `key`, or the keys of a transaction's micro-ops
    /// (`[f, k, v]`).
    fn keys(&self, ops: &[Op], unit: usize) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        for &pos in &self.ops[unit] {
            keys.extend(op_keys(&ops[pos]));
        }
        keys
    }

    /// Cheap cuts to try before delta debugging, most promising first.
    fn guesses(&self, history: &History, failed: &CheckResult) -> Vec<(String, Vec<usize>)> {
        let ops = history.ops();
        let mut guesses = Vec::new();
        // The checker's own evidence, by the index each op carries.
        let by_index: HashMap<u64, usize> =
            (0..ops.len()).map(|p| (history.op_index(p), p)).collect();
        let unit_of: HashMap<usize, usize> = self
            .ops
            .iter()
            .enumerate()
            .flat_map(|(u, ps)| ps.iter().map(move |&p| (p, u)))
            .collect();
        let mut evidence_units = BTreeSet::new();
        let mut evidence_keys = BTreeSet::new();
        for e in &failed.evidence {
            if let Some(pos) = e
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| by_index.get(&i))
            {
                evidence_units.insert(unit_of[pos]);
            }
            if let Ok(op) = serde_json::from_value::<Op>(e.clone()) {
                evidence_keys.extend(op_keys(&op));
            }
        }
        for &u in &evidence_units {
            evidence_keys.extend(self.keys(ops, u));
        }
        guesses.push((
            "the checker's evidence".to_string(),
            evidence_units.into_iter().collect(),
        ));
        let keys: Vec<BTreeSet<String>> = (0..self.len()).map(|u| self.keys(ops, u)).collect();
        let within = |allowed: &BTreeSet<String>| -> Vec<usize> {
            (0..self.len())
                .filter(|&u| !keys[u].is_empty() && keys[u].is_subset(allowed))
                .collect()
        };
        if !evidence_keys.is_empty() {
            let label = format!("the ops on the evidence's keys ({})", join(&evidence_keys));
            guesses.push((label, within(&evidence_keys)));
        }
        // Each key alone, the evidence's first, then from the fewest ops up.
        let mut count: HashMap<&String, usize> = HashMap::new();
        for ks in &keys {
            for k in ks {
                *count.entry(k).or_default() += 1;
            }
        }
        let mut singles: Vec<&String> = count.keys().copied().collect();
        singles.sort_by_key(|k| (!evidence_keys.contains(*k), count[k], (*k).clone()));
        for k in singles.into_iter().take(64) {
            let one = BTreeSet::from([k.clone()]);
            guesses.push((format!("key {k} alone"), within(&one)));
        }
        guesses.push((
            "client ops only".to_string(),
            (0..self.len())
                .filter(|&u| {
                    self.ops[u]
                        .iter()
                        .all(|&p| ops[p].process != Process::Nemesis)
                })
                .collect(),
        ));
        guesses
    }
}

/// Where read values came from. A read whose value some op of the original wrote keeps
/// one such writer: without it the read would fail as a read of a value nobody wrote,
/// which is another failure than a stale or lost one (for a register, `write 1; write 2;
/// read 1` must not shrink to `read 1` alone). The writers that count are those invoked
/// before the read completed (a later write of the same value explains nothing: `write 1;
/// write 2; read 1; write 1` must not shrink to its last two ops); only when the original
/// has none such, any writer of the value does.
struct Provenance {
    /// For each read unit, one list per value it returned: the units that wrote it.
    needs: Vec<(usize, Vec<Vec<usize>>)>,
}

/// Ops that write a value, and ops that read one (single-object models; a successful
/// `cas` reads its first argument).
const WRITES: [&str; 6] = ["write", "put", "cas", "append", "add", "enqueue"];
const READS: [&str; 3] = ["read", "get", "dequeue"];

/// Most writers of one key scanned for a string a read contains (the `append` of
/// Porcupine's key-value model); past it, such reads constrain nothing.
const SUBSTRING_SCAN: usize = 10_000;

impl Provenance {
    fn of(units: &Units, ops: &[Op]) -> Provenance {
        let key_of = |op: &Op| op.key.as_ref().map(Value::to_string).unwrap_or_default();
        // (key, value) -> writer units; and per key the writers of strings.
        let mut by_value: HashMap<(String, String), Vec<usize>> = HashMap::new();
        let mut strings: HashMap<String, Vec<(usize, &str)>> = HashMap::new();
        for (u, ps) in units.ops.iter().enumerate() {
            let invoke = &ops[ps[0]];
            let failed = ps.get(1).is_some_and(|&p| ops[p].op_type == OpType::Fail);
            if invoke.op_type != OpType::Invoke || failed || !WRITES.contains(&invoke.f.as_str()) {
                continue;
            }
            let written = match (&invoke.value, invoke.f.as_str()) {
                (Value::Array(a), "cas") if a.len() == 2 => &a[1],
                (v, _) => v,
            };
            if written.is_null() {
                continue;
            }
            let key = key_of(invoke);
            by_value
                .entry((key.clone(), written.to_string()))
                .or_default()
                .push(u);
            if let Value::String(text) = written {
                strings.entry(key).or_default().push((u, text));
            }
        }
        let mut needs = Vec::new();
        for (u, ps) in units.ops.iter().enumerate() {
            let invoke = &ops[ps[0]];
            let Some(done) = ps.get(1).map(|&p| &ops[p]) else {
                continue;
            };
            if done.op_type != OpType::Ok {
                continue;
            }
            let key = key_of(invoke);
            let atoms: Vec<&Value> = match (invoke.f.as_str(), &done.value) {
                // A compare-and-set that succeeded read the value it compared with.
                ("cas", Value::Array(a)) if a.len() == 2 && !a[0].is_null() => vec![&a[0]],
                (f, _) if !READS.contains(&f) => continue,
                (_, Value::Null) => Vec::new(),
                (_, Value::Array(items)) => items.iter().collect(),
                (_, v) => vec![v],
            };
            let mut per_atom = Vec::new();
            for atom in atoms {
                let mut writers = by_value
                    .get(&(key.clone(), atom.to_string()))
                    .cloned()
                    .unwrap_or_default();
                let invoked_before = |w: &usize| ops[units.ops[*w][0]].time <= done.time;
                if writers.iter().any(invoked_before) {
                    writers.retain(invoked_before);
                }
                if let (true, Value::String(text), Some(ws)) =
                    (writers.is_empty(), atom, strings.get(&key))
                {
                    if ws.len() <= SUBSTRING_SCAN {
                        // Each written piece the read contains needs its own writer.
                        for &(w, piece) in ws {
                            if !piece.is_empty() && text.contains(piece) && invoked_before(&w) {
                                per_atom.push(vec![w]);
                            }
                        }
                        continue;
                    }
                }
                if !writers.is_empty() {
                    writers.retain(|&w| w != u);
                    per_atom.push(writers);
                }
            }
            if !per_atom.is_empty() {
                needs.push((u, per_atom));
            }
        }
        Provenance { needs }
    }

    /// Every kept read keeps a writer of each value it returned that had one.
    fn holds(&self, keep: &[bool]) -> bool {
        self.needs.iter().all(|(read, per_atom)| {
            !keep[*read] || per_atom.iter().all(|ws| ws.iter().any(|&w| keep[w]))
        })
    }
}

fn join(keys: &BTreeSet<String>) -> String {
    keys.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// An op's keys, as text: its `key` field, or a transaction's micro-op keys.
fn op_keys(op: &Op) -> Vec<String> {
    if let Some(k) = &op.key {
        return vec![k.to_string()];
    }
    match &op.value {
        Value::Array(mops) if op.f == "txn" => mops
            .iter()
            .filter_map(|m| m.as_array().and_then(|m| m.get(1)).map(Value::to_string))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_makes_n_contiguous_chunks_covering_everything() {
        let items: Vec<usize> = (0..7).collect();
        let chunks = split(&items, 3);
        assert_eq!(chunks, vec![vec![0, 1, 2], vec![3, 4], vec![5, 6]]);
        assert_eq!(split(&items, 10).len(), 7);
    }

    #[test]
    fn a_failure_class_needs_an_invalid_result_and_its_anomaly() {
        let mut r = CheckResult::new("elle-list-append", Validity::Invalid, "cycle");
        r.anomaly_types = vec!["G2-item".into(), "G-single".into()];
        let class = FailureClass::of(&r, None).unwrap();
        assert_eq!(class.anomaly.as_deref(), Some("G-single"));
        assert!(FailureClass::of(&r, Some("G0")).is_none());
        let mut other = r.clone();
        other.anomaly_types = vec!["G2-item".into()];
        assert!(!class.matches(&other));
        other.anomaly_types.push("G-single".into());
        assert!(class.matches(&other));
        other.valid = Validity::Unknown;
        assert!(!class.matches(&other));
        r.valid = Validity::Valid;
        assert!(FailureClass::of(&r, None).is_none());
    }

    fn invalid(checker: &str, anomalies: &[&str]) -> CheckResult {
        let mut r = CheckResult::new(checker, Validity::Invalid, "invalid");
        r.anomaly_types = anomalies.iter().map(|a| a.to_string()).collect();
        r
    }

    #[test]
    fn among_equally_robust_anomalies_the_default_is_the_most_severe() {
        // The txn database's dirty-read run named these (and their -realtime forms).
        let elle = invalid(
            "elle-list-append",
            &[
                "G-nonadjacent-item",
                "G-single-item",
                "G1a",
                "G1b",
                "G1c-realtime",
                "G2-item",
                "incompatible-order",
            ],
        );
        let class = FailureClass::of(&elle, None).unwrap();
        assert_eq!(class.anomaly.as_deref(), Some("G1a"));
        let no_g1 = invalid(
            "elle-list-append",
            &["G2-item", "G-nonadjacent-item", "G-single-item-process"],
        );
        assert_eq!(
            FailureClass::of(&no_g1, None).unwrap().anomaly.as_deref(),
            Some("G-nonadjacent-item")
        );
        // Names outside the hierarchy keep their order, after it.
        let other = invalid("elle-list-append", &["internal", "G2-item"]);
        assert_eq!(
            FailureClass::of(&other, None).unwrap().anomaly.as_deref(),
            Some("G2-item")
        );
        let none = invalid("set-full", &["stale", "lost"]);
        assert_eq!(
            FailureClass::of(&none, None).unwrap().anomaly.as_deref(),
            Some("stale")
        );
        assert_eq!(FailureClass::severity_rank("G1"), 7);
        assert_eq!(FailureClass::severity_rank("G1c-process"), 3);
    }

    #[test]
    fn the_default_failure_class_is_the_one_least_bound_to_timing() {
        // Within Elle's result: the anomaly without a -realtime or -process suffix.
        let elle = invalid(
            "elle-list-append",
            &["G-single-realtime", "G1c-process", "G-single"],
        );
        let class = FailureClass::of(&elle, None).unwrap();
        assert_eq!(class.anomaly.as_deref(), Some("G-single"));
        let no_plain = invalid("elle-list-append", &["G-single-realtime", "G1c-process"]);
        let class = FailureClass::of(&no_plain, None).unwrap();
        assert_eq!(class.anomaly.as_deref(), Some("G1c-process"));
        // --anomaly still picks what it names.
        let class = FailureClass::of(&elle, Some("G-single-realtime")).unwrap();
        assert_eq!(class.anomaly.as_deref(), Some("G-single-realtime"));

        // Across checkers: lost-appends over linearizable, set-full over convergence,
        // though they come later; among equals, the first.
        let results = [
            invalid("linearizable", &[]),
            CheckResult::new("stats", Validity::Valid, "fine"),
            invalid("lost-appends", &["lost-append"]),
        ];
        let class = FailureClass::of_results(&results, None).unwrap();
        assert_eq!(class.to_string(), "lost-appends: lost-append");
        let results = [invalid("convergence", &[]), invalid("set-full", &[])];
        assert_eq!(
            FailureClass::of_results(&results, None).unwrap().checker,
            "set-full"
        );
        let results = [
            invalid("elle-rw-register", &["G-single-realtime"]),
            invalid("linearizable", &[]),
        ];
        assert_eq!(
            FailureClass::of_results(&results, None).unwrap().checker,
            "elle-rw-register"
        );
        let results = [invalid("linearizable", &[]), invalid("lost-appends", &[])];
        assert_eq!(
            FailureClass::of_results(&results, Some("lost-append")),
            None
        );
        let results = [
            invalid("linearizable", &[]),
            invalid("elle-list-append", &["G0", "G-single"]),
        ];
        let class = FailureClass::of_results(&results, Some("G-single")).unwrap();
        assert_eq!(class.to_string(), "elle-list-append: G-single");
        assert_eq!(FailureClass::of_results(&[], None), None);
    }
}
