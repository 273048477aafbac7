//! splitbrain reference system 3: a transactional key-value database — strict two-phase
//! locking at each key's single owner node, two-phase commit with presumed abort across
//! them, a fsync'd write-ahead log per node, and four switchable bugs.
//!
//! Read README.md next to this crate for the user guide (API, protocol, recovery, bug
//! table, how to start a cluster by hand). The code is split along the same seams:
//!
//! - [`types`]: keys, values, ops, txn ids, messages and WAL records.
//! - [`locks`]: the lock table (shared/exclusive, FIFO, bounded waits).
//! - [`core`]: the protocol as a sans-IO state machine (participant + coordinator).
//! - [`storage`]: the append-only JSON-lines WAL.
//! - [`node`]: the thread driving a core with real time, the WAL and the network.
//! - [`peer`]: newline-delimited JSON over TCP between nodes.
//! - [`http`]: the client API.
//! - [`config`]: command line, isolation and bugs.

pub mod config;
pub mod core;
pub mod http;
pub mod locks;
pub mod node;
pub mod peer;
pub mod storage;
pub mod types;
