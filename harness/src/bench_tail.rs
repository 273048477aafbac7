//! `splitbrain bench tail`: read tail latency of the KV store's read policies when one
//! server is slow the way real servers are ("The Tail at Scale", Dean and Barroso,
//! CACM 2013).
//!
//! Each cell is a real `splitbrain test --target kv --nodes 3 --workload register` run
//! (release binaries, loopback) with one read policy under one scenario: (a) no fault,
//! (b) one follower's client link +50 ms, (c) one follower strobe-paused 30 ms every
//! 300 ms, (d) the leader strobe-paused likewise. Every cell runs at the same offered
//! load, a fixed share of the capacity measured first (read-index, no fault, no rate
//! limit). Read latencies come from the recorded history (invoke to completion of `ok`
//! reads); requests per read from the KV clients' counters; the verdict from the
//! linearizability checker of the same run. Each cell is a [`TailRun`] of the reports
//! crate, which also draws the bench's page (`--html`).

use crate::check::CheckOptions;
use crate::controller::run_test;
use crate::spec::TestSpec;
use crate::target::kv::ReadCounters;
use anyhow::Context;
use serde_json::{json, Value};
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::history::{History, Outcome};
use splitbrain_checkers::Validity;
use splitbrain_reports::{TailRun, TAIL_QUANTILES};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// The read policies compared, in table order.
pub const POLICIES: &[&str] = &["read-index", "replica-read", "hedged", "read-all"];

/// Default share of the measured capacity offered in every cell (`--load-share`).
pub const LOAD_SHARE: f64 = 0.6;
/// Closed-loop clients of the capacity measurement.
pub const CALIBRATION_CLIENTS: usize = 16;
/// Default client pool of every cell (`--clients`). Each client is homed on one replica
/// and waits for its read, so a stalled replica holds every client homed on it; once all
/// of them are stalled, the pool hands the next arrivals only to clients homed elsewhere,
/// and the stall stops reaching new reads. The pool must outnumber the reads that arrive
/// for one replica during one stall (at 3400 ops/s, half reads, 30 ms: about 17) for
/// arrivals to meet the stalled replica as independent users' requests would.
pub const CELL_CLIENTS: usize = 96;
/// Seconds of the capacity measurement.
const CALIBRATION_S: f64 = 6.0;

/// One fault scenario: a label and a fault plan (empty for none).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Short label for the table.
    pub label: &'static str,
    /// The plan file's entries, lasting the whole cell.
    pub plan: Value,
}

/// The four scenarios for cells of `cell_ms` milliseconds.
pub fn scenarios(cell_ms: u64) -> Vec<Scenario> {
    // longer than the cell: the fault lasts until the heal
    let for_ms = cell_ms + 60_000;
    let strobe = |target: &str| {
        json!([{"at_ms": 0, "for_ms": for_ms, "f": "strobe-pause", "target": target,
                "stop_ms": 30, "every_ms": 300}])
    };
    vec![
        Scenario {
            label: "(a) no fault",
            plan: json!([]),
        },
        Scenario {
            label: "(b) follower client link +50 ms",
            plan: json!([{"at_ms": 0, "for_ms": for_ms, "f": "slow-client",
                          "target": "follower", "delay_ms": 50}]),
        },
        Scenario {
            label: "(c) follower strobe-paused 30/300 ms",
            plan: strobe("follower"),
        },
        Scenario {
            label: "(d) leader strobe-paused 30/300 ms",
            plan: strobe("leader"),
        },
    ]
}

/// Bench settings.
#[derive(Debug, Clone)]
pub struct TailOptions {
    /// Seconds per cell.
    pub cell_s: f64,
    /// Where runs are stored (a scratch directory).
    pub store: PathBuf,
    /// Seed of every run.
    pub seed: u64,
    /// The hedge delay floor, ms.
    pub hedge_floor_ms: u64,
    /// Share of the measured capacity offered in every cell.
    pub load_share: f64,
    /// The capacity (ok ops/s) to take instead of measuring it, to rerun a few cells at
    /// the load of an earlier run.
    pub capacity: Option<f64>,
    /// Scenario letters to run (`abcd` for all).
    pub scenarios: String,
    /// Policies to run (a subset of [`POLICIES`]).
    pub policies: Vec<String>,
    /// Concurrent clients of every cell (the capacity is measured with
    /// [`CALIBRATION_CLIENTS`]).
    pub clients: usize,
}

fn spec(
    opts: &TailOptions,
    name: &str,
    mode: &str,
    rate: f64,
    clients: usize,
    secs: f64,
) -> TestSpec {
    TestSpec {
        name: name.to_string(),
        target: "kv".into(),
        target_spec: None,
        workload: "register".into(),
        nemesis: Vec::new(),
        nemesis_interval_s: 10.0,
        nemesis_plan: None,
        nemesis_schedule: Value::Null,
        nodes: 3,
        concurrency: clients,
        rate,
        time_limit_s: secs,
        steps: None,
        op_timeout_ms: 1000,
        seed: opts.seed,
        bugs: Vec::new(),
        shards: 1,
        read_mode: Some(mode.to_string()),
        wait: None,
        read_from: None,
        replication: None,
        transport: None,
        consistency_model: None,
        init: None,
        hedge_delay_ms: opts.hedge_floor_ms,
        active_keys: 8,
        ops_per_key: 100,
        quiesce_s: 0.5,
        converge_bound_s: crate::spec::default_converge_bound_s(),
        store: opts.store.clone(),
        target_bin: None,
        hosts: None,
        version: env!("CARGO_PKG_VERSION").to_string(),
        maelstrom: None,
    }
}

/// Runs one test; returns its history, verdict, ok ops/s and the clients' read counts.
async fn run_one(spec: &TestSpec) -> anyhow::Result<(History, Validity, f64, ReadCounters)> {
    let target = crate::target::by_name("kv").context("the kv target")?;
    let workload = crate::workload::by_name("register").context("the register workload")?;
    let before = ReadCounters::now();
    let outcome = run_test(
        spec,
        target,
        workload.as_ref(),
        &CheckOptions::default(),
        CancellationToken::new(),
        false,
    )
    .await?;
    let counts = ReadCounters::now().since(before);
    let history = read_path(&outcome.run_dir.history())?;
    let ok = history.outcome_counts().ok as f64;
    Ok((
        history,
        outcome.summary.valid,
        ok / spec.time_limit_s,
        counts,
    ))
}

/// Measures capacity: ok ops/s of read-index with no fault and no rate limit.
pub async fn calibrate(opts: &TailOptions) -> anyhow::Result<f64> {
    let s = spec(
        opts,
        "tail-capacity",
        "read-index",
        0.0,
        CALIBRATION_CLIENTS,
        CALIBRATION_S,
    );
    let (_, _, ok_per_s, _) = run_one(&s).await?;
    Ok(ok_per_s)
}

/// Latencies (ms) of the `ok` reads of a history, sorted.
pub fn read_latencies_ms(history: &History) -> Vec<f64> {
    let mut v: Vec<f64> = history
        .pairs()
        .iter()
        .filter(|p| p.f == "read" && p.outcome == Outcome::Ok)
        .filter_map(|p| {
            let done = p.complete_time?;
            Some(done.saturating_sub(p.invoke_time) as f64 / 1e6)
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The `q` quantile (nearest rank) of sorted values; 0 for none.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Measures one cell at `rate` ops/s.
pub async fn run_cell(
    opts: &TailOptions,
    policy: &str,
    scenario: &Scenario,
    rate: f64,
) -> anyhow::Result<TailRun> {
    let plan_path = opts.store.join(format!("plan-{}.json", std::process::id()));
    std::fs::write(&plan_path, serde_json::to_vec(&scenario.plan)?)?;
    let mut s = spec(
        opts,
        &format!("tail-{policy}"),
        policy,
        rate,
        opts.clients,
        opts.cell_s,
    );
    s.nemesis_plan = Some(plan_path);
    let (history, verdict, ok_per_s, counts) = run_one(&s).await?;
    let lat = read_latencies_ms(&history);
    let reads = counts.reads.max(1) as f64;
    if counts.shadows > 0 {
        eprintln!(
            "bench tail: {} {policy}: {:.1}% of reads carried a shadow request",
            scenario.label,
            100.0 * counts.shadows as f64 / reads
        );
    }
    Ok(TailRun {
        policy: policy.to_string(),
        scenario: scenario.label.to_string(),
        reads: lat.len(),
        latency_ms: TAIL_QUANTILES
            .iter()
            .map(|(q, _)| quantile(&lat, *q))
            .collect(),
        requests_per_read: counts.requests as f64 / reads,
        hedged_share: counts.hedges as f64 / reads,
        ok_per_s,
        verdict,
    })
}

/// The cells as a Markdown table, grouped by scenario.
pub fn table(cells: &[TailRun]) -> String {
    let mut out = String::from(
        "| scenario | policy | reads | p50 ms | p99 ms | p99.9 ms | requests/read | hedged | ok ops/s | verdict |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for c in cells {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.3} | {:.1}% | {:.0} | {} |\n",
            c.scenario,
            c.policy,
            c.reads,
            c.at(0.5).unwrap_or(0.0),
            c.at(0.99).unwrap_or(0.0),
            c.at(0.999).unwrap_or(0.0),
            c.requests_per_read,
            100.0 * c.hedged_share,
            c.ok_per_s,
            c.verdict.label(),
        ));
    }
    out
}

/// What the whole bench measured: the settings line and every cell.
pub struct TailReport {
    /// Nodes, clients, load, capacity, hedge floor and seed, in one sentence.
    pub intro: String,
    /// Every scenario × policy, in table order.
    pub cells: Vec<TailRun>,
}

impl TailReport {
    /// The Markdown report: the settings line and the table.
    pub fn markdown(&self) -> String {
        format!("{}\n\n{}", self.intro, table(&self.cells))
    }

    /// The HTML page: the table and a latency-quantile chart per scenario.
    pub fn html(&self) -> String {
        splitbrain_reports::tail_page(&self.intro, &self.cells)
    }
}

/// The whole bench: capacity, then every scenario × policy. Prints progress on stderr.
pub async fn run(opts: &TailOptions) -> anyhow::Result<TailReport> {
    std::fs::create_dir_all(&opts.store)?;
    let capacity = match opts.capacity {
        Some(c) => c,
        None => calibrate(opts).await?,
    };
    let rate = (capacity * opts.load_share).max(10.0);
    eprintln!("bench tail: capacity {capacity:.0} ok ops/s; offering {rate:.0} ops/s");
    let cell_ms = (opts.cell_s * 1000.0) as u64;
    let mut cells = Vec::new();
    let chosen = scenarios(cell_ms)
        .into_iter()
        .filter(|sc| opts.scenarios.contains(scenario_letter(sc.label)));
    for scenario in chosen {
        for policy in POLICIES
            .iter()
            .filter(|p| opts.policies.iter().any(|q| q == *p))
        {
            let cell = run_cell(opts, policy, &scenario, rate).await?;
            eprintln!(
                "bench tail: {} {}: p99 {:.2} ms, {:.3} requests/read, {}",
                cell.scenario,
                cell.policy,
                cell.at(0.99).unwrap_or(0.0),
                cell.requests_per_read,
                cell.verdict.label()
            );
            cells.push(cell);
        }
    }
    let intro = format!(
        "3 nodes, 1 shard, register workload (half reads), {} clients, {:.0} s per cell, \
         offered load {rate:.0} ops/s = {:.0}% of the measured capacity ({capacity:.0} ok ops/s, \
         read-index, no fault, {CALIBRATION_CLIENTS} clients); hedge floor {} ms, seed {}.",
        opts.clients,
        opts.cell_s,
        opts.load_share * 100.0,
        opts.hedge_floor_ms,
        opts.seed,
    );
    Ok(TailReport { intro, cells })
}

/// The letter of a scenario label such as `(b) follower ...`.
fn scenario_letter(label: &str) -> char {
    label.chars().nth(1).unwrap_or('?')
}

/// A scratch store under `dir` for the bench's runs.
pub fn scratch_store(dir: &Path) -> PathBuf {
    dir.join("bench-tail-store")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 500.0);
        assert_eq!(quantile(&v, 0.99), 990.0);
        assert_eq!(quantile(&v, 0.999), 999.0);
        assert_eq!(quantile(&[], 0.99), 0.0);
    }

    #[test]
    fn cells_run_the_client_pool_and_the_capacity_the_closed_loop() {
        let opts = TailOptions {
            cell_s: 10.0,
            store: PathBuf::from("/nonexistent"),
            seed: 1,
            hedge_floor_ms: 2,
            load_share: LOAD_SHARE,
            capacity: None,
            scenarios: "abcd".into(),
            policies: vec!["hedged".into()],
            clients: 40,
        };
        let cell = spec(&opts, "tail-hedged", "hedged", 100.0, opts.clients, 10.0);
        assert_eq!((cell.concurrency, cell.rate), (40, 100.0));
        assert_eq!(cell.read_mode.as_deref(), Some("hedged"));
        let cal = spec(&opts, "cap", "read-index", 0.0, CALIBRATION_CLIENTS, 6.0);
        assert_eq!((cal.concurrency, cal.rate), (16, 0.0));
    }

    #[test]
    fn scenarios_are_valid_plans() {
        let s = scenarios(10_000);
        assert_eq!(s.len(), 4);
        for sc in &s {
            let plan: Vec<splitbrain_nemesis::PlannedFault> =
                serde_json::from_value(sc.plan.clone()).unwrap();
            for p in &plan {
                p.validate().unwrap();
                assert!(p.for_ms > 10_000);
            }
        }
    }
}
