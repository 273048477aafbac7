//! Ring all-reduce of one gradient bucket at one rank (sans-IO).
//!
//! The bucket is cut into `W` chunks. Reduce-scatter: in round `k` (`0..W-1`) rank `r`
//! sends chunk `(r - k) mod W` to rank `r + 1` and receives chunk `(r - k - 1) mod W`
//! from rank `r - 1`, which it adds to its own copy as `received + own`. After `W - 1`
//! rounds rank `r` holds the whole sum of chunk `(r + 1) mod W`, divides it by `W` and
//! all-gathers: in rounds `W-1 .. 2W-2` each rank forwards the averaged chunk it last
//! received. Every chunk's sum is formed once, in the fixed order
//! `((g_c + g_{c+1}) + g_{c+2}) + ...` around the ring starting at rank `c`, then copied, so
//! every rank ends with bit-identical averages; [`reference_average`] forms the same sums
//! in one process.
//!
//! The `unordered-reduce` bug replaces this by passing raw buckets around the ring and
//! letting every rank add them to its own in arrival order (own first), so each rank sums
//! in a different order and the floating-point results drift apart.

use std::collections::BTreeMap;
use std::ops::Range;

/// How the bucket is reduced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceMode {
    /// Reduce-scatter then all-gather, fixed summation order (correct).
    Ring,
    /// Raw buckets passed around, summed in arrival order (the `unordered-reduce` bug).
    ArrivalOrder,
}

/// Chunk `c` of a bucket of `len` elements cut into `world` chunks.
pub fn chunk_range(len: usize, world: usize, c: usize) -> Range<usize> {
    let w = world.max(1);
    (c * len / w)..((c + 1) * len / w)
}

/// The all-reduce state of one bucket at one rank.
#[derive(Debug, Clone)]
pub struct BucketRing {
    rank: usize,
    world: usize,
    len: usize,
    mode: ReduceMode,
    /// What the sum is divided by (the world size, unless a bug says otherwise).
    divisor: usize,
    acc: Option<Vec<f32>>,
    /// Messages from the predecessor that arrived early, by round.
    pending: BTreeMap<u32, Vec<f32>>,
    next_round: u32,
    done: bool,
}

/// A message for the successor: `(round, data)`.
pub type RingSend = (u32, Vec<f32>);

impl BucketRing {
    /// A ring for a bucket of `len` elements at `rank` of `world`.
    pub fn new(rank: usize, world: usize, len: usize, mode: ReduceMode) -> BucketRing {
        BucketRing {
            rank,
            world: world.max(1),
            len,
            mode,
            divisor: world.max(1),
            acc: None,
            pending: BTreeMap::new(),
            next_round: 0,
            done: false,
        }
    }

    /// Divides the sum by `divisor` instead of the world size (the
    /// `shrink-without-rescale` bug passes the full world size after a shrink).
    pub fn with_divisor(mut self, divisor: usize) -> BucketRing {
        self.divisor = divisor.max(1);
        self
    }

    fn rounds(&self) -> u32 {
        let w = self.world as u32;
        match self.mode {
            ReduceMode::Ring => 2 * (w - 1),
            ReduceMode::ArrivalOrder => w - 1,
        }
    }

    /// True once the local gradient was given.
    pub fn has_local(&self) -> bool {
        self.acc.is_some()
    }

    /// The averaged bucket, once every round is done.
    pub fn result(&self) -> Option<&[f32]> {
        if self.done {
            self.acc.as_deref()
        } else {
            None
        }
    }

    /// Gives this rank's gradient for the bucket; returns what to send to the successor.
    /// Ignored if already given or of the wrong length.
    pub fn set_local(&mut self, grad: Vec<f32>) -> Vec<RingSend> {
        if self.acc.is_some() || grad.len() != self.len {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.world == 1 {
            let scale = self.divisor as f32;
            self.acc = Some(grad.into_iter().map(|g| g / scale).collect());
            self.done = true;
            return out;
        }
        let first = match self.mode {
            ReduceMode::Ring => grad[chunk_range(self.len, self.world, self.rank)].to_vec(),
            ReduceMode::ArrivalOrder => grad.clone(),
        };
        out.push((0, first));
        self.acc = Some(grad);
        self.drain(&mut out);
        out
    }

    /// A message of `round` from the predecessor; returns what to send on. Messages of
    /// the wrong length, past rounds or after completion are ignored.
    pub fn receive(&mut self, round: u32, data: Vec<f32>) -> Vec<RingSend> {
        let mut out = Vec::new();
        if self.done || round < self.next_round || round >= self.rounds() {
            return out;
        }
        if data.len() != self.expected_len(round) {
            return out;
        }
        self.pending.insert(round, data);
        self.drain(&mut out);
        out
    }

    /// The chunk a message of `round` carries at this (receiving) rank.
    fn recv_chunk(&self, round: u32) -> usize {
        let w = self.world as i64;
        let k = round as i64;
        let c = match self.mode {
            ReduceMode::Ring if k < w - 1 => self.rank as i64 - k - 1,
            ReduceMode::Ring => self.rank as i64 - (k - (w - 1)),
            ReduceMode::ArrivalOrder => 0,
        };
        c.rem_euclid(w) as usize
    }

    fn expected_len(&self, round: u32) -> usize {
        match self.mode {
            ReduceMode::Ring => chunk_range(self.len, self.world, self.recv_chunk(round)).len(),
            ReduceMode::ArrivalOrder => self.len,
        }
    }

    fn drain(&mut self, out: &mut Vec<RingSend>) {
        let w = self.world as u32;
        let scale = self.divisor as f32;
        let rounds = self.rounds();
        while !self.done {
            if self.acc.is_none() {
                return;
            }
            let Some(data) = self.pending.remove(&self.next_round) else {
                return;
            };
            let k = self.next_round;
            let c = chunk_range(self.len, self.world, self.recv_chunk(k));
            let Some(acc) = self.acc.as_mut() else { return };
            match self.mode {
                ReduceMode::Ring => {
                    let mine = &mut acc[c];
                    // The received buffer is reused as the outgoing one: no allocation or
                    // extra copy per round. `r + m` is bit-identical to `m + r` (IEEE
                    // addition commutes), so the summation order is unchanged.
                    let mut data = data;
                    if k < w - 2 {
                        for (r, m) in data.iter_mut().zip(mine.iter()) {
                            *r += *m;
                        }
                    } else if k == w - 2 {
                        for (r, m) in data.iter_mut().zip(mine.iter_mut()) {
                            *r = (*r + *m) / scale;
                            *m = *r;
                        }
                    } else {
                        mine.copy_from_slice(&data);
                    }
                    if k + 1 < rounds {
                        out.push((k + 1, data));
                    }
                }
                ReduceMode::ArrivalOrder => {
                    for (m, r) in acc.iter_mut().zip(&data) {
                        *m += *r;
                    }
                    if k + 1 < rounds {
                        out.push((k + 1, data));
                    } else {
                        for m in acc.iter_mut() {
                            *m /= scale;
                        }
                    }
                }
            }
            self.next_round += 1;
            if self.next_round == rounds {
                self.done = true;
            }
        }
    }
}

/// The average the ring forms, computed in one process from every rank's gradient of one
/// bucket (`grads[r]`), in the same order, so bit-identical to a correct ring.
pub fn reference_average(grads: &[&[f32]]) -> Vec<f32> {
    let world = grads.len().max(1);
    let len = grads.first().map(|g| g.len()).unwrap_or(0);
    let mut out = vec![0.0f32; len];
    for c in 0..world {
        for e in chunk_range(len, world, c) {
            let mut sum = grads[c][e];
            for i in 1..world {
                sum += grads[(c + i) % world][e];
            }
            out[e] = sum / world as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Runs one bucket's ring among `world` ranks, delivering each rank's messages to its
    /// successor in a seeded random interleaving (local gradients also arrive at random
    /// times). Returns every rank's result.
    fn run(
        world: usize,
        len: usize,
        mode: ReduceMode,
        seed: u64,
    ) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let grads: Vec<Vec<f32>> = (0..world)
            .map(|_| {
                (0..len)
                    .map(|_| rng.gen_range(-1.0f32..1.0) * 1e3)
                    .collect()
            })
            .collect();
        let mut rings: Vec<BucketRing> = (0..world)
            .map(|r| BucketRing::new(r, world, len, mode))
            .collect();
        // In-flight messages: (to, round, data).
        let mut flight: Vec<(usize, u32, Vec<f32>)> = Vec::new();
        let mut unstarted: Vec<usize> = (0..world).collect();
        while !unstarted.is_empty() || !flight.is_empty() {
            let start = !unstarted.is_empty() && (flight.is_empty() || rng.gen_bool(0.3));
            let (from, sends) = if start {
                let r = unstarted.swap_remove(rng.gen_range(0..unstarted.len()));
                (r, rings[r].set_local(grads[r].clone()))
            } else {
                let (to, round, data) = flight.swap_remove(rng.gen_range(0..flight.len()));
                (to, rings[to].receive(round, data))
            };
            for (round, data) in sends {
                flight.push(((from + 1) % world, round, data));
            }
        }
        let results = rings
            .iter()
            .map(|r| r.result().expect("ring finished").to_vec())
            .collect();
        (grads, results)
    }

    /// Every rank ends with bit-identical averages equal to the one-process reference.
    #[test]
    fn ring_is_bit_identical_across_ranks_and_matches_the_reference() {
        for world in 1..=5 {
            for len in [1, 3, 17, 100] {
                let (grads, results) =
                    run(world, len, ReduceMode::Ring, world as u64 * 31 + len as u64);
                let refs: Vec<&[f32]> = grads.iter().map(|g| g.as_slice()).collect();
                let want = reference_average(&refs);
                for r in &results {
                    let bits: Vec<u32> = r.iter().map(|v| v.to_bits()).collect();
                    let want_bits: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(bits, want_bits, "world {world} len {len}");
                }
            }
        }
    }

    /// Arrival-order summation (the bug) gives close but not identical results.
    #[test]
    fn arrival_order_drifts_apart() {
        let (grads, results) = run(4, 1000, ReduceMode::ArrivalOrder, 5);
        let refs: Vec<&[f32]> = grads.iter().map(|g| g.as_slice()).collect();
        let want = reference_average(&refs);
        for r in &results {
            for (a, b) in r.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0));
            }
        }
        assert!(
            results.iter().any(|r| r != &results[0]),
            "some rank differs in some bit"
        );
    }
}
