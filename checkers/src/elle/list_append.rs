//! List-append inference: version orders from the longest read of each key, the
//! non-cycle anomalies Elle detects for lists, and ww / wr / rw dependency edges.

use super::found::{Case, Found, Namer};
use super::graph::{EdgeSink, RW, WR, WW};
use super::txn::{FxMap, MopKind, Txns, NONE};
use crate::history::Outcome;
use serde_json::{json, Value};

/// Per-key version orders and per-version writers.
pub(crate) struct AppendIndex {
    /// Each key's inferred order of appended versions.
    pub order: Vec<Vec<u32>>,
    /// Each version's position in its key's order (NONE: never observed).
    pub pos: Vec<u32>,
    /// The ok/info transaction that appended each version.
    pub writer: Vec<u32>,
}

impl AppendIndex {
    /// The version appended just before `v` (NONE: the initial empty state).
    pub fn prev(&self, key: u32, v: u32) -> u32 {
        let order = &self.order[key as usize];
        match self.pos[v as usize] {
            NONE => order.last().copied().unwrap_or(NONE),
            0 => NONE,
            p => order[p as usize - 1],
        }
    }
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::Fail => "fail",
        _ => "info",
    }
}

/// Why the analysis refused to go on: Elle's anomaly type, the offending value, and words.
pub(crate) struct DuplicateAppends {
    pub key: String,
    pub value: String,
    pub explanation: String,
}

/// Who appended each version, from the writer pass.
struct Appends {
    /// Every transaction's appends (NONE: never appended).
    any_writer: Vec<u32>,
    /// Only ok/info transactions' appends.
    writer: Vec<u32>,
    failed: Vec<bool>,
    intermediate: Vec<bool>,
    /// Per key: how many possible appends, and the last of them.
    append_count: Vec<u32>,
    single_append: Vec<u32>,
}

/// The writer of every version; `Err` at the first value appended twice to a key.
fn appends(txns: &Txns) -> Result<Appends, DuplicateAppends> {
    let nv = txns.num_versions();
    let nk = txns.num_keys();
    let mut a = Appends {
        any_writer: vec![NONE; nv],
        writer: vec![NONE; nv],
        failed: vec![false; nv],
        intermediate: vec![false; nv],
        append_count: vec![0u32; nk],
        single_append: vec![NONE; nk],
    };
    for (t, tx) in txns.txns.iter().enumerate() {
        let t = t as u32;
        let mops = txns.mops_of(tx);
        for (i, m) in mops.iter().enumerate() {
            if m.kind != MopKind::Append {
                continue;
            }
            if a.any_writer[m.a as usize] != NONE {
                let (key, value) = (txns.key_text(m.key), txns.version_text(m.a));
                return Err(DuplicateAppends {
                    explanation: format!(
                        "value {value} was appended to key {key} more than once; list-append needs unique appends"
                    ),
                    key,
                    value,
                });
            }
            a.any_writer[m.a as usize] = t;
            if tx.possible() {
                a.writer[m.a as usize] = t;
                a.append_count[m.key as usize] += 1;
                a.single_append[m.key as usize] = m.a;
            } else {
                a.failed[m.a as usize] = true;
            }
            if mops[i + 1..]
                .iter()
                .any(|n| n.kind == MopKind::Append && n.key == m.key)
            {
                a.intermediate[m.a as usize] = true;
            }
        }
    }
    Ok(a)
}

/// Longest read of each key over transactions that may have committed.
fn longest_reads<'t>(txns: &'t Txns) -> Vec<&'t [u32]> {
    let mut longest: Vec<&[u32]> = vec![&[]; txns.num_keys()];
    for tx in txns.txns.iter().filter(|t| t.possible()) {
        for m in txns.mops_of(tx) {
            if m.kind != MopKind::Read
                || m.b == NONE
                || m.b as usize <= longest[m.key as usize].len()
            {
                continue;
            }
            if let Some(list) = txns.read_list(m) {
                longest[m.key as usize] = list;
            }
        }
    }
    longest
}

/// Each key's version order: its longest read, or its only append.
fn version_orders(txns: &Txns, longest: &[&[u32]], a: &Appends) -> (Vec<Vec<u32>>, Vec<u32>) {
    let nk = txns.num_keys();
    let mut order: Vec<Vec<u32>> = vec![Vec::new(); nk];
    let mut pos = vec![NONE; txns.num_versions()];
    for k in 0..nk {
        if !longest[k].is_empty() {
            for &e in longest[k] {
                if pos[e as usize] == NONE {
                    pos[e as usize] = order[k].len() as u32;
                    order[k].push(e);
                }
            }
        } else if a.append_count[k] == 1 {
            pos[a.single_append[k] as usize] = 0;
            order[k].push(a.single_append[k]);
        }
    }
    (order, pos)
}

/// Runs `pass` into a fresh [`Found`].
fn into_found(pass: impl FnOnce(&mut Found)) -> Found {
    let mut found = Found::default();
    pass(&mut found);
    found
}

/// Runs every list-append analysis. Returns `Err` (as Elle refuses to check, calling it
/// `duplicate-appends`) when some value was appended to the same key more than once.
///
/// Independent passes run in parallel, each into its own [`Found`]; those are merged in
/// the order the passes would run one after another, so what is reported is the same.
pub(crate) fn analyze(
    txns: &Txns,
    namer: &Namer,
    found: &mut Found,
) -> Result<AppendIndex, DuplicateAppends> {
    let (inferred, (internal, lost)) = rayon::join(
        || {
            let (appends, longest) = rayon::join(|| appends(txns), || longest_reads(txns));
            let a = appends?;
            let (order, pos) = version_orders(txns, &longest, &a);
            let Appends {
                any_writer,
                writer,
                failed,
                intermediate,
                ..
            } = a;
            let index = AppendIndex { order, pos, writer };
            let (reads, dirty) = rayon::join(
                || {
                    into_found(|f| {
                        read_anomalies(
                            txns,
                            namer,
                            f,
                            &longest,
                            &failed,
                            &intermediate,
                            &any_writer,
                        )
                    })
                },
                || into_found(|f| dirty_updates(txns, namer, f, &index, &any_writer)),
            );
            Ok((index, reads, dirty))
        },
        || {
            rayon::join(
                || into_found(|f| internal_and_future(txns, namer, f)),
                || into_found(|f| lost_updates(txns, namer, f, true)),
            )
        },
    );
    let (index, reads, dirty) = inferred?;
    for part in [reads, internal, lost, dirty] {
        found.merge(part);
    }
    Ok(index)
}

/// Hands `edges` the ww, wr and rw dependencies of the transactions in `range`
/// (positions in `txns.txns`); repeatable (same edges each call), as building the graph
/// in two passes needs, and ranges that cover every transaction give every edge.
pub(crate) fn edges(
    txns: &Txns,
    index: &AppendIndex,
    readers: &Readers,
    range: std::ops::Range<usize>,
    edges: &mut dyn EdgeSink,
) {
    read_edges(txns, index, range.clone(), edges);
    write_edges(txns, index, readers, range, edges);
}

/// The micro-ops of `kind` of the possible transactions in `range`, with their
/// transaction.
fn possible_mops<'t>(
    txns: &'t Txns,
    range: std::ops::Range<usize>,
    kind: MopKind,
) -> impl Iterator<Item = (u32, &'t super::txn::Mop)> + 't {
    let end = range.end.min(txns.txns.len());
    (range.start.min(end)..end)
        .filter(|&t| txns.txns[t].possible())
        .flat_map(move |t| {
            txns.mops_of(&txns.txns[t])
                .iter()
                .filter(move |m| m.kind == kind)
                .map(move |m| (t as u32, m))
        })
}

/// wr: the writer of the last element of each list read precedes the reader.
fn read_edges(
    txns: &Txns,
    index: &AppendIndex,
    range: std::ops::Range<usize>,
    edges: &mut dyn EdgeSink,
) {
    for (t, m) in possible_mops(txns, range, MopKind::Read) {
        if let Some(&e) = txns.read_list(m).and_then(|l| l.last()) {
            let w = index.writer[e as usize];
            if w != NONE {
                edges.push(w, t, WR);
            }
        }
    }
}

/// Slot of a read in the reader index: its last element, or the key's initial state.
fn read_slot(txns: &Txns, key: u32, list: Option<&[u32]>) -> u32 {
    match list.and_then(|l| l.last()) {
        Some(&e) => e,
        None => (txns.num_versions() + key as usize) as u32,
    }
}

#[allow(clippy::too_many_arguments)]
fn read_anomalies(
    txns: &Txns,
    namer: &Namer,
    found: &mut Found,
    longest: &[&[u32]],
    failed: &[bool],
    intermediate: &[bool],
    any_writer: &[u32],
) {
    let mut incompatible_reported = vec![false; txns.num_keys()];
    let mut stamp = vec![NONE; txns.num_versions()];
    let mut read_no = 0u32;
    for (t, tx) in txns.txns.iter().enumerate() {
        let t = t as u32;
        if !tx.possible() {
            continue;
        }
        for m in txns.mops_of(tx) {
            if m.kind != MopKind::Read {
                continue;
            }
            let Some(list) = txns.read_list(m) else {
                continue;
            };
            let k = m.key as usize;
            // Every read must be a prefix of the longest read of its key.
            let long = longest[k];
            if !incompatible_reported[k] && (list.len() > long.len() || long[..list.len()] != *list)
            {
                incompatible_reported[k] = true;
                found.add("incompatible-order", || Case {
                    txns: vec![t],
                    explanation: format!(
                        "{} read key {} = {}, which is not a prefix of another read {}: no single order of appends explains both",
                        namer.name(t), txns.key_text(m.key), txns.list_text(list), txns.list_text(long)
                    ),
                    data: json!({"key": txns.key_scalar_json(m.key), "values": [txns.list_json(list), txns.list_json(long)]}),
                });
            }
            read_no += 1;
            let mut dups: Vec<u32> = Vec::new();
            for &e in list {
                if stamp[e as usize] == read_no {
                    dups.push(e);
                }
                stamp[e as usize] = read_no;
            }
            if !dups.is_empty() {
                found.add("duplicate-elements", || Case {
                    txns: vec![t],
                    explanation: format!(
                        "{} read key {} = {}, which contains {} more than once, though each value is appended once",
                        namer.name(t), txns.key_text(m.key), txns.list_text(list), txns.list_text(&dups)
                    ),
                    data: json!({"op": namer.op_ref(t), "key": txns.key_scalar_json(m.key), "duplicates": txns.list_json(&dups)}),
                });
            }
            if tx.ok() {
                let garbage: Vec<u32> = list
                    .iter()
                    .copied()
                    .filter(|&e| any_writer[e as usize] == NONE)
                    .collect();
                if !garbage.is_empty() {
                    found.add("garbage-read", || Case {
                        txns: vec![t],
                        explanation: format!(
                            "{} read key {} = {}, including {}, which no transaction ever appended to {} (garbage read)",
                            namer.name(t), txns.key_text(m.key), txns.list_text(list), txns.list_text(&garbage), txns.key_text(m.key)
                        ),
                        data: json!({"op": namer.op_ref(t), "key": txns.key_scalar_json(m.key), "elements": txns.list_json(&garbage)}),
                    });
                }
                for &e in list {
                    if failed[e as usize] {
                        let w = any_writer[e as usize];
                        found.add("G1a", || Case {
                            txns: vec![w, t],
                            explanation: format!(
                                "{} read key {} = {}, including {}, which was appended by {}, a transaction that failed (aborted read)",
                                namer.name(t), txns.key_text(m.key), txns.list_text(list), txns.version_text(e), namer.name(w)
                            ),
                            data: json!({"op": namer.op_ref(t), "writer": namer.op_ref(w), "key": txns.key_scalar_json(m.key), "element": txns.version_json(e)}),
                        });
                    }
                }
                if let Some(&e) = list.last() {
                    let w = any_writer[e as usize];
                    if intermediate[e as usize] && w != t {
                        found.add("G1b", || Case {
                            txns: vec![w, t],
                            explanation: format!(
                                "{} read key {} = {}, ending in {}, an intermediate append of {}, which appended to {} again later (intermediate read)",
                                namer.name(t), txns.key_text(m.key), txns.list_text(list), txns.version_text(e), namer.name(w), txns.key_text(m.key)
                            ),
                            data: json!({"op": namer.op_ref(t), "writer": namer.op_ref(w), "key": txns.key_scalar_json(m.key), "element": txns.version_json(e)}),
                        });
                    }
                }
            }
        }
    }
}

/// Readers of each version (by last element) and of each key's initial state.
pub(crate) struct Readers {
    /// Where each slot's readers start in `txns` (u32: a history has fewer than 2^32
    /// reads; half the memory of usize at tens of millions of versions).
    offsets: Vec<u32>,
    txns: Vec<u32>,
}

impl Readers {
    pub fn build(txns: &Txns) -> Readers {
        let slots = txns.num_versions() + txns.num_keys();
        let mut counts = vec![0u32; slots + 1];
        let each = |f: &mut dyn FnMut(u32, u32)| {
            for (t, tx) in txns.txns.iter().enumerate() {
                if !tx.possible() {
                    continue;
                }
                for m in txns.mops_of(tx) {
                    // Reads of nil by info ops say nothing, but ok reads of nil are
                    // reads of the initial state.
                    if m.kind == MopKind::Read && (tx.ok() || m.b != NONE) {
                        f(read_slot(txns, m.key, txns.read_list(m)), t as u32);
                    }
                }
            }
        };
        each(&mut |s, _| counts[s as usize + 1] += 1);
        for i in 0..slots {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut out = vec![0u32; counts[slots] as usize];
        each(&mut |s, t| {
            out[fill[s as usize] as usize] = t;
            fill[s as usize] += 1;
        });
        Readers {
            offsets: counts,
            txns: out,
        }
    }

    /// Transactions that read `prev` (NONE: the initial state of `key`) as their last element.
    pub fn of(&self, txns: &Txns, key: u32, prev: u32) -> &[u32] {
        let slot = if prev == NONE {
            txns.num_versions() + key as usize
        } else {
            prev as usize
        };
        &self.txns[self.offsets[slot] as usize..self.offsets[slot + 1] as usize]
    }
}

fn write_edges(
    txns: &Txns,
    index: &AppendIndex,
    readers: &Readers,
    range: std::ops::Range<usize>,
    edges: &mut dyn EdgeSink,
) {
    for (t, m) in possible_mops(txns, range, MopKind::Append) {
        let prev = index.prev(m.key, m.a);
        if prev != NONE {
            let w = index.writer[prev as usize];
            if w != NONE {
                edges.push(w, t, WW);
            }
        }
        for &r in readers.of(txns, m.key, prev) {
            edges.push(r, t, RW);
        }
    }
}

fn internal_and_future(txns: &Txns, namer: &Namer, found: &mut Found) {
    // Expected state per key: (known prefix?, elements).
    let mut state: Vec<(u32, bool, Vec<u32>)> = Vec::new();
    for (t, tx) in txns.txns.iter().enumerate() {
        let t = t as u32;
        if !tx.ok() {
            continue;
        }
        let mops = txns.mops_of(tx);
        // Both anomalies need two micro-ops on one key; most transactions have none.
        if !shares_key(mops) {
            continue;
        }
        state.clear();
        for m in mops {
            let slot = state.iter().position(|s| s.0 == m.key);
            match m.kind {
                MopKind::Append => match slot {
                    Some(i) => state[i].2.push(m.a),
                    None => state.push((m.key, false, vec![m.a])),
                },
                MopKind::Read => {
                    let list = txns.read_list(m).unwrap_or(&[]);
                    if let Some(i) = slot {
                        let (_, known, exp) = &state[i];
                        let bad = if *known {
                            exp.as_slice() != list
                        } else {
                            list.len() < exp.len() || list[list.len() - exp.len()..] != exp[..]
                        };
                        if bad {
                            let expected = if *known {
                                txns.list_text(exp)
                            } else {
                                format!("[... {}]", txns.list_text(exp).trim_matches(['[', ']']))
                            };
                            found.add("internal", || Case {
                                txns: vec![t],
                                explanation: format!(
                                    "{} read key {} = {}, but its own earlier reads and appends imply {}",
                                    namer.name(t), txns.key_text(m.key), txns.list_text(list), expected
                                ),
                                data: json!({"op": namer.op_ref(t), "key": txns.key_scalar_json(m.key), "read": txns.list_json(list), "expected": expected}),
                            });
                            break;
                        }
                        state[i] = (m.key, true, list.to_vec());
                    } else {
                        state.push((m.key, true, list.to_vec()));
                    }
                }
                MopKind::Write => {}
            }
        }
        // Future read: an element read before this same transaction appends it.
        for (i, m) in mops.iter().enumerate() {
            if m.kind != MopKind::Append {
                continue;
            }
            let earlier = mops[..i].iter().find(|r| {
                r.kind == MopKind::Read
                    && r.key == m.key
                    && txns.read_list(r).is_some_and(|l| l.contains(&m.a))
            });
            if earlier.is_some() {
                found.add("future-read", || Case {
                    txns: vec![t],
                    explanation: format!(
                        "{} read key {} and saw {}, which it only appends later in the same transaction",
                        namer.name(t), txns.key_text(m.key), txns.version_text(m.a)
                    ),
                    data: json!({"op": namer.op_ref(t), "key": txns.key_scalar_json(m.key), "element": txns.version_json(m.a)}),
                });
                break;
            }
        }
    }
}

/// True if two micro-ops touch the same key.
pub(crate) fn shares_key(mops: &[super::txn::Mop]) -> bool {
    mops.iter()
        .enumerate()
        .any(|(i, m)| mops[i + 1..].iter().any(|n| n.key == m.key))
}

/// A key and the state a transaction first read of it (None: nil).
type ReadState = (u32, Option<Vec<u32>>);

/// Lost update: two committed transactions read the same state of a key and both wrote it.
pub(crate) fn lost_updates(txns: &Txns, namer: &Namer, found: &mut Found, list_reads: bool) {
    let mut groups: FxMap<ReadState, Vec<u32>> = FxMap::default();
    let mut reads: Vec<(u32, Option<Vec<u32>>)> = Vec::new();
    let mut written: Vec<u32> = Vec::new();
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.ok() {
            continue;
        }
        if !shares_key(txns.mops_of(tx)) {
            continue;
        }
        reads.clear();
        written.clear();
        for m in txns.mops_of(tx) {
            match m.kind {
                MopKind::Read => {
                    if !reads.iter().any(|r| r.0 == m.key) {
                        let v = if list_reads {
                            txns.read_list(m).map(|l| l.to_vec())
                        } else if m.a == NONE {
                            None
                        } else {
                            Some(vec![m.a])
                        };
                        reads.push((m.key, v));
                    }
                }
                _ => {
                    if written.contains(&m.key) {
                        continue;
                    }
                    if let Some(r) = reads.iter().find(|r| r.0 == m.key) {
                        groups.entry(r.clone()).or_default().push(t as u32);
                        written.push(m.key);
                    }
                }
            }
        }
    }
    let mut cases: Vec<(ReadState, Vec<u32>)> =
        groups.into_iter().filter(|(_, ts)| ts.len() > 1).collect();
    cases.sort_by_key(|(_, ts)| ts[0]);
    for ((key, value), ts) in cases {
        let shown = match &value {
            None => "nil".to_string(),
            Some(v) if list_reads => txns.list_text(v),
            Some(v) => txns.version_text(v[0]),
        };
        found.add("lost-update", || Case {
            txns: ts.clone(),
            explanation: format!(
                "{} all read key {} = {} and then each wrote key {}: all but one of those updates was lost",
                ts.iter().map(|t| namer.name(*t)).collect::<Vec<_>>().join(", "),
                txns.key_text(key), shown, txns.key_text(key)
            ),
            data: json!({"key": txns.key_scalar_json(key), "value": shown,
                         "txns": ts.iter().map(|t| namer.op_ref(*t)).collect::<Vec<Value>>()}),
        });
    }
}

/// Dirty update: a committed append directly follows a failed one in the version order.
fn dirty_updates(
    txns: &Txns,
    namer: &Namer,
    found: &mut Found,
    index: &AppendIndex,
    any_writer: &[u32],
) {
    for (k, order) in index.order.iter().enumerate() {
        // (outcome of the transaction that made the current state, its txn, versions)
        let mut t1: (Outcome, u32) = (Outcome::Ok, NONE);
        let mut vs: Vec<u32> = Vec::new();
        for &v in order {
            let w = any_writer[v as usize];
            if w == NONE {
                continue;
            }
            let o2 = match txns.txns[w as usize].outcome {
                Outcome::Pending => Outcome::Info,
                o => o,
            };
            vs.push(v);
            match (t1.0, o2) {
                (Outcome::Fail, Outcome::Ok) => {
                    let from = t1.1;
                    let seen = vs.clone();
                    found.add("dirty-update", || Case {
                        txns: vec![from, w],
                        explanation: format!(
                            "key {} went through versions {}: {} ({}) appended first, then committed {} appended on top of its uncommitted state",
                            txns.key_text(k as u32), txns.list_text(&seen), namer.name(from), outcome_name(Outcome::Fail), namer.name(w)
                        ),
                        data: json!({"key": txns.key_scalar_json(k as u32), "values": txns.list_json(&seen),
                                     "txns": [namer.op_ref(from), namer.op_ref(w)]}),
                    });
                    t1 = (o2, w);
                    vs = vec![v];
                }
                (_, Outcome::Ok) | (_, Outcome::Fail)
                    if !(t1.0 == Outcome::Fail && o2 == Outcome::Fail) =>
                {
                    t1 = (o2, w);
                    vs = vec![v];
                }
                _ => {}
            }
        }
    }
}

/// Explains one dependency edge a -> b of the given kind in list-append terms.
pub(crate) fn explain(
    txns: &Txns,
    index: &AppendIndex,
    namer: &Namer,
    a: u32,
    b: u32,
    kind: u8,
) -> Option<(String, Value)> {
    let ta = &txns.txns[a as usize];
    let tb = &txns.txns[b as usize];
    let (na, nb) = (namer.name(a), namer.name(b));
    match kind {
        WW => txns.mops_of(tb).iter().find_map(|m| {
            if m.kind != MopKind::Append {
                return None;
            }
            let prev = index.prev(m.key, m.a);
            (prev != NONE && index.writer[prev as usize] == a).then(|| {
                (
                    format!(
                        "{nb} appended {} to key {} after {na} appended {}, so {na} ww-precedes {nb}",
                        txns.version_text(m.a), txns.key_text(m.key), txns.version_text(prev)
                    ),
                    json!({"key": txns.key_scalar_json(m.key), "value": txns.version_json(prev), "value'": txns.version_json(m.a)}),
                )
            })
        }),
        WR => txns.mops_of(tb).iter().find_map(|m| {
            let list = txns.read_list(m).filter(|_| m.kind == MopKind::Read)?;
            let e = *list.last()?;
            (index.writer[e as usize] == a).then(|| {
                (
                    format!(
                        "{nb} read key {} = {}, observing {} appended by {na}, so {na} wr-precedes {nb}",
                        txns.key_text(m.key), txns.list_text(list), txns.version_text(e)
                    ),
                    json!({"key": txns.key_scalar_json(m.key), "value": txns.version_json(e)}),
                )
            })
        }),
        RW => txns.mops_of(tb).iter().find_map(|m| {
            if m.kind != MopKind::Append {
                return None;
            }
            let prev = index.prev(m.key, m.a);
            let read = txns.mops_of(ta).iter().find(|r| {
                r.kind == MopKind::Read && r.key == m.key && (ta.ok() || r.b != NONE) && {
                    let l = txns.read_list(r);
                    match l.and_then(|l| l.last()) {
                        Some(&e) => e == prev,
                        None => prev == NONE,
                    }
                }
            })?;
            let list = txns.read_list(read).unwrap_or(&[]);
            Some((
                format!(
                    "{na} read key {} = {}, missing {} appended by {nb}, so {na} rw-precedes {nb}",
                    txns.key_text(m.key), txns.list_text(list), txns.version_text(m.a)
                ),
                json!({"key": txns.key_scalar_json(m.key), "read": txns.list_json(list), "value'": txns.version_json(m.a)}),
            ))
        }),
        _ => None,
    }
}
