//! Seeded deterministic simulation: the sans-IO cores of 3 nodes under a hostile simulated
//! network (loss, delay, reordering), partitions, and crashes that keep only what was
//! fsync'd, running many concurrent multi-key append txns.
//!
//! After a fault phase the network heals, crashed nodes restart, and the cluster runs
//! until quiet. Then the final per-key lists are checked:
//!
//! - atomicity: a txn answered ok has its append on every key it appended to; a txn
//!   answered fail has it nowhere; a txn with no answer (its coordinator crashed) has it
//!   everywhere or nowhere; no append appears twice;
//! - reads of committed txns are prefixes of the final lists (no dirty reads);
//! - one serial order: the write-write order of each key's list, plus each committed
//!   read's place in it, form an acyclic graph.
//!
//! The correct configuration must pass every schedule; each bug that the simulator can
//! exercise must break one of these within a bounded number of schedules (failing seeds
//! are printed; replay one with `SIM_SEED=<seed>`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use splitbrain_txn::core::{Bugs, Core, CoreConfig, Output};
use splitbrain_txn::types::{Key, Message, NodeId, Op, OpKind, Record, TxnReply, Val};
use std::collections::BTreeMap;

#[path = "simulation/check.rs"]
mod check;
use check::{check, Outcome, Txn, Violation};

const NODES: u64 = 3;
/// Keys 0..KEYS hold append lists; counters (never funded) live at 1000..1003.
const KEYS: i64 = 12;

#[derive(Clone, Copy, Debug)]
struct Spec {
    bugs: Bugs,
    fault_ms: i64,
    drop: f64,
    max_delay: i64,
    /// Chance per millisecond that some node crashes.
    crash: f64,
    /// Chance per millisecond that some node is cut off.
    partition: f64,
    /// Fraction of txns forced to abort after their writes (an unfunded `add`).
    doomed: f64,
    in_doubt_ms: i64,
    concurrency: usize,
}

impl Spec {
    fn correct() -> Spec {
        Spec {
            bugs: Bugs::default(),
            fault_ms: 20_000,
            drop: 0.05,
            max_delay: 30,
            crash: 0.0004,
            partition: 0.0004,
            doomed: 0.2,
            in_doubt_ms: 1000,
            concurrency: 5,
        }
    }
}

struct Node {
    core: Option<Core>,
    cfg: CoreConfig,
    /// The WAL as written; only `synced` records survive a crash.
    log: Vec<Record>,
    synced: usize,
    /// `no-prepare-fsync`: records still in the user-space buffer.
    buffer: Vec<Record>,
    down_until: i64,
}

struct Flight {
    at: i64,
    from: NodeId,
    to: NodeId,
    msg: Message,
}

#[derive(Default, Debug, Clone, Copy)]
struct Stats {
    ok: u64,
    fail: u64,
    unknown: u64,
    crashes: u64,
    partitions: u64,
    messages: u64,
}

struct Sim {
    spec: Spec,
    rng: ChaCha8Rng,
    now: i64,
    nodes: Vec<Node>,
    flights: Vec<Flight>,
    /// Node cut off from all others until the given time.
    cut: Option<(NodeId, i64)>,
    txns: BTreeMap<u64, Txn>,
    next_req: u64,
    stats: Stats,
}

impl Sim {
    fn new(spec: Spec, seed: u64) -> Sim {
        let nodes = (1..=NODES)
            .map(|id| {
                let mut cfg = CoreConfig::new(id, NODES);
                cfg.bugs = spec.bugs;
                cfg.in_doubt_timeout_ms = spec.in_doubt_ms;
                Node {
                    core: Some(Core::new(cfg.clone(), &[], 0)),
                    cfg,
                    log: Vec::new(),
                    synced: 0,
                    buffer: Vec::new(),
                    down_until: 0,
                }
            })
            .collect();
        let mut sim = Sim {
            spec,
            rng: ChaCha8Rng::seed_from_u64(seed),
            now: 0,
            nodes,
            flights: Vec::new(),
            cut: None,
            txns: BTreeMap::new(),
            next_req: 1,
            stats: Stats::default(),
        };
        for id in 1..=NODES {
            sim.collect(id, true);
        }
        sim
    }

    fn node(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id as usize - 1]
    }

    /// Executes a node's outputs: log (forced records sync the file), sends, replies.
    fn collect(&mut self, id: NodeId, reliable: bool) {
        let outputs = match self.node(id).core.as_mut() {
            Some(core) => core.take_outputs(),
            None => return,
        };
        let lazy = self.spec.bugs.no_prepare_fsync;
        for out in outputs {
            match out {
                Output::Log { record, force } => {
                    let node = self.node(id);
                    if lazy && !force {
                        node.buffer.push(record);
                    } else {
                        node.log.push(record);
                        if force {
                            node.synced = node.log.len();
                        }
                    }
                }
                Output::Send { to, msg } => {
                    self.stats.messages += 1;
                    if !reliable && self.rng.gen_bool(self.spec.drop) {
                        continue;
                    }
                    let at = self.now + self.rng.gen_range(1..=self.spec.max_delay);
                    self.flights.push(Flight {
                        at,
                        from: id,
                        to,
                        msg,
                    });
                }
                Output::Reply { req, reply } => {
                    if let Some(txn) = self.txns.get_mut(&req) {
                        txn.outcome = match reply {
                            TxnReply::Ok(results) => {
                                self.stats.ok += 1;
                                Outcome::Ok(results)
                            }
                            TxnReply::Fail { error, detail } => {
                                if std::env::var("SIM_DEBUG").is_ok() {
                                    eprintln!("{} fail {error} {detail}", self.now);
                                }
                                self.stats.fail += 1;
                                Outcome::Fail
                            }
                        };
                    }
                }
            }
        }
    }

    fn submit(&mut self) {
        let coordinator = self.rng.gen_range(1..=NODES);
        if self.node(coordinator).core.is_none() {
            return;
        }
        let req = self.next_req;
        self.next_req += 1;
        let tag = req as i64;
        let mut keys: Vec<i64> = (0..KEYS).collect();
        let count = self.rng.gen_range(2..=3);
        let mut ops = Vec::new();
        let mut appends = Vec::new();
        for _ in 0..count {
            let k = keys.swap_remove(self.rng.gen_range(0..keys.len()));
            if self.rng.gen_bool(0.5) {
                ops.push(Op {
                    f: OpKind::Read,
                    key: Key::Int(k),
                    value: None,
                });
            }
            ops.push(Op {
                f: OpKind::Append,
                key: Key::Int(k),
                value: Some(tag),
            });
            appends.push(k);
        }
        if self.rng.gen_bool(self.spec.doomed) {
            let counter = 1000 + self.rng.gen_range(0..3);
            ops.push(Op {
                f: OpKind::Add,
                key: Key::Int(counter),
                value: Some(-1),
            });
        }
        self.txns.insert(
            req,
            Txn {
                tag,
                coordinator,
                appends,
                outcome: Outcome::Pending,
            },
        );
        let now = self.now;
        if let Some(core) = self.node(coordinator).core.as_mut() {
            core.client_txn(req, ops, now);
        }
        self.collect(coordinator, false);
    }

    fn crash(&mut self, id: NodeId) {
        self.stats.crashes += 1;
        let down = self.rng.gen_range(100..2000);
        let now = self.now;
        let node = self.node(id);
        node.core = None;
        node.log.truncate(node.synced);
        node.buffer.clear();
        node.down_until = now + down;
        for txn in self.txns.values_mut() {
            if txn.coordinator == id && matches!(txn.outcome, Outcome::Pending) {
                txn.outcome = Outcome::Unknown;
                self.stats.unknown += 1;
            }
        }
    }

    fn restart(&mut self, id: NodeId) {
        let now = self.now;
        let node = self.node(id);
        node.core = Some(Core::new(node.cfg.clone(), &node.log, now));
        self.collect(id, false);
    }

    fn blocked(&self, from: NodeId, to: NodeId) -> bool {
        matches!(self.cut, Some((n, until)) if self.now < until && (n == from || n == to))
    }

    /// One millisecond of simulated time.
    fn step(&mut self, faults: bool) {
        self.now += 1;
        let now = self.now;
        if faults {
            if self.rng.gen_bool(self.spec.crash) {
                let id = self.rng.gen_range(1..=NODES);
                if self.node(id).core.is_some() {
                    self.crash(id);
                }
            }
            if self.rng.gen_bool(self.spec.partition) && self.cut.is_none_or(|(_, u)| u <= now) {
                self.stats.partitions += 1;
                let until = now + self.rng.gen_range(200..3000);
                self.cut = Some((self.rng.gen_range(1..=NODES), until));
            }
            let pending = self
                .txns
                .values()
                .filter(|t| matches!(t.outcome, Outcome::Pending))
                .count();
            if pending < self.spec.concurrency && self.rng.gen_bool(0.2) {
                self.submit();
            }
        }
        for id in 1..=NODES {
            let node = self.node(id);
            if node.core.is_none() && (now >= node.down_until || !faults) {
                self.restart(id);
            }
        }
        // The no-prepare-fsync buffer reaches the file (not fsync'd) about once a second.
        if now % 1000 == 0 {
            for node in &mut self.nodes {
                let buffered = std::mem::take(&mut node.buffer);
                node.log.extend(buffered);
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
                self.collect(f.to, !faults);
            }
        }
        for id in 1..=NODES {
            if let Some(core) = self.node(id).core.as_mut() {
                core.tick(now);
                self.collect(id, !faults);
            }
        }
    }

    fn quiet(&self) -> bool {
        self.flights.is_empty()
            && self
                .nodes
                .iter()
                .all(|n| n.core.as_ref().is_some_and(Core::is_quiet))
    }

    fn run(&mut self) -> Vec<Violation> {
        for _ in 0..self.spec.fault_ms {
            self.step(true);
        }
        self.cut = None;
        // Heal: no loss, everyone up; bounded time to settle.
        let mut settled = false;
        for _ in 0..60_000 {
            self.step(false);
            if self.quiet() {
                settled = true;
                break;
            }
        }
        let mut violations = check(&self.final_lists(), self.txns.values());
        if !settled {
            violations.push(Violation::NotQuiet);
        }
        violations
    }

    fn final_lists(&self) -> BTreeMap<i64, Vec<i64>> {
        let mut lists = BTreeMap::new();
        for k in 0..KEYS {
            let key = Key::Int(k);
            let owner = &self.nodes[key.owner(NODES) as usize - 1];
            let list = match owner.core.as_ref().and_then(|c| c.committed_value(&key)) {
                Some(Val::List(l)) => l.clone(),
                _ => Vec::new(),
            };
            lists.insert(k, list);
        }
        lists
    }
}

fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    match std::env::var("SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(seed) => vec![seed],
        None => default.collect(),
    }
}

#[test]
fn correct_mode_is_atomic_and_serializable_under_faults() {
    check_correct("default faults", Spec::correct(), 0..30);
}

#[test]
fn correct_mode_survives_the_schedules_that_break_the_bugs() {
    // The harshest settings the bug tests use, together: slow links, impatient in-doubt
    // participants, frequent crashes.
    let mut spec = Spec::correct();
    spec.in_doubt_ms = 100;
    spec.max_delay = 150;
    spec.crash = 0.003;
    spec.doomed = 0.4;
    check_correct("harsh faults", spec, 100..115);
}

fn check_correct(name: &str, spec: Spec, default_seeds: std::ops::Range<u64>) {
    let mut total = Stats::default();
    for seed in seeds(default_seeds) {
        let mut sim = Sim::new(spec, seed);
        let violations = sim.run();
        assert!(
            violations.is_empty(),
            "seed {seed}: {violations:?} (stats {:?})",
            sim.stats
        );
        total.ok += sim.stats.ok;
        total.fail += sim.stats.fail;
        total.unknown += sim.stats.unknown;
        total.crashes += sim.stats.crashes;
        total.partitions += sim.stats.partitions;
        total.messages += sim.stats.messages;
    }
    println!("correct mode, {name}: {total:?}");
    // The schedules did real work: commits, aborts, crashes and partitions all happened.
    assert!(total.ok > 50 && total.fail > 10, "{total:?}");
    assert!(total.crashes > 0 && total.partitions > 0, "{total:?}");
}

/// Runs schedules with `spec` until one shows a violation `wanted` accepts; returns it.
fn expect_violation(name: &str, spec: Spec, wanted: impl Fn(&Violation) -> bool) {
    for seed in seeds(0..20) {
        let mut sim = Sim::new(spec, seed);
        let violations = sim.run();
        if let Some(found) = violations.iter().find(|v| wanted(v)) {
            println!(
                "{name}: seed {seed} found {found:?} (all: {} violations)",
                violations.len()
            );
            return;
        }
    }
    panic!("{name}: no schedule showed the expected violation");
}

#[test]
fn dirty_read_bug_reads_aborted_writes() {
    let mut spec = Spec::correct();
    spec.bugs.dirty_read = true;
    spec.fault_ms = 10_000;
    spec.doomed = 0.4;
    expect_violation("dirty-read", spec, |v| {
        matches!(v, Violation::ReadNotPrefix(_))
    });
}

#[test]
fn early_lock_release_bug_loses_updates() {
    let mut spec = Spec::correct();
    spec.bugs.early_lock_release = true;
    spec.fault_ms = 10_000;
    spec.max_delay = 60;
    expect_violation("early-lock-release", spec, |v| {
        matches!(
            v,
            Violation::LostCommittedWrite(_) | Violation::Cycle | Violation::PartialCommit(_)
        )
    });
}

#[test]
fn unilateral_abort_bug_commits_partially() {
    let mut spec = Spec::correct();
    spec.bugs.unilateral_abort = true;
    spec.in_doubt_ms = 100;
    spec.max_delay = 150;
    spec.fault_ms = 10_000;
    expect_violation("unilateral-abort", spec, |v| {
        matches!(
            v,
            Violation::LostCommittedWrite(_) | Violation::PartialCommit(_)
        )
    });
}

#[test]
fn no_prepare_fsync_bug_forgets_prepared_txns_in_crashes() {
    let mut spec = Spec::correct();
    spec.bugs.no_prepare_fsync = true;
    spec.crash = 0.003;
    spec.partition = 0.0;
    spec.fault_ms = 10_000;
    expect_violation("no-prepare-fsync", spec, |v| {
        matches!(
            v,
            Violation::LostCommittedWrite(_) | Violation::PartialCommit(_)
        )
    });
}
