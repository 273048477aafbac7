//! Ground truth from a real system: histories recorded from the bundled training cluster
//! (`targets/ddp`, 4 ranks) in its correct mode and with each of its bugs, with the
//! single-process replay's digests beside them (see `tests/data/ddp/README.md`).

use serde_json::Value;
use splitbrain_checkers::ddp::{ddp_checkers, DdpOptions};
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::{CheckResult, Validity};
use std::collections::BTreeMap;
use std::path::Path;

/// The data set size the target ran with (`harness/src/systems/ddp.rs`).
const DATASET_SIZE: u64 = 2048;

/// The four DDP checks on `tests/data/ddp/NAME.jsonl` against `NAME.reference.jsonl`.
fn check(name: &str) -> BTreeMap<String, CheckResult> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ddp");
    let history = read_path(&dir.join(format!("{name}.jsonl"))).unwrap();
    let text = std::fs::read_to_string(dir.join(format!("{name}.reference.jsonl"))).unwrap();
    let reference = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["step"].as_u64().unwrap(),
                v["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let opts = DdpOptions {
        dataset_size: Some(DATASET_SIZE),
        reference: Some(reference),
    };
    ddp_checkers(&opts)
        .iter()
        .map(|c| (c.name(), c.check(&history)))
        .collect()
}

/// Asserts each check's verdict: `invalid` lists (check, anomaly) pairs that must be
/// found; every other check must be valid.
fn expect(name: &str, invalid: &[(&str, &str)]) {
    let results = check(name);
    for (checker, r) in &results {
        let wanted: Vec<&str> = invalid
            .iter()
            .filter(|(c, _)| c == checker)
            .map(|(_, a)| *a)
            .collect();
        if wanted.is_empty() {
            assert_eq!(
                r.valid,
                Validity::Valid,
                "{name}: {checker}: {}",
                r.explanation
            );
        } else {
            assert_eq!(
                r.valid,
                Validity::Invalid,
                "{name}: {checker}: {}",
                r.explanation
            );
            for a in wanted {
                assert!(
                    r.anomaly_types.iter().any(|t| t == a),
                    "{name}: {checker} lacks {a}: {:?}",
                    r.anomaly_types
                );
            }
        }
    }
}

#[test]
fn correct_mode_under_kills_is_valid_and_equals_the_reference() {
    expect("correct", &[]);
}

#[test]
fn skip_allreduce_and_unordered_reduce_split_the_replicas() {
    for name in ["skip-allreduce", "unordered-reduce"] {
        expect(
            name,
            &[
                ("ddp-replicas", "replica-divergence"),
                ("ddp-reference", "reference-mismatch"),
            ],
        );
    }
}

#[test]
fn no_init_broadcast_diverges_from_step_one() {
    expect(
        "no-init-broadcast",
        &[
            ("ddp-replicas", "replica-divergence"),
            ("ddp-reference", "reference-mismatch"),
        ],
    );
    let r = &check("no-init-broadcast")["ddp-replicas"];
    assert!(
        r.explanation.contains("the first: step 1:"),
        "{}",
        r.explanation
    );
}

#[test]
fn sampler_bugs_break_exactly_once_data_but_not_agreement() {
    for name in ["sampler-overlap", "resume-without-sampler-state"] {
        expect(
            name,
            &[
                ("ddp-data", "duplicate-sample"),
                ("ddp-reference", "reference-mismatch"),
            ],
        );
    }
}
