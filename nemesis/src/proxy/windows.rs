//! Per-fault-window accounting of one byte direction of a link: every change of the
//! direction's faults (a `set` of link behaviour) closes the current window and opens a
//! new one, and each message and chunk is counted in the window that was open when it
//! was *read*, so a chunk still held back when its fault ends is measured against the
//! delay it was given. Loss is then measured over the faulted time only, not diluted by
//! the rest of the run, and each window's mean delay is that of one asked delay.
//!
//! No clock and no IO here: the caller passes the time (microseconds since the link's
//! origin), so the accounting is tested with made-up times.

use serde::{Deserialize, Serialize};

use super::host::WireFlow;
use crate::network::FlowFaults;

/// The counters of one direction of a link, over the whole run ([`super::host::DirStats`])
/// or over one fault window ([`WindowStats`]); flattened into both in JSON.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowCounts {
    /// Messages (lines) read.
    pub lines: u64,
    /// Of them, dropped by loss.
    pub lines_dropped: u64,
    /// Chunks read and written on (whenever that was).
    pub chunks: u64,
    /// Of them, held for an added delay (the link had one when they were read).
    pub delayed_chunks: u64,
    /// Total time the delayed chunks spent in the proxy (read to written), microseconds.
    pub delayed_held_us: u64,
    /// The longest time a chunk spent in the proxy, microseconds.
    pub max_held_us: u64,
    /// Chunks held back for a retransmission (loss on a binary stream).
    #[serde(default)]
    pub stalled_chunks: u64,
    /// Their total time in the proxy, microseconds.
    #[serde(default)]
    pub stalled_held_us: u64,
}

impl FlowCounts {
    /// Adds `other`'s counters (the maximum for the longest hold).
    pub fn add(&mut self, other: &FlowCounts) {
        self.lines += other.lines;
        self.lines_dropped += other.lines_dropped;
        self.chunks += other.chunks;
        self.delayed_chunks += other.delayed_chunks;
        self.delayed_held_us += other.delayed_held_us;
        self.max_held_us = self.max_held_us.max(other.max_held_us);
        self.stalled_chunks += other.stalled_chunks;
        self.stalled_held_us += other.stalled_held_us;
    }
}

/// What one direction of a link measured while one set of faults held.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// The `set` that opened the window (None: the one open from the start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// When it opened, microseconds since the proxy started.
    pub start_us: u64,
    /// When it closed (None: still open when this was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_us: Option<u64>,
    /// The faults asked for in it.
    pub asked: WireFlow,
    /// What was read in it.
    #[serde(flatten)]
    pub counts: FlowCounts,
}

/// The windows of one direction of a link, oldest first; the last one is open.
#[derive(Debug, Clone)]
pub(crate) struct WindowLog {
    windows: Vec<WindowStats>,
}

impl Default for WindowLog {
    fn default() -> Self {
        WindowLog::new()
    }
}

impl WindowLog {
    /// One window, open from time 0 with no faults.
    pub(crate) fn new() -> WindowLog {
        WindowLog {
            windows: vec![WindowStats::default()],
        }
    }

    /// Closes the open window at `now_us` and opens one for `asked` (set number `seq`).
    /// Returns the new window's epoch, to be given back with what is read in it.
    pub(crate) fn open(&mut self, seq: Option<u64>, asked: &FlowFaults, now_us: u64) -> usize {
        if let Some(last) = self.windows.last_mut() {
            last.end_us = Some(now_us.max(last.start_us));
        }
        self.windows.push(WindowStats {
            seq,
            start_us: now_us,
            asked: WireFlow::from(asked),
            ..WindowStats::default()
        });
        self.windows.len() - 1
    }

    fn at(&mut self, epoch: usize) -> Option<&mut WindowStats> {
        self.windows.get_mut(epoch)
    }

    /// Counts `lines` messages read in window `epoch`, `dropped` of them lost.
    pub(crate) fn count_read(&mut self, epoch: usize, lines: u64, dropped: u64) {
        if let Some(w) = self.at(epoch) {
            w.counts.lines += lines;
            w.counts.lines_dropped += dropped;
        }
    }

    /// Counts a chunk read in window `epoch` and written on after `held_us`; `delayed`
    /// when the link had a delay as it was read, `stalled` when it was held back for a
    /// retransmission.
    pub(crate) fn count_written(
        &mut self,
        epoch: usize,
        held_us: u64,
        delayed: bool,
        stalled: bool,
    ) {
        if let Some(w) = self.at(epoch) {
            let c = &mut w.counts;
            c.chunks += 1;
            if delayed {
                c.delayed_chunks += 1;
                c.delayed_held_us += held_us;
            }
            if stalled {
                c.stalled_chunks += 1;
                c.stalled_held_us += held_us;
            }
            c.max_held_us = c.max_held_us.max(held_us);
        }
    }

    /// Every window so far, the last one still open.
    pub(crate) fn snapshot(&self) -> Vec<WindowStats> {
        self.windows.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn slow(ms: u64) -> FlowFaults {
        FlowFaults {
            delay: Duration::from_millis(ms),
            ..FlowFaults::default()
        }
    }

    #[test]
    fn each_set_opens_a_window_and_what_is_read_counts_where_it_was_read() {
        let mut log = WindowLog::new();
        // 0-1 s: no fault; 3 messages, 2 chunks of 0.2 ms.
        log.count_read(0, 3, 0);
        log.count_written(0, 200, false, false);
        log.count_written(0, 200, false, false);
        // at 1 s: +80 ms (set 4)
        let e1 = log.open(Some(4), &slow(80), 1_000_000);
        assert_eq!(e1, 1);
        log.count_read(e1, 2, 0);
        log.count_written(e1, 81_000, true, false);
        // at 2 s: 30 % loss (set 5); a chunk read under the delay is written after it
        let lossy = FlowFaults {
            loss: 0.3,
            ..FlowFaults::default()
        };
        let e2 = log.open(Some(5), &lossy, 2_000_000);
        log.count_written(e1, 83_000, true, false);
        log.count_read(e2, 10, 3);
        log.count_written(e2, 300, false, false);
        log.count_written(e2, 200_300, false, true);
        // a stale epoch beyond the log counts nowhere
        log.count_read(99, 1, 1);
        let w = log.snapshot();
        assert_eq!(w.len(), 3);
        assert_eq!(
            (w[0].seq, w[0].start_us, w[0].end_us),
            (None, 0, Some(1_000_000))
        );
        assert_eq!(
            (
                w[0].counts.lines,
                w[0].counts.chunks,
                w[0].counts.delayed_chunks
            ),
            (3, 2, 0)
        );
        assert_eq!(w[0].counts.max_held_us, 200);
        assert_eq!(
            (w[1].seq, w[1].start_us, w[1].end_us),
            (Some(4), 1_000_000, Some(2_000_000))
        );
        assert_eq!(w[1].asked.delay_us, 80_000);
        // both chunks read under the delay count in its window, the late one included
        assert_eq!(
            (w[1].counts.delayed_chunks, w[1].counts.delayed_held_us),
            (2, 164_000)
        );
        assert_eq!(w[1].counts.max_held_us, 83_000);
        assert_eq!((w[1].counts.lines, w[1].counts.lines_dropped), (2, 0));
        assert_eq!((w[2].seq, w[2].end_us), (Some(5), None));
        assert_eq!(w[2].asked.loss, 0.3);
        assert_eq!((w[2].counts.lines, w[2].counts.lines_dropped), (10, 3));
        assert_eq!(w[2].counts.delayed_chunks, 0);
        assert_eq!(
            (w[2].counts.stalled_chunks, w[2].counts.stalled_held_us),
            (1, 200_300)
        );
        assert_eq!((w[2].counts.chunks, w[2].counts.max_held_us), (2, 200_300));
    }

    #[test]
    fn a_window_never_ends_before_it_starts() {
        let mut log = WindowLog::new();
        log.open(Some(1), &slow(10), 500);
        // a clock read a little out of order (two setters racing) does not go backwards
        log.open(Some(2), &slow(20), 400);
        let w = log.snapshot();
        assert_eq!(w[1].end_us, Some(500));
    }
}
