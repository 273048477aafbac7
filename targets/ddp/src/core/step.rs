//! One training step at one rank: the local gradient's buckets into the ring, the
//! averaged buckets out of it, and the SGD update (see the module docs of `core`).

use super::ring::{self, BucketRing, ReduceMode};
use super::{Chunk, CkptId, Core, Msg, Output, Phase, Rank};

impl Core {
    pub(super) fn start_step(&mut self, step: u64, now: i64) {
        self.step = step;
        if self.cfg.max_step.is_some_and(|m| step > m) {
            self.step = step - 1;
            self.phase = Phase::Finished;
            return;
        }
        self.phase = Phase::Training;
        self.resolved.iter_mut().for_each(|r| *r = false);
        self.local_at.iter_mut().for_each(|r| *r = None);
        self.avg.iter_mut().for_each(|a| *a = 0.0);
        let keep_from = if self.cfg.bugs.stale_bucket_ms.is_some() {
            step.saturating_sub(2)
        } else {
            step
        };
        self.rings.retain(|(s, _), _| *s >= keep_from);
        self.last_progress = now;
        let n = self.members.len() as u64;
        let slice = self.pos.slice(
            n,
            self.index() as u64,
            self.cfg.batch,
            self.cfg.dataset_size,
        );
        self.outputs.push(Output::Compute { step, slice });
        // Messages that arrived before we got here may already complete buckets.
        for b in 0..self.cfg.buckets.len() {
            self.check_bucket(step, b as u32, now);
        }
    }

    pub(super) fn ring_mode(&self) -> ReduceMode {
        if self.cfg.bugs.unordered_reduce {
            ReduceMode::ArrivalOrder
        } else {
            ReduceMode::Ring
        }
    }

    pub(super) fn ring(&mut self, step: u64, bucket: u32) -> Option<&mut BucketRing> {
        let len = self.cfg.buckets.get(bucket as usize)?.len();
        let (index, n, mode) = (self.index(), self.members.len(), self.ring_mode());
        let divisor = self.divisor();
        Some(
            self.rings
                .entry((step, bucket))
                .or_insert_with(|| BucketRing::new(index, n, len, mode).with_divisor(divisor)),
        )
    }

    /// What the summed gradient is divided by: the members (the `shrink-without-rescale`
    /// bug keeps dividing by the full world size after a shrink).
    pub fn divisor(&self) -> usize {
        if self.cfg.bugs.shrink_without_rescale {
            self.cfg.world
        } else {
            self.members.len()
        }
    }

    /// Whether the driver may all-reduce this rank's buckets itself (the shared-memory
    /// group) and hand the averages to [`Core::reduced_bucket`]: not under the bugs that
    /// live in the ring's messages (arrival-order sums, giving up on a late bucket).
    pub fn direct_reduce_allowed(&self) -> bool {
        self.ring_mode() == ReduceMode::Ring && self.cfg.bugs.stale_bucket_ms.is_none()
    }

    /// The average of bucket `bucket` for `step`, all-reduced outside the core (in the
    /// ring's summation order), as pieces `(offset in the bucket, values)` covering it;
    /// `local` is this rank's gradient of the bucket. Ignored unless that step is in
    /// progress. Completes the step once every bucket is in, as the ring's result does.
    pub fn reduced_bucket<'a>(
        &mut self,
        step: u64,
        bucket: u32,
        local: &[f32],
        pieces: impl IntoIterator<Item = (usize, &'a [f32])>,
        now: i64,
    ) {
        if self.phase != Phase::Training || step != self.step {
            return;
        }
        let b = bucket as usize;
        let Some(range) = self.cfg.buckets.get(b).cloned() else {
            return;
        };
        if local.len() != range.len() || self.resolved.get(b).copied().unwrap_or(true) {
            return;
        }
        if self.cfg.bugs.skip_allreduce {
            self.local[range.clone()].copy_from_slice(local);
        }
        let avg = &mut self.avg[range];
        for (at, v) in pieces {
            if let Some(dst) = avg.get_mut(at..at + v.len()) {
                dst.copy_from_slice(v);
            }
        }
        self.last_progress = now;
        self.resolve(b, now);
    }

    /// Bucket `b` of the step has its average; the step is applied once all have.
    fn resolve(&mut self, b: usize, now: i64) {
        self.resolved[b] = true;
        if self.resolved.iter().all(|r| *r) {
            self.apply(now);
        }
    }

    pub(super) fn send_ring(&mut self, step: u64, bucket: u32, sends: Vec<ring::RingSend>) {
        let to = self.successor();
        for (round, data) in sends {
            let chunk = Chunk {
                gen: self.gen,
                step,
                bucket,
                round,
                data,
            };
            self.send(to, Msg::Chunk(chunk));
        }
    }

    /// The local gradient of bucket `bucket` for `step` (ignored unless that step is in
    /// progress).
    pub fn local_bucket(&mut self, step: u64, bucket: u32, grad: &[f32], now: i64) {
        if self.phase != Phase::Training || step != self.step {
            return;
        }
        let Some(range) = self.cfg.buckets.get(bucket as usize).cloned() else {
            return;
        };
        if grad.len() != range.len() {
            return;
        }
        if self.cfg.bugs.skip_allreduce {
            self.local[range].copy_from_slice(grad);
        }
        if let Some(at) = self.local_at.get_mut(bucket as usize) {
            at.get_or_insert(now);
        }
        let sends = match self.ring(step, bucket) {
            Some(r) => r.set_local(grad.to_vec()),
            None => return,
        };
        self.send_ring(step, bucket, sends);
        self.check_bucket(step, bucket, now);
    }

    pub(super) fn check_bucket(&mut self, step: u64, bucket: u32, now: i64) {
        if self.phase != Phase::Training || step != self.step {
            return;
        }
        let b = bucket as usize;
        if self.resolved.get(b).copied().unwrap_or(true) {
            return;
        }
        let Some(range) = self.cfg.buckets.get(b).cloned() else {
            return;
        };
        let result = self
            .rings
            .get(&(step, bucket))
            .and_then(|r| r.result().map(<[f32]>::to_vec));
        match result {
            Some(avg) => self.avg[range].copy_from_slice(&avg),
            None => {
                // Only the last rank gives up waiting, so it alone applies an old result.
                let last_rank = self.index() + 1 == self.members.len();
                let stale = match (self.cfg.bugs.stale_bucket_ms, self.local_at[b]) {
                    (Some(limit), Some(at)) => last_rank && now - at > limit && step > 1,
                    _ => false,
                };
                if !stale {
                    return;
                }
                let prev = self.prev_avg[range.clone()].to_vec();
                self.avg[range].copy_from_slice(&prev);
            }
        }
        self.resolve(b, now);
    }

    /// SGD with momentum: `v = μ v + g; p -= lr v`. Shared with the reference replay.
    pub fn sgd(params: &mut [f32], momentum: &mut [f32], grad: &[f32], lr: f32, mu: f32) {
        for ((p, v), g) in params.iter_mut().zip(momentum.iter_mut()).zip(grad) {
            *v = mu * *v + *g;
            *p -= lr * *v;
        }
    }

    pub(super) fn apply(&mut self, now: i64) {
        let step = self.step;
        let skip = self.cfg.bugs.skip_allreduce && self.cfg.rank == 1 && step.is_multiple_of(5);
        let grad = if skip { &self.local } else { &self.avg };
        Core::sgd(
            &mut self.params,
            &mut self.momentum,
            grad,
            self.cfg.lr,
            self.cfg.momentum,
        );
        std::mem::swap(&mut self.prev_avg, &mut self.avg);
        let n = self.members.len() as u64;
        self.pos = self.pos.step(n, self.cfg.batch, self.cfg.dataset_size).1;
        self.outputs.push(Output::StepDone { step });
        if step.is_multiple_of(self.cfg.ckpt_every.max(1)) {
            self.outputs.push(Output::SaveCheckpoint(CkptId {
                step,
                gen: self.gen,
            }));
        }
        self.start_step(step + 1, now);
    }

    pub(super) fn on_chunk(&mut self, from: Rank, chunk: Chunk, now: i64) {
        if chunk.gen != self.gen || self.phase == Phase::Rendezvous {
            return;
        }
        if from != self.predecessor() || !self.members.contains(&from) {
            return;
        }
        let oldest = match self.phase {
            Phase::Training if self.cfg.bugs.stale_bucket_ms.is_some() => {
                self.step.saturating_sub(2)
            }
            Phase::Training => self.step,
            _ => self.step + 1,
        };
        if chunk.step < oldest.max(1) || chunk.step > self.step + 1 {
            return;
        }
        self.last_progress = now;
        let (step, bucket) = (chunk.step, chunk.bucket);
        let sends = match self.ring(step, bucket) {
            Some(r) => r.receive(chunk.round, chunk.data),
            None => return,
        };
        self.send_ring(step, bucket, sends);
        self.check_bucket(step, bucket, now);
    }
}
