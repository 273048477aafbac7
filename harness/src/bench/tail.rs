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
//! reads, after a warm-up of [`WARMUP_S`] that the cell runs first); requests per read
//! (over the whole run) from the KV clients' counters; the verdict from the
//! linearizability checker of the same run. Each cell is a [`TailRun`] of the reports
//! crate, which also draws the bench's page (`--html`).
//!
//! A shared machine stalls now and then for tens of ms as a whole (every replica and the
//! writes with them), which no read policy can route around; one such stall in a 10 s
//! cell moves its p99. So the bench runs in rounds (`--runs`, every cell once per round,
//! cells interleaved so that a bad minute touches all policies alike) and shows each
//! cell's median run by p99, beside every run's p99.

use crate::check_options::CheckOptions;
use crate::run::entry::{self, resolve, TestRequest};
use crate::systems::kv::ReadCounters;
use serde_json::{json, Value};
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::history::{History, Outcome};
use splitbrain_checkers::table::Table;
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
/// Seconds at the start of every cell whose reads are not measured: 96 clients opening
/// their connections at once, and the hedge delay before its windows fill, slow the
/// first few hundred ms of every policy (a run of (b) on 2026-12-03 had 127 of its 187
/// reads over 6 ms, and 132 slow writes, in its first 500 ms). Faults run through it.
pub const WARMUP_S: f64 = 1.0;
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
    /// Rounds: every cell runs this many times (at least once).
    pub runs: usize,
    /// Run every cell on these SSH hosts (`--hosts`, one node per host) instead of
    /// loopback.
    pub hosts: Option<String>,
}

/// The test of one cell: `splitbrain test --target kv --nodes 3 --nemesis none` at this
/// read mode, rate, client count and length, settling 0.5 s after the heal.
fn spec(
    opts: &TailOptions,
    name: &str,
    mode: &str,
    rate: f64,
    clients: usize,
    secs: f64,
) -> TestRequest {
    TestRequest {
        name: Some(name.to_string()),
        nemesis: Some("none".into()),
        nemesis_interval: 10.0,
        // on hosts: one node per host
        nodes: opts.hosts.is_none().then_some(3),
        hosts: opts.hosts.clone(),
        concurrency: clients,
        rate,
        time_limit: secs,
        seed: Some(opts.seed),
        read_mode: Some(mode.to_string()),
        hedge_delay_ms: opts.hedge_floor_ms,
        quiesce: 0.5,
        store: opts.store.clone(),
        ..TestRequest::default()
    }
}

/// Runs one test; returns its history, verdict, ok ops/s and the clients' read counts.
async fn run_one(request: &TestRequest) -> anyhow::Result<(History, Validity, f64, ReadCounters)> {
    let check = CheckOptions::default();
    let spec = resolve(request, &check)?;
    let before = ReadCounters::now();
    let outcome = entry::run(&spec, &check, CancellationToken::new(), false).await?;
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

/// Latencies (ms) of the `ok` reads of a history invoked `warmup_s` or more after its
/// first invocation, sorted.
pub fn read_latencies_ms(history: &History, warmup_s: f64) -> Vec<f64> {
    let pairs = history.pairs();
    let start = pairs.iter().map(|p| p.invoke_time).min().unwrap_or(0);
    let from = start.saturating_add((warmup_s * 1e9) as u64);
    let mut v: Vec<f64> = pairs
        .iter()
        .filter(|p| p.f == "read" && p.outcome == Outcome::Ok && p.invoke_time >= from)
        .filter_map(|p| {
            let done = p.complete_time?;
            Some(done.saturating_sub(p.invoke_time) as f64 / 1e6)
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The `q` quantile of sorted values ([`splitbrain_checkers::quantile`]'s nearest rank);
/// 0 for none (a cell with no completed read shows 0, as its table always has).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    splitbrain_checkers::quantile::quantile_of_sorted(sorted, q).unwrap_or(0.0)
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
        WARMUP_S + opts.cell_s,
    );
    s.nemesis_plan = Some(plan_path);
    let (history, verdict, ok_per_s, counts) = run_one(&s).await?;
    let lat = read_latencies_ms(&history, WARMUP_S);
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
        p99_runs_ms: Vec::new(),
    })
}

/// One cell from its runs (in the order they ran): the run with the median p99 (the
/// lower of the two middle ones for an even count), every run's p99 beside it, and the
/// worst verdict of them. None for no runs.
pub fn median_run(runs: &[TailRun]) -> Option<TailRun> {
    let p99 = |r: &TailRun| r.at(0.99).unwrap_or(0.0);
    let mut order: Vec<&TailRun> = runs.iter().collect();
    order.sort_by(|a, b| p99(a).total_cmp(&p99(b)));
    let mut cell = (*order.get(runs.len().checked_sub(1)? / 2)?).clone();
    cell.p99_runs_ms = runs.iter().map(p99).collect();
    cell.verdict = runs.iter().fold(Validity::Valid, |v, r| v.merge(r.verdict));
    Some(cell)
}

/// The cells as a Markdown table, grouped by scenario.
pub fn table(cells: &[TailRun]) -> String {
    let mut t = Table::new([
        "scenario",
        "policy",
        "reads",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "requests/read",
        "hedged",
        "ok ops/s",
        "verdict",
        "p99 of each run, ms",
    ]);
    for c in cells {
        t.row([
            c.scenario.to_string(),
            c.policy.to_string(),
            c.reads.to_string(),
            format!("{:.2}", c.at(0.5).unwrap_or(0.0)),
            format!("{:.2}", c.at(0.99).unwrap_or(0.0)),
            format!("{:.2}", c.at(0.999).unwrap_or(0.0)),
            format!("{:.3}", c.requests_per_read),
            format!("{:.1}%", 100.0 * c.hedged_share),
            format!("{:.0}", c.ok_per_s),
            c.verdict.label().to_string(),
            splitbrain_reports::runs_ms(&c.p99_runs_ms),
        ]);
    }
    t.markdown()
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
    let chosen: Vec<Scenario> = scenarios(cell_ms)
        .into_iter()
        .filter(|sc| opts.scenarios.contains(scenario_letter(sc.label)))
        .collect();
    let policies: Vec<&str> = POLICIES
        .iter()
        .copied()
        .filter(|p| opts.policies.iter().any(|q| q == p))
        .collect();
    // runs[cell] over the rounds, cells in table order
    let mut runs: Vec<Vec<TailRun>> = vec![Vec::new(); chosen.len() * policies.len()];
    let rounds = opts.runs.max(1);
    for round in 1..=rounds {
        for (i, scenario) in chosen.iter().enumerate() {
            for (j, policy) in policies.iter().enumerate() {
                let cell = run_cell(opts, policy, scenario, rate).await?;
                eprintln!(
                    "bench tail: round {round}/{rounds}: {} {}: p99 {:.2} ms, {:.3} requests/read, {}",
                    cell.scenario,
                    cell.policy,
                    cell.at(0.99).unwrap_or(0.0),
                    cell.requests_per_read,
                    cell.verdict.label()
                );
                runs[i * policies.len() + j].push(cell);
            }
        }
    }
    let cells: Vec<TailRun> = runs.iter().filter_map(|r| median_run(r)).collect();
    let nodes = match &opts.hosts {
        Some(h) => format!("one node per host of {h} (over SSH, link proxies on the hosts)"),
        None => "3 nodes (loopback)".to_string(),
    };
    let intro = format!(
        "{nodes}, 1 shard, register workload (half reads), {} clients, {:.0} s measured per \
         cell after {WARMUP_S:.0} s of warm-up (faults on), \
         {rounds} run(s) of every cell (the median by p99 shown), \
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
            runs: 1,
            hosts: None,
        };
        let cell = spec(&opts, "tail-hedged", "hedged", 100.0, opts.clients, 10.0);
        assert_eq!((cell.concurrency, cell.rate), (40, 100.0));
        assert_eq!(cell.read_mode.as_deref(), Some("hedged"));
        let cal = spec(&opts, "cap", "read-index", 0.0, CALIBRATION_CLIENTS, 6.0);
        assert_eq!((cal.concurrency, cal.rate), (16, 0.0));
        assert_eq!((cell.nodes, cell.hosts.as_deref()), (Some(3), None));
        let on_hosts = TailOptions {
            hosts: Some("/tmp/hosts.toml".into()),
            ..opts
        };
        let cell = spec(&on_hosts, "tail-hedged", "hedged", 100.0, 40, 10.0);
        // one node per host
        assert_eq!(cell.nodes, None);
        assert_eq!(cell.hosts.as_deref(), Some("/tmp/hosts.toml"));
    }

    #[test]
    fn reads_of_the_warm_up_are_not_measured() {
        // ok reads invoked at 0 s (20 ms), 0.5 s (30 ms), 1.0 s (2 ms) and 2 s (3 ms); a
        // failed read and a write after the warm-up: only the last two reads count.
        let mut text = String::new();
        let mut i = 0;
        let mut op = |p: u32, t: u64, ty: &str, f: &str| {
            text.push_str(&format!(
                "{{\"index\":{i},\"time\":{t},\"process\":{p},\"type\":\"{ty}\",\"f\":\"{f}\",\"key\":\"k\",\"value\":null}}\n"
            ));
            i += 1;
        };
        let ms = 1_000_000u64;
        op(0, 0, "invoke", "read");
        op(0, 20 * ms, "ok", "read");
        op(1, 500 * ms, "invoke", "read");
        op(1, 530 * ms, "ok", "read");
        op(2, 1000 * ms, "invoke", "read");
        op(2, 1002 * ms, "ok", "read");
        op(3, 1500 * ms, "invoke", "read");
        op(3, 1600 * ms, "fail", "read");
        op(4, 2000 * ms, "invoke", "read");
        op(4, 2003 * ms, "ok", "read");
        let h = splitbrain_checkers::history::read::read_str(&text, Path::new("t.jsonl"), None)
            .unwrap();
        assert_eq!(read_latencies_ms(&h, 1.0), vec![2.0, 3.0]);
        assert_eq!(read_latencies_ms(&h, 0.0), vec![2.0, 3.0, 20.0, 30.0]);
    }

    fn measured(p99: f64, verdict: Validity) -> TailRun {
        TailRun {
            policy: "hedged".into(),
            scenario: "(c) x".into(),
            reads: 10,
            latency_ms: TAIL_QUANTILES
                .iter()
                .map(|(q, _)| if *q == 0.99 { p99 } else { *q })
                .collect(),
            requests_per_read: 1.0,
            hedged_share: 0.0,
            ok_per_s: 1.0,
            verdict,
            p99_runs_ms: Vec::new(),
        }
    }

    #[test]
    fn a_cell_shows_its_median_run_every_run_p99_and_the_worst_verdict() {
        assert!(median_run(&[]).is_none());
        let runs = [
            measured(9.0, Validity::Valid),
            measured(5.0, Validity::Invalid),
            measured(6.0, Validity::Valid),
        ];
        let cell = median_run(&runs).unwrap();
        assert_eq!(cell.at(0.99), Some(6.0));
        assert_eq!(cell.p99_runs_ms, vec![9.0, 5.0, 6.0]);
        assert_eq!(cell.verdict, Validity::Invalid);
        // an even count: the lower middle run
        let cell = median_run(&runs[..2]).unwrap();
        assert_eq!(cell.at(0.99), Some(5.0));
        let one = median_run(&runs[..1]).unwrap();
        assert_eq!((one.at(0.99), one.verdict), (Some(9.0), Validity::Valid));
        // The last cell, with the table's padding folded to single spaces.
        let text = table(&[cell]);
        let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(folded.contains("| 9.00 / 5.00 |"), "{text}");
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
