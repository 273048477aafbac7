//! The per-key state behind the session-guarantee checks: which session first read each
//! element, and the two writes-follow-reads detectors (bit sets where a key's elements
//! are few, counting otherwise), which must agree (the oracle tests check both).

use super::view::KeyOps;
use super::FastMap;

/// "No position": an element a session never read.
pub(super) const NONE: usize = usize::MAX;

/// `f[t][i]`: completion position of session `t`'s first read of the key that reflected
/// element `i`. Dense when small, one map per session otherwise.
pub(super) enum FirstSeen {
    Dense { n: usize, f: Vec<usize> },
    Sparse(Vec<FastMap<u32, usize>>),
}

impl FirstSeen {
    pub(super) fn new(sessions: usize, elems: usize) -> FirstSeen {
        if sessions.saturating_mul(elems) <= 1 << 24 {
            FirstSeen::Dense {
                n: elems,
                f: vec![NONE; sessions * elems],
            }
        } else {
            FirstSeen::Sparse(vec![FastMap::default(); sessions])
        }
    }
    #[inline]
    pub(super) fn get(&self, t: usize, i: u32) -> usize {
        match self {
            FirstSeen::Dense { n, f } => f[t * n + i as usize],
            FirstSeen::Sparse(m) => m[t].get(&i).copied().unwrap_or(NONE),
        }
    }
    /// Every first-seen position of session `t`, sorted.
    pub(super) fn sorted(&self, t: usize) -> Vec<usize> {
        let mut v: Vec<usize> = match self {
            FirstSeen::Dense { n, f } => f[t * n..(t + 1) * n]
                .iter()
                .copied()
                .filter(|&p| p != NONE)
                .collect(),
            FirstSeen::Sparse(m) => m[t].values().copied().collect(),
        };
        v.sort_unstable();
        v
    }
    pub(super) fn set_min(&mut self, t: usize, i: u32, pos: usize) {
        match self {
            FirstSeen::Dense { n, f } => {
                let x = &mut f[t * *n + i as usize];
                *x = (*x).min(pos);
            }
            FirstSeen::Sparse(m) => {
                let x = m[t].entry(i).or_insert(NONE);
                *x = (*x).min(pos);
            }
        }
    }
}

/// A session's ok write of the key.
#[derive(Clone, Copy)]
pub(super) struct Write {
    pub(super) elem: u32,
    pub(super) invoke: usize,
    pub(super) complete: usize,
}

/// One read as the writes-follow-reads detectors see it.
pub(super) struct ReadCtx<'a> {
    /// Elements (local ids) in the read's order.
    pub(super) list: &'a [u32],
    /// Each element once.
    pub(super) uniq: &'a [u32],
    /// `present[i]`: the read reflects element `i`.
    pub(super) present: &'a [bool],
    /// Whether the read orders its elements.
    pub(super) ordered: bool,
    /// Sessions with writes in the read.
    pub(super) writers: &'a [usize],
    /// `max_rank[t]`: the rank of the latest write of `t` in the read.
    pub(super) max_rank: &'a [usize],
}

/// A set of local element ids as bits.
#[derive(Clone)]
pub(super) struct Bits(Vec<u64>);

impl Bits {
    pub(super) fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    pub(super) fn set(&mut self, i: u32) {
        self.0[i as usize / 64] |= 1 << (i % 64);
    }
    pub(super) fn clear(&mut self) {
        self.0.iter_mut().for_each(|w| *w = 0);
    }
}

/// The first element of `a` that is in `b` (`want`) or not in `b` (`!want`).
pub(super) fn first_of(a: &[u64], b: &[u64], want: bool) -> Option<u32> {
    a.iter().zip(b).enumerate().find_map(|(k, (x, y))| {
        let m = if want { x & y } else { x & !y };
        (m != 0).then(|| (k * 64) as u32 + m.trailing_zeros())
    })
}

/// Writes-follow-reads by bit sets, when the key's elements are few enough: for each
/// session `t` and its `j`-th ok write, the set of elements `t` had read before invoking
/// it. A read containing that write must contain the whole set, ordered before it.
pub(super) struct FollowSets {
    words: usize,
    /// Per session: one set per ok write, concatenated.
    sets: Vec<Vec<u64>>,
}

/// Bit sets are used while all of a key's follow sets fit in this many 64-bit words.
pub(super) const MAX_FOLLOW_WORDS: usize = 1 << 23;

impl FollowSets {
    pub(super) fn new(
        key: &KeyOps,
        reads: &[(usize, Vec<u32>)],
        writes: &[Vec<Write>],
        n: usize,
        max_words: usize,
    ) -> Option<FollowSets> {
        let words = n.div_ceil(64).max(1);
        let total: usize = writes.iter().map(Vec::len).sum();
        if total.saturating_mul(words) > max_words {
            return None;
        }
        let mut sets: Vec<Vec<u64>> = writes
            .iter()
            .map(|w| Vec::with_capacity(w.len() * words))
            .collect();
        // Each session's reads in completion order, folded into a running union.
        let mut by_session: Vec<Vec<usize>> = vec![Vec::new(); writes.len()];
        for (k, (t, _)) in reads.iter().enumerate() {
            by_session[*t].push(k);
        }
        for (t, ws) in writes.iter().enumerate() {
            let mut mine = by_session[t].clone();
            mine.sort_by_key(|&k| key.reads[k].complete_pos);
            let mut union = Bits::new(n.max(1));
            let mut next = 0;
            for w in ws {
                while next < mine.len() && key.reads[mine[next]].complete_pos < w.invoke {
                    for &i in &reads[mine[next]].1 {
                        union.set(i);
                    }
                    next += 1;
                }
                sets[t].extend_from_slice(&union.0);
            }
        }
        Some(FollowSets { words, sets })
    }

    pub(super) fn set(&self, t: usize, j: usize) -> &[u64] {
        &self.sets[t][j * self.words..(j + 1) * self.words]
    }

    /// (writer session, the write's element, the element it should follow), if violated.
    pub(super) fn violation(
        &self,
        r: &ReadCtx<'_>,
        writer: &[Option<(usize, usize)>],
        in_read: &mut Bits,
    ) -> Option<(usize, u32, u32)> {
        in_read.clear();
        for &i in r.uniq {
            in_read.set(i);
        }
        // The latest write of each writer has the largest follow set.
        for &t in r.writers {
            let j = r.max_rank[t];
            if let Some(missing) = first_of(self.set(t, j), &in_read.0, false) {
                let w2 = r
                    .uniq
                    .iter()
                    .copied()
                    .find(|&i| writer[i as usize] == Some((t, j)))?;
                return Some((t, w2, missing));
            }
        }
        if !r.ordered {
            return None;
        }
        // Backwards: elements after each write must not be in its follow set.
        in_read.clear();
        for &i in r.list.iter().rev() {
            if let Some((t, j)) = writer[i as usize] {
                if let Some(after) = first_of(self.set(t, j), &in_read.0, true) {
                    return Some((t, i, after));
                }
            }
            in_read.set(i);
        }
        None
    }
}

/// Writes-follow-reads by counting, for keys with too many elements for bit sets:
/// `O(elements in the read x writer sessions)` per read.
pub(super) fn wfr_by_counting(
    r: &ReadCtx<'_>,
    writer: &[Option<(usize, usize)>],
    writes: &[Vec<Write>],
    first: &FirstSeen,
    seen_sorted: &[Vec<usize>],
    n: usize,
) -> Option<(usize, u32, u32)> {
    for &t in r.writers {
        // D(w) = what t had read before invoking w grows with w, so t's latest write in
        // the read decides inclusion.
        let w2 = writes[t][r.max_rank[t]];
        let need = seen_sorted[t].partition_point(|&p| p < w2.invoke);
        let have = r
            .uniq
            .iter()
            .filter(|&&i| first.get(t, i) < w2.invoke)
            .count();
        if have < need {
            let missing = (0..n as u32)
                .find(|&i| first.get(t, i) < w2.invoke && !r.present[i as usize])
                .unwrap_or(0);
            return Some((t, w2.elem, missing));
        }
        if r.ordered {
            // Backwards: the earliest first-seen by t among the elements after each write.
            let (mut min_after, mut min_elem) = (NONE, 0);
            for &i in r.list.iter().rev() {
                if let Some((wt, wj)) = writer[i as usize] {
                    if wt == t && min_after < writes[t][wj].invoke {
                        return Some((t, i, min_elem));
                    }
                }
                let f = first.get(t, i);
                if f < min_after {
                    min_after = f;
                    min_elem = i;
                }
            }
        }
    }
    None
}
