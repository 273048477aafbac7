//! Seeded deterministic simulation of N Raft cores under a hostile simulated network.
//!
//! Each schedule runs 3 or 5 [`RaftCore`]s and, step by step, randomly delivers, drops,
//! delays, reorders and duplicates messages, advances time, proposes commands, partitions
//! and heals the network, and crashes nodes and restarts them from exactly the state they
//! had persisted. After every step it checks:
//!
//! - election safety: never two leaders in one term (Raft §5.2);
//! - state machine safety: an index, once applied anywhere, always holds the same entry
//!   (§5.4.3), including entries delivered inside snapshots;
//! - durability of acknowledged writes: an entry a client was told succeeded is the one
//!   committed at its index.
//!
//! The correct configuration must survive every schedule; each core bug must be caught
//! within a bounded number of schedules (the failing seed is printed, so a run can be
//! replayed with `SIM_SEED=<seed>`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use splitbrain_kv::core::{
    Apply, Config, CoreBugs, Entry, HardState, Message, NodeId, Persisted, RaftCore, Role,
    StorageOp,
};
use std::collections::BTreeMap;

/// What a schedule may do and which bugs are on.
#[derive(Clone, Copy, Debug)]
struct SimSpec {
    nodes: u64,
    steps: usize,
    bugs: CoreBugs,
    /// Clients are answered at propose time instead of at commit (the
    /// `ack-before-commit` bug is node policy; this models it).
    ack_before_commit: bool,
    /// Persisted state reaches "disk" only every `flush_every` steps; a crash loses the
    /// rest (the `no-fsync` bug).
    no_fsync: bool,
    drop: f64,
    duplicate: f64,
    max_delay: i64,
    crash: f64,
    partition: f64,
}

impl SimSpec {
    fn correct(nodes: u64, steps: usize) -> Self {
        SimSpec {
            nodes,
            steps,
            bugs: CoreBugs::default(),
            ack_before_commit: false,
            no_fsync: false,
            drop: 0.05,
            duplicate: 0.03,
            max_delay: 40,
            crash: 0.01,
            partition: 0.01,
        }
    }
}

/// Counters over all schedules, printed to show the schedules did real work.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    schedules: u64,
    elections: u64,
    committed: u64,
    crashes: u64,
    snapshots_installed: u64,
    messages: u64,
}

type Record = (u64, Vec<u8>);

struct SimNode {
    core: Option<RaftCore>,
    durable: Persisted,
    /// Outputs not yet on "disk" (only with `no_fsync`).
    volatile: Vec<(Option<HardState>, Vec<StorageOp>)>,
    /// Applied entries (index, term, data): the simulated state machine.
    sm: Vec<(u64, u64, Vec<u8>)>,
    /// This node's proposals as leader, by index, awaiting acknowledgement.
    proposals: BTreeMap<u64, Record>,
}

struct Flight {
    at: i64,
    from: NodeId,
    to: NodeId,
    msg: Message,
}

struct Sim {
    spec: SimSpec,
    rng: ChaCha8Rng,
    seed: u64,
    now: i64,
    nodes: Vec<SimNode>,
    net: Vec<Flight>,
    group: Vec<u8>,
    leaders: BTreeMap<u64, NodeId>,
    committed: BTreeMap<u64, Record>,
    acked: BTreeMap<u64, Record>,
    next_value: u64,
    stats: Stats,
}

fn core_config(spec: &SimSpec, id: NodeId, seed: u64) -> Config {
    let mut cfg = Config::new(id, (1..=spec.nodes).collect(), seed);
    cfg.election_timeout_ms = 100;
    cfg.heartbeat_ms = 20;
    cfg.lease_ms = 80;
    cfg.max_drift_ms = 10;
    cfg.max_batch = 8;
    cfg.bugs = spec.bugs;
    cfg
}

/// Applies storage outputs to a persisted image, as the real storage does.
fn persist(image: &mut Persisted, hard_state: Option<HardState>, ops: Vec<StorageOp>) {
    if let Some(hs) = hard_state {
        image.hard_state = hs;
    }
    for op in ops {
        match op {
            StorageOp::Append(entries) => {
                for e in entries {
                    let base = image.snapshot.as_ref().map_or(0, |s| s.index);
                    if e.index <= base {
                        continue;
                    }
                    let pos = (e.index - base - 1) as usize;
                    if pos > image.entries.len() {
                        continue;
                    }
                    image.entries.truncate(pos);
                    image.entries.push(e);
                }
            }
            StorageOp::Snapshot { snapshot, retained } => {
                image.snapshot = Some(snapshot);
                image.entries = retained;
            }
        }
    }
}

impl Sim {
    fn new(seed: u64, spec: SimSpec) -> Self {
        let nodes = (1..=spec.nodes)
            .map(|id| SimNode {
                core: Some(RaftCore::new(
                    core_config(&spec, id, seed),
                    Persisted::default(),
                    0,
                )),
                durable: Persisted::default(),
                volatile: Vec::new(),
                sm: Vec::new(),
                proposals: BTreeMap::new(),
            })
            .collect();
        Sim {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed),
            seed,
            now: 0,
            nodes,
            net: Vec::new(),
            group: vec![0; spec.nodes as usize],
            leaders: BTreeMap::new(),
            committed: BTreeMap::new(),
            acked: BTreeMap::new(),
            next_value: 0,
            stats: Stats::default(),
        }
    }

    fn run(&mut self) -> Result<(), String> {
        for step in 0..self.spec.steps {
            self.act(step);
            for i in 0..self.nodes.len() {
                self.process(i, step)?;
            }
            self.check_leaders()
                .map_err(|e| format!("step {step}: {e}"))?;
        }
        self.stats.schedules = 1;
        Ok(())
    }

    fn act(&mut self, step: usize) {
        let roll: f64 = self.rng.gen();
        let spec = self.spec;
        // Faults favour the leader half of the time: that is where the interesting
        // histories (uncommitted entries left behind, figure 8) come from.
        let leader = self
            .nodes
            .iter()
            .position(|n| n.core.as_ref().is_some_and(|c| c.role() == Role::Leader));
        if roll < spec.crash {
            let i = match leader {
                Some(l) if self.rng.gen_bool(0.5) => l,
                _ => self.rng.gen_range(0..self.nodes.len()),
            };
            if self.nodes[i].core.is_some() {
                self.crash(i);
            }
        } else if roll < spec.crash + spec.partition {
            let kind = self.rng.gen_range(0..3);
            if kind == 0 {
                self.group.iter_mut().for_each(|g| *g = 0);
            } else if let (1, Some(l)) = (kind, leader) {
                self.group.iter_mut().for_each(|g| *g = 0);
                self.group[l] = 1;
            } else {
                for g in self.group.iter_mut() {
                    *g = self.rng.gen_range(0..2);
                }
            }
        } else if roll < 0.08 {
            let crashed: Vec<usize> = (0..self.nodes.len())
                .filter(|&i| self.nodes[i].core.is_none())
                .collect();
            if !crashed.is_empty() {
                let i = crashed[self.rng.gen_range(0..crashed.len())];
                self.restart(i);
            }
        } else if roll < 0.23 {
            let i = self.rng.gen_range(0..self.nodes.len());
            self.propose(i);
        } else if roll < 0.50 {
            self.now += self.rng.gen_range(1..=15);
            let now = self.now;
            for node in self.nodes.iter_mut() {
                if let Some(core) = node.core.as_mut() {
                    core.tick(now);
                }
            }
        } else {
            self.deliver();
        }
        if spec.no_fsync && step.is_multiple_of(25) {
            for node in self.nodes.iter_mut() {
                for (hs, ops) in node.volatile.drain(..) {
                    persist(&mut node.durable, hs, ops);
                }
            }
        }
    }

    fn crash(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        node.core = None;
        node.volatile.clear();
        node.sm.clear();
        node.proposals.clear();
        self.stats.crashes += 1;
    }

    fn restart(&mut self, i: usize) {
        let id = i as u64 + 1;
        let cfg = core_config(&self.spec, id, self.seed.wrapping_add(self.now as u64));
        let node = &mut self.nodes[i];
        node.sm = node
            .durable
            .snapshot
            .as_ref()
            .and_then(|s| serde_json::from_slice(&s.data).ok())
            .unwrap_or_default();
        node.core = Some(RaftCore::new(cfg, node.durable.clone(), self.now));
    }

    fn propose(&mut self, i: usize) {
        let now = self.now;
        self.next_value += 1;
        let data = self.next_value.to_le_bytes().to_vec();
        let Some(core) = self.nodes[i].core.as_mut() else {
            return;
        };
        if let Ok((index, term)) = core.propose(now, data.clone()) {
            self.nodes[i].proposals.insert(index, (term, data));
        }
    }

    /// Delivers a random number of due messages, in random order (reordering).
    fn deliver(&mut self) {
        let burst = self.rng.gen_range(1..=12);
        for _ in 0..burst {
            self.deliver_one();
        }
    }

    fn deliver_one(&mut self) {
        let due: Vec<usize> = (0..self.net.len())
            .filter(|&k| self.net[k].at <= self.now)
            .collect();
        if due.is_empty() {
            self.now += 1;
            return;
        }
        let k = due[self.rng.gen_range(0..due.len())];
        let duplicate = self.rng.gen_bool(self.spec.duplicate);
        let flight = if duplicate {
            let f = &self.net[k];
            Flight {
                at: f.at,
                from: f.from,
                to: f.to,
                msg: f.msg.clone(),
            }
        } else {
            self.net.swap_remove(k)
        };
        let (from, to) = ((flight.from - 1) as usize, (flight.to - 1) as usize);
        if self.rng.gen_bool(self.spec.drop) || self.group[from] != self.group[to] {
            return;
        }
        self.stats.messages += 1;
        let now = self.now;
        if let Some(core) = self.nodes[to].core.as_mut() {
            core.step(now, flight.from, flight.msg);
        }
    }

    /// Persists, sends and applies one node's outputs, checking safety as it goes.
    fn process(&mut self, i: usize, step: usize) -> Result<(), String> {
        let Some(core) = self.nodes[i].core.as_mut() else {
            return Ok(());
        };
        let ready = core.take_ready();
        let id = core.id();
        let snap_index = core.log().snap_index();
        let applied_index = core.applied_index();
        let spec = self.spec;
        let node = &mut self.nodes[i];
        if spec.no_fsync {
            node.volatile.push((ready.hard_state, ready.storage));
        } else {
            persist(&mut node.durable, ready.hard_state, ready.storage);
        }
        for (to, msg) in ready.messages {
            let at = self.now + self.rng.gen_range(0..=spec.max_delay);
            self.net.push(Flight {
                at,
                from: id,
                to,
                msg,
            });
        }
        if spec.ack_before_commit {
            for (index, record) in std::mem::take(&mut self.nodes[i].proposals) {
                self.ack(index, record)
                    .map_err(|e| format!("step {step}: {e}"))?;
            }
        }
        for item in ready.apply {
            match item {
                Apply::Entry(Entry { term, index, data }) => {
                    self.commit(index, (term, data.clone()))
                        .map_err(|e| format!("step {step}: node {id}: {e}"))?;
                    self.nodes[i].sm.push((index, term, data.clone()));
                    if self.nodes[i].proposals.get(&index) == Some(&(term, data.clone())) {
                        self.nodes[i].proposals.remove(&index);
                        self.ack(index, (term, data))
                            .map_err(|e| format!("step {step}: {e}"))?;
                    }
                }
                Apply::Snapshot(snapshot) => {
                    self.stats.snapshots_installed += 1;
                    let sm: Vec<(u64, u64, Vec<u8>)> =
                        serde_json::from_slice(&snapshot.data).map_err(|e| e.to_string())?;
                    for (index, term, data) in &sm {
                        self.commit(*index, (*term, data.clone()))
                            .map_err(|e| format!("step {step}: node {id} snapshot: {e}"))?;
                    }
                    self.nodes[i].sm = sm;
                }
            }
        }
        if applied_index >= snap_index + 10 {
            let data = serde_json::to_vec(&self.nodes[i].sm).map_err(|e| e.to_string())?;
            if let Some(core) = self.nodes[i].core.as_mut() {
                core.compact(applied_index, data);
            }
        }
        Ok(())
    }

    fn commit(&mut self, index: u64, record: Record) -> Result<(), String> {
        match self.committed.get(&index) {
            Some(existing) if *existing != record => {
                return Err(format!(
                    "committed entry changed at index {index}: term {} then term {}",
                    existing.0, record.0
                ))
            }
            Some(_) => return Ok(()),
            None => {}
        }
        if let Some(acked) = self.acked.get(&index) {
            if *acked != record {
                return Err(format!(
                    "acknowledged write lost at index {index} (term {})",
                    acked.0
                ));
            }
        }
        self.stats.committed += 1;
        self.committed.insert(index, record);
        Ok(())
    }

    fn ack(&mut self, index: u64, record: Record) -> Result<(), String> {
        if let Some(c) = self.committed.get(&index) {
            if *c != record {
                return Err(format!(
                    "acknowledged write lost at index {index} (term {})",
                    record.0
                ));
            }
        }
        self.acked.insert(index, record);
        Ok(())
    }

    fn check_leaders(&mut self) -> Result<(), String> {
        for node in &self.nodes {
            let Some(core) = node.core.as_ref() else {
                continue;
            };
            if core.role() != Role::Leader {
                continue;
            }
            match self.leaders.get(&core.term()) {
                Some(&other) if other != core.id() => {
                    return Err(format!(
                        "two leaders in term {}: {} and {}",
                        core.term(),
                        other,
                        core.id()
                    ))
                }
                Some(_) => {}
                None => {
                    self.stats.elections += 1;
                    self.leaders.insert(core.term(), core.id());
                }
            }
        }
        Ok(())
    }
}

/// Runs `count` schedules from `first_seed` on two threads; returns the stats and the
/// failures (seed, message), sorted by seed.
fn run_many(
    first_seed: u64,
    count: u64,
    spec: SimSpec,
    stop_at_first: bool,
) -> (Stats, Vec<(u64, String)>) {
    let worker = |offset: u64| {
        let mut stats = Stats::default();
        let mut failures = Vec::new();
        let mut seed = first_seed + offset;
        while seed < first_seed + count {
            let mut sim = Sim::new(seed, spec);
            let result = sim.run();
            stats.schedules += 1;
            stats.elections += sim.stats.elections;
            stats.committed += sim.stats.committed;
            stats.crashes += sim.stats.crashes;
            stats.snapshots_installed += sim.stats.snapshots_installed;
            stats.messages += sim.stats.messages;
            if let Err(e) = result {
                failures.push((seed, e));
                if stop_at_first {
                    break;
                }
            }
            seed += 2;
        }
        (stats, failures)
    };
    let (a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| worker(1));
        let a = worker(0);
        (a, h.join().unwrap_or_default())
    });
    let stats = Stats {
        schedules: a.0.schedules + b.0.schedules,
        elections: a.0.elections + b.0.elections,
        committed: a.0.committed + b.0.committed,
        crashes: a.0.crashes + b.0.crashes,
        snapshots_installed: a.0.snapshots_installed + b.0.snapshots_installed,
        messages: a.0.messages + b.0.messages,
    };
    let mut failures = [a.1, b.1].concat();
    failures.sort();
    (stats, failures)
}

fn replay_seed() -> Option<u64> {
    std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok())
}

fn assert_correct(nodes: u64, count: u64, steps: usize) {
    let spec = SimSpec::correct(nodes, steps);
    let (first, count) = replay_seed().map_or((0, count), |s| (s, 1));
    let (stats, failures) = run_many(first, count, spec, false);
    println!("{nodes} nodes, correct: {stats:?}");
    assert!(
        failures.is_empty(),
        "safety violated: {:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(
        stats.elections > stats.schedules,
        "schedules should elect leaders"
    );
    assert!(
        stats.committed > stats.schedules * 5,
        "schedules should commit entries"
    );
}

#[test]
fn three_nodes_stay_safe_over_6000_schedules() {
    assert_correct(3, 6000, 1200);
}

#[test]
fn five_nodes_stay_safe_over_4000_schedules() {
    assert_correct(5, 4000, 1500);
}

/// Runs up to `budget` schedules of a bugged spec; the bug must show.
fn assert_caught(name: &str, spec: SimSpec, budget: u64) {
    let (stats, failures) = run_many(0, budget, spec, true);
    let Some((seed, error)) = failures.first() else {
        panic!("{name}: no violation in {} schedules", stats.schedules);
    };
    println!(
        "{name}: caught with seed {seed} (after ~{} schedules): {error}",
        stats.schedules
    );
    // Control: the same schedules without the bug are safe, so the bug is the cause.
    let fixed = SimSpec {
        bugs: CoreBugs::default(),
        ack_before_commit: false,
        no_fsync: false,
        ..spec
    };
    let (_, control) = run_many(0, seed + 1, fixed, true);
    assert!(
        control.is_empty(),
        "{name}: control run failed too: {control:?}"
    );
}

#[test]
fn bug_vote_without_log_check_is_caught() {
    let mut spec = SimSpec::correct(5, 400);
    spec.bugs.vote_without_log_check = true;
    spec.crash = 0.03;
    spec.partition = 0.03;
    assert_caught("vote-without-log-check", spec, 3000);
}

#[test]
fn bug_commit_old_term_is_caught() {
    let mut spec = SimSpec::correct(5, 2000);
    spec.bugs.commit_old_term = true;
    spec.crash = 0.02;
    spec.partition = 0.02;
    assert_caught("commit-old-term", spec, 3000);
}

#[test]
fn bug_ack_before_commit_is_caught() {
    let mut spec = SimSpec::correct(3, 300);
    spec.ack_before_commit = true;
    spec.bugs.lazy_replication = true;
    spec.partition = 0.03;
    assert_caught("ack-before-commit", spec, 2000);
}

#[test]
fn bug_no_fsync_is_caught() {
    let mut spec = SimSpec::correct(3, 400);
    spec.no_fsync = true;
    spec.crash = 0.04;
    assert_caught("no-fsync", spec, 3000);
}
