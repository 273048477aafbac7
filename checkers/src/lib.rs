//! # splitbrain-checkers
//!
//! The history model and every consistency checker of splitbrain, usable on its own to
//! check histories recorded elsewhere (Jepsen, Elle, Knossos, Porcupine).
//!
//! ```no_run
//! use splitbrain_checkers::history::read::read_path;
//! let history = read_path(std::path::Path::new("history.jsonl"))?;
//! println!("{} ops, {} client operations", history.len(), history.pairs().len());
//! # Ok::<(), splitbrain_checkers::history::HistoryError>(())
//! ```
//!
//! Invariants: this crate is pure and synchronous. It never depends on tokio, never
//! opens a socket, and touches files only in the history readers.

#![warn(missing_docs)]

pub mod bank;
pub mod ddp;
pub mod elle;
pub mod eventual;
pub mod history;
pub mod jepsen;
pub mod linearizability;
pub mod quantile;
pub mod shrink;
pub mod table;
pub mod verdict;

pub use history::{History, HistoryError, Op, OpPair, OpType, Outcome, Process};
pub use verdict::{CheckBounds, CheckResult, Checker, Coverage, OnlineCheck, Validity};
