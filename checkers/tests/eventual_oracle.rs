//! Brute-force oracles for the set-full classification and the session guarantees: each
//! re-implements the definitions literally (quadratic, over every pair of ops) and is
//! compared with the checker on thousands of small random histories (proptest).
//!
//! Definitions: set-full as in Jepsen's `set-full` checker (see the checker's module
//! docs); session guarantees as in Terry et al., PDIS 1994, §3, per key.

use crate::eventual_support;

use eventual_support::H;
use proptest::prelude::*;
use serde_json::{json, Value};
use splitbrain_checkers::eventual::{
    ElementOutcome, EventualDataType, SessionGuaranteesChecker, SetFullChecker,
};
use splitbrain_checkers::history::{OpType, Outcome};
use splitbrain_checkers::{Checker, History};
use std::collections::{BTreeMap, BTreeSet};

const KEYS: u16 = 2;
const PROCESSES: u16 = 3;
const UNEXPECTED: i64 = 99;

/// Builds a random history from steps `(process, choice, bits)`: an idle process invokes
/// (a read, or an add of a fresh element), a busy one completes. Reads return a random
/// subset of the elements invoked so far on their key (sometimes one never added), as a
/// plain list or split into committed and tentative.
fn build(steps: &[(u16, u16, u16)]) -> H {
    let mut h = H::new();
    // Per process slot: its current id and open op (is_read, key, element).
    let mut ids: Vec<u64> = (0..PROCESSES as u64).collect();
    let mut open: Vec<Option<(bool, String, i64)>> = vec![None; PROCESSES as usize];
    let mut invoked: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut next = 0i64;
    for &(p, a, x) in steps {
        let slot = (p % PROCESSES) as usize;
        let pid = ids[slot];
        let node = format!("n{}", p.wrapping_add(a) % 2 + 1);
        match open[slot].take() {
            None => {
                let key = format!("k{}", x % KEYS);
                if a % 3 == 0 {
                    h.invoke(pid, "read", &key, Value::Null);
                    open[slot] = Some((true, key, 0));
                } else {
                    next += 1;
                    h.invoke(pid, "add", &key, json!(next));
                    invoked.entry(key.clone()).or_default().push(next);
                    open[slot] = Some((false, key, next));
                }
            }
            Some((false, key, e)) => {
                let t = match a % 6 {
                    3 => OpType::Fail,
                    4 => OpType::Info,
                    _ => OpType::Ok,
                };
                h.complete(pid, t, "add", &key, json!(e), &node);
                if t == OpType::Info {
                    ids[slot] += PROCESSES as u64;
                }
            }
            Some((true, key, _)) => {
                if a % 7 == 0 {
                    h.complete(pid, OpType::Fail, "read", &key, Value::Null, &node);
                    continue;
                }
                let all = invoked.get(&key).cloned().unwrap_or_default();
                let mut v: Vec<i64> = all
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| x & (1 << (i % 16)) != 0)
                    .map(|(_, e)| *e)
                    .collect();
                if a % 11 == 0 {
                    v.push(UNEXPECTED);
                }
                if !v.is_empty() {
                    let n = v.len();
                    v.rotate_left(a as usize % n);
                }
                let value = if a % 4 == 0 {
                    json!(v)
                } else {
                    let k = a as usize % (v.len() + 1);
                    json!({"committed": v[..k], "tentative": v[k..]})
                };
                h.complete(pid, OpType::Ok, "read", &key, value, &node);
            }
        }
    }
    h
}

/// A client op as the oracles see it.
#[derive(Debug, Clone)]
struct P {
    process: u64,
    key: String,
    read: bool,
    outcome: Outcome,
    invoke: usize,
    complete: usize,
    invoke_time: u64,
    complete_time: u64,
    /// The add's element, or the read's elements in order.
    elems: Vec<i64>,
    ordered: bool,
}

fn ops(h: &History) -> Vec<P> {
    h.pairs()
        .iter()
        .filter(|p| p.f == "add" || p.f == "read")
        .map(|p| {
            let read = p.f == "read";
            let (elems, ordered) = match (&p.value, read) {
                (v, false) => (
                    vec![p.invoke_value.as_i64().unwrap_or(v.as_i64().unwrap_or(0))],
                    false,
                ),
                (Value::Array(a), true) => (a.iter().filter_map(Value::as_i64).collect(), false),
                (Value::Object(m), true) => (
                    ["committed", "tentative"]
                        .iter()
                        .flat_map(|f| m[*f].as_array().cloned().unwrap_or_default())
                        .filter_map(|e| e.as_i64())
                        .collect(),
                    true,
                ),
                _ => (Vec::new(), false),
            };
            P {
                process: p.process,
                key: p.key_string().unwrap_or_default(),
                read,
                outcome: p.outcome,
                invoke: p.invoke_pos,
                complete: p.end_pos(),
                invoke_time: p.invoke_time,
                complete_time: p.complete_time.unwrap_or(u64::MAX),
                elems,
                ordered,
            }
        })
        .collect()
}

/// One element's classification by the definitions.
#[derive(Debug, Clone, PartialEq)]
struct Expect {
    outcome: ElementOutcome,
    stale: usize,
    first_seen: Option<usize>,
    last_seen: Option<usize>,
    latency_ns: Option<u64>,
}

/// Per (key, element) classification, unexpected (key, element)s, stale reads.
type SetFullExpected = (
    BTreeMap<(String, i64), Expect>,
    BTreeSet<(String, i64)>,
    usize,
);

/// Set-full by definition: (per (key, element), unexpected (key, element)s, stale reads).
fn set_full_oracle(h: &History) -> SetFullExpected {
    let ops = ops(h);
    let reads: Vec<&P> = ops
        .iter()
        .filter(|p| p.read && p.outcome == Outcome::Ok)
        .collect();
    let adds: Vec<&P> = ops.iter().filter(|p| !p.read).collect();
    let attempted: BTreeSet<(String, i64)> = adds
        .iter()
        .filter(|a| a.outcome != Outcome::Fail)
        .map(|a| (a.key.clone(), a.elems[0]))
        .collect();
    let mut out = BTreeMap::new();
    let mut known_of = BTreeMap::new();
    for (key, e) in &attempted {
        let rs: Vec<&&P> = reads.iter().filter(|r| &r.key == key).collect();
        let ack = adds
            .iter()
            .filter(|a| &a.key == key && a.elems[0] == *e && a.outcome == Outcome::Ok)
            .min_by_key(|a| a.complete);
        let present: Vec<&&&P> = rs.iter().filter(|r| r.elems.contains(e)).collect();
        let known = ack
            .map(|a| a.complete)
            .into_iter()
            .chain(present.iter().map(|r| r.complete))
            .min();
        known_of.insert((key.clone(), *e), known);
        let last = present.iter().map(|r| r.complete).max().or(known);
        let after: Vec<&&&P> = rs
            .iter()
            .filter(|r| last.is_some_and(|l| r.invoke > l))
            .collect();
        let lost =
            known.is_some() && !after.is_empty() && after.iter().all(|r| !r.elems.contains(e));
        let stale = rs
            .iter()
            .filter(|r| known.is_some_and(|k| r.invoke > k) && !r.elems.contains(e))
            .count();
        let last_read = rs.iter().max_by_key(|r| r.invoke);
        let stable = last_read.is_some_and(|r| r.elems.contains(e));
        let outcome = if lost {
            ElementOutcome::Lost
        } else if present.is_empty() {
            ElementOutcome::NeverRead
        } else if stable {
            ElementOutcome::Stable
        } else {
            ElementOutcome::Unstable
        };
        // The earliest read from which every read (by invoke) contains it.
        let latency_ns = match (stable, ack) {
            (true, Some(a)) => rs
                .iter()
                .filter(|r0| {
                    rs.iter()
                        .filter(|r| r.invoke >= r0.invoke)
                        .all(|r| r.elems.contains(e))
                })
                .min_by_key(|r0| r0.invoke)
                .map(|r0| r0.invoke_time.saturating_sub(a.complete_time)),
            _ => None,
        };
        out.insert(
            (key.clone(), *e),
            Expect {
                outcome,
                stale,
                first_seen: present.iter().map(|r| r.complete).min(),
                last_seen: present.iter().map(|r| r.complete).max(),
                latency_ns,
            },
        );
    }
    let unexpected: BTreeSet<(String, i64)> = reads
        .iter()
        .flat_map(|r| r.elems.iter().map(|e| (r.key.clone(), *e)))
        .filter(|ke| !attempted.contains(ke))
        .collect();
    let stale_reads = reads
        .iter()
        .filter(|r| {
            attempted.iter().any(|(k, e)| {
                k == &r.key
                    && known_of[&(k.clone(), *e)].is_some_and(|kn| r.invoke > kn)
                    && !r.elems.contains(e)
            })
        })
        .count();
    (out, unexpected, stale_reads)
}

/// Violating reads per guarantee (RYW, MR, MW, WFR), by definition.
fn session_oracle(h: &History) -> [usize; 4] {
    let ops = ops(h);
    let reads: Vec<&P> = ops
        .iter()
        .filter(|p| p.read && p.outcome == Outcome::Ok)
        .collect();
    let writes: Vec<&P> = ops
        .iter()
        .filter(|p| !p.read && p.outcome == Outcome::Ok)
        .collect();
    let pos = |r: &P, e: i64| r.elems.iter().position(|x| *x == e);
    let mut counts = [0; 4];
    for r in &reads {
        let has = |e: i64| r.elems.contains(&e);
        let same_key = |o: &&&P| o.key == r.key;
        let ryw = writes
            .iter()
            .filter(same_key)
            .any(|w| w.process == r.process && w.complete < r.invoke && !has(w.elems[0]));
        let mr = reads.iter().filter(same_key).any(|r1| {
            r1.process == r.process && r1.complete < r.invoke && r1.elems.iter().any(|e| !has(*e))
        });
        // w1 must be reflected, and ordered first, wherever w2 is.
        let follows =
            |w1: i64, w2: i64| has(w2) && (!has(w1) || (r.ordered && pos(r, w1) > pos(r, w2)));
        let mw = writes.iter().filter(same_key).any(|w1| {
            writes.iter().filter(same_key).any(|w2| {
                w1.process == w2.process
                    && w1.complete < w2.invoke
                    && follows(w1.elems[0], w2.elems[0])
            })
        });
        let wfr = reads.iter().filter(same_key).any(|r1| {
            writes.iter().filter(same_key).any(|w2| {
                r1.process == w2.process
                    && r1.complete < w2.invoke
                    && r1.elems.iter().any(|e| follows(*e, w2.elems[0]))
            })
        });
        for (i, v) in [ryw, mr, mw, wfr].into_iter().enumerate() {
            counts[i] += usize::from(v);
        }
    }
    counts
}

fn steps() -> impl Strategy<Value = Vec<(u16, u16, u16)>> {
    prop::collection::vec((0..PROCESSES, any::<u16>(), any::<u16>()), 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn set_full_matches_the_definitions(steps in steps()) {
        let built = build(&steps);
        let h = built.history();
        // The JSON Lines path (values read from the text) agrees with the in-memory one.
        prop_assert_eq!(SetFullChecker.analyse(&built.text_history()), SetFullChecker.analyse(&h));
        let (expected, unexpected, stale_reads) = set_full_oracle(&h);
        let a = SetFullChecker.analyse(&h);
        let got: BTreeMap<(String, i64), Expect> = a
            .elements
            .iter()
            .map(|e| {
                ((e.key.clone(), e.element), Expect {
                    outcome: e.outcome,
                    stale: e.stale_reads,
                    first_seen: e.first_seen_index.map(|i| i as usize),
                    last_seen: e.last_seen_index.map(|i| i as usize),
                    latency_ns: e.stable_latency_ms.map(|m| (m * 1e6).round() as u64),
                })
            })
            .collect();
        prop_assert_eq!(got, expected);
        let got_unexpected: BTreeSet<(String, i64)> =
            a.unexpected.iter().map(|u| (u.key.clone(), u.element)).collect();
        prop_assert_eq!(got_unexpected, unexpected);
        prop_assert_eq!(a.stale_reads, stale_reads);
        let r = SetFullChecker.check(&h);
        let invalid = a.elements.iter().any(|e| e.outcome == ElementOutcome::Lost) || !a.unexpected.is_empty();
        prop_assert_eq!(r.valid == splitbrain_checkers::Validity::Invalid, invalid);
    }

    #[test]
    fn session_guarantees_match_the_definitions(steps in steps()) {
        let built = build(&steps);
        let h = built.history();
        let checker = SessionGuaranteesChecker::new(EventualDataType::Set);
        prop_assert_eq!(checker.check(&built.text_history()), checker.check(&h));
        let expected = session_oracle(&h);
        // Bit sets (the default) and counting (no room for bit sets) alike.
        for limit in [usize::MAX, 0] {
            let checker = SessionGuaranteesChecker::new(EventualDataType::Set).with_follow_set_limit(limit);
            let r = checker.check(&h);
            let v = &r.details["violations"];
            let got = [
                v["read-your-writes"].as_u64().unwrap_or(u64::MAX) as usize,
                v["monotonic-reads"].as_u64().unwrap_or(u64::MAX) as usize,
                v["monotonic-writes"].as_u64().unwrap_or(u64::MAX) as usize,
                v["writes-follow-reads"].as_u64().unwrap_or(u64::MAX) as usize,
            ];
            prop_assert_eq!(got, expected, "limit {}: {}", limit, r.explanation);
        }
    }
}

#[test]
fn the_random_histories_exercise_every_classification() {
    // Guards the oracle tests against a generator that never produces the interesting cases.
    let mut seen_outcomes = BTreeSet::new();
    let mut guarantees = [0usize; 4];
    let mut rng_state = 7u64;
    let mut next = || {
        rng_state = rng_state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng_state >> 33) as u16
    };
    for _ in 0..300 {
        let steps: Vec<(u16, u16, u16)> = (0..30)
            .map(|_| (next() % PROCESSES, next(), next()))
            .collect();
        let h = build(&steps).history();
        for e in SetFullChecker.analyse(&h).elements {
            seen_outcomes.insert(format!("{:?}", e.outcome));
        }
        for (g, n) in guarantees.iter_mut().zip(session_oracle(&h)) {
            *g += n;
        }
    }
    assert_eq!(seen_outcomes.len(), 4, "{seen_outcomes:?}");
    assert!(guarantees.iter().all(|&n| n > 0), "{guarantees:?}");
}
