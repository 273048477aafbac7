//! `splitbrain compare`: runs side by side, differences marked, regressions against a
//! baseline named.

use super::usage;
use anyhow::Context;
use clap::Args;
use splitbrain_reports::{compare, ComparedRun, RegressionBounds, RunOptions, RunSummary};
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
        .map(|p| load_run(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let baseline = a.baseline.as_deref().map(load_run).transpose()?;
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

/// Reads a run's `test.json` (what it was asked to do) and `results.json` (what it found).
fn load_run(path: &Path) -> anyhow::Result<ComparedRun> {
    let dir = if path.join("results.json").is_file() {
        path.to_path_buf()
    } else if path.join("latest").join("results.json").is_file() {
        path.join("latest")
    } else {
        return Err(usage(format!(
            "{} is not a run directory (no results.json in it or in its `latest` run)",
            path.display()
        )));
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let results = dir.join("results.json");
    let text = std::fs::read_to_string(&results)
        .with_context(|| format!("reading {}", results.display()))?;
    let summary: RunSummary = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a splitbrain results.json", results.display()))?;
    // test.json is absent for `splitbrain check` on a bare history; options stay blank then.
    let spec: serde_json::Value = std::fs::read_to_string(dir.join("test.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    Ok(ComparedRun {
        label: short_label(&dir),
        options: options_from_spec(&spec),
        summary,
    })
}

/// `<test>/<timestamp>`: enough to find the run in the store.
fn short_label(dir: &Path) -> String {
    let parts: Vec<String> = dir
        .components()
        .rev()
        .take(2)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

fn options_from_spec(spec: &serde_json::Value) -> RunOptions {
    let text = |k: &str| spec.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let list = |k: &str| -> Vec<String> {
        spec.get(k)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut faults = list("nemesis");
    if spec.get("nemesis_plan").is_some_and(|p| !p.is_null()) {
        faults = vec!["plan".to_string()];
    }
    RunOptions {
        target: text("target").unwrap_or_else(|| "-".into()),
        workload: text("workload").unwrap_or_else(|| "-".into()),
        read_mode: text("read_mode"),
        bugs: list("bugs"),
        faults,
        nodes: spec
            .get("nodes")
            .and_then(|v| v.as_u64())
            .map(|n| n as usize),
        seed: spec.get("seed").and_then(|v| v.as_u64()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_options_from_test_json() {
        let spec = serde_json::json!({
            "target": "txn", "workload": "bank", "read_mode": "read-committed",
            "bugs": ["early-lock-release"], "nemesis": ["partition", "kill"],
            "nemesis_plan": null, "nodes": 3, "seed": 7
        });
        let o = options_from_spec(&spec);
        assert_eq!(o.target, "txn");
        assert_eq!(o.read_mode.as_deref(), Some("read-committed"));
        assert_eq!(o.bugs, ["early-lock-release"]);
        assert_eq!(o.faults, ["partition", "kill"]);
        assert_eq!((o.nodes, o.seed), (Some(3), Some(7)));
        let planned =
            options_from_spec(&serde_json::json!({"nemesis": [], "nemesis_plan": "p.json"}));
        assert_eq!(planned.faults, ["plan"]);
        assert_eq!(planned.target, "-");
    }

    #[test]
    fn labels_runs_by_test_and_timestamp() {
        assert_eq!(
            short_label(Path::new("/x/store/kv-register/20261201T010203")),
            "kv-register/20261201T010203"
        );
    }
}
