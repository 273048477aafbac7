//! Session guarantees (Terry et al., "Session guarantees for weakly consistent replicated
//! data", PDIS 1994, §3), per client session (= `process`) and per key, since a read of one
//! key reflects only writes to that key:
//! - *read-your-writes*: a read by `s` invoked after `s`'s ok update `w` completed
//!   reflects `w`;
//! - *monotonic reads*: a read by `s` reflects everything an earlier read of `s` reflected;
//! - *monotonic writes*: for `s`'s ok updates `w1` before `w2`, any read (by anyone) that
//!   reflects `w2` reflects `w1`, and orders `w1` first where the read gives an order;
//! - *writes-follow-reads*: if `s` read `r` reflecting `w1`, then wrote `w2`, any read that
//!   reflects `w2` reflects `w1`, ordered first where an order is given.
//!
//! Sets and bookings: "reflects" = the element (reservation id) is in committed ∪
//! tentative (or the plain list); the order is committed then tentative. Counters: monotonic
//! reads = a session's reads never decrease; read-your-writes = a read is at least the sum
//! of the session's acknowledged deltas; the write guarantees cannot be checked on a sum.
//! Counts are of violating reads, per guarantee.

use super::follow::{
    wfr_by_counting, Bits, FirstSeen, FollowSets, ReadCtx, Write, MAX_FOLLOW_WORDS, NONE,
};
use super::view::{KeyOps, ReadValues, UpdateArg, View};
use super::{
    key_label, malformed_reason, op_index, EventualDataType, FastMap, LocalIds, Verdict, MAX_CASES,
};
use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker};
use rayon::prelude::*;
use serde_json::{json, Value};

/// Checks the four session guarantees; see the module docs.
#[derive(Debug, Clone)]
pub struct SessionGuaranteesChecker {
    data_type: EventualDataType,
    max_follow_words: usize,
}

impl SessionGuaranteesChecker {
    /// A session-guarantee checker for histories of `data_type` objects.
    pub fn new(data_type: EventualDataType) -> Self {
        SessionGuaranteesChecker {
            data_type,
            max_follow_words: MAX_FOLLOW_WORDS,
        }
    }

    /// Sets how many 64-bit words of writes-follow-reads bit sets one key may use (default
    /// 8 Mi words, 64 MiB) before its check falls back to counting, which needs no extra
    /// memory but takes time proportional to elements x writer sessions per read. The
    /// verdict is the same either way.
    pub fn with_follow_set_limit(mut self, words: usize) -> Self {
        self.max_follow_words = words;
        self
    }
}

/// The four guarantees, in the paper's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guarantee {
    ReadYourWrites,
    MonotonicReads,
    MonotonicWrites,
    WritesFollowReads,
}

const GUARANTEES: [Guarantee; 4] = [
    Guarantee::ReadYourWrites,
    Guarantee::MonotonicReads,
    Guarantee::MonotonicWrites,
    Guarantee::WritesFollowReads,
];

impl Guarantee {
    fn name(self) -> &'static str {
        match self {
            Guarantee::ReadYourWrites => "read-your-writes",
            Guarantee::MonotonicReads => "monotonic-reads",
            Guarantee::MonotonicWrites => "monotonic-writes",
            Guarantee::WritesFollowReads => "writes-follow-reads",
        }
    }
}

/// One violation, explained.
struct Case {
    guarantee: Guarantee,
    text: String,
    positions: Vec<usize>,
}

/// Per key: violating-read counts per guarantee and the first few cases.
#[derive(Default)]
struct KeyFindings {
    counts: [usize; 4],
    cases: Vec<Case>,
}

impl KeyFindings {
    fn found(&mut self, g: Guarantee, case: impl FnOnce() -> Case) {
        self.counts[g as usize] += 1;
        if self.cases.iter().filter(|c| c.guarantee == g).count() < MAX_CASES {
            self.cases.push(case());
        }
    }
}

/// Checks sets and bookings on one key.
fn check_elements(
    history: &History,
    view: &View,
    key: &KeyOps,
    max_follow_words: usize,
) -> KeyFindings {
    let idx = |p: usize| op_index(history, p);
    let kl = key_label(&key.name);
    let mut out = KeyFindings::default();
    // Local element and session numbering.
    // Written elements, then any read that no update wrote.
    let mut elems: Vec<i64> = key.updates.iter().filter_map(|u| u.arg.element()).collect();
    elems.sort_unstable();
    elems.dedup();
    let extra: std::collections::BTreeSet<i64> = {
        let written = LocalIds::new(&elems);
        key.reads
            .iter()
            .flat_map(|r| r.value.elements())
            .filter(|e| written.get(*e).is_none())
            .collect()
    };
    if !extra.is_empty() {
        elems.extend(extra);
        elems.sort_unstable();
    }
    let ids = LocalIds::new(&elems);
    let local = |e: i64| ids.get(e).unwrap_or(0);
    let mut sessions: FastMap<u64, usize> = FastMap::default();
    let mut session_ids: Vec<u64> = Vec::new();
    let mut sid = |p: u64| {
        *sessions.entry(p).or_insert_with(|| {
            session_ids.push(p);
            session_ids.len() - 1
        })
    };
    let mut writes: Vec<Vec<Write>> = Vec::new();
    // writer[i] = (session, its rank among the session's ok writes).
    let mut writer: Vec<Option<(usize, usize)>> = vec![None; elems.len()];
    let mut write_node: FastMap<usize, Option<u32>> = FastMap::default();
    for u in &key.updates {
        let (Outcome::Ok, Some(c), Some(e)) = (u.outcome, u.complete_pos, u.arg.element()) else {
            continue;
        };
        let t = sid(u.process);
        if writes.len() <= t {
            writes.resize(t + 1, Vec::new());
        }
        let i = local(e);
        if writer[i as usize].is_none() {
            writer[i as usize] = Some((t, writes[t].len()));
            writes[t].push(Write {
                elem: i,
                invoke: u.invoke_pos,
                complete: c,
            });
            write_node.insert(u.invoke_pos, u.node);
        }
    }
    let reads: Vec<(usize, Vec<u32>)> = key
        .reads
        .iter()
        .map(|r| (sid(r.process), r.value.elements().map(local).collect()))
        .collect();
    let n_sessions = session_ids.len();
    writes.resize(n_sessions, Vec::new());
    let mut first = FirstSeen::new(n_sessions, elems.len());
    for (r, (t, list)) in key.reads.iter().zip(&reads) {
        for &i in list {
            first.set_min(*t, i, r.complete_pos);
        }
    }
    // Per session, sorted first-seen positions (how many elements it had seen by a time).
    let seen_sorted: Vec<Vec<usize>> = (0..n_sessions).map(|t| first.sorted(t)).collect();
    let node = |n: Option<u32>| view.node_name(n).to_string();
    let write_node = |w: &Write| node(write_node.get(&w.invoke).copied().flatten());
    let read_by_complete = |pos: usize| key.reads.iter().find(|r| r.complete_pos == pos);
    let wfr_sets = FollowSets::new(key, &reads, &writes, elems.len(), max_follow_words);
    let mut present = vec![false; elems.len()];
    let mut uniq: Vec<u32> = Vec::new();
    // Per writer session in the read: present count, highest and last-seen rank.
    let mut count = vec![0usize; n_sessions];
    let mut max_rank = vec![0usize; n_sessions];
    let mut last_rank = vec![NONE; n_sessions];
    let mut touched: Vec<usize> = Vec::new();
    let mut in_read = Bits::new(elems.len());
    for (r, (s, list)) in key.reads.iter().zip(&reads) {
        let s = *s;
        // One pass: distinct elements, what the reader had seen before (monotonic
        // reads), and each writer's present writes and their order (monotonic writes).
        for &t in &touched {
            count[t] = 0;
            max_rank[t] = 0;
            last_rank[t] = NONE;
        }
        touched.clear();
        uniq.clear();
        let ordered = r.value.ordered();
        let mut seen_before = 0;
        let mut mw_order: Option<(usize, usize, usize)> = None;
        for &i in list {
            let writer_of = writer[i as usize];
            if !present[i as usize] {
                present[i as usize] = true;
                uniq.push(i);
                if first.get(s, i) < r.invoke_pos {
                    seen_before += 1;
                }
                if let Some((t, j)) = writer_of {
                    if count[t] == 0 {
                        touched.push(t);
                    }
                    count[t] += 1;
                    max_rank[t] = max_rank[t].max(j);
                }
            }
            if let (true, Some((t, j))) = (ordered, writer_of) {
                if last_rank[t] != NONE && last_rank[t] > j && mw_order.is_none() {
                    mw_order = Some((t, j, last_rank[t]));
                }
                if last_rank[t] == NONE || j > last_rank[t] {
                    last_rank[t] = j;
                }
            }
        }
        let reader = || format!("read op {} ({})", idx(r.complete_pos), node(r.node));
        // Read-your-writes.
        let need = writes[s].partition_point(|w| w.complete < r.invoke_pos);
        let have = writes[s][..need]
            .iter()
            .filter(|w| present[w.elem as usize])
            .count();
        if have < need {
            out.found(Guarantee::ReadYourWrites, || {
                let w = writes[s][..need]
                    .iter()
                    .find(|w| !present[w.elem as usize])
                    .copied()
                    .unwrap_or(writes[s][0]);
                Case {
                    guarantee: Guarantee::ReadYourWrites,
                    text: format!(
                        "read-your-writes: session {} on key {kl}: {} lacks {} written by the session's op {} ({}), acknowledged before the read began",
                        session_ids[s], reader(), elems[w.elem as usize], idx(w.invoke), write_node(&w)
                    ),
                    positions: vec![w.invoke, w.complete, r.invoke_pos, r.complete_pos],
                }
            });
        }
        // Monotonic reads.
        let need = seen_sorted[s].partition_point(|&p| p < r.invoke_pos);
        if seen_before < need {
            out.found(Guarantee::MonotonicReads, || {
                let missing = (0..elems.len() as u32)
                    .find(|&i| first.get(s, i) < r.invoke_pos && !present[i as usize])
                    .unwrap_or(0);
                let earlier = first.get(s, missing);
                let earlier_node = read_by_complete(earlier).and_then(|e| e.node);
                let earlier_invoke = read_by_complete(earlier).map_or(earlier, |e| e.invoke_pos);
                Case {
                    guarantee: Guarantee::MonotonicReads,
                    text: format!(
                        "monotonic reads: session {} on key {kl}: {} lacks {} which the session's earlier read op {} ({}) reflected",
                        session_ids[s], reader(), elems[missing as usize], idx(earlier), node(earlier_node)
                    ),
                    positions: vec![earlier_invoke, earlier, r.invoke_pos, r.complete_pos],
                }
            });
        }
        // Monotonic writes: each writer's present writes are a prefix of its writes, and
        // (in an ordered read) appear in its order.
        let mw_gap = touched
            .iter()
            .find(|&&t| count[t] < max_rank[t] + 1)
            .map(|&t| (t, max_rank[t]));
        if let Some((t, max_rank)) = mw_gap {
            out.found(Guarantee::MonotonicWrites, || {
                let w1 = writes[t][..max_rank]
                    .iter()
                    .find(|w| !present[w.elem as usize])
                    .copied()
                    .unwrap_or(writes[t][0]);
                let w2 = writes[t][max_rank];
                Case {
                    guarantee: Guarantee::MonotonicWrites,
                    text: format!(
                        "monotonic writes: session {} on key {kl}: {} reflects its op {} ({}, element {}) but not its earlier op {} ({}, element {})",
                        session_ids[t], reader(), idx(w2.invoke), write_node(&w2),
                        elems[w2.elem as usize], idx(w1.invoke), write_node(&w1),
                        elems[w1.elem as usize]
                    ),
                    positions: vec![w1.invoke, w2.invoke, r.complete_pos],
                }
            });
        } else if let Some((t, j, prev)) = mw_order {
            out.found(Guarantee::MonotonicWrites, || {
                let (w1, w2) = (writes[t][j], writes[t][prev]);
                Case {
                    guarantee: Guarantee::MonotonicWrites,
                    text: format!(
                        "monotonic writes: session {} on key {kl}: {} orders its op {} (element {}) before its earlier op {} (element {})",
                        session_ids[t], reader(), idx(w2.invoke), elems[w2.elem as usize],
                        idx(w1.invoke), elems[w1.elem as usize]
                    ),
                    positions: vec![w1.invoke, w2.invoke, r.complete_pos],
                }
            });
        }
        // Writes-follow-reads.
        let ctx = ReadCtx {
            list,
            uniq: &uniq,
            present: &present,
            ordered: r.value.ordered(),
            writers: &touched,
            max_rank: &max_rank,
        };
        let wfr = match &wfr_sets {
            Some(sets) => sets.violation(&ctx, &writer, &mut in_read),
            None => wfr_by_counting(&ctx, &writer, &writes, &first, &seen_sorted, elems.len()),
        };
        if let Some((t, w2e, w1e)) = wfr {
            out.found(Guarantee::WritesFollowReads, || {
                let (w2t, w2j) = writer[w2e as usize].unwrap_or((t, 0));
                let w2 = writes[w2t][w2j];
                let seen_at = first.get(t, w1e);
                let missing = !present[w1e as usize];
                let mut positions = vec![seen_at, w2.invoke, r.complete_pos];
                if let Some((a, b)) = writer[w1e as usize] {
                    positions.push(writes[a][b].invoke);
                }
                Case {
                    guarantee: Guarantee::WritesFollowReads,
                    text: format!(
                        "writes-follow-reads: session {} on key {kl} read {} (read op {}, {}) before writing {} (op {}, {}), yet {} {} {}",
                        session_ids[t], elems[w1e as usize], idx(seen_at),
                        node(read_by_complete(seen_at).and_then(|x| x.node)),
                        elems[w2e as usize], idx(w2.invoke), write_node(&w2),
                        reader(),
                        if missing { "reflects the write but lacks" } else { "orders the write before" },
                        elems[w1e as usize]
                    ),
                    positions,
                }
            });
        }
        for &i in &uniq {
            present[i as usize] = false;
        }
    }
    out
}

/// Checks counters on one key: monotonic reads and read-your-writes.
fn check_counter(history: &History, view: &View, key: &KeyOps) -> KeyFindings {
    let idx = |p: usize| op_index(history, p);
    let mut out = KeyFindings::default();
    // Monotonic reads mean nothing on a counter that can go down (a PN-counter).
    if key
        .updates
        .iter()
        .any(|u| matches!(u.arg, UpdateArg::Delta(d) if d < 0))
    {
        return out;
    }
    // Per session: its acknowledged deltas (completion, running sum) and its highest read.
    let mut acked: FastMap<u64, Vec<(usize, i64, usize)>> = FastMap::default();
    for u in &key.updates {
        if let (Outcome::Ok, Some(c), UpdateArg::Delta(d)) = (u.outcome, u.complete_pos, &u.arg) {
            let v = acked.entry(u.process).or_default();
            let sum = v.last().map_or(0, |x| x.1).saturating_add(*d);
            v.push((c, sum, u.invoke_pos));
        }
    }
    let mut best: FastMap<u64, (i64, usize, Option<u32>)> = FastMap::default();
    let kl = key_label(&key.name);
    for r in &key.reads {
        let super::view::ReadValue::Counter(n) = r.value else {
            continue;
        };
        let mine = acked.get(&r.process).map(Vec::as_slice).unwrap_or(&[]);
        let k = mine.partition_point(|x| x.0 < r.invoke_pos);
        if k > 0 && n < mine[k - 1].1 {
            let (c, sum, inv) = mine[k - 1];
            out.found(Guarantee::ReadYourWrites, || Case {
                guarantee: Guarantee::ReadYourWrites,
                text: format!(
                    "read-your-writes: session {} read {n} from key {kl} (op {}, {}) though its own acknowledged increments sum to {sum} (the last, op {}, completed before the read began)",
                    r.process, idx(r.complete_pos), view.node_name(r.node), idx(inv)
                ),
                positions: vec![inv, c, r.complete_pos],
            });
        }
        if let Some(&(prev, pos, node)) = best.get(&r.process) {
            if n < prev {
                out.found(Guarantee::MonotonicReads, || Case {
                    guarantee: Guarantee::MonotonicReads,
                    text: format!(
                        "monotonic reads: session {} read {prev} from key {kl} (op {}, {}) and later {n} (op {}, {})",
                        r.process, idx(pos), view.node_name(node), idx(r.complete_pos), view.node_name(r.node)
                    ),
                    positions: vec![pos, r.complete_pos],
                });
            }
        }
        let e = best.entry(r.process).or_insert((n, r.complete_pos, r.node));
        if n > e.0 {
            *e = (n, r.complete_pos, r.node);
        }
    }
    out
}

impl Checker for SessionGuaranteesChecker {
    fn name(&self) -> String {
        "session-guarantees".into()
    }

    /// Read-your-writes and monotonic reads are facts about a session's own past, final
    /// when the read completes (`session_online.rs`); counters are left to the end.
    fn online(&self) -> Option<Box<dyn crate::verdict::OnlineCheck>> {
        super::session_online::OnlineSessions::new(self.data_type)
            .map(|o| Box::new(o) as Box<dyn crate::verdict::OnlineCheck>)
    }

    fn check(&self, history: &History) -> CheckResult {
        let view = View::build(history, self.data_type, ReadValues::All);
        let counter = self.data_type == EventualDataType::Counter;
        let parts: Vec<KeyFindings> = view
            .keys
            .par_iter()
            .map(|k| {
                if counter {
                    check_counter(history, &view, k)
                } else {
                    check_elements(history, &view, k, self.max_follow_words)
                }
            })
            .collect();
        let mut counts = [0usize; 4];
        let mut cases: Vec<Case> = Vec::new();
        for p in parts {
            for g in GUARANTEES {
                counts[g as usize] += p.counts[g as usize];
            }
            for c in p.cases {
                if cases.iter().filter(|x| x.guarantee == c.guarantee).count() < MAX_CASES {
                    cases.push(c);
                }
            }
        }
        let reads: usize = view.keys.iter().map(|k| k.reads.len()).sum();
        let sessions: std::collections::BTreeSet<u64> = view
            .keys
            .iter()
            .flat_map(|k| k.reads.iter().map(|r| r.process))
            .collect();
        let per: serde_json::Map<String, Value> = GUARANTEES
            .iter()
            .map(|g| {
                let v = if counter
                    && matches!(g, Guarantee::MonotonicWrites | Guarantee::WritesFollowReads)
                {
                    json!(
                        "not checkable on a counter (a sum does not show which writes it reflects)"
                    )
                } else {
                    json!(counts[*g as usize])
                };
                (g.name().to_string(), v)
            })
            .collect();
        let details = json!({
            "data_type": self.data_type.name(),
            "violations": per,
            "reads": reads,
            "sessions": sessions.len(),
        });
        let total: usize = counts.iter().sum();
        let found: Vec<Guarantee> = GUARANTEES
            .into_iter()
            .filter(|g| counts[*g as usize] > 0)
            .collect();
        let shown: Vec<&Case> = found
            .iter()
            .filter_map(|g| cases.iter().find(|c| c.guarantee == *g))
            .collect();
        let summary: Vec<String> = found
            .iter()
            .map(|g| format!("{} {}", counts[*g as usize], g.name()))
            .collect();
        let checked = if counter {
            "read-your-writes and monotonic reads hold (monotonic writes and writes-follow-reads are not checkable on a counter)"
        } else {
            "read-your-writes, monotonic reads, monotonic writes and writes-follow-reads hold"
        };
        let mut details = details;
        details["cases"] = json!(cases
            .iter()
            .map(|c| json!({"guarantee": c.guarantee.name(), "explanation": c.text}))
            .collect::<Vec<_>>());
        Verdict {
            checker: self.name(),
            invalid: (total > 0).then(|| {
                (
                    format!(
                        "session guarantees violated by {total} read(s) ({}): {}",
                        summary.join(", "),
                        shown
                            .iter()
                            .map(|c| c.text.as_str())
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                    cases
                        .iter()
                        .flat_map(|c| c.positions.iter().copied())
                        .filter(|&p| p != NONE)
                        .collect(),
                    found.iter().map(|g| g.name().to_string()).collect(),
                )
            }),
            unknown: if reads == 0 {
                Some("no ok read, so no session guarantee could be judged".to_string())
            } else {
                malformed_reason(&view, history)
            },
            valid: format!(
                "{checked} over {reads} read(s) of {} session(s)",
                sessions.len()
            ),
            details,
            coverage: crate::verdict::Coverage::of([
                ("sessions", sessions.len() as u64),
                ("reads", reads as u64),
            ]),
        }
        .into_result(history)
    }
}
