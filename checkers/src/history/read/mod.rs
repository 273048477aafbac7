//! History readers: JSON Lines (native), a JSON array of ops (Elle's JSON), Jepsen EDN and
//! Jepsen text logs. The format is detected from the content.
//!
//! As Elle's readers do, an op without `f` whose value is a list of `[f, key, value]`
//! micro-ops is a `txn`; a completion without `f` takes its invoke's. Any other op
//! without `f` is malformed.
//!
//! Every reader reports malformed input as [`HistoryError::Parse`] naming the file, the
//! 1-based line and what was expected. No input makes a reader panic.

mod edn;
mod edn_value;
mod jepsen_log;
mod json;
mod json_lazy;
pub(crate) mod json_line;

use super::{History, HistoryError, Op, OpType, Process, Text, NO_INDEX};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The on-disk formats a history can come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON op object per line (splitbrain's native format).
    JsonLines,
    /// One JSON array of op objects (Elle's JSON).
    JsonArray,
    /// Jepsen EDN: a vector of op maps, or one op map per line. Keywords become strings,
    /// `nil` null, sets and lists arrays; unknown op fields are ignored.
    Edn,
    /// Jepsen text log lines: `INFO jepsen.util - 3 :invoke :cas [1 2]`.
    ///
    /// Lines without the `jepsen.util` marker are skipped and times are 0. A `fail`/`info`
    /// completion logged with a keyword value (`:timed-out`) gets `error: "timed-out"` and
    /// its invoke's value; text after the value becomes the `error`.
    JepsenLog,
}

impl Format {
    /// Guesses the format from the first significant characters.
    ///
    /// `{"` starts JSON Lines and `{:` an EDN op map; `[` followed by `{"` or `]` is a JSON
    /// array, any other `[`/`(` is EDN; a leading `;` comment is EDN. Everything else
    /// (including empty input) is read as a Jepsen text log, which skips non-op lines.
    pub fn detect(text: &str) -> Format {
        let bytes = text.as_bytes();
        let mut i = skip_blank(bytes, 0);
        match bytes.get(i) {
            Some(b'{') => match bytes.get(skip_blank(bytes, i + 1)) {
                Some(b'"') | Some(b'}') => Format::JsonLines,
                _ => Format::Edn,
            },
            Some(b'[') => {
                i = skip_blank(bytes, i + 1);
                match bytes.get(i) {
                    Some(b']') => Format::JsonArray,
                    Some(b'{') => match bytes.get(skip_blank(bytes, i + 1)) {
                        Some(b'"') | Some(b'}') => Format::JsonArray,
                        _ => Format::Edn,
                    },
                    _ => Format::Edn,
                }
            }
            Some(b'(') | Some(b';') => Format::Edn,
            _ => Format::JepsenLog,
        }
    }
}

/// Index of the first non-whitespace byte at or after `from` (`bytes.len()` if none).
fn skip_blank(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// Files at least this big are mapped rather than read into memory (JSON Lines only).
const MAP_BYTES: u64 = 64 << 20;

/// Reads a history file in any supported format (detected from its content).
///
/// A big JSON Lines file is mapped instead of read into memory, and the reader and the
/// checkers that stream through it hand its pages back as they go, so checking a
/// multi-gigabyte history does not hold its text.
pub fn read_path(path: &Path) -> Result<History, HistoryError> {
    read_path_mapping(path, MAP_BYTES)
}

/// [`read_path`], mapping JSON Lines files of at least `map_bytes`.
pub(crate) fn read_path_mapping(path: &Path, map_bytes: u64) -> Result<History, HistoryError> {
    let io = |source| HistoryError::Io {
        file: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    if file.metadata().map_err(io)?.len() >= map_bytes {
        if let Some(map) = super::mapped::Mapped::open(&file).map_err(io)? {
            let head = &map.bytes()[..map.bytes().len().min(4096)];
            let head = std::str::from_utf8(head)
                .unwrap_or_else(|e| std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""));
            if Format::detect(head) == Format::JsonLines {
                let ctx = ParseContext {
                    file: path.to_path_buf(),
                };
                return json_lazy::read_json_lines_lazy(Text::Mapped(map), &ctx);
            }
        }
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut &file, &mut bytes).map_err(io)?;
    match String::from_utf8(bytes) {
        Ok(text) => read_string(text, path, None),
        Err(e) => Err(not_utf8(
            e.as_bytes(),
            &ParseContext {
                file: path.to_path_buf(),
            },
        )),
    }
}

/// [`read_str`] for owned text, which JSON Lines histories keep instead of copying.
fn read_string(text: String, file: &Path, format: Option<Format>) -> Result<History, HistoryError> {
    let format = format.unwrap_or_else(|| Format::detect(&text));
    if format == Format::JsonLines {
        let ctx = ParseContext {
            file: file.to_path_buf(),
        };
        return json_lazy::read_json_lines_lazy(Text::Owned(text), &ctx);
    }
    read_str(&text, file, Some(format))
}

/// Parses a history from text. `file` is only used in error messages. `format` of `None`
/// detects it from the content.
///
/// JSON Lines histories keep a copy of the text and parse ops' values only on demand.
pub fn read_str(text: &str, file: &Path, format: Option<Format>) -> Result<History, HistoryError> {
    let format = format.unwrap_or_else(|| Format::detect(text));
    if format == Format::JsonLines {
        return read_string(text.to_owned(), file, Some(format));
    }
    let ops = read_ops(text, file, Some(format))?;
    History::new(ops)
}

/// Parses ops from text without pairing them into a [`History`]. Each op's `index` is
/// the one the history gave it, or its position where it gave none.
pub fn read_ops(text: &str, file: &Path, format: Option<Format>) -> Result<Vec<Op>, HistoryError> {
    let ctx = ParseContext {
        file: file.to_path_buf(),
    };
    let mut ops = match format.unwrap_or_else(|| Format::detect(text)) {
        Format::JsonLines => json::read_json_lines(text, &ctx),
        Format::JsonArray => json::read_json_array(text, &ctx),
        Format::Edn => edn::read_edn(text, &ctx),
        Format::JepsenLog => jepsen_log::read_jepsen_log(text, &ctx),
    }?;
    // Ops keep the index the history gave them, else their position.
    for (i, op) in ops.iter_mut().enumerate() {
        if op.index == NO_INDEX {
            op.index = i as u64;
        }
    }
    Ok(ops)
}

/// True if `v` is a transaction: a list of `[f, key, value]` micro-ops whose `f` is a
/// name (an empty list counts, as Elle reads it).
pub(crate) fn is_txn_value(v: &Value) -> bool {
    v.as_array().is_some_and(|mops| {
        mops.iter().all(|m| {
            m.as_array()
                .is_some_and(|m| m.len() == 3 && m[0].is_string())
        })
    })
}

/// Infers missing `f`s in read order: a transaction-valued op is a `txn`, a completion
/// takes its process's open invoke's `f`. `line_of(i)` is op `i`'s line, for the error.
pub(crate) fn infer_missing_f(
    ops: &mut [Op],
    line_of: &dyn Fn(usize) -> usize,
    ctx: &ParseContext,
) -> Result<(), HistoryError> {
    if ops.iter().all(|o| !o.f.is_empty()) {
        return Ok(());
    }
    let mut open: HashMap<Process, String> = HashMap::new();
    for (i, op) in ops.iter_mut().enumerate() {
        let invoked = if op.op_type == OpType::Invoke {
            None
        } else {
            open.remove(&op.process)
        };
        if op.f.is_empty() {
            if is_txn_value(&op.value) {
                op.f = "txn".to_string();
            } else if let Some(f) = invoked {
                op.f = f;
            } else {
                return Err(ctx.error(line_of(i), missing_f_reason(&op.value)));
            }
        }
        if op.op_type == OpType::Invoke {
            open.insert(op.process, op.f.clone());
        }
    }
    Ok(())
}

/// Why an op without `f` cannot be read.
pub(crate) fn missing_f_reason(value: &Value) -> String {
    format!(
        "expected the op to have `f`, or a value that is a list of [f, key, value] \
         micro-ops (a transaction); found no `f` and value {}",
        abbreviate(value)
    )
}

/// A value as JSON, cut to about 80 characters for an error message.
fn abbreviate(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// The error for a file that is not UTF-8 text: the line and column of its first byte
/// that is not.
pub(crate) fn not_utf8(bytes: &[u8], ctx: &ParseContext) -> HistoryError {
    let at = std::str::from_utf8(bytes)
        .err()
        .map_or(0, |e| e.valid_up_to());
    let line_start = bytes[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    ctx.error(
        line,
        format!(
            "expected UTF-8 text; byte 0x{:02x} at column {} is not",
            bytes.get(at).copied().unwrap_or(0),
            at - line_start + 1
        ),
    )
}

/// What readers need to build errors.
pub(crate) struct ParseContext {
    pub(crate) file: PathBuf,
}

impl ParseContext {
    pub(crate) fn error(&self, line: usize, reason: impl Into<String>) -> HistoryError {
        HistoryError::Parse {
            file: self.file.clone(),
            line,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("sb-read-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_mapped_file_reads_as_the_same_text_in_memory() {
        let text = concat!(
            "{\"index\":0,\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"txn\",\"value\":[[\"append\",1,1]]}\n",
            "\n",
            "{\"index\":1,\"time\":2,\"process\":0,\"type\":\"ok\",\"f\":\"txn\",\"value\":[[\"append\",1,1]]}\n",
            "{\"index\":5,\"time\":3,\"process\":\"nemesis\",\"type\":\"info\",\"f\":\"kill\",\"value\":\"é\"}\n",
        );
        let path = temp_file("ok.jsonl", text.as_bytes());
        let mapped = read_path_mapping(&path, 0).unwrap();
        mapped.release_before(mapped.len());
        let in_memory = read_str(text, &path, None).unwrap();
        assert_eq!(mapped.ops(), in_memory.ops());
        assert_eq!(mapped.op_index(2), 5);
        assert_eq!(mapped.pair_slots(), in_memory.pair_slots());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_mapped_file_reports_errors_as_reading_it_whole_does() {
        let bad_line =
            b"{\"time\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"r\"}\n{\"process\":\n";
        let path = temp_file("bad.jsonl", bad_line);
        assert_eq!(
            read_path_mapping(&path, 0).unwrap_err().to_string(),
            read_path_mapping(&path, u64::MAX).unwrap_err().to_string()
        );
        let mut not_utf8 = bad_line.to_vec();
        not_utf8.extend_from_slice(b"{\"f\":\"\xff\"}\n");
        let path2 = temp_file("utf8.jsonl", &not_utf8);
        let mapped = read_path_mapping(&path2, 0).unwrap_err().to_string();
        assert_eq!(
            mapped,
            read_path_mapping(&path2, u64::MAX).unwrap_err().to_string()
        );
        assert!(mapped.contains("UTF-8"), "{mapped}");
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&path2);
    }
}
