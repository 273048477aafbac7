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
pub use splitbrain_target_runtime::storage::StorageError;
use splitbrain_target_runtime::storage::{self as files, io_err, JsonLog};
use std::fs;
use std::path::{Path, PathBuf};

/// The open log and checkpoint.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    log: JsonLog,
}

/// What recovery reads back.
pub type Recovered = (Store, Option<Checkpoint>, Vec<Record>);

impl Store {
    /// Opens (creating) the data directory and returns the checkpoint and the log's
    /// records. A torn or unparsable log tail (a crash mid-append) is cut off.
    pub fn open(dir: &Path) -> Result<Recovered, StorageError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let checkpoint = files::read_json::<Checkpoint>(&dir.join("checkpoint.json"))?;
        let (log, records) = JsonLog::open(&dir.join("log.jsonl"))?;
        let store = Store {
            dir: dir.to_path_buf(),
            log,
        };
        Ok((store, checkpoint, records))
    }

    /// Appends a record; durable after the next [`Store::sync`] if `sync`, else only as
    /// durable as the OS makes it (it survives a process kill, not a power cut).
    pub fn append(&mut self, record: &Record, sync: bool) -> Result<(), StorageError> {
        self.log.append(record, sync)
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<(), StorageError> {
        self.log.sync()
    }

    /// Atomically installs a new checkpoint, then a new log holding `log`.
    pub fn replace(&mut self, checkpoint: &Checkpoint, log: &[Record]) -> Result<(), StorageError> {
        self.sync()?;
        let ck = serde_json::to_vec(checkpoint).unwrap_or_default();
        files::write_atomic(&self.dir, "checkpoint.json", &ck, true)?;
        let bytes: Vec<u8> = log.iter().flat_map(files::json_line).collect();
        files::write_atomic(&self.dir, "log.jsonl", &bytes, true)?;
        self.log.reopen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Op, Wid, Write as LoggedWrite};
    use std::fs::OpenOptions;
    use std::io::Write;

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
