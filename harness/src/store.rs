//! The run store: `store/<test-name>/<timestamp>/` with test.json, history.jsonl,
//! results.json, report.html and node logs, plus `store/latest` and
//! `store/<test-name>/latest` links.

use std::path::{Path, PathBuf};

/// One run's directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The directory itself.
    pub path: PathBuf,
}

impl RunDir {
    /// Creates `root/<test_name>/<timestamp>` and points the `latest` links at it.
    pub fn create(root: &Path, test_name: &str) -> std::io::Result<RunDir> {
        let stamp = wall_clock_stamp();
        let test_dir = root.join(test_name);
        std::fs::create_dir_all(&test_dir)?;
        // Two runs in the same second get distinct directories.
        let mut path = test_dir.join(&stamp);
        let mut n = 1;
        while path.exists() {
            path = test_dir.join(format!("{stamp}-{n}"));
            n += 1;
        }
        std::fs::create_dir_all(path.join("nodes"))?;
        let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        relink(&root.join("latest"), &rel)?;
        relink(
            &test_dir.join("latest"),
            Path::new(path.file_name().unwrap_or_default()),
        )?;
        Ok(RunDir { path })
    }

    /// `test.json`.
    pub fn test_json(&self) -> PathBuf {
        self.path.join("test.json")
    }
    /// `history.jsonl`.
    pub fn history(&self) -> PathBuf {
        self.path.join("history.jsonl")
    }
    /// `results.json`.
    pub fn results(&self) -> PathBuf {
        self.path.join("results.json")
    }
    /// `report.html`.
    pub fn report(&self) -> PathBuf {
        self.path.join("report.html")
    }
    /// Directory for node `name`'s data and log.
    pub fn node_dir(&self, name: &str) -> PathBuf {
        self.path.join("nodes").join(name)
    }
}

fn relink(link: &Path, target: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(link) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::os::unix::fs::symlink(target, link)
}

/// `YYYYMMDDTHHMMSS` in UTC: wall-clock time only names runs.
fn wall_clock_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn creates_dirs_and_latest_links() {
        let root = tempfile::tempdir().unwrap();
        let a = RunDir::create(root.path(), "t").unwrap();
        let b = RunDir::create(root.path(), "t").unwrap();
        assert_ne!(a.path, b.path);
        let latest = std::fs::canonicalize(root.path().join("latest")).unwrap();
        assert_eq!(latest, std::fs::canonicalize(&b.path).unwrap());
        let t_latest = std::fs::canonicalize(root.path().join("t/latest")).unwrap();
        assert_eq!(t_latest, latest);
    }
}
