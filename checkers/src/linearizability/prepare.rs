//! Turns a history into parts for the search: model ops, required/optional, keys, pruning.

use super::fxhash::FxHashMap;
use super::model::{Completion, Model};
use super::search::{Part, PartOp};
use crate::history::{History, Outcome};

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
    // each chunk is sorted into its key's group before the next is translated.
    let slots = history.pair_slots().len();
    let mut group_of: FxHashMap<Option<String>, usize> = FxHashMap::default();
    let mut groups: Vec<Group<M::Op>> = Vec::new();
    for chunk in (0..slots).step_by(PREPARE_CHUNK) {
        let translated: Vec<Translated<M::Op>> = (chunk..slots.min(chunk + PREPARE_CHUNK))
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| translate(model, history, split, i))
            .collect();
        for t in translated {
            if let Some((key, part_op, op)) = t? {
                let g = match group_of.get(&key) {
                    Some(&g) => g,
                    None => {
                        groups.push((key.clone(), Vec::new()));
                        group_of.insert(key, groups.len() - 1);
                        groups.len() - 1
                    }
                };
                groups[g].1.push((part_op, op));
            }
        }
    }
    // Parts in key order, as before (the report names the smallest invalid key).
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(groups
        .into_iter()
        .map(|(key, ops)| intern(model, key, prune(model, ops)))
        .collect())
}

/// A key and its translated ops, in history order.
type Group<Op> = (Option<String>, Vec<(PartOp, Op)>);

/// Pairs translated at a time by [`prepare`].
const PREPARE_CHUNK: usize = 1 << 16;

/// Translates pair `i` with the model.
fn translate<M: Model>(model: &M, history: &History, split: bool, i: usize) -> Translated<M::Op> {
    let Some(pair) = history.pair(i) else {
        return Ok(None);
    };
    let completion = match pair.outcome {
        Outcome::Ok => Completion::Ok,
        Outcome::Fail => Completion::Failed,
        Outcome::Info | Outcome::Pending => Completion::Unknown,
    };
    let op = model
        .op(&pair, completion)
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
    let key = if split { pair.key_string() } else { None };
    Ok(Some((key, part_op, op)))
}

/// Drops optional ops that cannot change the verdict.
///
/// Generic rule: an optional op invoked after every required op completed can be left out
/// (placing it "never" is always allowed and nothing after it needs to be explained).
/// Model rule: whatever [`Model::prunable`] proves unobserved.
fn prune<M: Model>(model: &M, ops: Vec<(PartOp, M::Op)>) -> Vec<(PartOp, M::Op)> {
    let last_required_end = ops
        .iter()
        .filter(|(p, _)| p.required)
        .map(|(p, _)| p.end)
        .max();
    let ops: Vec<_> = ops
        .into_iter()
        .filter(|(p, _)| p.required || last_required_end.is_some_and(|e| p.invoke < e))
        .collect();
    let required: Vec<&M::Op> = ops
        .iter()
        .filter(|(p, _)| p.required)
        .map(|(_, o)| o)
        .collect();
    let optional: Vec<&M::Op> = ops
        .iter()
        .filter(|(p, _)| !p.required)
        .map(|(_, o)| o)
        .collect();
    if optional.is_empty() {
        return ops;
    }
    let drop = model.prunable(&required, &optional);
    let mut k = 0;
    ops.into_iter()
        .filter(|(p, _)| {
            if p.required {
                return true;
            }
            k += 1;
            !drop.get(k - 1).copied().unwrap_or(false)
        })
        .collect()
}

fn intern<M: Model>(_model: &M, key: Option<String>, ops: Vec<(PartOp, M::Op)>) -> Part<M::Op> {
    let mut ids: FxHashMap<M::Op, u32> = FxHashMap::default();
    let mut values = Vec::new();
    let mut part_ops = Vec::with_capacity(ops.len());
    for (mut p, op) in ops {
        p.op = *ids.entry(op.clone()).or_insert_with(|| {
            values.push(op);
            (values.len() - 1) as u32
        });
        part_ops.push(p);
    }
    part_ops.sort_by_key(|p| p.invoke);
    Part {
        key,
        ops: part_ops,
        values,
    }
}
