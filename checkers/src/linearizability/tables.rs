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
