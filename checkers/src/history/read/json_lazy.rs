//! JSON Lines into a lazily materialized [`History`]: each line is validated as a full
//! [`Op`] but only its head (time, process, type, f) and where its value sits in the text
//! are kept. Errors are the ones the eager reader gives (`file:line: expected a JSON op
//! object: ...`), for the same first malformed line.

use super::json_line::{self, OpLine};
use super::{is_txn_value, missing_f_reason, ParseContext};
use crate::history::lazy::Span;
use crate::history::lazy::{MopNameSets, MOP_NAMES_UNRECORDED};
use crate::history::{
    simple_json, History, HistoryError, LineSource, NameTable, Op, OpHead, OpType, Process, Spans,
    Text, NO_INDEX,
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
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    time: u64,
    process: Process,
    #[serde(rename = "type")]
    op_type: OpType,
    #[serde(default, borrow)]
    f: Cow<'a, str>,
    #[serde(default, borrow)]
    key: Option<&'a RawValue>,
    #[serde(default, borrow)]
    value: Option<&'a RawValue>,
    #[serde(default, borrow)]
    node: Option<Cow<'a, str>>,
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

/// Reads `line` with serde_json as the eager reader would (its errors are the reader's),
/// for lines outside [`json_line`]'s shape.
pub(super) fn serde_light(line: &str) -> Result<OpLine<'_>, serde_json::Error> {
    let light = serde_json::from_str::<LightOp>(line)?;
    // Raw values were only checked for syntax; make sure serde_json can build a
    // `Value` from each (number range, nesting), as the eager reader would.
    if !(fits(light.value) && fits(light.key) && fits(light.error)) {
        serde_json::from_str::<Op>(line)?;
    }
    Ok(OpLine {
        index: light.index,
        time: light.time,
        process: light.process,
        op_type: light.op_type,
        f: light.f,
        value: light.value.map(RawValue::get),
        key: light.key.map(RawValue::get),
        node: light.node,
        error: light.error.map(RawValue::get),
        mop_names: None,
    })
}

/// What one chunk of lines (parsed on one thread) contributes.
#[derive(Default)]
struct Chunk {
    heads: Vec<OpHead>,
    lines: Vec<Span>,
    values: Vec<Span>,
    keys: Vec<Span>,
    /// Names in this chunk; `heads[..].f` index it until merged.
    names: NameTable,
    /// Micro-op name sets in this chunk; `heads[..].mop_names` index it until merged.
    mop_sets: MopNameSets,
    /// Lines in the chunk (blank ones included), for numbering later chunks' lines.
    line_count: usize,
    /// The chunk's first malformed line (0-based within the chunk) and why.
    error: Option<(usize, String)>,
    /// The indices its ops carried.
    indices: ChunkIndices,
    /// Ops without `f` or a transaction value: (op within the chunk, line within it).
    unnamed: Vec<(usize, usize)>,
}

/// The indices a chunk's ops carried, stored whole only when they are not a run.
#[derive(Default)]
enum ChunkIndices {
    /// No op carried an index.
    #[default]
    Absent,
    /// The ops carried `first`, `first + 1`, ... (none missing).
    Run(u64),
    /// Anything else; `NO_INDEX` where an op carried none.
    Listed(Vec<u64>),
}

impl ChunkIndices {
    /// Notes op number `n` of the chunk carrying `index`.
    fn push(&mut self, n: usize, index: Option<u64>) {
        let listed = match (&mut *self, index) {
            (ChunkIndices::Absent, None) => return,
            (ChunkIndices::Absent, Some(x)) if n == 0 => {
                *self = ChunkIndices::Run(x);
                return;
            }
            (ChunkIndices::Run(first), Some(x)) if *first + n as u64 == x => return,
            (ChunkIndices::Listed(v), x) => {
                v.push(x.unwrap_or(NO_INDEX));
                return;
            }
            (ChunkIndices::Absent, _) => vec![NO_INDEX; n],
            (ChunkIndices::Run(first), _) => (*first..*first + n as u64).collect(),
        };
        let mut listed = listed;
        listed.push(index.unwrap_or(NO_INDEX));
        *self = ChunkIndices::Listed(listed);
    }

    /// True if the chunk's ops, starting at history position `pos`, carry their
    /// positions (or nothing).
    fn is_positions(&self, pos: usize) -> bool {
        match self {
            ChunkIndices::Absent => true,
            ChunkIndices::Run(first) => *first == pos as u64,
            ChunkIndices::Listed(_) => false,
        }
    }

    /// Appends the chunk's `len` indices, starting at history position `pos`.
    fn extend_into(&self, pos: usize, len: usize, out: &mut Vec<u64>) {
        match self {
            ChunkIndices::Absent => out.extend(pos as u64..(pos + len) as u64),
            ChunkIndices::Run(first) => out.extend(*first..*first + len as u64),
            ChunkIndices::Listed(v) => out.extend(v.iter().enumerate().map(|(i, &x)| {
                if x == NO_INDEX {
                    (pos + i) as u64
                } else {
                    x
                }
            })),
        }
    }
}

/// Chunks of about this many bytes (ending at a newline) are parsed in parallel.
const CHUNK_BYTES: usize = 1 << 20;

/// Chunks parsed (in parallel) before their tables are merged and their text released.
/// A batch is merged while the next is parsed, so two are held at once.
const BATCH_CHUNKS: usize = 32;

/// Byte offsets splitting `bytes` into chunks that end just after a newline (or at the end).
fn chunk_bounds(bytes: &[u8]) -> Vec<usize> {
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
    let mut scratch = Vec::new();
    for (i, line) in chunk.lines().enumerate() {
        out.line_count = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |e: serde_json::Error| Some((i, format!("expected a JSON op object: {e}")));
        if line.len() > u32::MAX as usize {
            out.error = Some((i, "line longer than 4 GiB".to_string()));
            return out;
        }
        // The common shape without serde; anything else (and every error) through it.
        let light = match json_line::read_op_line(line, &mut scratch) {
            Some(l) => l,
            None => match serde_light(line) {
                Ok(l) => l,
                Err(e) => {
                    out.error = bad(e);
                    return out;
                }
            },
        };
        let mut f = light.f;
        if f.is_empty() {
            let value: serde_json::Value = light
                .value
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or_default();
            if is_txn_value(&value) {
                f = Cow::Borrowed("txn");
            } else {
                // Resolved from the process's invoke once every chunk is read.
                out.unnamed.push((out.heads.len(), i));
            }
        }
        out.indices.push(out.heads.len(), light.index);
        let mut head = OpHead::new(
            light.time,
            light.process,
            light.op_type,
            out.names.intern(&f),
        );
        if let Some(m) = light.mop_names {
            head.mop_names = out.mop_sets.intern(m);
        }
        out.heads.push(head);
        out.lines.push(span(line));
        out.values.push(light.value.map(span).unwrap_or_default());
        out.keys.push(light.key.map(span).unwrap_or_default());
    }
    out
}

/// Reads JSON Lines, keeping `text` as the history's source.
///
/// Chunks of lines are parsed in parallel a batch at a time, their text released (a
/// mapped file's pages handed back) as they are parsed; each batch is merged (its chunks'
/// tables freed) while the next is parsed, so neither is ever held whole.
pub(crate) fn read_json_lines_lazy(
    text: Text,
    ctx: &ParseContext,
) -> Result<History, HistoryError> {
    use rayon::prelude::*;
    let bytes = text.bytes();
    let bounds = chunk_bounds(bytes);
    let windows: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let mut names = NameTable::default();
    let mut mop_sets = MopNameSets::default();
    let mut heads: Vec<OpHead> = Vec::new();
    let mut spans = Spans::default();
    let mut lines_before = 0;
    let mut unnamed = Vec::new();
    // The indices the ops carried, kept (from the first chunk whose ops do not carry
    // their positions) only when they are not simply the positions.
    let mut indices: Option<Vec<u64>> = None;
    let parse_batch = |batch: &[(usize, usize)]| -> Vec<Option<Chunk>> {
        batch
            .par_iter()
            .map(|&(start, end)| {
                let chunk = std::str::from_utf8(&bytes[start..end])
                    .ok()
                    .map(|c| parse_chunk(c, start));
                text.release(start..end);
                chunk
            })
            .collect()
    };
    // One batch is merged (one thread's work) while the next is parsed.
    let batches: Vec<&[(usize, usize)]> = windows.chunks(BATCH_CHUNKS).collect();
    let mut pending = batches.first().map(|b| parse_batch(b));
    for k in 0..batches.len() {
        let chunks = pending.take().unwrap_or_default();
        let following = batches.get(k + 1).copied();
        let (merged, next) = rayon::join(
            || -> Result<(), HistoryError> {
                for chunk in chunks {
                    let Some(chunk) = chunk else {
                        return Err(super::not_utf8(bytes, ctx));
                    };
                    if let Some((line, reason)) = chunk.error {
                        // Text in memory was checked whole when read, a mapped file's is
                        // checked here: invalid UTF-8 anywhere is reported as reading it
                        // whole would.
                        if matches!(text, Text::Mapped(_)) && std::str::from_utf8(bytes).is_err() {
                            return Err(super::not_utf8(bytes, ctx));
                        }
                        return Err(ctx.error(lines_before + line + 1, reason));
                    }
                    let at = heads.len();
                    if indices.is_none() && !chunk.indices.is_positions(at) {
                        let mut ix = Vec::with_capacity(at + chunk.heads.len());
                        ix.extend(0..at as u64);
                        indices = Some(ix);
                    }
                    if let Some(ix) = &mut indices {
                        chunk.indices.extend_into(at, chunk.heads.len(), ix);
                    }
                    unnamed.extend(
                        chunk
                            .unnamed
                            .iter()
                            .map(|&(n, line)| (at + n, lines_before + line + 1)),
                    );
                    lines_before += chunk.line_count;
                    let ids: Vec<u32> = chunk.names.names.iter().map(|n| names.intern(n)).collect();
                    let mut set_ids = [MOP_NAMES_UNRECORDED; 256];
                    for (i, &set) in chunk.mop_sets.keys().iter().enumerate() {
                        set_ids[i] = mop_sets.intern(set);
                    }
                    heads.extend(chunk.heads.into_iter().map(|mut h| {
                        h.f = ids[h.f as usize];
                        h.mop_names = set_ids[h.mop_names as usize];
                        h
                    }));
                    for ((line, value), key) in
                        chunk.lines.into_iter().zip(chunk.values).zip(chunk.keys)
                    {
                        spans.push(line, value, key);
                    }
                }
                Ok(())
            },
            || following.map(parse_batch),
        );
        merged?;
        pending = next;
    }
    let mut text = text;
    if let Text::Mapped(m) = &mut text {
        // SAFETY: every chunk (together, the whole file, split after newlines) was
        // checked by `from_utf8` above, or the read returned its error.
        unsafe { m.assume_utf8() };
    }
    let source = LineSource::new(text, spans);
    if !unnamed.is_empty() {
        name_completions(&mut heads, &unnamed, &source, ctx)?;
    }
    let mut history = History::from_heads(heads, names.names, Some(Arc::new(source)), indices)?;
    history.mop_sets = mop_sets.sets;
    Ok(history)
}

/// Gives each op in `unnamed` (position, line) that carries no `f` and no transaction
/// its process's open invoke's `f`; an invoke, or a completion with none, is malformed.
fn name_completions(
    heads: &mut [OpHead],
    unnamed: &[(usize, usize)],
    source: &LineSource,
    ctx: &ParseContext,
) -> Result<(), HistoryError> {
    let mut open: std::collections::HashMap<Process, u32> = Default::default();
    let mut next = unnamed.iter().peekable();
    for (pos, head) in heads.iter_mut().enumerate() {
        let invoked = match head.op_type {
            OpType::Invoke => None,
            _ => open.remove(&head.process()),
        };
        if let Some(&(_, line)) = next.next_if(|(p, _)| *p == pos) {
            let Some(f) = invoked else {
                let value = source
                    .value_text(pos)
                    .and_then(|t| serde_json::from_str(t).ok())
                    .unwrap_or_default();
                return Err(ctx.error(line, missing_f_reason(&value)));
            };
            head.f = f;
        }
        if head.op_type == OpType::Invoke {
            open.insert(head.process(), head.f);
        }
    }
    Ok(())
}
