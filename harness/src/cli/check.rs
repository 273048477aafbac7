//! `splitbrain check`: check a recorded history.

use super::flags::CheckFlags;
use super::{usage, verdict_code};
use anyhow::Context;
use clap::Args;
use splitbrain::check::{
    check_history, checkers_for_workload, infer_workload, locate_history, write_outputs,
    CheckOptions, StoredRun,
};
use splitbrain::store::record_recheck;
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::{Checker, History};
use splitbrain_reports::{history_stats, junit_xml, summary_table, RunSummary};
use std::path::{Path, PathBuf};

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

/// Which checkers judge a history: `check` and `shrink` choose them alike.
#[derive(Args, Debug)]
pub(crate) struct CheckerSelection {
    /// Workload whose checkers to use (register, append, list-append, rw-register, bank).
    #[arg(long)]
    workload: Option<String>,
    /// Run these checkers (comma separated or repeated) instead: Jepsen's counter,
    /// unique-ids, total-queue, long-fork, stats, exceptions, or bank.
    #[arg(long = "checker", value_delimiter = ',')]
    checkers: Vec<String>,
}

/// The checkers for `history`: named ones, the workload's (from the flag or the stored
/// run), the model's, or those of the workload the history looks like. Returns a label
/// for what was chosen.
pub(crate) fn select_checkers(
    a: &CheckerSelection,
    history: &History,
    stored: &StoredRun,
    check: &CheckOptions,
) -> anyhow::Result<(String, Vec<Box<dyn Checker>>)> {
    let workload = a.workload.clone().or(stored.workload.clone());
    Ok(match (&workload, &check.model) {
        _ if !a.checkers.is_empty() => (
            a.checkers.join(","),
            a.checkers
                .iter()
                .map(|n| check.named_checker(n))
                .collect::<anyhow::Result<Vec<_>>>()
                .map_err(|e| usage(format!("{e:#}")))?,
        ),
        (Some(w), None) => (
            w.clone(),
            checkers_for_workload(w, check).map_err(|e| usage(format!("{e:#}")))?,
        ),
        (_, Some(m)) => (
            format!("model:{m}"),
            vec![check
                .linearizability(m)
                .map_err(|e| usage(format!("{e:#}")))?],
        ),
        (None, None) => {
            let inferred = infer_workload(history);
            let checkers = match inferred.strip_prefix("model:") {
                Some(m) => vec![check
                    .linearizability(m)
                    .map_err(|e| usage(format!("{e:#}")))?],
                None => checkers_for_workload(inferred, check)?,
            };
            (inferred.to_string(), checkers)
        }
    })
}

/// The stored run (or file) at `path`, its history, and the check options: a stored run
/// is re-checked as it was checked, unless the flags say otherwise.
pub(crate) fn load(
    path: &Path,
    flags: &CheckFlags,
) -> anyhow::Result<(StoredRun, History, CheckOptions)> {
    let stored = locate_history(path)?;
    let history = read_path(&stored.history)?;
    let mut check = flags.options();
    if check.consistency_model.is_none() {
        check.consistency_model = stored.consistency_model.clone();
    }
    if check.init.is_none() {
        check.init = stored.init.clone();
    }
    Ok((stored, history, check))
}

pub(crate) fn cmd_check(a: CheckArgs) -> anyhow::Result<u8> {
    let (stored, history, check) = load(&a.path, &a.check)?;
    let history_path = stored.history.clone();
    let (name, checkers) = select_checkers(&a.selection, &history, &stored, &check)?;
    let mut results = check_history(&history, &checkers, &check, stored.test.as_ref());
    if a.path.is_dir() {
        // A PostgreSQL run's statement log: each cycle's statements and confirmation.
        let concurrency = stored
            .test
            .as_ref()
            .and_then(|t| t["concurrency"].as_u64())
            .unwrap_or(1) as usize;
        splitbrain::target::postgres::evidence::annotate(
            &mut results,
            &history,
            &a.path,
            concurrency,
        );
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
    // As `test` exits for it: a run that did not run to its end is not a verdict.
    if summary.incomplete.is_some() {
        return Ok(super::EXIT_COULD_NOT_RUN);
    }
    Ok(verdict_code(summary.valid))
}
