//! No verdict without evidence: on a history in which no client op completed ok (only
//! invokes, fails, infos and nemesis records, with random `f`s, keys and values), no
//! checker of this crate may say `valid`. Each may say `unknown` (it saw nothing) or
//! `invalid` (e.g. `stats`: an `f` that never succeeded), and none may panic.
//!
//! Checkers run with default options: a failed `cas` is not an observation here (under
//! `FailedCas::Observed` it is one, by design).

use proptest::prelude::*;
use serde_json::{json, Value};
use splitbrain_checkers::bank::{BankChecker, BankOptions};
use splitbrain_checkers::ddp::{ddp_checkers, DdpOptions};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::eventual::{
    BookingChecker, CommittedPrefixChecker, ConvergenceChecker, EventualDataType,
    SessionGuaranteesChecker, SetFullChecker,
};
use splitbrain_checkers::jepsen::{by_name, CHECKERS};
use splitbrain_checkers::linearizability::{
    models, LinearizabilityChecker, LinearizabilityOptions,
};
use splitbrain_checkers::{Checker, History, Op, OpType, Process, Validity};
use std::collections::BTreeMap;

/// Every checker the crate offers, in every configuration `splitbrain list` names.
fn every_checker() -> Vec<Box<dyn Checker>> {
    let mut all: Vec<Box<dyn Checker>> = Vec::new();
    for (model, _) in models() {
        for split_by_key in [true, false] {
            let options = LinearizabilityOptions {
                split_by_key,
                ..LinearizabilityOptions::default()
            };
            all.push(Box::new(
                LinearizabilityChecker::new(model, options).expect("a listed model"),
            ));
        }
    }
    for workload in [ElleWorkload::ListAppend, ElleWorkload::RwRegister] {
        all.push(Box::new(
            ElleChecker::new(workload, ElleOptions::default()).expect("the default model"),
        ));
    }
    all.push(Box::new(BankChecker::new(BankOptions::default())));
    for data_type in [
        EventualDataType::Set,
        EventualDataType::Counter,
        EventualDataType::Booking,
    ] {
        all.push(Box::new(ConvergenceChecker::new(data_type)));
        all.push(Box::new(SessionGuaranteesChecker::new(data_type)));
    }
    all.push(Box::new(SetFullChecker));
    all.push(Box::new(CommittedPrefixChecker));
    all.push(Box::new(BookingChecker));
    for (name, _) in CHECKERS {
        all.push(by_name(name).expect("a listed checker"));
    }
    all.extend(ddp_checkers(&DdpOptions {
        dataset_size: Some(8),
        reference: Some(BTreeMap::from([(1, "d".to_string())])),
    }));
    all
}

/// The `f`s the checkers know, and a few they do not.
const FS: &[&str] = &[
    "read",
    "write",
    "cas",
    "add",
    "incr",
    "append",
    "txn",
    "enqueue",
    "dequeue",
    "drain",
    "generate",
    "echo",
    "send",
    "poll",
    "commit_offsets",
    "list_committed_offsets",
    "step",
    "transfer",
    "book",
    "acquire",
    "release",
    "frobnicate",
    "",
];

/// Any small JSON value, including the shapes the checkers read (micro-op lists, maps,
/// step records) so that garbage and near-misses both appear.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..10).prop_map(Value::from),
        "[a-z]{0,3}".prop_map(Value::from),
        Just(json!([["r", 1, null], ["append", 1, 2]])),
        Just(json!([["w", 1, 1], ["r", 2, [1]]])),
        Just(json!({"rank": 0, "step": 1, "epoch": 0, "digest": "d", "samples": [1]})),
        Just(json!({"offsets": {"a": 0}, "msgs": {"a": [[0, 1]]}})),
        Just(json!({"0": 10, "1": 10})),
        Just(json!({"committed": [1], "tentative": [2]})),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// How an invoked op ends: never ok.
#[derive(Debug, Clone, Copy)]
enum End {
    Fail,
    Info,
    Pending,
}

/// One client op (or a nemesis record, `f` = None).
#[derive(Debug, Clone)]
struct Spec {
    f: Option<usize>,
    key: Option<u8>,
    node: Option<u8>,
    invoke: Value,
    end: End,
    completion: Value,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::option::weighted(0.9, 0..FS.len()),
        prop::option::of(0u8..3),
        prop::option::of(0u8..3),
        value(),
        prop_oneof![Just(End::Fail), Just(End::Info), Just(End::Pending)],
        value(),
    )
        .prop_map(|(f, key, node, invoke, end, completion)| Spec {
            f,
            key,
            node,
            invoke,
            end,
            completion,
        })
}

/// A history of the specs: each client op on a fresh process (a process whose op ended
/// info never invokes again), completions delayed by `lag` ops so ops overlap.
fn build(specs: &[Spec], lag: usize) -> History {
    let mut ops: Vec<Op> = Vec::new();
    let mut open: Vec<(usize, Op)> = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let Some(f) = s.f.map(|f| FS[f]) else {
            ops.push(Op::new(
                Process::Nemesis,
                OpType::Info,
                "start-partition",
                s.invoke.clone(),
            ));
            continue;
        };
        let with = |mut op: Op| {
            op.key = s.key.map(|k| json!(format!("k{k}")));
            op.node = s.node.map(|n| format!("n{n}"));
            op
        };
        let p = Process::Client(i as u64);
        ops.push(with(Op::new(p, OpType::Invoke, f, s.invoke.clone())));
        let t = match s.end {
            End::Fail => OpType::Fail,
            End::Info => OpType::Info,
            End::Pending => continue,
        };
        open.push((i + lag, with(Op::new(p, t, f, s.completion.clone()))));
        while open.first().is_some_and(|(due, _)| *due <= i) {
            ops.push(open.remove(0).1);
        }
    }
    ops.extend(open.into_iter().map(|(_, op)| op));
    for (i, op) in ops.iter_mut().enumerate() {
        op.index = i as u64;
        op.time = i as u64 * 1000;
    }
    History::new(ops).expect("a well-formed history")
}

proptest! {
    #[test]
    fn no_checker_says_valid_about_a_history_without_an_ok_op(
        specs in prop::collection::vec(spec(), 0..24),
        lag in 0usize..4,
    ) {
        let h = build(&specs, lag);
        for c in every_checker() {
            let r = c.check(&h);
            prop_assert_ne!(
                r.valid,
                Validity::Valid,
                "{} said valid with no ok op: {}\ncoverage: {}",
                c.name(),
                r.explanation,
                r.coverage
            );
        }
    }
}

/// The generator is not vacuous: it makes empty histories, histories with several client
/// ops, and ones with each outcome.
#[test]
fn the_generator_yields_empty_and_busy_histories_with_every_outcome() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut empty, mut busy, mut fail, mut info, mut pending) = (0, 0, 0, 0, 0);
    for _ in 0..500 {
        let specs = prop::collection::vec(spec(), 0..24)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let h = build(&specs, 1);
        let slots = h.pair_slots();
        empty += usize::from(slots.is_empty());
        busy += usize::from(slots.len() >= 10);
        for s in slots {
            match s.outcome {
                splitbrain_checkers::Outcome::Fail => fail += 1,
                splitbrain_checkers::Outcome::Info => info += 1,
                splitbrain_checkers::Outcome::Pending => pending += 1,
                splitbrain_checkers::Outcome::Ok => panic!("the generator made an ok op"),
            }
        }
    }
    assert!(empty > 0 && busy > 0, "empty {empty}, busy {busy}");
    assert!(fail > 0 && info > 0 && pending > 0);
}
