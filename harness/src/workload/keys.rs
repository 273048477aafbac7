//! Key rotation: each key gets a bounded number of operations, then a fresh key replaces
//! it, so every per-key history stays small enough to check exhaustively.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// A pool of active keys with per-key op budgets.
#[derive(Debug, Clone)]
pub struct KeyRotation {
    active: Vec<(u64, usize)>,
    next_key: u64,
    ops_per_key: usize,
}

impl KeyRotation {
    /// `active` keys at once, each retired after `ops_per_key` ops.
    pub fn new(active: usize, ops_per_key: usize) -> KeyRotation {
        let active = active.max(1);
        KeyRotation {
            active: (0..active as u64).map(|k| (k, 0)).collect(),
            next_key: active as u64,
            ops_per_key: ops_per_key.max(1),
        }
    }

    /// Picks a random active key, charging one op to it, and returns its number.
    pub fn pick(&mut self, rng: &mut ChaCha8Rng) -> u64 {
        let slot = rng.gen_range(0..self.active.len());
        let (key, used) = &mut self.active[slot];
        let chosen = *key;
        *used += 1;
        if *used >= self.ops_per_key {
            self.active[slot] = (self.next_key, 0);
            self.next_key += 1;
        }
        chosen
    }

    /// The keys currently active (for final reads).
    pub fn active_keys(&self) -> Vec<u64> {
        self.active.iter().map(|(k, _)| *k).collect()
    }

    /// The JSON key for key number `k` (`"k7"`).
    pub fn key_value(k: u64) -> Value {
        Value::String(format!("k{k}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn every_key_gets_at_most_its_budget() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut keys = KeyRotation::new(3, 5);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..1000 {
            *counts.entry(keys.pick(&mut rng)).or_insert(0) += 1;
        }
        assert!(counts.values().all(|&c| c <= 5));
        assert!(counts.len() >= 1000 / 5);
        assert_eq!(keys.active_keys().len(), 3);
    }
}
