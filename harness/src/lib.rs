//! # splitbrain (the harness)
//!
//! The controller behind the `splitbrain` binary: it resolves a test definition, starts a
//! real cluster of a target's node processes, drives concurrent clients with Jepsen's
//! process semantics while the nemesis injects faults, records every operation to
//! `history.jsonl`, heals, checks the history and writes the run store.
//!
//! Invariants: every node process the harness starts is killed on every exit path
//! (normal, error, Ctrl-C, panic, even the harness being killed: `PR_SET_PDEATHSIG`); every
//! fault is healed before final reads; the history on disk is always a prefix of valid
//! JSON lines, flushed at least every 100 ms.

#![warn(missing_docs)]

pub mod bench;
pub mod check;
pub mod check_options;
pub mod cli;
pub mod fault_coverage;
pub mod maelstrom;
pub mod remote;
pub mod run;
pub mod schedule_shrink;
pub mod serve;
pub mod suite;
pub mod systems;
pub(crate) mod text;
pub mod workload;
