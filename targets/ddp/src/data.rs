//! The seeded synthetic data set and the distributed sampler.
//!
//! Sample `i`'s features are drawn from a ChaCha stream seeded by `(seed, i)`, so any
//! rank (and the reference replay) materializes any sample without storing the set; its
//! label is the arg-max of a fixed random linear "teacher" applied to the features, so
//! the task is learnable and the loss falls.
//!
//! The sampler follows PyTorch's `DistributedSampler` (shuffle, `drop_last=False`):
//! 1. each epoch the indices `0..N` are permuted by a generator seeded with
//!    `seed + epoch`;
//! 2. the permutation is padded to `total = ceil(N / W) * W` by appending its own first
//!    `total - N` indices again (wrapping as often as needed), so every rank gets the
//!    same count `ceil(N / W)`;
//! 3. rank `r` takes positions `r, r + W, r + 2W, ...` of the padded list.
//!
//! Padding repeats samples within an epoch, which exactly-once checking would (rightly)
//! call duplicates, so the worker refuses a data set size that needs padding: it asks
//! for `N` divisible by `W × batch` (every rank gets whole batches and nothing repeats).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The synthetic classification data set.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Number of samples `N`.
    pub size: u64,
    /// Feature width.
    pub width: usize,
    /// Number of classes.
    pub classes: usize,
    seed: u64,
    /// Teacher weights (`width × classes`).
    teacher: Vec<f32>,
}

impl Dataset {
    /// The data set of `size` samples of `width` features and `classes` labels.
    pub fn new(seed: u64, size: u64, width: usize, classes: usize) -> Dataset {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7ea0_c4e5);
        let teacher = (0..width * classes)
            .map(|_| rng.gen_range(-1.0f32..1.0))
            .collect();
        Dataset {
            size,
            width,
            classes,
            seed,
            teacher,
        }
    }

    /// Appends sample `id`'s features to `x` and returns its label.
    pub fn sample(&self, id: u64, x: &mut Vec<f32>) -> u32 {
        let mut rng = ChaCha8Rng::seed_from_u64(
            self.seed
                .wrapping_add(id.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        );
        let start = x.len();
        x.extend((0..self.width).map(|_| rng.gen_range(-1.0f32..1.0)));
        let feats = &x[start..];
        let mut best = (0u32, f32::NEG_INFINITY);
        for c in 0..self.classes {
            let score: f32 = feats
                .iter()
                .enumerate()
                .map(|(i, f)| f * self.teacher[i * self.classes + c])
                .sum();
            if score > best.1 {
                best = (c as u32, score);
            }
        }
        best.0
    }

    /// Features (`ids.len() × width`) and labels of a batch.
    pub fn batch(&self, ids: &[u64]) -> (Vec<f32>, Vec<u32>) {
        let mut x = Vec::with_capacity(ids.len() * self.width);
        let labels = ids.iter().map(|&id| self.sample(id, &mut x)).collect();
        (x, labels)
    }
}

/// The permutation of `0..size` for `epoch` (seeded by `seed + epoch`).
pub fn permutation(seed: u64, size: u64, epoch: u64) -> Vec<u64> {
    let mut perm: Vec<u64> = (0..size).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(epoch));
    // Fisher-Yates.
    for i in (1..perm.len()).rev() {
        let j = rng.gen_range(0..=i);
        perm.swap(i, j);
    }
    perm
}

/// Rank `rank`'s indices for `epoch`, as PyTorch's `DistributedSampler` (see the module
/// docs). `world` must be at least 1.
pub fn shard(seed: u64, size: u64, world: u64, rank: u64, epoch: u64) -> Vec<u64> {
    let world = world.max(1);
    let perm = permutation(seed, size, epoch);
    let per_rank = size.div_ceil(world);
    let total = per_rank * world;
    let mut padded = perm.clone();
    while (padded.len() as u64) < total && !perm.is_empty() {
        let need = (total as usize - padded.len()).min(perm.len());
        padded.extend_from_slice(&perm[..need]);
    }
    padded
        .into_iter()
        .skip(rank as usize)
        .step_by(world as usize)
        .collect()
}

/// Where a global step falls: `(epoch, index of the batch within the epoch)`. Steps are
/// numbered from 1.
pub fn position(step: u64, steps_per_epoch: u64) -> (u64, u64) {
    let s = step.saturating_sub(1);
    let spe = steps_per_epoch.max(1);
    (s / spe, s % spe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn shards_cover_every_index_once_when_divisible() {
        for epoch in 0..3 {
            let mut seen = BTreeMap::new();
            for r in 0..4 {
                for i in shard(7, 40, 4, r, epoch) {
                    *seen.entry(i).or_insert(0) += 1;
                }
            }
            assert_eq!(seen.len(), 40);
            assert!(seen.values().all(|&c| c == 1));
        }
        assert_ne!(
            shard(7, 40, 4, 0, 0),
            shard(7, 40, 4, 0, 1),
            "reshuffled per epoch"
        );
    }

    /// PyTorch's padding: 10 samples over 4 ranks -> 12 slots, the first 2 of the
    /// permutation repeated, 3 per rank.
    #[test]
    fn pads_like_distributed_sampler() {
        let shards: Vec<Vec<u64>> = (0..4).map(|r| shard(1, 10, 4, r, 0)).collect();
        assert!(shards.iter().all(|s| s.len() == 3));
        let mut counts = BTreeMap::new();
        for s in &shards {
            for i in s {
                *counts.entry(*i).or_insert(0) += 1;
            }
        }
        assert_eq!(counts.len(), 10);
        assert_eq!(counts.values().filter(|&&c| c == 2).count(), 2);
        // The repeated ones are the permutation's first two, at slots 10 and 11.
        // Slot 10 is perm[0] (rank 0's first), slot 11 perm[1] (rank 1's first).
        assert_eq!(shards[2][2], shards[0][0]);
        assert_eq!(shards[3][2], shards[1][0]);
    }

    #[test]
    fn samples_are_deterministic_and_labels_vary() {
        let d = Dataset::new(3, 100, 8, 4);
        let (x1, y1) = d.batch(&[1, 2, 3]);
        let (x2, y2) = d.batch(&[1, 2, 3]);
        assert_eq!((x1, y1), (x2, y2));
        let (_, ys) = d.batch(&(0..100).collect::<Vec<_>>());
        let distinct: std::collections::BTreeSet<_> = ys.into_iter().collect();
        assert!(distinct.len() >= 3);
        assert_eq!(position(1, 5), (0, 0));
        assert_eq!(position(6, 5), (1, 0));
    }
}
