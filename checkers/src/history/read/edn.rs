//! Jepsen EDN history reader: one vector (or list) of op maps, or a sequence of op maps
//! (typically one per line).
//!
//! Op map fields: `:process` (integer or `:nemesis`), `:type` (`:invoke` `:ok` `:fail`
//! `:info`), `:f` (or a transaction value, see [`super`]), and optionally `:index`, `:time` (ns), `:key`, `:value`, `:node` and
//! `:error`. Unknown fields are ignored. Op keys are matched without allocating, so large
//! histories parse in one linear pass.

use super::edn_value::{EdnError, EdnParser};
use super::{infer_missing_f, ParseContext};
use crate::history::{HistoryError, Op, OpType, Process, NO_INDEX};
use serde_json::Value;

/// Parses a whole EDN history.
pub(crate) fn read_edn(text: &str, ctx: &ParseContext) -> Result<Vec<Op>, HistoryError> {
    let (mut ops, lines) = read_edn_ops(text, ctx)?;
    infer_missing_f(&mut ops, &|i| lines.get(i).copied().unwrap_or(0), ctx)?;
    Ok(ops)
}

/// The op maps of an EDN history (`f` empty where a map had none) and the line each
/// starts on.
fn read_edn_ops(text: &str, ctx: &ParseContext) -> Result<(Vec<Op>, Vec<usize>), HistoryError> {
    let to_err = |e: EdnError| ctx.error(e.line, e.reason);
    let mut p = EdnParser::new(text, 1);
    let mut ops = Vec::new();
    let mut lines = Vec::new();
    if p.at_end(0).map_err(to_err)? {
        return Ok((ops, lines));
    }
    let close = match p.peek() {
        Some(b'[') => Some(b']'),
        Some(b'(') => Some(b')'),
        _ => None,
    };
    let Some(close) = close else {
        // A bare sequence of op maps.
        while !p.at_end(0).map_err(to_err)? {
            lines.push(p.line());
            ops.push(parse_op(&mut p).map_err(to_err)?);
        }
        return Ok((ops, lines));
    };
    let open_line = p.line();
    p.bump();
    loop {
        p.skip_ws(1).map_err(to_err)?;
        match p.peek() {
            Some(c) if c == close => {
                p.bump();
                break;
            }
            None => {
                return Err(ctx.error(
                    p.line(),
                    format!(
                        "expected `{}` closing the history opened on line {open_line}, \
                         found end of input",
                        close as char
                    ),
                ))
            }
            Some(_) => {
                lines.push(p.line());
                ops.push(parse_op(&mut p).map_err(to_err)?)
            }
        }
    }
    if !p.at_end(0).map_err(to_err)? {
        return Err(ctx.error(
            p.line(),
            format!(
                "expected end of input after the history, found {}",
                p.found()
            ),
        ));
    }
    Ok((ops, lines))
}

/// Parses one op map; the cursor is at its first byte.
fn parse_op(p: &mut EdnParser<'_>) -> Result<Op, EdnError> {
    if p.peek() != Some(b'{') {
        return Err(p.error(format!("expected an op map `{{...}}`, found {}", p.found())));
    }
    let start_line = p.line();
    p.bump();
    let mut process = None;
    let mut op_type = None;
    let mut f = None;
    let mut op = Op::new(Process::Nemesis, OpType::Info, String::new(), Value::Null);
    op.index = NO_INDEX;
    loop {
        p.skip_ws(1)?;
        match p.peek() {
            Some(b'}') => {
                p.bump();
                break;
            }
            None => {
                return Err(p.error(format!(
                    "expected `}}` closing the op map opened on line {start_line}, \
                     found end of input"
                )))
            }
            Some(_) => {}
        }
        let key_line = p.line();
        let key = match p.take_keyword() {
            Some(k) => k,
            None => {
                // Non-keyword keys cannot name an op field; parse and ignore the entry.
                p.parse_value(1)?;
                ""
            }
        };
        p.skip_ws(1)?;
        if matches!(p.peek(), None | Some(b'}')) {
            return Err(EdnError {
                line: key_line,
                reason: format!("expected a value for op field :{key}, found {}", p.found()),
            });
        }
        let value_line = p.line();
        let value_start = p.pos();
        // Fast path for the fields present in every op: no intermediate `Value`.
        if key == "type" || key == "f" {
            if let Some(name) = p.take_keyword() {
                if key == "f" {
                    f = Some(name.to_string());
                    continue;
                }
                let Some(t) = OpType::parse(name) else {
                    return Err(EdnError {
                        line: value_line,
                        reason: format!(
                            "expected :type to be one of :invoke :ok :fail :info, got :{name}"
                        ),
                    });
                };
                op_type = Some(t);
                continue;
            }
        }
        let value = p.parse_value(1)?;
        let bad = |what: &str| EdnError {
            line: value_line,
            reason: format!(
                "expected :{key} to be {what}, got {}",
                p.source(value_start, p.pos())
            ),
        };
        match key {
            "process" => {
                process = Some(
                    process_of(&value).ok_or_else(|| bad("a non-negative integer or :nemesis"))?,
                )
            }
            "type" => {
                let t = value.as_str().and_then(OpType::parse);
                op_type = Some(t.ok_or_else(|| bad("one of :invoke :ok :fail :info"))?);
            }
            "f" => match value {
                Value::String(s) => f = Some(s),
                _ => return Err(bad("a keyword or string")),
            },
            "time" => {
                op.time = value
                    .as_u64()
                    .ok_or_else(|| bad("a non-negative integer"))?
            }
            "index" => {
                op.index = value
                    .as_u64()
                    .ok_or_else(|| bad("a non-negative integer"))?;
            }
            "key" => op.key = (!value.is_null()).then_some(value),
            "value" => op.value = value,
            "node" => {
                op.node = match value {
                    Value::Null => None,
                    Value::String(s) => Some(s),
                    other => Some(other.to_string()),
                }
            }
            "error" => op.error = (!value.is_null()).then_some(value),
            _ => {}
        }
    }
    let missing = |field: &str| EdnError {
        line: start_line,
        reason: format!("expected the op map to have :{field}, found none"),
    };
    op.process = process.ok_or_else(|| missing("process"))?;
    op.op_type = op_type.ok_or_else(|| missing("type"))?;
    // A missing `f` is inferred (or refused) once the whole history is read.
    op.f = f.unwrap_or_default();
    Ok(op)
}

/// A process id: a non-negative integer, or `nemesis` (keyword or string).
pub(crate) fn process_of(v: &Value) -> Option<Process> {
    match v {
        Value::Number(n) => n.as_u64().map(Process::Client),
        Value::String(s) if s == "nemesis" => Some(Process::Nemesis),
        _ => None,
    }
}
