//! The rank core under a seeded simulated network: random delays and reordering, message
//! loss, partitions, and crashes with restarts from the simulated disk.
//!
//! Properties (the elastic-recovery contract of torchrun-style rendezvous, and DDP's
//! replica consistency, issue 12):
//! - a committed step is never rolled back: every resume point is at or after every step
//!   any rank has committed, and nobody starts from scratch once anything is committed;
//! - every rank commits the same record for a step (same digest), gap-free, and it is the
//!   digest of the failure-free run of the same steps (recovery is exact);
//! - once faults stop, every rank commits every step: no step is committed by some ranks
//!   and not by others.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use splitbrain_ddp::core::{Bugs, CkptId, Core, CoreConfig, Msg, Output, Phase};
use splitbrain_ddp::model::digest;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

const PARAMS: usize = 40;
const MAX_STEP: u64 = 39;
const K: u64 = 3;

fn config(rank: usize, world: usize) -> CoreConfig {
    CoreConfig {
        rank,
        world,
        buckets: vec![25..40, 10..25, 0..10],
        ckpt_every: K,
        step_timeout_ms: 200,
        rejoin_ms: 50,
        lr: 0.1,
        momentum: 0.9,
        max_step: Some(MAX_STEP),
        bugs: Bugs::default(),
    }
}

fn init(rank: usize) -> Vec<f32> {
    (0..PARAMS)
        .map(|i| ((i * 7 + rank * 13) % 11) as f32 * 0.1)
        .collect()
}

/// A deterministic stand-in for backward: a function of the parameters, rank and step.
fn grad(params: &[f32], rank: usize, step: u64) -> Vec<f32> {
    params
        .iter()
        .map(|p| ((p * 1.7 + rank as f32 * 0.3 + step as f32 * 0.01).sin()) * 0.1)
        .collect()
}

#[derive(Debug)]
enum Ev {
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

/// A simulated checkpoint: parameters, momentum, records (step -> digest).
type SimCkpt = (Vec<f32>, Vec<f32>, BTreeMap<u64, String>);

struct Node {
    core: Option<Core>,
    disk: BTreeMap<CkptId, SimCkpt>,
    pending: BTreeMap<u64, String>,
    log: Vec<(u64, String)>,
}

struct Faults {
    drop: f64,
    crash: bool,
    partition: bool,
    /// Faults stop at this time.
    until: i64,
}

struct Sim {
    world: usize,
    now: i64,
    seq: u64,
    queue: BinaryHeap<Reverse<(i64, u64, usize)>>,
    events: BTreeMap<usize, Ev>,
    nodes: Vec<Node>,
    rng: ChaCha8Rng,
    faults: Faults,
    /// Links cut now: (from, to).
    cut: Vec<(usize, usize)>,
    /// Highest step any rank committed.
    max_committed: u64,
    /// The one record each committed step must have.
    committed: BTreeMap<u64, String>,
    /// Recoveries seen: restores from a checkpoint, and group re-formations.
    restores: u64,
    regroups: u64,
}

impl Sim {
    fn new(world: usize, seed: u64, faults: Faults) -> Sim {
        let nodes = (0..world)
            .map(|r| Node {
                core: Some(Core::new(config(r, world), init(r), vec![], 0, 0, 0)),
                disk: BTreeMap::new(),
                pending: BTreeMap::new(),
                log: Vec::new(),
            })
            .collect();
        let mut sim = Sim {
            world,
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

    fn at(&mut self, delay: i64, ev: Ev) {
        self.seq += 1;
        let id = self.seq as usize;
        self.events.insert(id, ev);
        self.queue.push(Reverse((self.now + delay, self.seq, id)));
    }

    fn faulty(&self) -> bool {
        self.now < self.faults.until
    }

    /// Carries out node `r`'s outputs.
    fn flush(&mut self, r: usize) {
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

    fn output(&mut self, r: usize, out: Output) {
        let now = self.now;
        match out {
            Output::Send { to, msg } => {
                let lost = self.faulty() && self.rng.gen_bool(self.faults.drop);
                if lost || self.cut.contains(&(r, to)) {
                    return;
                }
                let delay = self.rng.gen_range(1..15);
                self.at(delay, Ev::Deliver { to, from: r, msg });
            }
            Output::Compute { step } => {
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
                let d = node
                    .core
                    .as_ref()
                    .map(|c| digest(c.params()))
                    .unwrap_or_default();
                node.pending.insert(step, d);
            }
            Output::SaveCheckpoint(id) => {
                let node = &mut self.nodes[r];
                let Some(core) = node.core.as_mut() else {
                    return;
                };
                let records: BTreeMap<u64, String> = node
                    .pending
                    .range(id.step + 1 - K..=id.step)
                    .map(|(s, d)| (*s, d.clone()))
                    .collect();
                assert_eq!(
                    records.len() as u64,
                    K,
                    "rank {r}: records of checkpoint {id:?}"
                );
                node.disk.insert(
                    id,
                    (core.params().to_vec(), core.momentum().to_vec(), records),
                );
                core.checkpoint_saved(id, now);
            }
            Output::Restore(id) => {
                assert!(
                    id.step >= self.max_committed,
                    "rank {r} resumes from {id:?} below committed step {}",
                    self.max_committed
                );
                let node = &mut self.nodes[r];
                let Some((p, m, _)) = node.disk.get(&id).cloned() else {
                    panic!("rank {r} asked to restore {id:?} which it does not hold");
                };
                node.pending.clear();
                self.restores += 1;
                if let Some(c) = node.core.as_mut() {
                    c.restored(p, m, now);
                }
            }
            Output::Commit { through, gen } => {
                let node = &mut self.nodes[r];
                let mut at = node.log.last().map(|(s, _)| *s).unwrap_or(0);
                while at < through {
                    let ckpt = CkptId {
                        step: (at / K + 1) * K,
                        gen,
                    };
                    let Some((_, _, records)) = node.disk.get(&ckpt) else {
                        panic!("rank {r}: commit through {through} needs {ckpt:?}");
                    };
                    let rec = records
                        .get(&(at + 1))
                        .cloned()
                        .expect("record in checkpoint");
                    node.log.push((at + 1, rec.clone()));
                    at += 1;
                    // Every rank commits the same record for a step.
                    let prior = self.committed.entry(at).or_insert(rec.clone());
                    assert_eq!(*prior, rec, "rank {r} committed a different step {at}");
                }
                if let Some(c) = node.core.as_ref() {
                    let keep = c.durable().clone();
                    node.disk.retain(|id, _| keep.contains(id));
                }
                self.max_committed = self.max_committed.max(through);
            }
            Output::Regroup { gen, .. } => self.regroups += u64::from(gen > 0),
        }
    }

    fn step_event(&mut self) -> bool {
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
                let node = &self.nodes[r];
                let committed = node.log.last().map(|(s, _)| *s).unwrap_or(0);
                let disk: Vec<CkptId> = node.disk.keys().copied().collect();
                self.seq += 1;
                let boot = self.seq;
                self.nodes[r].core = Some(Core::new(
                    config(r, self.world),
                    init(r),
                    disk,
                    committed,
                    boot,
                    now,
                ));
                self.flush(r);
            }
        }
        true
    }

    fn maybe_fault(&mut self) {
        if !self.faulty() {
            self.cut.clear();
            return;
        }
        if self.faults.crash && self.rng.gen_bool(0.01) {
            let r = self.rng.gen_range(0..self.world);
            if self.nodes[r].core.is_some() {
                self.at(0, Ev::Crash(r));
                let down = self.rng.gen_range(10..400);
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

    fn run(&mut self, bound_ms: i64) {
        while self.now < bound_ms && self.step_event() {
            let done = self.nodes.iter().all(|n| {
                n.log.len() as u64 == MAX_STEP
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

/// The digests of a failure-free run.
fn reference(world: usize) -> BTreeMap<u64, String> {
    let mut sim = Sim::new(
        world,
        0,
        Faults {
            drop: 0.0,
            crash: false,
            partition: false,
            until: 0,
        },
    );
    sim.run(60_000);
    assert_eq!(
        sim.committed.len() as u64,
        MAX_STEP,
        "failure-free run finishes"
    );
    sim.committed
}

/// Runs one faulty simulation and checks it; returns (restores, regroups).
fn check_run(
    world: usize,
    seed: u64,
    faults: Faults,
    reference: &BTreeMap<u64, String>,
) -> (u64, u64) {
    let mut sim = Sim::new(world, seed, faults);
    sim.run(300_000);
    for (r, n) in sim.nodes.iter().enumerate() {
        let steps: Vec<u64> = n.log.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            steps,
            (1..=MAX_STEP).collect::<Vec<_>>(),
            "seed {seed}: rank {r} committed every step once, in order"
        );
        for (s, d) in &n.log {
            assert_eq!(
                Some(d),
                reference.get(s),
                "seed {seed}: rank {r} step {s} differs from the failure-free run"
            );
        }
    }
    (sim.restores, sim.regroups)
}

/// Crashes with restarts from disk (torchrun's elastic restart), delays and reordering.
#[test]
fn crashes_never_roll_back_or_split_a_committed_step() {
    for world in [2, 3, 4] {
        let reference = reference(world);
        let mut seen = (0, 0);
        for seed in 0..12 {
            let faults = Faults {
                drop: 0.0,
                crash: true,
                partition: false,
                until: 20_000,
            };
            let (restores, regroups) = check_run(world, seed, faults, &reference);
            seen = (seen.0 + restores, seen.1 + regroups);
        }
        assert!(
            seen.0 > 0 && seen.1 > 0,
            "the faults caused recoveries: {seen:?}"
        );
    }
}

/// Lost messages and partitions (a cut-off rank) abort steps and re-form the group.
#[test]
fn loss_and_partitions_never_split_a_committed_step() {
    for world in [3, 4] {
        let reference = reference(world);
        let mut seen = (0, 0);
        for seed in 100..110 {
            let faults = Faults {
                drop: 0.02,
                crash: true,
                partition: true,
                until: 20_000,
            };
            let (restores, regroups) = check_run(world, seed, faults, &reference);
            seen = (seen.0 + restores, seen.1 + regroups);
        }
        eprintln!("world {world}: {} restores, {} regroups", seen.0, seen.1);
        assert!(
            seen.0 > 0 && seen.1 > 0,
            "the faults caused recoveries: {seen:?}"
        );
    }
}
