//! Hand-built eventual-consistency histories (shared by the eventual_* test files; each
//! uses the parts it needs). Op `i` happens at time `i` ms.
#![allow(dead_code)]

use serde_json::{json, Value};
use splitbrain_checkers::history::read::read_str;
use splitbrain_checkers::history::write::write_json_lines;
use splitbrain_checkers::history::{History, Op, OpType, Process};
use splitbrain_checkers::{CheckResult, Checker, Validity};
use std::path::Path;

/// Builds a history op by op; every builder call returns the position of its last op.
#[derive(Default, Clone)]
pub struct H {
    pub ops: Vec<Op>,
}

impl H {
    pub fn new() -> H {
        H::default()
    }

    /// Appends one client op.
    pub fn op(
        &mut self,
        p: u64,
        t: OpType,
        f: &str,
        key: &str,
        value: Value,
        node: Option<&str>,
    ) -> usize {
        let pos = self.ops.len();
        let mut op = Op::new(Process::Client(p), t, f, value).at(pos as u64 * 1_000_000);
        if !key.is_empty() {
            op = op.with_key(key);
        }
        op.node = node.map(str::to_string);
        self.ops.push(op);
        pos
    }

    /// Invoke of an update (`add` or `book`); returns its position.
    pub fn invoke(&mut self, p: u64, f: &str, key: &str, value: Value) -> usize {
        self.op(p, OpType::Invoke, f, key, value, None)
    }

    /// Completion of process `p`'s open op; returns its position.
    pub fn complete(
        &mut self,
        p: u64,
        t: OpType,
        f: &str,
        key: &str,
        value: Value,
        node: &str,
    ) -> usize {
        self.op(p, t, f, key, value, Some(node))
    }

    /// An add that completes `ok` right away; returns the completion's position.
    pub fn add(&mut self, p: u64, key: &str, e: i64, node: &str) -> usize {
        self.invoke(p, "add", key, json!(e));
        self.complete(p, OpType::Ok, "add", key, json!(e), node)
    }

    /// An add that completes with `t` (fail or info).
    pub fn add_ending(&mut self, p: u64, key: &str, e: i64, node: &str, t: OpType) -> usize {
        self.invoke(p, "add", key, json!(e));
        self.complete(p, t, "add", key, json!(e), node)
    }

    /// A booking that completes `ok`.
    pub fn book(&mut self, p: u64, key: &str, id: i64, alts: Value, node: &str) -> usize {
        let v = json!({"id": id, "alternatives": alts});
        self.invoke(p, "book", key, v.clone());
        self.complete(p, OpType::Ok, "book", key, v, node)
    }

    /// A read that completes `ok` with `value`; returns the completion's position.
    pub fn read(&mut self, p: u64, key: &str, value: Value, node: &str) -> usize {
        self.op(p, OpType::Invoke, "read", key, Value::Null, None);
        self.complete(p, OpType::Ok, "read", key, value, node)
    }

    /// A set read in the committed/tentative shape.
    pub fn read_ct(
        &mut self,
        p: u64,
        key: &str,
        committed: &[i64],
        tentative: &[i64],
        node: &str,
    ) -> usize {
        self.read(
            p,
            key,
            json!({"committed": committed, "tentative": tentative}),
            node,
        )
    }

    /// A nemesis op.
    pub fn nemesis(&mut self, f: &str) -> usize {
        let pos = self.ops.len();
        self.ops.push(
            Op::new(Process::Nemesis, OpType::Info, f, Value::Null).at(pos as u64 * 1_000_000),
        );
        pos
    }

    pub fn history(&self) -> History {
        History::new(self.ops.clone()).expect("well-formed test history")
    }

    /// The history as read back from JSON Lines text (kept as text, values parsed on
    /// demand), the way recorded histories reach the checkers.
    pub fn text_history(&self) -> History {
        // Ops built here carry index 0 unless a test set them: write positions then.
        let mut ops = self.ops.clone();
        if ops.iter().all(|o| o.index == 0) {
            for (i, op) in ops.iter_mut().enumerate() {
                op.index = i as u64;
            }
        }
        let mut text = Vec::new();
        write_json_lines(&mut text, &ops).expect("writing to memory");
        let text = String::from_utf8(text).expect("JSON is UTF-8");
        read_str(&text, Path::new("test.jsonl"), None).expect("well-formed test history")
    }

    /// Checks both the in-memory history and its JSON Lines text, which must agree.
    pub fn check(&self, c: &dyn Checker) -> CheckResult {
        let r = c.check(&self.history());
        let from_text = c.check(&self.text_history());
        assert_eq!(r, from_text, "in-memory and JSON Lines results differ");
        r
    }
}

/// Asserts the verdict, printing the result when it differs.
pub fn expect(r: &CheckResult, v: Validity) {
    assert_eq!(
        r.valid,
        v,
        "{}",
        serde_json::to_string_pretty(r).unwrap_or_default()
    );
}

/// Asserts the explanation mentions every fragment.
pub fn mentions(r: &CheckResult, fragments: &[&str]) {
    for f in fragments {
        assert!(
            r.explanation.contains(f),
            "explanation lacks {f:?}: {}",
            r.explanation
        );
    }
}

/// The indices of the evidence ops.
pub fn evidence_indices(r: &CheckResult) -> Vec<u64> {
    r.evidence
        .iter()
        .filter_map(|o| o["index"].as_u64())
        .collect()
}
