//! Jepsen's generic checkers on hand-made histories: for each, valid ones and ones that
//! break it in each way it names.

use serde_json::{json, Value};
use splitbrain_checkers::jepsen::{by_name, counter::CounterChecker, CHECKERS};
use splitbrain_checkers::{CheckResult, Checker, History, Op, OpType, Process, Validity};

/// Builds a history op by op.
#[derive(Default)]
struct B {
    ops: Vec<Op>,
}

impl B {
    fn op(&mut self, p: u64, t: OpType, f: &str, v: Value) -> &mut Self {
        self.ops.push(Op::new(Process::Client(p), t, f, v));
        self
    }
    fn invoke(&mut self, p: u64, f: &str, v: Value) -> &mut Self {
        self.op(p, OpType::Invoke, f, v)
    }
    fn ok(&mut self, p: u64, f: &str, v: Value) -> &mut Self {
        self.op(p, OpType::Ok, f, v)
    }
    fn fail(&mut self, p: u64, f: &str, v: Value, error: &str) -> &mut Self {
        self.op(p, OpType::Fail, f, v);
        self.ops.last_mut().expect("just pushed").error = Some(json!(error));
        self
    }
    fn info(&mut self, p: u64, f: &str, v: Value, error: &str) -> &mut Self {
        self.op(p, OpType::Info, f, v);
        self.ops.last_mut().expect("just pushed").error = Some(json!(error));
        self
    }
    /// invoke then ok, alone.
    fn done(&mut self, p: u64, f: &str, invoke: Value, result: Value) -> &mut Self {
        self.invoke(p, f, invoke).ok(p, f, result)
    }
    fn check(&self, name: &str) -> CheckResult {
        let h = History::new(self.ops.clone()).expect("well-formed");
        by_name(name).expect("known checker").check(&h)
    }
}

fn invalid(r: &CheckResult, anomaly: &str) {
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert!(
        r.anomaly_types.iter().any(|a| a == anomaly),
        "{:?}",
        r.anomaly_types
    );
}

fn valid(r: &CheckResult) {
    assert_eq!(
        r.valid,
        Validity::Valid,
        "{} {:#}",
        r.explanation,
        r.details
    );
}

#[test]
fn every_listed_checker_is_constructible_by_its_jepsen_name() {
    for (name, _) in CHECKERS {
        assert_eq!(by_name(name).expect("listed").name(), *name);
    }
    assert!(by_name("no-such-checker").is_none());
}

#[test]
fn counter_reads_within_acknowledged_and_attempted_increments() {
    let mut b = B::default();
    b.done(0, "add", json!(1), json!(1))
        // A concurrent add of 2 and a read: the read may see 1 or 3.
        .invoke(1, "add", json!(2))
        .invoke(2, "read", Value::Null)
        .ok(2, "read", json!(3))
        .ok(1, "add", json!(2))
        .done(2, "read", Value::Null, json!(3))
        // An add that failed never counts; one whose outcome is unknown may.
        .invoke(3, "add", json!(10))
        .fail(3, "add", json!(10), "refused")
        .invoke(4, "add", json!(5))
        .info(4, "add", json!(5), "timeout")
        .done(2, "read", Value::Null, json!(8))
        .done(2, "read", Value::Null, json!(3));
    valid(&b.check("counter"));

    // Too low: the acknowledged 1 was lost.
    let mut low = B::default();
    low.done(0, "add", json!(1), json!(1))
        .done(1, "read", Value::Null, json!(0));
    let r = low.check("counter");
    invalid(&r, "out-of-bounds-read");
    assert_eq!(
        r.evidence[0]["bounds"],
        json!([1, 1]),
        "{:#}",
        r.evidence[0]
    );
    assert!(
        r.explanation.contains("outside [1, 1]"),
        "{}",
        r.explanation
    );

    // Too high: a failed add was applied.
    let mut high = B::default();
    high.done(0, "add", json!(1), json!(1))
        .invoke(1, "add", json!(10))
        .fail(1, "add", json!(10), "refused")
        .done(2, "read", Value::Null, json!(11));
    invalid(&high.check("counter"), "out-of-bounds-read");

    // A read that saw an add invoked only after it completed.
    let mut future = B::default();
    future
        .done(0, "read", Value::Null, json!(4))
        .done(1, "add", json!(4), json!(4));
    invalid(&future.check("counter"), "out-of-bounds-read");

    // Negative increments widen the bounds downward; an initial value shifts them.
    let mut neg = B::default();
    neg.invoke(0, "add", json!(-3))
        .done(1, "read", Value::Null, json!(97))
        .ok(0, "add", json!(-3))
        .done(1, "read", Value::Null, json!(97));
    let h = History::new(neg.ops.clone()).expect("well-formed");
    valid(&CounterChecker { initial: 100 }.check(&h));
    let r = CounterChecker { initial: 0 }.check(&h);
    invalid(&r, "out-of-bounds-read");
}

#[test]
fn unique_ids_names_duplicates() {
    let mut b = B::default();
    b.done(0, "generate", Value::Null, json!(1))
        .done(1, "generate", Value::Null, json!(2))
        .invoke(2, "generate", Value::Null)
        .info(2, "generate", Value::Null, "timeout");
    let r = b.check("unique-ids");
    valid(&r);
    assert_eq!(r.details["acknowledged_count"], 2);
    assert_eq!(r.details["attempted_count"], 3);

    b.done(3, "generate", Value::Null, json!(2))
        .done(4, "generate", Value::Null, json!(2));
    let r = b.check("unique-ids");
    invalid(&r, "duplicated");
    assert_eq!(r.details["duplicated"][0]["id"], 2);
    assert_eq!(r.details["duplicated"][0]["count"], 3);
    assert_eq!(r.details["duplicated_count"], 1);
}

#[test]
fn total_queue_finds_lost_duplicated_and_unexpected() {
    let mut b = B::default();
    b.done(0, "enqueue", json!(1), json!(1))
        .done(0, "enqueue", json!(2), json!(2))
        .invoke(1, "enqueue", json!(3))
        .info(1, "enqueue", json!(3), "timeout")
        .invoke(2, "enqueue", json!(4))
        .fail(2, "enqueue", json!(4), "full")
        .done(0, "dequeue", Value::Null, json!(1))
        .done(0, "drain", Value::Null, json!([2, 3]));
    let r = b.check("total-queue");
    valid(&r);
    assert_eq!(r.details["recovered"], json!([3]));

    let mut lost = B::default();
    lost.done(0, "enqueue", json!(1), json!(1))
        .done(0, "enqueue", json!(2), json!(2))
        .done(0, "dequeue", Value::Null, json!(1));
    let r = lost.check("total-queue");
    invalid(&r, "lost");
    assert_eq!(r.details["lost"], json!([2]));

    let mut dup = B::default();
    dup.done(0, "enqueue", json!(1), json!(1))
        .done(0, "dequeue", Value::Null, json!(1))
        .done(1, "dequeue", Value::Null, json!(1))
        .done(1, "dequeue", Value::Null, json!(9));
    let r = dup.check("total-queue");
    invalid(&r, "duplicated");
    invalid(&r, "unexpected");
    assert_eq!(r.details["duplicated"], json!([1]));
    assert_eq!(r.details["unexpected"], json!([9]));
    // A failed enqueue's element showing up is unexpected too.
    let mut ghost = B::default();
    ghost
        .invoke(0, "enqueue", json!(4))
        .fail(0, "enqueue", json!(4), "full")
        .done(0, "dequeue", Value::Null, json!(4));
    invalid(&ghost.check("total-queue"), "unexpected");
}

#[test]
fn long_fork_is_two_reads_seeing_two_writes_in_opposite_orders() {
    let w = |k: &str| json!([["w", k, 1]]);
    let r = |x: Value, y: Value| json!([["r", "x", x], ["r", "y", y]]);
    let rn = || json!([["r", "x", null], ["r", "y", null]]);
    let mut fork = B::default();
    fork.invoke(0, "txn", w("x"))
        .invoke(1, "txn", w("y"))
        .invoke(2, "txn", rn())
        .invoke(3, "txn", rn())
        .ok(2, "txn", r(json!(1), Value::Null))
        .ok(3, "txn", r(Value::Null, json!(1)))
        .ok(0, "txn", w("x"))
        .ok(1, "txn", w("y"));
    let res = fork.check("long-fork");
    invalid(&res, "long-fork");
    assert_eq!(res.details["fork_count"], 1);
    assert_eq!(res.evidence.len(), 2);
    assert!(
        res.explanation.contains("opposite orders"),
        "{}",
        res.explanation
    );

    // The same writes seen in one order (x first) by every read: valid.
    let mut ordered = B::default();
    ordered
        .done(0, "txn", w("x"), w("x"))
        .done(2, "txn", rn(), r(json!(1), Value::Null))
        .done(1, "txn", w("y"), w("y"))
        .done(3, "txn", rn(), r(json!(1), json!(1)))
        .done(2, "txn", rn(), r(Value::Null, Value::Null));
    valid(&ordered.check("long-fork"));

    // Each key written once is the premise; otherwise the check cannot decide.
    let mut twice = B::default();
    twice
        .done(0, "txn", w("x"), w("x"))
        .done(1, "txn", w("x"), w("x"))
        .done(2, "txn", rn(), r(json!(1), Value::Null));
    assert_eq!(twice.check("long-fork").valid, Validity::Unknown);
}

#[test]
fn stats_flags_an_f_that_never_succeeded() {
    let mut b = B::default();
    b.done(0, "write", json!(1), json!(1))
        .invoke(1, "read", Value::Null)
        .info(1, "read", Value::Null, "timeout")
        .invoke(2, "read", Value::Null)
        .fail(2, "read", Value::Null, "unavailable");
    let r = b.check("stats");
    invalid(&r, "never-succeeded");
    assert!(r.explanation.contains("read"), "{}", r.explanation);
    assert_eq!(r.details["by_f"]["read"]["info_count"], 1);
    assert_eq!(r.details["by_f"]["read"]["fail_count"], 1);
    assert_eq!(r.details["by_f"]["read"]["valid"], false);
    assert_eq!(r.details["by_f"]["write"]["ok_count"], 1);

    b.done(3, "read", Value::Null, json!(1));
    let r = b.check("stats");
    valid(&r);
    assert_eq!(r.details["count"], 4);
    assert_eq!(B::default().check("stats").valid, Validity::Unknown);
}

#[test]
fn exceptions_groups_failures_by_error_with_counts_and_an_example() {
    let mut b = B::default();
    b.done(0, "write", json!(1), json!(1))
        .invoke(1, "read", Value::Null)
        .info(1, "read", Value::Null, "timeout")
        .invoke(2, "write", json!(2))
        .info(2, "write", json!(2), "timeout")
        .invoke(3, "cas", json!([1, 2]))
        .fail(3, "cas", json!([1, 2]), "precondition");
    let r = b.check("exceptions");
    let groups = r.details["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 2, "{:#}", r.details);
    assert_eq!(groups[0]["error"], "timeout");
    assert_eq!(groups[0]["count"], 2);
    assert_eq!(groups[0]["info_count"], 2);
    assert_eq!(groups[0]["fs"], json!(["read", "write"]));
    assert_eq!(groups[0]["example"]["f"], "read");
    assert_eq!(groups[1]["error"], "precondition");
    assert_eq!(groups[1]["fail_count"], 1);
    assert_eq!(r.details["count"], 3);
    assert!(
        r.explanation.contains("\"timeout\" (2 ops)"),
        "{}",
        r.explanation
    );
}
