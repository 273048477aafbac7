//! The `kafka` checker: hand-made histories, valid ones and one for each anomaly it
//! names, and a proptest against a brute-force oracle that applies each anomaly's
//! definition to every pair of facts of small random histories.

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use splitbrain_checkers::jepsen::{by_name, kafka::ANOMALIES};
use splitbrain_checkers::{CheckResult, History, Op, OpType, Process, Validity};
use std::collections::{BTreeMap, BTreeSet};

/// Builds a history: each call invokes and completes one op, unless split by hand.
#[derive(Default)]
struct B {
    ops: Vec<Op>,
}

impl B {
    fn push(&mut self, p: u64, t: OpType, f: &str, key: Option<&str>, v: Value) -> &mut Self {
        let mut op = Op::new(Process::Client(p), t, f, v);
        op.key = key.map(|k| json!(k));
        self.ops.push(op);
        self
    }
    fn send(&mut self, p: u64, key: &str, offset: i64, msg: i64) -> &mut Self {
        self.push(p, OpType::Invoke, "send", Some(key), json!(msg))
            .push(p, OpType::Ok, "send", Some(key), json!([offset, msg]))
    }
    fn poll(&mut self, p: u64, from: Value, msgs: Value) -> &mut Self {
        self.push(p, OpType::Invoke, "poll", None, Value::Null)
            .push(
                p,
                OpType::Ok,
                "poll",
                None,
                json!({"offsets": from, "msgs": msgs}),
            )
    }
    fn final_poll(&mut self, p: u64, msgs: Value) -> &mut Self {
        let from: Map<String, Value> = msgs
            .as_object()
            .map(|m| m.keys().map(|k| (k.clone(), json!(0))).collect())
            .unwrap_or_default();
        self.push(p, OpType::Invoke, "poll", None, json!({"final": true}))
            .push(
                p,
                OpType::Ok,
                "poll",
                None,
                json!({"offsets": from, "msgs": msgs, "final": true}),
            )
    }
    fn commit(&mut self, p: u64, offsets: Value) -> &mut Self {
        self.push(p, OpType::Invoke, "commit_offsets", None, Value::Null)
            .push(
                p,
                OpType::Ok,
                "commit_offsets",
                None,
                json!({ "offsets": offsets }),
            )
    }
    fn list(&mut self, p: u64, keys: Value, offsets: Value) -> &mut Self {
        self.push(
            p,
            OpType::Invoke,
            "list_committed_offsets",
            None,
            json!({ "keys": keys }),
        )
        .push(
            p,
            OpType::Ok,
            "list_committed_offsets",
            None,
            json!({ "offsets": offsets }),
        )
    }
    fn check(&self) -> CheckResult {
        let h = History::new(self.ops.clone()).expect("well-formed");
        by_name("kafka").expect("kafka is a checker").check(&h)
    }
}

fn valid(r: &CheckResult) {
    assert_eq!(
        r.valid,
        Validity::Valid,
        "{}\n{:#}",
        r.explanation,
        r.details
    );
}

/// Invalid with exactly these anomalies, each with ops as evidence.
fn invalid(r: &CheckResult, anomalies: &[&str]) {
    assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
    assert_eq!(r.anomaly_types, anomalies, "{}", r.explanation);
    assert!(!r.evidence.is_empty());
    for a in anomalies {
        assert!(r.explanation.contains(a), "{}", r.explanation);
        assert!(r.details[*a][0]["ops"]
            .as_array()
            .is_some_and(|o| !o.is_empty()));
    }
}

/// Two producers, a consumer that polls in order, commits, and a final read.
fn good() -> B {
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(1, "a", 1, 11)
        .send(0, "b", 0, 20)
        .poll(
            2,
            json!({"a": 0, "b": 0}),
            json!({"a": [[0, 10]], "b": [[0, 20]]}),
        )
        .send(1, "a", 2, 12)
        .poll(2, json!({"a": 1, "b": 1}), json!({"a": [[1, 11], [2, 12]]}))
        .commit(2, json!({"a": 2, "b": 0}))
        .list(3, json!(["a", "b"]), json!({"a": 2, "b": 0}))
        .final_poll(9, json!({"a": [[0, 10], [1, 11], [2, 12]], "b": [[0, 20]]}));
    b
}

#[test]
fn sends_never_polled_are_unknown() {
    let mut b = B::default();
    b.send(0, "a", 0, 10).send(1, "a", 1, 11);
    b.push(2, OpType::Invoke, "poll", None, Value::Null).push(
        2,
        OpType::Info,
        "poll",
        None,
        Value::Null,
    );
    let r = b.check();
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(r.explanation.contains("no ok poll"), "{}", r.explanation);
    assert_eq!(r.coverage.get("polls"), Some(0));
    assert_eq!(r.coverage.get("sends"), Some(2));
}

#[test]
fn an_orderly_history_is_valid() {
    let r = good().check();
    valid(&r);
    assert_eq!(r.details["acknowledged_sends"], 4);
    assert_eq!(r.details["final_reads"], 1);
}

#[test]
fn an_acknowledged_send_a_final_read_misses_is_lost() {
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(1, "a", 1, 11)
        .final_poll(9, json!({"a": [[0, 10]]}));
    let r = b.check();
    invalid(&r, &["lost-write"]);
    assert!(r.explanation.contains("message 11"), "{}", r.explanation);
}

#[test]
fn an_acknowledged_send_a_poll_reads_across_is_lost() {
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(0, "a", 1, 11)
        .send(0, "a", 2, 12)
        .poll(1, json!({"a": 0}), json!({"a": [[0, 10], [2, 12]]}));
    // The poll also jumped over offset 1 inside itself.
    invalid(&b.check(), &["lost-write", "poll-skip"]);
}

#[test]
fn a_send_no_poll_covered_is_unobserved_not_lost() {
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(0, "a", 5, 11)
        .poll(1, json!({"a": 0}), json!({"a": [[0, 10]]}));
    let r = b.check();
    valid(&r);
    assert_eq!(r.details["unobserved_count"], 1);
}

#[test]
fn two_messages_at_one_offset_are_inconsistent() {
    let mut b = B::default();
    // Two nodes hand out offset 0 of key a, each from its own counter.
    b.send(0, "a", 0, 10).send(1, "a", 0, 11);
    let r = b.check();
    invalid(&r, &["inconsistent-offsets"]);
    assert_eq!(r.evidence.len(), 2);
    // The same from a poll that disagrees with a send.
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .poll(1, json!({"a": 0}), json!({"a": [[0, 99]]}));
    invalid(&b.check(), &["lost-write", "inconsistent-offsets"]);
}

#[test]
fn one_message_at_two_offsets_is_a_duplicate() {
    let mut b = B::default();
    b.send(0, "a", 0, 10).send(0, "a", 1, 11).poll(
        1,
        json!({"a": 0}),
        json!({"a": [[0, 10], [1, 11], [2, 10]]}),
    );
    invalid(&b.check(), &["duplicate"]);
}

#[test]
fn a_consumer_going_back_is_nonmonotonic() {
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(0, "a", 1, 11)
        .poll(1, json!({"a": 0}), json!({"a": [[0, 10], [1, 11]]}))
        .poll(1, json!({"a": 2}), json!({"a": [[1, 11]]}));
    invalid(&b.check(), &["nonmonotonic-poll"]);
    // Inside one poll.
    let mut b = B::default();
    b.send(0, "a", 0, 10).send(0, "a", 1, 11).poll(
        1,
        json!({"a": 0}),
        json!({"a": [[0, 10], [1, 11], [0, 10]]}),
    );
    invalid(&b.check(), &["nonmonotonic-poll"]);
    // Different consumers, or one that reassigned in between, may go back.
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(0, "a", 1, 11)
        .poll(1, json!({"a": 0}), json!({"a": [[0, 10], [1, 11]]}))
        .poll(2, json!({"a": 0}), json!({"a": [[0, 10]]}))
        .list(1, json!(["a"]), json!({}))
        .poll(1, json!({"a": 0}), json!({"a": [[0, 10], [1, 11]]}));
    valid(&b.check());
}

#[test]
fn successive_polls_jumping_over_existing_offsets_skip() {
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(0, "a", 1, 11)
        .send(0, "a", 2, 12)
        .poll(1, json!({"a": 0}), json!({"a": [[0, 10]]}))
        .poll(1, json!({"a": 1}), json!({"a": [[2, 12]]}))
        // Offset 1 was seen by someone, so it is not lost: only skipped by process 1.
        .poll(2, json!({"a": 1}), json!({"a": [[1, 11]]}));
    let r = b.check();
    invalid(&r, &["poll-skip"]);
    assert!(
        r.explanation.contains("skipping existing offsets 1"),
        "{}",
        r.explanation
    );
    // Sparse offsets that never existed are no skip.
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(0, "a", 5, 11)
        .poll(1, json!({"a": 0}), json!({"a": [[0, 10]]}))
        .poll(1, json!({"a": 1}), json!({"a": [[5, 11]]}));
    valid(&b.check());
}

#[test]
fn a_listing_below_an_acknowledged_commit_is_a_note_not_an_anomaly() {
    // Maelstrom lets a fresh assign start at the committed offset "or lower": a regressed
    // listing only re-delivers, so the run has no anomaly and the regression is shown.
    // (These runs never poll, so their verdict is unknown, not valid: nothing was read.)
    let regressed = |b: &B| {
        let r = b.check();
        assert_ne!(r.valid, Validity::Invalid, "{}", r.explanation);
        assert!(r.anomaly_types.is_empty(), "{:?}", r.anomaly_types);
        assert_eq!(
            r.details["committed_offset_regressions_count"], 1,
            "{:#}",
            r.details
        );
        assert!(r
            .explanation
            .contains("1 listings returned a committed offset below"));
        assert!(r.details["committed_offset_regressions"][0]["ops"]
            .as_array()
            .is_some_and(|o| o.len() == 2));
    };
    let mut b = B::default();
    b.send(0, "a", 0, 10)
        .send(0, "a", 1, 11)
        .commit(1, json!({"a": 1}))
        .list(2, json!(["a"]), json!({"a": 0}));
    regressed(&b);
    // A key the listing omits after a commit went backwards too.
    let mut b = B::default();
    b.commit(1, json!({"a": 1}))
        .list(2, json!(["a"]), json!({}));
    regressed(&b);
    // Listings regressing count the same.
    let mut b = B::default();
    b.list(2, json!(["a"]), json!({"a": 4}))
        .list(3, json!(["a"]), json!({"a": 3}));
    regressed(&b);
    // A commit still in flight when the listing began sets no floor.
    let mut b = B::default();
    b.push(1, OpType::Invoke, "commit_offsets", None, Value::Null)
        .list(2, json!(["a"]), json!({}))
        .push(
            1,
            OpType::Ok,
            "commit_offsets",
            None,
            json!({"offsets": {"a": 1}}),
        );
    let r = b.check();
    assert!(r.anomaly_types.is_empty(), "{:?}", r.anomaly_types);
    assert_eq!(r.details["committed_offset_regressions_count"], 0);
}

#[test]
fn malformed_values_are_counted_and_leave_the_verdict_unknown() {
    let mut b = good();
    b.push(5, OpType::Invoke, "poll", None, Value::Null)
        .push(5, OpType::Ok, "poll", None, json!("garbage"))
        .push(5, OpType::Invoke, "send", Some("a"), json!(1))
        .push(5, OpType::Ok, "send", Some("a"), json!({"offset": "x"}));
    let r = b.check();
    assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
    assert!(r
        .explanation
        .contains("2 ok ops have a value not of their f's shape"));
    assert_eq!(r.details["malformed_count"], 2);
}

// ---------------------------------------------------------------- the oracle

/// One abstract op of a random history.
#[derive(Debug, Clone)]
enum Abs {
    Send {
        key: u8,
        offset: i64,
        msg: i64,
    },
    Poll {
        fin: bool,
        from: BTreeMap<u8, i64>,
        msgs: BTreeMap<u8, Vec<(i64, i64)>>,
    },
    Commit(BTreeMap<u8, i64>),
    List {
        keys: Vec<u8>,
        offsets: BTreeMap<u8, i64>,
    },
}

/// An abstract op placed in the history.
#[derive(Debug, Clone)]
struct Placed {
    process: u64,
    op: Abs,
    ok: bool,
    invoke: usize,
    complete: usize,
}

fn kname(k: u8) -> String {
    format!("k{k}")
}

fn offsets_json(m: &BTreeMap<u8, i64>) -> Value {
    Value::Object(m.iter().map(|(k, o)| (kname(*k), json!(o))).collect())
}

fn abs_op() -> impl Strategy<Value = Abs> {
    let offsets = || proptest::collection::btree_map(0u8..2, 0i64..5, 0..3);
    prop_oneof![
        4 => (0u8..2, 0i64..5, 0i64..5).prop_map(|(key, offset, msg)| Abs::Send { key, offset, msg }),
        4 => (
            proptest::bool::weighted(0.15),
            offsets(),
            proptest::collection::btree_map(0u8..2, proptest::collection::vec((0i64..5, 0i64..5), 0..4), 0..3),
        )
            .prop_map(|(fin, from, mut msgs)| {
                // Mostly in order, as a node would return them.
                for es in msgs.values_mut() {
                    if es.len() % 2 == 0 {
                        es.sort();
                    }
                }
                Abs::Poll { fin, from, msgs }
            }),
        1 => offsets().prop_map(Abs::Commit),
        1 => (proptest::collection::vec(0u8..2, 0..3), offsets())
            .prop_map(|(keys, offsets)| Abs::List { keys, offsets }),
    ]
}

/// (process, op, ok, completes after this many later invokes).
fn abs_history() -> impl Strategy<Value = Vec<(u64, Abs, bool, usize)>> {
    proptest::collection::vec(
        (0u64..3, abs_op(), proptest::bool::weighted(0.85), 0usize..3),
        0..14,
    )
}

/// Places the ops (a process never has two in flight) and builds the history.
fn build(spec: &[(u64, Abs, bool, usize)]) -> (History, Vec<Placed>) {
    let mut ops: Vec<Op> = Vec::new();
    let mut placed: Vec<Placed> = Vec::new();
    // (placed index, invokes left before it completes)
    let mut pending: Vec<(usize, usize)> = Vec::new();
    let complete = |i: usize, ops: &mut Vec<Op>, placed: &mut Vec<Placed>| {
        let p = &mut placed[i];
        p.complete = ops.len();
        let (f, key, v) = match &p.op {
            Abs::Send { key, offset, msg } => ("send", Some(kname(*key)), json!([offset, msg])),
            Abs::Poll { fin, from, msgs } => {
                let m: Map<String, Value> =
                    msgs.iter().map(|(k, es)| (kname(*k), json!(es))).collect();
                (
                    "poll",
                    None,
                    json!({"offsets": offsets_json(from), "msgs": m, "final": fin}),
                )
            }
            Abs::Commit(o) => ("commit_offsets", None, json!({"offsets": offsets_json(o)})),
            Abs::List { offsets, .. } => (
                "list_committed_offsets",
                None,
                json!({"offsets": offsets_json(offsets)}),
            ),
        };
        let t = if p.ok { OpType::Ok } else { OpType::Fail };
        let v = if p.ok { v } else { Value::Null };
        let mut op = Op::new(Process::Client(p.process), t, f, v);
        op.key = key.map(Value::String);
        ops.push(op);
    };
    for (process, op, ok, delay) in spec {
        if let Some(at) = pending
            .iter()
            .position(|(i, _)| placed[*i].process == *process)
        {
            let (i, _) = pending.remove(at);
            complete(i, &mut ops, &mut placed);
        }
        let (f, key, v) = match op {
            Abs::Send { key, msg, .. } => ("send", Some(kname(*key)), json!(msg)),
            Abs::Poll { fin, .. } => ("poll", None, json!({ "final": fin })),
            Abs::Commit(_) => ("commit_offsets", None, Value::Null),
            Abs::List { keys, .. } => (
                "list_committed_offsets",
                None,
                json!({"keys": keys.iter().map(|k| kname(*k)).collect::<Vec<_>>()}),
            ),
        };
        let mut o = Op::new(Process::Client(*process), OpType::Invoke, f, v);
        o.key = key.map(Value::String);
        placed.push(Placed {
            process: *process,
            op: op.clone(),
            ok: *ok,
            invoke: ops.len(),
            complete: 0,
        });
        ops.push(o);
        pending.push((placed.len() - 1, *delay));
        let mut still = Vec::new();
        for (i, left) in pending.drain(..) {
            if left == 0 {
                complete(i, &mut ops, &mut placed);
            } else {
                still.push((i, left - 1));
            }
        }
        pending = still;
    }
    for (i, _) in std::mem::take(&mut pending) {
        complete(i, &mut ops, &mut placed);
    }
    (History::new(ops).expect("well-formed"), placed)
}

/// Each anomaly's definition, applied to every pair of facts and ops.
fn oracle(placed: &[Placed]) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    let ok: Vec<&Placed> = placed.iter().filter(|p| p.ok).collect();
    // (key, offset, msg) from sends and polls.
    let mut facts: Vec<(u8, i64, i64)> = Vec::new();
    let mut seen: Vec<(u8, i64)> = Vec::new();
    for p in &ok {
        match &p.op {
            Abs::Send { key, offset, msg } => facts.push((*key, *offset, *msg)),
            Abs::Poll { msgs, .. } => {
                for (k, es) in msgs {
                    for (o, m) in es {
                        facts.push((*k, *o, *m));
                        seen.push((*k, *m));
                    }
                }
            }
            _ => {}
        }
    }
    for a in &facts {
        for b in &facts {
            if a.0 == b.0 && a.1 == b.1 && a.2 != b.2 {
                out.insert("inconsistent-offsets");
            }
            if a.0 == b.0 && a.2 == b.2 && a.1 != b.1 {
                out.insert("duplicate");
            }
        }
    }
    let exists = |k: u8, lo: i64, hi: i64| facts.iter().any(|f| f.0 == k && lo <= f.1 && f.1 < hi);
    // Consumers: each process's ok non-final polls and ok listings, in invoke order.
    for proc_ in 0..3u64 {
        let steps: Vec<&Placed> = ok
            .iter()
            .copied()
            .filter(|p| p.process == proc_)
            .filter(|p| matches!(p.op, Abs::Poll { fin: false, .. } | Abs::List { .. }))
            .collect();
        for (i, s) in steps.iter().enumerate() {
            let Abs::Poll { from, msgs, .. } = &s.op else {
                continue;
            };
            for (k, es) in msgs.iter().filter(|(_, es)| !es.is_empty()) {
                for w in es.windows(2) {
                    if w[1].0 <= w[0].0 {
                        out.insert("nonmonotonic-poll");
                    } else if exists(*k, w[0].0 + 1, w[1].0) {
                        out.insert("poll-skip");
                    }
                }
                let first = es[0].0;
                let prev = steps[..i].iter().rev().find(|q| match &q.op {
                    Abs::List { .. } => true,
                    Abs::Poll { msgs, .. } => msgs.get(k).is_some_and(|e| !e.is_empty()),
                    _ => false,
                });
                match prev.map(|q| &q.op) {
                    Some(Abs::Poll { msgs: qm, .. }) => {
                        let last = qm[k].last().map(|e| e.0).unwrap_or(i64::MIN);
                        if first <= last {
                            out.insert("nonmonotonic-poll");
                        } else if exists(*k, last + 1, first) {
                            out.insert("poll-skip");
                        }
                    }
                    _ => {
                        if exists(*k, from.get(k).copied().unwrap_or(first), first) {
                            out.insert("poll-skip");
                        }
                    }
                }
            }
        }
    }
    for p in &ok {
        let Abs::Send { key, offset, msg } = p.op else {
            continue;
        };
        if seen.contains(&(key, msg)) {
            continue;
        }
        let covered = ok.iter().any(|q| match &q.op {
            Abs::Poll {
                fin: true,
                from,
                msgs,
            } => from.contains_key(&key) || msgs.contains_key(&key),
            Abs::Poll {
                fin: false,
                from,
                msgs,
            } => msgs.get(&key).is_some_and(|es| {
                !es.is_empty() && {
                    let lo = from.get(&key).copied().unwrap_or(es[0].0).min(es[0].0);
                    lo <= offset && offset <= es[es.len() - 1].0
                }
            }),
            _ => false,
        });
        if covered {
            out.insert("lost-write");
        }
    }
    out
}

/// How many (listing, key) pairs returned less than a commit or listing that completed
/// before the listing began: the checker's `committed_offset_regressions_count`.
fn oracle_regressions(placed: &[Placed]) -> usize {
    let ok: Vec<&Placed> = placed.iter().filter(|p| p.ok).collect();
    let mut n = 0;
    for l in &ok {
        let Abs::List { keys, offsets } = &l.op else {
            continue;
        };
        let asked: BTreeSet<u8> = keys.iter().chain(offsets.keys()).copied().collect();
        for k in asked {
            let regressed = ok.iter().any(|c| {
                let floor = match &c.op {
                    Abs::Commit(o) | Abs::List { offsets: o, .. } => o.get(&k),
                    _ => None,
                };
                floor
                    .is_some_and(|f| c.complete < l.invoke && offsets.get(&k).is_none_or(|g| g < f))
            });
            n += usize::from(regressed);
        }
    }
    n
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn the_checker_agrees_with_the_oracle(spec in abs_history()) {
        let (h, placed) = build(&spec);
        let r = by_name("kafka").expect("kafka").check(&h);
        let want = oracle(&placed);
        let got: BTreeSet<&str> = r.anomaly_types.iter().map(String::as_str).collect();
        prop_assert_eq!(&got, &want, "{}", r.explanation);
        // Without an ok poll nothing was read back, so no verdict is earned.
        let polled = placed.iter().any(|p| p.ok && matches!(p.op, Abs::Poll { .. }));
        prop_assert_eq!(r.valid == Validity::Valid, want.is_empty() && polled);
        prop_assert_eq!(
            r.details["committed_offset_regressions_count"].as_u64(),
            Some(oracle_regressions(&placed) as u64)
        );
        // Reported in the documented order.
        let order: Vec<&str> = ANOMALIES.iter().copied().filter(|a| want.contains(a)).collect();
        prop_assert_eq!(r.anomaly_types.clone(), order);
    }
}
