//! The write-ahead log: one file `wal.jsonl` of JSON lines, appended, replayed at start.
//!
//! Forced records are fsync'd ([`std::fs::File::sync_data`]) before the driver lets any
//! later message or reply out. With the `no-prepare-fsync` bug, non-forced records stay
//! in a user-space buffer written out (without fsync) only about once a second, so a
//! `kill -9` loses them. The log is never compacted: fine for 60-300 s test runs.

use crate::types::Record;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the `no-prepare-fsync` bug keeps records in memory.
const LAZY_FLUSH: Duration = Duration::from_secs(1);

/// A storage failure: the node cannot go on safely.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An I/O error on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The open WAL.
#[derive(Debug)]
pub struct Wal {
    path: PathBuf,
    file: File,
    /// Keep non-forced records in memory (the `no-prepare-fsync` bug).
    lazy: bool,
    lazy_buffer: Vec<u8>,
    last_flush: Instant,
    needs_sync: bool,
}

impl Wal {
    /// Opens (creating) `dir/wal.jsonl` and returns its records. A torn or unparsable tail
    /// (a crash mid-write) is cut off.
    pub fn open(dir: &Path, lazy: bool) -> Result<(Wal, Vec<Record>), StorageError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StorageError::Io { path, source }
        };
        fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join("wal.jsonl");
        let mut bytes = Vec::new();
        match File::open(&path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).map_err(io(&path))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path)(e)),
        }
        let (records, good_len) = parse(&bytes);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        if good_len < bytes.len() {
            file.set_len(good_len as u64).map_err(io(&path))?;
            file.sync_all().map_err(io(&path))?;
        }
        Ok((
            Wal {
                path,
                file,
                lazy,
                lazy_buffer: Vec::new(),
                last_flush: Instant::now(),
                needs_sync: false,
            },
            records,
        ))
    }

    /// Appends a record: a forced one goes to the file now and is fsync'd by the next
    /// [`Wal::sync`]; a non-forced one goes to the file too, unless the log is lazy.
    pub fn append(&mut self, record: &Record, force: bool) -> Result<(), StorageError> {
        let mut line = serde_json::to_vec(record).unwrap_or_default();
        line.push(b'\n');
        if self.lazy && !force {
            self.lazy_buffer.extend_from_slice(&line);
            return Ok(());
        }
        self.file.write_all(&line).map_err(self.io())?;
        self.needs_sync |= force;
        Ok(())
    }

    /// Makes every forced record durable.
    pub fn sync(&mut self) -> Result<(), StorageError> {
        if self.needs_sync {
            self.file.sync_data().map_err(self.io())?;
            self.needs_sync = false;
        }
        Ok(())
    }

    /// With a lazy log: writes out (no fsync) what has been buffered for a second.
    pub fn maybe_flush(&mut self) -> Result<(), StorageError> {
        if self.lazy && self.last_flush.elapsed() >= LAZY_FLUSH {
            self.last_flush = Instant::now();
            if !self.lazy_buffer.is_empty() {
                self.file.write_all(&self.lazy_buffer).map_err(self.io())?;
                self.lazy_buffer.clear();
            }
        }
        Ok(())
    }

    fn io(&self) -> impl FnOnce(std::io::Error) -> StorageError {
        let path = self.path.clone();
        move |source| StorageError::Io { path, source }
    }
}

/// Parses complete, valid lines; returns them and the length of that good prefix.
fn parse(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut pos = 0;
    while let Some(end) = bytes[pos..].iter().position(|b| *b == b'\n') {
        let Ok(record) = serde_json::from_slice::<Record>(&bytes[pos..pos + end]) else {
            break;
        };
        records.push(record);
        pos += end + 1;
    }
    (records, pos)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Key, TxnId, Val, Write as LoggedWrite};

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
