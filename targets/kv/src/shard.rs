//! Keys to shards, shards to replicas.

use crate::core::NodeId;
use splitbrain_target_runtime::fnv1a64;

/// Which shards exist and which nodes replicate each.
#[derive(Clone, Debug)]
pub struct ShardMap {
    nodes: u64,
    shards: u32,
}

impl ShardMap {
    /// `nodes` nodes with ids `1..=nodes`, `shards` shards (both at least 1).
    pub fn new(nodes: u64, shards: u32) -> Self {
        ShardMap {
            nodes: nodes.max(1),
            shards: shards.max(1),
        }
    }

    /// Number of shards.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The shard of a key: FNV-1a 64 of its UTF-8 bytes, mod the shard count.
    pub fn shard_of(&self, key: &str) -> u32 {
        (fnv1a64(key.as_bytes()) % u64::from(self.shards)) as u32
    }

    /// The replicas of shard `s`, ascending: all nodes when there are at most 3, else the
    /// three nodes `s, s+1, s+2` (mod N, 1-based), so replicas and leaders spread.
    pub fn replicas(&self, shard: u32) -> Vec<NodeId> {
        if self.nodes <= 3 {
            return (1..=self.nodes).collect();
        }
        let mut ids: Vec<NodeId> = (0..3)
            .map(|k| (u64::from(shard) + k) % self.nodes + 1)
            .collect();
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_replicas() {
        let map = ShardMap::new(5, 4);
        assert_eq!(map.replicas(0), vec![1, 2, 3]);
        assert_eq!(map.replicas(3), vec![1, 4, 5]);
        assert_eq!(ShardMap::new(3, 2).replicas(1), vec![1, 2, 3]);
        assert!(map.shard_of("k1") < 4);
    }
}
