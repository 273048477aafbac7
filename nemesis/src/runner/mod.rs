//! Runs a fault schedule against a cluster and heals it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::network::{CutMode, NetworkFaults};
use crate::plan::{blocked_flows, ClockMode, FaultAction, NodeNames, PlannedFault, Target};
use crate::proxy::ProxyMesh;
use crate::spec::NemesisSpec;
use crate::{schedule, ClusterControl, NemesisError, NemesisRecorder};

mod figure8;
mod heal;
mod net_parts;
mod strobe;
mod ticks;
use figure8::Figure8Job;
use heal::set_offsets;
use net_parts::{rebuild, NetPart};
use strobe::StrobeJob;
use ticks::{clock_tick, isolate, ChurnJob, ClockJob, CHURN_HANDOVERS, CHURN_POLL};

/// Shortest clock strobe / skew update period, so tick loops stay bounded.
const MIN_CLOCK_PERIOD_MS: u64 = 10;

/// Runs a fault schedule against a cluster and heals it.
pub struct Nemesis {
    spec: NemesisSpec,
    network: Option<Arc<dyn NetworkFaults>>,
    /// How the run names its nodes, in the schedule and in every recorded event.
    names: NodeNames,
    state: Mutex<State>,
}

/// What is currently broken, so that [`Nemesis::heal`] can undo exactly that.
#[derive(Default)]
struct State {
    killed: BTreeSet<usize>,
    paused: BTreeSet<usize>,
    /// Nodes whose clock offset may be non-zero.
    clocks: BTreeSet<usize>,
    /// Nodes under a running strobe-pause fault.
    strobes: BTreeSet<usize>,
    /// Active network faults by plan index; the network is rebuilt from all of them.
    net: BTreeMap<usize, NetPart>,
}

/// A started fault: what to undo at its stop.
enum Started {
    Nodes(Vec<usize>),
    Net,
    Clock(ClockJob),
    Churn(ChurnJob),
    Figure8(Figure8Job),
    Strobe(StrobeJob),
    Failed,
}

fn with_error(mut value: Value, errors: &[String]) -> Value {
    if !errors.is_empty() {
        value["error"] = json!(errors.join("; "));
    }
    value
}

impl Nemesis {
    /// A nemesis for the given spec, with no network backend (network faults are recorded
    /// as failed).
    pub fn new(spec: NemesisSpec) -> Nemesis {
        Nemesis::with_network(spec, None)
    }

    /// A nemesis whose network faults act on a proxy mesh.
    pub fn with_mesh(spec: NemesisSpec, mesh: Option<Arc<ProxyMesh>>) -> Nemesis {
        Nemesis::with_network(spec, mesh.map(|m| m as Arc<dyn NetworkFaults>))
    }

    /// A nemesis whose network faults act on any backend (proxy mesh or namespaces).
    pub fn with_network(spec: NemesisSpec, network: Option<Arc<dyn NetworkFaults>>) -> Nemesis {
        Nemesis {
            spec,
            network,
            names: NodeNames::default(),
            state: Mutex::new(State::default()),
        }
    }

    /// The same nemesis for a run whose nodes are named by `names` (default
    /// [`NodeNames::FROM_ONE`]): its schedule, its events and the plan names it accepts.
    pub fn with_node_names(mut self, names: NodeNames) -> Nemesis {
        self.names = names;
        self
    }

    /// How this nemesis names the run's nodes.
    pub fn node_names(&self) -> NodeNames {
        self.names
    }

    /// Checks that every node the spec's plan file names is a node of an `n`-node run
    /// (a generated schedule names only such nodes). Meant before the run starts, so a
    /// plan written for another naming fails with the entry that is wrong.
    pub fn check_plan(&self, node_count: usize) -> Result<(), String> {
        for (k, p) in self.spec.plan.iter().flatten().enumerate() {
            p.check_nodes(self.names, node_count)
                .map_err(|m| format!("entry {k}: {m}"))?;
        }
        Ok(())
    }

    /// The spec this nemesis runs.
    pub fn spec(&self) -> &NemesisSpec {
        &self.spec
    }

    /// The deterministic plan for this spec: the plan file's entries if the spec has one,
    /// otherwise the random schedule for the spec's seed. Serializable, for test.json.
    pub fn schedule(&self, node_count: usize, duration: Duration) -> Vec<PlannedFault> {
        match &self.spec.plan {
            Some(plan) => plan.clone(),
            None => schedule::generate(
                &self.spec,
                self.names,
                node_count,
                duration.as_millis().min(u64::MAX as u128) as u64,
            ),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // a panic elsewhere must not stop the heal, so poisoning is ignored
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Injects faults per the schedule until `duration` has passed since the call, then
    /// returns (leaving faults in place: call [`Nemesis::heal`]).
    pub async fn run<C: ClusterControl>(
        &self,
        cluster: &C,
        recorder: &dyn NemesisRecorder,
        duration: Duration,
    ) -> Result<(), NemesisError> {
        let begin = Instant::now();
        let deadline = begin + duration;
        let n = cluster.node_count();
        let plan = self.schedule(n, duration);
        // (time, stop-before-start at equal times, plan index)
        let mut events: Vec<(u64, bool, usize)> = plan
            .iter()
            .enumerate()
            .flat_map(|(k, p)| {
                [
                    (p.at_ms, true, k),
                    (p.at_ms.saturating_add(p.for_ms), false, k),
                ]
            })
            .collect();
        events.sort_by_key(|&(t, is_start, k)| (t, is_start, k));
        let mut started: BTreeMap<usize, Started> = BTreeMap::new();
        let mut next = 0;
        loop {
            let next_event = events
                .get(next)
                .map(|&(t, _, _)| begin + Duration::from_millis(t));
            let next_tick = started
                .values()
                .filter_map(|s| match s {
                    Started::Clock(job) if job.mode != ClockMode::Bump => Some(job.next_tick),
                    Started::Churn(job) if job.handovers_left > 0 => Some(job.next_tick),
                    Started::Figure8(job) => Some(job.next_tick),
                    Started::Strobe(job) => Some(job.next_tick),
                    _ => None,
                })
                .min();
            let wake = [next_event, next_tick, Some(deadline)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(deadline);
            tokio::time::sleep_until(wake).await;
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            for (&k, s) in started.iter_mut() {
                match s {
                    Started::Clock(job) if job.mode != ClockMode::Bump && job.next_tick <= now => {
                        clock_tick(cluster, self.names, job, now).await;
                    }
                    Started::Churn(job) if job.handovers_left > 0 && job.next_tick <= now => {
                        self.churn_tick(cluster, recorder, k, job, n).await;
                    }
                    Started::Figure8(job) if job.next_tick <= now => {
                        self.figure8_tick(cluster, recorder, k, job, n).await;
                    }
                    Started::Strobe(job) if job.next_tick <= now => {
                        self.strobe_tick(cluster, job, now).await;
                    }
                    _ => {}
                }
            }
            while let Some(&(t, is_start, k)) = events.get(next) {
                if begin + Duration::from_millis(t) > now {
                    break;
                }
                next += 1;
                if is_start {
                    let s = self.start(cluster, recorder, k, &plan[k], n).await;
                    started.insert(k, s);
                } else if let Some(s) = started.remove(&k) {
                    self.stop(cluster, recorder, k, &plan[k], s, n).await;
                }
                recorder.set_active(&describe(self.names, &plan, &started));
            }
        }
    }

    async fn resolve<C: ClusterControl>(
        &self,
        cluster: &C,
        k: usize,
        target: Target,
        nodes: &[String],
        n: usize,
    ) -> Result<Vec<usize>, NemesisError> {
        if !matches!(target, Target::Leader | Target::Follower) {
            return self.names.indices(nodes, n);
        }
        let mut leaders: Vec<usize> = cluster
            .leaders()
            .await
            .into_iter()
            .filter(|&i| i < n)
            .collect();
        if target == Target::Follower && !leaders.is_empty() {
            let others: Vec<usize> = (0..n).filter(|i| !leaders.contains(i)).collect();
            // the last one: with shards on consecutive nodes, the least likely to lead
            return Ok(others.last().map(|&i| vec![i]).unwrap_or_default());
        }
        if leaders.is_empty() && n > 0 {
            // the target cannot say who leads: pick a node from the seed
            let mut rng =
                ChaCha8Rng::seed_from_u64(self.spec.seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            leaders.push(rng.gen_range(0..n));
        }
        leaders.sort_unstable();
        leaders.dedup();
        Ok(leaders)
    }

    async fn start<C: ClusterControl>(
        &self,
        cluster: &C,
        recorder: &dyn NemesisRecorder,
        k: usize,
        fault: &PlannedFault,
        n: usize,
    ) -> Started {
        let mut errors = Vec::new();
        match &fault.action {
            FaultAction::Kill { target, nodes } | FaultAction::Pause { target, nodes } => {
                let is_kill = matches!(fault.action, FaultAction::Kill { .. });
                let f = if is_kill { "kill" } else { "pause" };
                let nodes = match self.resolve(cluster, k, *target, nodes, n).await {
                    Ok(v) => v,
                    Err(e) => {
                        recorder.record(f, json!({"nodes": nodes, "error": e.to_string()}));
                        return Started::Failed;
                    }
                };
                for &i in &nodes {
                    let r = if is_kill {
                        cluster.kill(i).await
                    } else {
                        cluster.pause(i).await
                    };
                    match r {
                        Err(e) => errors.push(format!("{}: {e}", self.names.name(i))),
                        Ok(()) => {
                            let mut st = self.state();
                            if is_kill {
                                st.killed.insert(i);
                                st.paused.remove(&i);
                            } else {
                                st.paused.insert(i);
                            }
                        }
                    }
                }
                let v = json!({"nodes": self.names.names(&nodes), "target": target});
                recorder.record(f, with_error(v, &errors));
                Started::Nodes(nodes)
            }
            FaultAction::Clock {
                mode,
                target,
                nodes,
                offset_ms,
                period_ms,
            } => {
                let nodes = match self.resolve(cluster, k, *target, nodes, n).await {
                    Ok(v) => v,
                    Err(e) => {
                        recorder.record(
                            "start-clock",
                            json!({"nodes": nodes, "error": e.to_string()}),
                        );
                        return Started::Failed;
                    }
                };
                let now = Instant::now();
                let period = Duration::from_millis((*period_ms).max(MIN_CLOCK_PERIOD_MS));
                let job = ClockJob {
                    nodes: nodes.clone(),
                    mode: *mode,
                    offset_ms: *offset_ms,
                    period,
                    started: now,
                    next_tick: now + period,
                    on: true,
                };
                let first = if *mode == ClockMode::Skew {
                    0
                } else {
                    *offset_ms
                };
                self.state().clocks.extend(nodes.iter().copied());
                errors.extend(set_offsets(cluster, self.names, &nodes, first).await);
                let v = json!({"nodes": self.names.names(&nodes), "target": target, "mode": mode,
                               "offset_ms": offset_ms,
                               "period_ms": period.as_millis() as u64});
                recorder.record("start-clock", with_error(v, &errors));
                Started::Clock(job)
            }
            FaultAction::Partition {
                shape,
                groups,
                blocked,
                mode,
            } => {
                if shape == "figure-8" {
                    // The rounds are staged from who leads while the fault runs; it starts
                    // with a healed network.
                    let desc = partition_value(shape, groups, blocked, *mode);
                    let part = Ok(NetPart::Several(Vec::new()));
                    return match self.start_net(recorder, k, "start-partition", desc, part, n) {
                        Started::Net => Started::Figure8(Figure8Job::new(Instant::now())),
                        other => other,
                    };
                }
                // `isolate-leader` and `leader-churn` are resolved now: cut off whoever
                // leads at this moment.
                // `one-way-leader` too: what the leader sends is lost, what it is sent
                // still arrives.
                let resolved;
                let resolved_blocked;
                let mut leader = None;
                let (groups, blocked) = if shape == "isolate-leader"
                    || shape == "leader-churn"
                    || shape == "one-way-leader"
                {
                    let l = match self.resolve(cluster, k, Target::Leader, &[], n).await {
                        Ok(l) => l.first().copied().unwrap_or(0),
                        Err(_) => 0,
                    };
                    leader = Some(l);
                    resolved = isolate(self.names, l, n);
                    resolved_blocked = match shape.as_str() {
                        "one-way-leader" => resolved[1]
                            .iter()
                            .map(|to| (resolved[0][0].clone(), to.clone()))
                            .collect(),
                        _ => blocked.clone(),
                    };
                    (&resolved, &resolved_blocked)
                } else {
                    (groups, blocked)
                };
                let (f, desc) = (
                    "start-partition",
                    partition_value(shape, groups, blocked, *mode),
                );
                let part = blocked_flows(self.names, groups, blocked, n)
                    .map(|flows| NetPart::Cut(flows, *mode));
                match (self.start_net(recorder, k, f, desc, part, n), leader) {
                    (Started::Net, Some(isolated)) if shape == "leader-churn" => {
                        Started::Churn(ChurnJob {
                            isolated,
                            handovers_left: CHURN_HANDOVERS,
                            next_tick: Instant::now() + CHURN_POLL,
                        })
                    }
                    (started, _) => started,
                }
            }
            FaultAction::Slow {
                nodes,
                delay_ms,
                jitter_ms,
            } => {
                let desc = json!({"nodes": nodes, "delay_ms": delay_ms, "jitter_ms": jitter_ms});
                let part = match &self.network {
                    Some(net) if !net.supports_delay() => Err(NemesisError::Unsupported(
                        "this network backend cannot add delay".into(),
                    )),
                    _ => self.names.indices(nodes, n).map(|v| {
                        NetPart::Slow(
                            v,
                            Duration::from_millis(*delay_ms),
                            Duration::from_millis(*jitter_ms),
                        )
                    }),
                };
                self.start_net(recorder, k, "start-slow", desc, part, n)
            }
            FaultAction::Loss { nodes, fraction } => {
                let desc = json!({"nodes": nodes, "fraction": fraction});
                let part = self
                    .names
                    .indices(nodes, n)
                    .map(|v| NetPart::Loss(v, *fraction));
                self.start_net(recorder, k, "start-loss", desc, part, n)
            }
            FaultAction::SlowClient {
                target,
                nodes,
                delay_ms,
                jitter_ms,
            } => {
                let resolved = self.resolve(cluster, k, *target, nodes, n).await;
                let shown = resolved
                    .as_ref()
                    .map_or_else(|_| nodes.clone(), |v| self.names.names(v));
                let desc = json!({"nodes": shown, "target": target, "delay_ms": delay_ms,
                                  "jitter_ms": jitter_ms});
                let part = resolved.map(|v| {
                    NetPart::SlowClient(
                        v,
                        Duration::from_millis(*delay_ms),
                        Duration::from_millis(*jitter_ms),
                    )
                });
                self.start_net(recorder, k, "start-slow-client", desc, part, n)
            }
            FaultAction::StrobePause {
                target,
                nodes,
                stop_ms,
                every_ms,
            } => {
                let f = "start-strobe-pause";
                let nodes = match self.resolve(cluster, k, *target, nodes, n).await {
                    Ok(v) => v,
                    Err(e) => {
                        recorder.record(f, json!({"nodes": nodes, "error": e.to_string()}));
                        return Started::Failed;
                    }
                };
                let v = json!({"nodes": self.names.names(&nodes), "target": target, "stop_ms": stop_ms,
                               "every_ms": every_ms});
                recorder.record(f, v);
                self.strobe_start(cluster, nodes, *stop_ms, *every_ms).await
            }
        }
    }

    /// Makes `part` fault `k`'s contribution to the network and applies the whole network
    /// state; on failure, puts back what fault `k` contributed before (best effort).
    fn set_net_part(&self, k: usize, part: NetPart, n: usize) -> Result<(), NemesisError> {
        let net = self
            .network
            .as_ref()
            .ok_or_else(|| NemesisError::Unsupported("no network backend (proxy mesh)".into()))?;
        let mut st = self.state();
        let before = st.net.insert(k, part);
        let r = net.apply(&rebuild(&st.net, n));
        if r.is_err() {
            match before {
                Some(p) => st.net.insert(k, p),
                None => st.net.remove(&k),
            };
            let _ = net.apply(&rebuild(&st.net, n));
        }
        r
    }

    fn start_net(
        &self,
        recorder: &dyn NemesisRecorder,
        k: usize,
        f: &str,
        desc: Value,
        part: Result<NetPart, NemesisError>,
        n: usize,
    ) -> Started {
        match part.and_then(|part| self.set_net_part(k, part, n)) {
            Ok(()) => {
                recorder.record(f, desc);
                Started::Net
            }
            Err(e) => {
                recorder.record(f, with_error(desc, &[e.to_string()]));
                Started::Failed
            }
        }
    }

    async fn stop<C: ClusterControl>(
        &self,
        cluster: &C,
        recorder: &dyn NemesisRecorder,
        k: usize,
        fault: &PlannedFault,
        started: Started,
        n: usize,
    ) {
        let mut errors = Vec::new();
        match (started, &fault.action) {
            (Started::Nodes(nodes), FaultAction::Kill { .. }) => {
                for &i in &nodes {
                    // a node another fault already brought back is left alone
                    if !self.state().killed.contains(&i) {
                        continue;
                    }
                    match cluster.restart(i).await {
                        Ok(()) => {
                            self.state().killed.remove(&i);
                        }
                        Err(e) => errors.push(format!("{}: {e}", self.names.name(i))),
                    }
                }
                recorder.record(
                    "restart",
                    with_error(json!({"nodes": self.names.names(&nodes)}), &errors),
                );
            }
            (Started::Nodes(nodes), _) => {
                errors.extend(self.resume_paused(cluster, &nodes).await);
                recorder.record(
                    "resume",
                    with_error(json!({"nodes": self.names.names(&nodes)}), &errors),
                );
            }
            (Started::Clock(job), _) => {
                errors.extend(set_offsets(cluster, self.names, &job.nodes, 0).await);
                if errors.is_empty() {
                    let mut st = self.state();
                    job.nodes.iter().for_each(|i| {
                        st.clocks.remove(i);
                    });
                }
                let v = json!({"nodes": self.names.names(&job.nodes), "offset_ms": 0});
                recorder.record("stop-clock", with_error(v, &errors));
            }
            (Started::Strobe(job), _) => {
                let nodes = job.nodes.clone();
                errors.extend(self.strobe_end(cluster, job).await);
                let v = json!({"nodes": self.names.names(&nodes)});
                recorder.record("stop-strobe-pause", with_error(v, &errors));
            }
            (Started::Net | Started::Churn(_) | Started::Figure8(_), action) => {
                let kind = action.kind();
                let mut slowed = None;
                let result = match &self.network {
                    Some(net) => {
                        let mut st = self.state();
                        if let Some(NetPart::SlowClient(nodes, ..)) = st.net.remove(&k) {
                            slowed = Some(self.names.names(&nodes));
                        }
                        net.apply(&rebuild(&st.net, n))
                    }
                    None => Ok(()),
                };
                if let Err(e) = result {
                    errors.push(e.to_string());
                }
                let desc = match action {
                    FaultAction::Partition {
                        shape,
                        groups,
                        blocked,
                        mode,
                    } => partition_value(shape, groups, blocked, *mode),
                    FaultAction::Slow { nodes, .. } | FaultAction::Loss { nodes, .. } => {
                        json!({"nodes": nodes})
                    }
                    FaultAction::SlowClient { nodes, .. } => {
                        json!({"nodes": slowed.unwrap_or_else(|| nodes.clone())})
                    }
                    _ => json!({}),
                };
                recorder.record(&format!("stop-{kind}"), with_error(desc, &errors));
            }
            (Started::Failed, _) => {}
        }
    }
}

fn partition_value(
    shape: &str,
    groups: &[Vec<String>],
    blocked: &[(String, String)],
    mode: CutMode,
) -> Value {
    let mut v = json!({"shape": shape, "mode": mode, "blocked": blocked});
    v[shape] = json!(groups);
    v
}

/// Text for the progress display: the active faults and their nodes.
fn describe(names: NodeNames, plan: &[PlannedFault], started: &BTreeMap<usize, Started>) -> String {
    started
        .iter()
        .filter(|(_, s)| !matches!(s, Started::Failed))
        .map(|(&k, s)| match (s, &plan[k].action) {
            (Started::Nodes(nodes), a)
            | (Started::Clock(ClockJob { nodes, .. }), a)
            | (Started::Strobe(StrobeJob { nodes, .. }), a) => {
                format!("{} {}", a.kind(), names.names(nodes).join(","))
            }
            (_, FaultAction::Partition { shape, .. }) => format!("partition {shape}"),
            (_, a) => a.kind().to_string(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}
