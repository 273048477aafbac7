//! Initial states other than a model's own (`--init JSON`): Knossos and Porcupine users
//! start a register at 0, a counter at 100, a multi-register at `{x: 0, y: 0}`.
//!
//! [`WithInit`] wraps any model and changes only where it starts; [`InitFromJson`] reads
//! a model's state from JSON. For per-object models the state is each key's: a keyed
//! history checked key by key (or unsplit) starts every key there.

use super::model::{Completion, Model, Val};
use super::models::{
    CounterModel, KvModel, ListAppendModel, MultiRegisterModel, MutexModel, QueueModel,
    RegisterModel, SetModel,
};
use crate::history::{value_key_string, OpPair};
use serde_json::Value;
use std::sync::Arc;

/// A model whose initial state is `init` instead of the model's own.
#[derive(Debug, Clone)]
pub struct WithInit<M: Model> {
    /// The model.
    pub model: M,
    /// Where it starts.
    pub init: M::State,
}

impl<M: Model> Model for WithInit<M> {
    type State = M::State;
    type Op = M::Op;

    fn init(&self) -> M::State {
        self.init.clone()
    }
    fn op(&self, pair: &OpPair, completion: Completion) -> Result<Option<M::Op>, String> {
        self.model.op(pair, completion)
    }
    fn step(&self, state: &M::State, op: &M::Op) -> Option<M::State> {
        self.model.step(state, op)
    }
    fn state_json(&self, state: &M::State) -> Value {
        self.model.state_json(state)
    }
    fn state_bytes(&self, state: &M::State) -> usize {
        self.model.state_bytes(state)
    }
    fn small_state_space(&self) -> bool {
        self.model.small_state_space()
    }
    fn footprint(&self, op: &M::Op) -> Option<Vec<u64>> {
        self.model.footprint(op)
    }
    fn project(&self, state: &M::State, atoms: &[u64]) -> Option<M::State> {
        self.model.project(state, atoms)
    }
    fn read_only(&self, op: &M::Op) -> bool {
        self.model.read_only(op)
    }
    fn grows(&self, op: &M::Op) -> bool {
        self.model.grows(op)
    }
    fn may_reach(&self, state: &M::State, read: &M::Op) -> bool {
        self.model.may_reach(state, read)
    }
    fn prunable(&self, required: &[&M::Op], optional: &[&M::Op]) -> Vec<bool> {
        self.model.prunable(required, optional)
    }
}

/// A model whose state can be given as JSON.
pub trait InitFromJson: Model {
    /// The state `v` describes, or why it describes none.
    fn state_from_json(&self, v: &Value) -> Result<Self::State, String>;
}

fn list(v: &Value, what: &str) -> Result<Vec<Val>, String> {
    match v {
        Value::Array(items) => Ok(items.iter().map(Val::from_json).collect()),
        other => Err(format!(
            "the initial {what} must be a JSON array, got {other}"
        )),
    }
}

impl InitFromJson for RegisterModel {
    fn state_from_json(&self, v: &Value) -> Result<Val, String> {
        Ok(Val::from_json(v))
    }
}

impl InitFromJson for KvModel {
    fn state_from_json(&self, v: &Value) -> Result<String, String> {
        match v {
            Value::String(s) => Ok(s.clone()),
            other => Err(format!(
                "the initial kv value must be a string, got {other}"
            )),
        }
    }
}

impl InitFromJson for ListAppendModel {
    fn state_from_json(&self, v: &Value) -> Result<Vec<Val>, String> {
        list(v, "list")
    }
}

impl InitFromJson for SetModel {
    fn state_from_json(&self, v: &Value) -> Result<std::collections::BTreeSet<Val>, String> {
        Ok(list(v, "set")?.into_iter().collect())
    }
}

impl InitFromJson for QueueModel {
    fn state_from_json(&self, v: &Value) -> Result<std::collections::VecDeque<Val>, String> {
        Ok(list(v, "queue")?.into_iter().collect())
    }
}

impl InitFromJson for CounterModel {
    fn state_from_json(&self, v: &Value) -> Result<i64, String> {
        v.as_i64()
            .ok_or_else(|| format!("the initial counter must be an integer, got {v}"))
    }
}

impl InitFromJson for MutexModel {
    fn state_from_json(&self, v: &Value) -> Result<bool, String> {
        match v {
            Value::Bool(b) => Ok(*b),
            Value::String(s) if s == "held" => Ok(true),
            Value::String(s) if s == "free" => Ok(false),
            other => Err(format!(
                "the initial mutex must be true/\"held\" or false/\"free\", got {other}"
            )),
        }
    }
}

impl InitFromJson for MultiRegisterModel {
    fn state_from_json(&self, v: &Value) -> Result<Self::State, String> {
        let Value::Object(map) = v else {
            return Err(format!(
                "the initial multi-register must be a JSON object of key: value, got {v}"
            ));
        };
        // Keys are named as the model names them; a null register is an absent one.
        Ok(map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| {
                let key = value_key_string(&Value::String(k.clone()));
                (Arc::from(key.as_str()), Val::from_json(v))
            })
            .collect())
    }
}
