//! The rank's protocol as a sans-IO state machine: rendezvous (group formation, elastic
//! shrink and grow), the per-step bucketed ring all-reduce, the optimizer step,
//! checkpoints and step commit.
//!
//! The driver (`node.rs`, or the simulation in the tests) feeds it messages, local
//! gradient buckets, finished checkpoints and clock ticks, and carries out its
//! [`Output`]s. It computes nothing but sums and the SGD update, and does no I/O.
//!
//! **Rendezvous** (after torchrun's elastic rendezvous, `--nnodes=MIN:MAX`): every group
//! has a generation number and a member set. A rank that sees a failure — no progress
//! for `step_timeout_ms` (a dead, stalled or cut-off peer), a member announcing itself
//! again (it restarted), or a non-member announcing itself (a rank coming back: the
//! group grows) — aborts the step and announces generation `gen + 1` with the
//! checkpoints it holds and the last checkpoint it committed. A rank hearing of a newer
//! generation aborts and joins it. Each rank then fixes its *view* of the members: all
//! `W` ranks once all have announced, or — after `shrink_after_ms` without them (the
//! rejoin timeout) — the ranks heard so far, if they are at least `min_world` (a strict
//! majority, so two groups of one generation always share a rank); a rank that hears a
//! view containing itself before fixing its own adopts it. The view is announced, fixed
//! for the generation; the group forms when every member announced the same view. Two
//! differing views in one generation make the rank move to `gen + 1`; a rank left out
//! of a view moves to `gen + 1`, which brings the group back to rendezvous with it.
//!
//! **Resume point**: the newest checkpoint (by step, then generation) any member holds,
//! or scratch when none holds any (the first member's initial parameters). A committed
//! checkpoint is held by every member of the group that committed it, and any two groups
//! share a rank (majorities), so the resume point is never below a committed step; a
//! checkpoint of an abandoned group at a higher step continues the committed history
//! (its group resumed from it), so taking it loses nothing. Members holding it restore
//! it from disk; the first of them sends it (parameters, momentum, data position, the
//! committed checkpoints it knows of, and — added by its driver — its step records up to
//! it) to the others, the *joiners*. A joiner publishes its own records of checkpoints
//! that list shows committed, rebuilds from the donor's records its records of steps it
//! was a member of but lost (it gave its gradient, then went away before saving), saves
//! the received state as that checkpoint and says `Saved`. The resume point is committed
//! at once when every member holds it, else when every member has said `Saved` for it.
//!
//! **Commit**: a step is committed once the checkpoint covering it is durable on every
//! member: when a rank has `Saved` from all members of its generation, or when a
//! rendezvous resumes from that checkpoint as above. Checkpoints older than the last
//! committed one are forgotten, never the committed one itself, so the resume point of
//! every later rendezvous is at or after every step any rank committed: a committed step
//! is never rolled back, and every member of a committed step commits the same record.
//!
//! **Data and averaging**: the data position ([`DataPos`]) is part of the state (saved in
//! checkpoints, sent to joiners); each step's global batch is cut from it for the current
//! member count, and the averaged gradient divides by the member count.

mod commit;
mod position;
mod rendezvous;
pub mod ring;
mod step;

pub use position::{DataPos, Slice};
use rendezvous::JoinInfo;

use ring::BucketRing;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// A rank, `0..W`.
pub type Rank = usize;

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
    /// Bucket number.
    pub bucket: u32,
    /// Ring round.
    pub round: u32,
    /// The values.
    pub data: Vec<f32>,
}

/// A message between ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    /// "I am in generation `gen`, hold these checkpoints durably, last committed
    /// `committed`, and (once fixed) see these members."
    Join {
        /// Generation.
        gen: u64,
        /// The sender's incarnation (differs after every restart).
        boot: u64,
        /// Checkpoints held.
        ckpts: Vec<CkptId>,
        /// The last checkpoint the sender committed.
        #[serde(default)]
        committed: Option<CkptId>,
        /// The sender's view of the group's members, once fixed.
        #[serde(default)]
        view: Option<Vec<Rank>>,
    },
    /// The resume state for a member that does not hold the resume point (or, from
    /// scratch, the first member's initial parameters).
    State(Box<StateMsg>),
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

/// Training state sent to a joiner. Floats travel as their bit patterns, so the copy is
/// exact whatever the encoding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateMsg {
    /// Generation.
    pub gen: u64,
    /// The resume checkpoint (`None`: from scratch).
    pub ckpt: Option<CkptId>,
    /// Data position after its step.
    pub pos: DataPos,
    /// Parameters (f32 bits).
    pub params: Vec<u32>,
    /// Momentum (f32 bits).
    pub momentum: Vec<u32>,
    /// Checkpoints the sender knows to be committed.
    pub lineage: Vec<CkptId>,
    /// The last step the joiner said it committed.
    pub joiner_committed: u64,
    /// Filled in by the sender's driver: its records of the steps after
    /// `joiner_committed` up to the resume point (opaque to the core), from which the
    /// joiner rebuilds its own records of the steps it was a member of but lost (it gave
    /// its gradient, then went away before it saved the checkpoint).
    #[serde(default)]
    pub records: Vec<u8>,
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
    /// After a shrink the average still divides by the full world size `W`.
    pub shrink_without_rescale: bool,
}

/// Settings of one rank's core.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// This rank.
    pub rank: Rank,
    /// World size `W` (the most ranks a group has).
    pub world: usize,
    /// The fewest members a group forms with (a strict majority of `W`).
    pub min_world: usize,
    /// A rendezvous waits this long for missing ranks before forming without them.
    pub shrink_after_ms: i64,
    /// Micro-batch per member.
    pub batch: u64,
    /// Samples in the data set.
    pub dataset_size: u64,
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
    /// Compute the local gradient of `step` with [`Core::params`] on the samples of
    /// `slice` and feed its buckets through [`Core::local_bucket`].
    Compute {
        /// The step.
        step: u64,
        /// This member's share of the step's global batch.
        slice: Slice,
    },
    /// Write the current parameters, momentum and data position durably as checkpoint
    /// `id` and count everything through `id.step` as committed; first publish, as this
    /// rank's own, the records rebuilt from the donor's `records` (see
    /// [`StateMsg::records`]) of the steps it was a member of and has no record of. Then
    /// call [`Core::checkpoint_saved`].
    Adopt {
        /// The resume point.
        id: CkptId,
        /// The donor's records (its driver's encoding).
        records: Vec<u8>,
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
    /// Waiting for the resume state from another member.
    AwaitState,
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
    /// Announcements of this generation, including our own.
    joins: BTreeMap<Rank, JoinInfo>,
    /// Our view of the members in this generation's rendezvous, once fixed.
    my_view: Option<Vec<Rank>>,
    /// When this generation's rendezvous began.
    rdv_since: i64,
    /// The group of this generation, once formed (sorted ranks).
    members: Vec<Rank>,
    /// The checkpoint this generation resumed from.
    resume: Option<CkptId>,
    /// Committed checkpoints known (ours and those a donor told us of), newest kept.
    lineage: BTreeSet<CkptId>,
    /// Data position after the last applied step.
    pos: DataPos,
    /// This process's incarnation.
    boot: u64,
    /// Our announcement for this generation (fixed once made).
    my_join: Vec<CkptId>,
    /// Our last committed checkpoint as announced for this generation.
    my_committed: Option<CkptId>,
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
    /// its disk, `committed` the last step it has committed, `lineage` the checkpoints it
    /// knows to be committed (from its step log), `boot` a number that differs from every
    /// earlier incarnation of this rank. It announces the generation after the newest it
    /// knows of (0 on a fresh disk).
    pub fn new(
        cfg: CoreConfig,
        init: Vec<f32>,
        durable: Vec<CkptId>,
        committed: u64,
        lineage: Vec<CkptId>,
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
            my_view: None,
            rdv_since: now,
            members: Vec::new(),
            resume: None,
            lineage: lineage.into_iter().collect(),
            pos: DataPos::default(),
            boot,
            my_join: Vec::new(),
            my_committed: None,
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
        // Generation numbers are never reused, also when every rank restarts: a
        // checkpoint's (step, generation) names one history.
        let first = core
            .durable
            .iter()
            .chain(core.lineage.iter())
            .map(|c| c.gen + 1)
            .max()
            .unwrap_or(0);
        core.enter_rendezvous(first, now, "start");
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

    /// The members of this generation's group (sorted ranks; empty while forming).
    pub fn members(&self) -> &[Rank] {
        &self.members
    }

    /// Data position after the last applied step.
    pub fn pos(&self) -> DataPos {
        self.pos
    }

    /// Every other rank of the world (announcements go to all of them).
    pub(crate) fn others(&self) -> impl Iterator<Item = Rank> + '_ {
        (0..self.cfg.world).filter(move |r| *r != self.cfg.rank)
    }

    /// The other members of the group.
    pub(crate) fn other_members(&self) -> Vec<Rank> {
        self.members
            .iter()
            .copied()
            .filter(|r| *r != self.cfg.rank)
            .collect()
    }

    fn send(&mut self, to: Rank, msg: Msg) {
        self.outputs.push(Output::Send { to, msg });
    }

    /// This rank's index among the members.
    fn index(&self) -> usize {
        self.members
            .iter()
            .position(|r| *r == self.cfg.rank)
            .unwrap_or(0)
    }

    fn successor(&self) -> Rank {
        let n = self.members.len().max(1);
        self.members
            .get((self.index() + 1) % n)
            .copied()
            .unwrap_or(self.cfg.rank)
    }

    fn predecessor(&self) -> Rank {
        let n = self.members.len().max(1);
        self.members
            .get((self.index() + n - 1) % n)
            .copied()
            .unwrap_or(self.cfg.rank)
    }

    /// The driver loaded the checkpoint asked for by [`Output::Restore`], with the data
    /// position saved in it.
    pub fn restored(&mut self, params: Vec<f32>, momentum: Vec<f32>, pos: DataPos, now: i64) {
        if self.phase != Phase::Restoring
            || params.len() != self.params.len()
            || momentum.len() != self.params.len()
        {
            return;
        }
        self.params = params;
        self.momentum = momentum;
        self.pos = pos;
        self.prev_avg.iter_mut().for_each(|m| *m = 0.0);
        self.send_state_to_joiners();
        self.start_step(self.step + 1, now);
    }

    /// A message from rank `from`.
    pub fn on_message(&mut self, from: Rank, msg: Msg, now: i64) {
        if from >= self.cfg.world || from == self.cfg.rank {
            return;
        }
        match msg {
            Msg::Join {
                gen,
                boot,
                ckpts,
                committed,
                view,
            } => self.on_join(
                from,
                JoinInfo {
                    gen,
                    boot,
                    ckpts,
                    committed,
                    view,
                },
                now,
            ),
            Msg::State(state) => self.on_state(from, *state, now),
            Msg::Saved { gen, step } => {
                if gen == self.gen && self.phase != Phase::Rendezvous {
                    self.heard_saved(from, step, now);
                }
            }
            Msg::Chunk(chunk) => self.on_chunk(from, chunk, now),
        }
    }

    /// Time passes: timeouts, repeated announcements, stale buckets.
    pub fn tick(&mut self, now: i64) {
        match self.phase {
            Phase::Rendezvous => {
                if now - self.last_join_sent >= self.cfg.rejoin_ms {
                    self.announce(now);
                }
                self.try_complete_rendezvous(now);
            }
            Phase::Training | Phase::AwaitState => {
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
