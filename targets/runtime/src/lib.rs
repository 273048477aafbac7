//! Runtime shared by splitbrain's bundled targets (reference systems).
//!
//! Three small pieces every bundled server needs:
//!
//! - [`clock::OffsetClock`]: the node's notion of time. Every timer and lease decision of a
//!   bundled node reads `monotonic clock + offset`, and the harness moves the offset through
//!   the admin endpoint to inject clock faults (bump, strobe, skew).
//! - [`http`]: a deliberately tiny HTTP/1.1 server (keep-alive, `Content-Length` and chunked
//!   request bodies, JSON responses) so targets need no web framework, plus
//!   [`http::clock_admin`] which serves `GET/POST /admin/clock`.
//! - [`cli`]: command-line conventions, e.g. parsing `--peer ID=ADDR`.
//!
//! Targets must not depend on any harness crate: they are separate programs spoken to over
//! the network. This crate is the only code they share.

pub mod cli;
pub mod clock;
pub mod http;

pub use clock::OffsetClock;
