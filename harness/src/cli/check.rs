//! `splitbrain check`: check a recorded history.

use super::checker_selection::{load, select_checkers, CheckerSelection};
use super::verdict_code;
use crate::check::{check_history, write_outputs};
use crate::check_options::CheckFlags;
use crate::run::store::record_recheck;
use anyhow::Context;
use clap::Args;
use splitbrain_reports::{history_stats, junit_xml, summary_table, RunSummary};
use std::path::PathBuf;
use std::time::Instant;

/// `SPLITBRAIN_CHECK_PROFILE` set: one stderr line per phase of `check` (seconds since the
/// last phase, and the process's peak RSS so far), for `bench limit`.
struct PhaseTimer {
    lap: Option<Instant>,
}

impl PhaseTimer {
    fn from_env() -> PhaseTimer {
        PhaseTimer {
            lap: std::env::var_os("SPLITBRAIN_CHECK_PROFILE").map(|_| Instant::now()),
        }
    }

    fn lap(&mut self, phase: &str) {
        if let Some(lap) = &mut self.lap {
            let rss = splitbrain_checkers::elle::bench::peak_rss_mib().unwrap_or(0.0);
            eprintln!(
                "check profile: {phase} {:.3} s, peak RSS {rss:.0} MiB",
                lap.elapsed().as_secs_f64()
            );
            *lap = Instant::now();
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// A run directory (with history.jsonl) or a history file (JSONL, JSON array, EDN, Jepsen log).
    path: PathBuf,
    #[command(flatten)]
    selection: CheckerSelection,
    /// Output format.
    #[arg(long, value_parser = ["table", "json"], default_value = "table")]
    format: String,
    /// Also write JUnit XML here: one test case per checker, the anomaly summary as the
    /// failure text (a run directory gets its own `junit.xml` either way).
    #[arg(long)]
    junit: Option<PathBuf>,
    #[command(flatten)]
    check: CheckFlags,
    /// For the first invalid checker, also shrink the history to the smallest
    /// sub-history that fails the same way (as `splitbrain shrink` does).
    #[arg(long)]
    shrink: bool,
}

pub(crate) fn cmd_check(a: CheckArgs) -> anyhow::Result<u8> {
    let mut timer = PhaseTimer::from_env();
    let (stored, history, check) = load(&a.path, &a.check)?;
    timer.lap("read");
    let history_path = stored.history.clone();
    let (name, checkers) = select_checkers(&a.selection, &history, &stored, &check)?;
    timer.lap("select");
    let mut results = check_history(&history, &checkers, &check, stored.test.as_ref());
    timer.lap("check");
    if a.path.is_dir() {
        // A PostgreSQL run's statement log: each cycle's statements and confirmation.
        let concurrency = stored
            .test
            .as_ref()
            .and_then(|t| t["concurrency"].as_u64())
            .unwrap_or(1) as usize;
        crate::systems::postgres::evidence::annotate(&mut results, &history, &a.path, concurrency);
    }
    let run_dir = a.path.is_dir().then(|| a.path.display().to_string());
    let mut summary = RunSummary::new(
        history_path.display().to_string(),
        run_dir.clone(),
        results,
        history_stats(&history),
        None,
    );
    // What the run was stays what it was: an interrupted run re-checked is still one.
    if let Some(first) = &stored.original {
        summary.test_name = first.test_name.clone();
        summary.seed = first.seed;
        summary.incomplete = first.incomplete.clone();
        summary.net = first.net.clone();
    }
    if a.path.is_dir() {
        if stored.original.is_some() {
            let dir = record_recheck(
                &a.path,
                |dir| write_outputs(dir, &summary, &history, stored.test.as_ref()),
                summary.valid,
            )?;
            eprintln!(
                "the run's first results are kept; this check is stored in {} and marked current",
                dir.display()
            );
        } else {
            write_outputs(&a.path, &summary, &history, stored.test.as_ref())?;
        }
    }
    if a.shrink {
        super::shrink::shrink_first_failure(
            &a.path,
            &stored,
            &history,
            &checkers,
            &summary.results,
            &super::shrink::ShrinkFlags::default(),
        )?;
    }
    if let Some(path) = &a.junit {
        std::fs::write(path, junit_xml(&summary).context("rendering JUnit XML")?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if a.format == "json" {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        eprintln!("checked {} as {name}", history_path.display());
        println!("{}", summary_table(&summary));
    }
    timer.lap("output");
    // As `test` exits for it: a run that did not run to its end is not a verdict.
    if summary.incomplete.is_some() {
        return Ok(super::EXIT_COULD_NOT_RUN);
    }
    Ok(verdict_code(summary.valid))
}
