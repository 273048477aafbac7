//! JSON Lines into a lazily materialized [`History`]: each line is validated as a full
//! [`Op`] but only its head (time, process, type, f) and where its value sits in the text
//! are kept. Errors are the ones the eager reader gives (`file:line: expected a JSON op
//! object: ...`), for the same first malformed line.

use super::ParseContext;
use crate::history::lazy::Span;
use crate::history::{
    simple_json, History, HistoryError, LineSource, NameTable, Op, OpHead, OpType, Process,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::Arc;

/// [`Op`]'s fields, in its order and with its types, except that JSON values stay text.
/// Named `Op` so that serde's messages read exactly as the eager reader's.
#[derive(Deserialize)]
#[serde(rename = "Op", expecting = "struct Op")]
struct LightOp<'a> {
    #[allow(dead_code)]
    index: u64,
    #[serde(default)]
    time: u64,
    process: Process,
    #[serde(rename = "type")]
    op_type: OpType,
    #[serde(borrow)]
    f: Cow<'a, str>,
    #[serde(default, borrow)]
    key: Option<&'a RawValue>,
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
    #[serde(default)]
    #[allow(dead_code)]
    node: Option<String>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// True if serde_json would build a `Value` from `raw` (or it is absent).
fn fits(raw: Option<&RawValue>) -> bool {
    raw.is_none_or(|r| {
        simple_json::surely_fits(r.get())
            || serde_json::from_str::<serde_json::Value>(r.get()).is_ok()
    })
}

/// What one chunk of lines (parsed on one thread) contributes.
#[derive(Default)]
struct Chunk {
    heads: Vec<OpHead>,
    lines: Vec<Span>,
    values: Vec<Span>,
    /// Names in this chunk; `heads[..].f` index it until merged.
    names: NameTable,
    /// Lines in the chunk (blank ones included), for numbering later chunks' lines.
    line_count: usize,
    /// The chunk's first malformed line (0-based within the chunk) and why.
    error: Option<(usize, String)>,
}

/// Chunks of about this many bytes (ending at a newline) are parsed in parallel.
const CHUNK_BYTES: usize = 1 << 20;

/// Byte offsets splitting `text` into chunks that end just after a newline (or at the end).
fn chunk_bounds(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut bounds = vec![0];
    let mut pos = 0;
    while pos < bytes.len() {
        let mut end = (pos + CHUNK_BYTES).min(bytes.len());
        if let Some(nl) = bytes[end..].iter().position(|&b| b == b'\n') {
            end += nl + 1;
        } else {
            end = bytes.len();
        }
        bounds.push(end);
        pos = end;
    }
    bounds
}

/// Parses the lines of `chunk`, which starts at byte `offset` of the text.
fn parse_chunk(chunk: &str, offset: usize) -> Chunk {
    let base = chunk.as_ptr() as usize;
    let span = |s: &str| Span {
        start: offset + (s.as_ptr() as usize - base),
        len: s.len() as u32,
    };
    let mut out = Chunk::default();
    for (i, line) in chunk.lines().enumerate() {
        out.line_count = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |e: serde_json::Error| Some((i, format!("expected a JSON op object: {e}")));
        let light = match serde_json::from_str::<LightOp>(line) {
            Ok(l) => l,
            Err(e) => {
                out.error = bad(e);
                return out;
            }
        };
        // Raw values were only checked for syntax; make sure serde_json can build a
        // `Value` from each (number range, nesting), as the eager reader would.
        if !(fits(light.value) && fits(light.key) && fits(light.error)) {
            if let Err(e) = serde_json::from_str::<Op>(line) {
                out.error = bad(e);
                return out;
            }
        }
        if line.len() > u32::MAX as usize {
            out.error = Some((i, "line longer than 4 GiB".to_string()));
            return out;
        }
        out.heads.push(OpHead {
            time: light.time,
            process: light.process,
            op_type: light.op_type,
            f: out.names.intern(&light.f),
        });
        out.lines.push(span(line));
        out.values
            .push(light.value.map(|r| span(r.get())).unwrap_or_default());
    }
    out
}

/// Reads JSON Lines, keeping `text` as the history's source.
pub(crate) fn read_json_lines_lazy(
    text: String,
    ctx: &ParseContext,
) -> Result<History, HistoryError> {
    use rayon::prelude::*;
    let bounds = chunk_bounds(&text);
    let chunks: Vec<Chunk> = bounds
        .par_windows(2)
        .map(|w| parse_chunk(&text[w[0]..w[1]], w[0]))
        .collect();
    let total: usize = chunks.iter().map(|c| c.heads.len()).sum();
    let mut names = NameTable::default();
    let mut heads = Vec::with_capacity(total);
    let mut line_spans = Vec::with_capacity(total);
    let mut value_spans = Vec::with_capacity(total);
    let mut lines_before = 0;
    for chunk in chunks {
        if let Some((line, reason)) = chunk.error {
            return Err(ctx.error(lines_before + line + 1, reason));
        }
        lines_before += chunk.line_count;
        let ids: Vec<u32> = chunk.names.names.iter().map(|n| names.intern(n)).collect();
        heads.extend(chunk.heads.into_iter().map(|h| OpHead {
            f: ids[h.f as usize],
            ..h
        }));
        line_spans.extend(chunk.lines);
        value_spans.extend(chunk.values);
    }
    let source = LineSource::new(text, line_spans, value_spans);
    History::from_heads(heads, names.names, Some(Arc::new(source)))
}
