//! The ring all-reduce straight over shared-memory links, without messages: each round's
//! chunk streams through the link in segments, and a rank reduces from the bytes its
//! predecessor wrote in the link straight into the link bytes for its successor (one pass
//! per segment: read two, write one), where over TCP a chunk is encoded, copied by the
//! kernel twice, decoded and then reduced.
//!
//! The rounds, the chunks and the summation order are those of [`BucketRing`]
//! (reduce-scatter then all-gather, chunk `c`'s sum formed once from rank `c` around the
//! ring, `received + own`, divided at the rank that completes it), so every rank ends
//! with bit-identical averages and [`reference_average`] of each bucket equals them.
//!
//! [`BucketRing`]: crate::core::ring::BucketRing
//! [`reference_average`]: crate::core::ring::reference_average

use super::{LinkError, LinkReader, LinkWriter};
use crate::core::ring::chunk_range;
use std::time::Duration;

/// Largest piece a rank waits for before working on it: big enough that each wake-up
/// moves a lot, small enough that the next rank starts long before the chunk is whole.
const SEGMENT: usize = 64 * 1024;

/// Ring bytes a link needs for buckets of `bucket` f32 among `world` ranks to never
/// deadlock: every rank may write one whole chunk (round 0) before it reads, so each link
/// must hold more than a chunk and a segment.
pub fn link_capacity(bucket: usize, world: usize) -> usize {
    let chunk = 4 * bucket.div_ceil(world.max(1));
    2 * chunk + 2 * SEGMENT
}

fn as_f32(bytes: &[u8]) -> Result<&[f32], LinkError> {
    // SAFETY: every bit pattern is an f32; `align_to` only yields the aligned middle.
    let (head, mid, tail) = unsafe { bytes.align_to::<f32>() };
    if head.is_empty() && tail.is_empty() {
        Ok(mid)
    } else {
        Err(LinkError::Misaligned)
    }
}

fn as_f32_mut(bytes: &mut [u8]) -> Result<&mut [f32], LinkError> {
    // SAFETY: as `as_f32`.
    let (head, mid, tail) = unsafe { bytes.align_to_mut::<f32>() };
    if head.is_empty() && tail.is_empty() {
        Ok(mid)
    } else {
        Err(LinkError::Misaligned)
    }
}

/// One rank's place in a ring of shared-memory links.
pub struct ShmRing {
    /// This rank.
    pub rank: usize,
    /// Ranks in the ring.
    pub world: usize,
    /// The link from the predecessor (`rank - 1`).
    pub from_pred: LinkReader,
    /// The link to the successor (`rank + 1`).
    pub to_succ: LinkWriter,
    /// Bound of every wait: a rank that died or stalls makes its neighbours return
    /// `Timeout`, never hang.
    pub timeout: Duration,
}

impl ShmRing {
    /// All-reduces `buf` in place, bucket by bucket (`bucket` f32 each, the last one
    /// shorter), dividing the sums by `divisor`.
    pub fn allreduce(
        &mut self,
        buf: &mut [f32],
        bucket: usize,
        divisor: usize,
    ) -> Result<(), LinkError> {
        let scale = divisor.max(1) as f32;
        if self.world <= 1 {
            buf.iter_mut().for_each(|v| *v /= scale);
            return Ok(());
        }
        for own in buf.chunks_mut(bucket.max(1)) {
            self.allreduce_bucket(own, scale)?;
        }
        Ok(())
    }

    fn allreduce_bucket(&mut self, own: &mut [f32], scale: f32) -> Result<(), LinkError> {
        let (rank, world, timeout) = (self.rank, self.world, self.timeout);
        let (from_pred, to_succ) = (&mut self.from_pred, &mut self.to_succ);
        let len = own.len();
        let rounds = 2 * (world - 1);
        // Round 0: this rank's own chunk goes out as it is.
        let mut first = &own[chunk_range(len, world, rank)];
        while !first.is_empty() {
            let room = as_f32_mut(to_succ.writable(4 * first.len(), timeout)?)?;
            let n = room.len();
            room.copy_from_slice(&first[..n]);
            to_succ.commit(4 * n)?;
            first = &first[n..];
        }
        for k in 0..rounds {
            // The chunk round k brings (as `BucketRing::recv_chunk`).
            let c = if k < world - 1 {
                (rank + world - 1 - k) % world
            } else {
                (rank + world - (k - (world - 1))) % world
            };
            let send = k + 1 < rounds;
            let mine = &mut own[chunk_range(len, world, c)];
            let mut done = 0;
            while done < mine.len() {
                let rest = mine.len() - done;
                let input =
                    as_f32(from_pred.readable(SEGMENT.min(4 * rest), 4 * rest, timeout)?)?;
                let mut n = input.len();
                let out = if send {
                    let out = as_f32_mut(to_succ.writable(4 * n, timeout)?)?;
                    n = out.len().min(n);
                    &mut out[..n]
                } else {
                    &mut [][..]
                };
                let (input, m) = (&input[..n], &mut mine[done..done + n]);
                if k + 2 < world {
                    // Partial sums: `received + own`, on to the successor; own unchanged.
                    for ((o, r), m) in out.iter_mut().zip(input).zip(m.iter()) {
                        *o = *r + *m;
                    }
                } else if k + 2 == world {
                    // The last addition completes the chunk: average it, keep it, send it.
                    for (r, m) in input.iter().zip(m.iter_mut()) {
                        *m = (*r + *m) / scale;
                    }
                    out.copy_from_slice(m);
                } else {
                    // All-gather: take the average, and pass it on unless this is the end.
                    m.copy_from_slice(input);
                    if send {
                        out.copy_from_slice(input);
                    }
                }
                from_pred.consume(4 * n);
                if send {
                    to_succ.commit(4 * n)?;
                }
                done += n;
            }
        }
        Ok(())
    }
}
