//! The write-ahead log: one file `wal.jsonl` of JSON lines, appended, replayed at start.
//!
//! Forced records are fsync'd ([`std::fs::File::sync_data`]) before the driver lets any
//! later message or reply out. With the `no-prepare-fsync` bug, non-forced records stay
//! in a user-space buffer written out (without fsync) only about once a second, so a
//! `kill -9` loses them. The log is never compacted: fine for 60-300 s test runs.

use crate::types::Record;
pub use splitbrain_target_runtime::storage::StorageError;
use splitbrain_target_runtime::storage::{io_err, json_line, JsonLog};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the `no-prepare-fsync` bug keeps records in memory.
const LAZY_FLUSH: Duration = Duration::from_secs(1);

/// The open WAL.
#[derive(Debug)]
pub struct Wal {
    log: JsonLog,
    /// Keep non-forced records in memory (the `no-prepare-fsync` bug).
    lazy: bool,
    lazy_buffer: Vec<u8>,
    last_flush: Instant,
}

impl Wal {
    /// Opens (creating) `dir/wal.jsonl` and returns its records. A torn or unparsable tail
    /// (a crash mid-write) is cut off.
    pub fn open(dir: &Path, lazy: bool) -> Result<(Wal, Vec<Record>), StorageError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let (log, records) = JsonLog::open(&dir.join("wal.jsonl"))?;
        let wal = Wal {
            log,
            lazy,
            lazy_buffer: Vec::new(),
            last_flush: Instant::now(),
        };
        Ok((wal, records))
    }

    /// Appends a record: a forced one goes to the file now and is fsync'd by the next
    /// [`Wal::sync`]; a non-forced one goes to the file too, unless the log is lazy.
    pub fn append(&mut self, record: &Record, force: bool) -> Result<(), StorageError> {
        if self.lazy && !force {
            self.lazy_buffer.extend_from_slice(&json_line(record));
            return Ok(());
        }
        self.log.append(record, force)
    }

    /// Makes every forced record durable.
    pub fn sync(&mut self) -> Result<(), StorageError> {
        self.log.sync()
    }

    /// With a lazy log: writes out (no fsync) what has been buffered for a second.
    pub fn maybe_flush(&mut self) -> Result<(), StorageError> {
        if self.lazy && self.last_flush.elapsed() >= LAZY_FLUSH {
            self.last_flush = Instant::now();
            if !self.lazy_buffer.is_empty() {
                self.log.append_bytes(&self.lazy_buffer, false)?;
                self.lazy_buffer.clear();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Key, TxnId, Val, Write as LoggedWrite};
    use std::fs::OpenOptions;
    use std::io::Write;

    fn prepared(seq: u64) -> Record {
        Record::Prepared {
            txn: TxnId {
                node: 1,
                boot: 1,
                seq,
            },
            coord: 1,
            writes: vec![(Key::Int(3), LoggedWrite::Set(Val::List(vec![1, 2])))],
        }
    }

    #[test]
    fn replays_records_and_cuts_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut wal, records) = Wal::open(dir.path(), false).unwrap();
            assert!(records.is_empty());
            wal.append(&Record::Boot, true).unwrap();
            wal.append(&prepared(1), true).unwrap();
            wal.sync().unwrap();
        }
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("wal.jsonl"))
            .unwrap();
        f.write_all(b"{\"Applied\":{\"tx").unwrap();
        drop(f);
        let (mut wal, records) = Wal::open(dir.path(), false).unwrap();
        assert_eq!(records, vec![Record::Boot, prepared(1)]);
        wal.append(&prepared(2), true).unwrap();
        wal.sync().unwrap();
        drop(wal);
        let (_, records) = Wal::open(dir.path(), false).unwrap();
        assert_eq!(records, vec![Record::Boot, prepared(1), prepared(2)]);
    }

    #[test]
    fn lazy_records_are_lost_by_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), true).unwrap();
        wal.append(&Record::Boot, true).unwrap();
        wal.append(&prepared(1), false).unwrap();
        wal.sync().unwrap();
        // Simulates kill -9: the process dies with its buffer.
        std::mem::forget(wal);
        let (_, records) = Wal::open(dir.path(), false).unwrap();
        assert_eq!(records, vec![Record::Boot]);
    }
}
