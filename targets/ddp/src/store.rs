//! Durable state of a rank: checkpoints and the committed step log.
//!
//! A checkpoint is one file `ckpt-<step>-g<gen>.bin`: a JSON header line (step, gen,
//! data position, the records of its last K steps, parameter count), then the parameters
//! and the momentum as little-endian f32, then a 64-bit checksum. It is written to a
//! temporary file, fsync'd, renamed into place and the directory fsync'd, so a crash
//! leaves either the whole checkpoint or none. The step log `steps.jsonl` holds one
//! committed step record per line, appended and fsync'd; a torn last line is cut off.

use crate::core::CkptId;
use serde::{Deserialize, Serialize};
use splitbrain_target_runtime::storage::{
    io_err, json_line, open_append, read_if_exists, write_atomic, JsonLog,
};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A storage failure: the runtime's, shared with every bundled target (a checkpoint that
/// does not parse or whose checksum is wrong is `Corrupt`).
pub use splitbrain_target_runtime::storage::StorageError as StoreError;

/// What a rank reports about one applied step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Rank (0-based).
    pub rank: u64,
    /// Members of the group that ran the step (its size is `world`).
    pub world: u64,
    /// The ranks of that group. Left out of the JSON when empty: a restarted rank that
    /// serves a step from its checkpoint before it has rejoined a group names no group
    /// (the checkers read an old record's `[]` the same way).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<u64>,
    /// Step (from 1).
    pub step: u64,
    /// Epoch (from 0).
    pub epoch: u64,
    /// Generation of the group that ran it.
    pub gen: u64,
    /// Digest of the parameters after the step.
    pub digest: String,
    /// This rank's loss on its micro-batch (before the update); `None` in a record
    /// rebuilt from another member's after this rank lost its own (see
    /// [`crate::core::StateMsg::records`]).
    pub loss: Option<f32>,
    /// First position of the step's global batch in the epoch's permutation.
    #[serde(default)]
    pub offset: u64,
    /// Sample ids this rank consumed.
    pub samples: Vec<u64>,
}

/// A checkpoint's header.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CkptMeta {
    /// Last step applied.
    pub step: u64,
    /// Generation that wrote it.
    pub gen: u64,
    /// Batches this rank consumed (the cursor of the resume-without-sampler-state bug).
    pub data_pos: u64,
    /// The sampler's position after `step`.
    #[serde(default)]
    pub pos: crate::core::DataPos,
    /// This rank's records of the steps since the previous checkpoint.
    pub records: Vec<StepRecord>,
    /// The group's records (any member's, without samples or loss) of the last steps
    /// up to `step`, from which a joiner rebuilds records it lost.
    #[serde(default)]
    pub history: Vec<StepRecord>,
    /// Number of parameters.
    pub params: usize,
}

/// A loaded checkpoint.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// Header.
    pub meta: CkptMeta,
    /// Parameters.
    pub params: Vec<f32>,
    /// Momentum.
    pub momentum: Vec<f32>,
}

fn checksum(bytes: &[u8]) -> u64 {
    let mut sum = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        sum = sum.rotate_left(5) ^ u64::from_le_bytes(b);
    }
    for &b in words.remainder() {
        sum = sum.rotate_left(5) ^ u64::from(b);
    }
    sum
}

/// A rank's data directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Opens (creating) the directory.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    fn ckpt_path(&self, id: CkptId) -> PathBuf {
        self.dir
            .join(format!("ckpt-{:010}-g{}.bin", id.step, id.gen))
    }

    /// Checkpoints present on disk.
    pub fn list(&self) -> Result<Vec<CkptId>, StoreError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(rest) = name
                .strip_prefix("ckpt-")
                .and_then(|r| r.strip_suffix(".bin"))
            else {
                continue;
            };
            let Some((step, gen)) = rest.split_once("-g") else {
                continue;
            };
            if let (Ok(step), Ok(gen)) = (step.parse(), gen.parse()) {
                out.push(CkptId { step, gen });
            }
        }
        out.sort();
        Ok(out)
    }

    /// Writes a checkpoint atomically and durably.
    pub fn save(
        &self,
        meta: &CkptMeta,
        params: &[f32],
        momentum: &[f32],
    ) -> Result<(), StoreError> {
        let id = CkptId {
            step: meta.step,
            gen: meta.gen,
        };
        let path = self.ckpt_path(id);
        let mut bytes = serde_json::to_vec(meta).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            detail: format!("checkpoint header: {e}"),
        })?;
        bytes.push(b'\n');
        for v in params.iter().chain(momentum) {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let sum = checksum(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        write_atomic(&self.dir, &name.unwrap_or_default(), &bytes, true)
    }

    /// Loads a checkpoint, checking its checksum.
    pub fn load(&self, id: CkptId) -> Result<Checkpoint, StoreError> {
        let path = self.ckpt_path(id);
        let bytes = read_if_exists(&path)?
            .ok_or_else(|| io_err(&path)(std::io::Error::from(std::io::ErrorKind::NotFound)))?;
        let corrupt = |why: &str| StoreError::Corrupt {
            path: path.clone(),
            detail: format!("checkpoint: {why}"),
        };
        if bytes.len() < 8 {
            return Err(corrupt("too short"));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 8);
        let mut t = [0u8; 8];
        t.copy_from_slice(tail);
        if checksum(body) != u64::from_le_bytes(t) {
            return Err(corrupt("checksum mismatch"));
        }
        let nl = body
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| corrupt("no header"))?;
        let meta: CkptMeta =
            serde_json::from_slice(&body[..nl]).map_err(|e| corrupt(&e.to_string()))?;
        let floats: Vec<f32> = body[nl + 1..]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if floats.len() != 2 * meta.params {
            return Err(corrupt("wrong number of values"));
        }
        let momentum = floats[meta.params..].to_vec();
        let mut params = floats;
        params.truncate(meta.params);
        Ok(Checkpoint {
            meta,
            params,
            momentum,
        })
    }

    /// Deletes checkpoints not in `keep`.
    pub fn retain(&self, keep: &std::collections::BTreeSet<CkptId>) -> Result<(), StoreError> {
        for id in self.list()? {
            if !keep.contains(&id) {
                let p = self.ckpt_path(id);
                fs::remove_file(&p).map_err(io_err(&p))?;
            }
        }
        Ok(())
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("steps.jsonl")
    }

    /// The committed step records, in order; a torn last line is cut off.
    pub fn read_log(&self) -> Result<Vec<StepRecord>, StoreError> {
        JsonLog::open(&self.log_path()).map(|(_, records)| records)
    }

    /// Appends committed records and fsyncs.
    pub fn append_log(&self, records: &[StepRecord]) -> Result<(), StoreError> {
        let path = self.log_path();
        let bytes: Vec<u8> = records.iter().flat_map(json_line).collect();
        let mut f = open_append(&path)?;
        f.write_all(&bytes).map_err(io_err(&path))?;
        f.sync_data().map_err(io_err(&path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn record(step: u64) -> StepRecord {
        StepRecord {
            rank: 0,
            world: 1,
            members: vec![0],
            step,
            epoch: 0,
            gen: 1,
            digest: "ab".into(),
            loss: Some(1.5),
            offset: 0,
            samples: vec![step],
        }
    }

    #[test]
    fn a_record_without_a_group_leaves_members_out_and_reads_back_the_same() {
        let named = serde_json::to_value(record(3)).unwrap();
        assert_eq!(named["members"], serde_json::json!([0]));
        let groupless = StepRecord {
            members: Vec::new(),
            world: 0,
            ..record(4)
        };
        let v = serde_json::to_value(&groupless).unwrap();
        assert!(v.get("members").is_none(), "{v}");
        assert_eq!(serde_json::from_value::<StepRecord>(v).unwrap(), groupless);
    }

    #[test]
    fn checkpoints_round_trip_and_corruption_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let meta = CkptMeta {
            step: 10,
            gen: 2,
            data_pos: 10,
            pos: Default::default(),
            history: Vec::new(),
            records: vec![record(9), record(10)],
            params: 3,
        };
        store
            .save(&meta, &[1.0, 2.0, 3.0], &[0.5, 0.25, 0.0])
            .unwrap();
        let id = CkptId { step: 10, gen: 2 };
        assert_eq!(store.list().unwrap(), vec![id]);
        let c = store.load(id).unwrap();
        assert_eq!(c.params, vec![1.0, 2.0, 3.0]);
        assert_eq!(c.momentum, vec![0.5, 0.25, 0.0]);
        assert_eq!(c.meta.records.len(), 2);
        let path = dir.path().join("ckpt-0000000010-g2.bin");
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 12] ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(matches!(store.load(id), Err(StoreError::Corrupt { .. })));
        store.retain(&Default::default()).unwrap();
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn the_log_survives_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.append_log(&[record(1), record(2)]).unwrap();
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.path().join("steps.jsonl"))
            .unwrap();
        f.write_all(b"{\"rank\":0,\"st").unwrap();
        assert_eq!(store.read_log().unwrap().len(), 2);
        store.append_log(&[record(3)]).unwrap();
        assert_eq!(
            store
                .read_log()
                .unwrap()
                .iter()
                .map(|r| r.step)
                .collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
    }
}
