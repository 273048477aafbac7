//! The rank's driver thread: carries out the core's outputs with real compute, disk and
//! network, and publishes committed steps.
//!
//! Backward runs layer by layer; as soon as the layers of a bucket are done the bucket is
//! handed to the core, whose ring messages go out at once, and between layers inbound
//! messages are fed to the core, so the all-reduce of late layers overlaps the backward
//! pass of early ones.

use crate::config::TrainConfig;
use crate::core::{CkptId, Core, DataPos, Output, Phase, Slice};
use crate::data::Dataset;
use crate::model::{self, Gemm};
use crate::net::{Inbound, PeerNet};
use crate::shm::generations::GenerationGroups;
use crate::store::{CkptMeta, StepRecord, Store};
use splitbrain_target_runtime::turns::{run_turns, storage_failure, TurnLimits, TurnTaker};
use splitbrain_target_runtime::OffsetClock;
use std::collections::BTreeMap;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Steps of group records a checkpoint carries (see [`Driver::history`]): more than a
/// rank can be away and still come back to records it lost.
const HISTORY_STEPS: u64 = 512;

/// A turn: up to 5 ms idle (the timers' precision), at most 4096 messages.
const LIMITS: TurnLimits = TurnLimits {
    tick: Duration::from_millis(5),
    max_batch: 4096,
};

/// Driver-level bugs (the data position and the sampler).
#[derive(Debug, Clone, Copy, Default)]
pub struct DataBugs {
    /// The last rank reads rank 0's shard.
    pub sampler_overlap: bool,
    /// A resume does not restore the data position.
    pub resume_without_sampler_state: bool,
}

/// What the HTTP side sees.
#[derive(Debug, Default)]
pub struct Published {
    /// Committed step records, in step order.
    pub steps: Vec<StepRecord>,
    /// Generation, phase, step in progress, committed step.
    pub status: (u64, String, u64, u64),
    /// Mean forward+backward time and mean exposed all-reduce time per step (ms), steps.
    pub timing: (f64, f64, u64),
}

/// Where step time goes: compute, and the all-reduce time not hidden behind backward.
#[derive(Debug, Default, Clone)]
pub struct StepTiming {
    compute: std::time::Duration,
    exposed: std::time::Duration,
    steps: u64,
    /// The step whose backward just ended, and when.
    backward_end: Option<(u64, std::time::Instant)>,
}

/// Shared between the driver thread and the HTTP handlers.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The published state.
    pub state: Arc<Mutex<Published>>,
    /// Bumped on every commit (for long polls).
    pub commits: Arc<tokio::sync::watch::Sender<u64>>,
}

/// The driver.
pub struct Driver {
    /// The protocol core.
    pub core: Core,
    /// Training configuration.
    pub train: TrainConfig,
    /// Data set.
    pub data: Dataset,
    /// Disk.
    pub store: Store,
    /// Outbound network.
    pub net: PeerNet,
    /// Inbound messages.
    pub rx: Receiver<Inbound>,
    /// The node's clock.
    pub clock: OffsetClock,
    /// Published state.
    pub shared: Shared,
    /// Bugs of the driver.
    pub bugs: DataBugs,
    /// Pause between steps.
    pub step_delay: Duration,
    /// Batches consumed (the sampler's position).
    pub data_pos: u64,
    /// Records of applied, not yet checkpointed steps.
    pub pending: BTreeMap<u64, StepRecord>,
    /// The group's records along the current history (restored, adopted, applied),
    /// without samples or loss: what a joiner rebuilds lost records from.
    pub history: BTreeMap<u64, StepRecord>,
    /// The step being computed: step, loss, slice (epoch, batch start) and samples.
    pub current: Option<(u64, f32, Slice, Vec<u64>)>,
    /// Last step in the published log.
    pub logged: u64,
    /// Hand buckets to the all-reduce as backward produces them (false: after backward,
    /// the baseline for measuring the overlap).
    pub overlap: bool,
    /// Step time accounting.
    pub timing: StepTiming,
    /// With `--transport shm`: the shared-memory groups buckets are all-reduced through
    /// (where the core allows it), instead of the core's ring messages.
    pub direct: Option<GenerationGroups>,
}

fn fatal(e: &dyn std::fmt::Display) -> ! {
    storage_failure("splitbrain-ddp", e)
}

/// The driver's turns: messages to the core; at a turn's end a tick, the core's outputs,
/// and the compute step they asked for, if any.
struct DriverTurns<'a> {
    driver: &'a mut Driver,
    /// The step (and its slice) the core asked this rank to compute next.
    compute: Option<(u64, Slice)>,
}

impl TurnTaker for DriverTurns<'_> {
    type Event = Inbound;

    fn inbound(&self) -> &Receiver<Inbound> {
        &self.driver.rx
    }

    fn handle(&mut self, m: Inbound) {
        let now = self.driver.now();
        self.driver.core.on_message(m.from, m.msg, now);
    }

    fn end_turn(&mut self) {
        let d = &mut *self.driver;
        let now = d.now();
        d.core.tick(now);
        d.handle_outputs(&mut self.compute);
        if let Some((step, slice)) = self.compute.take() {
            if !d.step_delay.is_zero() {
                std::thread::sleep(d.step_delay);
            }
            d.run_step(step, slice, &mut self.compute);
        }
    }
}

impl Driver {
    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Runs until the inbound channel closes.
    pub fn run(mut self) {
        let mut turns = DriverTurns {
            driver: &mut self,
            compute: None,
        };
        run_turns(&mut turns, LIMITS);
    }

    /// Messages that arrived during a compute step, fed to the core between its buckets.
    fn drain_inbound(&mut self) {
        for _ in 0..LIMITS.max_batch {
            let Ok(m) = self.rx.try_recv() else { break };
            let now = self.now();
            self.core.on_message(m.from, m.msg, now);
        }
    }

    /// The epoch and sample ids this rank uses for the slice the core gave it.
    pub fn samples_for(&self, slice: Slice) -> (u64, Vec<u64>) {
        let mut slice = slice;
        // The position is the core's (restored with the step); the bug keeps a separate
        // cursor of batches that a resume does not restore.
        if self.bugs.resume_without_sampler_state {
            let full = self.train.world as u64 * self.train.batch;
            let spe = (self.train.dataset_size / full.max(1)).max(1);
            let pos = DataPos {
                epoch: self.data_pos / spe,
                offset: (self.data_pos % spe) * full,
            };
            slice = pos.slice(
                slice.world,
                slice.index,
                self.train.batch,
                self.train.dataset_size,
            );
        }
        if self.bugs.sampler_overlap && slice.index + 1 == slice.world && slice.world > 1 {
            slice.index = 0;
        }
        (slice.epoch, self.train.slice_ids(&slice))
    }

    fn run_step(&mut self, step: u64, slice: Slice, compute: &mut Option<(u64, Slice)>) {
        let started = std::time::Instant::now();
        let (_, ids) = self.samples_for(slice);
        let (x, y) = self.data.batch(&ids);
        let mlp = self.train.mlp.clone();
        let (loss, acts) = mlp.forward(Gemm::Simd, self.core.params(), &x, &y);
        self.current = Some((step, loss, slice, ids));
        self.data_pos += 1;
        let params = self.core.params().to_vec();
        let layers = mlp.layers();
        let buckets = self.train.buckets.clone();
        let mut grad = vec![0.0f32; params.len()];
        let mut next_bucket = 0usize;
        let mut deferred = Vec::new();
        let overlap = self.overlap;
        let direct = self.direct.is_some() && self.core.direct_reduce_allowed();
        mlp.backward(Gemm::Simd, &params, &acts, &y, &mut grad, |layer, g| {
            // Without overlap every bucket waits for the end of backward (layer 0).
            let done_from = if overlap || layer == 0 {
                layers[layer].weights.start
            } else {
                usize::MAX
            };
            while next_bucket < buckets.len() && buckets[next_bucket].start >= done_from {
                let local = &g[buckets[next_bucket].clone()];
                if direct {
                    deferred.extend(self.reduce_direct(step, next_bucket as u32, local));
                } else {
                    let now = self.clock.now_ms();
                    self.core.local_bucket(step, next_bucket as u32, local, now);
                }
                next_bucket += 1;
            }
            self.drain_inbound();
            // Ring messages go out now; everything else waits until backward is over.
            for out in self.core.take_outputs() {
                match out {
                    Output::Send { to, msg } => self.net.send(to, &msg),
                    other => deferred.push(other),
                }
            }
        });
        self.timing.compute += started.elapsed();
        self.timing.backward_end = Some((step, std::time::Instant::now()));
        self.run_outputs(deferred, compute);
    }

    /// All-reduces bucket `bucket` of `step` through the generation's shared-memory group
    /// and hands the average, read from the mapping, to the core. A failure (a member
    /// died or stalls: bounded wait) leaves the bucket open, so the step times out in the
    /// core and the group re-forms, as a lost ring message does.
    ///
    /// While it waits for its peers it goes on answering their messages (a peer may need
    /// this rank's reply to reach the step at all); the outputs other than sends are
    /// returned, to be carried out after backward, and a regroup meanwhile ends the wait.
    fn reduce_direct(&mut self, step: u64, bucket: u32, local: &[f32]) -> Vec<Output> {
        let mut deferred = Vec::new();
        if self.core.phase() != &Phase::Training || self.core.step() != step {
            return deferred;
        }
        let (gen, members, divisor) = (
            self.core.gen(),
            self.core.members().to_vec(),
            self.core.divisor(),
        );
        let Some(groups) = self.direct.as_mut() else {
            return deferred;
        };
        let rank = self.core.config().rank;
        let group = match groups.group(gen, &members) {
            Ok(g) => g,
            Err(_) => return deferred,
        };
        if local.len() > group.floats() {
            return deferred;
        }
        group.input()[..local.len()].copy_from_slice(local);
        let whole = 0..local.len();
        let (core, rx, net, clock) = (&mut self.core, &self.rx, &self.net, &self.clock);
        let answer_peers = || {
            for _ in 0..4096 {
                let Ok(m) = rx.try_recv() else { break };
                core.on_message(m.from, m.msg, clock.now_ms());
            }
            for out in core.take_outputs() {
                match out {
                    Output::Send { to, msg } => net.send(to, &msg),
                    other => deferred.push(other),
                }
            }
            core.phase() == &Phase::Training && core.step() == step && core.gen() == gen
        };
        match group.allreduce_with(std::slice::from_ref(&whole), divisor, answer_peers) {
            Ok(reduced) => {
                let now = self.clock.now_ms();
                self.core
                    .reduced_bucket(step, bucket, local, reduced.pieces(), now);
            }
            Err(e) => {
                println!(
                    "rank {rank}: shared-memory all-reduce in generation {gen}, step {step}: {e}"
                );
                groups.broken();
            }
        }
        deferred
    }

    fn handle_outputs(&mut self, compute: &mut Option<(u64, Slice)>) {
        loop {
            let outs = self.core.take_outputs();
            if outs.is_empty() {
                break;
            }
            self.run_outputs(outs, compute);
        }
        self.publish_status();
    }

    fn run_outputs(&mut self, outs: Vec<Output>, compute: &mut Option<(u64, Slice)>) {
        for out in outs {
            match out {
                Output::Send { to, mut msg } => {
                    if let crate::core::Msg::State(state) = &mut msg {
                        state.records = self.donor_records(state.ckpt);
                    }
                    self.net.send(to, &msg)
                }
                Output::Compute { step, slice } => *compute = Some((step, slice)),
                Output::Adopt { id, records } => self.adopt(id, &records),
                Output::StepDone { step } => self.step_done(step),
                Output::SaveCheckpoint(id) => self.save(id),
                Output::Commit { through, gen } => self.commit(through, gen),
                Output::Restore(id) => self.restore(id),
                Output::Regroup { gen, reason } => {
                    *compute = None;
                    println!(
                        "rank {}: regroup to generation {gen}: {reason}",
                        self.core.config().rank
                    );
                }
            }
        }
        // Outputs of the calls above (restored, checkpoint_saved) come back on the next
        // round of `handle_outputs`.
        let more = self.core.take_outputs();
        if !more.is_empty() {
            self.run_outputs(more, compute);
        }
    }

    fn step_done(&mut self, step: u64) {
        if let Some((s, at)) = self.timing.backward_end.take() {
            if s == step {
                self.timing.exposed += at.elapsed();
                self.timing.steps += 1;
            }
        }
        let Some((s, loss, slice, samples)) = self.current.take() else {
            return;
        };
        if s != step {
            return;
        }
        let members: Vec<u64> = self.core.members().iter().map(|r| *r as u64).collect();
        let record = StepRecord {
            rank: self.core.config().rank as u64,
            world: members.len() as u64,
            members,
            step,
            epoch: slice.epoch,
            gen: self.core.gen(),
            digest: model::digest(self.core.params()),
            loss: Some(loss),
            offset: slice.start,
            samples,
        };
        self.history.insert(
            step,
            StepRecord {
                samples: Vec::new(),
                loss: None,
                ..record.clone()
            },
        );
        self.pending.insert(step, record);
    }

    fn save(&mut self, id: CkptId) {
        let k = self.train.ckpt_every;
        let records: Vec<StepRecord> = self
            .pending
            .range(id.step.saturating_sub(k) + 1..=id.step)
            .map(|(_, r)| r.clone())
            .collect();
        let meta = CkptMeta {
            step: id.step,
            gen: id.gen,
            data_pos: self.data_pos,
            pos: self.core.pos(),
            records,
            history: self
                .history
                .range(id.step.saturating_sub(HISTORY_STEPS) + 1..=id.step)
                .map(|(_, r)| r.clone())
                .collect(),
            params: self.core.params().len(),
        };
        if let Err(e) = self
            .store
            .save(&meta, self.core.params(), self.core.momentum())
        {
            fatal(&e);
        }
        self.pending.retain(|s, _| *s > id.step);
        let now = self.now();
        self.core.checkpoint_saved(id, now);
    }

    fn restore(&mut self, id: CkptId) {
        let ckpt = match self.store.load(id) {
            Ok(c) => c,
            Err(e) => fatal(&e),
        };
        self.pending.clear();
        self.history = ckpt
            .meta
            .history
            .iter()
            .map(|r| (r.step, r.clone()))
            .collect();
        self.current = None;
        if !self.bugs.resume_without_sampler_state {
            self.data_pos = ckpt.meta.data_pos;
        }
        let now = self.now();
        self.core
            .restored(ckpt.params, ckpt.momentum, ckpt.meta.pos, now);
    }

    /// The group's records up to the resume point `ckpt`, for a joiner (all we hold: it
    /// keeps them to pass on).
    fn donor_records(&self, ckpt: Option<CkptId>) -> Vec<u8> {
        let Some(c) = ckpt else {
            return Vec::new();
        };
        let out: Vec<&StepRecord> = self.history.range(..=c.step).map(|(_, r)| r).collect();
        serde_json::to_vec(&out).unwrap_or_default()
    }

    /// Saves the state a donor sent as checkpoint `id`; first publishes, as ours, the
    /// records rebuilt from the donor's of the steps we were a member of and lost.
    fn adopt(&mut self, id: CkptId, donor: &[u8]) {
        self.pending.clear();
        let rank = self.core.config().rank as u64;
        let donor: Vec<StepRecord> = serde_json::from_slice(donor).unwrap_or_default();
        let mut rebuilt = Vec::new();
        self.history = donor
            .iter()
            .filter(|r| r.step <= id.step)
            .map(|r| (r.step, r.clone()))
            .collect();
        for rec in donor {
            if rec.step <= self.logged || rec.step > id.step {
                continue;
            }
            let Some(index) = rec.members.iter().position(|m| *m == rank) else {
                continue;
            };
            let pos = DataPos {
                epoch: rec.epoch,
                offset: rec.offset,
            };
            let slice = pos.slice(
                rec.members.len() as u64,
                index as u64,
                self.train.batch,
                self.train.dataset_size,
            );
            rebuilt.push(StepRecord {
                rank,
                loss: None,
                samples: self.train.slice_ids(&slice),
                ..rec
            });
        }
        if !rebuilt.is_empty() {
            if let Err(e) = self.store.append_log(&rebuilt) {
                fatal(&e);
            }
            let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            st.steps.extend(rebuilt);
        }
        let meta = CkptMeta {
            step: id.step,
            gen: id.gen,
            data_pos: self.data_pos,
            pos: self.core.pos(),
            records: Vec::new(),
            history: self.history.values().cloned().collect(),
            params: self.core.params().len(),
        };
        if let Err(e) = self
            .store
            .save(&meta, self.core.params(), self.core.momentum())
        {
            fatal(&e);
        }
        self.logged = self.logged.max(id.step);
        self.shared.commits.send_replace(self.logged);
        let now = self.now();
        self.core.checkpoint_saved(id, now);
    }

    fn commit(&mut self, through: u64, gen: u64) {
        let k = self.train.ckpt_every;
        let mut records = Vec::new();
        let mut at = (self.logged / k + 1) * k;
        let held: std::collections::BTreeSet<CkptId> = match self.store.list() {
            Ok(l) => l.into_iter().collect(),
            Err(e) => fatal(&e),
        };
        while at <= through {
            // A checkpoint of these steps that this rank does not hold is one it adopted
            // or never had: it was not a member then, so it has no records of them.
            let id = CkptId { step: at, gen };
            if held.contains(&id) {
                match self.store.load(id) {
                    // An adopted checkpoint also holds the donor's records: only ours count.
                    Ok(c) => records.extend(c.meta.records.into_iter().filter(|r| {
                        r.step > self.logged && r.rank == self.core.config().rank as u64
                    })),
                    Err(e) => fatal(&e),
                }
            }
            at += k;
        }
        if let Err(e) = self.store.append_log(&records) {
            fatal(&e);
        }
        if let Err(e) = self.store.retain(self.core.durable()) {
            fatal(&e);
        }
        self.logged = through;
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.steps.extend(records);
        drop(st);
        self.shared.commits.send_replace(through);
    }

    fn publish_status(&self) {
        let phase = match self.core.phase() {
            Phase::Rendezvous => "rendezvous",
            Phase::Restoring => "restoring",
            Phase::AwaitState => "await-state",
            Phase::Training => "training",
            Phase::Finished => "finished",
        };
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.status = (
            self.core.gen(),
            phase.to_string(),
            self.core.step(),
            self.core.committed(),
        );
        let t = &self.timing;
        let per_step = |d: std::time::Duration| d.as_secs_f64() * 1e3 / t.steps.max(1) as f64;
        st.timing = (per_step(t.compute), per_step(t.exposed), t.steps);
    }
}
