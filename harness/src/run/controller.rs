//! The controller: runs one test through its phases.
//!
//! ```text
//! resolve -> start cluster -> main (clients + nemesis) -> heal -> quiesce -> final reads
//!         -> teardown -> check -> results.json, report.html, summary
//! ```
//!
//! Teardown runs on every path: normal end, error, Ctrl-C (the `cancel` token) and panic
//! (the cluster's `Drop`).

use crate::check::{check_history, CheckOptions};
use crate::run::cluster::{Cluster, NodeLayout};
use crate::run::live::LiveStatusFile;
use crate::run::online::{OnlineMonitor, OnlineOutcome, StopRule};
use crate::run::programs::{check_required_programs, find_binary};
use crate::run::progress::Progress;
use crate::run::recorder::HistoryRecorder;
use crate::run::spec::TestSpec;
use crate::run::store::RunDir;
use crate::run::worker::{perform, RateLimiter, Worker};
use crate::systems::{BoxFuture, Client, Invocation, Target, TargetOptions};
use crate::workload::{OpGenerator, Workload, WorkloadOptions};
use anyhow::Context;
use splitbrain_checkers::{CheckResult, History, OpType, Validity};
use splitbrain_nemesis::{
    ClusterControl, Nemesis, NemesisError, NemesisRecorder, NemesisSpec, NetworkFaults,
};
use splitbrain_reports::{history_stats, RunSummary};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What a finished run produced.
pub struct RunOutcome {
    /// The checked summary (also in results.json).
    pub summary: RunSummary,
    /// The run directory.
    pub run_dir: RunDir,
}

/// Adapts the history recorder for the nemesis, and keeps the active fault for display.
struct NemesisLog {
    recorder: HistoryRecorder,
    active: Arc<Mutex<String>>,
}

impl NemesisRecorder for NemesisLog {
    fn record(&self, f: &str, value: serde_json::Value) {
        self.recorder.record_nemesis(f, value);
    }
    fn set_active(&self, active: &str) {
        *self.active.lock().unwrap_or_else(|e| e.into_inner()) = active.to_string();
    }
}

/// Runs a whole test on this machine (`run::entry::run` is the way in: it chooses this,
/// a remote run or Maelstrom nodes). `cancel` is triggered by Ctrl-C; the run then stops
/// its clients, heals, tears down and checks what was recorded.
pub(crate) async fn run_local_test(
    spec: &TestSpec,
    target: Arc<dyn Target>,
    workload: &dyn Workload,
    check: &CheckOptions,
    cancel: CancellationToken,
    show_progress: bool,
) -> anyhow::Result<RunOutcome> {
    if spec.target_bin.is_none() {
        check_required_programs(target.as_ref())?;
    }
    let binary = find_binary(spec.target_bin.as_ref(), target.binary_name()).map_err(|e| {
        match target.install_hint() {
            Some(hint) => anyhow::anyhow!("{e}\n{hint}"),
            None => e,
        }
    })?;
    let (nemesis_spec, spec, run_dir) = open_run(spec)?;
    let spec = &spec;
    let topts = TargetOptions::from_spec(spec);
    let network =
        crate::run::layout::NetworkLayout::build(spec, target.as_ref(), &run_dir, &nemesis_spec)
            .await?;
    let crate::run::layout::NetworkLayout {
        layouts,
        client_addrs,
        mesh,
        namespaces,
        routed,
        dial,
    } = network;
    let args: Vec<Vec<String>> = layouts
        .iter()
        .enumerate()
        .map(|(i, l)| {
            target.node_args(i, l.client_addr, l.peer_addr, &dial[i], &l.data_dir, &topts)
        })
        .collect();
    let sidecars = (0..layouts.len())
        .map(|i| target.sidecar(i, &layouts, &topts))
        .collect();
    let start = Instant::now();
    let recorder = HistoryRecorder::create(&run_dir.history(), start, true)?;
    let cluster = match write_node_files(target.as_ref(), &layouts, &topts) {
        Ok(()) => {
            Cluster::start_with_sidecars(
                target.clone(),
                binary,
                layouts.clone(),
                args,
                sidecars,
                Duration::from_secs(30),
            )
            .await
        }
        Err(e) => Err(e.into()),
    };
    let cluster = match cluster {
        Ok(c) => Arc::new(c),
        Err(e) => {
            crate::run::mesh::stop_mesh(mesh.as_deref()).await;
            stop_routed(routed.as_deref()).await;
            drop(namespaces);
            let e = anyhow::Error::new(e).context("starting the cluster");
            record_start_failure(spec, &run_dir, &recorder, format!("{e:#}"), "the cluster");
            return Err(e);
        }
    };
    let nemesis = match (&routed, &namespaces) {
        (Some(r), _) => {
            Nemesis::with_network(nemesis_spec, Some(r.clone() as Arc<dyn NetworkFaults>))
        }
        (None, Some(ns)) => {
            Nemesis::with_network(nemesis_spec, Some(ns.clone() as Arc<dyn NetworkFaults>))
        }
        (None, None) => Nemesis::with_mesh(nemesis_spec, mesh.clone()),
    }
    .with_node_names(spec.node_names());
    let nemesis = crate::run::memory::attach(nemesis, spec);
    let mut clients = DriveClients::for_target(&target, &client_addrs, &topts, spec.steps);
    let online = start_online(spec, workload, check, &recorder, show_progress);
    if let (Some(monitor), Some(_)) = (&online, &spec.stop_on_anomaly) {
        clients.stop_early = Some(monitor.stop_requested());
    }
    let result = drive(
        spec,
        workload,
        cluster.as_ref(),
        &nemesis,
        clients,
        &recorder,
        cancel.clone(),
        show_progress,
    )
    .await;
    cluster.teardown();
    // What the mesh's links measured, over the run and per fault window.
    let now_s = recorder.now_ns() as f64 / 1e9;
    let links = match (
        mesh.as_deref(),
        routed.as_ref().and_then(|r| r.client_mesh()),
    ) {
        (Some(m), _) => Some(crate::remote::proxies::summarize_mesh(m, now_s)),
        (None, Some(c)) => Some(crate::remote::proxies::summarize_client_mesh(
            c,
            layouts.len(),
            now_s,
        )),
        (None, None) => None,
    };
    if let Some(measured) = &links {
        crate::remote::proxies::record_links(&run_dir.path, measured);
    }
    crate::run::mesh::stop_mesh(mesh.as_deref()).await;
    stop_routed(routed.as_deref()).await;
    // The namespaces go once no node process holds them (teardown reaped them).
    if let Some(ns) = namespaces {
        if let Err(e) = ns.teardown() {
            eprintln!("splitbrain: removing the run's network namespaces: {e}");
        }
    }
    let online = online.map(OnlineMonitor::finish);
    let searched = fault_search(&nemesis, spec, &run_dir, recorder.counts.as_ref());
    finish_run(
        spec, &run_dir, &recorder, result, &cancel, workload, check, None, online, searched, links,
    )
    .await
}

/// Closes the proxies of namespaced nodes' routed peer links, if the run has them.
async fn stop_routed(routed: Option<&splitbrain_nemesis::netns_mesh::NetnsMesh>) {
    if let Some(r) = routed {
        r.shutdown().await;
    }
}

/// Starts checking the run's history while it is recorded ([`crate::run::online`]), with the
/// workload's checkers that decide on a prefix; `None` when it has none or the run asks
/// for none (`--no-online-check`).
fn start_online(
    spec: &TestSpec,
    workload: &dyn Workload,
    check: &CheckOptions,
    recorder: &HistoryRecorder,
    show_progress: bool,
) -> Option<OnlineMonitor> {
    if spec.no_online_check {
        return None;
    }
    let checkers = workload
        .checkers(&crate::run::online::online_options(check))
        .ok()?;
    let rule = spec
        .stop_on_anomaly
        .clone()
        .map(|when_found| StopRule { when_found });
    let monitor = OnlineMonitor::start(recorder, checkers, rule, !show_progress);
    if monitor.is_none() && spec.stop_on_anomaly.is_some() {
        eprintln!(
            "splitbrain: --stop-on-anomaly: no checker of workload {} decides before the run ends; it runs its course",
            spec.workload
        );
    }
    monitor
}

/// Writes the files each node needs before its first start ([`Target::node_files`]).
fn write_node_files(
    target: &dyn Target,
    layouts: &[NodeLayout],
    topts: &TargetOptions,
) -> std::io::Result<()> {
    for i in 0..layouts.len() {
        for (path, text) in target.node_files(i, layouts, topts) {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&path, text)?;
        }
    }
    Ok(())
}

/// Opens a run: the nemesis spec (plan file or `--nemesis`), the test spec with the fault
/// schedule it will follow, and its run directory with `test.json` written.
pub(crate) fn open_run(spec: &TestSpec) -> anyhow::Result<(NemesisSpec, TestSpec, RunDir)> {
    let nemesis_spec = spec.nemesis_spec()?;
    let time_limit = Duration::from_secs_f64(spec.time_limit_s);
    let mut spec = spec.clone();
    let nemesis = Nemesis::new(nemesis_spec.clone()).with_node_names(spec.node_names());
    if let Some(path) = &spec.nemesis_plan {
        // A plan names nodes; one that is not a node of this run (a plan written for
        // n1..nN given to a Maelstrom run of n0..n(N-1), or for more nodes) is refused
        // before anything starts, rather than failing fault by fault.
        nemesis
            .check_plan(spec.nodes)
            .map_err(|msg| NemesisError::Plan {
                path: path.display().to_string(),
                msg,
            })?;
    }
    spec.nemesis_schedule = serde_json::to_value(nemesis.schedule(spec.nodes, time_limit))?;
    let run_dir = RunDir::create(&spec.store, &spec.name)
        .with_context(|| format!("creating the run directory under {}", spec.store.display()))?;
    std::fs::write(run_dir.test_json(), serde_json::to_vec_pretty(&spec)?)?;
    eprintln!(
        "splitbrain: test {} seed {} -> {}",
        spec.name,
        spec.seed,
        run_dir.path.display()
    );
    Ok((nemesis_spec, spec, run_dir))
}

/// What the nemesis's sampler reached, for results.json (`None` for a run that sampled
/// nothing: no faults). A guided search's schedule is written beside it as
/// `nemesis-plan.json` (a plan file `--nemesis-plan` replays) and into test.json's
/// `nemesis_schedule`, the schedule the run followed; first it is credited with the
/// anomalies `clients` counts (the sampler may have stopped before it saw them), and its
/// reward table is written back to its memory ([`crate::run::memory`]).
pub fn fault_search(
    nemesis: &Nemesis,
    spec: &TestSpec,
    run_dir: &RunDir,
    clients: &dyn splitbrain_nemesis::ClientSignals,
) -> Option<splitbrain_reports::FaultSearch> {
    nemesis.conclude(&clients.counts());
    let cov = nemesis.coverage();
    let written = crate::run::memory::save(nemesis, spec, cov.memory.as_ref());
    let memory = cov
        .memory
        .clone()
        .map(|m| splitbrain_reports::SearchMemory {
            file: m.file,
            runs: m.runs,
            pairs: m.pairs,
            note: m.note,
            written,
        });
    let made = nemesis.plan_made();
    if cov.samples == 0 && made.is_none() {
        return None;
    }
    let mut plan_file = None;
    if let Some(plan) = made {
        let path = run_dir.path.join(GUIDED_PLAN_FILE);
        let file = serde_json::json!({
            "search": "guided",
            "seed": spec.seed,
            "faults": plan,
        });
        let written = serde_json::to_vec_pretty(&file)
            .map_err(std::io::Error::other)
            .and_then(|body| std::fs::write(&path, body));
        match written {
            Ok(()) => plan_file = Some(path.display().to_string()),
            Err(e) => eprintln!("splitbrain: writing {}: {e}", path.display()),
        }
        let mut followed = spec.clone();
        followed.nemesis_schedule = serde_json::to_value(&plan).unwrap_or_default();
        if let Ok(body) = serde_json::to_vec_pretty(&followed) {
            if let Err(e) = std::fs::write(run_dir.test_json(), body) {
                eprintln!("splitbrain: writing test.json: {e}");
            }
        }
    }
    Some(splitbrain_reports::FaultSearch {
        search: cov.search,
        signals: cov.signals,
        samples: cov.samples,
        leader_changes: cov.leader_changes,
        states: cov.states.len(),
        pairs: cov.pairs.len(),
        state_counts: cov.states,
        pair_counts: cov.pairs,
        plan_file,
        memory,
    })
}

/// The plan file a guided run's schedule is stored as, in its run directory.
pub const GUIDED_PLAN_FILE: &str = "nemesis-plan.json";

/// A run whose nodes never started still leaves results.json (verdict unknown, `why`),
/// so a CI gate reading it sees why instead of a missing file. `what` names what failed.
pub(crate) fn record_start_failure(
    spec: &TestSpec,
    run_dir: &RunDir,
    recorder: &HistoryRecorder,
    why: String,
    what: &str,
) {
    let ops = recorder.finish().unwrap_or_default();
    let history = History::new(ops).unwrap_or_default();
    let result = CheckResult::new("cluster", Validity::Unknown, why);
    let incomplete = Some(format!("{what} did not start"));
    if let Err(w) = store_summary(spec, run_dir, vec![result], &history, incomplete) {
        eprintln!("splitbrain: could not write results: {w:#}");
    }
}

/// After teardown: reads back what was recorded, runs the workload's checkers (in a
/// blocking thread) and stores the summary. `result` is how the drive phases ended; `net`
/// the message statistics of targets whose network the harness simulates.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn finish_run(
    spec: &TestSpec,
    run_dir: &RunDir,
    recorder: &HistoryRecorder,
    result: anyhow::Result<()>,
    cancel: &CancellationToken,
    workload: &dyn Workload,
    check: &CheckOptions,
    net: Option<splitbrain_reports::NetStats>,
    online: Option<OnlineOutcome>,
    fault_search: Option<splitbrain_reports::FaultSearch>,
    links: Option<splitbrain_reports::LinkMeasures>,
) -> anyhow::Result<RunOutcome> {
    let ops = recorder.finish()?;
    let incomplete = match &result {
        Err(e) => Some(format!("run error: {e:#}")),
        Ok(()) if cancel.is_cancelled() => Some("interrupted (SIGINT)".to_string()),
        Ok(()) => None,
    };
    let history = History::new(ops).context("the recorded history is malformed")?;
    let checkers = workload.checkers(check)?;
    let opts = check.clone();
    let test = serde_json::to_value(spec)?;
    let results = tokio::task::spawn_blocking(move || {
        let r = check_history(&history, &checkers, &opts, Some(&test));
        (history, r)
    })
    .await?;
    let (history, mut results) = results;
    let final_at_s = recorder.now_ns() as f64 / 1e9;
    let online = online.unwrap_or_default();
    let (first_known_at_s, disagreement) =
        crate::run::online::first_known(&results, &online, final_at_s);
    if let Some(d) = disagreement {
        eprintln!("splitbrain: {}", d.explanation);
        results.push(d);
    }
    // A PostgreSQL run's statement log, when it has one: each cycle's statements.
    crate::systems::postgres::evidence::annotate(
        &mut results,
        &history,
        &run_dir.path,
        spec.concurrency,
    );
    let extra = SummaryExtra {
        net,
        stopped_early: online.stopped_early,
        first_known_at_s,
        fault_search,
        links,
    };
    let summary = store_summary_with(spec, run_dir, results, &history, incomplete, extra)?;
    Ok(RunOutcome {
        summary,
        run_dir: run_dir.clone(),
    })
}

/// The run's summary, written into its directory (results.json, report.html, junit.xml).
pub(crate) fn store_summary(
    spec: &TestSpec,
    run_dir: &RunDir,
    results: Vec<CheckResult>,
    history: &History,
    incomplete: Option<String>,
) -> anyhow::Result<RunSummary> {
    store_summary_with(
        spec,
        run_dir,
        results,
        history,
        incomplete,
        SummaryExtra::default(),
    )
}

/// What a finished run's summary carries beyond its results.
#[derive(Default)]
struct SummaryExtra {
    /// The simulated network's message statistics, if any.
    net: Option<splitbrain_reports::NetStats>,
    /// Why the main phase ended early (`--stop-on-anomaly`).
    stopped_early: Option<String>,
    /// Per invalid checker, seconds into the run when it first knew.
    first_known_at_s: std::collections::BTreeMap<String, f64>,
    /// How the faults were chosen and what the sampler reached.
    fault_search: Option<splitbrain_reports::FaultSearch>,
    /// What the link proxies of a run on hosts measured.
    links: Option<splitbrain_reports::LinkMeasures>,
}

/// [`store_summary`] with what else the run found ([`SummaryExtra`]).
fn store_summary_with(
    spec: &TestSpec,
    run_dir: &RunDir,
    results: Vec<CheckResult>,
    history: &History,
    incomplete: Option<String>,
    extra: SummaryExtra,
) -> anyhow::Result<RunSummary> {
    let mut summary = RunSummary::new(
        spec.name.clone(),
        Some(run_dir.path.display().to_string()),
        results,
        history_stats(history),
        Some(spec.seed),
    );
    summary.incomplete = incomplete;
    summary.net = extra.net;
    summary.stopped_early = extra.stopped_early;
    summary.first_known_at_s = extra.first_known_at_s;
    summary.fault_search = extra.fault_search;
    summary.links = extra.links;
    let test = serde_json::to_value(spec)?;
    crate::check::write_outputs(&run_dir.path, &summary, history, Some(&test))?;
    Ok(summary)
}

/// Process ids of setup operations: above every id the main phase and final reads use.
const SETUP_PROCESS_BASE: u64 = 2_000_000;
/// Attempts per setup operation before the run gives up.
const SETUP_ATTEMPTS: u64 = 10;

/// Runs the workload's setup operations before any fault, each until it is `ok`.
/// Every attempt is recorded under its own process (an `info` attempt may still take
/// effect, so setup ops must be idempotent, as opening balances are).
async fn run_setup(
    setup: &[Invocation],
    make_client: &(dyn Fn(usize) -> Box<dyn Client> + Send + Sync),
    recorder: &HistoryRecorder,
    op_timeout: Duration,
    cancel: &CancellationToken,
) -> anyhow::Result<()> {
    let mut process = SETUP_PROCESS_BASE;
    for inv in setup {
        let mut done = false;
        for attempt in 0..SETUP_ATTEMPTS {
            if cancel.is_cancelled() {
                return Ok(());
            }
            let mut client = make_client(attempt as usize);
            let outcome = perform(&mut *client, recorder, process, inv, op_timeout).await;
            process += 1;
            if outcome == OpType::Ok {
                done = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::ensure!(
            done,
            "setup operation {} {} did not succeed in {SETUP_ATTEMPTS} attempts",
            inv.f,
            inv.value
        );
    }
    Ok(())
}

/// How the drive phases reach the system under test: clients for the workload's processes,
/// clients pinned to one replica for per-replica final reads, and an optional watch that
/// ends the main phase early (`--steps`).
pub(crate) struct DriveClients {
    /// A client for a fresh process whose home node is the argument.
    pub make_client: Arc<dyn Fn(usize) -> Box<dyn Client> + Send + Sync>,
    /// A client that only ever talks to replica `r` (convergence final reads).
    pub make_replica_client: Arc<dyn Fn(usize) -> Box<dyn Client> + Send + Sync>,
    /// Number of replicas the per-replica final reads visit.
    pub replicas: usize,
    /// Resolves when the target reports the `--steps` it was asked for.
    pub steps_reached: Option<BoxFuture<'static, ()>>,
    /// Resolves, with the reason, when the main phase is to end early
    /// (`--stop-on-anomaly`: the online check found what it waits for).
    pub stop_early: Option<BoxFuture<'static, String>>,
}

impl DriveClients {
    /// The clients of a target reached over the network at `addrs`.
    pub fn for_target(
        target: &Arc<dyn Target>,
        addrs: &[SocketAddr],
        topts: &TargetOptions,
        steps: Option<u64>,
    ) -> DriveClients {
        let addrs: Vec<SocketAddr> = addrs.to_vec();
        let make_client: Arc<dyn Fn(usize) -> Box<dyn Client> + Send + Sync> = {
            let (target, addrs, topts) = (target.clone(), addrs.clone(), topts.clone());
            Arc::new(move |home| target.client(&addrs, home, &topts))
        };
        let make_replica_client: Arc<dyn Fn(usize) -> Box<dyn Client> + Send + Sync> = {
            let (target, addrs, topts) = (target.clone(), addrs.clone(), topts.clone());
            Arc::new(move |r| target.replica_client(&addrs, r, &topts))
        };
        let steps_reached = steps.map(|steps| {
            let (target, addrs) = (target.clone(), addrs.clone());
            let watch: BoxFuture<'static, ()> = Box::pin(async move {
                let http = reqwest::Client::new();
                target.until_steps(&http, &addrs, Some(steps)).await;
            });
            watch
        });
        DriveClients {
            make_client,
            make_replica_client,
            replicas: addrs.len(),
            steps_reached,
            stop_early: None,
        }
    }
}

/// The main, heal, quiesce and final-read phases.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn drive<C: ClusterControl>(
    spec: &TestSpec,
    workload: &dyn Workload,
    cluster: &C,
    nemesis: &Nemesis,
    clients: DriveClients,
    recorder: &HistoryRecorder,
    cancel: CancellationToken,
    show_progress: bool,
) -> anyhow::Result<()> {
    let generator: Arc<Mutex<Box<dyn OpGenerator>>> =
        Arc::new(Mutex::new(workload.generator(WorkloadOptions {
            active_keys: spec.active_keys,
            ops_per_key: spec.ops_per_key,
        })));
    let DriveClients {
        make_client,
        make_replica_client,
        replicas,
        steps_reached,
        stop_early,
    } = clients;
    let limiter = Arc::new(RateLimiter::new(spec.rate, spec.seed));
    let op_timeout = Duration::from_millis(spec.op_timeout_ms + 500);
    let setup = generator
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .setup_ops();
    run_setup(&setup, make_client.as_ref(), recorder, op_timeout, &cancel).await?;
    let time_limit = Duration::from_secs_f64(spec.time_limit_s);
    let deadline = Instant::now() + time_limit;
    let active = Arc::new(Mutex::new(String::new()));
    let progress = Progress::start(
        show_progress,
        time_limit,
        recorder.counts.clone(),
        active.clone(),
    );
    let live = recorder
        .dir()
        .map(|dir| LiveStatusFile::start(dir, time_limit, recorder.counts.clone(), active.clone()));

    // The main phase ends at the deadline, or earlier once the target reports
    // `--steps`; a child token, so ending the phase is not an interruption.
    let phase_end = cancel.child_token();
    if let (Some(steps), Some(reached)) = (spec.steps, steps_reached) {
        let end = phase_end.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = reached => {
                    eprintln!("splitbrain: the target reached step {steps}; ending the main phase");
                    end.cancel();
                }
                _ = end.cancelled() => {}
            }
        });
    }
    if let Some(stop) = stop_early {
        let end = phase_end.clone();
        tokio::spawn(async move {
            tokio::select! {
                reason = stop => {
                    eprintln!("splitbrain: {reason}; ending the main phase");
                    end.cancel();
                }
                _ = end.cancelled() => {}
            }
        });
    }
    let mut workers = tokio::task::JoinSet::new();
    for slot in 0..spec.concurrency {
        let w = Worker {
            slot,
            concurrency: spec.concurrency,
            make_client: make_client.clone(),
            generator: generator.clone(),
            recorder: recorder.clone(),
            limiter: limiter.clone(),
            op_timeout,
            seed: spec.seed,
        };
        workers.spawn(w.run(deadline, phase_end.clone()));
    }
    let log = NemesisLog {
        recorder: recorder.clone(),
        active: active.clone(),
    };
    let nemesis_result = tokio::select! {
        r = nemesis.run_with(cluster, &log, time_limit, Some(recorder.counts.as_ref())) => {
            r.map_err(anyhow::Error::from)
        }
        _ = phase_end.cancelled() => Ok(()),
    };
    // Clients stop at the deadline; an op in flight gets its timeout to finish.
    let drain_bound = op_timeout + Duration::from_secs(1);
    let _ = tokio::time::timeout(
        deadline.saturating_duration_since(Instant::now()) + drain_bound,
        async { while workers.join_next().await.is_some() {} },
    )
    .await;
    workers.abort_all();
    // Stops the `--steps` watcher when the deadline came first.
    phase_end.cancel();
    // Heal always, even when interrupted: nothing may be left broken.
    *active.lock().unwrap_or_else(|e| e.into_inner()) = "healing".into();
    let heal = nemesis.heal(cluster, &log).await;
    progress.finish();
    if let Some(live) = &live {
        live.finish();
    }
    nemesis_result?;
    heal?;
    if cancel.is_cancelled() {
        return Ok(());
    }
    let (final_reads, per_replica) = {
        let g = generator.lock().unwrap_or_else(|e| e.into_inner());
        (g.final_reads(), g.final_reads_per_replica())
    };
    if per_replica && !final_reads.is_empty() {
        // Convergence is timed from the heal, so no quiet period first: rounds start now.
        let rounds = crate::run::converge::FinalReadRounds {
            reads: Arc::new(final_reads),
            replicas,
            make_client: make_replica_client,
            recorder: recorder.clone(),
            op_timeout,
            bound: Duration::from_secs_f64(spec.converge_bound_s),
        };
        let report = rounds.run(&cancel).await;
        eprintln!("splitbrain: final reads: {report}");
    } else if !final_reads.is_empty() {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(spec.quiesce_s)) => {}
            _ = cancel.cancelled() => return Ok(()),
        }
        // Fresh process ids above every one the main phase could have used.
        let base = 1_000_000u64;
        for (n, inv) in final_reads.iter().enumerate() {
            if cancel.is_cancelled() {
                break;
            }
            let mut client = make_client(n);
            perform(&mut *client, recorder, base + n as u64, inv, op_timeout).await;
        }
    }
    Ok(())
}
