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
pub mod bench_converge;
pub mod bench_online;
pub mod bench_tail;
pub mod check;
pub mod check_options;
pub mod cluster;
pub mod controller;
pub mod converge;
pub mod fault_coverage;
mod layout;
pub mod live;
pub mod maelstrom;
pub mod mesh;
pub mod node_layout;
pub mod online;
pub mod programs;
pub mod progress;
pub mod recorder;
pub mod remote;
pub mod schedule_shrink;
pub mod serve;
pub mod spec;
pub mod store;
pub mod suite;
pub mod target;
pub(crate) mod text;
pub mod worker;
pub mod workload;
