//! Durable storage of one Raft group member in its own directory.
//!
//! Files:
//! - `meta.json`: `{"term":..,"vote":..}`, replaced atomically (write a temporary file,
//!   fsync it, rename it over, fsync the directory).
//! - `snapshot.json`: the latest snapshot, replaced the same way.
//! - `log.bin`: a 24-byte header (magic, and the snapshot point the file was written
//!   for), then append-only records `[len u32 LE][crc32 u32 LE][JSON entry]`. Records are
//!   fsync'd before the node answers. At restart a torn or corrupt tail (a crash in the
//!   middle of a write) is cut off. An entry whose index is at or below an earlier one
//!   replaces it and everything after it (the §5.3 conflict rule, replayed).
//!
//! With the `no-fsync` bug, nothing is fsync'd and new records and metadata stay in a
//! user-space buffer that is written out only every few seconds, so `kill -9` loses
//! state the node already acknowledged.

use crate::core::{Entry, HardState, Persisted, Snapshot, StorageOp};
pub use splitbrain_target_runtime::storage::StorageError;
use splitbrain_target_runtime::storage::{self as files, io_err, open_append};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"SBKVLOG1";
const HEADER_LEN: usize = 24;
/// How long the `no-fsync` bug keeps writes in memory.
const NO_FSYNC_FLUSH: Duration = Duration::from_secs(3);

/// CRC-32 (IEEE, reflected), bit by bit: records are small.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// One member's storage directory.
#[derive(Debug)]
pub struct Storage {
    dir: PathBuf,
    log: File,
    no_fsync: bool,
    buffered_log: Vec<u8>,
    buffered_meta: Option<HardState>,
    last_flush: Instant,
}

impl Storage {
    /// Opens (creating if needed) the directory and reads what was persisted.
    pub fn open(dir: &Path, no_fsync: bool) -> Result<(Storage, Persisted), StorageError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let hard_state: HardState = files::read_json(&dir.join("meta.json"))?.unwrap_or_default();
        let snapshot: Option<Snapshot> = files::read_json(&dir.join("snapshot.json"))?;
        let log_path = dir.join("log.bin");
        let (base, mut entries, good_len) = read_log(&log_path)?;
        let (snap_index, snap_term) = snapshot.as_ref().map_or((0, 0), |s| (s.index, s.term));
        // Keep the log only if it continues the snapshot: it was written for it, or it
        // holds the snapshot's last entry (a crash between writing the two files).
        let continues = base == (snap_index, snap_term)
            || entries
                .iter()
                .any(|e| e.index == snap_index && e.term == snap_term);
        if !continues {
            entries.clear();
        }
        entries.retain(|e| e.index > snap_index);
        let mut storage = Storage {
            dir: dir.to_path_buf(),
            log: open_append(&log_path)?,
            no_fsync,
            buffered_log: Vec::new(),
            buffered_meta: None,
            last_flush: Instant::now(),
        };
        if good_len < HEADER_LEN as u64 || !continues {
            storage.rewrite_log(snap_index, snap_term, &entries)?;
        } else {
            // Cut a torn tail so new records follow the last good one.
            storage.log.set_len(good_len).map_err(io_err(&log_path))?;
            storage.log.sync_all().map_err(io_err(&log_path))?;
        }
        Ok((
            storage,
            Persisted {
                hard_state,
                snapshot,
                entries,
            },
        ))
    }

    /// Persists a core's `Ready` outputs durably (unless the `no-fsync` bug is on).
    pub fn persist(
        &mut self,
        hard_state: Option<HardState>,
        ops: &[StorageOp],
    ) -> Result<(), StorageError> {
        for op in ops {
            match op {
                StorageOp::Append(entries) => {
                    for entry in entries {
                        let payload = serde_json::to_vec(entry).unwrap_or_default();
                        self.buffered_log
                            .extend_from_slice(&(payload.len() as u32).to_le_bytes());
                        self.buffered_log
                            .extend_from_slice(&crc32(&payload).to_le_bytes());
                        self.buffered_log.extend_from_slice(&payload);
                    }
                }
                StorageOp::Snapshot { snapshot, retained } => {
                    self.flush_log(false)?;
                    let bytes = serde_json::to_vec(snapshot).unwrap_or_default();
                    self.write_atomic("snapshot.json", &bytes)?;
                    self.rewrite_log(snapshot.index, snapshot.term, retained)?;
                }
            }
        }
        if let Some(hs) = hard_state {
            self.buffered_meta = Some(hs);
        }
        if self.no_fsync {
            self.maybe_flush()
        } else {
            self.flush_log(true)?;
            self.flush_meta()
        }
    }

    /// With the `no-fsync` bug: writes out (without fsync) what has been buffered for a
    /// few seconds. Call regularly.
    pub fn maybe_flush(&mut self) -> Result<(), StorageError> {
        if self.no_fsync && self.last_flush.elapsed() >= NO_FSYNC_FLUSH {
            self.last_flush = Instant::now();
            self.flush_log(false)?;
            self.flush_meta()?;
        }
        Ok(())
    }

    fn flush_log(&mut self, sync: bool) -> Result<(), StorageError> {
        if self.buffered_log.is_empty() {
            return Ok(());
        }
        let path = self.dir.join("log.bin");
        self.log
            .write_all(&self.buffered_log)
            .map_err(io_err(&path))?;
        self.buffered_log.clear();
        if sync {
            self.log.sync_data().map_err(io_err(&path))?;
        }
        Ok(())
    }

    fn flush_meta(&mut self) -> Result<(), StorageError> {
        if let Some(hs) = self.buffered_meta.take() {
            let bytes = serde_json::to_vec(&hs).unwrap_or_default();
            self.write_atomic("meta.json", &bytes)?;
        }
        Ok(())
    }

    /// Replaces `name` atomically: temp file, fsync, rename, fsync the directory (no
    /// fsyncs with the `no-fsync` bug).
    fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
        files::write_atomic(&self.dir, name, bytes, !self.no_fsync)
    }

    /// Writes a fresh log file for snapshot point `(index, term)` holding `entries`.
    fn rewrite_log(
        &mut self,
        index: u64,
        term: u64,
        entries: &[Entry],
    ) -> Result<(), StorageError> {
        let mut bytes = Vec::with_capacity(HEADER_LEN);
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&index.to_le_bytes());
        bytes.extend_from_slice(&term.to_le_bytes());
        for entry in entries {
            let payload = serde_json::to_vec(entry).unwrap_or_default();
            bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32(&payload).to_le_bytes());
            bytes.extend_from_slice(&payload);
        }
        self.write_atomic("log.bin", &bytes)?;
        self.log = open_append(&self.dir.join("log.bin"))?;
        Ok(())
    }
}

/// What the log file holds: the snapshot point it was written for, its entries
/// (conflicts replayed), and the length of its good prefix.
type LogContents = ((u64, u64), Vec<Entry>, u64);

/// Reads the log file.
fn read_log(path: &Path) -> Result<LogContents, StorageError> {
    let Some(bytes) = files::read_if_exists(path)? else {
        return Ok(((0, 0), Vec::new(), 0));
    };
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
        return Ok(((0, 0), Vec::new(), 0));
    }
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let base = (word(8), word(16));
    let mut entries: Vec<Entry> = Vec::new();
    let mut pos = HEADER_LEN;
    while pos + 8 <= bytes.len() {
        let len = u32::from_le_bytes([bytes[pos], bytes[pos + 1], bytes[pos + 2], bytes[pos + 3]])
            as usize;
        let crc = u32::from_le_bytes([
            bytes[pos + 4],
            bytes[pos + 5],
            bytes[pos + 6],
            bytes[pos + 7],
        ]);
        let Some(payload) = bytes.get(pos + 8..pos + 8 + len) else {
            break;
        };
        if crc32(payload) != crc {
            break;
        }
        let Ok(entry) = serde_json::from_slice::<Entry>(payload) else {
            break;
        };
        let first = entries.first().map_or(base.0 + 1, |e| e.index);
        if entry.index < first || entry.index > first + entries.len() as u64 {
            break;
        }
        entries.truncate((entry.index - first) as usize);
        entries.push(entry);
        pos += 8 + len;
    }
    Ok((base, entries, pos as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            term,
            index,
            data: vec![index as u8],
        }
    }

    #[test]
    fn crc_matches_reference() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn persists_replays_conflicts_and_cuts_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut s, p) = Storage::open(dir.path(), false).unwrap();
            assert!(p.entries.is_empty());
            let hs = HardState {
                term: 3,
                vote: Some(2),
            };
            s.persist(
                Some(hs),
                &[StorageOp::Append(vec![
                    entry(1, 1),
                    entry(1, 2),
                    entry(2, 3),
                ])],
            )
            .unwrap();
            // Conflict at index 2 replaces 2 and 3.
            s.persist(None, &[StorageOp::Append(vec![entry(3, 2)])])
                .unwrap();
        }
        // A torn record at the end.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("log.bin"))
            .unwrap();
        f.write_all(&[50, 0, 0, 0, 1, 2]).unwrap();
        drop(f);
        let (mut s, p) = Storage::open(dir.path(), false).unwrap();
        assert_eq!(
            p.hard_state,
            HardState {
                term: 3,
                vote: Some(2)
            }
        );
        assert_eq!(p.entries, vec![entry(1, 1), entry(3, 2)]);
        s.persist(None, &[StorageOp::Append(vec![entry(3, 3)])])
            .unwrap();
        let snap = Snapshot {
            index: 2,
            term: 3,
            data: b"x".to_vec(),
        };
        s.persist(
            None,
            &[StorageOp::Snapshot {
                snapshot: snap.clone(),
                retained: vec![entry(3, 3)],
            }],
        )
        .unwrap();
        s.persist(None, &[StorageOp::Append(vec![entry(4, 4)])])
            .unwrap();
        drop(s);
        let (_, p) = Storage::open(dir.path(), false).unwrap();
        assert_eq!(p.snapshot, Some(snap));
        assert_eq!(p.entries, vec![entry(3, 3), entry(4, 4)]);
    }

    #[test]
    fn no_fsync_keeps_writes_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = Storage::open(dir.path(), true).unwrap();
        s.persist(
            Some(HardState {
                term: 1,
                vote: Some(1),
            }),
            &[StorageOp::Append(vec![entry(1, 1)])],
        )
        .unwrap();
        // Simulates kill -9: the process dies with the buffer.
        std::mem::forget(s);
        let (_, p) = Storage::open(dir.path(), false).unwrap();
        assert!(p.entries.is_empty());
        assert_eq!(p.hard_state, HardState::default());
    }
}
