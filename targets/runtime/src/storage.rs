//! Durable files shared by the bundled targets: an append-only log of JSON lines whose
//! torn tail (a crash mid-append) is cut off at open, optional JSON files, and files
//! replaced atomically (write a temporary file, fsync it, rename it over the old one,
//! fsync the directory).
//!
//! A target keeps its file layout and its record types; these helpers only do the I/O and
//! name the file in every error.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A storage failure: the node cannot go on safely.
#[derive(Debug)]
pub enum StorageError {
    /// An I/O error on a file.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A file that must parse did not.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
}

impl std::fmt::Display for StorageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StorageError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            StorageError::Corrupt { path, detail } => {
                write!(f, "{}: corrupt: {detail}", path.display())
            }
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StorageError::Io { source, .. } => Some(source),
            StorageError::Corrupt { .. } => None,
        }
    }
}

/// Maps an I/O error on `path` to a [`StorageError`] naming it.
pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads a whole file; `None` if it does not exist.
pub fn read_if_exists(path: &Path) -> Result<Option<Vec<u8>>, StorageError> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes).map_err(io_err(path))?;
            Ok(Some(bytes))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Reads a JSON file; `None` if it does not exist, [`StorageError::Corrupt`] if it does
/// not parse.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StorageError> {
    let Some(bytes) = read_if_exists(path)? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| StorageError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })
}

/// Opens `path` for appending, creating it if missing.
pub fn open_append(path: &Path) -> Result<File, StorageError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_err(path))
}

/// Fsyncs a directory, so a rename or a new file in it survives a power cut.
pub fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Replaces `dir/name` with `bytes` atomically: write `dir/name.tmp`, rename it over.
/// With `durable`, the temporary file is fsync'd before the rename and the directory
/// after it; without (a deliberate no-fsync bug), a kill can still not tear the file,
/// but a power cut may lose it.
pub fn write_atomic(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durable: bool,
) -> Result<(), StorageError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    {
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(bytes).map_err(io_err(&tmp))?;
        if durable {
            f.sync_all().map_err(io_err(&tmp))?;
        }
    }
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// One record as a JSON line (compact JSON never holds a raw newline).
pub fn json_line<R: Serialize>(record: &R) -> Vec<u8> {
    let mut line = serde_json::to_vec(record).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Parses complete, valid lines; returns them and the length of that good prefix.
pub fn parse_json_lines<R: DeserializeOwned>(bytes: &[u8]) -> (Vec<R>, usize) {
    let mut records = Vec::new();
    let mut pos = 0;
    while let Some(end) = bytes[pos..].iter().position(|b| *b == b'\n') {
        let Ok(record) = serde_json::from_slice::<R>(&bytes[pos..pos + end]) else {
            break;
        };
        records.push(record);
        pos += end + 1;
    }
    (records, pos)
}

/// An append-only file of JSON lines, one record each.
#[derive(Debug)]
pub struct JsonLog {
    path: PathBuf,
    file: File,
    needs_sync: bool,
}

impl JsonLog {
    /// Opens (creating) the log at `path` and returns its records. A torn or unparsable
    /// tail (a crash mid-append) is cut off, and the cut fsync'd, so new records follow
    /// the last good one.
    pub fn open<R: DeserializeOwned>(path: &Path) -> Result<(JsonLog, Vec<R>), StorageError> {
        let bytes = read_if_exists(path)?.unwrap_or_default();
        let (records, good_len) = parse_json_lines(&bytes);
        let file = open_append(path)?;
        if good_len < bytes.len() {
            file.set_len(good_len as u64).map_err(io_err(path))?;
            file.sync_all().map_err(io_err(path))?;
        }
        let log = JsonLog {
            path: path.to_path_buf(),
            file,
            needs_sync: false,
        };
        Ok((log, records))
    }

    /// Appends a record; durable after the next [`JsonLog::sync`] if `sync`, else only as
    /// durable as the OS makes it (it survives a process kill, not a power cut).
    pub fn append<R: Serialize>(&mut self, record: &R, sync: bool) -> Result<(), StorageError> {
        self.append_bytes(&json_line(record), sync)
    }

    /// Appends lines already encoded (see [`json_line`]).
    pub fn append_bytes(&mut self, lines: &[u8], sync: bool) -> Result<(), StorageError> {
        self.file.write_all(lines).map_err(io_err(&self.path))?;
        self.needs_sync |= sync;
        Ok(())
    }

    /// Makes every record appended with `sync` durable (one `fdatasync`, if any).
    pub fn sync(&mut self) -> Result<(), StorageError> {
        if self.needs_sync {
            self.file.sync_data().map_err(io_err(&self.path))?;
            self.needs_sync = false;
        }
        Ok(())
    }

    /// Opens the file again, after it was replaced (e.g. by [`write_atomic`]).
    pub fn reopen(&mut self) -> Result<(), StorageError> {
        self.file = open_append(&self.path)?;
        self.needs_sync = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "splitbrain-runtime-storage-{tag}-{}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_log_cuts_its_torn_tail_and_appends_after_the_last_good_record() {
        let dir = temp_dir("log");
        let path = dir.join("log.jsonl");
        {
            let (mut log, records) = JsonLog::open::<u64>(&path).unwrap();
            assert!(records.is_empty());
            log.append(&1u64, true).unwrap();
            log.append(&2u64, false).unwrap();
            log.sync().unwrap();
        }
        let mut f = open_append(&path).unwrap();
        f.write_all(b"3").unwrap();
        drop(f);
        let (mut log, records) = JsonLog::open::<u64>(&path).unwrap();
        assert_eq!(records, vec![1, 2]);
        log.append(&4u64, true).unwrap();
        log.sync().unwrap();
        drop(log);
        let (_, records) = JsonLog::open::<u64>(&path).unwrap();
        assert_eq!(records, vec![1, 2, 4]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn atomic_files_replace_and_a_bad_one_is_named_corrupt() {
        let dir = temp_dir("atomic");
        let path = dir.join("meta.json");
        assert_eq!(read_json::<Vec<u64>>(&path).unwrap(), None);
        write_atomic(&dir, "meta.json", b"[1,2]", true).unwrap();
        write_atomic(&dir, "meta.json", b"[3]", false).unwrap();
        assert_eq!(read_json::<Vec<u64>>(&path).unwrap(), Some(vec![3]));
        assert!(!dir.join("meta.json.tmp").exists());
        fs::write(&path, b"[3").unwrap();
        let err = read_json::<Vec<u64>>(&path).unwrap_err();
        assert!(matches!(err, StorageError::Corrupt { .. }), "{err}");
        assert!(err.to_string().starts_with(&path.display().to_string()));
        let _ = fs::remove_dir_all(&dir);
    }
}
