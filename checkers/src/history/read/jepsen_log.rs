//! Jepsen text log reader.
//!
//! Op lines carry the `jepsen.util` logger marker followed by `-` or `:` and then
//! `PROCESS TYPE F [VALUE [ERROR]]`, separated by any whitespace (tabs in real logs):
//!
//! ```text
//! INFO  jepsen.util - 2 :invoke :cas [3 0]
//! 2017-03-01 12:00:00,123{GMT} INFO [jepsen worker 3] jepsen.util: 3 :ok :read nil
//! ```
//!
//! Everything before the marker is ignored; lines without it are skipped (a log
//! interleaves other loggers' lines), but a text with no op line at all is refused
//! (an empty or blank file is an empty history). The value is
//! one EDN value (missing means nil); any text after it becomes the op's `error`.
//!
//! Convention: a `fail`/`info` completion whose value is a keyword (`:timed-out`) is
//! Jepsen's way of logging the error, not a result. Such an op gets `error: "timed-out"`
//! and the value of its process's invoke (null if there is none), so it reads the same as
//! a JSON history of the same run. Times are 0: order is the line order.

use super::edn::process_of;
use super::edn_value::{EdnError, EdnParser};
use super::ParseContext;
use crate::history::{HistoryError, Op, OpType, Process};
use serde_json::Value;
use std::collections::HashMap;

const MARKER: &str = "jepsen.util";

/// Parses every op line of a Jepsen text log.
pub(crate) fn read_jepsen_log(text: &str, ctx: &ParseContext) -> Result<Vec<Op>, HistoryError> {
    let mut ops: Vec<Op> = Vec::new();
    // Position in `ops` of each client process's latest invoke, for the keyword convention.
    let mut last_invoke: HashMap<u64, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let Some(at) = line.find(MARKER) else {
            continue;
        };
        let fields = &line[at + MARKER.len()..];
        let mut op = parse_fields(fields, line_no).map_err(|e| ctx.error(e.line, e.reason))?;
        if let Process::Client(p) = op.process {
            match op.op_type {
                OpType::Invoke => {
                    last_invoke.insert(p, ops.len());
                }
                OpType::Fail | OpType::Info if op.error.is_none() => {
                    if let Some(Value::String(kw)) = keyword_value(&mut op) {
                        op.value = last_invoke
                            .get(&p)
                            .and_then(|&pos| ops.get(pos))
                            .map_or(Value::Null, |inv| inv.value.clone());
                        op.error = Some(Value::String(kw));
                    }
                }
                _ => {}
            }
        }
        ops.push(op.op);
    }
    // An empty (or blank) file is an empty history, which checkers call unknown; text
    // with no op line is not a history at all.
    if ops.is_empty() && !text.trim().is_empty() {
        return Err(not_a_history(text, ctx));
    }
    Ok(ops)
}

/// The error for text in which no line is an op: every other format was ruled out by
/// its first characters, and a log with no `jepsen.util` op line holds no history.
fn not_a_history(text: &str, ctx: &ParseContext) -> HistoryError {
    const EXPECTED: &str = "expected a history: JSON Lines ops ({\"type\":\"invoke\",...}), \
        a JSON array of ops, EDN op maps ({:type :invoke, ...}) or Jepsen log lines \
        (`INFO jepsen.util - 3 :invoke :read nil`)";
    let (i, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| !l.trim().is_empty())
        .unwrap_or((0, ""));
    let shown: String = line.trim().chars().take(60).collect();
    let cut = if line.trim().chars().count() > 60 {
        "..."
    } else {
        ""
    };
    ctx.error(
        i + 1,
        format!("no line of the file is an op; {EXPECTED}; the first line reads {shown:?}{cut}"),
    )
}

/// An op plus whether its value was written as a keyword.
struct LogOp {
    op: Op,
    value_is_keyword: bool,
}

impl std::ops::Deref for LogOp {
    type Target = Op;
    fn deref(&self) -> &Op {
        &self.op
    }
}

impl std::ops::DerefMut for LogOp {
    fn deref_mut(&mut self) -> &mut Op {
        &mut self.op
    }
}

/// Takes the value out of a completion whose value was a keyword.
fn keyword_value(op: &mut LogOp) -> Option<Value> {
    if op.value_is_keyword {
        Some(std::mem::take(&mut op.op.value))
    } else {
        None
    }
}

/// Parses what follows the marker: separator, process, type, f, value, error.
fn parse_fields(fields: &str, line_no: usize) -> Result<LogOp, EdnError> {
    let trimmed = fields.trim_start();
    let after_sep = match trimmed.as_bytes().first() {
        Some(b'-') | Some(b':') => &trimmed[1..],
        _ => {
            return Err(EdnError {
                line: line_no,
                reason: format!(
                    "expected `-` or `:` after `{MARKER}`, found `{}`",
                    trimmed.chars().take(20).collect::<String>()
                ),
            })
        }
    };
    let mut p = EdnParser::new(after_sep, line_no);
    let (process_value, text) = field(&mut p, "a process (integer or :nemesis)")?;
    let process = process_of(&process_value).ok_or_else(|| {
        p.error(format!(
            "expected a process (non-negative integer or :nemesis), got {text}"
        ))
    })?;
    p.skip_ws(0)?;
    let type_start = p.pos();
    // Types are keywords in every real log: match them without allocating.
    let op_type = match p.take_keyword() {
        Some(name) => OpType::parse(name),
        None => field(&mut p, "an op type")?
            .0
            .as_str()
            .and_then(OpType::parse),
    };
    let op_type = op_type.ok_or_else(|| {
        p.error(format!(
            "expected the op type to be one of :invoke :ok :fail :info, got {}",
            p.source(type_start, p.pos())
        ))
    })?;
    let f = match field(&mut p, "an op name (:read, :write, ...)")? {
        (Value::String(s), _) => s,
        (_, text) => return Err(p.error(format!("expected an op name keyword, got {text}"))),
    };
    let mut value_is_keyword = false;
    let mut value = Value::Null;
    if !p.at_end(0)? {
        value_is_keyword = p.peek() == Some(b':');
        value = p.parse_value(0)?;
    }
    let mut op = Op::new(process, op_type, f, value);
    if !p.at_end(0)? {
        op.error = Some(error_value(p.rest().trim()));
    }
    Ok(LogOp {
        op,
        value_is_keyword,
    })
}

/// Parses one whitespace-separated field that must be present; returns it with its
/// source text (for messages).
fn field(p: &mut EdnParser<'_>, what: &str) -> Result<(Value, String), EdnError> {
    if p.at_end(0)? {
        return Err(p.error(format!("expected {what}, found end of line")));
    }
    let start = p.pos();
    let value = p.parse_value(0)?;
    Ok((value, p.source(start, p.pos())))
}

/// Trailing error text: one EDN value if it parses as exactly that, else the raw text.
fn error_value(text: &str) -> Value {
    let mut p = EdnParser::new(text, 1);
    if !matches!(p.at_end(0), Ok(false)) {
        return Value::String(text.to_string());
    }
    match p.parse_value(0) {
        Ok(v) if matches!(p.at_end(0), Ok(true)) => v,
        _ => Value::String(text.to_string()),
    }
}
