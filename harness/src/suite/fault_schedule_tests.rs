//! Every suite file shipped here asks only for faults its runs have time to exercise: a
//! cell whose schedule never reaches one of its fault kinds would end `unknown`
//! ("not exercised") whatever the system does (`fault_coverage`).

use super::*;
use splitbrain_nemesis::{Nemesis, NemesisSpec};
use std::collections::BTreeSet;
use std::time::Duration;

/// The fault kinds the nemesis records for a `--nemesis` name (`kill-one` is a kill).
fn kind_of(name: &str) -> &str {
    match name {
        "kill-one" => "kill",
        "partition-leader" | "leader-churn" | "figure-8" => "partition",
        other => other,
    }
}

#[test]
fn every_cell_of_every_suite_file_schedules_each_fault_it_asks_for() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites");
    let mut checked = 0;
    let mut missing: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let suite = parse_suite(&text, &path.display().to_string(), "suite").unwrap();
        for cell in &suite.cells {
            let o = &cell.options;
            let list = o.nemesis.as_deref().unwrap_or("partition,kill,pause");
            if list == "none" || o.extra.iter().any(|e| e == "--nemesis-plan") {
                continue;
            }
            let interval = Duration::from_secs_f64(o.nemesis_interval.unwrap_or(4.0));
            let time_limit = Duration::from_secs_f64(o.time_limit.unwrap_or(20.0));
            let wanted: BTreeSet<&str> = list.split(',').map(kind_of).collect();
            for &seed in &cell.seeds {
                let spec = NemesisSpec::parse(list, interval, seed).unwrap();
                let schedule = Nemesis::new(spec).schedule(o.nodes.unwrap_or(3), time_limit);
                let got: BTreeSet<String> = schedule
                    .iter()
                    .map(|f| f.action.kind().to_string())
                    .collect();
                for kind in wanted.iter().filter(|k| !got.contains(**k)) {
                    missing.push(format!(
                        "{}: {} (line {}), seed {seed}: `{list}` at {interval:?} over \
                         {time_limit:?} never schedules {kind}",
                        path.file_name().unwrap_or_default().to_string_lossy(),
                        cell.name,
                        cell.line
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} runs checked");
    assert!(
        missing.is_empty(),
        "runs that would end unknown (not exercised):\n{}",
        missing.join("\n")
    );
}
