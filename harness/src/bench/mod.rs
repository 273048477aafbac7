//! `splitbrain bench`'s measurements (the command line is `cli/bench.rs`).
//!
//! - [`controller`]: `bench controller`, the controller's own ceiling with a no-op client,
//!   and the cells of `bench linearizable --scale`.
//! - [`tail`]: `bench tail`, the KV read policies under slow-server scenarios.
//! - [`converge`]: `bench converge`, Bayou's time to converge after a heal.
//! - [`maelstrom`]: `bench maelstrom`, the simulated network's routing and echo round trips.

pub mod controller;
pub mod converge;
pub mod maelstrom;
pub mod tail;
