//! Errors from reading or validating a history.

use std::path::PathBuf;

/// Why a history could not be read or is not well formed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A line (or record) of an input file is malformed.
    #[error("{}:{line}: {reason}", file.display())]
    Parse {
        /// The file being read (`-` or `<memory>` for non-file input).
        file: PathBuf,
        /// 1-based line number where the problem is.
        line: usize,
        /// What was expected and what was found.
        reason: String,
    },
    /// The ops parse but do not form a valid history (e.g. a completion with no invoke).
    #[error("history op {index}: {reason}")]
    Structure {
        /// Index of the offending op.
        index: u64,
        /// What is wrong.
        reason: String,
    },
    /// The file could not be read or written.
    #[error("{}: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
