//! `splitbrain-ddp`: splitbrain's reference system 4, a data-parallel training cluster.
//!
//! Each of `W` ranks holds a full replica of a small MLP ([`model`]) and trains on its
//! shard of a seeded synthetic data set ([`data`]); gradients are bucketed and each bucket
//! is ring-all-reduced ([`core::ring`]) over TCP ([`net`]) while backward goes on; the
//! group protocol (rendezvous, commit, checkpoints) is the sans-IO [`core`], driven by
//! [`node`]; [`store`] holds checkpoints and the committed step log; [`http`] serves them;
//! [`replay`] is the single-process reference run; [`bench`] measures the all-reduce and
//! the kernels. See the README.

pub mod bench;
pub mod config;
pub mod core;
pub mod data;
pub mod http;
pub mod model;
pub mod net;
pub mod node;
pub mod replay;
pub mod shm;
pub mod store;
