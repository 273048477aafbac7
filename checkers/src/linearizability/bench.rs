//! The benchmark table behind `splitbrain bench linearizable`: the Porcupine test files
//! and generated million-event histories, each checked once. Porcupine's figures beside
//! them are reference values this run does not measure, and the table says so.

use super::{
    generate_keyed_cas_history, FailedCas, LinearizabilityChecker, LinearizabilityOptions,
};
use crate::history::{read::read_path, History};
use crate::verdict::Checker;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One row of the table.
struct Row {
    input: String,
    ops: usize,
    verdict: &'static str,
    secs: f64,
    /// Porcupine's figure for the same input, from [`REFERENCE_SOURCE`]; not measured here.
    porcupine: &'static str,
}

/// Where the Porcupine figures of the table come from. They were not measured by the run
/// that prints them, so every table names their origin.
pub const REFERENCE_SOURCE: &str = "written into this table by commit 4986652 \
     (2026-11-30 UTC); the machine, Porcupine version and conditions of that measurement \
     were not recorded";

fn check(history: &History, model: &str, split: bool, observed: bool) -> (&'static str, f64) {
    let options = LinearizabilityOptions {
        split_by_key: split,
        failed_cas: FailedCas::observed_if(observed),
        bounds: crate::CheckBounds {
            time_limit: Some(Duration::from_secs(20)),
            max_memory: None,
        },
    };
    let Ok(checker) = LinearizabilityChecker::new(model, options) else {
        return ("error", 0.0);
    };
    let t = Instant::now();
    let r = checker.check(history);
    (r.valid.label(), t.elapsed().as_secs_f64())
}

fn default_data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data")
}

/// Runs every benchmark input once and returns the printed table. `data_dir` is the
/// directory holding `porcupine/` (default: the workspace's `../shared/data`); rows whose
/// files are missing are skipped with a note.
pub fn run_table(data_dir: Option<&Path>) -> String {
    let dir = data_dir
        .map(Path::to_path_buf)
        .unwrap_or_else(default_data_dir);
    let mut rows: Vec<Row> = Vec::new();
    let mut notes: Vec<String> = Vec::new();

    let etcd_dir = dir.join("porcupine/jepsen");
    let mut etcd: Vec<(String, History)> = Vec::new();
    for i in 0..=102 {
        let name = format!("etcd_{i:03}.log");
        match read_path(&etcd_dir.join(&name)) {
            Ok(h) if !h.is_empty() => etcd.push((name, h)),
            Ok(_) => {}
            Err(e) => {
                notes.push(format!("skipped {name}: {e}"));
            }
        }
    }
    if !etcd.is_empty() {
        let mut total = 0.0;
        let mut per_file: Vec<(f64, usize, &'static str, &str)> = Vec::new();
        let mut invalid = 0;
        for (name, h) in &etcd {
            let (v, s) = check(h, "cas-register", true, true);
            total += s;
            invalid += usize::from(v == "INVALID");
            per_file.push((s, h.pairs().len(), v, name));
        }
        rows.push(Row {
            input: format!("all {} etcd files ({} invalid)", etcd.len(), invalid),
            ops: etcd.iter().map(|(_, h)| h.pairs().len()).sum(),
            verdict: "-",
            secs: total,
            porcupine: "0.42 s",
        });
        per_file.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (s, ops, v, name) in per_file.into_iter().take(5) {
            let porcupine = match name {
                "etcd_002.log" => "0.13 s",
                "etcd_007.log" => "0.10 s",
                _ => "",
            };
            rows.push(Row {
                input: name.to_string(),
                ops,
                verdict: v,
                secs: s,
                porcupine,
            });
        }
    }

    let kv = |name: &str| read_path(&dir.join("porcupine/kv").join(name));
    for (file, split, porcupine) in [
        ("c50-ok.txt", true, "0.09 s"),
        ("c10-ok.txt", false, "1.6 s"),
        ("c50-ok.txt", false, "no verdict in 60 s"),
        ("c50-bad.txt", false, "no verdict in 60 s"),
    ] {
        match kv(file) {
            Ok(h) => {
                let (verdict, secs) = check(&h, "kv", split, false);
                let how = if split { "split by key" } else { "unsplit" };
                rows.push(Row {
                    input: format!("{file} {how}"),
                    ops: h.pairs().len(),
                    verdict,
                    secs,
                    porcupine,
                });
            }
            Err(e) => notes.push(format!("skipped {file}: {e}")),
        }
    }

    for (corrupt, porcupine) in [(false, "1.6 s check"), (true, "no verdict in 60 s, 8 GB")] {
        let h = generate_keyed_cas_history(1, 1_000_000, 100, 50, 0.05, corrupt);
        let (verdict, secs) = check(&h, "cas-register", true, false);
        rows.push(Row {
            input: format!(
                "generated 1M events{}",
                if corrupt { ", 1 corrupt read" } else { "" }
            ),
            ops: h.pairs().len(),
            verdict,
            secs,
            porcupine,
        });
    }

    render(&rows, &notes, rayon::current_num_threads())
}

/// The table: splitbrain's figures (measured by this run) and, set apart and labelled,
/// Porcupine's reference figures (not measured by this run).
fn render(rows: &[Row], notes: &[String], threads: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "linearizability benchmark ({threads} threads; check time only, parsing excluded; 20 s limit per input)"
    );
    let mut t = crate::table::Table::new([
        "input",
        "ops",
        "verdict",
        "seconds",
        "| Porcupine [not measured by this run, see *]",
    ])
    .right_aligned(&[1, 2, 3]);
    for r in rows {
        t.row([
            r.input.clone(),
            r.ops.to_string(),
            r.verdict.to_string(),
            format!("{:.4}", r.secs),
            format!(
                "| {}",
                if r.porcupine.is_empty() {
                    "-"
                } else {
                    r.porcupine
                }
            ),
        ]);
    }
    out.push_str(&t.plain());
    let _ = writeln!(
        out,
        "* seconds, ops and verdicts are this run's; the Porcupine column is reference \
         figures {REFERENCE_SOURCE}. They are not side by side: no Porcupine ran now."
    );
    for n in notes.iter().take(5) {
        let _ = writeln!(out, "note: {n}");
    }
    if notes.len() > 5 {
        let _ = writeln!(out, "note: ... and {} more skipped inputs", notes.len() - 5);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_figures_are_labelled_as_not_measured_by_this_run() {
        let rows = [Row {
            input: "c50-ok.txt split by key".into(),
            ops: 10,
            verdict: "valid",
            secs: 0.01,
            porcupine: "0.09 s",
        }];
        let out = render(&rows, &[], 2);
        assert!(out.contains("Porcupine [not measured by this run"), "{out}");
        assert!(out.contains("commit 4986652"), "{out}");
        assert!(out.contains("| 0.09 s"), "{out}");
        assert!(out.contains("no Porcupine ran now"), "{out}");
    }
}
