//! Read-write register inference: a partial version order per key (the initial nil
//! first, then optionally writes-follow-reads, per-process and real-time order), the
//! non-cycle anomalies Elle detects for registers, and ww / wr / rw edges.

use super::found::{Case, Found, Namer};
use super::graph::{nontrivial_sccs, EdgeList, Graph, RW, WR, WW};
use super::list_append::lost_updates;
use super::txn::{FxMap, MopKind, Txn, Txns, NONE};
use serde_json::{json, Value};

/// Which sources to infer version orders from (beyond the initial nil).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inference {
    pub wfr: bool,
    pub sequential: bool,
    pub linearizable: bool,
}

/// The inferred version graph, kept for explanations.
pub(crate) struct VersionGraph {
    /// (from, to) node pairs, sorted, no repeats; node `nv + key` is the initial nil
    /// of `key`. A sorted list, not a hash set: a third of the memory at 10M versions.
    pub edges: Vec<(u32, u32)>,
}

impl VersionGraph {
    fn contains(&self, edge: (u32, u32)) -> bool {
        self.edges.binary_search(&edge).is_ok()
    }
}

/// One transaction's external reads and final writes as (key, version) lists.
type Ext<'a> = (&'a [(u32, u32)], &'a [(u32, u32)]);

/// Every transaction's external reads and final writes, flat: two lists of (key,
/// version) pairs and where each transaction's part starts, instead of two small
/// vectors per transaction (at 10M transactions those cost over a gigabyte).
struct Exts {
    reads: Vec<(u32, u32)>,
    writes: Vec<(u32, u32)>,
    /// Transaction t's reads are `reads[read_at[t]..read_at[t + 1]]`.
    read_at: Vec<u32>,
    write_at: Vec<u32>,
}

impl Exts {
    fn build(txns: &Txns) -> Exts {
        let n = txns.txns.len();
        let mut e = Exts {
            reads: Vec::with_capacity(txns.mops.len()),
            writes: Vec::with_capacity(txns.mops.len()),
            read_at: Vec::with_capacity(n + 1),
            write_at: Vec::with_capacity(n + 1),
        };
        e.read_at.push(0);
        e.write_at.push(0);
        for tx in &txns.txns {
            ext_into(txns, tx, &mut e.reads, &mut e.writes);
            e.read_at.push(e.reads.len() as u32);
            e.write_at.push(e.writes.len() as u32);
        }
        e.reads.shrink_to_fit();
        e.writes.shrink_to_fit();
        e
    }

    fn of(&self, t: usize) -> Ext<'_> {
        (
            &self.reads[self.read_at[t] as usize..self.read_at[t + 1] as usize],
            &self.writes[self.write_at[t] as usize..self.write_at[t + 1] as usize],
        )
    }
}

/// Appends a txn's external reads (first read before any write of the key) and final
/// writes to `reads` and `writes`, as (key, version) pairs; version NONE is a read of nil.
fn ext_into(txns: &Txns, tx: &Txn, reads: &mut Vec<(u32, u32)>, writes: &mut Vec<(u32, u32)>) {
    let (r0, w0) = (reads.len(), writes.len());
    for m in txns.mops_of(tx) {
        match m.kind {
            MopKind::Read => {
                if !reads[r0..].iter().any(|r| r.0 == m.key)
                    && !writes[w0..].iter().any(|w| w.0 == m.key)
                {
                    reads.push((m.key, m.a));
                }
            }
            _ => match writes[w0..].iter_mut().find(|w| w.0 == m.key) {
                Some(w) => w.1 = m.a,
                None => writes.push((m.key, m.a)),
            },
        }
    }
}

/// (key, version) pairs.
type Pairs = Vec<(u32, u32)>;

/// One txn's external reads and final writes, owned (for explanations).
fn ext(txns: &Txns, tx: &Txn) -> (Pairs, Pairs) {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    ext_into(txns, tx, &mut reads, &mut writes);
    (reads, writes)
}

fn node(txns: &Txns, key: u32, v: u32) -> u32 {
    if v == NONE {
        (txns.num_versions() + key as usize) as u32
    } else {
        v
    }
}

/// Runs every rw-register analysis; `Err` when a value was written twice to one key.
pub(crate) fn analyze(
    txns: &Txns,
    namer: &Namer,
    found: &mut Found,
    edges: &mut EdgeList,
    inference: Inference,
) -> Result<VersionGraph, String> {
    let nv = txns.num_versions();
    let mut any_writer = vec![NONE; nv];
    let mut failed = vec![false; nv];
    let mut intermediate = vec![false; nv];
    for (t, tx) in txns.txns.iter().enumerate() {
        let mops = txns.mops_of(tx);
        for (i, m) in mops.iter().enumerate() {
            if m.kind != MopKind::Write {
                continue;
            }
            let w = any_writer[m.a as usize];
            if w != NONE && w != t as u32 {
                return Err(format!(
                    "value {} was written to key {} by more than one transaction; rw-register needs unique writes",
                    txns.version_text(m.a),
                    txns.key_text(m.key)
                ));
            }
            any_writer[m.a as usize] = t as u32;
            if !tx.possible() {
                failed[m.a as usize] = true;
            }
            if mops[i + 1..]
                .iter()
                .any(|n| n.kind == MopKind::Write && n.key == m.key)
            {
                intermediate[m.a as usize] = true;
            }
        }
    }
    let exts = Exts::build(txns);
    read_anomalies(txns, namer, found, &failed, &intermediate, &any_writer);
    lost_updates(txns, namer, found, false);

    // Indexes of ok transactions' external reads (flat, by version node) and writes.
    let slots = nv + txns.num_keys();
    let mut reader_at = vec![0u32; slots + 1];
    let mut ext_writer = vec![NONE; slots];
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.ok() {
            continue;
        }
        let (reads, writes) = exts.of(t);
        for &(k, v) in reads {
            reader_at[node(txns, k, v) as usize + 1] += 1;
        }
        for &(_, v) in writes {
            ext_writer[v as usize] = t as u32;
        }
    }
    for i in 1..reader_at.len() {
        reader_at[i] += reader_at[i - 1];
    }
    let mut ext_readers = vec![0u32; reader_at[slots] as usize];
    let mut cursor = reader_at.clone();
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.ok() {
            continue;
        }
        for &(k, v) in exts.of(t).0 {
            let at = &mut cursor[node(txns, k, v) as usize];
            ext_readers[*at as usize] = t as u32;
            *at += 1;
        }
    }
    drop(cursor);
    // wr: a read of v depends on the (unique) ok transaction whose final write was v.
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.ok() {
            continue;
        }
        for &(_, v) in exts.of(t).0 {
            if v != NONE && ext_writer[v as usize] != NONE {
                edges.push(ext_writer[v as usize], t as u32, WR);
            }
        }
    }

    let version_edges = infer_versions(txns, namer, found, &exts, inference);
    for &(a, b) in &version_edges {
        let wb = if (b as usize) < nv {
            ext_writer[b as usize]
        } else {
            NONE
        };
        if wb == NONE {
            continue;
        }
        if (a as usize) < nv && ext_writer[a as usize] != NONE {
            edges.push(ext_writer[a as usize], wb, WW);
        }
        for &r in &ext_readers[reader_at[a as usize] as usize..reader_at[a as usize + 1] as usize] {
            edges.push(r, wb, RW);
        }
    }
    Ok(VersionGraph {
        edges: version_edges,
    })
}

fn read_anomalies(
    txns: &Txns,
    namer: &Namer,
    found: &mut Found,
    failed: &[bool],
    intermediate: &[bool],
    any_writer: &[u32],
) {
    for (t, tx) in txns.txns.iter().enumerate() {
        let t = t as u32;
        if !tx.ok() {
            continue;
        }
        let mut state: Vec<(u32, u32)> = Vec::new();
        let mut internal_done = false;
        for m in txns.mops_of(tx) {
            match m.kind {
                MopKind::Read => {
                    if m.a != NONE && any_writer[m.a as usize] == NONE {
                        found.add("garbage-read", || Case {
                            txns: vec![t],
                            explanation: format!(
                                "{} read key {} = {}, a value no transaction ever wrote to {} (garbage read)",
                                namer.name(t), txns.key_text(m.key), txns.version_text(m.a), txns.key_text(m.key)
                            ),
                            data: json!({"op": namer.op_ref(t), "key": txns.key_scalar_json(m.key), "value": txns.version_json(m.a)}),
                        });
                    }
                    if m.a != NONE && failed[m.a as usize] {
                        let w = any_writer[m.a as usize];
                        found.add("G1a", || Case {
                            txns: vec![w, t],
                            explanation: format!(
                                "{} read key {} = {}, written by {}, a transaction that failed (aborted read)",
                                namer.name(t), txns.key_text(m.key), txns.version_text(m.a), namer.name(w)
                            ),
                            data: json!({"op": namer.op_ref(t), "writer": namer.op_ref(w), "key": txns.key_scalar_json(m.key), "value": txns.version_json(m.a)}),
                        });
                    }
                    if m.a != NONE && intermediate[m.a as usize] && any_writer[m.a as usize] != t {
                        let w = any_writer[m.a as usize];
                        found.add("G1b", || Case {
                            txns: vec![w, t],
                            explanation: format!(
                                "{} read key {} = {}, an intermediate write of {}, which wrote the key again later (intermediate read)",
                                namer.name(t), txns.key_text(m.key), txns.version_text(m.a), namer.name(w)
                            ),
                            data: json!({"op": namer.op_ref(t), "writer": namer.op_ref(w), "key": txns.key_scalar_json(m.key), "value": txns.version_json(m.a)}),
                        });
                    }
                    let slot = state.iter().position(|s| s.0 == m.key);
                    match slot {
                        Some(i) if state[i].1 != NONE && state[i].1 != m.a && !internal_done => {
                            internal_done = true;
                            let expected = state[i].1;
                            found.add("internal", || Case {
                                txns: vec![t],
                                explanation: format!(
                                    "{} read key {} = {}, but its own earlier read or write implies {}",
                                    namer.name(t), txns.key_text(m.key), value_text(txns, m.a), txns.version_text(expected)
                                ),
                                data: json!({"op": namer.op_ref(t), "key": txns.key_scalar_json(m.key), "read": value_json(txns, m.a), "expected": txns.version_json(expected)}),
                            });
                        }
                        Some(i) => state[i].1 = m.a,
                        None => state.push((m.key, m.a)),
                    }
                }
                _ => match state.iter_mut().find(|s| s.0 == m.key) {
                    Some(s) => s.1 = m.a,
                    None => state.push((m.key, m.a)),
                },
            }
        }
    }
}

fn value_text(txns: &Txns, v: u32) -> String {
    if v == NONE {
        "nil".into()
    } else {
        txns.version_text(v)
    }
}

fn value_json(txns: &Txns, v: u32) -> Value {
    if v == NONE {
        Value::Null
    } else {
        txns.version_json(v)
    }
}

/// The first and last external values of a txn on a key, as Elle relates successive
/// transactions: ok txns interact through reads and writes, info txns through writes.
fn first_last(txns: &Txns, tx: &Txn, e: Ext, key: u32) -> Option<(u32, u32)> {
    let r =
        e.0.iter()
            .find(|r| r.0 == key)
            .map(|r| node(txns, key, r.1));
    let w = e.1.iter().find(|w| w.0 == key).map(|w| w.1);
    if tx.ok() {
        Some((r.or(w)?, w.or(r)?))
    } else if tx.possible() {
        w.map(|w| (w, w))
    } else {
        None
    }
}

fn infer_versions(
    txns: &Txns,
    namer: &Namer,
    found: &mut Found,
    exts: &Exts,
    inference: Inference,
) -> Vec<(u32, u32)> {
    let mut accepted: Vec<(u32, u32)> = Vec::new();
    // Initial state: nil precedes every other value.
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.possible() {
            continue;
        }
        let (reads, writes) = exts.of(t);
        let reads: &[(u32, u32)] = if tx.ok() { reads } else { &[] };
        for &(k, v) in writes.iter().chain(reads) {
            if v != NONE {
                accepted.push((node(txns, k, NONE), v));
            }
        }
    }
    accepted.sort_unstable();
    accepted.dedup();
    let mut sources: Vec<(&str, Vec<(u32, u32)>)> = Vec::new();
    if inference.wfr {
        let mut es = Vec::new();
        for (t, tx) in txns.txns.iter().enumerate() {
            if !tx.ok() {
                continue;
            }
            let (reads, writes) = exts.of(t);
            for &(k, v) in reads {
                if let Some(&(_, w)) = writes.iter().find(|w| w.0 == k) {
                    if v != NONE && v != w {
                        es.push((v, w));
                    }
                }
            }
        }
        sources.push(("wfr-keys", es));
    }
    if inference.sequential {
        // Successive transactions of one process on the same key.
        let mut last: FxMap<(u64, u32), u32> = FxMap::default();
        let mut es = Vec::new();
        for (t, tx) in txns.txns.iter().enumerate() {
            let (reads, writes) = exts.of(t);
            let mut keys: Vec<u32> = reads.iter().chain(writes).map(|x| x.0).collect();
            keys.sort_unstable();
            keys.dedup();
            for k in keys {
                let Some((first, final_v)) = first_last(txns, tx, exts.of(t), k) else {
                    continue;
                };
                if let Some(prev) = last.insert((txns.process(tx), k), final_v) {
                    if prev != first {
                        es.push((prev, first));
                    }
                }
            }
        }
        sources.push(("sequential-keys", es));
    }
    if inference.linearizable {
        sources.push(("linearizable-keys", realtime_version_edges(txns, exts)));
    }
    let slots = txns.num_versions() + txns.num_keys();
    let mut used = vec!["initial-state"];
    for (name, es) in sources {
        let mut trial = EdgeList::default();
        for &(a, b) in accepted.iter().chain(es.iter()) {
            trial.push(a, b, WW);
        }
        let g = Graph::build(slots, trial);
        let cycles = nontrivial_sccs(&g, WW, None);
        if cycles.is_empty() {
            accepted.extend(es);
            used.push(name);
        } else {
            let mut srcs = used.clone();
            srcs.push(name);
            for scc in cycles {
                let key = scc
                    .iter()
                    .find(|v| (**v as usize) < txns.num_versions())
                    .map(|v| txns.version_key[*v as usize])
                    .unwrap_or(0);
                let values: Vec<String> = scc
                    .iter()
                    .map(|v| {
                        if (*v as usize) < txns.num_versions() {
                            txns.version_text(*v)
                        } else {
                            "nil".into()
                        }
                    })
                    .collect();
                let srcs = srcs.clone();
                found.add("cyclic-versions", || Case {
                    txns: Vec::new(),
                    explanation: format!(
                        "the version order of key {} inferred from {} is cyclic: versions {} each precede one another",
                        txns.key_text(key), srcs.join(", "), values.join(", ")
                    ),
                    data: json!({"key": txns.key_scalar_json(key), "scc": values, "sources": srcs}),
                });
            }
        }
    }
    let _ = namer;
    accepted.sort_unstable();
    accepted.dedup();
    accepted
}

/// Version edges from real-time order per key: for each key, a transitive reduction of
/// real-time order among the transactions that touched it.
fn realtime_version_edges(txns: &Txns, exts: &Exts) -> Vec<(u32, u32)> {
    // Events per key: (position, txn, is_completion).
    let mut per_key: FxMap<u32, Vec<(usize, u32, bool)>> = FxMap::default();
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.possible() {
            continue;
        }
        let (reads, writes) = exts.of(t);
        let mut keys: Vec<u32> = writes.iter().map(|w| w.0).collect();
        if tx.ok() {
            keys.extend(reads.iter().map(|r| r.0));
        }
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            let ev = per_key.entry(k).or_default();
            ev.push((txns.invoke_pos(tx), t as u32, false));
            if tx.ok() {
                ev.push((txns.complete_pos(tx), t as u32, true));
            }
        }
    }
    let mut out = Vec::new();
    for (k, mut ev) in per_key {
        ev.sort_unstable();
        let mut frontier: Vec<u32> = Vec::new();
        let mut preds: FxMap<u32, Vec<u32>> = FxMap::default();
        for (_, t, done) in ev {
            if !done {
                preds.insert(t, frontier.clone());
                let Some((first, _)) =
                    first_last(txns, &txns.txns[t as usize], exts.of(t as usize), k)
                else {
                    continue;
                };
                for &p in &frontier {
                    if let Some((_, last)) =
                        first_last(txns, &txns.txns[p as usize], exts.of(p as usize), k)
                    {
                        if last != first {
                            out.push((last, first));
                        }
                    }
                }
            } else {
                let ps = preds.remove(&t).unwrap_or_default();
                frontier.retain(|f| !ps.contains(f));
                frontier.push(t);
            }
        }
    }
    out
}

/// Explains one dependency edge a -> b in register terms.
pub(crate) fn explain(
    txns: &Txns,
    vg: &VersionGraph,
    namer: &Namer,
    a: u32,
    b: u32,
    kind: u8,
) -> Option<(String, Value)> {
    let (ea, eb) = (
        ext(txns, &txns.txns[a as usize]),
        ext(txns, &txns.txns[b as usize]),
    );
    let (na, nb) = (namer.name(a), namer.name(b));
    match kind {
        WR => ea.1.iter().find_map(|&(k, v)| {
            eb.0.contains(&(k, v)).then(|| {
                (
                    format!(
                        "{na} wrote key {} = {}, and {nb} read it, so {na} wr-precedes {nb}",
                        txns.key_text(k),
                        txns.version_text(v)
                    ),
                    json!({"key": txns.key_scalar_json(k), "value": txns.version_json(v)}),
                )
            })
        }),
        WW | RW => {
            let from = if kind == WW { &ea.1 } else { &ea.0 };
            from.iter().find_map(|&(k, v1)| {
                let &(_, v2) = eb.1.iter().find(|w| w.0 == k)?;
                vg.contains((node(txns, k, v1), v2)).then(|| {
                    let verb = if kind == WW { "set key" } else { "read key" };
                    let rel = if kind == WW { "ww" } else { "rw" };
                    (
                        format!(
                            "{na} {verb} {} = {}, and {nb} set it to {}, which came later in the version order, so {na} {rel}-precedes {nb}",
                            txns.key_text(k), value_text(txns, v1), txns.version_text(v2)
                        ),
                        json!({"key": txns.key_scalar_json(k), "value": value_json(txns, v1), "value'": txns.version_json(v2)}),
                    )
                })
            })
        }
        _ => None,
    }
}
