//! `splitbrain compare`: runs side by side, differences marked, regressions against a
//! baseline named.

use super::usage;
use crate::run::store::{load_run, StoredRunError};
use clap::Args;
use splitbrain_reports::{compare, ComparedRun, RegressionBounds};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// Run directories (or a test directory, meaning its `latest` run).
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// Compare every run against this one; exit 1 when any run regressed.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_parser = ["table", "markdown", "html", "json"], default_value = "table")]
    format: String,
    /// A regression: p99 latency above the baseline's times this factor (plus 1 ms).
    #[arg(long, default_value_t = 1.5)]
    latency_factor: f64,
    /// A regression: throughput below this fraction of the baseline's.
    #[arg(long, default_value_t = 0.8)]
    throughput_fraction: f64,
    /// A regression: availability this many percentage points below the baseline's.
    #[arg(long, default_value_t = 5.0)]
    availability_points: f64,
}

pub(crate) fn cmd_compare(a: CompareArgs) -> anyhow::Result<u8> {
    let runs = a
        .runs
        .iter()
        .map(|p| read(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let baseline = a.baseline.as_deref().map(read).transpose()?;
    let bounds = RegressionBounds {
        latency_factor: a.latency_factor,
        throughput_fraction: a.throughput_fraction,
        availability_points: a.availability_points,
        ..RegressionBounds::default()
    };
    let c = compare(&runs, baseline.as_ref(), bounds);
    match a.format.as_str() {
        "markdown" => print!("{}", c.markdown()),
        "html" => print!("{}", c.html()),
        "json" => println!("{}", serde_json::to_string_pretty(&c)?),
        _ => println!("{}", c.terminal()),
    }
    Ok(u8::from(!c.regressions.is_empty()))
}

/// A path that is no run is a usage error (exit 2); an unreadable run could not run (4).
fn read(path: &Path) -> anyhow::Result<ComparedRun> {
    load_run(path).map_err(|e| match e {
        StoredRunError::NotARun(_) => usage(e.to_string()),
        other => other.into(),
    })
}
