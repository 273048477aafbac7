//! splitbrain reference system 1: a sharded key-value store, each shard replicated by its
//! own Raft group, persistent, with five read modes and six switchable bugs.
//!
//! Read `README.md` next to this crate for the design as a guided tour. The code is split
//! along the same seams:
//!
//! - [`core`]: Raft as a sans-IO state machine (elections, replication, reads, snapshots).
//! - [`storage`]: durable term/vote, log and snapshots in a data directory.
//! - [`state`]: the key-value state machine and its commands.
//! - [`shard`]: keys to shards, shards to replicas.
//! - [`node`]: one thread per shard group driving a core with real time and real storage.
//! - [`peer`]: framed TCP between nodes, with per-peer bounded queues and reconnects.
//! - [`http`]: the client API.
//! - [`config`]: command line, read modes and bugs.

pub mod config;
pub mod core;
pub mod http;
pub mod node;
pub mod peer;
pub mod shard;
pub mod state;
pub mod storage;
