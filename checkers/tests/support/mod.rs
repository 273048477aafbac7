//! Hand-built transactional histories for the Elle tests (shared by several test files;
//! each uses the parts it needs).
#![allow(dead_code)]

use serde_json::{json, Value};
use splitbrain_checkers::history::{History, Op, OpType, Process};

/// Builds histories op by op; invoke values are the completion values with reads nil.
#[derive(Default)]
pub struct H {
    ops: Vec<Op>,
}

fn invoke_value(v: &Value) -> Value {
    let mops = v.as_array().cloned().unwrap_or_default();
    Value::Array(
        mops.into_iter()
            .map(|m| match m.as_array().map(Vec::as_slice) {
                Some([f, k, _]) if f == "r" => json!(["r", k, null]),
                _ => m,
            })
            .collect(),
    )
}

impl H {
    pub fn op(&mut self, p: u64, t: OpType, v: Value) -> &mut Self {
        let time = self.ops.len() as u64 * 10;
        self.ops
            .push(Op::new(Process::Client(p), t, "txn", v).at(time));
        self
    }
    pub fn invoke(&mut self, p: u64, v: Value) -> &mut Self {
        let iv = invoke_value(&v);
        self.op(p, OpType::Invoke, iv)
    }
    pub fn ok(&mut self, p: u64, v: Value) -> &mut Self {
        self.op(p, OpType::Ok, v)
    }
    /// A transaction that runs alone: invoke, then ok.
    pub fn txn(&mut self, p: u64, v: Value) -> &mut Self {
        self.invoke(p, v.clone()).ok(p, v)
    }
    pub fn failed(&mut self, p: u64, v: Value) -> &mut Self {
        self.invoke(p, v.clone()).op(p, OpType::Fail, v)
    }
    /// Transactions that all overlap in time (no real-time order between them).
    pub fn concurrent(&mut self, txns: &[(u64, Value)]) -> &mut Self {
        for (p, v) in txns {
            self.invoke(*p, v.clone());
        }
        for (p, v) in txns {
            self.ok(*p, v.clone());
        }
        self
    }
    pub fn history(&self) -> History {
        History::new(self.ops.clone()).expect("well-formed test history")
    }
}
