//! The guided search's memory across runs (`--nemesis-memory`): the (state, fault) reward
//! table guided runs of one system configuration leave for the next, kept in the run
//! store beside the runs, as `STORE/<target>-<workload>/guided-memory--<bug>--<faults>--n<nodes>.json`
//! (a file, so listing the store's runs does not take it for one).
//!
//! A missing file is a cold start; an unreadable one, or one made for another
//! configuration, is a warning: the run starts cold and leaves the file as it is (so a
//! table someone edited by hand is not lost). The file is replaced atomically (a
//! temporary file renamed over it), so a run stopped midway never leaves half a table.

use std::path::{Path, PathBuf};

use splitbrain_nemesis::{Memory, MemoryStart, Nemesis, Search};

use crate::run::spec::TestSpec;

/// What names a configuration's memory: the target, the workload, the bugs enabled (or
/// `none`), the fault kinds asked for (sorted) and the node count.
pub fn key(spec: &TestSpec) -> String {
    format!(
        "target={} workload={} bug={} nemesis={} nodes={}",
        spec.target,
        spec.workload,
        bugs(spec),
        kinds(spec),
        spec.nodes
    )
}

fn bugs(spec: &TestSpec) -> String {
    let mut bugs = spec.bugs.clone();
    bugs.sort();
    if bugs.is_empty() {
        "none".to_string()
    } else {
        bugs.join("+")
    }
}

fn kinds(spec: &TestSpec) -> String {
    let mut kinds = spec.nemesis.clone();
    kinds.sort();
    kinds.join("+")
}

/// The memory file a run reads and writes: `--nemesis-memory PATH`, or else the store's
/// for its configuration; `None` for `off` and for runs that do not search (random, a
/// plan).
pub fn path(spec: &TestSpec) -> Option<PathBuf> {
    if spec.nemesis_search != Search::Guided || spec.nemesis_plan.is_some() {
        return None;
    }
    match spec.nemesis_memory.as_deref() {
        Some("off") => None,
        Some(p) => Some(PathBuf::from(p)),
        None => {
            let safe = |s: String| -> String {
                s.chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || "+-_".contains(c) {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect()
            };
            let file = format!(
                "guided-memory--{}--{}--n{}.json",
                safe(bugs(spec)),
                safe(kinds(spec)),
                spec.nodes
            );
            Some(
                spec.store
                    .join(format!("{}-{}", spec.target, spec.workload))
                    .join(file),
            )
        }
    }
}

/// What reading a memory file gave.
#[derive(Debug, PartialEq)]
pub enum Loaded {
    /// No file: a cold start.
    Missing,
    /// A table for this configuration.
    Found(Memory),
    /// A file that cannot be used: why.
    Unusable(String),
}

/// Reads the memory at `path`, made for the configuration `key`.
pub fn load(path: &Path, key: &str) -> Loaded {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Loaded::Missing,
        Err(e) => return Loaded::Unusable(format!("cannot be read: {e}")),
    };
    let memory: Memory = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(e) => return Loaded::Unusable(format!("is not a guided memory: {e}")),
    };
    if let Err(e) = memory.validate() {
        return Loaded::Unusable(format!("is not a guided memory: {e}"));
    }
    if memory.key != key {
        return Loaded::Unusable(format!(
            "was made for another configuration ({})",
            memory.key
        ));
    }
    Loaded::Found(memory)
}

/// Replaces `path` with `memory`: written to a temporary file beside it, then renamed.
pub fn write(path: &Path, memory: &Memory) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let body = serde_json::to_vec_pretty(memory).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Starts a guided run's search from its memory (reading it, warning when it cannot be
/// used); other runs are returned as they are.
pub fn attach(nemesis: Nemesis, spec: &TestSpec) -> Nemesis {
    if spec.nemesis_search != Search::Guided || spec.nemesis_plan.is_some() {
        return nemesis;
    }
    let Some(path) = path(spec) else {
        let off = MemoryStart {
            file: "off".to_string(),
            ..MemoryStart::default()
        };
        return nemesis.with_memory(None, off);
    };
    let file = path.display().to_string();
    match load(&path, &key(spec)) {
        Loaded::Missing => nemesis.with_memory(
            None,
            MemoryStart {
                file,
                ..MemoryStart::default()
            },
        ),
        Loaded::Found(m) => {
            let start = MemoryStart {
                file,
                runs: m.runs,
                pairs: m.pairs.len(),
                note: None,
            };
            nemesis.with_memory(Some(&m), start)
        }
        Loaded::Unusable(why) => {
            eprintln!(
                "splitbrain: warning: the guided memory {file} {why}; this run starts cold and leaves that file as it is"
            );
            let start = MemoryStart {
                file,
                note: Some(format!("{why}; started cold, file left as it was")),
                ..MemoryStart::default()
            };
            nemesis.with_memory(None, start)
        }
    }
}

/// Writes back a guided run's table (its memory plus what it tried), unless its memory
/// was off or unusable; true when written.
pub fn save(nemesis: &Nemesis, spec: &TestSpec, start: Option<&MemoryStart>) -> bool {
    let (Some(start), Some(path)) = (start, path(spec)) else {
        return false;
    };
    if start.note.is_some() {
        return false;
    }
    let Some(memory) = nemesis.memory_made(&key(spec)) else {
        return false;
    };
    match write(&path, &memory) {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "splitbrain: warning: writing the guided memory {}: {e}",
                path.display()
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitbrain_nemesis::NemesisSpec;

    fn spec(store: &Path) -> TestSpec {
        let json = serde_json::json!({
            "name": "kv-register", "target": "kv", "workload": "register",
            "nemesis": ["partition-leader", "clock"], "nemesis_interval_s": 2.0,
            "nemesis_plan": null, "nemesis_search": "guided", "nodes": 5, "concurrency": 5,
            "rate": 0.0, "time_limit_s": 30.0, "op_timeout_ms": 1000, "seed": 3,
            "bugs": ["lease-no-margin"], "shards": 1, "read_mode": "lease",
            "hedge_delay_ms": 0, "active_keys": 1, "ops_per_key": 1, "quiesce_s": 0.0,
            "store": store, "target_bin": null, "version": "test",
        });
        serde_json::from_value(json).unwrap()
    }

    fn nemesis(spec: &TestSpec) -> Nemesis {
        let mut n = NemesisSpec::parse(
            &spec.nemesis.join(","),
            std::time::Duration::from_secs(2),
            spec.seed,
        )
        .unwrap();
        n.search = spec.nemesis_search;
        Nemesis::new(n)
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sb-memory-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn the_store_path_names_the_configuration_and_off_or_random_has_none() {
        let store = tmp("path");
        let mut s = spec(&store);
        assert_eq!(
            path(&s).unwrap(),
            store.join(
                "kv-register/guided-memory--lease-no-margin--clock+partition-leader--n5.json"
            )
        );
        assert_eq!(
            key(&s),
            "target=kv workload=register bug=lease-no-margin nemesis=clock+partition-leader nodes=5"
        );
        s.nemesis_memory = Some("/x/m.json".into());
        assert_eq!(path(&s).unwrap(), PathBuf::from("/x/m.json"));
        s.nemesis_memory = Some("off".into());
        assert_eq!(path(&s), None);
        s.nemesis_memory = None;
        s.nemesis_search = Search::Random;
        assert_eq!(path(&s), None);
    }

    #[test]
    fn a_missing_memory_starts_cold_and_the_run_leaves_one() {
        let store = tmp("cold");
        let s = spec(&store);
        let n = attach(nemesis(&s), &s);
        let start = n.coverage().memory.unwrap();
        assert_eq!((start.runs, start.pairs, start.note), (0, 0, None));
        assert!(save(&n, &s, n.coverage().memory.as_ref()));
        match load(&path(&s).unwrap(), &key(&s)) {
            Loaded::Found(m) => {
                assert_eq!(m.runs, 1);
                assert_eq!(m.key, key(&s));
            }
            other => panic!("{other:?}"),
        }
        // the next run starts from it
        let n = attach(nemesis(&s), &s);
        assert_eq!(n.coverage().memory.unwrap().runs, 1);
        let left: Vec<_> = std::fs::read_dir(store.join("kv-register"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn a_garbage_memory_is_a_warning_a_cold_start_and_left_alone() {
        let store = tmp("garbage");
        let s = spec(&store);
        let p = path(&s).unwrap();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        for body in [
            "not json",
            "{\"key\": 1}",
            "{\"key\":\"x\",\"runs\":1,\"pairs\":[]}",
        ] {
            std::fs::write(&p, body).unwrap();
            assert!(matches!(load(&p, &key(&s)), Loaded::Unusable(_)), "{body}");
            let n = attach(nemesis(&s), &s);
            let start = n.coverage().memory.unwrap();
            assert_eq!(start.runs, 0);
            assert!(start.note.as_deref().unwrap().contains("started cold"));
            assert!(!save(&n, &s, Some(&start)));
            assert_eq!(std::fs::read_to_string(&p).unwrap(), body);
        }
    }
}
