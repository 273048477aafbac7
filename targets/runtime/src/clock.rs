//! The offset clock: monotonic time plus an adjustable offset, in milliseconds.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A node's clock: milliseconds since the process started (monotonic) plus an offset the
/// harness sets. Setting a new offset is a "bump" (a jump forward or backward); changing it
/// repeatedly is a "strobe". Cheap to clone; clones share the offset.
#[derive(Clone, Debug)]
pub struct OffsetClock {
    base: Instant,
    offset_ms: Arc<AtomicI64>,
}

impl Default for OffsetClock {
    fn default() -> Self {
        Self::new()
    }
}

impl OffsetClock {
    /// A clock with offset 0 whose epoch is now.
    pub fn new() -> Self {
        OffsetClock {
            base: Instant::now(),
            offset_ms: Arc::new(AtomicI64::new(0)),
        }
    }

    /// The node's current time in milliseconds: monotonic elapsed time plus the offset.
    /// May go backwards when the offset is lowered: callers must tolerate that.
    pub fn now_ms(&self) -> i64 {
        let elapsed = i64::try_from(self.base.elapsed().as_millis()).unwrap_or(i64::MAX / 2);
        elapsed.saturating_add(self.offset_ms())
    }

    /// The current offset in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }

    /// Sets the offset (milliseconds, may be negative).
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_moves_now() {
        let clock = OffsetClock::new();
        let before = clock.now_ms();
        clock.set_offset_ms(10_000);
        assert!(clock.now_ms() >= before + 10_000);
        let shared = clock.clone();
        shared.set_offset_ms(-500);
        assert_eq!(clock.offset_ms(), -500);
    }
}
