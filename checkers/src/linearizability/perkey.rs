//! [`PerKey`]: a per-object model lifted to a keyed history checked as one object.

use super::model::{Completion, Model};
use crate::history::OpPair;
use serde_json::Value;
use std::sync::Arc;

/// Runs a per-object model over a keyed history as one object: one sub-state per key
/// (keys not yet touched are at the inner model's initial state). Used for `--no-split`.
#[derive(Debug, Clone)]
pub struct PerKey<M>(pub M);

impl<M: Model> Model for PerKey<M> {
    /// Sorted (key, sub-state) pairs; untouched keys are absent.
    type State = Vec<(Option<Arc<str>>, M::State)>;
    type Op = (Option<Arc<str>>, M::Op);

    fn state_bytes(&self, state: &Self::State) -> usize {
        let entry = std::mem::size_of::<(Option<Arc<str>>, M::State)>();
        let inline = std::mem::size_of::<M::State>();
        std::mem::size_of::<Self::State>()
            + state.capacity() * entry
            + state
                .iter()
                .map(|(_, s)| self.0.state_bytes(s).saturating_sub(inline))
                .sum::<usize>()
    }

    fn init(&self) -> Self::State {
        Vec::new()
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<Self::Op>, String> {
        let key = pair.key_string().map(|k| Arc::from(k.as_str()));
        Ok(self.0.op(pair, completion)?.map(|o| (key, o)))
    }

    fn step(&self, state: &Self::State, (key, op): &Self::Op) -> Option<Self::State> {
        match state.binary_search_by(|(k, _)| k.cmp(key)) {
            Ok(i) => {
                let sub = self.0.step(&state[i].1, op)?;
                let mut s = state.clone();
                s[i].1 = sub;
                Some(s)
            }
            Err(i) => {
                let sub = self.0.step(&self.0.init(), op)?;
                let mut s = state.clone();
                s.insert(i, (key.clone(), sub));
                Some(s)
            }
        }
    }

    fn state_json(&self, state: &Self::State) -> Value {
        Value::Object(
            state
                .iter()
                .map(|(k, s)| (k.as_deref().unwrap_or("").to_string(), self.0.state_json(s)))
                .collect(),
        )
    }

    fn read_only(&self, (_, op): &Self::Op) -> bool {
        self.0.read_only(op)
    }

    fn prunable(&self, _required: &[&Self::Op], optional: &[&Self::Op]) -> Vec<bool> {
        vec![false; optional.len()]
    }

    fn footprint(&self, (key, _): &Self::Op) -> Option<Vec<u64>> {
        Some(vec![key_atom(key.as_deref())])
    }

    fn project(&self, state: &Self::State, atoms: &[u64]) -> Option<Self::State> {
        Some(
            state
                .iter()
                .filter(|(k, _)| atoms.contains(&key_atom(k.as_deref())))
                .cloned()
                .collect(),
        )
    }
}

/// A key's footprint atom: a fixed hash of it (two keys that collide share an atom, which
/// only merges their components).
pub(crate) fn key_atom(key: Option<&str>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}
