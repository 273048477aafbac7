//! Elle reads transaction values straight from a JSON Lines history's text (no parsed ops);
//! these properties check that it concludes exactly what it concludes from parsed ops,
//! on valid histories and on histories mutated into anomalies and odd shapes.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::elle::bench::{generate, GenConfig};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::history::read::read_str;
use splitbrain_checkers::history::write::write_json_lines;
use splitbrain_checkers::history::{History, Op, OpType};
use splitbrain_checkers::{CheckResult, Checker};
use std::path::Path;

/// Everything a result says except timings.
fn comparable(r: &CheckResult) -> Value {
    let mut details = r.details.clone();
    if let Value::Object(m) = &mut details {
        m.remove("elapsed-ms");
        m.remove("phase-ms");
    }
    json!({
        "valid": r.valid.label(), "explanation": r.explanation, "evidence": r.evidence,
        "types": r.anomaly_types, "not": r.not, "also_not": r.also_not, "details": details,
    })
}

/// A replacement for a micro-op part, covering every shape the text reader must handle.
fn odd_value(rng: &mut ChaCha8Rng) -> Value {
    match rng.gen_range(0..10) {
        0 => json!(1.5),
        1 => json!("x\"y"),
        2 => json!(-3),
        3 => json!(12_345_678_901_234_567_890u64),
        4 => json!([1, [2]]),
        5 => json!({"a": 1}),
        6 => json!(true),
        7 => json!("k1"),
        8 => Value::Null,
        _ => json!(4_294_967_296u64),
    }
}

/// Mutates some completions' micro-ops so that anomalies and malformed shapes appear.
fn mutate(ops: &mut [Op], seed: u64, rate: f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for op in ops.iter_mut().filter(|o| o.op_type == OpType::Ok) {
        if !rng.gen_bool(rate) {
            continue;
        }
        let Value::Array(mops) = &mut op.value else {
            continue;
        };
        let i = rng.gen_range(0..mops.len());
        let Value::Array(parts) = &mut mops[i] else {
            continue;
        };
        match rng.gen_range(0..8) {
            0 => {
                if let Some(Value::Array(list)) = parts.get_mut(2) {
                    list.pop();
                }
            }
            1 => {
                if let Some(Value::Array(list)) = parts.get_mut(2) {
                    list.reverse();
                }
            }
            2 => parts[1] = odd_value(&mut rng),
            3 => parts[2] = odd_value(&mut rng),
            4 => parts[0] = json!(":r"),
            5 => parts[0] = json!("x"),
            6 => mops[i] = json!([1, 2]),
            _ => {
                if let Some(Value::Array(list)) = parts.get_mut(2) {
                    list.push(odd_value(&mut rng));
                }
            }
        }
    }
}

fn lazy_copy(h: &History) -> History {
    let mut text = Vec::new();
    write_json_lines(&mut text, h.ops()).expect("writing to memory");
    let text = String::from_utf8(text).expect("JSON is UTF-8");
    read_str(&text, Path::new("mem.jsonl"), None).unwrap_or_else(|e| panic!("{e}"))
}

fn check(workload: ElleWorkload, model: &str, h: &History) -> CheckResult {
    let options = ElleOptions {
        consistency_model: model.into(),
        ..ElleOptions::default()
    };
    ElleChecker::new(workload, options)
        .expect("known model")
        .check(h)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn text_and_parsed_values_give_the_same_result(
        seed in any::<u64>(), txns in 5usize..200, keys in 1usize..5, processes in 1usize..6,
        fails in 0u8..3, infos in 0u8..3, mutation in 0u8..4,
    ) {
        let mut cfg = GenConfig::new(seed, txns, keys, processes);
        cfg.max_appends_per_key = 5;
        cfg.fail_ratio = fails as f64 * 0.07;
        cfg.info_ratio = infos as f64 * 0.07;
        let mut ops = generate(&cfg).into_ops();
        mutate(&mut ops, seed, mutation as f64 * 0.05);
        let eager = History::new(ops).expect("generated histories are well formed");
        let lazy = lazy_copy(&eager);
        prop_assert_eq!(lazy.pair_slots(), eager.pair_slots());
        for (workload, model) in [
            (ElleWorkload::ListAppend, "strict-serializable"),
            (ElleWorkload::ListAppend, "snapshot-isolation"),
            (ElleWorkload::RwRegister, "serializable"),
        ] {
            let a = comparable(&check(workload, model, &eager));
            let b = comparable(&check(workload, model, &lazy));
            prop_assert_eq!(a, b);
        }
    }
}

#[test]
fn lazy_history_answers_without_materializing_and_matches_parsed_ops() {
    let eager = generate(&GenConfig::new(7, 300, 3, 4));
    let lazy = lazy_copy(&eager);
    assert_eq!(lazy.len(), eager.len());
    assert_eq!(lazy.outcome_counts(), eager.outcome_counts());
    for pos in [0, 1, eager.len() / 2, eager.len() - 1] {
        assert_eq!(lazy.op(pos).as_deref(), eager.ops().get(pos));
        assert_eq!(
            lazy.op_value(pos).as_deref(),
            eager.ops().get(pos).map(|o| &o.value)
        );
        assert_eq!(lazy.op_time(pos), eager.ops().get(pos).map(|o| o.time));
        assert_eq!(lazy.op_f(pos), eager.ops().get(pos).map(|o| o.f.as_str()));
    }
    assert!(lazy.op(eager.len()).is_none());
    assert_eq!(lazy.ops(), eager.ops());
    assert_eq!(lazy.pairs(), eager.pairs());
}

#[test]
fn memory_bound_gives_unknown_naming_the_bound() {
    let h = lazy_copy(&generate(&GenConfig::new(3, 2000, 5, 4)));
    let check_with = |max_memory: Option<u64>| {
        let options = ElleOptions {
            bounds: splitbrain_checkers::CheckBounds {
                time_limit: None,
                max_memory,
            },
            ..ElleOptions::default()
        };
        ElleChecker::new(ElleWorkload::ListAppend, options)
            .expect("known model")
            .check(&h)
    };
    let tight = check_with(Some(64 << 10));
    assert_eq!(tight.valid, splitbrain_checkers::Validity::Unknown);
    assert!(
        tight.explanation.contains("memory bound (0 MiB)") && tight.explanation.contains("MiB"),
        "{}",
        tight.explanation
    );
    let roomy = check_with(Some(1 << 30));
    assert_eq!(
        roomy.valid,
        splitbrain_checkers::Validity::Valid,
        "{}",
        roomy.explanation
    );
}
