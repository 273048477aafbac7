//! The node's shared-memory groups, one per generation: with `--transport shm` the driver
//! all-reduces each bucket through the [`ShmGroup`] of the generation's members instead of
//! the core's ring messages, so a cluster runs what the benchmark's `shm-direct` rows
//! measure.
//!
//! A group file is named after the generation and its members, so ranks of different
//! generations (a regroup after a kill or a pause) never share one; the first member to
//! need it makes it. Once an all-reduce times out (a member died or stalls) the group is
//! never used again: the step then times out in the core, which re-forms the group, and
//! the next generation gets a fresh file. The file of a generation left behind is removed.

use super::direct::ShmGroup;
use super::LinkError;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The group of the current generation at one rank.
struct Joined {
    gen: u64,
    members: Vec<usize>,
    path: PathBuf,
    /// `None` once an all-reduce failed (the peers' and this rank's epochs disagree).
    group: Option<ShmGroup>,
}

/// One rank's groups, generation by generation.
pub struct GenerationGroups {
    dir: PathBuf,
    rank: usize,
    /// The largest bucket (f32): the size of a slot.
    floats: usize,
    timeout: Duration,
    current: Option<Joined>,
}

impl GenerationGroups {
    /// Groups in `dir` (the link directory) for `rank`, buckets of up to `floats` f32,
    /// every wait bounded by `timeout`.
    pub fn new(dir: &Path, rank: usize, floats: usize, timeout: Duration) -> GenerationGroups {
        GenerationGroups {
            dir: dir.to_path_buf(),
            rank,
            floats,
            timeout,
            current: None,
        }
    }

    /// The group of generation `gen` of `members` (sorted ranks), joined on first use;
    /// `Err` if it could not be mapped or an all-reduce in it failed before.
    pub fn group(&mut self, gen: u64, members: &[usize]) -> Result<&mut ShmGroup, LinkError> {
        let same = self
            .current
            .as_ref()
            .is_some_and(|j| j.gen == gen && j.members == members);
        if !same {
            if let Some(old) = self.current.take() {
                // Nobody of the old generation needs the file any more.
                let _ = std::fs::remove_file(&old.path);
            }
            let names: Vec<String> = members.iter().map(|r| r.to_string()).collect();
            let path = self.dir.join(format!("group-g{gen}-m{}", names.join("-")));
            let index = members.iter().position(|r| *r == self.rank).unwrap_or(0);
            let group =
                ShmGroup::create_or_open(&path, members.len(), self.floats, index, self.timeout);
            // The node's log says which path its all-reduce takes.
            println!(
                "rank {}: generation {gen} all-reduces through the shared-memory group {}: {}",
                self.rank,
                path.display(),
                match &group {
                    Ok(_) => "joined".to_string(),
                    Err(e) => e.to_string(),
                }
            );
            self.current = Some(Joined {
                gen,
                members: members.to_vec(),
                path,
                group: None,
            });
            let joined = self
                .current
                .as_mut()
                .ok_or(LinkError::Timeout(self.timeout))?;
            joined.group = Some(group?);
        }
        self.current
            .as_mut()
            .and_then(|j| j.group.as_mut())
            .ok_or(LinkError::Timeout(self.timeout))
    }

    /// The current group's all-reduce failed: it is not used again.
    pub fn broken(&mut self) {
        if let Some(j) = self.current.as_mut() {
            j.group = None;
        }
    }
}
