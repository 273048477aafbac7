//! The search's big tables, built so that growing them never re-hashes their contents:
//! the index maps a precomputed 64-bit hash to the first item with it, and items with
//! equal hashes are chained. (A std map keyed by the items re-hashes every item, every
//! long model state or memo key, each time it doubles; that was a sixth of a search.)

use super::fxhash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

const END: u32 = u32::MAX;

fn hash_of<T: Hash + ?Sized>(t: &T) -> u64 {
    let mut h = FxHasher::default();
    t.hash(&mut h);
    h.finish()
}

/// Interned values (model states): each distinct value stored once, named by a u32 id.
pub(crate) struct Interner<S> {
    items: Vec<S>,
    /// Next item with the same hash, or END.
    chain: Vec<u32>,
    index: FxHashMap<u64, u32>,
}

impl<S: Hash + Eq> Interner<S> {
    pub fn new() -> Self {
        Interner {
            items: Vec::new(),
            chain: Vec::new(),
            index: FxHashMap::default(),
        }
    }

    /// The id of `value`, and whether it is new.
    pub fn intern(&mut self, value: S) -> (u32, bool) {
        let h = hash_of(&value);
        let first = self.index.get(&h).copied().unwrap_or(END);
        let mut i = first;
        // Bounded by the chain's length: every link points to an earlier item.
        while i != END {
            if self.items[i as usize] == value {
                return (i, false);
            }
            i = self.chain[i as usize];
        }
        let id = self.items.len() as u32;
        self.items.push(value);
        self.chain.push(first);
        self.index.insert(h, id);
        (id, true)
    }

    pub fn get(&self, id: u32) -> &S {
        &self.items[id as usize]
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Table slots, for the memory estimate.
    pub fn capacity(&self) -> usize {
        self.index.capacity()
    }
}

/// A set of variable-length u64 keys (memo entries), stored back to back in one arena.
pub(crate) struct KeySet {
    /// Per key: its length, the next key with the same hash (offset or END), the words.
    arena: Vec<u64>,
    index: FxHashMap<u64, u32>,
}

impl KeySet {
    pub fn new() -> Self {
        KeySet {
            arena: Vec::new(),
            index: FxHashMap::default(),
        }
    }

    fn find(&self, h: u64, key: &[u64]) -> bool {
        let mut at = self.index.get(&h).copied().unwrap_or(END);
        // Bounded by the chain's length: every link points to an earlier key.
        while at != END {
            let a = at as usize;
            let n = self.arena[a] as usize;
            if self.arena[a + 2..a + 2 + n] == *key {
                return true;
            }
            at = self.arena[a + 1] as u32;
        }
        false
    }

    pub fn contains(&self, key: &[u64]) -> bool {
        self.find(hash_of(key), key)
    }

    /// Adds `key`; false if it was already there.
    pub fn insert(&mut self, key: &[u64]) -> bool {
        let h = hash_of(key);
        if self.find(h, key) {
            return false;
        }
        let first = self.index.get(&h).copied().unwrap_or(END);
        let at = self.arena.len() as u32;
        self.arena.push(key.len() as u64);
        self.arena.push(first as u64);
        self.arena.extend_from_slice(key);
        self.index.insert(h, at);
        true
    }

    /// Table slots, for the memory estimate (the arena is counted per key by callers).
    pub fn capacity(&self) -> usize {
        self.index.capacity()
    }
}

/// A set of placed ops as a bitset that knows its first word not all ones and its last
/// word not zero, so a memo key ([`Placed::key`]) costs the window's words, not the part's:
/// scanning the whole bitset for them at every step was quadratic in a key's ops.
pub(crate) struct Placed {
    words: Vec<u64>,
    /// The first word not all ones (always exists: the last word has unused bits).
    lo: usize,
    /// One past the last word not zero (0 when none).
    hi: usize,
}

impl Placed {
    /// An empty set of `n` ops.
    pub fn new(n: usize) -> Self {
        Placed {
            words: vec![0; n / 64 + 1],
            lo: 0,
            hi: 0,
        }
    }

    pub fn set(&mut self, i: usize) {
        let w = i / 64;
        self.words[w] |= 1 << (i % 64);
        self.hi = self.hi.max(w + 1);
        // Bounded by the words: the last one is never all ones.
        while self.lo < self.words.len() - 1 && self.words[self.lo] == u64::MAX {
            self.lo += 1;
        }
    }

    pub fn clear(&mut self, i: usize) {
        let w = i / 64;
        self.words[w] &= !(1 << (i % 64));
        self.lo = self.lo.min(w);
        // Bounded by `hi`; stops at the first word not zero (every word below `lo` is).
        while self.hi > 0 && self.words[self.hi - 1] == 0 {
            self.hi -= 1;
        }
    }

    /// Writes a memo key into `key`: `component`, then `state` with the first word not all
    /// ones (ops long done), then the words from there to the last one not zero (ops not
    /// reached are trimmed). Equal sets give equal keys.
    pub fn key(&self, key: &mut Vec<u64>, component: u32, state: u32) {
        let (lo, hi) = (self.lo, self.hi.max(self.lo));
        key.clear();
        key.push(component as u64);
        key.push(((lo as u64) << 32) | state as u64);
        key.extend_from_slice(&self.words[lo..hi]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interner_gives_equal_values_one_id() {
        let mut t = Interner::new();
        assert_eq!(t.intern("a".to_string()), (0, true));
        assert_eq!(t.intern("b".to_string()), (1, true));
        assert_eq!(t.intern("a".to_string()), (0, false));
        assert_eq!(t.get(1), "b");
        assert_eq!(t.len(), 2);
    }

    /// The key of the incremental bounds equals the one of scanning the whole bitset, over
    /// random sets and clears.
    #[test]
    fn placed_keys_match_a_full_scan() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [1usize, 63, 64, 65, 200, 640] {
            let mut p = Placed::new(n);
            let mut mirror = vec![false; n];
            let (mut got, mut want) = (Vec::new(), Vec::new());
            for step in 0..20_000 {
                let i = rng.gen_range(0..n);
                // Mostly fill from the front, as a search does, with random clears.
                let i = if step % 3 == 0 { i } else { i.min(step % n) };
                if rng.gen_bool(0.6) {
                    p.set(i);
                    mirror[i] = true;
                } else {
                    p.clear(i);
                    mirror[i] = false;
                }
                let mut words = vec![0u64; n / 64 + 1];
                for (j, _) in mirror.iter().enumerate().filter(|(_, &m)| m) {
                    words[j / 64] |= 1 << (j % 64);
                }
                let lo = words
                    .iter()
                    .position(|&w| w != u64::MAX)
                    .unwrap_or(words.len());
                let hi = words
                    .iter()
                    .rposition(|&w| w != 0)
                    .map_or(0, |i| i + 1)
                    .max(lo);
                want.clear();
                want.push(3);
                want.push(((lo as u64) << 32) | 9);
                want.extend_from_slice(&words[lo..hi]);
                p.key(&mut got, 3, 9);
                assert_eq!(got, want, "n {n} step {step}");
            }
        }
    }

    #[test]
    fn key_set_tells_keys_apart() {
        let mut s = KeySet::new();
        assert!(s.insert(&[1, 2, 3]));
        assert!(s.insert(&[1, 2]));
        assert!(!s.insert(&[1, 2, 3]));
        assert!(s.contains(&[1, 2]));
        assert!(!s.contains(&[2, 1]));
        assert!(!s.contains(&[]));
        assert!(s.insert(&[]));
        assert!(s.contains(&[]));
    }
}
