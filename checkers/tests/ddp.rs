//! DDP checks on hand-made histories: a valid run, and one history per anomaly each
//! check names (issue 12: replica agreement, exactly-once data, progress, reference).

use serde_json::{json, Value};
use splitbrain_checkers::ddp::{ddp_checkers, DdpCheck, DdpChecker, DdpOptions};
use splitbrain_checkers::history::{History, Op, OpType, Process};
use splitbrain_checkers::{CheckResult, Checker, Validity};
use std::collections::BTreeMap;

const WORLD: u64 = 2;
const BATCH: u64 = 2;
const N: u64 = 8;
/// Steps per epoch: N / (WORLD * BATCH).
const SPE: u64 = 2;

/// One committed step of one rank, as the target reports it.
fn record(rank: u64, step: u64) -> Value {
    let epoch = (step - 1) / SPE;
    let index = (step - 1) % SPE;
    // Epoch e rotates the ids by e; rank r takes batch slots r, r + W, ...
    let samples: Vec<u64> = (0..BATCH)
        .map(|b| ((index * WORLD + rank) * BATCH + b + epoch) % N)
        .collect();
    // The group re-formed (generation 2) before step 7.
    let gen = if step >= 7 { 2 } else { 1 };
    json!({"rank": rank, "step": step, "epoch": epoch, "gen": gen, "digest": format!("d{step}"),
           "loss": 2.0 - step as f64 * 0.05, "samples": samples})
}

/// A history of `steps` steps on both ranks (rank r is process r), with `edit` applied
/// to each record before it is recorded; `None` drops it.
fn history(steps: u64, edit: impl Fn(u64, u64, Value) -> Option<Value>) -> History {
    let mut ops = Vec::new();
    let mut time = 0u64;
    for step in 1..=steps {
        for rank in 0..WORLD {
            let Some(v) = edit(rank, step, record(rank, step)) else {
                continue;
            };
            for (t, value) in [(OpType::Invoke, Value::Null), (OpType::Ok, v)] {
                let mut op = Op::new(Process::Client(rank), t, "step", value);
                time += if step == 7 && rank == 0 && t == OpType::Ok {
                    2_000_000_000
                } else {
                    10_000_000
                };
                op.time = time;
                ops.push(op);
            }
        }
    }
    History::new(ops).expect("well-formed")
}

fn options(steps: u64) -> DdpOptions {
    DdpOptions {
        dataset_size: Some(N),
        reference: Some(
            (1..=steps)
                .map(|s| (s, format!("d{s}")))
                .collect::<BTreeMap<_, _>>(),
        ),
    }
}

fn run(check: DdpCheck, h: &History, opts: DdpOptions) -> CheckResult {
    DdpChecker::new(check, opts).check(h)
}

#[test]
fn a_correct_run_is_valid_on_every_check() {
    let h = history(24, |_, _, v| Some(v));
    for c in ddp_checkers(&options(24)) {
        let r = c.check(&h);
        assert_eq!(r.valid, Validity::Valid, "{}: {}", r.checker, r.explanation);
    }
    let p = run(DdpCheck::Progress, &h, options(24));
    // The 2 s pause before step 7 is reported as a recovery.
    assert_eq!(p.details["recoveries"][0]["after_step"], 6, "{}", p.details);
    assert_eq!(
        p.details["recoveries"].as_array().map(Vec::len),
        Some(1),
        "{}",
        p.details
    );
    assert!(p.details["time_lost_ms"].as_u64().unwrap() >= 1900);
}

#[test]
fn divergent_replicas_name_the_first_step_and_both_sides() {
    let h = history(10, |rank, step, mut v| {
        if rank == 1 && step >= 5 {
            v["digest"] = json!(format!("x{step}"));
        }
        Some(v)
    });
    let r = run(DdpCheck::Replicas, &h, options(10));
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["replica-divergence"]);
    assert!(r.explanation.contains("step 5"), "{}", r.explanation);
    assert!(
        r.explanation.contains("ranks {0} hold d5") && r.explanation.contains("ranks {1} hold x5"),
        "{}",
        r.explanation
    );
    let reference = run(DdpCheck::Reference, &h, options(10));
    assert_eq!(reference.valid, Validity::Invalid);
    assert!(
        reference.explanation.contains("step 5 on rank 1"),
        "{}",
        reference.explanation
    );
}

#[test]
fn overlapping_shards_show_duplicates_and_gaps() {
    // Rank 1 reads rank 0's samples (the sampler-overlap bug).
    let h = history(8, |rank, step, mut v| {
        if rank == 1 {
            v["samples"] = record(0, step)["samples"].clone();
        }
        Some(v)
    });
    let r = run(DdpCheck::Data, &h, options(8));
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.anomaly_types, ["duplicate-sample", "missing-sample"]);
    assert!(r.explanation.contains("epoch 0"), "{}", r.explanation);
    // Without the data set size only duplicates can be seen.
    let no_size = DdpOptions {
        dataset_size: None,
        ..options(8)
    };
    assert_eq!(
        run(DdpCheck::Data, &h, no_size).anomaly_types,
        ["duplicate-sample"]
    );
}

#[test]
fn a_step_reported_again_with_other_samples_is_a_changed_record_and_a_gap() {
    let mut h = history(6, |_, _, v| Some(v)).into_ops();
    let mut again = record(0, 3);
    again["samples"] = json!([6, 7]);
    let last = h.last().map_or(0, |o| o.time);
    for (i, (t, v)) in [(OpType::Invoke, Value::Null), (OpType::Ok, again)]
        .into_iter()
        .enumerate()
    {
        let mut op = Op::new(Process::Client(0), t, "step", v);
        op.time = last + 1 + i as u64;
        op.index = h.len() as u64;
        h.push(op);
    }
    let h = History::new(h).unwrap();
    let d = run(DdpCheck::Data, &h, options(6));
    assert!(
        d.anomaly_types.contains(&"changed-record".to_string()),
        "{:?}",
        d.anomaly_types
    );
    let p = run(DdpCheck::Progress, &h, options(6));
    assert_eq!(p.anomaly_types, ["step-gap"]);
    assert!(
        p.explanation
            .contains("rank 0 (process 0) reported step 3 where step 7 was due"),
        "{}",
        p.explanation
    );
}

#[test]
fn a_skipped_step_and_a_rising_loss_are_progress_failures() {
    let h = history(24, |rank, step, v| (!(rank == 1 && step == 4)).then_some(v));
    let p = run(DdpCheck::Progress, &h, options(24));
    assert_eq!(p.anomaly_types, ["step-gap"]);
    assert!(p
        .explanation
        .contains("rank 1 (process 1) reported step 5 where step 4 was due"));
    let rising = history(24, |_, step, mut v| {
        v["loss"] = json!(step as f64);
        Some(v)
    });
    let p = run(DdpCheck::Progress, &rising, options(24));
    assert_eq!(p.anomaly_types, ["loss-not-decreasing"]);
}

#[test]
fn the_reference_check_needs_reference_digests_and_malformed_records_are_unknown() {
    let h = history(4, |_, _, v| Some(v));
    let none = DdpOptions {
        reference: None,
        ..options(4)
    };
    assert_eq!(run(DdpCheck::Reference, &h, none).valid, Validity::Unknown);
    let short = DdpOptions {
        reference: Some(BTreeMap::new()),
        ..options(4)
    };
    assert_eq!(run(DdpCheck::Reference, &h, short).valid, Validity::Unknown);
    let bad = history(2, |_, step, v| {
        Some(if step == 2 { json!({"step": 2}) } else { v })
    });
    let r = run(DdpCheck::Replicas, &bad, options(2));
    assert_eq!(r.valid, Validity::Unknown);
    assert!(r.explanation.contains("malformed"), "{}", r.explanation);
}
