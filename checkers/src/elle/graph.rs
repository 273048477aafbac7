//! The transaction dependency graph: compact adjacency (CSR) with u32 node ids and an
//! edge-kind bitmask per edge, plus iterative strongly-connected components.

use super::txn::{FxMap, Txns, NONE};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU8};

/// Write-write dependency: a later version overwrote (appended after) an earlier one.
pub(crate) const WW: u8 = 1;
/// Write-read dependency: a transaction read another's write.
pub(crate) const WR: u8 = 2;
/// Read-write anti-dependency: a transaction read a version another one overwrote.
pub(crate) const RW: u8 = 4;
/// Process order: the same client process ran one transaction, then the other.
pub(crate) const PROCESS: u8 = 8;
/// Real-time order: one transaction completed before the other was invoked.
pub(crate) const REALTIME: u8 = 16;

/// Name of a single edge kind.
pub(crate) fn kind_name(k: u8) -> &'static str {
    match k {
        WW => "ww",
        WR => "wr",
        RW => "rw",
        PROCESS => "process",
        _ => "realtime",
    }
}

/// Where dependency edges go as they are inferred.
pub(crate) trait EdgeSink {
    /// Adds an edge a -> b of `kind`; self-edges are dropped (dependency graphs never
    /// hold them).
    fn push(&mut self, a: u32, b: u32, kind: u8);

    /// Adds an edge a -> b of `kind` for each b of `targets` (self-edges dropped): for
    /// producers that know many edges from one source at once, which a sink may then
    /// take without handling each on its own.
    fn push_run(&mut self, a: u32, targets: &[u32], kind: u8) {
        for &b in targets {
            self.push(a, b, kind);
        }
    }
}

/// Edges under construction.
#[derive(Default)]
pub(crate) struct EdgeList {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub kind: Vec<u8>,
}

impl EdgeSink for EdgeList {
    fn push(&mut self, a: u32, b: u32, kind: u8) {
        EdgeList::push(self, a, b, kind)
    }
}

impl EdgeList {
    /// Adds an edge; self-edges are dropped (dependency graphs never hold them).
    pub fn push(&mut self, a: u32, b: u32, kind: u8) {
        if a != b {
            self.src.push(a);
            self.dst.push(b);
            self.kind.push(kind);
        }
    }

    pub fn len(&self) -> usize {
        self.src.len()
    }

    /// Hands the edges at positions `range` to `sink`.
    pub fn replay_range(&self, range: Range<usize>, sink: &mut dyn EdgeSink) {
        for i in range {
            sink.push(self.src[i], self.dst[i], self.kind[i]);
        }
    }
}

/// Edge producers that may run at the same time, each handing its sink a share of the
/// edges; together, and the same each time they run, all of them. The graph is built in
/// two passes over them (count, then place), so no list of edges is ever held beside it.
pub(crate) type EdgeParts<'a> = Vec<Box<dyn Fn(&mut dyn EdgeSink) + Sync + 'a>>;

/// `0..len` in about `parts` ranges of equal length (none when `len` is 0).
pub(crate) fn split_range(len: usize, parts: usize) -> impl Iterator<Item = Range<usize>> {
    let step = len.div_ceil(parts.max(1)).max(1);
    (0..len).step_by(step).map(move |s| s..(s + step).min(len))
}

/// First pass of [`Graph::count`]/[`Graph::fill`]: counts each source's edges.
struct Counter<'a>(&'a [AtomicU32]);

impl EdgeSink for Counter<'_> {
    fn push(&mut self, a: u32, b: u32, _kind: u8) {
        if a != b {
            if let Some(c) = self.0.get(a as usize) {
                c.fetch_add(1, Relaxed);
            }
        }
    }

    fn push_run(&mut self, a: u32, targets: &[u32], _kind: u8) {
        if let Some(c) = self.0.get(a as usize) {
            let n = targets.iter().filter(|&&b| b != a).count();
            c.fetch_add(n as u32, Relaxed);
        }
    }
}

/// Second pass of [`Graph::count`]/[`Graph::fill`]: puts each edge in its source's
/// segment (in whatever order the parts deliver; each segment is sorted afterwards).
struct Filler<'a> {
    offsets: &'a [usize],
    /// Edges handed over so far for each source's segment.
    placed: &'a [AtomicU32],
    targets: &'a [AtomicU32],
    kinds: &'a [AtomicU8],
}

impl EdgeSink for Filler<'_> {
    fn push(&mut self, a: u32, b: u32, kind: u8) {
        let a = a as usize;
        if a == b as usize || a >= self.placed.len() {
            return;
        }
        // Edges beyond the first pass's count (a producer that is not repeatable) are
        // dropped rather than overflow their segment.
        let k = self.placed[a].fetch_add(1, Relaxed) as usize;
        let at = self.offsets[a] + k;
        if at < self.offsets[a + 1] {
            self.targets[at].store(b, Relaxed);
            self.kinds[at].store(kind, Relaxed);
        }
    }

    fn push_run(&mut self, a: u32, targets: &[u32], kind: u8) {
        let src = a;
        let a = a as usize;
        if a >= self.placed.len() {
            return;
        }
        let n = targets.iter().filter(|&&b| b != src).count();
        // The run's places in a's segment, taken at once; as in `push`, beyond the first
        // pass's count nothing is placed.
        let k = self.placed[a].fetch_add(n as u32, Relaxed) as usize;
        let places = self.offsets[a] + k..self.offsets[a + 1];
        for (at, &b) in places.zip(targets.iter().filter(|&&b| b != src)) {
            self.targets[at].store(b, Relaxed);
            self.kinds[at].store(kind, Relaxed);
        }
    }
}

/// A directed graph in compressed sparse row form; parallel edges merged into one edge
/// whose kind is the union of their kinds.
pub(crate) struct Graph {
    pub offsets: Vec<usize>,
    pub targets: Vec<u32>,
    pub kinds: Vec<u8>,
}

impl Graph {
    /// Builds the graph over nodes `0..n` from an edge list (consumed).
    pub fn build(n: usize, edges: EdgeList) -> Graph {
        let mut counts = vec![0usize; n + 1];
        for &s in &edges.src {
            counts[s as usize + 1] += 1;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut packed = vec![0u64; edges.len()];
        for i in 0..edges.len() {
            let s = edges.src[i] as usize;
            packed[fill[s]] = ((edges.dst[i] as u64) << 8) | edges.kind[i] as u64;
            fill[s] += 1;
        }
        drop(edges);
        let mut offsets = Vec::with_capacity(n + 1);
        let mut targets = Vec::with_capacity(packed.len());
        let mut kinds = Vec::with_capacity(packed.len());
        offsets.push(0);
        for v in 0..n {
            let slice = &mut packed[counts[v]..counts[v + 1]];
            slice.sort_unstable();
            let mut last = NONE;
            for &p in slice.iter() {
                let d = (p >> 8) as u32;
                let k = (p & 0xff) as u8;
                if d == last {
                    if let Some(lk) = kinds.last_mut() {
                        *lk |= k;
                    }
                } else {
                    targets.push(d);
                    kinds.push(k);
                    last = d;
                }
            }
            offsets.push(targets.len());
        }
        Graph {
            offsets,
            targets,
            kinds,
        }
    }

    /// Counts the edges `parts` hand their sinks, per source: the offsets of the graph
    /// [`Graph::fill`] builds from the same parts.
    pub fn count(n: usize, parts: &EdgeParts<'_>) -> Vec<usize> {
        let counts: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        parts
            .par_iter()
            .for_each(|part| part(&mut Counter(&counts)));
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0usize);
        let mut total = 0usize;
        for c in counts {
            total += c.into_inner() as usize;
            offsets.push(total);
        }
        offsets
    }

    /// Builds the graph over nodes `0..n` from the edges `parts` hand their sinks, which
    /// must be the ones they handed [`Graph::count`] for `offsets`. Parallel edges are
    /// merged as [`Graph::build`] merges them; the result does not depend on the order in
    /// which the parts ran.
    pub fn fill(mut offsets: Vec<usize>, parts: &EdgeParts<'_>) -> Graph {
        let n = offsets.len().saturating_sub(1);
        let total = offsets.last().copied().unwrap_or(0);
        let targets: Vec<AtomicU32> = (0..total).map(|_| AtomicU32::new(0)).collect();
        let kinds: Vec<AtomicU8> = (0..total).map(|_| AtomicU8::new(0)).collect();
        let placed: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
        parts.par_iter().for_each(|part| {
            part(&mut Filler {
                offsets: &offsets,
                placed: &placed,
                targets: &targets,
                kinds: &kinds,
            })
        });
        // Same layout: these collect in place.
        let mut targets: Vec<u32> = targets.into_iter().map(AtomicU32::into_inner).collect();
        let mut kinds: Vec<u8> = kinds.into_iter().map(AtomicU8::into_inner).collect();
        // Sort each segment by (target, kind) and merge parallel edges in place, in
        // parallel over ranges of sources; `merged[v]`, which held how many edges were
        // placed in v's segment, becomes what is left of it.
        let mut merged: Vec<u32> = placed.into_iter().map(AtomicU32::into_inner).collect();
        let ranges: Vec<Range<usize>> = split_range(n, rayon::current_num_threads() * 4).collect();
        let mut jobs = Vec::with_capacity(ranges.len());
        let (mut t_rest, mut k_rest, mut m_rest) =
            (&mut targets[..], &mut kinds[..], &mut merged[..]);
        for r in &ranges {
            let len = offsets[r.end] - offsets[r.start];
            let (t, tr) = std::mem::take(&mut t_rest).split_at_mut(len);
            let (k, kr) = std::mem::take(&mut k_rest).split_at_mut(len);
            let (m, mr) = std::mem::take(&mut m_rest).split_at_mut(r.len());
            (t_rest, k_rest, m_rest) = (tr, kr, mr);
            jobs.push((r.clone(), t, k, m));
        }
        jobs.into_par_iter().for_each(|(r, t, k, m)| {
            let base = offsets[r.start];
            let mut scratch: Vec<u64> = Vec::new();
            for (i, v) in r.enumerate() {
                let start = offsets[v] - base;
                let len = (m[i] as usize).min(offsets[v + 1] - offsets[v]);
                scratch.clear();
                scratch.extend((start..start + len).map(|j| ((t[j] as u64) << 8) | k[j] as u64));
                scratch.sort_unstable();
                let mut w = start;
                let mut last = NONE;
                for &p in &scratch {
                    let d = (p >> 8) as u32;
                    let kind = (p & 0xff) as u8;
                    if d == last {
                        k[w - 1] |= kind;
                    } else {
                        t[w] = d;
                        k[w] = kind;
                        w += 1;
                        last = d;
                    }
                }
                m[i] = (w - start) as u32;
            }
        });
        // Close the gaps; `offsets` becomes the merged graph's (each start is read
        // before it is overwritten).
        let mut w = 0usize;
        for v in 0..n {
            let (start, len) = (offsets[v], merged[v] as usize);
            offsets[v] = w;
            targets.copy_within(start..start + len, w);
            kinds.copy_within(start..start + len, w);
            w += len;
        }
        if let Some(end) = offsets.last_mut() {
            *end = w;
        }
        targets.truncate(w);
        targets.shrink_to_fit();
        kinds.truncate(w);
        kinds.shrink_to_fit();
        Graph {
            offsets,
            targets,
            kinds,
        }
    }

    pub fn n(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn edge_count(&self) -> usize {
        self.targets.len()
    }

    /// Out-edges of v as (target, kinds).
    pub fn out(&self, v: u32) -> impl Iterator<Item = (u32, u8)> + '_ {
        let r = self.offsets[v as usize]..self.offsets[v as usize + 1];
        self.targets[r.clone()]
            .iter()
            .copied()
            .zip(self.kinds[r].iter().copied())
    }
}

/// Strongly connected components with more than one node, over edges whose kinds meet
/// `mask`, restricted to nodes where `member` is true (all when `None`). Iterative
/// Tarjan: no recursion, so component size is unbounded.
pub(crate) fn nontrivial_sccs(g: &Graph, mask: u8, member: Option<&[bool]>) -> Vec<Vec<u32>> {
    let n = g.n();
    let inside = |v: u32| member.is_none_or(|m| m[v as usize]);
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    // Call stack frames: (vertex, next edge position).
    let mut frames: Vec<(u32, usize)> = Vec::new();
    let mut next_index = 0u32;
    let mut out = Vec::new();
    for root in 0..n as u32 {
        if index[root as usize] != NONE || !inside(root) {
            continue;
        }
        frames.push((root, g.offsets[root as usize]));
        index[root as usize] = next_index;
        low[root as usize] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (v, ref mut pos)) = frames.last_mut() {
            let end = g.offsets[v as usize + 1];
            let mut descended = false;
            while *pos < end {
                let w = g.targets[*pos];
                let k = g.kinds[*pos];
                *pos += 1;
                if k & mask == 0 || !inside(w) {
                    continue;
                }
                if index[w as usize] == NONE {
                    index[w as usize] = next_index;
                    low[w as usize] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w as usize] = true;
                    frames.push((w, g.offsets[w as usize]));
                    descended = true;
                    break;
                } else if on_stack[w as usize] {
                    low[v as usize] = low[v as usize].min(index[w as usize]);
                }
            }
            if descended {
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent as usize] = low[parent as usize].min(low[v as usize]);
            }
            if low[v as usize] == index[v as usize] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w as usize] = false;
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort_unstable();
                    out.push(comp);
                }
            }
        }
    }
    out
}

/// Adds the real-time edges at the invokes whose history positions are in `positions`:
/// ranges that cover `0..history_len` give all of them, so the ranges can run in
/// parallel. The edges are those of a transitive reduction of real-time order: each op
/// gets edges from the "frontier" of completed ops not already followed by another
/// completed op that it also follows. Only ok ops are sources (others never surely
/// completed).
///
/// When `t` completes, the frontier drops the ops it had edges from: those in the
/// frontier at `t`'s invoke, which are exactly the ones still there that completed
/// before it.
///
/// The frontier at the range's start is found without replaying the history before it:
/// the scan drops an op `t` once some ok op `u` that was invoked after `t` completed has
/// completed itself, so at position `lo` the frontier holds the ok ops that completed
/// before `lo` later than every invoke of an ok op that completed before `lo`, in order
/// of completion. Each range then adds the edges a single scan of the whole history adds
/// in it (`tests`), grouped by source (the graph sorts each source's edges).
pub(crate) fn add_realtime_edges_in(
    txns: &Txns,
    history_len: usize,
    positions: Range<usize>,
    edges: &mut dyn EdgeSink,
) {
    let (lo, hi) = (
        positions.start.min(history_len),
        positions.end.min(history_len),
    );
    if lo >= hi {
        return;
    }
    let mut slot = vec![NONE; hi - lo];
    // The latest invoke of an ok op that completed before `lo`.
    let mut latest_invoke: Option<usize> = None;
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.possible() {
            continue;
        }
        let (invoked, completed) = (txns.invoke_pos(tx), txns.complete_pos(tx));
        if (lo..hi).contains(&invoked) {
            slot[invoked - lo] = (t as u32) << 1;
        }
        if tx.ok() && completed < history_len {
            if completed >= lo {
                if completed < hi {
                    slot[completed - lo] = ((t as u32) << 1) | 1;
                }
            } else {
                latest_invoke = latest_invoke.max(Some(invoked));
            }
        }
    }
    // (txn, position of its completion)
    let mut frontier: Vec<(u32, usize)> = Vec::new();
    if lo > 0 {
        for (t, tx) in txns.txns.iter().enumerate() {
            let completed = txns.complete_pos(tx);
            if tx.ok() && completed < lo && latest_invoke.is_none_or(|i| completed > i) {
                frontier.push((t as u32, completed));
            }
        }
        frontier.sort_unstable_by_key(|&(_, done)| done);
    }
    // The ops invoked in the range so far, in order: each op in the frontier gets an
    // edge to every op invoked while it is there, a run of this list, handed over when it
    // leaves the frontier (or the range ends). No op is ever in the frontier at its own
    // invoke, so none of these edges is a self-edge.
    let mut invoked_here: Vec<u32> = Vec::new();
    // (txn, position of its completion, where its run starts in `invoked_here`)
    let mut frontier: Vec<(u32, usize, usize)> =
        frontier.into_iter().map(|(t, done)| (t, done, 0)).collect();
    for (at, s) in slot.into_iter().enumerate() {
        if s == NONE {
            continue;
        }
        let t = s >> 1;
        if s & 1 == 0 {
            invoked_here.push(t);
        } else {
            let invoked = txns.invoke_pos(&txns.txns[t as usize]);
            frontier.retain(|&(f, done, joined)| {
                let stays = done > invoked;
                if !stays {
                    edges.push_run(f, &invoked_here[joined..], REALTIME);
                }
                stays
            });
            frontier.push((t, lo + at, invoked_here.len()));
        }
    }
    for (f, _, joined) in frontier {
        edges.push_run(f, &invoked_here[joined..], REALTIME);
    }
}

/// Adds process-order edges between successive possible transactions of each process.
pub(crate) fn add_process_edges(txns: &Txns, edges: &mut dyn EdgeSink) {
    let mut last: FxMap<u64, u32> = FxMap::default();
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.possible() {
            continue;
        }
        if let Some(prev) = last.insert(txns.process(tx), t as u32) {
            edges.push(prev, t as u32, PROCESS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The real-time edges in one scan of the whole history: what the ranges of
    /// [`add_realtime_edges_in`] must add between them.
    fn realtime_edges_one_scan(txns: &Txns, history_len: usize, edges: &mut dyn EdgeSink) {
        let mut slot = vec![NONE; history_len];
        for (t, tx) in txns.txns.iter().enumerate() {
            if !tx.possible() {
                continue;
            }
            let (invoked, completed) = (txns.invoke_pos(tx), txns.complete_pos(tx));
            if invoked < history_len {
                slot[invoked] = (t as u32) << 1;
            }
            if tx.ok() && completed < history_len {
                slot[completed] = ((t as u32) << 1) | 1;
            }
        }
        let mut frontier: Vec<(u32, usize)> = Vec::new();
        for (pos, s) in slot.into_iter().enumerate() {
            if s == NONE {
                continue;
            }
            let t = s >> 1;
            if s & 1 == 0 {
                for &(f, _) in &frontier {
                    edges.push(f, t, REALTIME);
                }
            } else {
                let invoked = txns.invoke_pos(&txns.txns[t as usize]);
                frontier.retain(|&(_, done)| done > invoked);
                frontier.push((t, pos));
            }
        }
    }

    fn edge_triples(list: &EdgeList) -> Vec<(u32, u32, u8)> {
        (0..list.len())
            .map(|i| (list.src[i], list.dst[i], list.kind[i]))
            .collect()
    }

    /// A generated list-append history of 20-419 transactions by 1-9 processes, some
    /// failed and some info.
    fn generated(seed: u64, keys: usize) -> crate::history::History {
        use crate::elle::bench::{generate, GenConfig};
        let (txns, processes) = (20 + (seed as usize * 37) % 400, 1 + seed as usize % 9);
        let mut cfg = GenConfig::new(seed, txns, keys, processes);
        cfg.fail_ratio = (seed % 3) as f64 * 0.1;
        cfg.info_ratio = (seed % 4) as f64 * 0.08;
        generate(&cfg)
    }

    #[test]
    fn realtime_edges_in_ranges_are_those_of_one_scan() {
        let mut checked = 0;
        for seed in 0..40u64 {
            let history = generated(seed, 3);
            let txns = crate::elle::txn::build(&history, true);
            let len = history.len();
            let mut whole = EdgeList::default();
            realtime_edges_one_scan(&txns, len, &mut whole);
            let mut whole = edge_triples(&whole);
            whole.sort_unstable();
            assert!(
                !whole.is_empty(),
                "seed {seed}: no real-time edges to compare"
            );
            for parts in [1, 2, 3, 7, 64, len + 5] {
                let mut ranged = EdgeList::default();
                for r in split_range(len, parts) {
                    add_realtime_edges_in(&txns, len, r, &mut ranged);
                }
                // Ranges past the end add nothing.
                add_realtime_edges_in(&txns, len, len..len + 10, &mut ranged);
                let mut ranged = edge_triples(&ranged);
                ranged.sort_unstable();
                assert_eq!(ranged, whole, "seed {seed}, {parts} parts");
                checked += 1;
            }
        }
        assert_eq!(checked, 240);
    }

    #[test]
    fn counted_realtime_edges_are_the_edges_added() {
        let mut several = false;
        for seed in 0..40u64 {
            let history = generated(seed, 4);
            let txns = crate::elle::txn::build(&history, true);
            let (len, n) = (history.len(), txns.txns.len());
            let mut list = EdgeList::default();
            realtime_edges_one_scan(&txns, len, &mut list);
            let mut expected = vec![0u32; n];
            for &a in &list.src {
                expected[a as usize] += 1;
            }
            assert!(
                expected.iter().any(|&c| c > 0),
                "seed {seed}: nothing to count"
            );
            several |= expected.iter().any(|&c| c > 1);
            for parts in [1, 2, 5, len + 1] {
                let counts: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
                for r in split_range(len, parts) {
                    add_realtime_edges_in(&txns, len, r, &mut Counter(&counts));
                }
                let counts: Vec<u32> = counts.into_iter().map(AtomicU32::into_inner).collect();
                assert_eq!(counts, expected, "seed {seed}, {parts} parts");
                // Counted and placed as runs, in parallel parts: the graph of the one
                // scan's edges.
                let (txns_ref, whole) = (&txns, &list);
                let parts: EdgeParts = split_range(len, parts)
                    .map(|r| {
                        Box::new(move |sink: &mut dyn EdgeSink| {
                            add_realtime_edges_in(txns_ref, len, r.clone(), sink)
                        }) as Box<dyn Fn(&mut dyn EdgeSink) + Sync>
                    })
                    .collect();
                let g = Graph::fill(Graph::count(n, &parts), &parts);
                let one = EdgeList {
                    src: whole.src.clone(),
                    dst: whole.dst.clone(),
                    kind: whole.kind.clone(),
                };
                let one = Graph::build(n, one);
                assert_eq!(g.offsets, one.offsets, "seed {seed}");
                assert_eq!(g.targets, one.targets, "seed {seed}");
                assert_eq!(g.kinds, one.kinds, "seed {seed}");
            }
        }
        assert!(
            several,
            "no op had several real-time edges to count at once"
        );
    }

    #[test]
    fn counting_then_filling_builds_the_graph_an_edge_list_builds() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [1usize, 2, 5, 40, 2000] {
            let mut list = EdgeList::default();
            for _ in 0..rng.gen_range(0..n * 6) {
                let kind = 1u8 << rng.gen_range(0..5);
                list.push(rng.gen_range(0..n as u32), rng.gen_range(0..n as u32), kind);
            }
            // In three parts that run at the same time, as the checker's do.
            let parts: EdgeParts = split_range(list.len(), 3)
                .map(|r| {
                    let list = &list;
                    Box::new(move |sink: &mut dyn EdgeSink| list.replay_range(r.clone(), sink))
                        as Box<dyn Fn(&mut dyn EdgeSink) + Sync>
                })
                .collect();
            let offsets = Graph::count(n, &parts);
            let two_pass = Graph::fill(offsets, &parts);
            let one_pass = Graph::build(
                n,
                EdgeList {
                    src: list.src.clone(),
                    dst: list.dst.clone(),
                    kind: list.kind.clone(),
                },
            );
            assert_eq!(two_pass.offsets, one_pass.offsets);
            assert_eq!(two_pass.targets, one_pass.targets);
            assert_eq!(two_pass.kinds, one_pass.kinds);
        }
    }
}
