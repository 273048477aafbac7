//! Durable state: `DATA_DIR/log.jsonl`, an append-only file of JSON records (writes and
//! commits), and `DATA_DIR/checkpoint.json`, the truncated committed prefix.
//!
//! Appended records are fsync'd ([`std::fs::File::sync_data`]) by [`Store::sync`], which
//! the driver calls before any message or reply of the same turn leaves the replica. A
//! checkpoint replaces both files atomically, one after the other: write a temporary
//! file, fsync it, rename it over the old one, fsync the directory. A crash between the
//! two renames leaves the new checkpoint with the old log, whose records the checkpoint
//! covers are skipped by recovery.

use crate::types::{Checkpoint, Record};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A storage failure: the replica cannot go on safely.
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
    /// The checkpoint file does not parse.
    #[error("{path}: corrupt checkpoint: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        detail: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError {
    let path = path.to_path_buf();
    move |source| StorageError::Io { path, source }
}

/// The open log and checkpoint.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    log_path: PathBuf,
    file: File,
    needs_sync: bool,
}

/// What recovery reads back.
pub type Recovered = (Store, Option<Checkpoint>, Vec<Record>);

impl Store {
    /// Opens (creating) the data directory and returns the checkpoint and the log's
    /// records. A torn or unparsable log tail (a crash mid-append) is cut off.
    pub fn open(dir: &Path) -> Result<Recovered, StorageError> {
        fs::create_dir_all(dir).map_err(io(dir))?;
        let ck_path = dir.join("checkpoint.json");
        let checkpoint = match fs::read(&ck_path) {
            Ok(bytes) => Some(serde_json::from_slice::<Checkpoint>(&bytes).map_err(|e| {
                StorageError::Corrupt {
                    path: ck_path.clone(),
                    detail: e.to_string(),
                }
            })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io(&ck_path)(e)),
        };
        let log_path = dir.join("log.jsonl");
        let mut bytes = Vec::new();
        match File::open(&log_path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes).map_err(io(&log_path))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&log_path)(e)),
        }
        let (records, good_len) = parse(&bytes);
        let file = open_append(&log_path)?;
        if good_len < bytes.len() {
            file.set_len(good_len as u64).map_err(io(&log_path))?;
            file.sync_all().map_err(io(&log_path))?;
        }
        let store = Store {
            dir: dir.to_path_buf(),
            log_path,
            file,
            needs_sync: false,
        };
        Ok((store, checkpoint, records))
    }

    /// Appends a record; durable after the next [`Store::sync`] if `sync`, else only as
    /// durable as the OS makes it (it survives a process kill, not a power cut).
    pub fn append(&mut self, record: &Record, sync: bool) -> Result<(), StorageError> {
        let mut line = serde_json::to_vec(record).unwrap_or_default();
        line.push(b'\n');
        self.file.write_all(&line).map_err(io(&self.log_path))?;
        self.needs_sync |= sync;
        Ok(())
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<(), StorageError> {
        if self.needs_sync {
            self.file.sync_data().map_err(io(&self.log_path))?;
            self.needs_sync = false;
        }
        Ok(())
    }

    /// Atomically installs a new checkpoint, then a new log holding `log`.
    pub fn replace(&mut self, checkpoint: &Checkpoint, log: &[Record]) -> Result<(), StorageError> {
        self.sync()?;
        let ck = serde_json::to_vec(checkpoint).unwrap_or_default();
        self.replace_file("checkpoint.json", &ck)?;
        let mut bytes = Vec::new();
        for record in log {
            bytes.extend(serde_json::to_vec(record).unwrap_or_default());
            bytes.push(b'\n');
        }
        self.replace_file("log.jsonl", &bytes)?;
        self.file = open_append(&self.log_path)?;
        Ok(())
    }

    fn replace_file(&self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        let path = self.dir.join(name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let mut f = File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        fs::rename(&tmp, &path).map_err(io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))
    }
}

fn open_append(path: &Path) -> Result<File, StorageError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io(path))
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
    use crate::types::{Op, Wid, Write as LoggedWrite};

    fn write(stamp: u64) -> Record {
        Record::Write(LoggedWrite {
            wid: Wid { stamp, replica: 2 },
            key: "k".into(),
            op: Op::Add { element: 7 },
        })
    }

    #[test]
    fn replays_records_cuts_a_torn_tail_and_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut store, ck, records) = Store::open(dir.path()).unwrap();
            assert!(ck.is_none() && records.is_empty());
            store.append(&write(1), true).unwrap();
            let wid = Wid {
                stamp: 1,
                replica: 2,
            };
            store.append(&Record::Commit { csn: 1, wid }, true).unwrap();
            store.sync().unwrap();
        }
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("log.jsonl"))
            .unwrap();
        f.write_all(b"{\"Write\":{\"wi").unwrap();
        drop(f);
        let (mut store, _, records) = Store::open(dir.path()).unwrap();
        assert_eq!(records.len(), 2);
        let ck = Checkpoint {
            csn: 1,
            ..Checkpoint::default()
        };
        store.replace(&ck, &[write(2)]).unwrap();
        store.append(&write(3), true).unwrap();
        store.sync().unwrap();
        drop(store);
        let (_, back, records) = Store::open(dir.path()).unwrap();
        assert_eq!(back, Some(ck));
        assert_eq!(records, vec![write(2), write(3)]);
    }
}
