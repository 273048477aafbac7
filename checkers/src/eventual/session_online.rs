//! `session-guarantees` online: read-your-writes and monotonic reads, found when the read
//! that breaks them completes.
//!
//! Both are facts about one session's own past (Terry et al. 1994, §3): a session's ops
//! run one at a time, so when its read completes, every write it had acknowledged and
//! every read it had completed before that read began are already recorded, and no later
//! op changes what the read lacked. The whole history's check walks the same ops by the
//! same positions, so it finds the same violation. Monotonic writes and
//! writes-follow-reads involve other sessions' reads of writes that may still be pending;
//! they are left to the final check, as are counters (a later negative delta anywhere on
//! the key voids the final check's counter guarantees).
//!
//! Held per session and key: the elements it wrote (and was acknowledged) and the
//! elements its reads showed, each with its completion's index; per key and element, the
//! session that first asked to write it (the final check credits an element to the first
//! ok writer in invoke order, so an element two sessions wrote is nobody's here).

use super::view::{decode_read, decode_update};
use super::EventualDataType;
use crate::history::{value_key_string, Op, OpType, Process};
use crate::verdict::{CheckResult, OnlineCheck, Validity};
use serde_json::json;
use std::collections::{HashMap, HashSet};

/// What a session's pending op asked.
#[derive(Debug)]
struct Pending {
    invoke: u64,
    /// The invoke's time (ns into the run).
    invoked_ns: u64,
    key: Option<String>,
    /// For an update: its element, and whether no other session asked to write it first.
    write: Option<(i64, bool)>,
}

/// One session's past on one key.
#[derive(Debug, Default)]
struct SessionKey {
    /// Acknowledged writes it owns: element, completion index, invoke index and time.
    writes: Vec<(i64, u64, u64, u64)>,
    /// Elements its ok reads showed, with the first such read's completion index and
    /// invoke time.
    seen: HashMap<i64, (u64, u64)>,
}

/// The online `session-guarantees` check ([`crate::Checker::online`] of
/// [`super::SessionGuaranteesChecker`], sets and bookings).
#[derive(Debug)]
pub(crate) struct OnlineSessions {
    data_type: EventualDataType,
    pending: HashMap<u64, Pending>,
    /// Per key and element: the first session that asked to write it, `None` once a
    /// second one did.
    first_writer: HashMap<(String, i64), Option<u64>>,
    sessions: HashMap<(u64, String), SessionKey>,
}

impl OnlineSessions {
    pub(crate) fn new(data_type: EventualDataType) -> Option<OnlineSessions> {
        (data_type != EventualDataType::Counter).then(|| OnlineSessions {
            data_type,
            pending: HashMap::new(),
            first_writer: HashMap::new(),
            sessions: HashMap::new(),
        })
    }

    fn is_update(&self, f: &str) -> bool {
        match self.data_type {
            EventualDataType::Booking => f == "book",
            _ => f == "add",
        }
    }

    /// The read `op` of session `s` (invoked at `invoke`), checked against the session's
    /// past on `key`, then added to it.
    fn read(&mut self, s: u64, key: String, invoke: &Pending, op: &Op) -> Option<CheckResult> {
        let (invoke, invoked_ns) = (invoke.invoke, invoke.invoked_ns);
        let value = decode_read(self.data_type, &op.value).ok()?;
        let present: HashSet<i64> = value.elements().collect();
        let past = self.sessions.entry((s, key.clone())).or_default();
        let lacked = past
            .writes
            .iter()
            .find(|&&(e, complete, _, _)| complete < invoke && !present.contains(&e));
        let found = if let Some(&(e, _, w, w_ns)) = lacked {
            Some(invalid(
                "read-your-writes",
                &key,
                format!(
                    "read-your-writes: session {s} on key {key}: read op {} lacks {e} written by the session's op {w}, acknowledged before the read began",
                    op.index
                ),
                &[w, op.index],
                (w_ns, op.time),
            ))
        } else {
            past.seen
                .iter()
                .filter(|&(e, &(at, _))| at < invoke && !present.contains(e))
                .min_by_key(|&(e, &(at, _))| (at, *e))
                .map(|(e, &(at, at_ns))| {
                    invalid(
                        "monotonic-reads",
                        &key,
                        format!(
                            "monotonic reads: session {s} on key {key}: read op {} lacks {e} which the session's earlier read op {at} reflected",
                            op.index
                        ),
                        &[at, op.index],
                        (at_ns, op.time),
                    )
                })
        };
        for e in present {
            past.seen.entry(e).or_insert((op.index, invoked_ns));
        }
        found
    }
}

/// An INVALID finding; `span`: from the earliest invocation of its ops to the breaking
/// read's completion (ns into the run), what a guided nemesis credits it by.
fn invalid(anomaly: &str, key: &str, text: String, ops: &[u64], span: (u64, u64)) -> CheckResult {
    let mut r = CheckResult::new(
        "session-guarantees",
        Validity::Invalid,
        format!("{text} (found online)"),
    );
    r.anomaly_types.push(anomaly.to_string());
    r.details = json!({"key": key, "ops": ops, "evidence-ns": [span.0, span.1]});
    r
}

fn key_of(op: &Op) -> Option<String> {
    op.key.as_ref().map(value_key_string)
}

impl OnlineCheck for OnlineSessions {
    fn push(&mut self, op: Op) -> Option<CheckResult> {
        let Process::Client(s) = op.process else {
            return None;
        };
        let update = self.is_update(&op.f);
        if !update && op.f != "read" {
            return None;
        }
        if op.op_type == OpType::Invoke {
            let key = key_of(&op);
            let write = if update {
                let element = decode_update(self.data_type, &op.value)
                    .ok()
                    .and_then(|a| a.element());
                element.map(|e| {
                    let first = self
                        .first_writer
                        .entry((key.clone().unwrap_or_default(), e))
                        .or_insert(Some(s));
                    if *first != Some(s) {
                        *first = None;
                    }
                    (e, first.is_some())
                })
            } else {
                None
            };
            self.pending.insert(
                s,
                Pending {
                    invoke: op.index,
                    invoked_ns: op.time,
                    key,
                    write,
                },
            );
            return None;
        }
        let pending = self.pending.remove(&s)?;
        if op.op_type != OpType::Ok {
            return None;
        }
        // The final check files an op under its completion's key when it names one.
        let completion_key = key_of(&op);
        if update {
            let (e, owned) = pending.write?;
            let same_key = completion_key.is_none() || completion_key == pending.key;
            if owned && same_key {
                let key = pending.key.unwrap_or_default();
                self.sessions.entry((s, key)).or_default().writes.push((
                    e,
                    op.index,
                    pending.invoke,
                    pending.invoked_ns,
                ));
            }
            return None;
        }
        let key = completion_key
            .or_else(|| pending.key.clone())
            .unwrap_or_default();
        self.read(s, key, &pending, &op)
    }

    /// No op is held: per session and key the elements written and seen, not the ops.
    fn held_ops(&self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::super::SessionGuaranteesChecker;
    use super::*;
    use crate::history::History;
    use crate::verdict::Checker;
    use proptest::prelude::*;
    use serde_json::Value;

    fn op(p: u64, t: OpType, f: &str, key: &str, value: Value) -> Op {
        let mut o = Op::new(Process::Client(p), t, f, value);
        o.key = Some(json!(key));
        o
    }

    /// Invoke and completion of `f` by process `p`.
    fn pair(p: u64, f: &str, key: &str, arg: Value, t: OpType, out: Value) -> [Op; 2] {
        [op(p, OpType::Invoke, f, key, arg), op(p, t, f, key, out)]
    }

    fn add(p: u64, key: &str, e: i64) -> [Op; 2] {
        pair(p, "add", key, json!(e), OpType::Ok, json!(e))
    }

    fn read(p: u64, key: &str, elements: &[i64]) -> [Op; 2] {
        pair(p, "read", key, Value::Null, OpType::Ok, json!(elements))
    }

    fn indexed(ops: Vec<Op>) -> Vec<Op> {
        let mut ops = ops;
        for (i, o) in ops.iter_mut().enumerate() {
            o.index = i as u64;
            o.time = (i as u64 + 1) * 1000;
        }
        ops
    }

    fn sequential(pairs: Vec<[Op; 2]>) -> Vec<Op> {
        indexed(pairs.into_iter().flatten().collect())
    }

    fn online_with(dt: EventualDataType, ops: &[Op]) -> Vec<CheckResult> {
        let mut o = SessionGuaranteesChecker::new(dt)
            .online()
            .expect("session guarantees check sets online");
        ops.iter().filter_map(|op| o.push(op.clone())).collect()
    }

    fn online(ops: &[Op]) -> Vec<CheckResult> {
        online_with(EventualDataType::Set, ops)
    }

    fn whole(ops: &[Op]) -> CheckResult {
        SessionGuaranteesChecker::new(EventualDataType::Set)
            .check(&History::new(ops.to_vec()).unwrap())
    }

    #[test]
    fn counters_are_left_to_the_final_check() {
        assert!(SessionGuaranteesChecker::new(EventualDataType::Counter)
            .online()
            .is_none());
    }

    #[test]
    fn no_observation_finds_nothing_and_the_whole_check_is_unknown() {
        assert!(online(&[]).is_empty());
        let ops = sequential(vec![add(0, "k", 1), add(1, "k", 2)]);
        assert!(online(&ops).is_empty());
        assert_eq!(whole(&ops).valid, Validity::Unknown);
    }

    #[test]
    fn garbage_is_never_invalid() {
        for junk in [
            json!("x"),
            json!({"committed": "no"}),
            json!(null),
            json!([1, "a"]),
        ] {
            let ops = sequential(vec![
                add(0, "k", 1),
                pair(0, "read", "k", Value::Null, OpType::Ok, junk.clone()),
                pair(0, "add", "k", junk.clone(), OpType::Ok, junk.clone()),
                read(0, "k", &[1]),
            ]);
            assert!(online(&ops).is_empty(), "{junk}");
            assert_ne!(whole(&ops).valid, Validity::Invalid, "{junk}");
        }
    }

    #[test]
    fn a_session_that_sees_its_past_is_valid_online_and_whole() {
        let ops = sequential(vec![
            add(0, "k", 1),
            read(0, "k", &[1]),
            read(1, "k", &[]),
            add(1, "k", 2),
            read(0, "k", &[2, 1]),
            read(1, "k", &[1, 2]),
            read(1, "other", &[]),
        ]);
        assert!(online(&ops).is_empty());
        assert_eq!(whole(&ops).valid, Validity::Valid);
    }

    #[test]
    fn a_read_missing_the_sessions_write_is_found_when_it_completes_and_confirmed_whole() {
        let ops = sequential(vec![add(0, "k", 1), read(1, "k", &[1]), read(0, "k", &[])]);
        assert!(online(&ops[..ops.len() - 1]).is_empty());
        let found = online(&ops);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].anomaly_types, ["read-your-writes"]);
        assert_eq!(found[0].details["key"], "k");
        assert_eq!(found[0].details["ops"], json!([0, 5]));
        // From the write's invoke to the read's completion.
        assert_eq!(found[0].details["evidence-ns"], json!([1000, 6000]));
        let w = whole(&ops);
        assert_eq!(w.valid, Validity::Invalid);
        assert!(w.anomaly_types.contains(&"read-your-writes".to_string()));
    }

    #[test]
    fn a_read_going_back_in_time_is_found_and_confirmed_whole() {
        let ops = sequential(vec![add(1, "k", 7), read(0, "k", &[7]), read(0, "k", &[])]);
        let found = online(&ops);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].anomaly_types, ["monotonic-reads"]);
        assert_eq!(found[0].details["ops"], json!([3, 5]));
        // From the earlier read's invoke to the later read's completion.
        assert_eq!(found[0].details["evidence-ns"], json!([3000, 6000]));
        let w = whole(&ops);
        assert!(
            w.anomaly_types.contains(&"monotonic-reads".to_string()),
            "{w:?}"
        );
    }

    #[test]
    fn a_write_still_pending_when_the_read_began_is_not_owed() {
        // The add completes after the read was invoked: the read need not show it.
        let ops = indexed(vec![
            op(0, OpType::Invoke, "add", "k", json!(1)),
            op(1, OpType::Invoke, "read", "k", Value::Null),
            op(0, OpType::Ok, "add", "k", json!(1)),
            op(1, OpType::Ok, "read", "k", json!([])),
        ]);
        assert!(online(&ops).is_empty());
        assert_eq!(whole(&ops).valid, Validity::Valid);
    }

    #[test]
    fn an_element_another_session_asked_to_write_first_is_not_the_sessions() {
        // Process 1 asked first; its add failed. The whole check credits the element to
        // the first ok writer in invoke order (process 0) — so does the online one only
        // when nobody else asked first; here it stays silent, which is allowed.
        let ops = sequential(vec![
            pair(1, "add", "k", json!(5), OpType::Fail, Value::Null),
            add(0, "k", 5),
            read(0, "k", &[]),
        ]);
        assert!(online(&ops).is_empty());
        // A second session's add of the same element after the owner's keeps ownership.
        let ops = sequential(vec![add(0, "k", 5), add(1, "k", 5), read(0, "k", &[])]);
        assert_eq!(online(&ops).len(), 1);
        assert!(whole(&ops)
            .anomaly_types
            .contains(&"read-your-writes".to_string()));
    }

    #[test]
    fn bookings_are_checked_by_reservation_id() {
        let book = |p: u64, id: i64| {
            let arg = json!({"id": id, "alternatives": [[1, 1]]});
            pair(p, "book", "k", arg.clone(), OpType::Ok, arg)
        };
        let split =
            |committed: &[i64]| json!({"committed": committed, "tentative": [], "schedule": []});
        let ops = sequential(vec![
            book(0, 3),
            pair(0, "read", "k", Value::Null, OpType::Ok, split(&[])),
        ]);
        let found = online_with(EventualDataType::Booking, &ops);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].anomaly_types, ["read-your-writes"]);
    }

    /// A small random history of sets: 3 sessions, 2 keys, elements 0..6 (some written
    /// twice), reads showing random subsets; ops interleaved, each session one at a time.
    fn history() -> impl Strategy<Value = Vec<Op>> {
        let step = (
            0u64..3,
            0usize..2,
            any::<bool>(),
            0i64..6,
            0u8..3,
            prop::collection::vec(0i64..6, 0..5),
        );
        prop::collection::vec(step, 0..14).prop_map(|steps| {
            let mut ops = Vec::new();
            let mut open: Vec<Option<Op>> = vec![None, None, None];
            for (p, k, is_read, e, outcome, shown) in steps {
                let key = ["a", "b"][k];
                if let Some(pending) = open[p as usize].take() {
                    let t = [OpType::Ok, OpType::Ok, OpType::Fail][outcome as usize];
                    let value = if pending.f == "read" {
                        json!(shown)
                    } else {
                        pending.value.clone()
                    };
                    let mut done = op(p, t, &pending.f, "", value);
                    done.key = pending.key.clone();
                    ops.push(done);
                } else {
                    let (f, arg) = if is_read {
                        ("read", Value::Null)
                    } else {
                        ("add", json!(e))
                    };
                    let invoke = op(p, OpType::Invoke, f, key, arg);
                    open[p as usize] = Some(invoke.clone());
                    ops.push(invoke);
                }
            }
            indexed(ops)
        })
    }

    proptest! {
        /// What the online check reports, the whole history's check finds too.
        #[test]
        fn online_findings_are_confirmed_by_the_whole_check(ops in history()) {
            let found = online(&ops);
            // Where no element was asked of two sessions, the online check misses no
            // read-your-writes or monotonic-reads violation the whole check finds.
            let mut askers: HashMap<(String, i64), HashSet<Process>> = HashMap::new();
            for o in ops.iter().filter(|o| o.f == "add" && o.op_type == OpType::Invoke) {
                let k = (key_of(o).unwrap_or_default(), o.value.as_i64().unwrap_or(-1));
                askers.entry(k).or_default().insert(o.process);
            }
            if askers.values().all(|a| a.len() == 1) {
                let w = whole(&ops);
                let own = ["read-your-writes", "monotonic-reads"];
                let expected = w.anomaly_types.iter().any(|t| own.contains(&t.as_str()));
                prop_assert_eq!(!found.is_empty(), expected, "{:?} {:?}", found, w);
            }
            if !found.is_empty() {
                let w = whole(&ops);
                prop_assert_eq!(w.valid, Validity::Invalid, "{:?} {:?}", found, w);
                for t in found.iter().flat_map(|f| &f.anomaly_types) {
                    prop_assert!(w.anomaly_types.contains(t), "{:?} {:?}", found, w);
                }
            }
        }
    }
}
