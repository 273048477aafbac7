//! Clock offsets for unmodified programs through libfaketime (Debian package `faketime`).
//!
//! Each node gets an offset file; start the node with [`FaketimeClocks::env`] added to its
//! environment, and [`FaketimeClocks::set_offset`] moves its clock while it runs (the
//! library re-reads the file on every time call, `FAKETIME_NO_CACHE=1`). A harness can
//! implement [`crate::ClusterControl::set_clock_offset`] with it for third-party servers.
//! Statically linked programs and programs that read the clock through the vDSO without
//! libc are not affected.

use std::path::{Path, PathBuf};

use crate::NemesisError;

/// Where Debian and others install the library (multi-threaded variant preferred); a
/// remote host is searched for the same paths.
pub const LIBRARY_CANDIDATES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
];

/// Per-node libfaketime offset files.
pub struct FaketimeClocks {
    library: PathBuf,
    files: Vec<PathBuf>,
}

impl FaketimeClocks {
    /// The libfaketime library, if installed.
    pub fn library() -> Option<PathBuf> {
        LIBRARY_CANDIDATES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    }

    /// Offset files for `n` nodes in `dir` (created if needed), all at offset 0.
    pub fn new(dir: &Path, n: usize) -> Result<FaketimeClocks, NemesisError> {
        let library = FaketimeClocks::library().ok_or_else(|| {
            NemesisError::Unsupported(
                "libfaketime is not installed (Debian package faketime)".into(),
            )
        })?;
        std::fs::create_dir_all(dir)?;
        let clocks = FaketimeClocks {
            library,
            files: (0..n)
                .map(|i| dir.join(format!("faketime-n{}", i + 1)))
                .collect(),
        };
        for i in 0..n {
            clocks.set_offset(i, 0)?;
        }
        Ok(clocks)
    }

    /// Environment variables to start node `i` with.
    pub fn env(&self, i: usize) -> Vec<(String, String)> {
        let Some(file) = self.files.get(i) else {
            return Vec::new();
        };
        preload_env(
            &self.library.display().to_string(),
            &file.display().to_string(),
        )
    }

    /// Moves node `i`'s clock to `offset_ms` from real time. The file is replaced
    /// atomically so a reading process never sees half a value.
    pub fn set_offset(&self, i: usize, offset_ms: i64) -> Result<(), NemesisError> {
        let file = self
            .files
            .get(i)
            .ok_or_else(|| NemesisError::Fault(format!("no node n{}", i + 1)))?;
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, offset_text(offset_ms))?;
        std::fs::rename(&tmp, file)?;
        Ok(())
    }
}

/// The environment that makes a process read its wall clock from libfaketime at
/// `library`, offset by what `offset_file` says (re-read on every call).
pub fn preload_env(library: &str, offset_file: &str) -> Vec<(String, String)> {
    vec![
        ("LD_PRELOAD".into(), library.to_string()),
        ("FAKETIME_TIMESTAMP_FILE".into(), offset_file.to_string()),
        ("FAKETIME_NO_CACHE".into(), "1".into()),
        // skew moves wall clocks; monotonic clocks (timeouts) stay true
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

/// An offset file's contents for `offset_ms`: libfaketime's relative format, "+3.250" or
/// "-0.500" seconds.
pub fn offset_text(offset_ms: i64) -> String {
    format!("{:+.3}\n", offset_ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_written_in_libfaketimes_relative_seconds() {
        assert_eq!(offset_text(3250), "+3.250\n");
        assert_eq!(offset_text(-500), "-0.500\n");
        assert_eq!(offset_text(0), "+0.000\n");
    }
}
