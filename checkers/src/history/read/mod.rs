//! History readers: JSON Lines (native), a JSON array of ops (Elle's JSON), Jepsen EDN and
//! Jepsen text logs. The format is detected from the content.
//!
//! Every reader reports malformed input as [`HistoryError::Parse`] naming the file, the
//! 1-based line and what was expected. No input makes a reader panic.

mod edn;
mod edn_value;
mod jepsen_log;
mod json;
mod json_lazy;

use super::{History, HistoryError, Op};
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

/// Reads a history file in any supported format (detected from its content).
pub fn read_path(path: &Path) -> Result<History, HistoryError> {
    let text = std::fs::read_to_string(path).map_err(|source| HistoryError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    read_string(text, path, None)
}

/// [`read_str`] for owned text, which JSON Lines histories keep instead of copying.
fn read_string(text: String, file: &Path, format: Option<Format>) -> Result<History, HistoryError> {
    let format = format.unwrap_or_else(|| Format::detect(&text));
    if format == Format::JsonLines {
        let ctx = ParseContext {
            file: file.to_path_buf(),
        };
        return json_lazy::read_json_lines_lazy(text, &ctx);
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

/// Parses ops from text without pairing them into a [`History`].
pub fn read_ops(text: &str, file: &Path, format: Option<Format>) -> Result<Vec<Op>, HistoryError> {
    let ctx = ParseContext {
        file: file.to_path_buf(),
    };
    match format.unwrap_or_else(|| Format::detect(text)) {
        Format::JsonLines => json::read_json_lines(text, &ctx),
        Format::JsonArray => json::read_json_array(text, &ctx),
        Format::Edn => edn::read_edn(text, &ctx),
        Format::JepsenLog => jepsen_log::read_jepsen_log(text, &ctx),
    }
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
