//! `splitbrain report RUN`: re-render a run directory's report.html from what the run
//! stored (history.jsonl, results.json, test.json), without checking again.

use anyhow::Context;
use clap::Args;
use splitbrain_checkers::history::read::read_path;
use splitbrain_reports::{render_html_with_shrunk, RunSummary, ShrunkFiles};
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
    let test = read_json(&dir.join("test.json"))?;
    let shrunk = ShrunkFiles {
        schedule: read_json(&dir.join("shrunk/schedule.json"))?,
        history: read_json(&dir.join("shrunk/shrink.json"))?,
    };
    let shrunk = (shrunk.schedule.is_some() || shrunk.history.is_some()).then_some(shrunk);
    Ok(render_html_with_shrunk(
        &summary,
        &history,
        test.as_ref(),
        shrunk.as_ref(),
    ))
}

/// A JSON file's value, `None` when there is no such file.
fn read_json(path: &Path) -> anyhow::Result<Option<serde_json::Value>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(
            serde_json::from_slice(&b).with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}
