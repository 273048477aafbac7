//! The transaction dependency graph: compact adjacency (CSR) with u32 node ids and an
//! edge-kind bitmask per edge, plus iterative strongly-connected components.

use super::txn::{FxMap, Txns, NONE};

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

/// Edges under construction.
#[derive(Default)]
pub(crate) struct EdgeList {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub kind: Vec<u8>,
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

/// Adds real-time edges from a transitive reduction of real-time order: each op gets
/// edges from the "frontier" of completed ops not already followed by another completed
/// op that it also follows. Only ok ops are sources (others never surely completed).
pub(crate) fn add_realtime_edges(txns: &Txns, history_len: usize, edges: &mut EdgeList) {
    let mut slot = vec![NONE; history_len];
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.possible() {
            continue;
        }
        if tx.invoke_pos < history_len {
            slot[tx.invoke_pos] = (t as u32) << 1;
        }
        if tx.ok() && tx.complete_pos < history_len {
            slot[tx.complete_pos] = ((t as u32) << 1) | 1;
        }
    }
    let mut frontier: Vec<u32> = Vec::new();
    // For each txn, where its real-time predecessor edges start in `edges` and how many.
    let mut preds: Vec<(usize, u32)> = vec![(0, 0); txns.txns.len()];
    let mut mark = vec![false; txns.txns.len()];
    for s in slot {
        if s == NONE {
            continue;
        }
        let t = s >> 1;
        if s & 1 == 0 {
            let start = edges.len();
            for &f in &frontier {
                edges.push(f, t, REALTIME);
            }
            preds[t as usize] = (start, (edges.len() - start) as u32);
        } else {
            let (start, len) = preds[t as usize];
            for i in start..start + len as usize {
                mark[edges.src[i] as usize] = true;
            }
            frontier.retain(|f| !mark[*f as usize]);
            for i in start..start + len as usize {
                mark[edges.src[i] as usize] = false;
            }
            frontier.push(t);
        }
    }
}

/// Adds process-order edges between successive possible transactions of each process.
pub(crate) fn add_process_edges(txns: &Txns, edges: &mut EdgeList) {
    let mut last: FxMap<u64, u32> = FxMap::default();
    for (t, tx) in txns.txns.iter().enumerate() {
        if !tx.possible() {
            continue;
        }
        if let Some(prev) = last.insert(tx.process, t as u32) {
            edges.push(prev, t as u32, PROCESS);
        }
    }
}
