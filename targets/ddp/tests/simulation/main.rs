//! The rank core under a seeded simulated network: random delays and reordering, message
//! loss, partitions, and crashes with restarts from the simulated disk.
//!
//! Properties (the elastic-recovery contract of torchrun-style rendezvous, and DDP's
//! replica consistency, issue 12):
//! - a committed step is never rolled back: every resume point is at or after every step
//!   any rank has committed, and nobody starts from scratch once anything is committed;
//! - every rank commits the same record for a step (same digest), gap-free, and it is the
//!   digest of the failure-free run of the same steps (recovery is exact);
//! - once faults stop, every member of a committed step commits it: no step is committed
//!   by some members and not by others, also across shrinking and growing the group
//!   (torchrun's elastic rendezvous with `--nnodes=MIN:MAX`);
//! - the committed steps equal a single-process replay of the same member sequence
//!   (the average divides by the group's size), and over the committed steps every data
//!   position of an epoch is used exactly once, whatever the group sizes were.

mod sim;

use sim::{config, grad, init, Faults, Sim, DATASET, MAX_STEP, NEVER, PARAMS};
use splitbrain_ddp::core::ring::reference_average;
use splitbrain_ddp::core::{Bugs, Core};
use splitbrain_ddp::model::digest;
use std::collections::BTreeMap;

/// The single-process replay of the committed member sequence: the first member's
/// initial parameters, each step's gradients of its members in ring order, averaged as
/// the ring does (divided by the group's size), SGD with momentum. Digests by step.
fn replay(world: usize, members: &BTreeMap<u64, Vec<usize>>) -> BTreeMap<u64, String> {
    let cfg = config(0, world, NEVER, Bugs::default());
    let first = members
        .get(&1)
        .and_then(|m| m.first().copied())
        .unwrap_or(0);
    let mut params = init(first);
    let mut momentum = vec![0.0f32; PARAMS];
    let mut out = BTreeMap::new();
    for (step, group) in members {
        let grads: Vec<Vec<f32>> = group.iter().map(|r| grad(&params, *r, *step)).collect();
        let mut avg = vec![0.0f32; PARAMS];
        for b in &cfg.buckets {
            let parts: Vec<&[f32]> = grads.iter().map(|g| &g[b.clone()]).collect();
            avg[b.clone()].copy_from_slice(&reference_average(&parts));
        }
        Core::sgd(&mut params, &mut momentum, &avg, cfg.lr, cfg.momentum);
        out.insert(*step, digest(&params));
    }
    out
}

/// What one faulty run showed.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    restores: u64,
    regroups: u64,
    /// Committed steps run by fewer than all ranks.
    shrunk_steps: u64,
    /// Times the committed member set changed between consecutive steps.
    changes: u64,
}

/// Runs one faulty simulation and checks it (module docs); a bug may make the replay
/// differ, which is returned rather than asserted.
fn run_checked(
    world: usize,
    seed: u64,
    faults: Faults,
    shrink_after_ms: i64,
    bugs: Bugs,
) -> (Seen, Option<String>) {
    let mut sim = Sim::new(world, seed, faults, shrink_after_ms, bugs);
    sim.run(400_000);
    assert_eq!(
        sim.committed.keys().copied().collect::<Vec<_>>(),
        (1..=MAX_STEP).collect::<Vec<_>>(),
        "seed {seed}: every step committed"
    );
    // Every member of a committed step logged it, with the same record; nobody else did.
    for (r, n) in sim.nodes.iter().enumerate() {
        let steps: Vec<u64> = n.log.iter().map(|(s, _)| *s).collect();
        let want: Vec<u64> = sim
            .committed
            .iter()
            .filter(|(_, (_, m))| m.contains(&r))
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(
            steps, want,
            "seed {seed}: rank {r} logged exactly the steps it was a member of, once, in order"
        );
    }
    // Exactly-once data over the committed steps, across group changes.
    let mut used: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for n in &sim.nodes {
        for (step, rec) in &n.log {
            for p in &rec.positions {
                if let Some(prev) = used.insert((rec.epoch, *p), *step) {
                    panic!(
                        "seed {seed}: epoch {} position {p} used at steps {prev} and {step}",
                        rec.epoch
                    );
                }
            }
        }
    }
    let last_epoch = used.keys().map(|(e, _)| *e).max().unwrap_or(0);
    for e in 0..last_epoch {
        for p in 0..DATASET {
            assert!(
                used.contains_key(&(e, p)),
                "seed {seed}: epoch {e} position {p} never used"
            );
        }
    }
    let members: BTreeMap<u64, Vec<usize>> = sim
        .committed
        .iter()
        .map(|(s, (_, m))| (*s, m.clone()))
        .collect();
    let reference = replay(world, &members);
    let mismatch = sim
        .committed
        .iter()
        .find(|(s, (d, _))| reference.get(s) != Some(d))
        .map(|(s, (d, m))| {
            format!(
                "step {s} (members {m:?}): {d} vs replay {:?}",
                reference.get(s)
            )
        });
    let seen = Seen {
        restores: sim.restores,
        regroups: sim.regroups,
        shrunk_steps: members.values().filter(|m| m.len() < world).count() as u64,
        changes: members
            .values()
            .zip(members.values().skip(1))
            .filter(|(a, b)| a != b)
            .count() as u64,
    };
    (seen, mismatch)
}

fn add(a: Seen, b: Seen) -> Seen {
    Seen {
        restores: a.restores + b.restores,
        regroups: a.regroups + b.regroups,
        shrunk_steps: a.shrunk_steps + b.shrunk_steps,
        changes: a.changes + b.changes,
    }
}

fn faults(drop: f64, crash: bool, partition: bool, max_down_ms: i64) -> Faults {
    Faults {
        drop,
        crash,
        partition,
        until: 20_000,
        max_down_ms,
    }
}

/// Runs `seeds` with the faults `faults(seed)` and a correct core, asserting that each
/// run equals the replay of its member sequence; sums what the runs showed.
fn run_seeds(
    world: usize,
    seeds: std::ops::Range<u64>,
    faults: impl Fn(u64) -> Faults,
    shrink_after_ms: i64,
) -> Seen {
    let mut seen = Seen::default();
    for seed in seeds {
        if std::env::var("SIM_TRACE").is_ok() {
            eprintln!("run world {world} seed {seed}");
        }
        let (s, mismatch) =
            run_checked(world, seed, faults(seed), shrink_after_ms, Bugs::default());
        assert_eq!(
            mismatch, None,
            "world {world} seed {seed}: the run equals the replay"
        );
        seen = add(seen, s);
    }
    eprintln!("world {world}: {seen:?}");
    seen
}

/// Crashes with restarts from disk (torchrun's elastic restart), delays and reordering;
/// the group waits for the restarted rank.
#[test]
fn crashes_never_roll_back_or_split_a_committed_step() {
    for world in [2, 3, 4] {
        let seen = run_seeds(world, 0..12, |_| faults(0.0, true, false, 400), NEVER);
        assert_eq!(
            seen.shrunk_steps, 0,
            "never shrinks without a rejoin timeout"
        );
        assert!(
            seen.restores > 0 && seen.regroups > 0,
            "the faults caused recoveries: {seen:?}"
        );
    }
}

/// Lost messages and partitions (a cut-off rank) abort steps and re-form the group.
#[test]
fn loss_and_partitions_never_split_a_committed_step() {
    for world in [3, 4] {
        let seen = run_seeds(world, 100..110, |_| faults(0.02, true, true, 400), NEVER);
        assert!(
            seen.restores > 0 && seen.regroups > 0,
            "the faults caused recoveries: {seen:?}"
        );
    }
}

/// Elastic shrink and grow (torchrun's rendezvous with `--nnodes=MIN:MAX`): ranks down
/// (up to 2 s) or cut off for longer than the rejoin timeout (150 ms) are left out, the
/// others go on from the newest checkpoint with the smaller group, and a rank that comes
/// back joins the next group from the state a member sends it. Under crashes, loss and
/// partitions: no committed step is seen by one member and not another, the data of each
/// epoch is used exactly once across the changes, and the result equals the replay of
/// the committed member sequence.
#[test]
fn shrink_and_grow_keep_every_committed_step_whole() {
    for world in [3, 4, 5] {
        let f = |seed: u64| faults(0.01, true, seed.is_multiple_of(2), 2_000);
        let seen = run_seeds(world, 200..212, f, 150);
        assert!(
            seen.shrunk_steps > 0 && seen.changes > 1,
            "the groups shrank and grew again: {seen:?}"
        );
    }
}

/// The `shrink-without-rescale` bug: after a shrink the average divides by the full
/// world size, so the committed steps differ from the replay of the member sequence
/// (what `ddp-reference` reports), while every member still agrees.
#[test]
fn shrink_without_rescale_differs_from_the_replay() {
    let bugs = Bugs {
        shrink_without_rescale: true,
        ..Bugs::default()
    };
    let mut caught = 0;
    for seed in 300..306 {
        let (s, mismatch) = run_checked(4, seed, faults(0.0, true, false, 2_000), 150, bugs);
        if s.shrunk_steps > 0 {
            assert!(mismatch.is_some(), "seed {seed}: a shrunk step differs");
            caught += 1;
        } else {
            assert_eq!(
                mismatch, None,
                "seed {seed}: without a shrink the bug is silent"
            );
        }
    }
    assert!(caught > 0, "some run shrank");
}
