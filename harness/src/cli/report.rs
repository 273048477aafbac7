//! `splitbrain report RUN`: re-render a run directory's report.html from what the run
//! stored (history.jsonl, results.json, test.json), without checking again.

use crate::check::{read_json_if_there, shrunk_files};
use anyhow::Context;
use clap::Args;
use splitbrain_checkers::history::read::read_path;
use splitbrain_reports::{render_html_with_shrunk, RunSummary};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// A run directory holding history.jsonl and results.json (test.json when it has one).
    run: PathBuf,
    /// Write the page here instead of RUN/report.html.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn cmd_report(a: ReportArgs) -> anyhow::Result<u8> {
    let dir = &a.run;
    let html = render_run_report(dir)?;
    let out = a.out.unwrap_or_else(|| dir.join("report.html"));
    std::fs::write(&out, html).with_context(|| format!("writing {}", out.display()))?;
    println!("{}", out.display());
    Ok(0)
}

/// A run directory's report page, from its history, results and test.json, with a link
/// to its `shrunk/` reproduction when `splitbrain shrink` wrote one.
pub(crate) fn render_run_report(dir: &Path) -> anyhow::Result<String> {
    anyhow::ensure!(dir.is_dir(), "{} is not a run directory", dir.display());
    let history = read_path(&dir.join("history.jsonl"))
        .with_context(|| format!("reading {}", dir.join("history.jsonl").display()))?;
    let results = dir.join("results.json");
    let summary: RunSummary =
        serde_json::from_slice(&std::fs::read(&results).with_context(|| {
            format!(
                "reading {} (a run checked by `splitbrain check {}` has one)",
                results.display(),
                dir.display()
            )
        })?)
        .with_context(|| format!("parsing {}", results.display()))?;
    // test.json is optional: a history checked by hand has none.
    let test = read_json_if_there(&dir.join("test.json"))?;
    let shrunk = shrunk_files(dir)?;
    Ok(render_html_with_shrunk(
        &summary,
        &history,
        test.as_ref(),
        shrunk.as_ref(),
    ))
}
