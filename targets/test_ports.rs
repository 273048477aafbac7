//! Ports for the bundled targets' integration tests (included by each crate's
//! `tests/cluster.rs` with `#[path]`, so the three share one copy).

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// A port that is free now and outside the kernel's ephemeral range, so that no
/// connecting socket (this test's clients, another test's) is given it before the node
/// binds it; a port from `bind(0)` is in that range and was seen taken in CI. Each call
/// in this process gets a different port; the PID spreads concurrent test binaries.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (low, span) = (10_000, ephemeral_low.saturating_sub(10_000).max(1_000));
    let base = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (low + base.wrapping_add(n) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {low}..{}", low + span)
}
