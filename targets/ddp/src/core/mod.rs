//! The rank's protocol as a sans-IO state machine: rendezvous (group formation), the
//! per-step bucketed ring all-reduce, the optimizer step, checkpoints and step commit.
//!
//! The driver (`node.rs`, or the simulation in the tests) feeds it messages, local
//! gradient buckets, finished checkpoints and clock ticks, and carries out its
//! [`Output`]s. It computes nothing but sums and the SGD update, and does no I/O.
//!
//! **Rendezvous** (as torchrun's): every group has a generation number. A rank that sees a
//! failure — no progress for `step_timeout_ms` (a dead, stalled or cut-off peer), or a
//! peer announcing itself from an older generation (it restarted) — aborts the step and
//! announces generation `gen + 1` with the list of checkpoints it holds durably. A rank
//! hearing of a newer generation aborts and joins it. When a rank holds the announcements
//! of all `W` ranks for its generation it resumes from the newest checkpoint (step and
//! generation that wrote it) that every rank announced, or from scratch (rank 0 then
//! broadcasts its initial parameters) if there is none. Each rank announces the same
//! list every time for one generation, so all ranks choose the same resume point.
//!
//! **Commit**: a step is committed once the checkpoint covering it is durable on every
//! rank: when a rank has `Saved` from all `W` ranks of its generation, or when a
//! rendezvous resumes from that checkpoint. Checkpoints older than the last committed
//! one are forgotten, never the committed one itself, so the resume point of every later
//! rendezvous is at or after every step any rank committed: a committed step is never
//! rolled back, and every rank eventually commits the same steps with the same records.

mod rendezvous;
pub mod ring;

use ring::{BucketRing, ReduceMode};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// A rank, `0..W`.
pub type Rank = usize;

/// Bucket number used by the initial-parameter broadcast.
pub const INIT_BUCKET: u32 = u32::MAX;

/// A checkpoint's identity: the step it holds and the generation that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CkptId {
    /// Last step applied in it.
    pub step: u64,
    /// Generation of the group that wrote it.
    pub gen: u64,
}

/// One all-reduce (or broadcast) message to the ring successor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Group generation.
    pub gen: u64,
    /// Training step.
    pub step: u64,
    /// Bucket number ([`INIT_BUCKET`] for the parameter broadcast).
    pub bucket: u32,
    /// Ring round.
    pub round: u32,
    /// The values.
    pub data: Vec<f32>,
}

/// A message between ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    /// "I am in generation `gen` and hold these checkpoints durably."
    Join {
        /// Generation.
        gen: u64,
        /// The sender's incarnation (differs after every restart).
        boot: u64,
        /// Checkpoints held.
        ckpts: Vec<CkptId>,
    },
    /// "My checkpoint of `step` in generation `gen` is durable."
    Saved {
        /// Generation.
        gen: u64,
        /// Step.
        step: u64,
    },
    /// Ring traffic.
    Chunk(Chunk),
}

/// Deliberate bugs the core implements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bugs {
    /// Rank 1 applies its local gradient instead of the average every 5th step.
    pub skip_allreduce: bool,
    /// Ranks keep their own initial parameters instead of rank 0's.
    pub no_init_broadcast: bool,
    /// Buckets summed in arrival order.
    pub unordered_reduce: bool,
    /// On the last rank, a bucket not reduced this long (ms) after its local gradient is
    /// replaced by the previous step's result.
    pub stale_bucket_ms: Option<i64>,
}

/// Settings of one rank's core.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// This rank.
    pub rank: Rank,
    /// World size `W`.
    pub world: usize,
    /// Gradient buckets: ranges of the flat parameter vector.
    pub buckets: Vec<Range<usize>>,
    /// Checkpoint (and commit) every this many steps.
    pub ckpt_every: u64,
    /// No progress for this long aborts the step and re-forms the group.
    pub step_timeout_ms: i64,
    /// Rendezvous announcements are repeated this often.
    pub rejoin_ms: i64,
    /// Learning rate.
    pub lr: f32,
    /// Momentum.
    pub momentum: f32,
    /// Stop after this step (replays and tests); `None` trains forever.
    pub max_step: Option<u64>,
    /// Bugs.
    pub bugs: Bugs,
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send a message.
    Send {
        /// Destination.
        to: Rank,
        /// Message.
        msg: Msg,
    },
    /// Load this checkpoint and call [`Core::restored`].
    Restore(CkptId),
    /// Compute the local gradient of `step` with [`Core::params`] and feed its buckets
    /// through [`Core::local_bucket`].
    Compute {
        /// The step.
        step: u64,
    },
    /// `step` was applied: [`Core::params`] now hold its result.
    StepDone {
        /// The step.
        step: u64,
    },
    /// Write a checkpoint of the current parameters and momentum (and the records of its
    /// last `ckpt_every` steps) durably, then call [`Core::checkpoint_saved`].
    SaveCheckpoint(CkptId),
    /// Steps up to `through` are committed; the records of those not yet reported are in
    /// this rank's checkpoints of generation `gen`.
    Commit {
        /// Last committed step.
        through: u64,
        /// Generation whose checkpoints hold the records.
        gen: u64,
    },
    /// The group is re-forming (for the log).
    Regroup {
        /// New generation.
        gen: u64,
        /// Why.
        reason: String,
    },
}

/// Where the rank is.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Collecting announcements for the generation.
    Rendezvous,
    /// Waiting for the driver to load a checkpoint.
    Restoring,
    /// Waiting for rank 0's initial parameters.
    AwaitInit,
    /// Working on a step.
    Training,
    /// `max_step` reached.
    Finished,
}

/// One rank's protocol state.
#[derive(Debug)]
pub struct Core {
    cfg: CoreConfig,
    gen: u64,
    phase: Phase,
    /// Announcements of this generation, including our own: incarnation, checkpoints.
    joins: BTreeMap<Rank, (u64, Vec<CkptId>)>,
    /// This process's incarnation.
    boot: u64,
    /// Our announcement for this generation (fixed once made).
    my_join: Vec<CkptId>,
    last_join_sent: i64,
    /// Checkpoints durable on our disk (at or after the last committed one).
    durable: BTreeSet<CkptId>,
    committed: u64,
    /// `Saved` heard in this generation, by step.
    saved: BTreeMap<u64, BTreeSet<Rank>>,
    /// The step in progress (Training) or last applied.
    step: u64,
    params: Vec<f32>,
    momentum: Vec<f32>,
    init: Vec<f32>,
    /// Averaged gradient of the current step, filled bucket by bucket.
    avg: Vec<f32>,
    /// The previous step's averaged gradient (the stale-bucket bug reuses it).
    prev_avg: Vec<f32>,
    /// This step's local gradient (the skip-allreduce bug applies it).
    local: Vec<f32>,
    resolved: Vec<bool>,
    local_at: Vec<Option<i64>>,
    rings: BTreeMap<(u64, u32), BucketRing>,
    last_progress: i64,
    outputs: Vec<Output>,
}

impl Core {
    /// A rank starting up: `init` its own initial parameters, `durable` the checkpoints on
    /// its disk, `committed` the last step it has committed, `boot` a number that differs
    /// from every earlier incarnation of this rank. It announces generation 0.
    pub fn new(
        cfg: CoreConfig,
        init: Vec<f32>,
        durable: Vec<CkptId>,
        committed: u64,
        boot: u64,
        now: i64,
    ) -> Core {
        let n = init.len();
        let nb = cfg.buckets.len();
        let mut core = Core {
            cfg,
            gen: 0,
            phase: Phase::Rendezvous,
            joins: BTreeMap::new(),
            boot,
            my_join: Vec::new(),
            last_join_sent: now,
            durable: durable
                .into_iter()
                .filter(|c| c.step >= committed)
                .collect(),
            committed,
            saved: BTreeMap::new(),
            step: 0,
            params: init.clone(),
            momentum: vec![0.0; n],
            init,
            avg: vec![0.0; n],
            prev_avg: vec![0.0; n],
            local: vec![0.0; n],
            resolved: vec![false; nb],
            local_at: vec![None; nb],
            rings: BTreeMap::new(),
            last_progress: now,
            outputs: Vec::new(),
        };
        core.enter_rendezvous(0, now, "start");
        core
    }

    /// Outputs produced so far, in order.
    pub fn take_outputs(&mut self) -> Vec<Output> {
        std::mem::take(&mut self.outputs)
    }

    /// Current parameters.
    pub fn params(&self) -> &[f32] {
        &self.params
    }

    /// Current momentum buffer.
    pub fn momentum(&self) -> &[f32] {
        &self.momentum
    }

    /// Generation.
    pub fn gen(&self) -> u64 {
        self.gen
    }

    /// Phase.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// The step in progress (Training) or last applied.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Last committed step.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// Checkpoints this rank still needs (the driver may delete the others).
    pub fn durable(&self) -> &BTreeSet<CkptId> {
        &self.durable
    }

    /// The configuration.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    pub(crate) fn others(&self) -> impl Iterator<Item = Rank> + '_ {
        (0..self.cfg.world).filter(move |r| *r != self.cfg.rank)
    }

    fn send(&mut self, to: Rank, msg: Msg) {
        self.outputs.push(Output::Send { to, msg });
    }

    fn successor(&self) -> Rank {
        (self.cfg.rank + 1) % self.cfg.world.max(1)
    }

    /// The driver loaded the checkpoint asked for by [`Output::Restore`].
    pub fn restored(&mut self, params: Vec<f32>, momentum: Vec<f32>, now: i64) {
        if self.phase != Phase::Restoring
            || params.len() != self.params.len()
            || momentum.len() != self.params.len()
        {
            return;
        }
        self.params = params;
        self.momentum = momentum;
        self.prev_avg.iter_mut().for_each(|m| *m = 0.0);
        self.start_step(self.step + 1, now);
    }

    fn start_step(&mut self, step: u64, now: i64) {
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
        self.outputs.push(Output::Compute { step });
        // Messages that arrived before we got here may already complete buckets.
        for b in 0..self.cfg.buckets.len() {
            self.check_bucket(step, b as u32, now);
        }
    }

    fn ring_mode(&self) -> ReduceMode {
        if self.cfg.bugs.unordered_reduce {
            ReduceMode::ArrivalOrder
        } else {
            ReduceMode::Ring
        }
    }

    fn ring(&mut self, step: u64, bucket: u32) -> Option<&mut BucketRing> {
        let len = self.cfg.buckets.get(bucket as usize)?.len();
        let (rank, world, mode) = (self.cfg.rank, self.cfg.world, self.ring_mode());
        Some(
            self.rings
                .entry((step, bucket))
                .or_insert_with(|| BucketRing::new(rank, world, len, mode)),
        )
    }

    fn send_ring(&mut self, step: u64, bucket: u32, sends: Vec<ring::RingSend>) {
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

    fn check_bucket(&mut self, step: u64, bucket: u32, now: i64) {
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
                let last_rank = self.cfg.rank + 1 == self.cfg.world;
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
        self.resolved[b] = true;
        if self.resolved.iter().all(|r| *r) {
            self.apply(now);
        }
    }

    /// SGD with momentum: `v = μ v + g; p -= lr v`. Shared with the reference replay.
    pub fn sgd(params: &mut [f32], momentum: &mut [f32], grad: &[f32], lr: f32, mu: f32) {
        for ((p, v), g) in params.iter_mut().zip(momentum.iter_mut()).zip(grad) {
            *v = mu * *v + *g;
            *p -= lr * *v;
        }
    }

    fn apply(&mut self, now: i64) {
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
        self.outputs.push(Output::StepDone { step });
        if step.is_multiple_of(self.cfg.ckpt_every.max(1)) {
            self.outputs.push(Output::SaveCheckpoint(CkptId {
                step,
                gen: self.gen,
            }));
        }
        self.start_step(step + 1, now);
    }

    /// The driver made checkpoint `id` durable.
    pub fn checkpoint_saved(&mut self, id: CkptId, now: i64) {
        if id.step < self.committed {
            return;
        }
        self.durable.insert(id);
        if id.gen == self.gen {
            let others: Vec<Rank> = self.others().collect();
            for r in others {
                self.send(
                    r,
                    Msg::Saved {
                        gen: id.gen,
                        step: id.step,
                    },
                );
            }
            self.heard_saved(self.cfg.rank, id.step, now);
        }
    }

    fn heard_saved(&mut self, from: Rank, step: u64, _now: i64) {
        let set = self.saved.entry(step).or_default();
        set.insert(from);
        if set.len() >= self.cfg.world {
            self.commit(step, self.gen);
        }
    }

    fn commit(&mut self, through: u64, gen: u64) {
        if through <= self.committed {
            return;
        }
        self.committed = through;
        self.durable.retain(|c| c.step >= through);
        self.saved.retain(|s, _| *s > through);
        self.outputs.push(Output::Commit { through, gen });
    }

    /// A message from rank `from`.
    pub fn on_message(&mut self, from: Rank, msg: Msg, now: i64) {
        if from >= self.cfg.world || from == self.cfg.rank {
            return;
        }
        match msg {
            Msg::Join { gen, boot, ckpts } => self.on_join(from, gen, boot, ckpts, now),
            Msg::Saved { gen, step } => {
                if gen == self.gen && self.phase != Phase::Rendezvous {
                    self.heard_saved(from, step, now);
                }
            }
            Msg::Chunk(chunk) => self.on_chunk(from, chunk, now),
        }
    }

    fn on_chunk(&mut self, from: Rank, chunk: Chunk, now: i64) {
        if chunk.gen != self.gen || self.phase == Phase::Rendezvous {
            return;
        }
        let pred = (self.cfg.rank + self.cfg.world - 1) % self.cfg.world;
        if from != pred {
            return;
        }
        if chunk.bucket == INIT_BUCKET {
            if self.phase != Phase::AwaitInit || chunk.data.len() != self.params.len() {
                return;
            }
            if self.cfg.rank + 1 < self.cfg.world {
                self.send(self.cfg.rank + 1, Msg::Chunk(chunk.clone()));
            }
            if !self.cfg.bugs.no_init_broadcast {
                self.params = chunk.data;
            }
            self.start_step(1, now);
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

    /// Time passes: timeouts, repeated announcements, stale buckets.
    pub fn tick(&mut self, now: i64) {
        match self.phase {
            Phase::Rendezvous => {
                if now - self.last_join_sent >= self.cfg.rejoin_ms {
                    self.announce(now);
                }
            }
            Phase::Training | Phase::AwaitInit => {
                if self.cfg.bugs.stale_bucket_ms.is_some() && self.phase == Phase::Training {
                    for b in 0..self.cfg.buckets.len() {
                        self.check_bucket(self.step, b as u32, now);
                    }
                }
                if now - self.last_progress > self.cfg.step_timeout_ms {
                    let next = self.gen + 1;
                    self.enter_rendezvous(next, now, "no progress within the step timeout");
                }
            }
            Phase::Restoring | Phase::Finished => {}
        }
    }
}
