//! Seeded deterministic simulation: the sans-IO cores of 3 Bayou replicas under a hostile
//! simulated network (loss, duplication, delay, reordering), partitions, and crash-restarts
//! that keep only what was written to disk, with client sessions that switch replicas
//! while adding set elements, incrementing counters and booking rooms.
//!
//! After the fault phase the network heals, crashed replicas restart and the group runs
//! until it converges (bounded). Checked (see `simulation/check.rs`):
//!
//! - every replica ends identical: the same committed count, nothing tentative, the same
//!   value for every key — so the same log order and committed prefix (SOSP'95 §5:
//!   eventual consistency through anti-entropy and the primary's commit order);
//! - no acknowledged write is lost (each acknowledged element and reservation is in the
//!   final value; a counter is at least the sum of its acknowledged increments);
//! - the committed prefix never changes: once any replica showed write w at CSN c, no
//!   replica ever shows another write at c (SOSP'95 §5: committed order is final);
//! - no double booking: no [room, slot] held by two reservations (SOSP'95 §4);
//! - session guarantees (Terry et al. 1994): a session's read shows what it wrote
//!   (read-your-writes) and what it read before (monotonic reads).
//!
//! The correct configuration must pass every schedule; each bug knob must break the
//! invariant it targets on some seed (the seed is printed; replay one with `SIM_SEED=<n>`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use splitbrain_bayou::core::{Bugs, Core, CoreConfig, Effect, Reply, Request};
use splitbrain_bayou::types::{Checkpoint, Message, Op, Record, ReplicaId, Session};
use std::collections::BTreeSet;

#[path = "simulation/check.rs"]
mod check;
use check::{Acked, Observer, Stats, Violation};
#[path = "simulation/history.rs"]
mod history;

const NODES: u64 = 3;
const SET_KEYS: [&str; 2] = ["s0", "s1"];
const COUNTER: &str = "c0";
const SCHEDULES: [&str; 2] = ["b0", "b1"];
const SESSIONS: usize = 6;
/// Simulated time allowed for convergence after the heal.
const HEAL_BOUND_MS: i64 = 5_000;

#[derive(Clone, Copy, Debug)]
struct Spec {
    bugs: Bugs,
    fault_ms: i64,
    drop: f64,
    dup: f64,
    max_delay: i64,
    /// Chance per millisecond that a replica crashes.
    crash: f64,
    /// Chance per millisecond that a crash hits the primary.
    crash_primary: f64,
    /// Chance per millisecond that a partition starts.
    partition: f64,
    /// Chance per millisecond that an idle session issues a request.
    rate: f64,
    checkpoint_every: u64,
}

impl Spec {
    fn correct() -> Spec {
        Spec {
            bugs: Bugs::default(),
            fault_ms: 8_000,
            drop: 0.1,
            dup: 0.05,
            max_delay: 40,
            crash: 0.0005,
            crash_primary: 0.0002,
            partition: 0.0006,
            rate: 0.05,
            checkpoint_every: 40,
        }
    }

    /// No faults at all (a bug test then turns on the one fault that exposes it).
    fn quiet(bugs: Bugs) -> Spec {
        Spec {
            bugs,
            drop: 0.0,
            dup: 0.0,
            crash: 0.0,
            crash_primary: 0.0,
            partition: 0.0,
            ..Spec::correct()
        }
    }
}

struct Node {
    core: Option<Core>,
    cfg: CoreConfig,
    /// The disk: the driver writes every record before a message or reply leaves, so a
    /// crash between calls keeps exactly these.
    checkpoint: Option<Checkpoint>,
    log: Vec<Record>,
    down_until: i64,
}

struct Flight {
    at: i64,
    from: ReplicaId,
    to: ReplicaId,
    msg: Message,
}

/// A client session: its vectors, and the request it waits on (at most one).
#[derive(Default)]
struct Client {
    session: Session,
    waiting: Option<(u64, ReplicaId, Request)>,
}

struct Sim {
    spec: Spec,
    rng: ChaCha8Rng,
    now: i64,
    nodes: Vec<Node>,
    flights: Vec<Flight>,
    /// Replicas on one side of a partition, until the given time.
    cut: Option<(BTreeSet<ReplicaId>, i64)>,
    clients: Vec<Client>,
    next_req: u64,
    next_value: i64,
    observer: Observer,
    stats: Stats,
    /// The run's client ops as a Jepsen history.
    history: history::Recorder,
}

impl Sim {
    fn new(spec: Spec, seed: u64) -> Sim {
        let nodes = (1..=NODES)
            .map(|id| {
                let mut cfg = CoreConfig::new(id, NODES);
                cfg.bugs = spec.bugs;
                cfg.checkpoint_every = spec.checkpoint_every;
                cfg.max_batch = 64;
                Node {
                    core: Some(Core::new(cfg.clone(), None, &[], 0)),
                    cfg,
                    checkpoint: None,
                    log: Vec::new(),
                    down_until: 0,
                }
            })
            .collect();
        Sim {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed),
            now: 0,
            nodes,
            flights: Vec::new(),
            cut: None,
            clients: (0..SESSIONS).map(|_| Client::default()).collect(),
            next_req: 1,
            next_value: 1,
            observer: Observer::default(),
            stats: Stats::default(),
            history: history::Recorder::new(SESSIONS),
        }
    }

    fn node(&mut self, id: ReplicaId) -> &mut Node {
        &mut self.nodes[id as usize - 1]
    }

    /// Executes a replica's effects: disk, then sends (lossy unless healed), then replies.
    fn collect(&mut self, id: ReplicaId, faults: bool) {
        let effects = match self.node(id).core.as_mut() {
            Some(core) => core.take_effects(),
            None => return,
        };
        for effect in effects {
            match effect {
                // A crash here is a process kill: unsynced notes reached the OS too.
                Effect::Append(record) | Effect::Note(record) => self.node(id).log.push(record),
                Effect::Checkpoint { checkpoint, log } => {
                    self.stats.checkpoints += 1;
                    let node = self.node(id);
                    node.checkpoint = Some(checkpoint);
                    node.log = log;
                }
                Effect::Send { to, msg } => self.send(id, to, msg, faults),
                Effect::Reply { req, reply } => self.on_reply(req, reply),
            }
        }
    }

    fn send(&mut self, from: ReplicaId, to: ReplicaId, msg: Message, faults: bool) {
        self.stats.messages += 1;
        if faults && self.rng.gen_bool(self.spec.drop) {
            self.stats.dropped += 1;
            return;
        }
        let copies = if faults && self.rng.gen_bool(self.spec.dup) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.now + self.rng.gen_range(1..=self.spec.max_delay);
            self.flights.push(Flight {
                at,
                from,
                to,
                msg: msg.clone(),
            });
        }
    }

    fn on_reply(&mut self, req: u64, reply: Reply) {
        let Some(c) = self
            .clients
            .iter()
            .position(|c| matches!(c.waiting, Some((r, _, _)) if r == req))
        else {
            self.history.unclaimed(req, &reply, self.now);
            return;
        };
        let Some((_, node, request)) = self.clients[c].waiting.take() else {
            return;
        };
        self.history.reply(c, &request, node, &reply, self.now);
        match (reply, request) {
            (Reply::Written { wid, vv: _ }, Request::Write { key, op, .. }) => {
                self.stats.writes_acked += 1;
                let w = &mut self.clients[c].session.write;
                let e = w.entry(wid.replica).or_insert(0);
                *e = (*e).max(wid.stamp);
                self.observer.acked(c, Acked { wid, key, op });
            }
            (Reply::Read { value, vv }, Request::Read { key, .. }) => {
                self.stats.reads_ok += 1;
                for (r, s) in vv {
                    let e = self.clients[c].session.read.entry(r).or_insert(0);
                    *e = (*e).max(s);
                }
                self.observer.read(c, node, &key, &value, self.now);
            }
            (Reply::Fail { error }, _) if error == "session-behind" => {
                self.stats.session_behind += 1;
            }
            _ => {}
        }
    }

    fn submit(&mut self, c: usize) {
        let node = self.rng.gen_range(1..=NODES);
        if self.node(node).core.is_none() {
            return;
        }
        let v = self.next_value;
        self.next_value += 1;
        let session = self.clients[c].session.clone();
        let request = match self.rng.gen_range(0..10) {
            0..=2 => Request::Write {
                key: SET_KEYS[self.rng.gen_range(0..SET_KEYS.len())].into(),
                op: Op::Add { element: v },
                session,
            },
            3 => Request::Write {
                key: COUNTER.into(),
                op: Op::Incr {
                    delta: self.rng.gen_range(0..5),
                },
                session,
            },
            4..=5 => {
                // Few rooms and slots: concurrent reservations conflict.
                let alternatives = (0..self.rng.gen_range(1..=3))
                    .map(|_| (self.rng.gen_range(1..=2), self.rng.gen_range(1..=8)))
                    .collect();
                Request::Write {
                    key: SCHEDULES[self.rng.gen_range(0..SCHEDULES.len())].into(),
                    op: Op::Book {
                        id: v,
                        alternatives,
                    },
                    session,
                }
            }
            _ => Request::Read {
                key: SET_KEYS[self.rng.gen_range(0..SET_KEYS.len())].into(),
                kind: None,
                session,
            },
        };
        let req = self.next_req;
        self.next_req += 1;
        self.clients[c].waiting = Some((req, node, request.clone()));
        let now = self.now;
        self.history.invoke(c, &request, node, now);
        if let Some(core) = self.node(node).core.as_mut() {
            core.client(req, request, now);
        }
        self.collect(node, true);
    }

    fn crash(&mut self, id: ReplicaId) {
        if self.node(id).core.is_none() {
            return;
        }
        self.stats.crashes += 1;
        let down = self.rng.gen_range(50..1500);
        let now = self.now;
        let node = self.node(id);
        node.core = None;
        node.down_until = now + down;
        for (i, c) in self.clients.iter_mut().enumerate() {
            if let Some((_, n, request)) = c.waiting.take_if(|(_, n, _)| *n == id) {
                self.history.lost(i, &request, n, now);
                self.stats.unknown += 1;
            }
        }
    }

    fn restart(&mut self, id: ReplicaId, faults: bool) {
        let now = self.now;
        let node = self.node(id);
        node.core = Some(Core::new(
            node.cfg.clone(),
            node.checkpoint.clone(),
            &node.log,
            now,
        ));
        self.collect(id, faults);
    }

    fn blocked(&self, from: ReplicaId, to: ReplicaId) -> bool {
        matches!(&self.cut, Some((side, until)) if self.now < *until && side.contains(&from) != side.contains(&to))
    }

    /// One millisecond of simulated time.
    fn step(&mut self, faults: bool) {
        self.now += 1;
        let now = self.now;
        if faults {
            if self.rng.gen_bool(self.spec.crash) {
                let id = self.rng.gen_range(1..=NODES);
                self.crash(id);
            }
            if self.rng.gen_bool(self.spec.crash_primary) {
                let primary = self.nodes[0].cfg.primary;
                self.crash(primary);
            }
            if self.rng.gen_bool(self.spec.partition)
                && self.cut.as_ref().is_none_or(|(_, u)| *u <= now)
            {
                self.stats.partitions += 1;
                let until = now + self.rng.gen_range(200..2500);
                let side = (1..=NODES).filter(|_| self.rng.gen_bool(0.5)).collect();
                self.cut = Some((side, until));
            }
            for c in 0..SESSIONS {
                if self.clients[c].waiting.is_none() && self.rng.gen_bool(self.spec.rate) {
                    self.submit(c);
                }
            }
        }
        for id in 1..=NODES {
            let node = self.node(id);
            if node.core.is_none() && (now >= node.down_until || !faults) {
                self.restart(id, faults);
            }
        }
        // Deliver what is due, in random order (reordering).
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.flights.len() {
            if self.flights[i].at <= now {
                due.push(self.flights.swap_remove(i));
            } else {
                i += 1;
            }
        }
        for j in (1..due.len()).rev() {
            due.swap(j, self.rng.gen_range(0..=j));
        }
        for f in due {
            if self.blocked(f.from, f.to) {
                continue;
            }
            if let Some(core) = self.node(f.to).core.as_mut() {
                core.receive(f.from, f.msg, now);
                self.collect(f.to, faults);
            }
        }
        for id in 1..=NODES {
            if let Some(core) = self.node(id).core.as_mut() {
                core.tick(now);
                self.collect(id, faults);
            }
        }
        for node in &self.nodes {
            if let Some(core) = &node.core {
                self.observer.committed(core);
            }
        }
    }

    fn cores(&self) -> Vec<&Core> {
        self.nodes.iter().filter_map(|n| n.core.as_ref()).collect()
    }

    fn run(&mut self) -> Vec<Violation> {
        for _ in 0..self.spec.fault_ms {
            self.step(true);
        }
        self.cut = None;
        self.history.heal(self.now);
        // Heal: no loss, everyone up; bounded time to converge.
        let healed = self.now;
        let mut converged = false;
        for _ in 0..HEAL_BOUND_MS {
            self.step(false);
            if self.now % 25 == 0 && check::identical(&self.cores()).is_empty() {
                converged = true;
                self.stats.converge_ms = self.now - healed;
                break;
            }
        }
        let mut violations = self.observer.final_check(&self.cores());
        if !converged {
            violations.push(Violation::NotConverged);
        }
        violations
    }
}

fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => default.collect(),
    }
}

#[test]
fn correct_mode_converges_and_keeps_every_guarantee_under_faults() {
    let mut total = Stats::default();
    let count = seeds(0..30).len();
    for seed in seeds(0..30) {
        let mut sim = Sim::new(Spec::correct(), seed);
        let violations = sim.run();
        assert!(
            violations.is_empty(),
            "seed {seed}: {:?} (stats {:?})",
            &violations[..violations.len().min(5)],
            sim.stats
        );
        total.add(&sim.stats);
    }
    println!("correct mode, {count} seeds: {total:?}, 0 violations");
    // The schedules did real work: writes, reads, waits, crashes, partitions, checkpoints.
    assert!(
        total.writes_acked > 1000 && total.reads_ok > 500,
        "{total:?}"
    );
    assert!(total.crashes > 0 && total.partitions > 0, "{total:?}");
    assert!(total.checkpoints > 0 && total.duplicated > 0, "{total:?}");
}

/// Runs 10 schedules with `spec` (or `SIM_SEED`); at least one must show a violation
/// `wanted` accepts. Prints how many did, and the first.
fn expect_violation(name: &str, spec: Spec, wanted: impl Fn(&Violation) -> bool) {
    let seeds = seeds(0..10);
    let mut hits = Vec::new();
    for &seed in &seeds {
        let mut sim = Sim::new(spec, seed);
        let violations = sim.run();
        if std::env::var("SIM_DEBUG").is_ok() {
            eprintln!(
                "{name} seed {seed}: {:?}",
                &violations[..violations.len().min(4)]
            );
        }
        if let Some(found) = violations.iter().find(|v| wanted(v)) {
            hits.push((seed, found.clone(), sim.stats));
        }
    }
    println!("{name}: {} of {} seeds broken", hits.len(), seeds.len());
    if let Some((seed, found, stats)) = hits.first() {
        println!("{name}: first, seed {seed}: {found:?} (stats {stats:?})");
    }
    assert!(
        !hits.is_empty(),
        "{name}: no schedule showed the expected violation"
    );
}

#[test]
fn no_rollback_bug_makes_booking_schedules_diverge() {
    // No fault needed: concurrent conflicting bookings arrive in different orders.
    let spec = Spec::quiet(Bugs {
        no_rollback: true,
        ..Bugs::default()
    });
    expect_violation(
        "no-rollback",
        spec,
        |v| matches!(v, Violation::Diverged(k) if k.starts_with('b')),
    );
}

#[test]
fn lose_tentative_bug_loses_acknowledged_writes_in_crashes() {
    let bugs = Bugs {
        lose_tentative: true,
        ..Bugs::default()
    };
    let spec = Spec {
        crash: 0.002,
        ..Spec::quiet(bugs)
    };
    expect_violation("lose-tentative", spec, |v| {
        matches!(v, Violation::LostWrite(..))
    });
}

#[test]
fn reorder_commit_bug_changes_the_committed_prefix_when_the_primary_restarts() {
    let bugs = Bugs {
        reorder_commit: true,
        ..Bugs::default()
    };
    let spec = Spec {
        crash_primary: 0.001,
        ..Spec::quiet(bugs)
    };
    expect_violation("reorder-commit", spec, |v| {
        matches!(v, Violation::PrefixChanged { .. })
    });
}

#[test]
fn stale_commit_sync_bug_leaves_replicas_disagreeing_on_the_committed_order() {
    // No fault needed: writes held tentatively never learn their CSN.
    let spec = Spec::quiet(Bugs {
        stale_commit_sync: true,
        ..Bugs::default()
    });
    expect_violation("stale-commit-sync", spec, |v| {
        matches!(v, Violation::Diverged(_) | Violation::NotConverged)
    });
}

#[test]
fn stale_session_bug_breaks_session_guarantees_under_partitions() {
    let bugs = Bugs {
        stale_session: true,
        ..Bugs::default()
    };
    let spec = Spec {
        partition: 0.002,
        ..Spec::quiet(bugs)
    };
    expect_violation("stale-session", spec, |v| {
        matches!(v, Violation::Session { .. })
    });
}

#[test]
fn replicas_with_different_primaries_and_writes_everywhere_still_agree() {
    // The primary is a parameter: with replica 3 committing, correct mode converges too.
    let mut sim = Sim::new(Spec::correct(), 77);
    for node in &mut sim.nodes {
        node.cfg.primary = 3;
        node.core = Some(Core::new(node.cfg.clone(), None, &[], 0));
    }
    let violations = sim.run();
    assert!(violations.is_empty(), "{violations:?}");
    let csn: BTreeSet<u64> = sim.cores().iter().map(|c| c.csn()).collect();
    assert_eq!(csn.len(), 1);
    assert!(sim.stats.writes_acked > 0);
}
