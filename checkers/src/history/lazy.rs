//! Ops kept as JSON Lines text until someone needs them whole.
//!
//! Parsing every op's value into a `serde_json::Value` tree costs several times the file's
//! size in memory and most of the time of checking a big history; checkers that read
//! values straight from the text (Elle) or need none (summaries) skip that entirely.

use super::{Op, OpType, Process};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;

/// The fields every consumer needs, for each op, without its JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpHead {
    pub time: u64,
    pub process: Process,
    pub op_type: OpType,
    /// Index into the history's op names.
    pub f: u32,
}

/// Interns op names (`f`): a history has a handful of distinct ones.
#[derive(Default)]
pub(crate) struct NameTable {
    pub names: Vec<String>,
    ids: HashMap<String, u32>,
    /// The last name interned: consecutive ops mostly share one.
    last: Option<u32>,
}

impl NameTable {
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.last.filter(|&id| self.names[id as usize] == name) {
            return id;
        }
        if let Some(&id) = self.ids.get(name) {
            self.last = Some(id);
            return id;
        }
        self.last = Some(self.names.len() as u32);
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
}

/// A byte range of the source text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: usize,
    pub len: u32,
}

impl Span {
    fn of<'t>(&self, text: &'t str) -> Option<&'t str> {
        text.get(self.start..self.start + self.len as usize)
    }
}

/// The text of a JSON Lines history and where each op (and its value) is in it. Every
/// line was fully validated as an [`Op`] when read, so materializing cannot fail.
pub(crate) struct LineSource {
    text: String,
    lines: Vec<Span>,
    /// Span of each op's `value`; `len == 0` when it was absent or null.
    values: Vec<Span>,
}

impl fmt::Debug for LineSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineSource")
            .field("bytes", &self.text.len())
            .field("ops", &self.lines.len())
            .finish()
    }
}

impl LineSource {
    pub fn new(text: String, lines: Vec<Span>, values: Vec<Span>) -> LineSource {
        LineSource {
            text,
            lines,
            values,
        }
    }

    /// The JSON text of op `pos`'s value; `None` when it is null or absent.
    pub fn value_text(&self, pos: usize) -> Option<&str> {
        let span = self.values.get(pos)?;
        if span.len == 0 {
            return None;
        }
        span.of(&self.text)
    }

    /// The JSON text of op `pos`'s whole line.
    pub fn line_text(&self, pos: usize) -> Option<&str> {
        self.lines.get(pos)?.of(&self.text)
    }

    /// Parses op `pos` on its own.
    pub fn op(&self, pos: usize, head: &OpHead, names: &[String]) -> Op {
        let parsed = self
            .lines
            .get(pos)
            .and_then(|l| l.of(&self.text))
            .and_then(|line| serde_json::from_str::<Op>(line).ok());
        let mut op = parsed.unwrap_or_else(|| {
            // Unreachable for validated text; keep what the head knows rather than panic.
            let f = names.get(head.f as usize).cloned().unwrap_or_default();
            Op::new(head.process, head.op_type, f, Value::Null).at(head.time)
        });
        op.index = pos as u64;
        if op.f.is_empty() {
            // The reader inferred the name of an op that carried none.
            op.f = names.get(head.f as usize).cloned().unwrap_or_default();
        }
        op
    }

    /// Parses every op (in parallel).
    pub fn materialize(&self, heads: &[OpHead], names: &[String]) -> Vec<Op> {
        use rayon::prelude::*;
        heads
            .par_iter()
            .enumerate()
            .with_min_len(4096)
            .map(|(pos, head)| self.op(pos, head, names))
            .collect()
    }
}
