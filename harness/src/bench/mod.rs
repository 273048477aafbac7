//! `splitbrain bench`'s measurements (the command line is `cli/bench.rs`).
//!
//! - [`controller`]: `bench controller`, the controller's own ceiling with a no-op client,
//!   and the cells of `bench linearizable --scale`.
//! - [`tail`]: `bench tail`, the KV read policies under slow-server scenarios.
//! - [`converge`]: `bench converge`, Bayou's time to converge after a heal.
//! - [`limit`]: `bench limit FILE`, raw read, bare parse and `check` of one history, with
//!   the check's phases and its ratio to the bare parse.
//! - [`maelstrom`]: `bench maelstrom`, the simulated network's routing and echo round trips.
//! - [`online`]: `bench online`, a kv `--rate 0` run with and without online checking.

pub mod controller;
pub mod converge;
pub mod limit;
pub mod maelstrom;
pub mod online;
pub mod tail;
