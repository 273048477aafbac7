//! The simulated cluster: ranks' cores, a seeded network (delays, reordering, loss,
//! partitions), crashes with restarts from the simulated disk, and what a driver does
//! with each output (checkpoints with records, restores, adoption, commit logs).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use splitbrain_ddp::core::{Bugs, CkptId, Core, CoreConfig, DataPos, Msg, Output, Phase, Slice};
use splitbrain_ddp::model::digest;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

pub const PARAMS: usize = 40;
pub const MAX_STEP: u64 = 39;
pub const K: u64 = 3;
pub const BATCH: u64 = 4;
pub const DATASET: u64 = 48;
/// A rendezvous that never gives up on a missing rank (the group never shrinks).
pub const NEVER: i64 = i64::MAX / 4;

pub fn config(rank: usize, world: usize, shrink_after_ms: i64, bugs: Bugs) -> CoreConfig {
    CoreConfig {
        rank,
        world,
        min_world: world / 2 + 1,
        shrink_after_ms,
        batch: BATCH,
        dataset_size: DATASET,
        buckets: vec![25..40, 10..25, 0..10],
        ckpt_every: K,
        step_timeout_ms: 200,
        rejoin_ms: 50,
        lr: 0.1,
        momentum: 0.9,
        max_step: Some(MAX_STEP),
        bugs,
    }
}

pub fn init(rank: usize) -> Vec<f32> {
    (0..PARAMS)
        .map(|i| ((i * 7 + rank * 13) % 11) as f32 * 0.1)
        .collect()
}

/// A deterministic stand-in for backward: a function of the parameters, rank and step.
pub fn grad(params: &[f32], rank: usize, step: u64) -> Vec<f32> {
    params
        .iter()
        .map(|p| ((p * 1.7 + rank as f32 * 0.3 + step as f32 * 0.01).sin()) * 0.1)
        .collect()
}

#[derive(Debug)]
pub enum Ev {
    Deliver {
        to: usize,
        from: usize,
        msg: Msg,
    },
    Tick(usize),
    Computed {
        node: usize,
        step: u64,
        params: Vec<f32>,
    },
    Crash(usize),
    Restart(usize),
}

/// What a rank records of a step: digest, members, generation, data positions used.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rec {
    /// The rank whose record it is.
    pub rank: usize,
    pub digest: String,
    pub members: Vec<usize>,
    pub gen: u64,
    pub epoch: u64,
    /// First position of the step's global batch.
    pub start: u64,
    pub positions: Vec<u64>,
}

impl Rec {
    /// Member `rank`'s record of the same step (what a joiner rebuilds from a donor's).
    fn for_member(&self, rank: usize) -> Option<Rec> {
        let index = self.members.iter().position(|m| *m == rank)?;
        let pos = DataPos {
            epoch: self.epoch,
            offset: self.start,
        };
        let n = self.members.len() as u64;
        let slice = pos.slice(n, index as u64, BATCH, DATASET);
        Some(Rec {
            rank,
            positions: slice.positions().collect(),
            ..self.clone()
        })
    }
}

/// How many steps of the group's records a checkpoint carries (as the driver's).
pub const HISTORY: u64 = 64;

/// A simulated checkpoint: parameters, momentum, data position, own records of its last
/// `K` steps, the group's records of its last `HISTORY` steps (any member's).
pub type SimCkpt = (
    Vec<f32>,
    Vec<f32>,
    DataPos,
    BTreeMap<u64, Rec>,
    BTreeMap<u64, Rec>,
);

pub struct Node {
    pub core: Option<Core>,
    pub disk: BTreeMap<CkptId, SimCkpt>,
    pub pending: BTreeMap<u64, Rec>,
    /// The group's records along the current history (restored, adopted, applied).
    pub history: BTreeMap<u64, Rec>,
    /// The slice of the step being computed.
    pub computing: Option<(u64, Slice)>,
    pub log: Vec<(u64, Rec)>,
    /// Steps up to here are logged or were adopted from another member.
    pub through: u64,
}

pub struct Faults {
    pub drop: f64,
    pub crash: bool,
    pub partition: bool,
    /// Faults stop at this time.
    pub until: i64,
    /// A crashed rank is down for up to this long.
    pub max_down_ms: i64,
}

pub struct Sim {
    pub world: usize,
    pub shrink_after_ms: i64,
    pub bugs: Bugs,
    pub now: i64,
    pub seq: u64,
    pub queue: BinaryHeap<Reverse<(i64, u64, usize)>>,
    pub events: BTreeMap<usize, Ev>,
    pub nodes: Vec<Node>,
    pub rng: ChaCha8Rng,
    pub faults: Faults,
    /// Links cut now: (from, to).
    pub cut: Vec<(usize, usize)>,
    /// Highest step any rank committed.
    pub max_committed: u64,
    /// The one record each committed step must have (digest, members).
    pub committed: BTreeMap<u64, (String, Vec<usize>)>,
    /// Recoveries seen: restores from a checkpoint, and group re-formations.
    pub restores: u64,
    pub regroups: u64,
}

impl Sim {
    pub fn new(world: usize, seed: u64, faults: Faults, shrink_after_ms: i64, bugs: Bugs) -> Sim {
        let nodes = (0..world)
            .map(|r| Node {
                core: Some(Core::new(
                    config(r, world, shrink_after_ms, bugs),
                    init(r),
                    vec![],
                    0,
                    vec![],
                    0,
                    0,
                )),
                disk: BTreeMap::new(),
                pending: BTreeMap::new(),
                history: BTreeMap::new(),
                computing: None,
                log: Vec::new(),
                through: 0,
            })
            .collect();
        let mut sim = Sim {
            world,
            shrink_after_ms,
            bugs,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            nodes,
            rng: ChaCha8Rng::seed_from_u64(seed),
            faults,
            cut: Vec::new(),
            max_committed: 0,
            committed: BTreeMap::new(),
            restores: 0,
            regroups: 0,
        };
        for r in 0..world {
            sim.at(1, Ev::Tick(r));
            sim.flush(r);
        }
        sim
    }

    pub fn at(&mut self, delay: i64, ev: Ev) {
        self.seq += 1;
        let id = self.seq as usize;
        self.events.insert(id, ev);
        self.queue.push(Reverse((self.now + delay, self.seq, id)));
    }

    pub fn faulty(&self) -> bool {
        self.now < self.faults.until
    }

    /// Carries out node `r`'s outputs.
    pub fn flush(&mut self, r: usize) {
        loop {
            let outs = match self.nodes[r].core.as_mut() {
                Some(c) => c.take_outputs(),
                None => return,
            };
            if outs.is_empty() {
                return;
            }
            for out in outs {
                self.output(r, out);
            }
        }
    }

    pub fn output(&mut self, r: usize, out: Output) {
        let now = self.now;
        match out {
            Output::Send { to, mut msg } => {
                if let Msg::State(state) = &mut msg {
                    state.records = self.donor_records(r, state.ckpt);
                }
                let lost = self.faulty() && self.rng.gen_bool(self.faults.drop);
                if lost || self.cut.contains(&(r, to)) {
                    return;
                }
                let delay = self.rng.gen_range(1..15);
                self.at(delay, Ev::Deliver { to, from: r, msg });
            }
            Output::Compute { step, slice } => {
                self.nodes[r].computing = Some((step, slice));
                let params = self.nodes[r]
                    .core
                    .as_ref()
                    .map(|c| c.params().to_vec())
                    .unwrap_or_default();
                // Nobody starts from scratch once a step is committed.
                if step == 1 && self.max_committed != 0 {
                    let state: Vec<_> = self
                        .nodes
                        .iter()
                        .map(|n| {
                            (
                                n.disk.keys().copied().collect::<Vec<_>>(),
                                n.log.len(),
                                n.core.as_ref().map(|c| (c.gen(), c.phase().clone())),
                            )
                        })
                        .collect();
                    panic!(
                        "rank {r} restarted from scratch after a commit at {}: {state:?}",
                        self.now
                    );
                }
                let delay = self.rng.gen_range(1..6);
                self.at(
                    delay,
                    Ev::Computed {
                        node: r,
                        step,
                        params,
                    },
                );
            }
            Output::StepDone { step } => {
                let node = &mut self.nodes[r];
                let Some(core) = node.core.as_ref() else {
                    return;
                };
                let Some((s, slice)) = node.computing.take() else {
                    panic!("rank {r} applied step {step} it never computed");
                };
                assert_eq!(s, step, "rank {r} applied the step it computed");
                let rec = Rec {
                    rank: r,
                    digest: digest(core.params()),
                    members: core.members().to_vec(),
                    gen: core.gen(),
                    epoch: slice.epoch,
                    start: slice.start,
                    positions: slice.positions().collect(),
                };
                node.history.insert(step, rec.clone());
                node.pending.insert(step, rec);
            }
            Output::SaveCheckpoint(id) => {
                let node = &mut self.nodes[r];
                let Some(core) = node.core.as_mut() else {
                    return;
                };
                let records: BTreeMap<u64, Rec> = node
                    .pending
                    .range(id.step + 1 - K..=id.step)
                    .map(|(s, d)| (*s, d.clone()))
                    .collect();
                assert_eq!(
                    records.len() as u64,
                    K,
                    "rank {r}: records of checkpoint {id:?}"
                );
                let history = node
                    .history
                    .range(id.step.saturating_sub(HISTORY) + 1..=id.step)
                    .map(|(s, d)| (*s, d.clone()))
                    .collect();
                node.disk.insert(
                    id,
                    (
                        core.params().to_vec(),
                        core.momentum().to_vec(),
                        core.pos(),
                        records,
                        history,
                    ),
                );
                core.checkpoint_saved(id, now);
            }
            Output::Adopt { id, records } => {
                if std::env::var("SIM_TRACE").is_ok() {
                    eprintln!(
                        "t={} rank {r} adopts {id:?}; disk {:?}",
                        self.now,
                        self.nodes[r].disk.keys().collect::<Vec<_>>()
                    );
                }
                assert!(
                    id.step >= self.max_committed,
                    "rank {r} adopts {id:?} below committed step {}",
                    self.max_committed
                );
                let node = &mut self.nodes[r];
                let Some(core) = node.core.as_mut() else {
                    return;
                };
                node.pending.clear();
                // Records of steps we were a member of and lost, rebuilt from the donor's;
                // the donor's are kept with the checkpoint to pass on.
                let donor: Vec<(u64, Rec)> = serde_json::from_slice(&records).unwrap_or_default();
                if std::env::var("SIM_TRACE").is_ok() {
                    let d: Vec<_> = donor.iter().map(|(s, x)| (*s, x.members.clone())).collect();
                    eprintln!("   donor records {d:?}, through {}", node.through);
                }
                node.history = donor.iter().cloned().collect();
                node.disk.insert(
                    id,
                    (
                        core.params().to_vec(),
                        core.momentum().to_vec(),
                        core.pos(),
                        BTreeMap::new(),
                        node.history.clone(),
                    ),
                );
                for (step, rec) in donor {
                    if step <= node.through || step > id.step {
                        continue;
                    }
                    let Some(mine) = rec.for_member(r) else {
                        continue;
                    };
                    node.log.push((step, mine));
                    let key = (rec.digest.clone(), rec.members.clone());
                    let prior = self.committed.entry(step).or_insert(key.clone());
                    assert_eq!(*prior, key, "rank {r} adopted a different step {step}");
                }
                node.through = node.through.max(id.step);
                self.restores += 1;
                core.checkpoint_saved(id, now);
            }
            Output::Restore(id) => {
                assert!(
                    id.step >= self.max_committed,
                    "rank {r} resumes from {id:?} below committed step {}",
                    self.max_committed
                );
                let node = &mut self.nodes[r];
                let Some((p, m, pos, _, history)) = node.disk.get(&id).cloned() else {
                    panic!("rank {r} asked to restore {id:?} which it does not hold");
                };
                node.pending.clear();
                node.history = history;
                self.restores += 1;
                if let Some(c) = node.core.as_mut() {
                    c.restored(p, m, pos, now);
                }
            }
            Output::Commit { through, gen } => {
                if std::env::var("SIM_TRACE").is_ok() {
                    eprintln!("t={} rank {r} commits {through} g{gen}", self.now);
                }
                let node = &mut self.nodes[r];
                let mut at = node.through;
                while at < through {
                    let ckpt = CkptId {
                        step: (at / K + 1) * K,
                        gen,
                    };
                    // As the driver does: a checkpoint it does not hold covers steps it
                    // was not a member of (the check below makes sure of that).
                    let Some((_, _, _, records, _)) = node.disk.get(&ckpt) else {
                        at = ckpt.step;
                        continue;
                    };
                    let Some(rec) = records.get(&(at + 1)).cloned() else {
                        at += 1;
                        continue;
                    };
                    assert!(
                        rec.members.contains(&r),
                        "rank {r} logs step {} of a group without it",
                        at + 1
                    );
                    node.log.push((at + 1, rec.clone()));
                    at += 1;
                    // Every member commits the same record for a step.
                    let key = (rec.digest.clone(), rec.members.clone());
                    let prior = self.committed.entry(at).or_insert(key.clone());
                    assert_eq!(*prior, key, "rank {r} committed a different step {at}");
                }
                node.through = node.through.max(through);
                if let Some(c) = node.core.as_ref() {
                    let keep = c.durable().clone();
                    node.disk.retain(|id, _| keep.contains(id));
                }
                self.max_committed = self.max_committed.max(through);
            }
            Output::Regroup { gen, reason } => {
                if std::env::var("SIM_TRACE").is_ok() {
                    let n = &self.nodes[r];
                    eprintln!(
                        "t={} rank {r} -> gen {gen}: {reason}; disk {:?} log through {} committed {:?}",
                        self.now,
                        n.disk.keys().collect::<Vec<_>>(),
                        n.through,
                        n.core.as_ref().map(|c| c.committed())
                    );
                }
                self.regroups += u64::from(gen > 0)
            }
        }
    }

    /// What the donor's driver attaches to a state message: the group's records of the
    /// steps up to the resume point, from its history (all of it: the joiner passes it on).
    pub fn donor_records(&self, r: usize, ckpt: Option<CkptId>) -> Vec<u8> {
        let Some(c) = ckpt else {
            return Vec::new();
        };
        let out: Vec<(u64, Rec)> = self.nodes[r]
            .history
            .range(..=c.step)
            .map(|(s, x)| (*s, x.clone()))
            .collect();
        serde_json::to_vec(&out).unwrap_or_default()
    }

    pub fn step_event(&mut self) -> bool {
        let Some(Reverse((t, _, id))) = self.queue.pop() else {
            return false;
        };
        self.now = t;
        let Some(ev) = self.events.remove(&id) else {
            return true;
        };
        let now = self.now;
        match ev {
            Ev::Deliver { to, from, msg } => {
                if let Some(c) = self.nodes[to].core.as_mut() {
                    c.on_message(from, msg, now);
                    self.flush(to);
                }
            }
            Ev::Tick(r) => {
                if let Some(c) = self.nodes[r].core.as_mut() {
                    c.tick(now);
                    self.flush(r);
                }
                self.at(5, Ev::Tick(r));
                if r == 0 {
                    self.maybe_fault();
                }
            }
            Ev::Computed { node, step, params } => {
                if let Some(c) = self.nodes[node].core.as_mut() {
                    let g = grad(&params, node, step);
                    for (b, range) in c.config().buckets.clone().into_iter().enumerate() {
                        c.local_bucket(step, b as u32, &g[range], now);
                    }
                    self.flush(node);
                }
            }
            Ev::Crash(r) => self.nodes[r].core = None,
            Ev::Restart(r) => {
                let node = &mut self.nodes[r];
                // As the driver: the committed step is the log's last, the committed
                // checkpoints those the log's checkpoint steps name.
                let committed = node.log.last().map(|(s, _)| *s).unwrap_or(0);
                node.through = committed;
                node.computing = None;
                let lineage: Vec<CkptId> = node
                    .log
                    .iter()
                    .filter(|(s, _)| s % K == 0)
                    .map(|(s, rec)| CkptId {
                        step: *s,
                        gen: rec.gen,
                    })
                    .collect();
                let disk: Vec<CkptId> = node.disk.keys().copied().collect();
                self.seq += 1;
                let boot = self.seq;
                let cfg = config(r, self.world, self.shrink_after_ms, self.bugs);
                self.nodes[r].core =
                    Some(Core::new(cfg, init(r), disk, committed, lineage, boot, now));
                self.flush(r);
            }
        }
        true
    }

    pub fn maybe_fault(&mut self) {
        if !self.faulty() {
            self.cut.clear();
            return;
        }
        if self.faults.crash && self.rng.gen_bool(0.01) {
            let r = self.rng.gen_range(0..self.world);
            if self.nodes[r].core.is_some() {
                self.at(0, Ev::Crash(r));
                let down = self.rng.gen_range(10..self.faults.max_down_ms);
                self.at(down, Ev::Restart(r));
            }
        }
        if self.faults.partition && self.rng.gen_bool(0.01) {
            if self.cut.is_empty() {
                let r = self.rng.gen_range(0..self.world);
                for o in 0..self.world {
                    if o != r {
                        self.cut.push((r, o));
                        self.cut.push((o, r));
                    }
                }
            } else {
                self.cut.clear();
            }
        }
    }

    pub fn run(&mut self, bound_ms: i64) {
        while self.now < bound_ms && self.step_event() {
            let done = self.nodes.iter().all(|n| {
                n.through == MAX_STEP
                    && n.core
                        .as_ref()
                        .is_some_and(|c| *c.phase() == Phase::Finished)
            });
            if done && !self.faulty() {
                return;
            }
        }
    }
}
