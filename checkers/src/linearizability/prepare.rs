//! Turns a history into parts for the search: model ops, required/optional, keys, pruning.

use super::fxhash::FxHashMap;
use super::model::{Completion, Model};
use super::search::{Part, PartOp};
use crate::history::{History, OpPair, Outcome};

/// A client op the model rejected.
#[derive(Debug, Clone)]
pub(crate) struct BadOp {
    pub pair: usize,
    pub reason: String,
}

/// One translated pair: its key (when split), its place in the part and the model's op;
/// `None` for a pair the model ignores.
type Translated<Op> = Result<Option<(Option<String>, PartOp, Op)>, BadOp>;

/// Splits the history into parts (by key when `split`), translating each op with the
/// model and dropping ops that cannot matter.
pub(crate) fn prepare<M: Model>(
    model: &M,
    history: &History,
    split: bool,
) -> Result<Vec<Part<M::Op>>, BadOp> {
    use rayon::prelude::*;
    // Ops are translated one pair at a time, in parallel, from the history's text when it
    // has one: the whole history's values are never held at once. A chunk at a time, so
    // the translated ops (and their key strings) of the whole history never are either:
    // each chunk is sorted into its key's group, its model ops interned there (a part
    // holds each distinct model op once), before the next is translated.
    let slots = history.pair_slots();
    let mut group_of: FxHashMap<Option<String>, usize> = FxHashMap::default();
    let mut groups: Vec<Group<M::Op>> = Vec::new();
    let translate_chunk = |start: usize| -> Vec<Translated<M::Op>> {
        let end = slots.len().min(start + PREPARE_CHUNK);
        (start..end)
            .into_par_iter()
            .with_min_len(1024)
            .map_init(String::new, |name, i| {
                translate(model, history, split, i, name)
            })
            .collect()
    };
    // One chunk is sorted into its groups while the next is translated, so the sorting
    // (one thread's work) never leaves the other core idle.
    let starts: Vec<usize> = (0..slots.len()).step_by(PREPARE_CHUNK).collect();
    let mut pending = starts.first().map(|&start| translate_chunk(start));
    for (k, &start) in starts.iter().enumerate() {
        let translated = pending.take().unwrap_or_default();
        let following = starts.get(k + 1).copied();
        let (grouped, next) = rayon::join(
            || group_chunk(translated, &mut group_of, &mut groups),
            || following.map(translate_chunk),
        );
        grouped?;
        pending = next;
        if k == 0 && starts.len() > 1 {
            // Each key's ops will likely come at the rate of the first chunk: room for
            // them now, not by doubling (each doubling copies the key's ops so far).
            // Capacity never touched costs address space, not memory.
            for g in &mut groups {
                g.ops.reserve(g.ops.len() * starts.len() / 8 * 9);
            }
        }
        // Later pairs are invoked at or after the next slot's invoke: a mapped history
        // hands back the pages before it (re-reading one later stays correct).
        if let Some(next) = slots.get(start + PREPARE_CHUNK) {
            history.release_before(next.invoke_pos);
        }
    }
    drop(group_of);
    for g in &mut groups {
        g.ids = FxHashMap::default();
    }
    // Parts in key order, as before (the report names the smallest invalid key).
    groups.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(groups.into_par_iter().map(|g| finish(model, g)).collect())
}

/// Sorts one chunk's translated pairs, in history order, into their keys' groups; the
/// first pair the model rejected stops it.
fn group_chunk<Op: Clone + Eq + std::hash::Hash>(
    translated: Vec<Translated<Op>>,
    group_of: &mut FxHashMap<Option<String>, usize>,
    groups: &mut Vec<Group<Op>>,
) -> Result<(), BadOp> {
    for t in translated {
        if let Some((key, part_op, op)) = t? {
            let g = match group_of.get(&key) {
                Some(&g) => g,
                None => {
                    groups.push(Group::new(key.clone()));
                    group_of.insert(key, groups.len() - 1);
                    groups.len() - 1
                }
            };
            groups[g].push(part_op, op);
        }
    }
    Ok(())
}

/// A key's ops, in history order, their model ops interned as they come.
struct Group<Op> {
    key: Option<String>,
    ids: FxHashMap<Op, u32>,
    values: Vec<Op>,
    ops: Vec<PartOp>,
}

impl<Op: Clone + Eq + std::hash::Hash> Group<Op> {
    fn new(key: Option<String>) -> Group<Op> {
        Group {
            key,
            ids: FxHashMap::default(),
            values: Vec::new(),
            ops: Vec::new(),
        }
    }

    fn push(&mut self, mut part_op: PartOp, op: Op) {
        part_op.op = match self.ids.get(&op) {
            Some(&id) => id,
            None => {
                let id = self.values.len() as u32;
                self.values.push(op.clone());
                self.ids.insert(op, id);
                id
            }
        };
        self.ops.push(part_op);
    }
}

/// Pairs translated at a time by [`prepare`] (a few in unit tests, so small histories
/// take several chunks and hand back their text as they go).
const PREPARE_CHUNK: usize = if cfg!(test) { 1 << 8 } else { 1 << 16 };

/// Translates pair `i` with the model. `name` is a buffer for the op's name, handed from
/// pair to pair (one allocation a thread, not one a pair).
fn translate<M: Model>(
    model: &M,
    history: &History,
    split: bool,
    i: usize,
    name: &mut String,
) -> Translated<M::Op> {
    let Some(mut pair) = model_pair(history, i, std::mem::take(name)) else {
        return Ok(None);
    };
    let result = translate_pair(model, &mut pair, split, i);
    *name = std::mem::take(&mut pair.f);
    result
}

fn translate_pair<M: Model>(
    model: &M,
    pair: &mut OpPair,
    split: bool,
    i: usize,
) -> Translated<M::Op> {
    let completion = match pair.outcome {
        Outcome::Ok => Completion::Ok,
        Outcome::Fail => Completion::Failed,
        Outcome::Info | Outcome::Pending => Completion::Unknown,
    };
    let op = model
        .op(pair, completion)
        .map_err(|reason| BadOp { pair: i, reason })?;
    let Some(op) = op else { return Ok(None) };
    let required = completion != Completion::Unknown;
    let part_op = PartOp {
        pair: i,
        op: 0,
        required,
        invoke: pair.invoke_pos,
        end: if required { pair.end_pos() } else { usize::MAX },
    };
    // The key moved out of the pair, not copied (a string key is the key string itself).
    let key = match (split, pair.key.take()) {
        (true, Some(serde_json::Value::String(s))) => Some(s),
        (true, Some(other)) => Some(crate::history::value_key_string(&other)),
        _ => None,
    };
    Ok(Some((key, part_op, op)))
}

/// Pair `i` with what a [`Model::op`] reads (name, key, invoke value, effective value,
/// outcome, positions and times), its `node` and `error` left out. Unlike
/// [`History::pair`], a history not materialized parses no line whole: its name and times
/// come from the ops' heads, its key and values from their own text as the reader
/// recorded it (the completion's value only for an `ok`, its key only when the invoke has
/// none), so preparing a big file reads each op's line once, when the file is read.
/// `f` is a buffer for the name (cleared first).
fn model_pair(history: &History, i: usize, mut f: String) -> Option<OpPair> {
    let slot = history.pair_slots().get(i)?;
    let inv = slot.invoke_pos;
    f.clear();
    f.push_str(history.op_f(inv)?);
    let invoke_time = history.op_time(inv)?;
    let invoke_value = history.op_value(inv)?.into_owned();
    let done_pos = slot.complete_pos.filter(|&c| history.op_time(c).is_some());
    let value = match (slot.outcome, done_pos) {
        (Outcome::Ok, Some(c)) => history.op_value(c)?.into_owned(),
        _ => invoke_value.clone(),
    };
    let key = history
        .op_key(inv)
        .or_else(|| done_pos.and_then(|c| history.op_key(c)));
    Some(OpPair {
        process: slot.process,
        f,
        key,
        invoke_value,
        value,
        outcome: slot.outcome,
        invoke_pos: inv,
        complete_pos: slot.complete_pos,
        invoke_time,
        complete_time: done_pos.and_then(|c| history.op_time(c)),
        node: None,
        error: None,
    })
}

/// Drops optional ops that cannot change the verdict.
///
/// Generic rule: an optional op invoked after every required op completed can be left out
/// (placing it "never" is always allowed and nothing after it needs to be explained).
/// Model rule: whatever [`Model::prunable`] proves unobserved.
fn prune<M: Model>(model: &M, ops: Vec<PartOp>, values: &[M::Op]) -> Vec<PartOp> {
    let last_required_end = ops.iter().filter(|p| p.required).map(|p| p.end).max();
    let ops: Vec<PartOp> = ops
        .into_iter()
        .filter(|p| p.required || last_required_end.is_some_and(|e| p.invoke < e))
        .collect();
    let value = |p: &PartOp| &values[p.op as usize];
    let required: Vec<&M::Op> = ops.iter().filter(|p| p.required).map(value).collect();
    let optional: Vec<&M::Op> = ops.iter().filter(|p| !p.required).map(value).collect();
    if optional.is_empty() {
        return ops;
    }
    let drop = model.prunable(&required, &optional);
    let mut k = 0;
    ops.into_iter()
        .filter(|p| {
            if p.required {
                return true;
            }
            k += 1;
            !drop.get(k - 1).copied().unwrap_or(false)
        })
        .collect()
}

/// The group's part: pruned, its model ops numbered by first use among the ops kept
/// (the ops of pruned pairs only are dropped), ops in invoke order.
fn finish<M: Model>(model: &M, g: Group<M::Op>) -> Part<M::Op> {
    let Group {
        key, values, ops, ..
    } = g;
    let mut part_ops = prune(model, ops, &values);
    let mut renumber = vec![u32::MAX; values.len()];
    let mut order: Vec<u32> = Vec::new();
    for p in &mut part_ops {
        let old = p.op as usize;
        if renumber[old] == u32::MAX {
            renumber[old] = order.len() as u32;
            order.push(p.op);
        }
        p.op = renumber[old];
    }
    let mut slots: Vec<Option<M::Op>> = values.into_iter().map(Some).collect();
    let values = order
        .iter()
        .filter_map(|&old| slots[old as usize].take())
        .collect();
    part_ops.sort_by_key(|p| p.invoke);
    Part::new(key, part_ops, values)
}

#[cfg(test)]
mod tests {
    use crate::history::read::read_path_mapping;
    use crate::linearizability::{
        generate_keyed_cas_history, write_keyed_cas_history, LinearizabilityChecker,
        LinearizabilityOptions,
    };
    use crate::{Checker, Validity};

    /// The pair the model reads equals the history's own pair (but for `node` and
    /// `error`, which no model reads) for every pair: of a history in memory, of one read
    /// lazily from text, and of one mapped from its file; with keys on the invoke only, on
    /// the completion only, ok/fail/info/pending outcomes, and nemesis ops between.
    #[test]
    fn the_model_pair_is_the_history_pair() {
        use crate::history::read::read_str;
        let text = [
            r#"{"process":1,"type":"invoke","f":"write","key":"a","value":3,"time":10}"#,
            r#"{"process":2,"type":"invoke","f":"cas","value":[3,4],"time":11}"#,
            r#"{"process":"nemesis","type":"info","f":"start","value":{"n":[1,2]}}"#,
            r#"{"process":1,"type":"ok","f":"write","key":"a","value":3,"node":"n1","time":12}"#,
            r#"{"process":2,"type":"fail","f":"cas","key":"b","value":[3,4],"error":"no","time":13}"#,
            r#"{"process":3,"type":"invoke","f":"read","key":7,"value":null,"time":14}"#,
            r#"{"process":4,"type":"invoke","f":"read","time":15}"#,
            r#"{"process":3,"type":"ok","f":"read","key":7,"value":5,"time":16}"#,
            r#"{"process":4,"type":"ok","f":"read","key":["x",1],"value":[1,2],"time":17}"#,
            r#"{"process":5,"type":"invoke","f":"write","key":"a","value":9,"time":18}"#,
            r#"{"process":6,"type":"invoke","f":"write","value":8,"time":19}"#,
            r#"{"process":5,"type":"info","f":"write","key":"a","error":"timeout","time":20}"#,
            r#"{"process":7,"type":"invoke","f":"write","key":"c","value":1,"time":21}"#,
        ]
        .join("\n");
        let dir = std::env::temp_dir().join(format!("sb-model-pair-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("h.jsonl");
        std::fs::write(&path, &text).unwrap();
        let generated = dir.join("g.jsonl");
        write_keyed_cas_history(&generated, 5, 4_000, 5, 9, 0.2, true).unwrap();
        let histories = [
            read_str(&text, &path, None).unwrap(),
            read_path_mapping(&path, 0).unwrap(),
            read_path_mapping(&generated, 0).unwrap(),
            generate_keyed_cas_history(5, 4_000, 5, 9, 0.2, true),
        ];
        for (h, history) in histories.iter().enumerate() {
            let n = history.pair_slots().len();
            assert!(n > 5, "history {h} has pairs");
            for i in 0..n {
                let mut want = history.pair(i).unwrap().into_owned();
                want.node = None;
                want.error = None;
                assert_eq!(
                    super::model_pair(history, i, "stale".to_string()),
                    Some(want),
                    "history {h} pair {i}"
                );
            }
            assert_eq!(super::model_pair(history, n, String::new()), None);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A history mapped from its file (text handed back chunk by chunk as the parts are
    /// prepared, ops read by the fast path) checks exactly as the same history in memory.
    #[test]
    fn a_mapped_history_checks_as_the_same_history_in_memory() {
        let dir = std::env::temp_dir().join(format!("sb-prepare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let checker =
            LinearizabilityChecker::new("cas-register", LinearizabilityOptions::default()).unwrap();
        let mut invalid = 0;
        for (seed, info, corrupt) in [
            (1, 0.05, false),
            (2, 0.05, true),
            (3, 0.2, true),
            (4, 0.0, true),
        ] {
            let path = dir.join(format!("h{seed}.jsonl"));
            write_keyed_cas_history(&path, seed, 30_000, 7, 12, info, corrupt).unwrap();
            let mapped = read_path_mapping(&path, 0).unwrap();
            let memory = generate_keyed_cas_history(seed, 30_000, 7, 12, info, corrupt);
            let (a, b) = (checker.check(&mapped), checker.check(&memory));
            assert_eq!(a.valid, b.valid, "seed {seed}: {}", a.explanation);
            assert_eq!(a.explanation, b.explanation, "seed {seed}");
            assert_eq!(a.details, b.details, "seed {seed}");
            assert_eq!(a.evidence, b.evidence, "seed {seed}");
            invalid += usize::from(a.valid == Validity::Invalid);
        }
        assert_eq!(invalid, 3, "every corrupt read is found");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
