//! History readers: JSON Lines (native), a JSON array of ops (Elle's JSON), Jepsen EDN and
//! Jepsen text logs. The format is detected from the content.
//!
//! Every reader reports malformed input as [`HistoryError::Parse`] naming the file, the
//! 1-based line and what was expected. No input makes a reader panic.

mod edn;
mod jepsen_log;
mod json;

use super::{History, HistoryError, Op};
use std::path::{Path, PathBuf};

/// The on-disk formats a history can come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON op object per line (splitbrain's native format).
    JsonLines,
    /// One JSON array of op objects (Elle's JSON).
    JsonArray,
    /// Jepsen EDN: a vector of op maps, or one op map per line.
    Edn,
    /// Jepsen text log lines: `INFO jepsen.util - 3 :invoke :cas [1 2]`.
    JepsenLog,
}

impl Format {
    /// Guesses the format from the first non-blank character and line shape.
    pub fn detect(text: &str) -> Format {
        let first_line = text.lines().map(str::trim).find(|l| !l.is_empty());
        match first_line {
            Some(l) if l.starts_with('{') && l.contains(":type") && !l.contains("\"type\"") => {
                Format::Edn
            }
            Some(l) if l.starts_with('{') => Format::JsonLines,
            Some(l) if l.starts_with('[') => {
                // `[{"index"...` is JSON; `[{:index ...` is EDN.
                let rest = text.trim_start()[1..].trim_start();
                if rest.starts_with('{') && rest[1..].trim_start().starts_with('"')
                    || rest.starts_with(']')
                {
                    Format::JsonArray
                } else {
                    Format::Edn
                }
            }
            _ => Format::JepsenLog,
        }
    }
}

/// Reads a history file in any supported format (detected from its content).
pub fn read_path(path: &Path) -> Result<History, HistoryError> {
    let text = std::fs::read_to_string(path).map_err(|source| HistoryError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    read_str(&text, path, None)
}

/// Parses a history from text. `file` is only used in error messages. `format` of `None`
/// detects it from the content.
pub fn read_str(text: &str, file: &Path, format: Option<Format>) -> Result<History, HistoryError> {
    let ops = read_ops(text, file, format)?;
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
