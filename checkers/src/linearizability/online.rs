//! Linearizability decided while the history is recorded ([`crate::OnlineCheck`]): key by
//! key, one segment at a time, holding only what is undecided.
//!
//! A key's *quiet point* is a moment at which none of its ops is pending. Its ops between
//! two quiet points form a segment. Every op of a later segment was invoked after every
//! op of an earlier one completed, so a linearization of the whole history orders the
//! segments' `ok` ops segment by segment. What a decided segment leaves behind is
//! summarised as:
//!
//! - the set of states the key may be in at its quiet point: the end state of every order
//!   of the segment's ops, consistent with real time, in which every result is explained,
//!   started from any state of the previous summary;
//! - its *floating* ops: those whose outcome is unknown (`info`; they may take effect at
//!   any later moment, or never). Every later segment may apply each of them anywhere,
//!   without regard to whether an earlier segment already did (with a model of few states,
//!   [`super::Model::small_state_space`], any number of times).
//!
//! Both over-approximate: the summary holds every state a linearization of the whole
//! history can be in there, and a segment is searched with more freedom than the whole
//! history gives. So a segment that no order explains is not explained in the whole
//! history either: an INVALID here is one the final check finds too. Nothing here ever
//! says valid. A decided segment's ops are dropped; a key whose segment grows past
//! [`MAX_SEGMENT`] ops, whose summary grows past its bounds, or whose search exceeds
//! [`MAX_CONFIGS`] configurations is given up (left to the final check).

use super::fxhash::{FxHashMap, FxHashSet};
use super::init::{InitFromJson, WithInit};
use super::model::{Completion, Model};
use super::models::PerKey;
use crate::history::{value_key_string, Op, OpPair, OpType, Outcome, Process};
use crate::verdict::{CheckResult, OnlineCheck, Validity};
use serde_json::{json, Value};

/// The most ops (one-shot floating ones included) a segment may have before its key is
/// given up: the search's configurations are sets of them.
pub const MAX_SEGMENT: usize = 128;

/// The most configurations one segment's search may visit before its key is given up.
pub const MAX_CONFIGS: usize = 200_000;

/// The most states a key's summary may hold, and the most floating ops it may carry
/// (one-shot ones count against [`MAX_SEGMENT`] too).
const MAX_STATES: usize = 4096;
const MAX_FLOATING: usize = 64;

/// An op of the current segment: where its interval starts and ends (history indices;
/// `u64::MAX` for an unknown outcome), whether it surely took effect, and the model's op
/// (`None` while it is pending, or when the model ignores it).
struct SegOp<O> {
    invoke: u64,
    end: u64,
    /// The history's clock (ns) at its invocation and at its completion (0 until then):
    /// a failing segment reports the span of its ops as its evidence.
    invoke_time: u64,
    end_time: u64,
    required: bool,
    op: Option<O>,
}

/// What is kept of one key.
struct KeyState<M: Model> {
    /// The key as the history has it, for the report.
    key: Option<Value>,
    /// States the key may be in at its last quiet point.
    states: Vec<M::State>,
    /// Ops of decided segments whose outcome is unknown.
    floating: Vec<M::Op>,
    /// The ops since the last quiet point.
    segment: Vec<SegOp<M::Op>>,
    /// Of those, how many are pending.
    open: usize,
    /// When the last decided segment with an op that surely took effect began (the
    /// history's clock, ns): the key was last seen consistent there, so a failing segment's
    /// evidence starts there (what it contradicts, a lost write, lies between).
    last_from: Option<u64>,
}

/// An invoke waiting for its completion.
struct Open {
    group: Option<String>,
    slot: usize,
    invoke: Op,
}

/// [`OnlineCheck`] for any model: split by key, or (`PerKey`) one group for all.
pub(crate) struct Segments<M: Model> {
    model: M,
    split: bool,
    keys: FxHashMap<Option<String>, KeyState<M>>,
    /// Keys given up, and keys found invalid: their ops are not held.
    given_up: FxHashSet<Option<String>>,
    open: FxHashMap<u64, Open>,
    /// An op the model could not read: the final check will say unknown, so nothing more
    /// is reported.
    broken: bool,
}

impl<M: Model> Segments<M> {
    pub(crate) fn new(model: M, split: bool) -> Segments<M> {
        Segments {
            model,
            split,
            keys: FxHashMap::default(),
            given_up: FxHashSet::default(),
            open: FxHashMap::default(),
            broken: false,
        }
    }

    fn give_up(&mut self, group: &Option<String>) {
        self.keys.remove(group);
        self.given_up.insert(group.clone());
    }

    /// Decides the segment of `group`, which has just become quiet: `Some` result when no
    /// order explains it.
    fn decide(&mut self, group: &Option<String>) -> Option<CheckResult> {
        let small = self.model.small_state_space();
        let k = self.keys.get_mut(group)?;
        let segment = std::mem::take(&mut k.segment);
        // The search's ops: one-shot floating ops first (invoked before everything).
        let mut ops: Vec<(u64, u64, bool, &M::Op)> = Vec::new();
        if !small {
            ops.extend(k.floating.iter().map(|o| (0, u64::MAX, false, o)));
        }
        ops.extend(
            segment
                .iter()
                .filter_map(|s| s.op.as_ref().map(|o| (s.invoke, s.end, s.required, o))),
        );
        let reusable: &[M::Op] = if small { &k.floating } else { &[] };
        let new_floating: Vec<M::Op> = segment
            .iter()
            .filter(|s| !s.required)
            .filter_map(|s| s.op.clone())
            .collect();
        let outcome = if ops.iter().any(|o| o.2) {
            if ops.len() > MAX_SEGMENT {
                None
            } else {
                end_states(&self.model, &k.states, &ops, reusable)
            }
        } else {
            // Nothing surely happened: the states stay, what may have happened floats.
            Some(k.states.clone())
        };
        let Some(states) = outcome else {
            self.give_up(group);
            return None;
        };
        if states.is_empty() {
            let key = k.key.clone();
            let n = segment.iter().filter(|s| s.op.is_some()).count();
            // The evidence: from the start of the key's last decided segment (where it was
            // last seen consistent) to the failing segment's last completion.
            let from = segment
                .iter()
                .map(|s| s.invoke_time)
                .chain(k.last_from)
                .min();
            let to = segment.iter().map(|s| s.end_time).max();
            self.give_up(group);
            let shown = key.as_ref().map_or("the history".to_string(), |v| {
                format!(
                    "key {}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            });
            let mut r = CheckResult::new(
                "linearizable",
                Validity::Invalid,
                format!(
                    "{shown}: no order of its {n} ops since it was last quiet explains their results, from any state it could be in then"
                ),
            );
            r.details = json!({ "key": key, "online": true, "evidence-ns": [from, to] });
            return Some(r);
        }
        k.states = states;
        if segment.iter().any(|s| s.required) {
            k.last_from = segment.iter().map(|s| s.invoke_time).min();
        }
        for o in new_floating {
            if !(small && k.floating.contains(&o)) {
                k.floating.push(o);
            }
        }
        if k.states.len() > MAX_STATES || k.floating.len() > MAX_FLOATING {
            self.give_up(group);
        }
        None
    }
}

/// Every state an order of `ops` (invoke, end, required, op; sorted by invoke) consistent
/// with real time ends in once each required op has taken effect, started from any of
/// `starts`; each of `reusable` may be applied anywhere, any number of times. `None` when
/// the search grows past [`MAX_CONFIGS`].
fn end_states<M: Model>(
    model: &M,
    starts: &[M::State],
    ops: &[(u64, u64, bool, &M::Op)],
    reusable: &[M::Op],
) -> Option<Vec<M::State>> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| ops[i].0);
    let ops: Vec<(u64, u64, bool, &M::Op)> = order.iter().map(|&i| ops[i]).collect();
    let required: u128 = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.2)
        .fold(0, |m, (i, _)| m | 1u128 << i);
    let mut seen: FxHashSet<(u128, M::State)> = FxHashSet::default();
    let mut stack: Vec<(u128, M::State)> = Vec::new();
    for s in starts {
        if seen.insert((0, s.clone())) {
            stack.push((0, s.clone()));
        }
    }
    let mut ends: FxHashSet<M::State> = FxHashSet::default();
    while let Some((done, state)) = stack.pop() {
        if done & required == required {
            ends.insert(state);
            continue;
        }
        // The next op may be any not yet placed that was invoked before the first
        // completion among the required ops not yet placed.
        let first_end = ops
            .iter()
            .enumerate()
            .filter(|(i, o)| o.2 && done & (1u128 << i) == 0)
            .map(|(_, o)| o.1)
            .min()
            .unwrap_or(u64::MAX);
        let mut next: Vec<(u128, M::State)> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            if o.0 >= first_end {
                break;
            }
            if done & (1u128 << i) != 0 {
                continue;
            }
            if let Some(s) = model.step(&state, o.3) {
                next.push((done | 1u128 << i, s));
            }
        }
        for f in reusable {
            if let Some(s) = model.step(&state, f) {
                next.push((done, s));
            }
        }
        for n in next {
            if seen.len() >= MAX_CONFIGS {
                return None;
            }
            if !seen.contains(&n) {
                seen.insert(n.clone());
                stack.push(n);
            }
        }
    }
    Some(ends.into_iter().collect())
}

impl<M: Model + 'static> OnlineCheck for Segments<M> {
    fn push(&mut self, op: Op) -> Option<CheckResult> {
        let Process::Client(p) = op.process else {
            return None;
        };
        if self.broken {
            return None;
        }
        if op.op_type == OpType::Invoke {
            let group = match (&op.key, self.split) {
                (Some(k), true) => Some(value_key_string(k)),
                _ => None,
            };
            if self.given_up.contains(&group) {
                // Its completion is ignored too (no open invoke).
                return None;
            }
            let initial = &self.model;
            let k = self.keys.entry(group.clone()).or_insert_with(|| KeyState {
                key: if self.split { op.key.clone() } else { None },
                states: vec![initial.init()],
                floating: Vec::new(),
                segment: Vec::new(),
                open: 0,
                last_from: None,
            });
            k.segment.push(SegOp {
                invoke: op.index,
                end: u64::MAX,
                invoke_time: op.time,
                end_time: 0,
                required: false,
                op: None,
            });
            k.open += 1;
            let slot = k.segment.len() - 1;
            let too_long = k.segment.len() > MAX_SEGMENT;
            self.open.insert(
                p,
                Open {
                    group: group.clone(),
                    slot,
                    invoke: op,
                },
            );
            if too_long {
                self.give_up(&group);
            }
            return None;
        }
        let open = self.open.remove(&p)?;
        if self.given_up.contains(&open.group) {
            return None;
        }
        let outcome = match op.op_type {
            OpType::Ok => Outcome::Ok,
            OpType::Fail => Outcome::Fail,
            _ => Outcome::Info,
        };
        let inv = &open.invoke;
        let pair = OpPair {
            process: p,
            f: inv.f.clone(),
            key: inv.key.clone().or_else(|| op.key.clone()),
            invoke_value: inv.value.clone(),
            value: if outcome == Outcome::Ok {
                op.value.clone()
            } else {
                inv.value.clone()
            },
            outcome,
            invoke_pos: inv.index as usize,
            complete_pos: Some(op.index as usize),
            invoke_time: inv.time,
            complete_time: Some(op.time),
            node: op.node.clone().or_else(|| inv.node.clone()),
            error: op.error.clone(),
        };
        let completion = match outcome {
            Outcome::Ok => Completion::Ok,
            Outcome::Fail => Completion::Failed,
            _ => Completion::Unknown,
        };
        let translated = match self.model.op(&pair, completion) {
            Ok(t) => t,
            Err(_) => {
                self.broken = true;
                self.keys.clear();
                self.open.clear();
                return None;
            }
        };
        let k = self.keys.get_mut(&open.group)?;
        if let Some(s) = k.segment.get_mut(open.slot) {
            s.required = completion != Completion::Unknown;
            s.end = if s.required { op.index } else { u64::MAX };
            s.end_time = op.time;
            s.op = translated;
        }
        k.open = k.open.saturating_sub(1);
        if k.open == 0 {
            return self.decide(&open.group);
        }
        None
    }

    fn held_ops(&self) -> usize {
        self.keys.values().map(|k| k.segment.len()).sum()
    }
}

/// The online checker of `model`, started at `init` when given (validated before).
pub(crate) fn online_with<M: InitFromJson + 'static>(
    model: M,
    init: Option<&Value>,
    split: bool,
) -> Result<Box<dyn OnlineCheck>, String> {
    let init = match init {
        Some(v) => model.state_from_json(v)?,
        None => model.init(),
    };
    let model = WithInit { model, init };
    Ok(if split {
        Box::new(Segments::new(model, true))
    } else {
        Box::new(Segments::new(PerKey(model), false))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::models::RegisterModel;
    use crate::linearizability::FailedCas;

    fn register() -> Box<dyn OnlineCheck> {
        let m = RegisterModel {
            cas: true,
            failed_cas: FailedCas::Jepsen,
        };
        online_with(m, None, true).unwrap()
    }

    type Step<'a> = (u64, OpType, &'a str, i64, Value);

    /// Feeds `ops`, numbered from `from`.
    fn feed(c: &mut dyn OnlineCheck, from: u64, ops: Vec<Step>) -> Vec<CheckResult> {
        let mut found = Vec::new();
        for (i, (p, t, f, k, v)) in ops.into_iter().enumerate() {
            let mut o = Op::new(Process::Client(p), t, f, v);
            o.key = Some(json!(k));
            o.index = from + i as u64;
            o.time = o.index;
            found.extend(c.push(o));
        }
        found
    }

    #[test]
    fn decided_segments_are_dropped_and_an_info_write_keeps_floating() {
        use OpType::*;
        let mut c = register();
        let found = feed(
            c.as_mut(),
            0,
            vec![
                (0, Invoke, "write", 1, json!(1)),
                (1, Invoke, "write", 1, json!(2)),
                (0, Ok, "write", 1, json!(1)),
                (1, Info, "write", 1, json!(2)),
                // Quiet: the key may hold 1, and 2 may still land at any time.
                (2, Invoke, "read", 1, json!(null)),
                (2, Ok, "read", 1, json!(1)),
                (2, Invoke, "read", 1, json!(null)),
                (2, Ok, "read", 1, json!(2)),
                (2, Invoke, "read", 1, json!(null)),
                (2, Ok, "read", 1, json!(2)),
            ],
        );
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(c.held_ops(), 0);
        // Never written: 3 is no state the key can be in.
        let found = feed(
            c.as_mut(),
            10,
            vec![
                (9, Invoke, "write", 2, json!(0)),
                (9, Ok, "write", 2, json!(0)),
                (2, Invoke, "read", 1, json!(null)),
                (2, Ok, "read", 1, json!(3)),
            ],
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].details["key"], json!(1));
        assert_eq!(found[0].valid, Validity::Invalid);
        // The evidence: from the key's last decided segment (the read of 2 at 8) to the
        // failing one (the read of 3, done at 13; times = indices).
        assert_eq!(found[0].details["evidence-ns"], json!([8, 13]));
    }
}
