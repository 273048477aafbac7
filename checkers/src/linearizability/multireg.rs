//! The `multi-register` model: transactions over a map of registers.

use super::model::{Completion, Model, Val};
use super::models::unsupported;
use super::perkey::key_atom;
use crate::history::OpPair;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One micro-op of a `multi-register` transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MicroOp {
    /// Read register `.0`, which held `.1` (`Null`: never written).
    Read(Arc<str>, Val),
    /// Wrote `.1` to register `.0`.
    Write(Arc<str>, Val),
}

/// `multi-register`: transactions `f: "txn"`, value `[["r", k, v], ["w", k, v], ...]`
/// over a map of registers (all null initially), applied atomically.
#[derive(Debug, Clone, Default)]
pub struct MultiRegisterModel;

impl Model for MultiRegisterModel {
    type State = BTreeMap<Arc<str>, Val>;
    type Op = Vec<MicroOp>;

    fn read_only(&self, op: &Vec<MicroOp>) -> bool {
        op.iter().all(|m| matches!(m, MicroOp::Read(..)))
    }

    fn state_bytes(&self, state: &Self::State) -> usize {
        let entry = std::mem::size_of::<(Arc<str>, Val)>();
        std::mem::size_of::<Self::State>() + state.len() * (entry * 3 / 2)
    }

    fn init(&self) -> Self::State {
        BTreeMap::new()
    }

    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<Vec<MicroOp>>, String> {
        if completion == Completion::Failed {
            return Ok(None);
        }
        if pair.f != "txn" {
            return Err(unsupported("multi-register", &pair.f));
        }
        let Value::Array(micro) = &pair.value else {
            return Err(format!(
                "a txn's value must be a list of micro-ops, got {}",
                pair.value
            ));
        };
        let mut ops = Vec::new();
        for m in micro {
            let (f, k, v) = match m {
                Value::Array(a) if a.len() == 3 => (a[0].as_str().unwrap_or(""), &a[1], &a[2]),
                other => return Err(format!("micro-op must be [f, key, value], got {other}")),
            };
            let key: Arc<str> = Arc::from(crate::history::value_key_string(k).as_str());
            match f {
                "r" | "read" if completion == Completion::Ok => {
                    ops.push(MicroOp::Read(key, Val::from_json(v)))
                }
                // A read inside a txn with unknown result observes nothing.
                "r" | "read" => {}
                "w" | "write" => ops.push(MicroOp::Write(key, Val::from_json(v))),
                other => return Err(format!("unknown micro-op `{other}`")),
            }
        }
        Ok((!ops.is_empty()).then_some(ops))
    }

    fn step(&self, state: &Self::State, op: &Vec<MicroOp>) -> Option<Self::State> {
        let mut s = state.clone();
        for m in op {
            match m {
                MicroOp::Read(k, v) => {
                    if s.get(k).unwrap_or(&Val::Null) != v {
                        return None;
                    }
                }
                MicroOp::Write(k, v) => {
                    s.insert(k.clone(), v.clone());
                }
            }
        }
        Some(s)
    }

    fn state_json(&self, state: &Self::State) -> Value {
        Value::Object(
            state
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_json()))
                .collect(),
        )
    }

    /// The registers a txn reads or writes: a txn over several keys joins their
    /// components, so the factored memo stays exact.
    fn footprint(&self, op: &Vec<MicroOp>) -> Option<Vec<u64>> {
        let mut atoms: Vec<u64> = op
            .iter()
            .map(|m| match m {
                MicroOp::Read(k, _) | MicroOp::Write(k, _) => key_atom(Some(k)),
            })
            .collect();
        atoms.sort_unstable();
        atoms.dedup();
        Some(atoms)
    }

    fn project(&self, state: &Self::State, atoms: &[u64]) -> Option<Self::State> {
        Some(
            state
                .iter()
                .filter(|(k, _)| atoms.contains(&key_atom(Some(k))))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }
}
