//! Cycle search: for each strongly connected component of the dependency graph, the
//! shortest cycle of every Elle anomaly class it holds, most severe first, within a time
//! budget.

use super::found::{Case, Found, Namer};
use super::graph::{kind_name, nontrivial_sccs, EdgeList, Graph, PROCESS, REALTIME, RW, WR, WW};
use super::model;
use super::txn::{FxMap, NONE};
use serde_json::{json, Value};
use std::collections::{HashSet, VecDeque};
use std::time::Instant;

/// The data-dependency shape of a cycle class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Base {
    G0,
    G1c,
    GSingle,
    GNonadjacent,
    G2Item,
}

/// One cycle class to search for: a base shape, optionally with process or real-time
/// edges (at least one of which must appear).
#[derive(Debug, Clone)]
struct Spec {
    name: String,
    base: Base,
    variant: u8,
}

fn specs() -> Vec<Spec> {
    let bases = [
        (Base::G0, "G0"),
        (Base::G1c, "G1c"),
        (Base::GSingle, "G-single-item"),
        (Base::GNonadjacent, "G-nonadjacent-item"),
        (Base::G2Item, "G2-item"),
    ];
    let mut out = Vec::new();
    for (base, name) in bases {
        for (variant, suffix) in [(0u8, ""), (PROCESS, "-process"), (REALTIME, "-realtime")] {
            out.push(Spec {
                name: format!("{name}{suffix}"),
                base,
                variant,
            });
        }
    }
    // Elle searches in an order where an anomaly comes before those it implies, so
    // implied ones can be skipped once found.
    out.sort_by(|a, b| {
        (model::implication_rank(&a.name), &a.name)
            .cmp(&(model::implication_rank(&b.name), &b.name))
    });
    out
}

// Search state bits.
const RW1: u8 = 1; // at least one rw
const RW2: u8 = 2; // at least two rw
const LAST_RW: u8 = 4;
const ADJ: u8 = 8; // two adjacent rw edges
const HAS_WR: u8 = 16;
const HAS_VAR: u8 = 32;
const FIRST_RW: u8 = 64;

impl Spec {
    fn allowed(&self) -> u8 {
        let base = match self.base {
            Base::G0 => WW,
            Base::G1c => WW | WR,
            _ => WW | WR | RW,
        };
        base | self.variant
    }

    /// The kind every matching cycle contains, so search can start on such an edge.
    fn anchor(&self) -> u8 {
        match self.base {
            Base::G0 => self.variant,
            Base::G1c => WR,
            _ => RW,
        }
    }

    fn step(&self, st: u8, kind: u8, first: bool) -> Option<u8> {
        let mut s = st;
        if kind == RW {
            if self.base == Base::GSingle && s & RW1 != 0 {
                return None;
            }
            if self.base == Base::GNonadjacent && s & LAST_RW != 0 {
                return None;
            }
            if s & LAST_RW != 0 {
                s |= ADJ;
            }
            if s & RW1 != 0 {
                s |= RW2;
            }
            s |= RW1 | LAST_RW;
            if first {
                s |= FIRST_RW;
            }
        } else {
            s &= !LAST_RW;
        }
        if kind == WR {
            s |= HAS_WR;
        }
        if kind & (PROCESS | REALTIME) != 0 {
            s |= HAS_VAR;
        }
        Some(s)
    }

    fn accepts(&self, s: u8) -> bool {
        if self.variant != 0 && s & HAS_VAR == 0 {
            return false;
        }
        let wrap_adj = s & LAST_RW != 0 && s & FIRST_RW != 0;
        match self.base {
            Base::G0 => true,
            Base::G1c => s & HAS_WR != 0,
            Base::GSingle => s & RW1 != 0 && s & RW2 == 0,
            Base::GNonadjacent => s & RW2 != 0 && s & ADJ == 0 && !wrap_adj,
            Base::G2Item => s & RW2 != 0 && (s & ADJ != 0 || wrap_adj),
        }
    }
}

/// A cycle as (txn, kind of the edge to the next txn) pairs, in order.
type Cycle = Vec<(u32, u8)>;

/// Outcome of a search that may run out of time.
enum Search {
    Found(Cycle),
    None,
    Timeout,
}

/// A component's local graph: local ids 0..m, global ids in `nodes`.
struct Local {
    nodes: Vec<u32>,
    g: Graph,
}

fn local(g: &Graph, comp: &[u32]) -> Local {
    let mut id: FxMap<u32, u32> = FxMap::default();
    for (i, v) in comp.iter().enumerate() {
        id.insert(*v, i as u32);
    }
    let mut edges = EdgeList::default();
    for (i, v) in comp.iter().enumerate() {
        for (w, k) in g.out(*v) {
            if let Some(j) = id.get(&w) {
                // Keep multi-kind edges as one edge per kind; Graph::build merges them.
                for bit in [WW, WR, RW, PROCESS, REALTIME] {
                    if k & bit != 0 {
                        edges.push(i as u32, *j, bit);
                    }
                }
            }
        }
    }
    Local {
        nodes: comp.to_vec(),
        g: Graph::build(comp.len(), edges),
    }
}

/// Shortest cycle matching `spec` through some start vertex of `members`.
fn search(l: &Local, spec: &Spec, members: &[bool], deadline: Instant) -> Search {
    let allowed = spec.allowed();
    let anchor = spec.anchor();
    let mut steps = 0usize;
    let mut parent: FxMap<u64, (u64, u8)> = FxMap::default();
    let mut queue: VecDeque<u64> = VecDeque::new();
    let key = |v: u32, s: u8| ((v as u64) << 8) | s as u64;
    if Instant::now() >= deadline {
        return Search::Timeout;
    }
    for start in 0..l.g.n() as u32 {
        if !members[start as usize] {
            continue;
        }
        if anchor != 0
            && !l
                .g
                .out(start)
                .any(|(w, k)| k & anchor != 0 && members[w as usize])
        {
            continue;
        }
        parent.clear();
        queue.clear();
        let root = key(start, 0);
        queue.push_back(root);
        parent.insert(root, (u64::MAX, 0));
        while let Some(cur) = queue.pop_front() {
            steps += 1;
            if steps.is_multiple_of(1024) && Instant::now() >= deadline {
                return Search::Timeout;
            }
            let v = (cur >> 8) as u32;
            let st = (cur & 0xff) as u8;
            let first = cur == root;
            for (w, kinds) in l.g.out(v) {
                if !members[w as usize] {
                    continue;
                }
                for bit in [WW, WR, RW, PROCESS, REALTIME] {
                    if kinds & bit & allowed == 0 || (first && anchor != 0 && bit != anchor) {
                        continue;
                    }
                    let Some(ns) = spec.step(st, bit, first) else {
                        continue;
                    };
                    if w == start {
                        if spec.accepts(ns) {
                            // Rebuild the path back to the root.
                            let mut rev: Vec<(u32, u8)> = vec![(v, bit)];
                            let mut at = cur;
                            while let Some(&(p, k)) = parent.get(&at) {
                                if p == u64::MAX {
                                    break;
                                }
                                rev.push(((p >> 8) as u32, k));
                                at = p;
                            }
                            rev.reverse();
                            return Search::Found(rev);
                        }
                        continue;
                    }
                    let nk = key(w, ns);
                    if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(nk) {
                        e.insert((cur, bit));
                        queue.push_back(nk);
                    }
                }
            }
        }
    }
    Search::None
}

/// Any cycle in a strongly connected local graph (used when the search times out).
fn fallback_cycle(l: &Local) -> Cycle {
    let mut parent: Vec<(u32, u8)> = vec![(NONE, 0); l.g.n()];
    let mut queue = VecDeque::from([0u32]);
    let mut seen = vec![false; l.g.n()];
    seen[0] = true;
    while let Some(v) = queue.pop_front() {
        for (w, kinds) in l.g.out(v) {
            let bit = [WW, WR, RW, PROCESS, REALTIME]
                .into_iter()
                .find(|b| kinds & b != 0)
                .unwrap_or(WW);
            if w == 0 {
                let mut rev = vec![(v, bit)];
                let mut at = v;
                while at != 0 {
                    let (p, k) = parent[at as usize];
                    rev.push((p, k));
                    at = p;
                }
                rev.reverse();
                return rev;
            }
            if !seen[w as usize] {
                seen[w as usize] = true;
                parent[w as usize] = (v, bit);
                queue.push_back(w);
            }
        }
    }
    Vec::new()
}

/// Elle's classification of a cycle from its edge kinds.
fn classify(cycle: &Cycle) -> String {
    let count = |k: u8| cycle.iter().filter(|e| e.1 == k).count();
    let n = cycle.len();
    let adj = (0..n).any(|i| cycle[i].1 == RW && cycle[(i + 1) % n].1 == RW);
    let base = match count(RW) {
        1 => "G-single-item",
        0 if count(WR) > 0 => "G1c",
        0 => "G0",
        _ if adj => "G2-item",
        _ => "G-nonadjacent-item",
    };
    let suffix = if count(REALTIME) > 0 {
        "-realtime"
    } else if count(PROCESS) > 0 {
        "-process"
    } else {
        ""
    };
    format!("{base}{suffix}")
}

/// What the cycle search needs from the workload: a plain-words account of a data edge.
pub(crate) type DataExplainer<'a> = dyn Fn(u32, u32, u8) -> Option<(String, Value)> + 'a;

fn explain_cycle(
    cycle: &Cycle,
    l: &Local,
    namer: &Namer,
    explain: &DataExplainer,
    ty: &str,
) -> Case {
    let n = cycle.len();
    let mut steps = Vec::new();
    let mut texts = Vec::new();
    let mut txns = Vec::new();
    for i in 0..n {
        let (a, kind) = cycle[i];
        let b = cycle[(i + 1) % n].0;
        let (ga, gb) = (l.nodes[a as usize], l.nodes[b as usize]);
        txns.push(ga);
        let (na, nb) = (namer.name(ga), namer.name(gb));
        let (text, data) = match kind {
            PROCESS => (
                format!("{na} and {nb} ran on the same process, {na} first, so {na} process-precedes {nb}"),
                Value::Null,
            ),
            REALTIME => (
                format!("{na} completed before {nb} was invoked, so {na} realtime-precedes {nb}"),
                Value::Null,
            ),
            k => explain(ga, gb, k).unwrap_or_else(|| (format!("{na} {}-precedes {nb}", kind_name(k)), Value::Null)),
        };
        steps.push(json!({"from": namer.index(ga), "to": namer.index(gb), "type": kind_name(kind), "explanation": text, "detail": data}));
        texts.push(text);
    }
    let names: Vec<String> = txns.iter().map(|t| namer.name(*t)).collect();
    Case {
        explanation: format!(
            "{ty} cycle {} -> {}: {}; so each of these transactions must come before itself",
            names.join(" -> "),
            names.first().cloned().unwrap_or_default(),
            texts.join("; ")
        ),
        data: json!({"type": ty, "cycle": txns.iter().map(|t| namer.op_ref(*t)).collect::<Vec<_>>(), "steps": steps}),
        txns,
    }
}

/// Searches every nontrivial component of `g` and records cycle anomalies in `found`.
/// Returns the number of components whose search timed out.
pub(crate) fn find_cycles(
    g: &Graph,
    components: &[Vec<u32>],
    namer: &Namer,
    explain: &DataExplainer,
    found: &mut Found,
    per_scc: std::time::Duration,
    overall_deadline: Option<Instant>,
) -> usize {
    let all_specs = specs();
    let present = g.kinds.iter().fold(0u8, |acc, k| acc | k);
    let mut timeouts = 0;
    for comp in components {
        let l = local(g, comp);
        let mut deadline = Instant::now() + per_scc;
        if let Some(d) = overall_deadline {
            deadline = deadline.min(d);
        }
        // Every class is searched, as Elle does: a component may hold a G0-realtime and a
        // G1c-realtime, and both are named. A class already found (a shorter search for
        // another class can return a cycle of this one) is not searched again.
        let mut found_here: HashSet<String> = HashSet::new();
        let mut searched: Vec<String> = Vec::new();
        let mut timed_out = false;
        for spec in &all_specs {
            if found_here.contains(&spec.name) || (spec.variant != 0 && present & spec.variant == 0)
            {
                continue;
            }
            searched.push(spec.name.clone());
            let allowed = spec.allowed();
            // Cycles of this class lie inside one component of the allowed-kinds subgraph.
            let subs = nontrivial_sccs(&l.g, allowed, None);
            let mut result = Search::None;
            for sub in subs {
                let mut members = vec![false; l.g.n()];
                for v in &sub {
                    members[*v as usize] = true;
                }
                result = search(&l, spec, &members, deadline);
                if !matches!(result, Search::None) {
                    break;
                }
            }
            match result {
                Search::Found(cycle) => {
                    let ty = classify(&cycle);
                    let case = explain_cycle(&cycle, &l, namer, explain, &ty);
                    found.add(&ty, || case);
                    found_here.insert(ty);
                }
                Search::None => {}
                Search::Timeout => {
                    timed_out = true;
                    break;
                }
            }
        }
        if timed_out {
            timeouts += 1;
            let cycle = fallback_cycle(&l);
            let ty = classify(&cycle);
            let size = comp.len();
            let last = searched.last().cloned().unwrap_or_default();
            found.add("cycle-search-timeout", || Case {
                txns: Vec::new(),
                explanation: format!(
                    "the search for a {last} cycle in a component of {size} transactions ran out of time; a fallback cycle is reported instead"
                ),
                data: json!({"anomaly-spec-type": last, "scc-size": size, "searched": searched}),
            });
            if !cycle.is_empty() {
                let case = explain_cycle(&cycle, &l, namer, explain, &ty);
                found.add(&ty, || case);
            }
        }
    }
    timeouts
}
