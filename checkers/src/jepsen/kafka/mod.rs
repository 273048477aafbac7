//! The `kafka` checker: append-only logs per key with offsets (Maelstrom's `kafka`
//! workload, after Jepsen's `jepsen.tests.kafka`).
//!
//! History shape (what `--target maelstrom --workload kafka` records):
//!
//! | `f` | key | ok value |
//! |---|---|---|
//! | `send` | the log's key | `[offset, msg]`: where the node put `msg` (the invoke value) |
//! | `poll` | — | `{"offsets": {key: from}, "msgs": {key: [[offset, msg], ...]}}`; `"final": true` on the invoke (or the completion) marks a final read, which asked each key from its start and read it to the end |
//! | `commit_offsets` | — | `{"offsets": {key: offset}}` |
//! | `list_committed_offsets` | — | invoke `{"keys": [...]}`, ok `{"offsets": {key: offset}}`; the consumer then polls from those offsets, so order between its earlier and later polls is not judged (Jepsen's `assign`) |
//!
//! Anomalies, each reported with the ops that show it:
//! - `lost-write`: an acknowledged send whose message no poll ever returned, although a
//!   poll read across its offset or a final read read its key to the end;
//! - `inconsistent-offsets`: two different messages at one offset of a key (from sends or
//!   polls);
//! - `duplicate`: one message at two offsets of a key;
//! - `nonmonotonic-poll`: a consumer's poll returned an offset of a key at or below one
//!   it had already polled (or offsets not increasing within one poll);
//! - `poll-skip`: a consumer's successive polls (or one poll) of a key jumped over
//!   offsets known to exist;
//!
//! Acknowledged sends no poll covered are `unobserved`: counted, not an anomaly (there is
//! no recency requirement).
//!
//! A `list_committed_offsets` that returned less for a key (or nothing) than a commit
//! acknowledged, or a listing completed, before it began is counted and shown
//! (`committed_offset_regressions` in the details), not an anomaly: Maelstrom's spec lets
//! a fresh assign start "at offset 3 (or lower)" after a commit of 2, and neither its
//! checker nor Jepsen's judges committed offsets. A lower committed offset only makes a
//! consumer read messages again; a lost or skipped one still shows as `lost-write` or
//! `poll-skip`.

mod decode;

use super::{pair_json, MAX_LISTED};
use crate::history::History;
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use decode::{KafkaOps, Step};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Checks kafka histories; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct KafkaChecker;

/// Every anomaly name this checker reports, in the order it reports them.
pub const ANOMALIES: &[&str] = &[
    "lost-write",
    "inconsistent-offsets",
    "duplicate",
    "nonmonotonic-poll",
    "poll-skip",
];

/// The name of the note (not an anomaly) for a committed offset that went back.
pub const COMMITTED_OFFSET_REGRESSION: &str = "committed-offset-regression";

/// One anomaly: its kind, the key, a sentence, and the ops (pair numbers) that show it.
struct Anomaly {
    kind: &'static str,
    key: String,
    what: String,
    pairs: Vec<usize>,
}

/// Offsets known to exist per key: every offset a send was given or a poll returned.
type Known = HashMap<String, BTreeSet<i64>>;

impl Checker for KafkaChecker {
    fn name(&self) -> String {
        "kafka".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let ops = KafkaOps::decode(history);
        let mut found = Vec::new();
        let known = offsets_and_messages(&ops, &mut found);
        consumer_order(&ops, &known, &mut found);
        let unobserved = lost_writes(&ops, &mut found);
        let mut regressions = Vec::new();
        committed_offsets(&ops, &mut regressions);
        report(history, &ops, found, regressions, unobserved)
    }
}

/// `inconsistent-offsets` and `duplicate`, from every (key, offset, message) that a send
/// was acknowledged with or a poll returned; returns the offsets known to exist.
fn offsets_and_messages(ops: &KafkaOps, found: &mut Vec<Anomaly>) -> Known {
    let facts = ops
        .sends
        .iter()
        .map(|s| (s.pair, &s.key, s.offset, &s.msg))
        .chain(ops.polls.iter().flat_map(|p| {
            p.msgs
                .iter()
                .flat_map(move |(k, es)| es.iter().map(move |(o, m)| (p.pair, k, *o, m)))
        }));
    let mut at_offset: HashMap<(&str, i64), (&str, usize)> = HashMap::new();
    let mut of_msg: HashMap<(&str, &str), (i64, usize)> = HashMap::new();
    let mut offsets_reported: HashSet<(&str, i64)> = HashSet::new();
    let mut msgs_reported: HashSet<(&str, &str)> = HashSet::new();
    let mut known = Known::new();
    for (pair, key, offset, msg) in facts {
        known.entry(key.clone()).or_default().insert(offset);
        let (m0, p0) = *at_offset
            .entry((key.as_str(), offset))
            .or_insert((msg.as_str(), pair));
        if m0 != msg && offsets_reported.insert((key.as_str(), offset)) {
            found.push(Anomaly {
                kind: "inconsistent-offsets",
                key: key.clone(),
                what: format!("offset {offset} of key {key} holds message {m0} and message {msg}"),
                pairs: vec![p0, pair],
            });
        }
        let (o0, p0) = *of_msg
            .entry((key.as_str(), msg.as_str()))
            .or_insert((offset, pair));
        if o0 != offset && msgs_reported.insert((key.as_str(), msg.as_str())) {
            found.push(Anomaly {
                kind: "duplicate",
                key: key.clone(),
                what: format!(
                    "message {msg} of key {key} is at offset {o0} and at offset {offset}"
                ),
                pairs: vec![p0, pair],
            });
        }
    }
    known
}

/// Known offsets of `key` in `lo..hi`.
fn known_between(known: &Known, key: &str, lo: i64, hi: i64) -> Vec<i64> {
    match known.get(key) {
        Some(s) if lo < hi => s.range(lo..hi).copied().collect(),
        _ => Vec::new(),
    }
}

fn list_offsets(v: &[i64]) -> String {
    v.iter()
        .take(MAX_LISTED)
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `nonmonotonic-poll` and `poll-skip`: each consumer's polls in its own order, inside
/// one poll and between successive ones; a reassignment starts the order afresh, from
/// the offset the next poll asked for.
fn consumer_order(ops: &KafkaOps, known: &Known, found: &mut Vec<Anomaly>) {
    for (process, steps) in &ops.consumers {
        // key -> (last offset polled, the poll's pair)
        let mut last: HashMap<&str, (i64, usize)> = HashMap::new();
        for step in steps {
            let poll = match step {
                Step::Reassign => {
                    last.clear();
                    continue;
                }
                Step::Poll(i) => &ops.polls[*i],
            };
            for (key, entries) in &poll.msgs {
                let (Some(&(first, _)), Some(&(end, _))) = (entries.first(), entries.last()) else {
                    continue;
                };
                for w in entries.windows(2) {
                    let (a, b) = (w[0].0, w[1].0);
                    let skipped = known_between(known, key, a + 1, b);
                    if b <= a {
                        found.push(Anomaly {
                            kind: "nonmonotonic-poll",
                            key: key.clone(),
                            what: format!(
                                "one poll by process {process} returned offset {b} of key {key} after offset {a}"
                            ),
                            pairs: vec![poll.pair],
                        });
                    } else if !skipped.is_empty() {
                        found.push(Anomaly {
                            kind: "poll-skip",
                            key: key.clone(),
                            what: format!(
                                "one poll by process {process} went from offset {a} to {b} of key {key}, skipping existing offsets {}",
                                list_offsets(&skipped)
                            ),
                            pairs: vec![poll.pair],
                        });
                    }
                }
                match last.get(key.as_str()) {
                    Some(&(prev, prev_pair)) if first <= prev => found.push(Anomaly {
                        kind: "nonmonotonic-poll",
                        key: key.clone(),
                        what: format!(
                            "process {process} polled key {key} up to offset {prev}, then its next poll began at offset {first}"
                        ),
                        pairs: vec![prev_pair, poll.pair],
                    }),
                    Some(&(prev, prev_pair)) => {
                        let skipped = known_between(known, key, prev + 1, first);
                        if !skipped.is_empty() {
                            found.push(Anomaly {
                                kind: "poll-skip",
                                key: key.clone(),
                                what: format!(
                                    "process {process} polled key {key} up to offset {prev}, then its next poll began at offset {first}, skipping existing offsets {}",
                                    list_offsets(&skipped)
                                ),
                                pairs: vec![prev_pair, poll.pair],
                            });
                        }
                    }
                    None => {
                        let from = poll.from.get(key).copied().unwrap_or(first);
                        let skipped = known_between(known, key, from, first);
                        if !skipped.is_empty() {
                            found.push(Anomaly {
                                kind: "poll-skip",
                                key: key.clone(),
                                what: format!(
                                    "process {process} asked key {key} from offset {from} and got offset {first} first, skipping existing offsets {}",
                                    list_offsets(&skipped)
                                ),
                                pairs: vec![poll.pair],
                            });
                        }
                    }
                }
                last.insert(key, (end, poll.pair));
            }
        }
    }
}

/// `lost-write`: an acknowledged send no poll returned although one read across its
/// offset, or a final read read its key. Returns how many were simply never covered.
fn lost_writes(ops: &KafkaOps, found: &mut Vec<Anomaly>) -> usize {
    let observed: HashSet<(&str, &str)> = ops
        .polls
        .iter()
        .flat_map(|p| {
            p.msgs
                .iter()
                .flat_map(|(k, es)| es.iter().map(move |(_, m)| (k.as_str(), m.as_str())))
        })
        .collect();
    // key -> the first final read that asked it; key -> (from, to, pair) a poll read across.
    let mut final_read: HashMap<&str, usize> = HashMap::new();
    let mut spans: HashMap<&str, Vec<(i64, i64, usize)>> = HashMap::new();
    for p in &ops.polls {
        if p.final_read {
            for k in p.from.keys().chain(p.msgs.keys()) {
                final_read.entry(k).or_insert(p.pair);
            }
            continue;
        }
        for (k, es) in &p.msgs {
            if let (Some(f), Some(l)) = (es.first(), es.last()) {
                let from = p.from.get(k).copied().unwrap_or(f.0).min(f.0);
                spans.entry(k).or_default().push((from, l.0, p.pair));
            }
        }
    }
    let mut unobserved = 0;
    for s in &ops.sends {
        if observed.contains(&(s.key.as_str(), s.msg.as_str())) {
            continue;
        }
        let cover = spans
            .get(s.key.as_str())
            .and_then(|v| {
                v.iter()
                    .find(|(lo, hi, _)| *lo <= s.offset && s.offset <= *hi)
            })
            .map(|(lo, hi, p)| (*p, format!("a poll read offsets {lo}..={hi}")))
            .or_else(|| {
                final_read
                    .get(s.key.as_str())
                    .map(|p| (*p, "a final read read the key to its end".to_string()))
            });
        match cover {
            Some((pair, how)) => found.push(Anomaly {
                kind: "lost-write",
                key: s.key.clone(),
                what: format!(
                    "message {} was acknowledged at offset {} of key {}, but no poll returned it; {how}",
                    s.msg, s.offset, s.key
                ),
                pairs: vec![s.pair, pair],
            }),
            None => unobserved += 1,
        }
    }
    unobserved
}

/// Committed-offset regressions (a note): a listing that returned less for a key than
/// what an acknowledged commit or an earlier listing had established before it was
/// invoked.
fn committed_offsets(ops: &KafkaOps, found: &mut Vec<Anomaly>) {
    // key -> (completion position, offset, pair) of everything that sets a floor.
    let mut floors: BTreeMap<&str, Vec<(usize, i64, usize)>> = BTreeMap::new();
    for c in ops.commits.iter().chain(&ops.lists) {
        for (k, o) in &c.offsets {
            floors
                .entry(k)
                .or_default()
                .push((c.complete_pos, *o, c.pair));
        }
    }
    // Running maximum, so each listing asks one binary search.
    let mut best: BTreeMap<&str, Vec<(usize, i64, usize)>> = BTreeMap::new();
    for (k, mut v) in floors {
        v.sort_unstable();
        let mut run: Vec<(usize, i64, usize)> = Vec::with_capacity(v.len());
        for e in v {
            let keep = match run.last() {
                Some(&(_, o, p)) if o >= e.1 => (e.0, o, p),
                _ => e,
            };
            run.push(keep);
        }
        best.insert(k, run);
    }
    for l in &ops.lists {
        let asked: BTreeSet<&str> = l
            .keys
            .iter()
            .chain(l.offsets.keys())
            .map(String::as_str)
            .collect();
        for k in asked {
            let Some(run) = best.get(k) else { continue };
            let n = run.partition_point(|e| e.0 < l.invoke_pos);
            let Some(&(_, floor, by)) = n.checked_sub(1).and_then(|i| run.get(i)) else {
                continue;
            };
            let got = l.offsets.get(k).copied();
            if got.is_none_or(|g| g < floor) {
                found.push(Anomaly {
                    kind: COMMITTED_OFFSET_REGRESSION,
                    key: k.to_string(),
                    what: format!(
                        "key {k} had committed offset {floor} before a listing began, which then returned {}",
                        got.map_or("none".to_string(), |g| g.to_string())
                    ),
                    pairs: vec![by, l.pair],
                });
            }
        }
    }
}

fn report(
    history: &History,
    ops: &KafkaOps,
    found: Vec<Anomaly>,
    regressions: Vec<Anomaly>,
    unobserved: usize,
) -> CheckResult {
    let pairs = history.pairs();
    let evidence_of = |a: &Anomaly| -> Vec<Value> {
        a.pairs
            .iter()
            .filter_map(|&i| pairs.get(i))
            .map(|p| pair_json(history, p))
            .collect()
    };
    let mut by_kind: BTreeMap<&str, Vec<&Anomaly>> = BTreeMap::new();
    for a in &found {
        by_kind.entry(a.kind).or_default().push(a);
    }
    let mut details = json!({
        "acknowledged_sends": ops.sends.len(),
        "unsure_sends": ops.unsure_sends,
        "polls": ops.polls.len(),
        "final_reads": ops.polls.iter().filter(|p| p.final_read).count(),
        "commits": ops.commits.len(),
        "listings": ops.lists.len(),
        "unobserved_count": unobserved,
        "malformed_count": ops.malformed.len(),
        "committed_offset_regressions_count": regressions.len(),
        "committed_offset_regressions": regressions
            .iter()
            .take(MAX_LISTED)
            .map(|a| json!({"key": a.key, "what": a.what, "ops": evidence_of(a)}))
            .collect::<Vec<_>>(),
    });
    // Said beside the verdict either way: allowed, but a reader comparing runs wants it.
    let regressed = match regressions.first() {
        None => "committed offsets never went back".to_string(),
        Some(a) => format!(
            "{} listings returned a committed offset below one committed before (e.g. {}): allowed by Maelstrom's spec, consumers resuming there read messages again",
            regressions.len(),
            a.what
        ),
    };
    let mut problems = Vec::new();
    let mut types = Vec::new();
    let mut evidence = Vec::new();
    for kind in ANOMALIES {
        let Some(list) = by_kind.get(kind) else {
            continue;
        };
        types.push(kind.to_string());
        problems.push(format!("{kind} ×{} (e.g. {})", list.len(), list[0].what));
        evidence.extend(evidence_of(list[0]));
        details[format!("{kind}_count")] = json!(list.len());
        details[*kind] = list
            .iter()
            .take(MAX_LISTED)
            .map(|a| json!({"key": a.key, "what": a.what, "ops": evidence_of(a)}))
            .collect();
    }
    let final_reads = ops.polls.iter().filter(|p| p.final_read).count();
    let coverage = Coverage::of([
        ("sends", ops.sends.len() as u64),
        ("polls", ops.polls.len() as u64),
        ("final polls", final_reads as u64),
        ("malformed", ops.malformed.len() as u64),
    ]);
    let mut r = if problems.is_empty() && !ops.malformed.is_empty() {
        let first = ops.malformed[0];
        let index = pairs
            .get(first)
            .map(|p| history.op_index(p.complete_pos.unwrap_or(p.invoke_pos)));
        CheckResult::new(
            "kafka",
            Validity::Unknown,
            format!(
                "{} ok ops have a value not of their f's shape (the first at index {}), so what they did is unknown; no anomaly among the rest",
                ops.malformed.len(),
                index.map_or("?".to_string(), |i| i.to_string())
            ),
        )
    } else if problems.is_empty() {
        CheckResult::new(
            "kafka",
            Validity::Valid,
            format!(
                "{} acknowledged sends, {} polls ({} final): no lost, misplaced or reordered message; {unobserved} sends never covered by a poll; {regressed}",
                ops.sends.len(),
                ops.polls.len(),
                ops.polls.iter().filter(|p| p.final_read).count()
            ),
        )
    } else {
        let why = format!("{}; note: {regressed}", problems.join("; "));
        let mut r = CheckResult::new("kafka", Validity::Invalid, why);
        r.anomaly_types = types;
        r.evidence = evidence;
        r
    };
    r.details = details;
    r.with_coverage(coverage)
        .unless_unobserved(ops.polls.len() as u64, "no ok poll")
}
