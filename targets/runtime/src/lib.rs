//! Runtime shared by splitbrain's bundled targets (reference systems).
//!
//! The pieces every bundled server needs:
//!
//! - [`clock::OffsetClock`]: the node's notion of time. Every timer and lease decision of a
//!   bundled node reads `monotonic clock + offset`, and the harness moves the offset through
//!   the admin endpoint to inject clock faults (bump, strobe, skew).
//! - [`http`]: the JSON-over-HTTP front: a target writes one `Request -> Response`
//!   handler and [`http::serve`] runs it behind axum/hyper; plus [`http::clock_admin`],
//!   which serves `GET/POST /admin/clock`.
//! - [`cli`]: command-line conventions, e.g. parsing `--peer ID=ADDR`.
//! - [`peer`]: the node-to-node transport, newline-delimited JSON frames over TCP.
//! - [`turns`]: the node thread's turn loop that drives a sans-IO core (events, tick,
//!   persist, then send), and how a node stops when its disk fails.
//! - [`node`]: the node driver over one sans-IO core ([`node::NodeCore`]): its thread, the
//!   clients waiting for replies, the status snapshot, the `{"from","msg"}` peer frames.
//! - [`storage`]: durable files: an fsync'd log of JSON lines whose torn tail is cut at
//!   open, JSON files read back, files replaced atomically.
//! - [`testing`]: for tests only: free ports, the HTTP client and the process cluster of
//!   the targets' `tests/cluster.rs` (std and serde_json, nothing more).
//!
//! Targets must not depend on any harness crate: they are separate programs spoken to over
//! the network. This crate is the only code they share.

pub mod cli;
pub mod clock;
pub mod http;
pub mod node;
pub mod peer;
pub mod storage;
pub mod testing;
pub mod turns;

pub use clock::OffsetClock;

/// FNV-1a, 64 bits: a fixed, portable hash, so every node of a bundled target (and the
/// harness) maps a string key to the same shard or owner.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        assert_eq!(super::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
