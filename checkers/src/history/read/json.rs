//! JSON Lines and JSON-array readers.

use super::{infer_missing_f, ParseContext};
use crate::history::{HistoryError, Op};

/// One op object per non-blank line. Lines are parsed in parallel (rayon): parsing is
/// most of the cost of checking a million-op history. The error reported is the first
/// malformed line, as a sequential reader would report it.
pub(crate) fn read_json_lines(text: &str, ctx: &ParseContext) -> Result<Vec<Op>, HistoryError> {
    use rayon::prelude::*;
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i, l.trim()))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let parsed: Vec<Result<Op, (usize, String)>> = lines
        .par_iter()
        .with_min_len(4096)
        .map(|&(i, line)| {
            serde_json::from_str::<Op>(line)
                .map_err(|e| (i + 1, format!("expected a JSON op object: {e}")))
        })
        .collect();
    let mut ops = Vec::with_capacity(parsed.len());
    for r in parsed {
        match r {
            Ok(op) => ops.push(op),
            Err((line, reason)) => return Err(ctx.error(line, reason)),
        }
    }
    infer_missing_f(&mut ops, &|i| lines.get(i).map_or(0, |l| l.0 + 1), ctx)?;
    Ok(ops)
}

/// One JSON array of op objects (Elle's JSON). Errors name the line within the file.
pub(crate) fn read_json_array(text: &str, ctx: &ParseContext) -> Result<Vec<Op>, HistoryError> {
    // Deserialize straight into ops (no intermediate `Value` tree); only on failure pay
    // for a second pass that names the offending element.
    let mut ops = serde_json::from_str::<Vec<Op>>(text).map_err(|e| {
        if e.is_data() {
            if let Ok(raw) = serde_json::from_str::<Vec<serde_json::Value>>(text) {
                for (n, v) in raw.into_iter().enumerate() {
                    if let Err(op_err) = serde_json::from_value::<Op>(v) {
                        return ctx.error(
                            element_line(text, n),
                            format!("element {n} of the array is not an op: {op_err}"),
                        );
                    }
                }
            }
        }
        ctx.error(
            e.line().max(1),
            format!("expected a JSON array of ops: {e}"),
        )
    })?;
    infer_missing_f(&mut ops, &|i| element_line(text, i), ctx)?;
    Ok(ops)
}

/// Best-effort line of the n-th top-level element of a JSON array (1-based).
fn element_line(text: &str, n: usize) -> usize {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut escaped = false;
    let mut seen = 0usize;
    let mut line = 1usize;
    for c in text.chars() {
        if c == '\n' {
            line += 1;
        }
        if in_str {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => {
                if depth == 1 {
                    if seen == n {
                        return line;
                    }
                    seen += 1;
                }
                depth += 1;
            }
            '}' | ']' => depth -= 1,
            _ => {}
        }
    }
    line
}
