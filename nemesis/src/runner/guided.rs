//! The sampler every run with faults has (coverage), and the loop of `--nemesis-search
//! guided`: it samples what the cluster does, asks the chooser for the next fault of each
//! free fault class, starts it, and keeps what it started as a plan.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::MutexGuard;
use std::time::Duration;

use tokio::time::Instant;

use super::{describe, Nemesis, Started};
use rand::Rng;

use crate::guided::{
    arm_of, arms, candidates, concretize, coverage_kind, credited, reward, AbstractState,
    Abstractor, Arm, Chooser, ClientClass, ClientCounts, Coverage, Memory, MemoryStart, Sample,
    Search, Timing,
};
use crate::plan::PlannedFault;
use crate::spec::NemesisSpec;
use crate::{schedule, ClientSignals, ClusterControl, NemesisError, NemesisRecorder};

/// How often the sampler looks at the cluster.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// The longest one sample's status requests may take (a paused node never answers).
const SAMPLE_BOUND: Duration = Duration::from_millis(400);
/// How often the guided loop looks for a free fault class.
const DECIDE_EVERY: Duration = Duration::from_millis(100);
/// How long after a fault stops what is seen is still credited to it.
const CREDIT_AFTER: Duration = Duration::from_secs(1);
/// An anomaly reported without its evidence (a signal that cannot say) is credited to the
/// faults running or stopped this long before it was seen: the online check looks once a
/// second, and an op's anomaly is certain only once it has completed.
const ANOMALY_CREDIT_AFTER: Duration = Duration::from_secs(3);

/// A fault the chooser picked, credited with what is seen while it runs and settles.
struct Credit {
    state: AbstractState,
    arm: Arm,
    /// When the fault started, and stopped: an anomaly is credited by its evidence's
    /// time ([`crate::guided::credited`]).
    from: Instant,
    stopped: Option<Instant>,
    /// When crediting what the sampler sees ends (set when the fault stops).
    until: Option<Instant>,
}

/// What the sampler and the guided loop share.
pub(crate) struct Guide {
    search: Search,
    chooser: Chooser,
    abstractor: Abstractor,
    coverage: Coverage,
    latest: Option<AbstractState>,
    /// Faults running, per class.
    active: [u32; 3],
    credits: BTreeMap<usize, Credit>,
    /// The schedule the guided search made, in start order.
    plan: Vec<PlannedFault>,
    /// Some node reported whether it leads.
    leaders_known: bool,
    last_anomalies: u64,
    /// Evidence spans already credited.
    last_evidence: usize,
    /// Guided runs the memory the chooser started from sums (0: cold).
    runs_before: u64,
}

impl Guide {
    pub(crate) fn new(spec: &NemesisSpec) -> Guide {
        let search = if spec.plan.is_some() {
            Search::Random
        } else {
            spec.search
        };
        Guide {
            search,
            chooser: Chooser::new(spec.seed),
            abstractor: Abstractor::default(),
            coverage: Coverage {
                search: if spec.plan.is_some() {
                    "plan".to_string()
                } else {
                    search.name().to_string()
                },
                signals: "none sampled yet".to_string(),
                ..Coverage::default()
            },
            latest: None,
            active: [0; 3],
            credits: BTreeMap::new(),
            plan: Vec::new(),
            leaders_known: false,
            last_anomalies: 0,
            last_evidence: 0,
            runs_before: 0,
        }
    }

    /// Starts the chooser from `memory` (what earlier guided runs of the same
    /// configuration left); `start` says where it came from, for results.json.
    pub(crate) fn remember(&mut self, seed: u64, memory: Option<&Memory>, start: MemoryStart) {
        if let Some(m) = memory {
            self.chooser = Chooser::with_memory(seed, m);
            self.runs_before = m.runs;
        }
        self.coverage.memory = Some(start);
    }

    /// Credits anomalies found since the last sample: what the run's end
    /// (`--stop-on-anomaly` ends it at once) would lose.
    pub(crate) fn conclude(&mut self, clients: &ClientCounts, now: Instant) {
        self.credit_anomalies(clients, now);
    }

    /// Credits each anomaly `clients` reports that was not credited yet to the faults
    /// active while the ops that make it ran ([`crate::guided::credited`]); one reported
    /// without its evidence, to those running or stopped within
    /// [`ANOMALY_CREDIT_AFTER`] of `now`.
    fn credit_anomalies(&mut self, clients: &ClientCounts, now: Instant) {
        let new = clients.anomalies.saturating_sub(self.last_anomalies);
        self.last_anomalies = self.last_anomalies.max(clients.anomalies);
        self.coverage.anomalies = self.last_anomalies;
        // The evidence is recorded before the anomaly is counted: each new anomaly has
        // its span here, unless the signal cannot say.
        let spans: Vec<(std::time::Instant, std::time::Instant)> = clients
            .evidence
            .iter()
            .skip(self.last_evidence)
            .take(new as usize)
            .copied()
            .collect();
        self.last_evidence += spans.len();
        if new == 0 || self.search != Search::Guided {
            return;
        }
        let keys: Vec<usize> = self.credits.keys().copied().collect();
        let times: Vec<(Instant, Option<Instant>)> =
            self.credits.values().map(|c| (c.from, c.stopped)).collect();
        let mut rewarded: Vec<usize> = Vec::new();
        for &(a, b) in &spans {
            let span = (Instant::from_std(a), Instant::from_std(b));
            rewarded.extend(credited(&times, span).into_iter().map(|i| keys[i]));
        }
        // Anomalies without their evidence: the faults of the last few seconds.
        for _ in spans.len()..new as usize {
            rewarded.extend(
                self.credits
                    .iter()
                    .filter(|(_, c)| c.until.is_none_or(|u| now <= u + ANOMALY_CREDIT_AFTER))
                    .map(|(&k, _)| k),
            );
        }
        for k in rewarded {
            if let Some(c) = self.credits.get(&k) {
                self.chooser.reward(&c.state, &c.arm, reward::ANOMALY);
            }
        }
    }

    fn active_bits(&self) -> u8 {
        (0..3)
            .filter(|&c| self.active[c] > 0)
            .fold(0u8, |b, c| b | (1 << c))
    }

    /// The state to file a fault under: the latest sample's, with the classes active now.
    fn current(&self) -> AbstractState {
        let mut st = self.latest.unwrap_or(AbstractState {
            leaders: None,
            leader_changed: false,
            lagging: None,
            silent: None,
            pending: None,
            active: 0,
            clients: ClientClass::Healthy,
        });
        st.active = self.active_bits();
        st
    }

    /// A fault of `class` started; `label` is the arm it counts as in the coverage,
    /// `chosen` the (state, arm) the chooser picked it as, to be credited.
    pub(crate) fn fault_started(
        &mut self,
        k: usize,
        class: usize,
        label: &Arm,
        chosen: Option<(AbstractState, Arm)>,
    ) {
        let state = chosen.as_ref().map_or_else(|| self.current(), |(s, _)| *s);
        self.coverage.started(&state, label);
        self.active[class] += 1;
        if let Some((state, arm)) = chosen {
            self.credits.insert(
                k,
                Credit {
                    state,
                    arm,
                    from: Instant::now(),
                    stopped: None,
                    until: None,
                },
            );
        }
    }

    pub(crate) fn fault_stopped(&mut self, k: usize, class: usize) {
        self.active[class] = self.active[class].saturating_sub(1);
        if let Some(c) = self.credits.get_mut(&k) {
            let now = Instant::now();
            c.stopped = Some(now);
            c.until = Some(now + CREDIT_AFTER);
        }
    }

    fn observe(&mut self, sample: &Sample, has_clients: bool, now: Instant) {
        let answered = sample
            .nodes
            .as_ref()
            .is_some_and(|v| v.iter().any(Option::is_some));
        if answered {
            let leads = sample
                .nodes
                .iter()
                .flatten()
                .flatten()
                .any(|s| s.leads.is_some());
            self.leaders_known |= leads;
        }
        if self.coverage.samples == 0 || answered {
            self.coverage.signals = match (&sample.nodes, has_clients) {
                (Some(_), _) if self.leaders_known => {
                    "node status (leaders, terms, progress) and client outcomes".to_string()
                }
                (Some(_), _) => "node status (no leader role) and client outcomes".to_string(),
                (None, true) => {
                    "client outcomes and active faults only: the target serves no node status"
                        .to_string()
                }
                (None, false) => {
                    "active faults only: no node status, no client signals".to_string()
                }
            };
        }
        let st = self.abstractor.state(sample, self.active_bits());
        let mut r = 0.0;
        if self.coverage.sample(&st) {
            r += reward::NEW_STATE;
        }
        if st.leader_changed {
            r += reward::LEADER_CHANGE;
        }
        if matches!(st.clients, ClientClass::Timeouts | ClientClass::Failing) {
            r += reward::DISTURBED;
        }
        self.coverage.leader_changes = self.abstractor.leader_changes;
        // Every fault's credit is kept for the run (a few dozen): an anomaly's evidence
        // may lie seconds before the check is sure of it.
        if self.search == Search::Guided && r > 0.0 {
            for c in self.credits.values() {
                if c.until.is_none_or(|u| now <= u) {
                    self.chooser.reward(&c.state, &c.arm, r);
                }
            }
        }
        self.credit_anomalies(&sample.clients, now);
        self.latest = Some(st);
    }
}

impl Nemesis {
    pub(super) fn guide(&self) -> MutexGuard<'_, Guide> {
        self.guide.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the run's sampler saw: abstract states, (state, fault) pairs, the signals
    /// they were made of. Empty for a run without faults.
    pub fn coverage(&self) -> Coverage {
        self.guide().coverage.clone()
    }

    /// Starts a guided search from `memory`, the (state, arm) reward table earlier guided
    /// runs of the same configuration left (`None`: cold); `start` says which, for
    /// results.json. A run that does not search (random, a plan) only records `start`.
    pub fn with_memory(self, memory: Option<&Memory>, start: MemoryStart) -> Nemesis {
        self.guide().remember(self.spec.seed, memory, start);
        self
    }

    /// The reward table to leave for the next guided run of this configuration: the
    /// memory it started from plus what this run tried and earned. `None` for a run that
    /// did not search (random, a plan).
    pub fn memory_made(&self, key: &str) -> Option<Memory> {
        let g = self.guide();
        (g.search == Search::Guided).then(|| g.chooser.memory(key, g.runs_before + 1))
    }

    /// Credits the anomalies the run's check had found when the main phase ended (the
    /// cumulative count) to the faults running then or just before: a run that
    /// `--stop-on-anomaly` ends stops its sampler before it sees them.
    pub fn conclude(&self, clients: &ClientCounts) {
        self.guide().conclude(clients, Instant::now());
    }

    /// The schedule `--nemesis-search guided` made while the run went on (each fault at
    /// the time it started): a plan file of it replays the run's faults through
    /// `--nemesis-plan`. `None` for a run that followed a plan made before it.
    pub fn plan_made(&self) -> Option<Vec<PlannedFault>> {
        let g = self.guide();
        (g.search == Search::Guided).then(|| g.plan.clone())
    }

    /// The interval of each fault class's timeline: `--nemesis-interval` times the number
    /// of classes asked for, as in the random schedule.
    pub(super) fn class_interval_ms(&self) -> u64 {
        let classes: BTreeSet<usize> = self
            .spec
            .faults
            .iter()
            .filter_map(|k| schedule::class_of(k))
            .collect();
        let iv = self.spec.interval.as_millis().min(u64::MAX as u128) as u64;
        iv.saturating_mul(classes.len().max(1) as u64)
    }

    /// Samples the cluster every [`SAMPLE_EVERY`] until `deadline`.
    pub(super) async fn sample_loop<C: ClusterControl>(
        &self,
        cluster: &C,
        clients: Option<&dyn ClientSignals>,
        deadline: Instant,
    ) {
        let mut next = Instant::now();
        while next < deadline {
            tokio::time::sleep_until(next).await;
            // A status that does not come within the bound tells nothing: no sample.
            if let Ok(nodes) = tokio::time::timeout(SAMPLE_BOUND, cluster.status()).await {
                let sample = Sample {
                    nodes,
                    clients: clients.map(|c| c.counts()).unwrap_or_default(),
                };
                self.guide()
                    .observe(&sample, clients.is_some(), Instant::now());
            }
            next = (next + SAMPLE_EVERY).max(Instant::now());
        }
    }

    /// `--nemesis-search guided`: for each fault class with nothing running and its
    /// settle time over, the chooser picks the next fault from the latest sample's state;
    /// one that waits for a leader change starts when the sampler sees one (or after half
    /// the class interval); a clock fault timed with the next cut starts 20-100 ms after
    /// the next partition that isolates the leader (which the link class then chooses) and
    /// lasts until it heals, or is dropped when none starts within a class interval.
    pub(super) async fn guided_loop<C: ClusterControl>(
        &self,
        cluster: &C,
        recorder: &dyn NemesisRecorder,
        begin: Instant,
        deadline: Instant,
    ) -> Result<(), NemesisError> {
        let n = cluster.node_count();
        let class_iv = self.class_interval_ms();
        let settle = Duration::from_millis((class_iv / 8).max(250));
        let mut arms_by_class: Option<[Vec<Arm>; 3]> = None;
        let mut started: BTreeMap<usize, Started> = BTreeMap::new();
        // plan index -> (stop time, class)
        let mut running: BTreeMap<usize, (Instant, usize)> = BTreeMap::new();
        let mut ready_at = [begin; 3];
        let mut waiting: [Option<Waiting>; 3] = Default::default();
        // kinds started so far: each kind of a class runs once before any runs twice
        let mut kinds_started: BTreeSet<String> = BTreeSet::new();
        let mut plan: Vec<PlannedFault> = Vec::new();
        loop {
            let now = Instant::now();
            let next_stop = running.values().map(|&(end, _)| end).min();
            let next_cut = waiting
                .iter()
                .flatten()
                .filter_map(|w| w.cut)
                .map(|(at, _)| at)
                .min();
            let wake = [
                next_stop,
                next_cut,
                Self::next_tick(&started),
                Some(now + DECIDE_EVERY),
                Some(deadline),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(deadline);
            tokio::time::sleep_until(wake).await;
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            self.tick(cluster, recorder, &mut started, n, now).await;
            let due: Vec<usize> = running
                .iter()
                .filter(|(_, &(end, _))| end <= now)
                .map(|(&k, _)| k)
                .collect();
            for k in due {
                let Some((_, class)) = running.remove(&k) else {
                    continue;
                };
                if let Some(s) = started.remove(&k) {
                    self.stop(cluster, recorder, k, &plan[k], s, n).await;
                }
                self.guide().fault_stopped(k, class);
                ready_at[class] = Instant::now() + settle;
                recorder.set_active(&describe(self.names, &plan, &started));
            }
            let (latest, changes, leaders_known) = {
                let g = self.guide();
                (
                    g.latest.map(|_| g.current()),
                    g.abstractor.leader_changes,
                    g.leaders_known,
                )
            };
            // The first choice waits for the first sample.
            let Some(state) = latest else { continue };
            let arms =
                arms_by_class.get_or_insert_with(|| arms(&self.spec.faults, n, leaders_known));
            // Clocks before links: a clock fault chosen to wait for the next cut is
            // waiting when the link class chooses, in the same pass.
            for class in [0, 2, 1] {
                let now = Instant::now();
                if arms[class].is_empty()
                    || running.values().any(|&(_, c)| c == class)
                    || now < ready_at[class]
                {
                    continue;
                }
                let pick = match waiting[class].take() {
                    Some(w) => match w.ready(now, changes) {
                        Ready::Start(for_ms) => Some((w.arm, w.state, for_ms)),
                        Ready::Drop => None,
                        Ready::Wait => {
                            waiting[class] = Some(w);
                            None
                        }
                    },
                    None => {
                        // A clock fault waits for the next cut: cut off the leader.
                        let cut_pending = waiting
                            .iter()
                            .flatten()
                            .any(|w| w.arm.timing == Timing::WithNextCut && w.cut.is_none());
                        let candidates =
                            candidates(&arms[class], &state, cut_pending, &kinds_started);
                        let chosen = self.guide().chooser.choose(&state, &candidates);
                        match chosen {
                            Some(arm) if arm.timing == Timing::Now => Some((arm, state, None)),
                            Some(arm) => {
                                let wait_ms = match arm.timing {
                                    Timing::WithNextCut => class_iv,
                                    _ => class_iv / 2,
                                };
                                waiting[class] = Some(Waiting {
                                    arm,
                                    state,
                                    changes,
                                    bound: now + Duration::from_millis(wait_ms),
                                    cut: None,
                                });
                                None
                            }
                            None => None,
                        }
                    }
                };
                let Some((arm, chosen_in, for_ms)) = pick else {
                    continue;
                };
                let at_ms = now.saturating_duration_since(begin).as_millis() as u64;
                let fault = {
                    let mut g = self.guide();
                    let mut f = concretize(&arm, self.names, n, class_iv, at_ms, g.chooser.rng());
                    if let Some(for_ms) = for_ms {
                        f.for_ms = for_ms;
                    }
                    g.plan.push(f.clone());
                    f
                };
                let k = plan.len();
                plan.push(fault.clone());
                let mut label = arm_of(&fault, class_iv);
                label.timing = arm.timing;
                if arm.timing == Timing::WithNextCut {
                    label.long = arm.long;
                }
                // A node named by the arm (`slow node1`, see `guided::arms`): its own pair.
                if arm.whom.starts_with("node") {
                    label.whom = arm.whom.clone();
                }
                label.mild = arm.mild;
                let cuts_leader = arm.isolates_leader();
                kinds_started.insert(coverage_kind(&arm).to_string());
                self.guide()
                    .fault_started(k, class, &label, Some((chosen_in, arm)));
                let s = self.start(cluster, recorder, k, &fault, n).await;
                let end = begin + Duration::from_millis(fault.at_ms.saturating_add(fault.for_ms));
                running.insert(k, (end, class));
                started.insert(k, s);
                recorder.set_active(&describe(self.names, &plan, &started));
                if cuts_leader {
                    // The cut a waiting clock fault was timed with: it follows shortly.
                    for w in waiting.iter_mut().flatten() {
                        if w.arm.timing == Timing::WithNextCut && w.cut.is_none() {
                            let delay = self
                                .guide()
                                .chooser
                                .rng()
                                .gen_range(20..=100u64)
                                .min(fault.for_ms / 2);
                            w.cut = Some((Instant::now() + Duration::from_millis(delay), end));
                        }
                    }
                }
            }
        }
    }
}

/// A chosen fault waiting for its moment.
struct Waiting {
    arm: Arm,
    /// The state it was chosen in (credited).
    state: AbstractState,
    /// Leader changes seen when it was chosen.
    changes: u64,
    /// The longest it waits.
    bound: Instant,
    /// [`Timing::WithNextCut`], once the cut started: when to start, and the cut's end
    /// (which is this fault's end too).
    cut: Option<(Instant, Instant)>,
}

enum Ready {
    /// Start it now, for this long when given (else as the arm says).
    Start(Option<u64>),
    /// Its moment did not come in time: not started.
    Drop,
    Wait,
}

impl Waiting {
    fn ready(&self, now: Instant, changes: u64) -> Ready {
        match (self.arm.timing, self.cut) {
            // the cut healed before its moment came (a late wake-up): not started
            (Timing::WithNextCut, Some((_, end))) if now >= end => Ready::Drop,
            (Timing::WithNextCut, Some((at, end))) if now >= at => {
                Ready::Start(Some((end - now).as_millis().max(1) as u64))
            }
            (Timing::WithNextCut, None) if now >= self.bound => Ready::Drop,
            (Timing::WithNextCut, _) => Ready::Wait,
            _ if changes > self.changes || now >= self.bound => Ready::Start(None),
            _ => Ready::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guided::ClientCounts;

    fn spec() -> NemesisSpec {
        let mut spec = NemesisSpec::parse("slow", Duration::from_secs(4), 1).unwrap();
        spec.search = Search::Guided;
        spec
    }

    /// The reward a guide's chooser holds for `arm`, summed over states.
    fn reward_of(g: &Guide, arm: &Arm) -> f64 {
        let m = g.chooser.memory("test", 1);
        m.pairs
            .iter()
            .filter(|p| &p.arm == arm)
            .map(|p| p.reward)
            .sum()
    }

    #[test]
    fn an_anomaly_goes_to_the_fault_active_at_its_evidence_not_the_one_after() {
        let mut g = Guide::new(&spec());
        let slow = arms(&spec().faults, 5, false)[1].clone();
        assert!(slow.len() >= 2, "{slow:?}");
        let (a, b) = (slow[0].clone(), slow[1].clone());
        let st = g.current();
        // a ran 0-2 s and stopped; b started at 2.5 s and runs
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // chosen (a try each), then started
        g.chooser.choose(&st, std::slice::from_ref(&a));
        g.chooser.choose(&st, std::slice::from_ref(&b));
        g.fault_started(0, 1, &a, Some((st, a.clone())));
        g.fault_stopped(0, 1);
        g.fault_started(1, 1, &b, Some((st, b.clone())));
        g.credits.get_mut(&0).unwrap().from = at(0);
        g.credits.get_mut(&0).unwrap().stopped = Some(at(2000));
        g.credits.get_mut(&1).unwrap().from = at(2500);
        let before = (reward_of(&g, &a), reward_of(&g, &b));
        // found at 4 s (inside b), its ops ran at 1.2-1.6 s (inside a)
        let clients = ClientCounts {
            anomalies: 1,
            evidence: vec![(at(1200).into_std(), at(1600).into_std())],
            ..ClientCounts::default()
        };
        g.conclude(&clients, at(4000));
        assert_eq!(reward_of(&g, &a), before.0 + reward::ANOMALY);
        assert_eq!(reward_of(&g, &b), before.1);
        // the same count again credits nothing more
        g.conclude(&clients, at(4500));
        assert_eq!(reward_of(&g, &a), before.0 + reward::ANOMALY);
        // a second anomaly, its ops inside b: b's
        let clients = ClientCounts {
            anomalies: 2,
            evidence: vec![
                (at(1200).into_std(), at(1600).into_std()),
                (at(3000).into_std(), at(3100).into_std()),
            ],
            ..ClientCounts::default()
        };
        g.conclude(&clients, at(5000));
        assert_eq!(reward_of(&g, &a), before.0 + reward::ANOMALY);
        assert_eq!(reward_of(&g, &b), before.1 + reward::ANOMALY);
        assert_eq!(g.coverage.anomalies, 2);
    }

    #[test]
    fn an_anomaly_without_evidence_goes_to_the_faults_of_the_last_seconds() {
        let mut g = Guide::new(&spec());
        let slow = arms(&spec().faults, 5, false)[1].clone();
        let a = slow[0].clone();
        let st = g.current();
        g.chooser.choose(&st, std::slice::from_ref(&a));
        g.fault_started(0, 1, &a, Some((st, a.clone())));
        let clients = ClientCounts {
            anomalies: 1,
            ..ClientCounts::default()
        };
        g.conclude(&clients, Instant::now());
        assert_eq!(reward_of(&g, &a), reward::ANOMALY);
    }
}
