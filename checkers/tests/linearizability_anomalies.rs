//! Hand-made histories for the classic anomalies, with asserted verdicts and
//! counterexamples.

use serde_json::{json, Value};
use splitbrain_checkers::history::{History, Op, OpType, Process};
use splitbrain_checkers::linearizability::{
    generate_keyed_cas_history, models, FailedCas, LinearizabilityChecker, LinearizabilityOptions,
};
use splitbrain_checkers::{CheckBounds, CheckResult, Checker, Validity};
use std::time::Duration;

/// `(process, type, f, value)` steps; key `k` on every op when given; time = 0.
fn history(key: Option<&str>, steps: &[(u64, &str, &str, Value)]) -> History {
    History::new(
        steps
            .iter()
            .map(|(p, t, f, v)| {
                let mut op = Op::new(
                    Process::Client(*p),
                    OpType::parse(t).expect("valid type"),
                    *f,
                    v.clone(),
                );
                op.key = key.map(|k| json!(k));
                op
            })
            .collect(),
    )
    .expect("well-formed history")
}

fn check(model: &str, h: &History) -> CheckResult {
    check_with(model, h, LinearizabilityOptions::default())
}

fn check_with(model: &str, h: &History, options: LinearizabilityOptions) -> CheckResult {
    let r = LinearizabilityChecker::new(model, options)
        .expect("model")
        .check(h);
    assert_eq!(r.checker, "linearizable");
    r
}

#[test]
fn stale_read_is_invalid_and_explained_in_seconds() {
    // write 4 [0.1, 0.2 s]; write 7 [0.5, 1.1 s]; read returns 4 [1.2, 1.204 s].
    let at = |p, t: &str, f: &str, v: Value, ms: u64| {
        Op::new(Process::Client(p), OpType::parse(t).unwrap(), f, v)
            .with_key("k3")
            .at(ms * 1_000_000)
    };
    let h = History::new(vec![
        at(1, "invoke", "write", json!(4), 100),
        at(1, "ok", "write", json!(4), 200),
        at(2, "invoke", "write", json!(7), 500),
        at(2, "ok", "write", json!(7), 1100),
        at(3, "invoke", "read", Value::Null, 1200),
        at(3, "ok", "read", json!(4), 1204),
    ])
    .unwrap();
    let r = check("register", &h);
    assert_eq!(r.valid, Validity::Invalid);
    let e = &r.explanation;
    assert!(e.starts_with("key k3: not linearizable."), "{e}");
    assert!(
        e.contains("read of k3 returned 4 (process 3, invoked at 1.200 s, completed at 1.204 s)"),
        "{e}"
    );
    assert!(
        e.contains(
            "leaves the state at 7, set by write 7 of k3 (process 2), which completed at 1.100 s"
        ),
        "{e}"
    );
    assert!(
        e.contains("write 4 of k3 (process 1, completed at 0.200 s) was overwritten by write 7 of k3, which completed at 1.100 s"),
        "{e}"
    );
    // Evidence: the read, the overwriting write and the overwritten one, in history order.
    let idx: Vec<u64> = r
        .evidence
        .iter()
        .map(|o| o["index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [0, 2, 4]);
    assert_eq!(r.evidence[2]["value"], json!(4));
    assert_eq!(r.evidence[2]["outcome"], "ok");
    assert_eq!(r.details["key"], "k3");
    assert_eq!(r.details["stuck_op"]["index"], 4);
    assert_eq!(r.details["longest_prefix"], json!([0, 2]));
    assert_eq!(r.details["state"], json!(7));
}

#[test]
fn concurrent_read_may_see_either_value() {
    let h = history(
        None,
        &[
            (1, "invoke", "write", json!(1)),
            (1, "ok", "write", json!(1)),
            (2, "invoke", "write", json!(2)),
            (3, "invoke", "read", Value::Null),
            (3, "ok", "read", json!(1)),
            (4, "invoke", "read", Value::Null),
            (4, "ok", "read", json!(2)),
            (2, "ok", "write", json!(2)),
        ],
    );
    assert_eq!(check("register", &h).valid, Validity::Valid);
}

#[test]
fn read_flapping_back_is_invalid() {
    // The write of 2 is concurrent with both reads, but once a read saw 2, a later read
    // cannot see 1 again.
    let h = history(
        None,
        &[
            (1, "invoke", "write", json!(1)),
            (1, "ok", "write", json!(1)),
            (2, "invoke", "write", json!(2)),
            (3, "invoke", "read", Value::Null),
            (3, "ok", "read", json!(2)),
            (4, "invoke", "read", Value::Null),
            (4, "ok", "read", json!(1)),
            (2, "ok", "write", json!(2)),
        ],
    );
    let r = check("register", &h);
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.details["stuck_op"]["index"], 5, "{}", r.explanation);
    assert!(
        r.explanation.contains("read returned 1"),
        "{}",
        r.explanation
    );
}

#[test]
fn lost_increment_is_invalid() {
    let h = history(
        None,
        &[
            (1, "invoke", "add", json!(1)),
            (1, "ok", "add", json!(1)),
            (2, "invoke", "add", json!(1)),
            (2, "ok", "add", json!(1)),
            (3, "invoke", "read", Value::Null),
            (3, "ok", "read", json!(1)),
        ],
    );
    let r = check("counter", &h);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(
        r.explanation.contains("leaves the state at 2"),
        "{}",
        r.explanation
    );
}

#[test]
fn cas_on_overwritten_value_is_invalid() {
    let h = history(
        Some("k1"),
        &[
            (1, "invoke", "write", json!(1)),
            (1, "ok", "write", json!(1)),
            (2, "invoke", "write", json!(2)),
            (2, "ok", "write", json!(2)),
            (3, "invoke", "cas", json!([1, 3])),
            (3, "ok", "cas", json!([1, 3])),
        ],
    );
    let r = check("cas-register", &h);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(
        r.explanation.contains("cas [1,3] of k1"),
        "{}",
        r.explanation
    );
    assert!(
        r.explanation.contains("was overwritten by write 2 of k1"),
        "{}",
        r.explanation
    );
}

#[test]
fn info_write_may_or_may_not_have_happened() {
    let base = [
        (1, "invoke", "write", json!(1)),
        (1, "ok", "write", json!(1)),
        (2, "invoke", "write", json!(2)),
        (2, "info", "write", json!(2)),
    ];
    let read = |p: u64, v: i64| {
        [
            (p, "invoke", "read", Value::Null),
            (p, "ok", "read", json!(v)),
        ]
    };
    let with = |reads: &[i64]| {
        let mut s = base.to_vec();
        for (i, v) in reads.iter().enumerate() {
            s.extend(read(10 + i as u64, *v));
        }
        history(None, &s)
    };
    assert_eq!(
        check("register", &with(&[1, 1])).valid,
        Validity::Valid,
        "never happened"
    );
    assert_eq!(
        check("register", &with(&[1, 2, 2])).valid,
        Validity::Valid,
        "happened late"
    );
    let r = check("register", &with(&[2, 1]));
    assert_eq!(r.valid, Validity::Invalid, "once seen, it happened");
    assert!(
        r.explanation.contains("read returned 1"),
        "{}",
        r.explanation
    );
    // A never-completed write behaves the same.
    let mut pending = base[..3].to_vec();
    pending.extend(read(10, 1));
    pending.extend(read(11, 2));
    assert_eq!(
        check("register", &history(None, &pending)).valid,
        Validity::Valid
    );
}

#[test]
fn failed_write_never_happened() {
    let h = history(
        None,
        &[
            (1, "invoke", "write", json!(1)),
            (1, "fail", "write", json!(1)),
            (2, "invoke", "read", Value::Null),
            (2, "ok", "read", json!(1)),
        ],
    );
    let r = check("register", &h);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(
        r.explanation
            .contains("No op of this object could have produced"),
        "{}",
        r.explanation
    );
}

#[test]
fn unknown_read_constrains_nothing() {
    let h = history(
        None,
        &[
            (1, "invoke", "write", json!(1)),
            (1, "ok", "write", json!(1)),
            (2, "invoke", "read", Value::Null),
            (2, "fail", "read", json!("timed-out")),
            (3, "invoke", "read", Value::Null),
            (3, "info", "read", json!(9)),
        ],
    );
    // Not invalid: the failed and the indeterminate read constrain nothing. Not valid
    // either: with no ok read, nothing observed the register.
    let r = check("register", &h);
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(r.explanation.starts_with("no ok read"), "{}", r.explanation);
}

#[test]
fn failed_cas_is_an_observation_only_when_asked() {
    let h = history(
        None,
        &[
            (1, "invoke", "write", json!(1)),
            (1, "ok", "write", json!(1)),
            (2, "invoke", "cas", json!([1, 2])),
            (2, "fail", "cas", json!([1, 2])),
        ],
    );
    // Jepsen's reading: the failed cas never happened, so nothing observed the register.
    assert_eq!(check("cas-register", &h).valid, Validity::Unknown);
    let observed = LinearizabilityOptions {
        failed_cas: FailedCas::Observed,
        ..Default::default()
    };
    let r = check_with("cas-register", &h, observed);
    assert_eq!(r.valid, Validity::Invalid);
    assert!(
        r.explanation.contains("cas [1,2] (fail)"),
        "{}",
        r.explanation
    );
}

#[test]
fn queue_set_mutex_list_and_kv_anomalies() {
    let fifo = |first: i64| {
        history(
            None,
            &[
                (1, "invoke", "enqueue", json!(1)),
                (1, "ok", "enqueue", json!(1)),
                (1, "invoke", "enqueue", json!(2)),
                (1, "ok", "enqueue", json!(2)),
                (2, "invoke", "dequeue", Value::Null),
                (2, "ok", "dequeue", json!(first)),
            ],
        )
    };
    assert_eq!(check("queue", &fifo(1)).valid, Validity::Valid);
    assert_eq!(check("queue", &fifo(2)).valid, Validity::Invalid);

    let lost_add = history(
        None,
        &[
            (1, "invoke", "add", json!(1)),
            (1, "ok", "add", json!(1)),
            (2, "invoke", "read", Value::Null),
            (2, "ok", "read", json!([])),
        ],
    );
    assert_eq!(check("set", &lost_add).valid, Validity::Invalid);

    let double_acquire = history(
        None,
        &[
            (1, "invoke", "acquire", Value::Null),
            (1, "ok", "acquire", Value::Null),
            (2, "invoke", "acquire", Value::Null),
            (2, "ok", "acquire", Value::Null),
        ],
    );
    assert_eq!(check("mutex", &double_acquire).valid, Validity::Invalid);

    let reordered = history(
        Some("x"),
        &[
            (1, "invoke", "append", json!(1)),
            (1, "ok", "append", json!(1)),
            (1, "invoke", "append", json!(2)),
            (1, "ok", "append", json!(2)),
            (2, "invoke", "read", Value::Null),
            (2, "ok", "read", json!([2, 1])),
        ],
    );
    assert_eq!(check("list-append", &reordered).valid, Validity::Invalid);

    let kv = |got: &str| {
        history(
            Some("0"),
            &[
                (1, "invoke", "put", json!("a")),
                (1, "ok", "put", json!("a")),
                (1, "invoke", "append", json!("b")),
                (1, "ok", "append", json!("b")),
                (2, "invoke", "get", Value::Null),
                (2, "ok", "get", json!(got)),
            ],
        )
    };
    for split in [true, false] {
        let o = LinearizabilityOptions {
            split_by_key: split,
            ..Default::default()
        };
        assert_eq!(check_with("kv", &kv("ab"), o).valid, Validity::Valid);
        assert_eq!(check_with("kv", &kv("b"), o).valid, Validity::Invalid);
    }
}

#[test]
fn invalid_key_is_named_among_valid_ones() {
    let mut ops = Vec::new();
    for (k, read) in [("a", 1), ("b", 5), ("c", 1)] {
        let c = |t: &str, f: &str, v: Value| {
            Op::new(Process::Client(1), OpType::parse(t).unwrap(), f, v).with_key(k)
        };
        ops.extend([
            c("invoke", "write", json!(1)),
            c("ok", "write", json!(1)),
            c("invoke", "read", Value::Null),
            c("ok", "read", json!(read)),
        ]);
    }
    let h = History::new(ops).unwrap();
    let r = check("register", &h);
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.details["key"], "b");
    assert!(r.explanation.starts_with("key b:"), "{}", r.explanation);
    // Unsplit, the same history is one object and still invalid.
    let o = LinearizabilityOptions {
        split_by_key: false,
        ..Default::default()
    };
    assert_eq!(check_with("register", &h, o).valid, Validity::Invalid);
}

#[test]
fn bounds_give_unknown_with_progress() {
    let h = generate_keyed_cas_history(7, 40_000, 1, 20, 0.05, true);
    let time = LinearizabilityOptions {
        bounds: CheckBounds {
            time_limit: Some(Duration::ZERO),
            max_memory: None,
        },
        ..Default::default()
    };
    let r = check_with("cas-register", &h, time);
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(
        r.explanation.contains("key k0 stopped at the time limit"),
        "{}",
        r.explanation
    );
    let memory = LinearizabilityOptions {
        bounds: CheckBounds {
            time_limit: None,
            max_memory: Some(1),
        },
        ..Default::default()
    };
    let r = check_with("cas-register", &h, memory);
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(r.explanation.contains("memory bound"), "{}", r.explanation);
    assert!(r.details["longest_prefix_len"].as_u64().is_some());
}

#[test]
fn generated_histories_have_the_constructed_verdicts() {
    for seed in 0..4 {
        let valid = generate_keyed_cas_history(seed, 20_000, 10, 10, 0.05, false);
        let invalid = generate_keyed_cas_history(seed, 20_000, 10, 10, 0.05, true);
        assert!(valid.outcome_counts().info > 0);
        assert_eq!(
            check("cas-register", &valid).valid,
            Validity::Valid,
            "seed {seed}"
        );
        let r = check("cas-register", &invalid);
        assert_eq!(r.valid, Validity::Invalid, "seed {seed}");
        assert!(r.explanation.contains("returned 6"), "{}", r.explanation);
    }
}

#[test]
fn unknown_model_lists_known_ones() {
    let e = LinearizabilityChecker::new("nope", LinearizabilityOptions::default()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("`nope`"), "{text}");
    for (name, _) in models() {
        assert!(text.contains(name), "{text}");
        assert!(LinearizabilityChecker::new(name, LinearizabilityOptions::default()).is_ok());
    }
}

#[test]
fn malformed_op_gives_unknown() {
    let h = history(
        None,
        &[
            (1, "invoke", "frobnicate", json!(1)),
            (1, "ok", "frobnicate", json!(1)),
        ],
    );
    let r = check("register", &h);
    assert_eq!(r.valid, Validity::Unknown);
    assert!(
        r.explanation.contains("no operation `frobnicate`"),
        "{}",
        r.explanation
    );
}

/// `--init`: a model started elsewhere than its own initial state changes the verdict,
/// for a single register, per key, unsplit, a counter and a multi-register.
#[test]
fn initial_state_changes_the_verdict() {
    use splitbrain_checkers::linearizability::{LinearizabilityChecker, LinearizabilityOptions};
    use splitbrain_checkers::{Checker, History, Op, OpType, Process, Validity};
    let op =
        |p: u64, t: OpType, f: &str, v: serde_json::Value| Op::new(Process::Client(p), t, f, v);
    let check = |model: &str, init: Option<serde_json::Value>, split: bool, ops: &[Op]| {
        let h = History::new(ops.to_vec()).expect("well formed");
        let opts = LinearizabilityOptions {
            split_by_key: split,
            ..LinearizabilityOptions::default()
        };
        let c = LinearizabilityChecker::new(model, opts).expect("model");
        let c = match init {
            Some(v) => c.with_init(v).expect("valid init"),
            None => c,
        };
        c.check(&h).valid
    };
    // A read of 0 before any write, on two keys.
    let reads = [
        op(0, OpType::Invoke, "read", json!(null)).with_key("a"),
        op(0, OpType::Ok, "read", json!(0)).with_key("a"),
        op(1, OpType::Invoke, "read", json!(null)).with_key("b"),
        op(1, OpType::Ok, "read", json!(0)).with_key("b"),
    ];
    for split in [true, false] {
        assert_eq!(check("register", None, split, &reads), Validity::Invalid);
        assert_eq!(
            check("register", Some(json!(0)), split, &reads),
            Validity::Valid
        );
        assert_eq!(
            check("cas-register", Some(json!(1)), split, &reads),
            Validity::Invalid
        );
    }
    // A counter at 100.
    let counter = [
        op(0, OpType::Invoke, "add", json!(1)),
        op(0, OpType::Ok, "add", json!(1)),
        op(0, OpType::Invoke, "read", json!(null)),
        op(0, OpType::Ok, "read", json!(101)),
    ];
    assert_eq!(check("counter", None, true, &counter), Validity::Invalid);
    assert_eq!(
        check("counter", Some(json!(100)), true, &counter),
        Validity::Valid
    );
    // A multi-register at {x: 0, y: 0}.
    let txn = [
        op(
            0,
            OpType::Invoke,
            "txn",
            json!([["r", "x", null], ["r", "y", null]]),
        ),
        op(0, OpType::Ok, "txn", json!([["r", "x", 0], ["r", "y", 0]])),
    ];
    assert_eq!(
        check("multi-register", None, false, &txn),
        Validity::Invalid
    );
    let init = Some(json!({"x": 0, "y": 0}));
    assert_eq!(check("multi-register", init, false, &txn), Validity::Valid);
    // A state the model cannot be in is refused up front.
    let e = LinearizabilityChecker::new("counter", LinearizabilityOptions::default())
        .expect("model")
        .with_init(json!("lots"))
        .unwrap_err();
    assert!(e.to_string().contains("counter"), "{e}");
}
