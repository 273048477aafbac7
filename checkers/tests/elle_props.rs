//! Property tests: histories strict-serializable by construction are always valid, and
//! histories from a snapshot-isolation simulator show only what SI allows.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::elle::bench::{generate, GenConfig};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::history::{History, Op, OpType, Process};
use splitbrain_checkers::{CheckResult, Checker, Validity};
use std::collections::HashMap;

fn check(model: &str, h: &History) -> CheckResult {
    let options = ElleOptions {
        consistency_model: model.into(),
        ..ElleOptions::default()
    };
    ElleChecker::new(ElleWorkload::ListAppend, options)
        .expect("known model")
        .check(h)
}

/// Valid, or unknown only because nothing could be inferred at all.
fn assert_valid(r: &CheckResult) {
    let empty = r.valid == Validity::Unknown && r.anomaly_types == ["empty-transaction-graph"];
    assert!(
        r.valid == Validity::Valid || empty,
        "{:?} {:?}: {}",
        r.valid,
        r.anomaly_types,
        r.explanation
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn atomic_at_a_point_is_strict_serializable(
        seed in any::<u64>(), txns in 20usize..400, keys in 1usize..6, processes in 1usize..7,
        fails in 0u8..3, infos in 0u8..3,
    ) {
        let mut cfg = GenConfig::new(seed, txns, keys, processes);
        cfg.max_appends_per_key = 6;
        cfg.fail_ratio = fails as f64 * 0.07;
        cfg.info_ratio = infos as f64 * 0.07;
        let h = generate(&cfg);
        prop_assert!(!h.is_empty());
        assert_valid(&check("strict-serializable", &h));
        // The same history as registers (append -> write, a read sees the last element)
        // is strict serializable too, whichever version-order inference is enabled.
        let registers = as_registers(&h);
        let options = ElleOptions { wfr_keys: true, sequential_keys: true, linearizable_keys: true, ..ElleOptions::default() };
        let r = ElleChecker::new(ElleWorkload::RwRegister, options).expect("model").check(&registers);
        assert_valid(&r);
    }

    #[test]
    fn snapshot_isolation_shows_only_what_si_allows(
        seed in any::<u64>(), txns in 10usize..250, keys in 1usize..5, processes in 2usize..6,
    ) {
        let h = si_history(seed, txns, keys, processes);
        assert_valid(&check("snapshot-isolation", &h));
        assert_valid(&check("strong-snapshot-isolation", &h));
        let strict = check("strict-serializable", &h);
        for t in &strict.anomaly_types {
            prop_assert!(t == "G2-item" || t == "G2-item-realtime" || t == "empty-transaction-graph",
                "SI forbids {}: {}", t, strict.explanation);
        }
    }
}

/// Rewrites a list-append history as an rw-register one.
fn as_registers(h: &History) -> History {
    let ops = h
        .ops()
        .iter()
        .map(|op| {
            let mut op = op.clone();
            if let Value::Array(mops) = &op.value {
                op.value = Value::Array(
                    mops.iter()
                        .map(|m| match m.as_array().map(Vec::as_slice) {
                            Some([f, k, v]) if f == "append" => json!(["w", k, v]),
                            Some([f, k, v]) if f == "r" => {
                                json!([
                                    "r",
                                    k,
                                    v.as_array()
                                        .and_then(|l| l.last().cloned())
                                        .unwrap_or(Value::Null)
                                ])
                            }
                            _ => m.clone(),
                        })
                        .collect(),
                );
            }
            op
        })
        .collect();
    History::new(ops).expect("rewritten history is well-formed")
}

#[test]
fn snapshot_isolation_simulator_does_produce_write_skew() {
    let found = (0..40u64).any(|seed| {
        let h = si_history(seed, 200, 2, 4);
        check("serializable", &h)
            .anomaly_types
            .iter()
            .any(|t| t == "G2-item")
    });
    assert!(
        found,
        "the SI simulator never produced write skew; the property test would be vacuous"
    );
}

/// Snapshot isolation with first-committer-wins: each transaction reads a snapshot taken
/// after its invoke and commits (or aborts on a write conflict) before it completes.
fn si_history(seed: u64, txns: usize, keys: usize, processes: usize) -> History {
    #[derive(Clone)]
    struct Txn {
        process: u64,
        mops: Vec<(bool, u64, u64)>,
        snapshot: Option<(u64, Vec<Value>)>,
        info: bool,
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut committed: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut last_commit: HashMap<u64, u64> = HashMap::new();
    let mut next_value: HashMap<u64, u64> = HashMap::new();
    let mut seq = 0u64;
    let mut slots: Vec<Option<Txn>> = vec![None; processes];
    let mut pids: Vec<u64> = (0..processes as u64).collect();
    let mut ops = Vec::new();
    let (mut invoked, mut open) = (0usize, 0usize);
    let invoke_value = |mops: &[(bool, u64, u64)]| {
        Value::Array(
            mops.iter()
                .map(|&(a, k, v)| {
                    if a {
                        json!(["append", k, v])
                    } else {
                        json!(["r", k, null])
                    }
                })
                .collect(),
        )
    };
    for step in 0..txns * 20 {
        if invoked >= txns && open == 0 {
            break;
        }
        let p = rng.gen_range(0..processes);
        let time = step as u64 * 100;
        match slots[p].take() {
            None if invoked < txns => {
                invoked += 1;
                open += 1;
                let n = rng.gen_range(1..=4);
                let mops: Vec<(bool, u64, u64)> = (0..n)
                    .map(|_| {
                        let k = rng.gen_range(0..keys as u64);
                        if rng.gen_bool(0.5) {
                            let v = next_value.entry(k).or_insert(0);
                            *v += 1;
                            (true, k, *v)
                        } else {
                            (false, k, 0)
                        }
                    })
                    .collect();
                ops.push(
                    Op::new(
                        Process::Client(pids[p]),
                        OpType::Invoke,
                        "txn",
                        invoke_value(&mops),
                    )
                    .at(time),
                );
                slots[p] = Some(Txn {
                    process: pids[p],
                    mops,
                    snapshot: None,
                    info: rng.gen_bool(0.05),
                });
            }
            None => {}
            Some(mut t) if t.snapshot.is_none() => {
                // Take the snapshot and run the transaction against it.
                let mut local: HashMap<u64, Vec<u64>> = HashMap::new();
                let mut out = Vec::new();
                for &(a, k, v) in &t.mops {
                    let list = local
                        .entry(k)
                        .or_insert_with(|| committed.get(&k).cloned().unwrap_or_default());
                    if a {
                        list.push(v);
                        out.push(json!(["append", k, v]));
                    } else {
                        out.push(json!(["r", k, list.clone()]));
                    }
                }
                t.snapshot = Some((seq, out));
                slots[p] = Some(t);
            }
            Some(t) => {
                let (snap, out) = t.snapshot.clone().unwrap_or_default();
                let conflict = t
                    .mops
                    .iter()
                    .any(|&(a, k, _)| a && last_commit.get(&k).is_some_and(|c| *c > snap));
                let commit = !conflict && (!t.info || rng.gen_bool(0.5));
                if commit {
                    seq += 1;
                    for &(a, k, v) in &t.mops {
                        if a {
                            committed.entry(k).or_default().push(v);
                            last_commit.insert(k, seq);
                        }
                    }
                }
                let (ty, value) = if t.info {
                    pids[p] += processes as u64;
                    (OpType::Info, invoke_value(&t.mops))
                } else if commit {
                    (OpType::Ok, Value::Array(out))
                } else {
                    (OpType::Fail, invoke_value(&t.mops))
                };
                ops.push(Op::new(Process::Client(t.process), ty, "txn", value).at(time));
                open -= 1;
            }
        }
    }
    History::new(ops).expect("simulated history is well-formed")
}
