//! The linearizability checker on Porcupine's public histories, against EXPECTED.tsv.
//! Skips (counted; a failure under CI=true) when ../shared/data is absent.

use crate::skip;

use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::history::History;
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
        skip::skip_here(&format!("{} not found", dir.display()));
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

/// The unsplit c50 files: one object of ten keys, searched with the factored memo. (Slow
/// in debug builds, so only run in release.)
#[test]
#[cfg_attr(debug_assertions, ignore)]
fn kv_c50_unsplit_match_expected() {
    kv_files(false, &["c50"]);
}

/// An unsplit refutation names the op that cannot take effect, on the key found dead.
#[test]
#[cfg_attr(debug_assertions, ignore)]
fn kv_c50_bad_unsplit_names_the_stuck_op() {
    let Some(dir) = data_dir() else { return };
    let path = dir.join("kv/c50-bad.txt");
    let history = read_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let options = LinearizabilityOptions {
        split_by_key: false,
        ..Default::default()
    };
    let checker = LinearizabilityChecker::new("kv", options).expect("known model");
    let r = checker.check(&history);
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert!(
        r.explanation.contains("get of 3") && r.explanation.contains("cannot take effect"),
        "{}",
        r.explanation
    );
}

/// A check that cannot finish within its time limit answers unknown and names the bound.
/// The input is key "0" of c50-bad alone: its search needs millions of configurations
/// (beyond 2 GB of tables), far more than a 1 s limit allows.
#[test]
fn time_limit_gives_unknown_naming_the_bound() {
    let Some(dir) = data_dir() else { return };
    let path = dir.join("kv/c50-bad.txt");
    let history = read_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let key0: Vec<_> = history
        .ops()
        .iter()
        .filter(|o| o.key == Some(serde_json::json!("0")))
        .cloned()
        .collect();
    let history = History::new(key0).expect("a key's ops form a history");
    let options = LinearizabilityOptions {
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
