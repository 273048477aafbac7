//! The run store: `store/<test-name>/<timestamp>/` with test.json, history.jsonl,
//! results.json, report.html and node logs, plus `store/latest` and
//! `store/<test-name>/latest` links; and reading stored runs back (`compare`, `serve`).

use splitbrain_reports::{ComparedRun, RunOptions, RunSummary};
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
        let path = fresh_dir(&test_dir, &stamp)?;
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

/// Points `link` at `target` atomically: the new link is made under a name of its own and
/// renamed over the old one, so concurrent runs (a suite with `--jobs 2`) sharing
/// `store/latest` never see it missing or collide on creating it.
fn relink(link: &Path, target: &Path) -> std::io::Result<()> {
    let name = link.file_name().unwrap_or_default().to_string_lossy();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = link.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()));
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::os::unix::fs::symlink(target, &tmp)?;
    std::fs::rename(&tmp, link)
}

/// `YYYYMMDDTHHMMSS` in UTC: wall-clock time only names runs.
/// `parent/<stamp>`, or `<stamp>-1`, `-2`, ... when that exists: two runs (or checks) in
/// the same second get distinct directories.
fn fresh_dir(parent: &Path, stamp: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(parent)?;
    let mut path = parent.join(stamp);
    let mut n = 1;
    loop {
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                path = parent.join(format!("{stamp}-{n}"));
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// A stored run is a record: a re-check never rewrites what the run wrote. It goes into
/// a fresh `checks/<stamp>/` of the run directory, and the run's results.json gains (or
/// updates) two fields, every other field kept as the run wrote it: `checks`, the list
/// of re-checks (directory, when, verdict), and `current`, the one readers should show.
/// Returns the new check's directory.
pub fn record_recheck(
    run: &Path,
    write: impl FnOnce(&Path) -> anyhow::Result<()>,
    valid: splitbrain_checkers::Validity,
) -> anyhow::Result<PathBuf> {
    use anyhow::Context;
    let dir = fresh_dir(&run.join("checks"), &wall_clock_stamp())
        .with_context(|| format!("creating a check directory in {}", run.display()))?;
    write(&dir)?;
    let results = run.join("results.json");
    let mut record: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&results).with_context(|| format!("reading {}", results.display()))?,
    )
    .with_context(|| format!("parsing {}", results.display()))?;
    let rel = dir
        .strip_prefix(run)
        .unwrap_or(&dir)
        .to_string_lossy()
        .into_owned();
    let entry = serde_json::json!({
        "dir": rel,
        "at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "valid": valid,
    });
    let obj = record
        .as_object_mut()
        .with_context(|| format!("{} is not a JSON object", results.display()))?;
    match obj.get_mut("checks").and_then(|c| c.as_array_mut()) {
        Some(list) => list.push(entry),
        None => {
            obj.insert("checks".into(), serde_json::json!([entry]));
        }
    }
    obj.insert("current".into(), serde_json::json!(rel));
    // Written whole to a temporary file, then renamed: a crash leaves the old record.
    let tmp = run.join(".results.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&record)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &results).with_context(|| format!("replacing {}", results.display()))?;
    Ok(dir)
}

fn wall_clock_stamp() -> String {
    chrono::Utc::now().format(STAMP_FORMAT).to_string()
}

/// How run directories are named (UTC).
const STAMP_FORMAT: &str = "%Y%m%dT%H%M%S";

/// Why a stored run could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StoredRunError {
    /// Neither the directory nor its `latest` run holds a results.json.
    #[error("{0} is not a run directory (no results.json in it or in its `latest` run)")]
    NotARun(PathBuf),
    /// results.json could not be read or parsed.
    #[error("{path}: {why}")]
    Results {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// Reads a run's `test.json` (what it was asked to do) and `results.json` (what it
/// found). A test directory stands for its `latest` run.
pub fn load_run(path: &Path) -> Result<ComparedRun, StoredRunError> {
    let dir = if path.join("results.json").is_file() {
        path.to_path_buf()
    } else if path.join("latest").join("results.json").is_file() {
        path.join("latest")
    } else {
        return Err(StoredRunError::NotARun(path.to_path_buf()));
    };
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    let results = dir.join("results.json");
    let bad = |why: String| StoredRunError::Results {
        path: results.clone(),
        why,
    };
    let text = std::fs::read_to_string(&results).map_err(|e| bad(e.to_string()))?;
    let record: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("not a splitbrain results.json: {e}")))?;
    // A re-checked run is shown as its current check says (`record_recheck`).
    let current = record["current"]
        .as_str()
        .map(|rel| dir.join(rel).join("results.json"))
        .filter(|p| p.is_file());
    let summary: RunSummary = match current {
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
            serde_json::from_str(&text).map_err(|e| {
                bad(format!(
                    "{}: not a splitbrain results.json: {e}",
                    path.display()
                ))
            })?
        }
        None => serde_json::from_value(record)
            .map_err(|e| bad(format!("not a splitbrain results.json: {e}")))?,
    };
    // test.json is absent for `splitbrain check` on a bare history; options stay blank then.
    let spec: serde_json::Value = std::fs::read_to_string(dir.join("test.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    Ok(ComparedRun {
        label: run_label(&dir),
        options: options_from_spec(&spec),
        summary,
    })
}

/// Every run directory under `root` (`<test>/<run>/`); `latest` links, which would name
/// a run twice, are not followed.
fn run_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(tests) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    tests
        .flatten()
        .filter(|test| test.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|test| std::fs::read_dir(test.path()).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|run| run.file_type().is_ok_and(|t| t.is_dir()))
        .map(|run| run.path())
        .collect()
}

/// Every run under `root` (`<test>/<run>/results.json`), newest first; `latest` links
/// and unreadable runs are skipped.
pub fn list_runs(root: &Path) -> Vec<ComparedRun> {
    let mut runs: Vec<ComparedRun> = run_dirs(root)
        .iter()
        .filter_map(|dir| load_run(dir).ok())
        .collect();
    runs.sort_by(|a, b| run_time(b).cmp(&run_time(a)).then(a.label.cmp(&b.label)));
    runs
}

/// The runs of the store that have a `live.json` but no `results.json` yet (running, or
/// whose process died before its check), newest first, as (`<test>/<run>`, last status).
pub fn list_running(root: &Path) -> Vec<(String, crate::run::live::LiveStatus)> {
    let mut running: Vec<(String, crate::run::live::LiveStatus)> = run_dirs(root)
        .iter()
        .filter(|dir| !dir.join("results.json").exists())
        .filter_map(|dir| Some((run_label(dir), crate::run::live::read_status(dir)?)))
        .collect();
    running.sort_by(|a, b| b.0.cmp(&a.0));
    running
}

/// When a run started, from its directory name (`<test>/<YYYYMMDDTHHMMSS>[-n]`).
pub fn run_time(run: &ComparedRun) -> Option<chrono::NaiveDateTime> {
    let name = run.label.rsplit('/').next()?;
    let stamp = name.split('-').next()?;
    chrono::NaiveDateTime::parse_from_str(stamp, STAMP_FORMAT).ok()
}

/// `<test>/<run>`: the run's path inside the store.
fn run_label(dir: &Path) -> String {
    let parts: Vec<String> = dir
        .components()
        .rev()
        .take(2)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

fn options_from_spec(spec: &serde_json::Value) -> RunOptions {
    let text = |k: &str| spec.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let list = |k: &str| -> Vec<String> {
        spec.get(k)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut faults = list("nemesis");
    if spec.get("nemesis_plan").is_some_and(|p| !p.is_null()) {
        faults = vec!["plan".to_string()];
    }
    RunOptions {
        target: text("target").unwrap_or_else(|| "-".into()),
        workload: text("workload").unwrap_or_else(|| "-".into()),
        read_mode: text("read_mode"),
        bugs: list("bugs"),
        settings: list("settings"),
        faults,
        nodes: spec
            .get("nodes")
            .and_then(|v| v.as_u64())
            .map(|n| n as usize),
        seed: spec.get("seed").and_then(|v| v.as_u64()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_parse_back_to_the_run_time() {
        let stamp = wall_clock_stamp();
        assert_eq!(stamp.len(), 15, "{stamp}");
        let run = |label: &str| ComparedRun {
            label: label.into(),
            options: RunOptions::default(),
            summary: RunSummary::new(String::new(), None, Vec::new(), Default::default(), None),
        };
        let t = run_time(&run(&format!("kv-register/{stamp}-2"))).unwrap();
        assert_eq!(t.format(STAMP_FORMAT).to_string(), stamp);
        assert!(run_time(&run("kv-register/latest")).is_none());
    }

    #[test]
    fn reads_options_from_test_json() {
        let spec = serde_json::json!({
            "target": "txn", "workload": "bank", "read_mode": "read-committed",
            "bugs": ["early-lock-release"], "nemesis": ["partition", "kill"],
            "nemesis_plan": null, "nodes": 3, "seed": 7
        });
        let o = options_from_spec(&spec);
        assert_eq!(o.target, "txn");
        assert_eq!(o.read_mode.as_deref(), Some("read-committed"));
        assert_eq!(o.bugs, ["early-lock-release"]);
        assert_eq!(o.faults, ["partition", "kill"]);
        assert_eq!((o.nodes, o.seed), (Some(3), Some(7)));
        let planned =
            options_from_spec(&serde_json::json!({"nemesis": [], "nemesis_plan": "p.json"}));
        assert_eq!(planned.faults, ["plan"]);
        assert_eq!(planned.target, "-");
        assert_eq!(
            run_label(Path::new("/x/store/kv-register/20261201T010203")),
            "kv-register/20261201T010203"
        );
    }

    #[test]
    fn lists_runs_newest_first_and_skips_what_is_not_a_run() {
        let root = tempfile::tempdir().unwrap();
        let summary = RunSummary::new("t".into(), None, Vec::new(), Default::default(), None);
        for (test, stamp) in [
            ("a", "20261201T010000"),
            ("b", "20261201T020000"),
            ("a", "20261130T230000"),
        ] {
            let dir = root.path().join(test).join(stamp);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("results.json"),
                serde_json::to_string(&summary).unwrap(),
            )
            .unwrap();
        }
        std::fs::create_dir_all(root.path().join("a/20261201T030000")).unwrap();
        std::os::unix::fs::symlink("20261201T010000", root.path().join("a/latest")).unwrap();
        let labels: Vec<String> = list_runs(root.path())
            .into_iter()
            .map(|r| r.label)
            .collect();
        assert_eq!(
            labels,
            [
                "b/20261201T020000",
                "a/20261201T010000",
                "a/20261130T230000"
            ]
        );
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

    /// A suite with `--jobs 2` opens runs side by side; the shared `latest` links must
    /// never make one of them fail (the old remove-then-create raced to EEXIST).
    #[test]
    fn concurrent_runs_all_get_directories_and_latest_stays_a_link() {
        let root = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let root = root.path();
                    s.spawn(move || {
                        (0..25)
                            .map(|_| RunDir::create(root, ["t", "u"][i % 2]).unwrap().path)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        let distinct: std::collections::HashSet<_> = paths.iter().collect();
        assert_eq!(distinct.len(), 200);
        let latest = std::fs::canonicalize(root.path().join("latest")).unwrap();
        assert!(paths
            .iter()
            .any(|p| std::fs::canonicalize(p).unwrap() == latest));
        let leftovers: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
