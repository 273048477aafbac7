//! Which checkers judge a history, and the history and options they judge it with:
//! `check` and `shrink` choose them alike.

use super::usage;
use crate::check::{
    checkers_for_workload, infer_workload, locate_history, CheckOptions, StoredRun,
};
use crate::check_options::CheckFlags;
use clap::Args;
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::{Checker, History};
use std::path::Path;

/// Which checkers judge a history.
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
