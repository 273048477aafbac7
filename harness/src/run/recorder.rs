//! The history recorder: assigns each event its index and time under one lock (so index
//! order and time order agree), and streams it to `history.jsonl` from a writer thread
//! that flushes at least every 100 ms.

use serde_json::Value;
use splitbrain_checkers::history::write::write_op_line;
use splitbrain_checkers::{Op, OpType, Process};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often buffered history lines reach the file at the latest.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Live counts of completions, for the progress bar and the nemesis's sampler.
#[derive(Debug, Default)]
pub struct LiveCounts {
    /// `ok` completions.
    pub ok: std::sync::atomic::AtomicU64,
    /// `fail` completions.
    pub fail: std::sync::atomic::AtomicU64,
    /// `info` completions.
    pub info: std::sync::atomic::AtomicU64,
    /// Sum of client ops' latencies (invoke to completion) in microseconds, and how many
    /// ops it sums: the guided nemesis's latency signal.
    pub latency_us: std::sync::atomic::AtomicU64,
    /// Ops summed in `latency_us`.
    pub timed: std::sync::atomic::AtomicU64,
    /// Anomalies the online checker has found so far, one line each
    /// (`linearizable: key 7 INVALID at 12.4 s (its ops 11.02-11.31 s)`), for the progress line.
    pub anomalies: Mutex<Vec<String>>,
    /// For each of `anomalies`, the span of the ops that make it (its evidence), as
    /// instants: what the guided nemesis credits to the faults active then.
    pub evidence: Mutex<Vec<(Instant, Instant)>>,
}

impl splitbrain_nemesis::ClientSignals for LiveCounts {
    fn counts(&self) -> splitbrain_nemesis::ClientCounts {
        use std::sync::atomic::Ordering::Relaxed;
        splitbrain_nemesis::ClientCounts {
            ok: self.ok.load(Relaxed),
            fail: self.fail.load(Relaxed),
            info: self.info.load(Relaxed),
            latency_us: self.latency_us.load(Relaxed),
            timed: self.timed.load(Relaxed),
            anomalies: self.anomalies.lock().map(|a| a.len() as u64).unwrap_or(0),
            evidence: self.evidence.lock().map(|e| e.clone()).unwrap_or_default(),
        }
    }
}

struct Sequencer {
    next_index: u64,
    tx: Option<Sender<Op>>,
}

/// The writer thread; it returns the kept ops when the channel closes.
type WriterThread = JoinHandle<std::io::Result<Vec<Op>>>;

/// Records ops; cheap to clone and share between client tasks.
#[derive(Clone)]
pub struct HistoryRecorder {
    start: Instant,
    seq: Arc<Mutex<Sequencer>>,
    writer: Arc<Mutex<Option<WriterThread>>>,
    /// Completion counts so far.
    pub counts: Arc<LiveCounts>,
    /// A copy of every op recorded since [`HistoryRecorder::start_live`], in index order,
    /// for the online checker to take ([`HistoryRecorder::take_live`]).
    live: Arc<Mutex<Option<Vec<Op>>>>,
    /// The history file, when recording to a file.
    path: Option<PathBuf>,
}

impl HistoryRecorder {
    /// Records to `path` (created or truncated). `keep` also keeps every op in memory and
    /// returns them from [`HistoryRecorder::finish`]. Times count from `start`.
    pub fn create(path: &Path, start: Instant, keep: bool) -> std::io::Result<HistoryRecorder> {
        let file = File::create(path)?;
        let mut recorder = Self::with_sink(Box::new(file), start, keep);
        recorder.path = Some(path.to_path_buf());
        Ok(recorder)
    }

    /// The directory the history file is in (the run directory); `None` for a sink.
    pub fn dir(&self) -> Option<&Path> {
        self.path.as_deref().and_then(Path::parent)
    }

    /// The history file; `None` for a sink.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Records into any writer (e.g. `std::io::sink()` for benchmarks).
    pub fn with_sink(sink: Box<dyn Write + Send>, start: Instant, keep: bool) -> HistoryRecorder {
        let (tx, rx) = mpsc::channel::<Op>();
        let writer = std::thread::spawn(move || -> std::io::Result<Vec<Op>> {
            let mut out = BufWriter::with_capacity(1 << 16, sink);
            let mut kept = Vec::new();
            let mut last_flush = Instant::now();
            loop {
                match rx.recv_timeout(FLUSH_INTERVAL) {
                    Ok(op) => {
                        write_op_line(&mut out, &op)?;
                        if keep {
                            kept.push(op);
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                if last_flush.elapsed() >= FLUSH_INTERVAL {
                    out.flush()?;
                    last_flush = Instant::now();
                }
            }
            out.flush()?;
            Ok(kept)
        });
        HistoryRecorder {
            start,
            seq: Arc::new(Mutex::new(Sequencer {
                next_index: 0,
                tx: Some(tx),
            })),
            writer: Arc::new(Mutex::new(Some(writer))),
            counts: Arc::new(LiveCounts::default()),
            live: Arc::new(Mutex::new(None)),
            path: None,
        }
    }

    /// Nanoseconds since the test began.
    pub fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Records one op, filling in its index and time. Ops recorded after
    /// [`HistoryRecorder::finish`] are dropped.
    pub fn record(&self, mut op: Op) {
        use std::sync::atomic::Ordering::Relaxed;
        match op.op_type {
            OpType::Ok => self.counts.ok.fetch_add(1, Relaxed),
            OpType::Fail => self.counts.fail.fetch_add(1, Relaxed),
            OpType::Info if op.is_client() => self.counts.info.fetch_add(1, Relaxed),
            _ => 0,
        };
        let mut seq = self.seq.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = seq.tx.as_ref() else {
            return;
        };
        op.index = seq.next_index;
        op.time = self.now_ns();
        // Under the sequencer's lock, so the live copy is in index order too.
        if let Some(live) = self.live.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            live.push(op.clone());
        }
        if tx.send(op).is_ok() {
            seq.next_index += 1;
        }
    }

    /// From now on, keeps a copy of every op recorded for [`HistoryRecorder::take_live`].
    pub fn start_live(&self) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.get_or_insert_with(Vec::new);
    }

    /// The ops recorded since the last call (since [`HistoryRecorder::start_live`] at
    /// first), in index order; empty when live copies were never asked for.
    pub fn take_live(&self) -> Vec<Op> {
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Records a nemesis event (`type` = `info`).
    pub fn record_nemesis(&self, f: &str, value: Value) {
        self.record(Op::new(Process::Nemesis, OpType::Info, f, value));
    }

    /// Stops recording, flushes the file and returns the kept ops (empty unless `keep`).
    /// Idempotent: a second call returns an empty list.
    pub fn finish(&self) -> std::io::Result<Vec<Op>> {
        self.seq.lock().unwrap_or_else(|e| e.into_inner()).tx = None;
        let handle = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take();
        match handle {
            Some(h) => h
                .join()
                .map_err(|_| std::io::Error::other("history writer thread panicked"))?,
            None => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_checkers::history::read::read_path;

    #[test]
    fn indices_are_dense_and_times_monotone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let rec = HistoryRecorder::create(&path, Instant::now(), true).unwrap();
        let threads: Vec<_> = (0..4u64)
            .map(|p| {
                let rec = rec.clone();
                std::thread::spawn(move || {
                    for v in 0..100 {
                        rec.record(Op::new(
                            Process::Client(p),
                            OpType::Invoke,
                            "write",
                            json!(v),
                        ));
                        rec.record(Op::new(Process::Client(p), OpType::Ok, "write", json!(v)));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let kept = rec.finish().unwrap();
        assert_eq!(kept.len(), 800);
        for (i, w) in kept.windows(2).enumerate() {
            assert_eq!(w[0].index, i as u64);
            assert!(w[0].time <= w[1].time);
        }
        let h = read_path(&path).unwrap();
        assert_eq!(h.len(), 800);
        assert_eq!(h.pairs().len(), 400);
    }
}
