//! Collected anomaly instances, bounded per type.

use super::txn::Txns;
use crate::history::History;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How many instances of each anomaly type are kept (all are counted).
pub(crate) const MAX_INSTANCES: usize = 8;

/// One anomaly instance: the transactions involved and a plain-words account.
pub(crate) struct Case {
    pub txns: Vec<u32>,
    pub explanation: String,
    pub data: Value,
}

/// Anomalies found so far, by Elle name.
#[derive(Default)]
pub(crate) struct Found {
    pub by_type: BTreeMap<String, (usize, Vec<Case>)>,
}

impl Found {
    /// Records an instance; `make` is only called while under the per-type bound.
    pub fn add(&mut self, name: &str, make: impl FnOnce() -> Case) {
        let e = self
            .by_type
            .entry(name.to_string())
            .or_insert((0, Vec::new()));
        e.0 += 1;
        if e.1.len() < MAX_INSTANCES {
            e.1.push(make());
        }
    }

    /// Adds what a later pass found, as if its instances had been added after these:
    /// counts add up, and instances fill each type's bound in order.
    pub fn merge(&mut self, later: Found) {
        for (name, (count, cases)) in later.by_type {
            let e = self.by_type.entry(name).or_insert((0, Vec::new()));
            e.0 += count;
            let room = MAX_INSTANCES.saturating_sub(e.1.len());
            e.1.extend(cases.into_iter().take(room));
        }
    }

    /// Marks a type as present without an instance (e.g. empty-transaction-graph).
    pub fn flag(&mut self, name: &str, explanation: String) {
        self.add(name, || Case {
            txns: Vec::new(),
            explanation,
            data: Value::Null,
        });
    }
}

/// Names transactions by the history index of their completion (invoke if pending): the
/// `index` the history's file carried, else the position.
pub(crate) struct Namer<'a> {
    pub txns: &'a Txns<'a>,
    pub history: &'a History,
}

impl Namer<'_> {
    /// Position in the history of the transaction's completion (invoke if pending).
    fn pos(&self, t: u32) -> usize {
        let tx = &self.txns.txns[t as usize];
        match self.txns.complete_pos(tx) {
            usize::MAX => self.txns.invoke_pos(tx),
            c => c,
        }
    }

    /// The index that names the transaction.
    pub fn index(&self, t: u32) -> u64 {
        self.history.op_index(self.pos(t))
    }

    pub fn name(&self, t: u32) -> String {
        format!("T{}", self.index(t))
    }

    /// The op (completion, or invoke if pending) as JSON.
    pub fn op_json(&self, t: u32) -> Value {
        let mut op = match self.history.op(self.pos(t)) {
            Some(o) => o.into_owned(),
            None => return Value::Null,
        };
        op.index = self.index(t);
        serde_json::to_value(op).unwrap_or(Value::Null)
    }

    pub fn op_ref(&self, t: u32) -> Value {
        let tx = &self.txns.txns[t as usize];
        json!({"index": self.index(t), "process": self.txns.process(tx),
               "type": match tx.outcome { crate::Outcome::Ok => "ok", crate::Outcome::Fail => "fail", _ => "info" }})
    }
}
