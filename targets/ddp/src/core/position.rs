//! The sampler's position in an epoch, and how one step's global batch is cut from it.
//!
//! Each epoch has one permutation of the data set (see [`crate::data`]). The position is
//! `(epoch, offset)`: the first `offset` entries of the epoch's permutation are consumed.
//! A step of a group of `n` members with micro-batch `b` takes the next
//! `take = min(n·b, N − offset)` entries, and the member at index `i` of the group takes
//! entries `offset + i, offset + i + n, …` below `offset + take` — exactly PyTorch's
//! `DistributedSampler` (rank `i` of `n` takes every `n`-th index) applied to the
//! samples the epoch has left. When the group changes size the rest of the epoch is
//! re-split over the new group by the same rule, so every sample is still consumed once
//! per epoch; the epoch's last step may be shorter than `n·b` (no padding, no repeats).

use serde::{Deserialize, Serialize};

/// Where the sampler stands: the next unconsumed entry of an epoch's permutation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DataPos {
    /// Epoch (from 0).
    pub epoch: u64,
    /// Entries of the epoch's permutation already consumed.
    pub offset: u64,
}

/// One member's share of one step's global batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// Epoch the step belongs to.
    pub epoch: u64,
    /// First permutation entry of the step's global batch.
    pub start: u64,
    /// Entries in the global batch.
    pub take: u64,
    /// Group size (the stride).
    pub world: u64,
    /// The member's index in the group.
    pub index: u64,
}

impl Slice {
    /// The permutation positions this member consumes.
    pub fn positions(&self) -> impl Iterator<Item = u64> {
        let end = self.start + self.take;
        (self.start + self.index..end).step_by(self.world.max(1) as usize)
    }
}

impl DataPos {
    /// The global batch of a step taken from here by `world` members of batch `batch`
    /// over a data set of `size` samples, and the position after it.
    pub fn step(self, world: u64, batch: u64, size: u64) -> (u64, DataPos) {
        let take = (world.max(1) * batch.max(1)).min(size.saturating_sub(self.offset));
        let next = if self.offset + take >= size {
            DataPos {
                epoch: self.epoch + 1,
                offset: 0,
            }
        } else {
            DataPos {
                epoch: self.epoch,
                offset: self.offset + take,
            }
        };
        (take, next)
    }

    /// Member `index`'s slice of the step taken from here.
    pub fn slice(self, world: u64, index: u64, batch: u64, size: u64) -> Slice {
        let (take, _) = self.step(world, batch, size);
        Slice {
            epoch: self.epoch,
            start: self.offset,
            take,
            world: world.max(1),
            index,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::collections::BTreeMap;

    /// Exactly-once across group changes: whatever sequence of group sizes the steps
    /// run with, every position of every finished epoch is consumed by exactly one member
    /// of exactly one step (the re-split rule of the module docs).
    #[test]
    fn resplit_consumes_every_position_once_per_epoch() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        for _ in 0..200 {
            let (size, batch) = (rng.gen_range(1..200u64), rng.gen_range(1..9u64));
            let mut pos = DataPos::default();
            let mut used: BTreeMap<(u64, u64), u32> = BTreeMap::new();
            let mut world = rng.gen_range(1..5u64);
            while pos.epoch < 3 {
                if rng.gen_bool(0.2) {
                    world = rng.gen_range(1..5u64);
                }
                for i in 0..world {
                    for p in pos.slice(world, i, batch, size).positions() {
                        *used.entry((pos.epoch, p)).or_default() += 1;
                    }
                }
                pos = pos.step(world, batch, size).1;
            }
            for e in 0..3 {
                for p in 0..size {
                    assert_eq!(used.get(&(e, p)), Some(&1), "epoch {e} position {p}");
                }
            }
            assert_eq!(used.len() as u64, 3 * size, "nothing outside 0..size");
        }
    }

    /// A full group on a data set divisible by `world × batch` takes whole batches: the
    /// same split as `DistributedSampler` on the whole epoch.
    #[test]
    fn a_full_group_gets_whole_batches() {
        let pos = DataPos {
            epoch: 0,
            offset: 8,
        };
        let s = pos.slice(4, 1, 2, 32);
        assert_eq!(s.positions().collect::<Vec<_>>(), vec![9, 13]);
        assert_eq!(
            pos.step(4, 2, 32).1,
            DataPos {
                epoch: 0,
                offset: 16
            }
        );
        // A group of 3 over the 8 that are left of 32: a short last step.
        let tail = DataPos {
            epoch: 0,
            offset: 24,
        };
        assert_eq!(
            tail.step(3, 2, 32),
            (
                6,
                DataPos {
                    epoch: 0,
                    offset: 30
                }
            )
        );
        assert_eq!(
            DataPos {
                epoch: 0,
                offset: 30
            }
            .step(3, 2, 32),
            (
                2,
                DataPos {
                    epoch: 1,
                    offset: 0
                }
            )
        );
    }
}
