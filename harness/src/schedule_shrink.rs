//! Schedule shrinking: the smallest fault plan and the shortest, lightest run that still
//! fail the same way, searched by replaying candidates against a live cluster.
//!
//! A stored failing run's fault schedule (test.json's `nemesis_schedule`) becomes an
//! explicit plan ([`PlannedFault`]s, what `--nemesis-plan` reads). A [`Candidate`] is that
//! plan with the run's time limit, concurrency, keys and rate. The search, in order:
//!
//! 1. no faults at all (a bug that fails without them shrinks to an empty plan at once);
//! 2. the original candidate, to see that the failure reproduces at all;
//! 3. delta debugging over the plan's events (Zeller and Hildebrandt, TSE 2002): keep one
//!    chunk alone or drop one, splitting finer until the chunks are single events;
//! 4. each remaining event shortened: its duration halved while it still fails;
//! 5. the time limit halved while it still fails (events that would start after a
//!    shorter time limit are dropped);
//! 6. each remaining event moved later: its start moved by half the gap between its end
//!    and the run's end while it still fails;
//! 7. the concurrency, the keys in use and the rate, each halved while it still fails.
//!
//! Real clusters are not deterministic: a candidate is replayed up to `replays` times and
//! kept when a majority of them fail the same way (replaying stops as soon as that is
//! decided either way); the final candidate's replay rate is then measured over `confirm`
//! runs. Every step is bounded by the budget, which also
//! keeps time for the confirmation runs. The runs themselves go through a [`Replayer`]
//! (the CLI's replays the run's [`TestSpec`] with the controller), so the search here is
//! tested with a fake one.

use crate::run::spec::TestSpec;
use serde::Serialize;
use splitbrain_nemesis::{Nemesis, NemesisSpec, PlannedFault};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One point of the search: a fault plan and the run's size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The fault events, in start order.
    pub plan: Vec<PlannedFault>,
    /// Seconds of the main phase.
    pub time_limit_s: f64,
    /// Concurrent client workers.
    pub concurrency: usize,
    /// Keys in use at once.
    pub active_keys: usize,
    /// Target ops per second over all clients (0 = unlimited).
    pub rate: f64,
}

impl Candidate {
    /// The candidate a stored run was: its plan and its spec's sizes.
    pub fn of_spec(spec: &TestSpec, plan: Vec<PlannedFault>) -> Candidate {
        Candidate {
            plan,
            time_limit_s: spec.time_limit_s,
            concurrency: spec.concurrency,
            active_keys: spec.active_keys,
            rate: spec.rate,
        }
    }

    /// `base` running this candidate, its plan read from `plan_file` (which the caller
    /// writes with [`Candidate::plan`]). Seed, target, workload and bugs stay the base's.
    pub fn apply(&self, base: &TestSpec, plan_file: &Path) -> TestSpec {
        let mut spec = base.clone();
        spec.nemesis = NemesisSpec::from_plan(self.plan.clone()).faults;
        spec.nemesis_plan = Some(plan_file.to_path_buf());
        spec.nemesis_schedule = serde_json::Value::Null;
        spec.time_limit_s = self.time_limit_s;
        spec.concurrency = self.concurrency;
        spec.active_keys = self.active_keys;
        spec.rate = self.rate;
        spec
    }

    /// `2 events, 10 s, 10 clients, 8 keys, 200 ops/s`.
    pub fn label(&self) -> String {
        let rate = if self.rate > 0.0 {
            format!("{} ops/s", trim_float(self.rate))
        } else {
            "unlimited rate".to_string()
        };
        format!(
            "{} event{}, {} s, {} client{}, {} key{}, {rate}",
            self.plan.len(),
            if self.plan.len() == 1 { "" } else { "s" },
            trim_float(self.time_limit_s),
            self.concurrency,
            if self.concurrency == 1 { "" } else { "s" },
            self.active_keys,
            if self.active_keys == 1 { "" } else { "s" },
        )
    }

    fn with_plan(&self, plan: Vec<PlannedFault>) -> Candidate {
        Candidate {
            plan,
            ..self.clone()
        }
    }
}

/// `10` for 10.0, `2.5` for 2.5.
fn trim_float(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The fault plan a stored run followed: its recorded schedule (test.json's
/// `nemesis_schedule`), or, for a test.json written before schedules were stored, the
/// schedule its plan file or seed derives, as the controller derives it. Only events that
/// start before the time limit: later ones never ran.
pub fn plan_of_spec(spec: &TestSpec) -> anyhow::Result<Vec<PlannedFault>> {
    let mut plan: Vec<PlannedFault> = if spec.nemesis_schedule.is_null() {
        Nemesis::new(spec.nemesis_spec()?)
            .with_node_names(spec.node_names())
            .schedule(spec.nodes, Duration::from_secs_f64(spec.time_limit_s))
    } else {
        serde_json::from_value(spec.nemesis_schedule.clone()).map_err(|e| {
            anyhow::anyhow!("test.json's nemesis_schedule is not a list of planned faults: {e}")
        })?
    };
    let end_ms = (spec.time_limit_s * 1000.0) as u64;
    plan.retain(|f| f.at_ms < end_ms);
    plan.sort_by_key(|f| f.at_ms);
    Ok(plan)
}

/// What one replay of a candidate did.
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    /// Whether a checker found it invalid in the class being kept.
    pub same_failure: bool,
    /// The run's verdict (`valid`, `invalid`, `unknown`) or why it could not run.
    pub verdict: String,
    /// The replay's run directory, when it ran.
    pub run_dir: Option<PathBuf>,
    /// Client operations in its history.
    pub ops: usize,
    /// Wall-clock seconds the replay took (start, run, heal, check).
    pub seconds: f64,
}

impl Replay {
    /// The verdict as the progress line shows it, marked when it is the failure kept.
    fn outcome(&self) -> String {
        if self.same_failure {
            format!("{} (same failure)", self.verdict)
        } else {
            self.verdict.clone()
        }
    }
}

/// Runs candidates. The CLI's replays a stored run's spec against a live cluster; tests
/// use a fake.
pub trait Replayer {
    /// Runs `candidate` once. An error is a replay that could not run (it does not fail
    /// the same way); the search goes on.
    fn replay(&mut self, candidate: &Candidate) -> anyhow::Result<Replay>;
}

/// How far a schedule shrink may go.
#[derive(Debug, Clone)]
pub struct ScheduleBounds {
    /// Most replays of each candidate; it is kept when a majority fail the same way.
    pub replays: usize,
    /// Replays of the final candidate that measure its replay rate.
    pub confirm: usize,
    /// The most time the whole shrink may take, confirmation included.
    pub budget: Duration,
    /// A fault is not shortened below this.
    pub min_event_ms: u64,
    /// The time limit is not halved below this.
    pub min_time_limit_s: f64,
}

impl Default for ScheduleBounds {
    fn default() -> Self {
        ScheduleBounds {
            replays: 3,
            confirm: 5,
            budget: Duration::from_secs(1800),
            min_event_ms: 250,
            min_time_limit_s: 1.0,
        }
    }
}

/// One step of the search: a candidate tried.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// 1, 2, ...
    pub step: usize,
    /// What was tried: `no faults`, `original`, `drop events`, `shorten event`,
    /// `time limit`, `move later`, `concurrency`, `keys`, `rate`, and `confirm` for a
    /// best candidate given up after its confirmation runs.
    pub phase: String,
    /// The candidate, as [`Candidate::label`] says it.
    pub candidate: String,
    /// Replays run.
    pub replays: usize,
    /// Replays that failed the same way.
    pub failures: usize,
    /// Whether the candidate became the best so far (a majority of the replays asked
    /// for failed the same way).
    pub kept: bool,
    /// Whether the budget ended its replays before a majority was reached or out of
    /// reach: not kept, but not shown not to fail either.
    pub undecided: bool,
}

/// How a schedule shrink ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// A candidate was kept (a majority of its replays failed the same way): `after` is
    /// the smallest such candidate.
    Reproduced,
    /// The original was replayed until a majority of its replays could no longer fail
    /// the same way: the failure did not reproduce; nothing is shrunk.
    NotReproduced,
    /// The budget ended before the original's replays decided whether it reproduces:
    /// nothing is shrunk, and the confirmation runs (if the budget held any) measure the
    /// original's replay rate. Never reported as "did not reproduce".
    BudgetEnded,
}

/// What a schedule shrink found.
#[derive(Debug, Clone, Serialize)]
pub struct ScheduleShrunk {
    /// The stored run's candidate.
    pub before: Candidate,
    /// The smallest candidate that failed the same way (the original if none smaller
    /// did, or if the failure never reproduced).
    pub after: Candidate,
    /// Whether a candidate was kept (a majority of its replays failed the same way);
    /// when not, `after` is the original, shrunk by nothing.
    pub reproduced: bool,
    /// How the shrink ended: kept a candidate, showed that the failure does not
    /// reproduce, or ran out of budget before it could tell.
    pub outcome: Outcome,
    /// Confirmation runs asked for (`--confirm`).
    pub confirm_asked: usize,
    /// Every candidate tried, in order.
    pub steps: Vec<Step>,
    /// Confirmation replays of `after` that failed the same way.
    pub confirm_failed: usize,
    /// Confirmation replays run (fewer than asked when the budget ran out).
    pub confirm_runs: usize,
    /// Whether the budget ended the confirmation runs before `confirm_asked`.
    pub confirm_cut: bool,
    /// What ended the search early, if anything (the budget).
    pub stopped_by: Option<String>,
    /// The last replay of `after` that failed the same way: its history is the one to
    /// shrink further.
    #[serde(skip)]
    pub failing_replay: Option<Replay>,
    /// Seconds the shrink took (replays included).
    pub seconds: f64,
}

/// What the replays of one candidate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    /// A majority failed the same way.
    Kept,
    /// A majority could no longer fail the same way.
    Rejected,
    /// The budget ended the replays before either.
    Undecided,
}

struct Search<'a, R: Replayer> {
    replayer: &'a mut R,
    bounds: &'a ScheduleBounds,
    progress: &'a mut dyn FnMut(&str),
    started: Instant,
    /// Seconds spent in replays, as they report it; the budget counts the larger of
    /// this and the wall clock.
    replay_seconds: f64,
    /// The most a replay took beyond its time limit (start, heal, quiesce, check).
    overhead_s: f64,
    /// Every replay run, with the seconds it took and `overhead_s` just after it: what
    /// confirming a candidate costs.
    measured: Vec<(Candidate, f64, f64)>,
    steps: Vec<Step>,
    stopped_by: Option<String>,
    best: Candidate,
    failing: Option<Replay>,
    /// The candidates kept before `best`, in order, each with its failing replay: the
    /// confirmation steps back along them when `best` fails in too few of its runs.
    earlier: Vec<(Candidate, Option<Replay>)>,
}

impl<R: Replayer> Search<'_, R> {
    fn spent_s(&self) -> f64 {
        self.started
            .elapsed()
            .as_secs_f64()
            .max(self.replay_seconds)
    }

    /// What one replay of `c` may take when it passes: its whole time limit and the
    /// most any replay took beyond its own.
    fn cost_s(&self, c: &Candidate) -> f64 {
        c.time_limit_s + self.overhead_s
    }

    /// What one confirmation run of `c` is expected to take: the longest of its replays
    /// so far, plus however much further past its time limit a replay has run since
    /// (the machine got busier), or [`Search::cost_s`] before it has any. A candidate is
    /// confirmed after a majority of its replays failed, and a failing replay of a run
    /// that stops at the first anomaly ends early: a 40 s run that fails at 14 s costs
    /// 14 s and its start and check, not 40 s and theirs.
    fn confirm_cost_s(&self, c: &Candidate) -> f64 {
        self.measured
            .iter()
            .filter(|(m, _, _)| m == c)
            .map(|(_, s, overhead_then)| s + (self.overhead_s - overhead_then))
            .reduce(f64::max)
            .unwrap_or_else(|| self.cost_s(c))
    }

    /// Whether the budget allows a replay of `c` and still the confirmation of the best.
    fn affordable(&mut self, c: &Candidate) -> bool {
        if self.stopped_by.is_some() {
            return false;
        }
        let reserve = self.bounds.confirm as f64 * self.confirm_cost_s(&self.best);
        let need = self.spent_s() + self.cost_s(c) + reserve;
        let budget = self.bounds.budget.as_secs_f64();
        if need > budget {
            self.stopped_by = Some(format!(
                "the budget of {} s: {:.0} s spent, the next replay needs about {:.0} s and the {} confirmation runs {:.0} s",
                trim_float(budget),
                self.spent_s(),
                self.cost_s(c),
                self.bounds.confirm,
                reserve
            ));
            return false;
        }
        true
    }

    fn run_once(&mut self, c: &Candidate) -> Replay {
        let replay = match self.replayer.replay(c) {
            Ok(r) => r,
            Err(e) => Replay {
                same_failure: false,
                verdict: format!("could not run: {e:#}"),
                run_dir: None,
                ops: 0,
                seconds: 0.0,
            },
        };
        self.replay_seconds += replay.seconds;
        self.overhead_s = self.overhead_s.max(replay.seconds - c.time_limit_s);
        self.measured
            .push((c.clone(), replay.seconds, self.overhead_s));
        replay
    }

    /// Replays `c` up to `replays` times; keeps it as the best when a majority of them
    /// fail the same way, and stops replaying once a majority is reached or out of
    /// reach. True when kept; see [`Search::decide`].
    fn attempt(&mut self, phase: &str, c: &Candidate) -> bool {
        self.decide(phase, c) == Decision::Kept
    }

    /// [`Search::attempt`], telling a candidate rejected by its replays from one the
    /// budget left undecided (no replay allowed, or the replays ended before a majority
    /// was reached or out of reach; nothing is recorded when no replay ran).
    fn decide(&mut self, phase: &str, c: &Candidate) -> Decision {
        // A majority, not one of k: with one of k a halving step that fails in a fifth of
        // runs is still kept half the time, so the search drifts to reproductions that
        // rarely fail (1/5 and 2/5 were measured); a majority keeps them above one half.
        let k = self.bounds.replays.max(1);
        let majority = k / 2 + 1;
        let (mut runs, mut failures) = (0, 0);
        let mut failing = None;
        let mut undecided = false;
        while failures < majority && runs - failures <= k - majority {
            if !self.affordable(c) {
                undecided = true;
                break;
            }
            runs += 1;
            let r = self.run_once(c);
            let line = format!(
                "[{:>4.0} s] step {} {phase}: {} - replay {runs}/{k}: {}",
                self.spent_s(),
                self.steps.len() + 1,
                c.label(),
                r.outcome()
            );
            (self.progress)(&line);
            if r.same_failure {
                failures += 1;
                failing = Some(r);
            }
        }
        if runs == 0 {
            return Decision::Undecided;
        }
        let kept = failures >= majority;
        self.steps.push(Step {
            step: self.steps.len() + 1,
            phase: phase.to_string(),
            candidate: c.label(),
            replays: runs,
            failures,
            kept,
            undecided,
        });
        if !kept {
            return if undecided {
                Decision::Undecided
            } else {
                Decision::Rejected
            };
        }
        let before = std::mem::replace(&mut self.best, c.clone());
        let before_failing = std::mem::replace(&mut self.failing, failing);
        if before != *c {
            self.earlier.push((before, before_failing));
        }
        Decision::Kept
    }

    /// Delta debugging over the best candidate's events. The chunks are tried longest
    /// faults first (their summed durations; ties in time order): when either of two
    /// chunks alone still fails, the one kept is the one holding the bug's window open
    /// longest, which replays more often than a fault that barely opens it (kv
    /// `stale-read` kept its 1 s cut over its 2.75 s one and replayed in 2 of 5 runs).
    fn drop_events(&mut self) {
        let mut events = self.best.plan.clone();
        let mut n = 2;
        while events.len() >= 2 && self.stopped_by.is_none() {
            let chunks = split(&events, n);
            let mut reduced = false;
            for (i, chunk) in longest_first(&chunks) {
                let c = self.best.with_plan(chunk.clone());
                if self.attempt("drop events", &c) {
                    events = chunk.clone();
                    n = 2;
                    reduced = true;
                    break;
                }
                // With two chunks, the complement of one is the other, tried next.
                if n > 2 {
                    let rest: Vec<PlannedFault> = chunks
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .flat_map(|(_, ch)| ch.iter().cloned())
                        .collect();
                    let c = self.best.with_plan(rest.clone());
                    if self.attempt("drop events", &c) {
                        events = rest;
                        n = (n - 1).max(2);
                        reduced = true;
                        break;
                    }
                }
            }
            if !reduced {
                if n >= events.len() {
                    break;
                }
                n = (n * 2).min(events.len());
            }
        }
    }

    /// Halves each remaining event's duration while it still fails.
    fn shorten_events(&mut self) {
        for i in 0..self.best.plan.len() {
            loop {
                let half = self.best.plan[i].for_ms / 2;
                if half < self.bounds.min_event_ms || self.stopped_by.is_some() {
                    break;
                }
                let mut plan = self.best.plan.clone();
                plan[i].for_ms = half;
                let c = self.best.with_plan(plan);
                if !self.attempt("shorten event", &c) {
                    break;
                }
            }
        }
    }

    /// Moves each remaining event later, by half the gap between its end and the run's
    /// end, while it still fails: what remains is the latest the fault may come, with
    /// the longest healthy run before it. Moves shorter than `min_event_ms` are not tried.
    fn move_events_later(&mut self) {
        let end_ms = (self.best.time_limit_s * 1000.0) as u64;
        for event in self.best.plan.clone() {
            let mut current = event;
            while self.stopped_by.is_none() {
                let shift = end_ms.saturating_sub(current.at_ms + current.for_ms) / 2;
                if shift < self.bounds.min_event_ms {
                    break;
                }
                let Some(i) = self.best.plan.iter().position(|f| *f == current) else {
                    break;
                };
                let moved = PlannedFault {
                    at_ms: current.at_ms + shift,
                    ..current.clone()
                };
                let mut plan = self.best.plan.clone();
                plan[i] = moved.clone();
                plan.sort_by_key(|f| f.at_ms);
                let c = self.best.with_plan(plan);
                if !self.attempt("move later", &c) {
                    break;
                }
                current = moved;
            }
        }
    }

    /// Halves one size of the run while it still fails.
    fn halve(
        &mut self,
        phase: &str,
        smaller: fn(&Candidate, &ScheduleBounds) -> Option<Candidate>,
    ) {
        while let Some(c) = smaller(&self.best, self.bounds) {
            if !self.attempt(phase, &c) {
                break;
            }
        }
    }

    /// Measures the best candidate's replay rate over `confirm` runs. When a majority of
    /// them cannot fail the same way any more and an earlier kept candidate exists, that
    /// candidate becomes the best again and is measured in turn: a search step can keep a
    /// candidate that fails in fewer than half its runs (two lucky replays of one that
    /// fails in a third of runs come one time in nine, and a search takes tens of steps),
    /// and the reproduction reported should be one that fails in most runs. The
    /// candidates given up are recorded as `confirm` steps, not kept. A candidate is given
    /// up only when the budget still holds the confirmation of both it and the one before;
    /// otherwise its rate is measured in full. Should the budget still end before the
    /// earlier candidate's first run (replays took longer than the estimate), the one
    /// given up is the result again, with the rate measured for it.
    fn confirm_stepping_back(&mut self) -> (usize, usize, bool) {
        let mut given_up: Option<(Candidate, Option<Replay>, usize, usize)> = None;
        loop {
            let n = self.bounds.confirm as f64;
            let give_up = self.earlier.last().is_some_and(|(e, _)| {
                self.spent_s() + n * (self.confirm_cost_s(&self.best) + self.confirm_cost_s(e))
                    <= self.bounds.budget.as_secs_f64()
            });
            let (failed, runs, complete) = self.confirm(give_up);
            if runs == 0 {
                if let Some((c, failing, failed, runs)) = given_up {
                    let line = format!(
                        "[{:>4.0} s] the budget ended before {} could run: back to {}",
                        self.spent_s(),
                        self.best.label(),
                        c.label()
                    );
                    (self.progress)(&line);
                    if let Some(step) = self.steps.last_mut() {
                        step.kept = true;
                    }
                    self.best = c;
                    self.failing = failing;
                    return (failed, runs, true);
                }
            }
            let majority = self.bounds.confirm / 2 + 1;
            if failed >= majority || !give_up || !complete {
                return (failed, runs, complete);
            }
            self.steps.push(Step {
                step: self.steps.len() + 1,
                phase: "confirm".to_string(),
                candidate: self.best.label(),
                replays: runs,
                failures: failed,
                kept: false,
                undecided: false,
            });
            let (earlier, failing) = self.earlier.pop().expect("an earlier candidate");
            let line = format!(
                "[{:>4.0} s] {} failed the same way in {failed} of {runs} runs: back to {}",
                self.spent_s(),
                self.best.label(),
                earlier.label()
            );
            (self.progress)(&line);
            let was = std::mem::replace(&mut self.best, earlier);
            let was_failing = std::mem::replace(&mut self.failing, failing);
            given_up = Some((was, was_failing, failed, runs));
        }
    }

    /// Replays the best candidate up to `confirm` times; with `give_up`, stops once a
    /// majority of the runs can no longer fail the same way. The flag is false when the
    /// budget ended the runs.
    fn confirm(&mut self, give_up: bool) -> (usize, usize, bool) {
        let c = self.best.clone();
        let (mut failed, mut runs) = (0, 0);
        let out_of_reach = self
            .bounds
            .confirm
            .saturating_sub(self.bounds.confirm / 2 + 1);
        while runs < self.bounds.confirm && !(give_up && runs - failed > out_of_reach) {
            // The reserve kept for confirmation was an estimate: only the hard budget
            // stops it.
            if self.spent_s() + self.confirm_cost_s(&c) > self.bounds.budget.as_secs_f64() {
                self.stopped_by
                    .get_or_insert_with(|| "the budget, during the confirmation runs".to_string());
                return (failed, runs, false);
            }
            runs += 1;
            let r = self.run_once(&c);
            let line = format!(
                "[{:>4.0} s] confirm {runs}/{}: {}: {}",
                self.spent_s(),
                self.bounds.confirm,
                c.label(),
                r.outcome()
            );
            (self.progress)(&line);
            if r.same_failure {
                failed += 1;
                self.failing = Some(r);
            }
        }
        (failed, runs, true)
    }
}

/// The chunks with their indices, those whose faults last longest in sum first; equal
/// sums keep their order.
fn longest_first(chunks: &[Vec<PlannedFault>]) -> Vec<(usize, &Vec<PlannedFault>)> {
    let mut order: Vec<(usize, &Vec<PlannedFault>)> = chunks.iter().enumerate().collect();
    order.sort_by_key(|(_, c)| std::cmp::Reverse(c.iter().map(|f| f.for_ms).sum::<u64>()));
    order
}

/// `items` in `n` contiguous chunks of near-equal size (none empty).
fn split<T: Clone>(items: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.clamp(1, items.len().max(1));
    let mut chunks = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (items.len() - start) / (n - i);
        chunks.push(items[start..end].to_vec());
        start = end;
    }
    chunks.retain(|c| !c.is_empty());
    chunks
}

fn shorter_run(c: &Candidate, b: &ScheduleBounds) -> Option<Candidate> {
    let t = (c.time_limit_s / 2.0).max(b.min_time_limit_s);
    if t >= c.time_limit_s {
        return None;
    }
    let end_ms = (t * 1000.0) as u64;
    Some(Candidate {
        time_limit_s: t,
        plan: c
            .plan
            .iter()
            .filter(|f| f.at_ms < end_ms)
            .cloned()
            .collect(),
        ..c.clone()
    })
}

fn fewer_clients(c: &Candidate, _: &ScheduleBounds) -> Option<Candidate> {
    (c.concurrency > 1).then(|| Candidate {
        concurrency: c.concurrency / 2,
        ..c.clone()
    })
}

fn fewer_keys(c: &Candidate, _: &ScheduleBounds) -> Option<Candidate> {
    (c.active_keys > 1).then(|| Candidate {
        active_keys: c.active_keys / 2,
        ..c.clone()
    })
}

fn lower_rate(c: &Candidate, _: &ScheduleBounds) -> Option<Candidate> {
    // 0 is unlimited: there is nothing to halve.
    (c.rate >= 2.0).then(|| Candidate {
        rate: (c.rate / 2.0).floor(),
        ..c.clone()
    })
}

/// Searches for the smallest candidate below `original` that still fails the same way
/// (see the module's documentation), then measures its replay rate. `progress` gets one
/// line per replay.
pub fn shrink_schedule<R: Replayer>(
    original: &Candidate,
    replayer: &mut R,
    bounds: &ScheduleBounds,
    progress: &mut dyn FnMut(&str),
) -> ScheduleShrunk {
    let mut s = Search {
        replayer,
        bounds,
        progress,
        started: Instant::now(),
        replay_seconds: 0.0,
        overhead_s: 0.0,
        measured: Vec::new(),
        steps: Vec::new(),
        stopped_by: None,
        best: original.clone(),
        failing: None,
        earlier: Vec::new(),
    };
    let no_faults = original.with_plan(Vec::new());
    // A run that had no faults skips the no-faults step: it is the original.
    let mut decision = if original.plan.is_empty() {
        Decision::Rejected
    } else {
        s.decide("no faults", &no_faults)
    };
    if decision == Decision::Rejected {
        decision = s.decide("original", original);
        if decision == Decision::Kept {
            s.drop_events();
            s.shorten_events();
        }
    }
    let outcome = match decision {
        Decision::Kept => Outcome::Reproduced,
        Decision::Rejected => Outcome::NotReproduced,
        Decision::Undecided => Outcome::BudgetEnded,
    };
    if outcome == Outcome::Reproduced {
        s.halve("time limit", shorter_run);
        s.move_events_later();
        s.halve("concurrency", fewer_clients);
        s.halve("keys", fewer_keys);
        s.halve("rate", lower_rate);
    }
    let (confirm_failed, confirm_runs, confirm_complete) = match outcome {
        Outcome::Reproduced => s.confirm_stepping_back(),
        // The reserve kept for the confirmation measures the original instead: whether
        // and how often it fails again is what the undecided search could not say.
        Outcome::BudgetEnded => {
            s.best = original.clone();
            s.confirm(false)
        }
        Outcome::NotReproduced => (0, 0, true),
    };
    ScheduleShrunk {
        before: original.clone(),
        after: s.best.clone(),
        reproduced: outcome == Outcome::Reproduced,
        outcome,
        confirm_asked: bounds.confirm,
        steps: s.steps,
        confirm_failed,
        confirm_runs,
        confirm_cut: !confirm_complete,
        stopped_by: s.stopped_by,
        failing_replay: s.failing,
        seconds: s.started.elapsed().as_secs_f64().max(s.replay_seconds),
    }
}

impl ScheduleShrunk {
    /// The replay rate as the summary says it: `4/5`, `1/1 (the budget ended after 1 of
    /// 5 runs)`, or `not measured: the budget ended before a confirmation run`.
    pub fn replay_rate(&self) -> String {
        if self.confirm_runs == 0 {
            "not measured: the budget ended before a confirmation run".to_string()
        } else if self.confirm_cut {
            format!(
                "{}/{} (the budget ended after {} of {} runs)",
                self.confirm_failed, self.confirm_runs, self.confirm_runs, self.confirm_asked
            )
        } else {
            format!("{}/{}", self.confirm_failed, self.confirm_runs)
        }
    }

    /// One line on how the shrink ended, for the failure `class`: never "did not
    /// reproduce" unless the original's replays showed it.
    pub fn conclusion(&self, class: &str) -> String {
        match self.outcome {
            Outcome::Reproduced => format!("replay rate {}", self.replay_rate()),
            Outcome::NotReproduced => format!(
                "the failure did not reproduce: most replays of the original did not fail as {class}; nothing is shrunk"
            ),
            Outcome::BudgetEnded if self.confirm_runs == 0 => {
                "budget ended: replay rate not measured; nothing is shrunk".to_string()
            }
            Outcome::BudgetEnded => format!(
                "budget ended before the search could begin; nothing is shrunk; the original's replay rate {}",
                self.replay_rate()
            ),
        }
    }
}

/// The steps as a table: step, phase, candidate, replays, how many failed the same way,
/// kept?.
pub fn steps_table(steps: &[Step]) -> String {
    let mut t = splitbrain_checkers::table::Table::new([
        "step",
        "phase",
        "candidate",
        "replays",
        "failed",
        "kept?",
    ])
    .right_aligned(&[0, 3]);
    for s in steps {
        t.row([
            s.step.to_string(),
            s.phase.to_string(),
            s.candidate.to_string(),
            s.replays.to_string(),
            s.failures.to_string(),
            if s.kept {
                "yes"
            } else if s.undecided {
                "no: budget ended"
            } else {
                "no"
            }
            .to_string(),
        ]);
    }
    t.plain()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use splitbrain_nemesis::{FaultAction, Target};

    fn kill(at_ms: u64, node: usize) -> PlannedFault {
        PlannedFault {
            at_ms,
            for_ms: 4000,
            action: FaultAction::Kill {
                target: Target::Nodes,
                nodes: vec![splitbrain_nemesis::NodeNames::FROM_ONE.name(node)],
            },
        }
    }

    fn original(events: usize) -> Candidate {
        Candidate {
            plan: (0..events).map(|i| kill(500 * i as u64, i % 5)).collect(),
            time_limit_s: 40.0,
            concurrency: 10,
            active_keys: 8,
            rate: 200.0,
        }
    }

    /// A cluster whose bug shows when the faults at the `needed` start times (or up to
    /// `slack_ms` later) all run, each for at least `min_for_ms`, with at least
    /// `min_clients` clients; and then only in a share `rate` of runs (seeded), as a
    /// real cluster's would, or, when `luck` is set, in the runs it says (cycled).
    struct FakeCluster {
        needed: Vec<u64>,
        slack_ms: u64,
        min_for_ms: u64,
        min_clients: usize,
        rate: f64,
        luck: Vec<bool>,
        /// Runs shorter than `.0` seconds fail only in the runs `.1` says, in order
        /// (none past its end).
        short: (f64, Vec<bool>),
        /// From run `.0` on (counting from 1), each replay takes `.1` seconds longer:
        /// a machine that got busier than the budget's estimate.
        slow: (usize, f64),
        /// When set, any one fault of at least `min_for_ms` shows the bug (`needed` is not
        /// asked for).
        any_fault: bool,
        /// When set, a replay that fails the same way takes this many seconds, whatever
        /// its time limit: a run that stops at the first anomaly.
        early: Option<f64>,
        rng: ChaCha8Rng,
        runs: usize,
    }

    impl FakeCluster {
        fn new(needed: &[u64], rate: f64, seed: u64) -> FakeCluster {
            FakeCluster {
                needed: needed.to_vec(),
                slack_ms: 0,
                min_for_ms: 1000,
                min_clients: 2,
                rate,
                luck: Vec::new(),
                short: (0.0, Vec::new()),
                slow: (usize::MAX, 0.0),
                early: None,
                any_fault: false,
                rng: ChaCha8Rng::seed_from_u64(seed),
                runs: 0,
            }
        }
    }

    impl Replayer for FakeCluster {
        fn replay(&mut self, c: &Candidate) -> anyhow::Result<Replay> {
            self.runs += 1;
            let faults_there = if self.any_fault {
                c.plan.iter().any(|f| f.for_ms >= self.min_for_ms)
            } else {
                self.needed.iter().all(|at| {
                    c.plan.iter().any(|f| {
                        (*at..=at + self.slack_ms).contains(&f.at_ms) && f.for_ms >= self.min_for_ms
                    })
                })
            };
            let lucky = if c.time_limit_s < self.short.0 {
                let (_, luck) = &mut self.short;
                !luck.is_empty() && luck.remove(0)
            } else if self.luck.is_empty() {
                self.rng.gen_bool(self.rate)
            } else {
                self.luck[(self.runs - 1) % self.luck.len()]
            };
            let fails = faults_there && c.concurrency >= self.min_clients && lucky;
            Ok(Replay {
                same_failure: fails,
                verdict: if fails { "invalid" } else { "valid" }.into(),
                run_dir: None,
                ops: c.concurrency * 10,
                seconds: self.early.filter(|_| fails).unwrap_or(c.time_limit_s + 5.0)
                    + if self.runs >= self.slow.0 {
                        self.slow.1
                    } else {
                        0.0
                    },
            })
        }
    }

    fn bounds() -> ScheduleBounds {
        ScheduleBounds {
            budget: Duration::from_secs(1_000_000),
            ..ScheduleBounds::default()
        }
    }

    fn starts(c: &Candidate) -> Vec<u64> {
        c.plan.iter().map(|f| f.at_ms).collect()
    }

    #[test]
    fn ddmin_keeps_exactly_the_events_the_failure_needs() {
        let mut cluster = FakeCluster::new(&[1500, 6000], 1.0, 1);
        let shrunk = shrink_schedule(&original(20), &mut cluster, &bounds(), &mut |_| {});
        assert!(shrunk.reproduced);
        assert_eq!(starts(&shrunk.after), [1500, 6000]);
        assert_eq!(shrunk.before.plan.len(), 20);
        // Each needed fault is halved from 4 s while it lasts 1 s or more.
        assert!(shrunk.after.plan.iter().all(|f| f.for_ms == 1000));
        assert_eq!((shrunk.confirm_failed, shrunk.confirm_runs), (5, 5));
        assert!(shrunk.stopped_by.is_none());
    }

    #[test]
    fn a_bug_that_needs_no_fault_shrinks_to_an_empty_plan_in_one_step() {
        let mut cluster = FakeCluster::new(&[], 1.0, 2);
        let shrunk = shrink_schedule(&original(12), &mut cluster, &bounds(), &mut |_| {});
        assert!(shrunk.after.plan.is_empty());
        assert_eq!(shrunk.steps[0].phase, "no faults");
        assert!(shrunk.steps[0].kept);
        assert!(!shrunk.steps.iter().any(|s| s.phase == "drop events"));
    }

    #[test]
    fn parameters_are_halved_while_the_run_still_fails() {
        let mut cluster = FakeCluster::new(&[1500], 1.0, 3);
        cluster.min_clients = 3;
        let shrunk = shrink_schedule(&original(6), &mut cluster, &bounds(), &mut |_| {});
        let after = &shrunk.after;
        // 40 -> 20 -> 10 -> 5 -> 2.5 s keeps the fault at 1.5 s; 1.25 s would drop it.
        assert_eq!(after.time_limit_s, 2.5);
        // 10 -> 5 fails, 5 -> 2 has too few clients.
        assert_eq!(after.concurrency, 5);
        assert_eq!(after.active_keys, 1);
        assert_eq!(after.rate, 1.0);
        let halvings: Vec<(&str, bool)> = shrunk
            .steps
            .iter()
            .filter(|s| s.phase == "concurrency")
            .map(|s| (s.phase.as_str(), s.kept))
            .collect();
        assert_eq!(halvings, [("concurrency", true), ("concurrency", false)]);
    }

    /// The first step's replays and same failures, and whether it was kept, when every
    /// candidate fails in the runs `luck` says.
    fn first_step_with_luck(luck: &[bool], replays: usize) -> (usize, usize, bool) {
        let mut cluster = FakeCluster::new(&[], 1.0, 6);
        cluster.luck = luck.to_vec();
        let b = ScheduleBounds {
            replays,
            ..bounds()
        };
        let shrunk = shrink_schedule(&original(4), &mut cluster, &b, &mut |_| {});
        let s = &shrunk.steps[0];
        (s.replays, s.failures, s.kept)
    }

    #[test]
    fn a_candidate_is_kept_only_when_a_majority_of_its_replays_fail() {
        // Fails in 1 of 3: rejected, though one replay failed the same way.
        assert_eq!(
            first_step_with_luck(&[true, false, false], 3),
            (3, 1, false)
        );
        assert_eq!(
            first_step_with_luck(&[false, false, true], 3),
            (2, 0, false)
        );
        // 2 of 3: kept.
        assert_eq!(first_step_with_luck(&[true, false, true], 3), (3, 2, true));
        // Decided after two: replaying a third time could not change it.
        assert_eq!(first_step_with_luck(&[true, true, false], 3), (2, 2, true));
        assert_eq!(
            first_step_with_luck(&[false, true, true, true], 5),
            (4, 3, true)
        );
        assert_eq!(first_step_with_luck(&[true], 1), (1, 1, true));
    }

    #[test]
    fn a_flaky_candidate_failing_one_of_three_does_not_become_the_reproduction() {
        // The original fails in its first replay of 3 only (runs 3, 4 and 5 of the
        // cluster; runs 1 and 2 were the no-fault step): it is not kept, the failure is
        // reported as not reproduced and nothing is confirmed.
        let mut cluster = FakeCluster::new(&[1500], 1.0, 7);
        cluster.luck = vec![false, false, true];
        let shrunk = shrink_schedule(&original(8), &mut cluster, &bounds(), &mut |_| {});
        let tried: Vec<(&str, usize, usize, bool)> = shrunk
            .steps
            .iter()
            .map(|s| (s.phase.as_str(), s.replays, s.failures, s.kept))
            .collect();
        assert_eq!(
            tried,
            [("no faults", 2, 0, false), ("original", 3, 1, false)]
        );
        assert!(!shrunk.reproduced);
        assert_eq!(shrunk.after, shrunk.before);
        assert!(shrunk.failing_replay.is_none());
        assert_eq!(shrunk.confirm_runs, 0);
    }

    #[test]
    fn a_failure_in_most_runs_still_shrinks_to_the_needed_events() {
        // The bug shows in 85% of runs (seeded): a majority of 5 replays keeps each
        // candidate that can fail, and the search ends at the needed event.
        let mut cluster = FakeCluster::new(&[3000], 0.85, 7);
        let b = ScheduleBounds {
            replays: 5,
            ..bounds()
        };
        let shrunk = shrink_schedule(&original(10), &mut cluster, &b, &mut |_| {});
        assert_eq!(starts(&shrunk.after), [3000]);
        assert!(shrunk.steps.iter().all(|s| s.replays <= 5));
        // A candidate that cannot fail is given up after 3 replays: no majority is left.
        assert!(shrunk
            .steps
            .iter()
            .any(|s| s.failures == 0 && s.replays == 3));
        assert_eq!(shrunk.confirm_runs, 5);
    }

    #[test]
    fn a_best_candidate_that_fails_its_confirmation_gives_way_to_the_one_kept_before() {
        // Runs under 10 s fail only in their first two replays: the 5 s candidate is kept
        // on that luck, then fails its confirmation runs. Once 3 of 5 have passed it
        // cannot fail in a majority; the 10 s candidate kept before it is confirmed
        // instead, and the 5 s one is recorded as given up.
        let mut cluster = FakeCluster::new(&[], 1.0, 9);
        cluster.short = (10.0, vec![true, true]);
        let shrunk = shrink_schedule(&original(4), &mut cluster, &bounds(), &mut |_| {});
        assert_eq!(shrunk.after.time_limit_s, 10.0);
        assert_eq!((shrunk.confirm_failed, shrunk.confirm_runs), (5, 5));
        let last = shrunk.steps.last().unwrap();
        assert_eq!(
            (last.phase.as_str(), last.replays, last.failures, last.kept),
            ("confirm", 3, 0, false)
        );
        assert!(last.candidate.contains(" 5 s,"), "{}", last.candidate);
        assert!(shrunk.failing_replay.is_some());
    }

    /// A 10 s run whose 5 s halving fails only in its first two replays, shrunk within
    /// `budget` seconds, replays slowed as `slow` says; and the cluster's runs.
    fn lucky_five_seconds(budget: u64, slow: (usize, f64)) -> (ScheduleShrunk, usize) {
        let mut cluster = FakeCluster::new(&[], 1.0, 9);
        cluster.short = (10.0, vec![true, true]);
        cluster.slow = slow;
        let b = ScheduleBounds {
            budget: Duration::from_secs(budget),
            min_time_limit_s: 5.0,
            ..ScheduleBounds::default()
        };
        let ten_seconds = Candidate {
            time_limit_s: 10.0,
            ..original(4)
        };
        let shrunk = shrink_schedule(&ten_seconds, &mut cluster, &b, &mut |_| {});
        (shrunk, cluster.runs)
    }

    #[test]
    fn without_budget_for_the_candidate_before_the_best_is_measured_in_full() {
        // As above, but the budget cannot hold a second confirmation: the 5 s candidate
        // is replayed all five times and stays the result, its low rate reported.
        // A 10 s run costs 15 s (10 s and 5 s to start and check): the 200 s are spent
        // down to 50 by the search, enough for five runs of 5 s, not for ten.
        let (shrunk, _) = lucky_five_seconds(200, (usize::MAX, 0.0));
        assert_eq!(shrunk.after.time_limit_s, 5.0);
        assert_eq!((shrunk.confirm_failed, shrunk.confirm_runs), (0, 5));
        assert!(!shrunk.steps.iter().any(|s| s.phase == "confirm"));
    }

    /// One 10 s client on one key at an unlimited rate, without faults: nothing to drop
    /// or halve below a 10 s time limit, so the search is the original's step alone.
    fn nothing_to_halve() -> (Candidate, ScheduleBounds) {
        let c = Candidate {
            plan: Vec::new(),
            time_limit_s: 10.0,
            concurrency: 1,
            active_keys: 1,
            rate: 0.0,
        };
        let b = ScheduleBounds {
            min_time_limit_s: 10.0,
            ..ScheduleBounds::default()
        };
        (c, b)
    }

    #[test]
    fn a_budget_that_ends_before_the_original_is_decided_measures_the_original() {
        // A replay costs 15 s. The first replay of the original passes; a second would
        // leave 100 - 30 = 70 s, short of the 75 s five confirmations need: the search
        // stops undecided. Before, that read "did not reproduce" (bayou/no-rollback at a
        // 120 s budget); now the reserve measures the original's replay rate.
        let (original, b) = nothing_to_halve();
        let b = ScheduleBounds {
            budget: Duration::from_secs(100),
            ..b
        };
        let mut cluster = FakeCluster::new(&[], 1.0, 10);
        cluster.min_clients = 1;
        cluster.luck = vec![false, true, true, true, false, true];
        let shrunk = shrink_schedule(&original, &mut cluster, &b, &mut |_| {});
        assert_eq!(shrunk.outcome, Outcome::BudgetEnded);
        assert!(!shrunk.reproduced);
        let tried: Vec<(&str, usize, usize, bool, bool)> = shrunk
            .steps
            .iter()
            .map(|s| (s.phase.as_str(), s.replays, s.failures, s.kept, s.undecided))
            .collect();
        assert_eq!(tried, [("original", 1, 0, false, true)]);
        assert_eq!((shrunk.confirm_failed, shrunk.confirm_runs), (4, 5));
        assert!(!shrunk.confirm_cut);
        assert_eq!(shrunk.after, original);
        assert!(shrunk.failing_replay.is_some());
        assert!(shrunk.seconds <= 100.0, "{}", shrunk.seconds);
        let said = shrunk.conclusion("set-full: lost");
        assert!(said.contains("budget ended"), "{said}");
        assert!(said.contains("replay rate 4/5"), "{said}");
        assert!(!said.contains("did not reproduce"), "{said}");
        assert!(steps_table(&shrunk.steps).contains("no: budget ended"));
    }

    #[test]
    fn a_budget_too_small_for_any_replay_says_the_rate_was_not_measured() {
        // 10 s of budget for a 40 s run: no replay at all, and no "did not reproduce".
        let mut cluster = FakeCluster::new(&[1500], 1.0, 11);
        let b = ScheduleBounds {
            budget: Duration::from_secs(10),
            ..ScheduleBounds::default()
        };
        let shrunk = shrink_schedule(&original(4), &mut cluster, &b, &mut |_| {});
        assert_eq!(cluster.runs, 0);
        assert_eq!(shrunk.outcome, Outcome::BudgetEnded);
        assert!(shrunk.steps.is_empty());
        assert_eq!(shrunk.confirm_runs, 0);
        assert_eq!(
            shrunk.conclusion("linearizable: invalid"),
            "budget ended: replay rate not measured; nothing is shrunk"
        );
        assert!(shrunk.stopped_by.is_some());
    }

    #[test]
    fn a_failure_that_does_not_reproduce_is_said_so_only_when_its_replays_decided_it() {
        let mut cluster = FakeCluster::new(&[1500], 0.0, 12);
        let shrunk = shrink_schedule(&original(3), &mut cluster, &bounds(), &mut |_| {});
        assert_eq!(shrunk.outcome, Outcome::NotReproduced);
        assert!(shrunk.steps.iter().all(|s| !s.undecided));
        assert!(shrunk.conclusion("x").contains("did not reproduce"));
    }

    #[test]
    fn confirmation_runs_cut_by_the_budget_say_how_many_ran() {
        // The original is kept on its one replay (15 s); its confirmation was reserved at
        // 15 s a run, but from the third run on replays take 30 s longer: after two
        // confirmation runs the next no longer fits in the 100 s.
        let (original, b) = nothing_to_halve();
        let b = ScheduleBounds {
            budget: Duration::from_secs(100),
            replays: 1,
            ..b
        };
        let mut cluster = FakeCluster::new(&[], 1.0, 13);
        cluster.min_clients = 1;
        cluster.slow = (3, 30.0);
        let shrunk = shrink_schedule(&original, &mut cluster, &b, &mut |_| {});
        assert_eq!(shrunk.outcome, Outcome::Reproduced);
        assert_eq!((shrunk.confirm_failed, shrunk.confirm_runs), (2, 2));
        assert!(shrunk.confirm_cut);
        assert_eq!(
            shrunk.replay_rate(),
            "2/2 (the budget ended after 2 of 5 runs)"
        );
        assert!(shrunk.seconds <= 100.0, "{}", shrunk.seconds);
    }

    #[test]
    fn a_step_back_the_budget_cannot_run_keeps_the_candidate_measured() {
        // As in the step-back tests above, the 5 s candidate is kept on two lucky
        // replays; the search then spends 110 s in 10 runs. 250 s hold five runs of it
        // (10 s each) and five of the 10 s one (15 s) after them, so it may be given up.
        // It passes its first three confirmation runs, and the third takes 60 s longer
        // than estimated: 200 s spent, the 10 s candidate's runs now estimated at 75 s
        // do not fit. The 5 s candidate stays the result, with the rate measured for it.
        let (shrunk, runs) = lucky_five_seconds(250, (13, 60.0));
        assert_eq!(shrunk.after.time_limit_s, 5.0);
        assert_eq!((shrunk.confirm_failed, shrunk.confirm_runs), (0, 3));
        assert!(!shrunk.confirm_cut);
        let last = shrunk.steps.last().unwrap();
        assert_eq!((last.phase.as_str(), last.kept), ("confirm", true));
        assert_eq!(runs, 13);
        assert!(shrunk.seconds <= 250.0, "{}", shrunk.seconds);
    }

    #[test]
    fn events_move_later_while_the_run_still_fails() {
        // The fault at 1.5 s still works when it starts up to 10.5 s; the run stays 20 s.
        let mut cluster = FakeCluster::new(&[1500], 1.0, 8);
        cluster.slack_ms = 9000;
        let b = ScheduleBounds {
            min_time_limit_s: 20.0,
            ..bounds()
        };
        let shrunk = shrink_schedule(&original(4), &mut cluster, &b, &mut |_| {});
        assert_eq!(shrunk.after.time_limit_s, 20.0);
        let moves: Vec<bool> = shrunk
            .steps
            .iter()
            .filter(|s| s.phase == "move later")
            .map(|s| s.kept)
            .collect();
        // 1.5 s ends at 2.5 s: half the 17.5 s left is 10.25 s, kept; half of what then
        // remains, 14.625 s, is too late.
        assert_eq!(moves, [true, false]);
        assert_eq!(starts(&shrunk.after), [10250]);
        assert_eq!(shrunk.after.plan[0].for_ms, 1000);
    }

    #[test]
    fn a_failure_that_does_not_reproduce_keeps_the_original() {
        let mut cluster = FakeCluster::new(&[1500], 0.0, 4);
        let shrunk = shrink_schedule(&original(8), &mut cluster, &bounds(), &mut |_| {});
        assert!(!shrunk.reproduced);
        assert_eq!(shrunk.after, shrunk.before);
        assert_eq!(
            cluster.runs, 4,
            "no faults x2, original x2: no majority left"
        );
        assert_eq!(shrunk.confirm_runs, 0);
    }

    #[test]
    fn the_budget_stops_the_search_and_keeps_time_to_confirm() {
        let mut cluster = FakeCluster::new(&[1500], 1.0, 5);
        // A replay of the original costs 45 s (its 40 s and 5 s to start and check);
        // confirming five takes 225 s: 900 s leave room for a few steps only.
        let b = ScheduleBounds {
            budget: Duration::from_secs(900),
            ..ScheduleBounds::default()
        };
        let shrunk = shrink_schedule(&original(20), &mut cluster, &b, &mut |_| {});
        let why = shrunk.stopped_by.as_deref().unwrap_or("");
        assert!(why.contains("budget of 900 s"), "{why}");
        assert!(shrunk.seconds <= 900.0, "{}", shrunk.seconds);
        assert_eq!(shrunk.confirm_runs, 5);
        assert!(shrunk.after.plan.len() < 20);
    }

    #[test]
    fn the_confirmation_is_reserved_at_the_measured_length_of_failing_replays() {
        // A 40 s run whose failing replays stop at the first anomaly, 14 s in all; a
        // passing one takes its 45 s. The reserve for five confirmation runs of a kept
        // candidate is 5 x 14 s, not 5 x 45 s: the search goes on to halve the time limit
        // within 700 s, where counting every replay at 45 s stopped it while it shortened
        // the event, before the time limit's first halving.
        let mut cluster = FakeCluster::new(&[1500], 1.0, 14);
        cluster.early = Some(14.0);
        let b = ScheduleBounds {
            budget: Duration::from_secs(700),
            ..ScheduleBounds::default()
        };
        let shrunk = shrink_schedule(&original(4), &mut cluster, &b, &mut |_| {});
        assert!(shrunk.reproduced);
        assert_eq!(starts(&shrunk.after), [1500]);
        assert!(shrunk.after.time_limit_s < 40.0, "{}", shrunk.after.label());
        assert_eq!((shrunk.confirm_failed, shrunk.confirm_runs), (5, 5));
        assert!(shrunk.seconds <= 700.0, "{}", shrunk.seconds);
        let why = shrunk.stopped_by.as_deref().unwrap_or("");
        assert!(
            why.is_empty() || why.contains("confirmation runs 70 s"),
            "{why}"
        );
    }

    #[test]
    fn of_two_faults_that_each_show_the_bug_the_longer_is_kept() {
        // Either fault alone shows the bug: delta debugging keeps the 3 s one, tried
        // before the 1 s one that comes first, and then halves it while it still fails.
        // (Trying chunks in time order kept the 1 s one.)
        let mut cluster = FakeCluster::new(&[], 1.0, 15);
        cluster.any_fault = true;
        let mut original = original(0);
        original.plan = vec![kill(1500, 1), kill(6000, 2)];
        original.plan[0].for_ms = 1000;
        original.plan[1].for_ms = 3000;
        let shrunk = shrink_schedule(&original, &mut cluster, &bounds(), &mut |_| {});
        // the kill of n2 (later steps move it and shorten the run)
        assert_eq!(shrunk.after.plan.len(), 1);
        assert_eq!(shrunk.after.plan[0].action, original.plan[1].action);
        assert_eq!(shrunk.after.plan[0].for_ms, 1500);
        let drops: Vec<(String, bool)> = shrunk
            .steps
            .iter()
            .filter(|s| s.phase == "drop events")
            .map(|s| (s.candidate.clone(), s.kept))
            .collect();
        assert_eq!(drops.len(), 1, "{drops:?}");
        assert!(drops[0].1);
    }

    #[test]
    fn split_makes_n_contiguous_nonempty_chunks() {
        let items: Vec<u32> = (0..7).collect();
        assert_eq!(split(&items, 2), vec![vec![0, 1, 2], vec![3, 4, 5, 6]]);
        assert_eq!(split(&items, 7).len(), 7);
        assert_eq!(split(&items, 9).len(), 7);
        assert_eq!(split(&items, 3).concat(), items);
    }
}
