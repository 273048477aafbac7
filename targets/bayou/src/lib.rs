//! splitbrain reference system 2: a Bayou replica group — writes accepted at any replica
//! with Lamport accept stamps, two-way anti-entropy by version vectors, one primary that
//! commits writes with commit sequence numbers, rollback and replay of tentative writes,
//! booking with a dependency check and merge procedure, session guarantees checked by the
//! server, a fsync'd log with checkpoints, and five switchable bugs.
//!
//! Read README.md next to this crate for the user guide (API, protocol, recovery, bug
//! table, how to start a group by hand). The code is split along the same seams:
//!
//! - [`types`]: write ids, writes, version vectors, sessions, messages, log records.
//! - [`db`]: the database derived from the log (sets, counters, schedules).
//! - [`core`]: one replica as a sans-IO state machine.
//! - [`storage`]: the append-only JSON-lines log and the checkpoint file.
//! - [`node`]: the thread driving a core with real time, the disk and the network.
//! - [`peer`]: newline-delimited JSON over TCP between replicas.
//! - [`http`]: the client API.
//! - [`config`]: command line and bugs.

pub mod config;
pub mod core;
pub mod db;
pub mod http;
pub mod node;
pub mod peer;
pub mod storage;
pub mod types;
