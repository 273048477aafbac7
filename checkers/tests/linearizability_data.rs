//! The linearizability checker on Porcupine's public histories, against EXPECTED.tsv.
//! Skips (with a message) when ../shared/data is absent.

use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::linearizability::{
    FailedCas, LinearizabilityChecker, LinearizabilityOptions,
};
use splitbrain_checkers::{Checker, Validity};
use std::path::PathBuf;
use std::time::Duration;

fn data_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/data/porcupine"
    ));
    if dir.join("EXPECTED.tsv").is_file() {
        Some(dir)
    } else {
        println!("SKIP: {} not found", dir.display());
        None
    }
}

/// (file, expected verdict) rows of EXPECTED.tsv whose file starts with `prefix`.
fn expected(dir: &std::path::Path, prefix: &str) -> Vec<(String, Validity)> {
    let text = std::fs::read_to_string(dir.join("EXPECTED.tsv")).expect("EXPECTED.tsv readable");
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            let verdict = match *cols.get(2)? {
                "linearizable" => Validity::Valid,
                "not_linearizable" => Validity::Invalid,
                _ => return None,
            };
            cols[0]
                .starts_with(prefix)
                .then(|| (cols[0].to_string(), verdict))
        })
        .collect()
}

fn check(path: &std::path::Path, model: &str, split: bool, failed_cas: FailedCas) -> Validity {
    let history = read_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let options = LinearizabilityOptions {
        split_by_key: split,
        failed_cas,
        ..Default::default()
    };
    let checker = LinearizabilityChecker::new(model, options).expect("known model");
    let r = checker.check(&history);
    if r.valid == Validity::Invalid {
        assert!(
            !r.explanation.is_empty() && !r.evidence.is_empty(),
            "{}",
            path.display()
        );
    }
    r.valid
}

#[test]
fn all_etcd_files_match_expected() {
    let Some(dir) = data_dir() else { return };
    let rows = expected(&dir, "jepsen/");
    assert_eq!(
        rows.len(),
        102,
        "EXPECTED.tsv lists 102 non-empty etcd files"
    );
    let mut wrong = Vec::new();
    for (file, want) in &rows {
        let got = check(&dir.join(file), "cas-register", true, FailedCas::Observed);
        if got != *want {
            wrong.push(format!("{file}: got {got:?}, expected {want:?}"));
        }
    }
    let valid = rows.iter().filter(|r| r.1 == Validity::Valid).count();
    println!(
        "etcd: {} files, {valid} linearizable, {} mismatches",
        rows.len(),
        wrong.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn kv_files(split: bool, names: &[&str]) {
    let Some(dir) = data_dir() else { return };
    let rows = expected(&dir, "kv/");
    assert_eq!(rows.len(), 6);
    for (file, want) in rows
        .iter()
        .filter(|(f, _)| names.iter().any(|n| f.contains(n)))
    {
        let got = check(&dir.join(file), "kv", split, FailedCas::Jepsen);
        println!("{file} split={split}: {got:?}");
        assert_eq!(got, *want, "{file} split={split}");
    }
}

#[test]
fn kv_files_split_by_key_match_expected() {
    kv_files(true, &["c01", "c10", "c50-ok"]);
}

/// Some keys of c50-bad are refuted at once while others take minutes to search: the
/// checker must find the quick refutation instead of waiting for the slow keys.
#[test]
fn kv_c50_bad_split_matches_expected() {
    kv_files(true, &["c50-bad"]);
}

#[test]
fn kv_small_files_unsplit_match_expected() {
    kv_files(false, &["c01", "c10"]);
}

/// The unsplit c50 files are a stress test of the search that it does not yet pass in
/// reasonable time (no verdict within 60 s in release). Run with `--ignored`.
#[test]
#[ignore]
fn kv_c50_unsplit_match_expected() {
    kv_files(false, &["c50"]);
}

/// A check that cannot finish within its time limit answers unknown and names the bound.
/// (c50-ok as one unsplit map is far beyond a 1 s limit today; should the search ever
/// decide it that fast, this test needs a harder input.)
#[test]
fn time_limit_gives_unknown_naming_the_bound() {
    let Some(dir) = data_dir() else { return };
    let path = dir.join("kv/c50-ok.txt");
    let history = read_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let options = LinearizabilityOptions {
        split_by_key: false,
        bounds: splitbrain_checkers::CheckBounds {
            time_limit: Some(Duration::from_secs(1)),
            max_memory: None,
        },
        ..Default::default()
    };
    let checker = LinearizabilityChecker::new("kv", options).expect("known model");
    let r = checker.check(&history);
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(
        r.explanation.contains("time limit (1.0 s)"),
        "{}",
        r.explanation
    );
}
