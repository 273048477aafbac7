//! The run machinery: one test from a [`spec::TestSpec`] to a stored run.
//!
//! - [`entry`]: the one way in: `resolve` (a request, from flags or a suite cell, to a
//!   validated `TestSpec`) and `run` (a `TestSpec` to a `RunOutcome`).
//! - [`spec`]: `TestSpec`, everything stored in `test.json`.
//! - [`controller`]: the phases of a run (`run_local_test`, `drive`, `finish_run`), which
//!   the remote and Maelstrom runs share.
//! - [`worker`]: a Jepsen process and its rate; [`recorder`]: the history on disk.
//! - [`layout`], [`node_layout`], [`mesh`], [`cluster`]: where nodes live on the network,
//!   the proxy mesh between them and their processes; [`programs`]: the programs a run needs.
//! - [`converge`]: final reads of convergence workloads.
//! - [`online`]: checking while the test runs; [`live`]: `live.json`; [`progress`]: the
//!   progress bar.
//! - [`store`]: run directories and reading stored runs back.

pub mod cluster;
pub mod controller;
pub mod converge;
pub mod entry;
pub(crate) mod layout;
pub mod live;
pub mod memory;
pub mod mesh;
pub mod node_layout;
pub mod online;
mod online_claims;
pub mod programs;
pub mod progress;
pub mod recorder;
pub mod spec;
pub mod store;
pub mod worker;
