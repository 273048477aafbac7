//! Command line: flags, the training configuration and bugs.

use crate::core::{Bugs, CoreConfig};
use crate::model::Mlp;
use clap::{Parser, ValueEnum};
use std::ops::Range;
use std::path::PathBuf;

/// A deliberate bug (see the README's bug table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Bug {
    /// Rank 1 applies its local gradient instead of the average every 5th step.
    SkipAllreduce,
    /// Ranks start from their own random initial parameters.
    NoInitBroadcast,
    /// The last rank reads rank 0's shard.
    SamplerOverlap,
    /// A resume from a checkpoint does not restore the data position.
    ResumeWithoutSamplerState,
    /// Buckets summed in arrival order, different on every rank.
    UnorderedReduce,
    /// On the last rank, a bucket late by more than 20 ms is replaced by the previous step's result.
    StaleBucket,
    /// After the group shrinks, the average still divides by the full world size.
    ShrinkWithoutRescale,
}

impl Bug {
    /// The bug's command-line name.
    pub fn name(self) -> String {
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }
}

/// How the ranks exchange messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// Binary frames over TCP to the `--peer` addresses.
    #[default]
    Tcp,
    /// The same frames through shared-memory links in `--shm-dir` (ranks on one host).
    Shm,
}

/// splitbrain-ddp: one rank of a data-parallel training cluster (bucketed ring
/// all-reduce over TCP, SGD with momentum, checkpoints, elastic recovery).
///
/// Start 2 ranks by hand (one shell each):
///   splitbrain-ddp --id 1 --client-listen 127.0.0.1:8001 --peer-listen 127.0.0.1:9001 \
///     --peer 2=127.0.0.1:9002 --data-dir /tmp/ddp/n1
///   splitbrain-ddp --id 2 --client-listen 127.0.0.1:8002 --peer-listen 127.0.0.1:9002 \
///     --peer 1=127.0.0.1:9001 --data-dir /tmp/ddp/n2
/// then: curl -s localhost:8001/steps -d '{"after":0}'
///
/// Reference run (one process, same global batches): splitbrain-ddp --replay --steps 50
/// --world-size 2 prints {"step":..,"digest":..} lines.
///
/// Client API (HTTP/JSON on --client-listen): GET /health, GET /status,
/// POST /steps {"after":N,"wait_ms":M,"max":K} (long-poll for committed steps after N),
/// GET|POST /admin/clock.
#[derive(Parser, Debug, Clone)]
#[command(name = "splitbrain-ddp", version, verbatim_doc_comment)]
pub struct Args {
    /// This rank's id, 1..=W (rank = id - 1).
    #[arg(long, default_value_t = 1)]
    pub id: u64,
    /// Address for the client HTTP API.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub client_listen: String,
    /// Address other ranks connect to.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub peer_listen: String,
    /// Where THIS rank dials rank ID, as ID=HOST:PORT; once per other rank.
    #[arg(long = "peer", value_parser = splitbrain_target_runtime::cli::parse_peer)]
    pub peers: Vec<(u64, String)>,
    /// Directory for checkpoints and the committed step log (created if missing).
    #[arg(long, default_value = "ddp-data")]
    pub data_dir: PathBuf,
    /// Turn on a deliberate bug (repeatable).
    #[arg(long = "bug", value_enum)]
    pub bugs: Vec<Bug>,
    /// World size W (default: 1 + number of --peer flags; required with --replay).
    #[arg(long)]
    pub world_size: Option<u64>,
    /// Seed of the data set, its shuffles and the initial parameters.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Samples in the data set; must be divisible by world size × batch.
    #[arg(long, default_value_t = 4096)]
    pub dataset_size: u64,
    /// Input features.
    #[arg(long, default_value_t = 32)]
    pub input: usize,
    /// Hidden layer widths, comma-separated.
    #[arg(long, default_value = "256,256", value_delimiter = ',')]
    pub hidden: Vec<usize>,
    /// Classes.
    #[arg(long, default_value_t = 10)]
    pub classes: usize,
    /// Samples per rank per step (the micro-batch).
    #[arg(long, default_value_t = 16)]
    pub batch: u64,
    /// Learning rate.
    #[arg(long, default_value_t = 0.05)]
    pub lr: f32,
    /// Momentum.
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f32,
    /// Gradient bucket size in KiB (buckets end at layer boundaries).
    #[arg(long, default_value_t = 64)]
    pub bucket_kib: usize,
    /// Checkpoint (and commit) every K steps.
    #[arg(long, default_value_t = 5)]
    pub ckpt_every: u64,
    /// No progress for this long aborts the step and re-forms the group.
    #[arg(long, default_value_t = 1000)]
    pub step_timeout_ms: i64,
    /// A rendezvous missing ranks forms without them after this long (the rejoin
    /// timeout), if a strict majority of the world is there.
    #[arg(long, default_value_t = 1000)]
    pub shrink_after_ms: i64,
    /// Reference replay: the members of each step, as changes
    /// `FROM_STEP:RANK,RANK,...;FROM_STEP:...` (default: every rank from step 1).
    #[arg(long)]
    pub members: Option<String>,
    /// Stop after this step (default: train until killed).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Pause between steps, to keep the log small in long runs.
    #[arg(long, default_value_t = 0)]
    pub step_delay_ms: u64,
    /// Run the single-process reference instead: print every step's digest.
    #[arg(long)]
    pub replay: bool,
    /// Start each bucket's all-reduce only after backward has finished (the baseline for
    /// measuring how much of the all-reduce bucketing hides behind backward).
    #[arg(long)]
    pub no_overlap: bool,
    /// Run the benchmark instead (all-reduce bus bandwidth, memcpy, kernel step times).
    #[arg(long)]
    pub bench: bool,
    /// With --bench: only these rank counts (comma-separated; default 2,4,8), and no
    /// kernel table.
    #[arg(long, value_delimiter = ',')]
    pub bench_ranks: Vec<usize>,
    /// With --bench: only these message sizes in MiB (comma-separated; default
    /// 1,4,16,64), and no kernel table.
    #[arg(long, value_delimiter = ',')]
    pub bench_mib: Vec<usize>,
    /// With --bench: only these transports (comma-separated: tcp, shm, shm-ring,
    /// shm-direct, shm-copy;
    /// default all), and no kernel table.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub bench_transports: Vec<crate::bench::BenchTransport>,
    /// How ranks exchange messages: `tcp` (to the --peer addresses) or `shm` (through
    /// shared-memory links in --shm-dir, for ranks on one host; a network partition
    /// cannot cut them). With `shm`, --peer flags are optional (--world-size suffices).
    #[arg(long, value_enum, default_value_t = Transport::Tcp)]
    pub transport: Transport,
    /// Directory of the shared-memory links (`--transport shm`): the same for every rank
    /// of the group, best under /dev/shm (memory, not disk).
    #[arg(long)]
    pub shm_dir: Option<PathBuf>,
}

/// Everything that determines the numbers of a training run (shared by the ranks and the
/// reference replay).
#[derive(Debug, Clone)]
pub struct TrainConfig {
    /// World size.
    pub world: usize,
    /// Seed.
    pub seed: u64,
    /// Data set size.
    pub dataset_size: u64,
    /// The model.
    pub mlp: Mlp,
    /// Micro-batch per rank.
    pub batch: u64,
    /// Learning rate.
    pub lr: f32,
    /// Momentum.
    pub momentum: f32,
    /// Gradient buckets.
    pub buckets: Vec<Range<usize>>,
    /// Checkpoint interval.
    pub ckpt_every: u64,
}

impl TrainConfig {
    /// Steps per epoch: each rank's shard in whole batches.
    pub fn steps_per_epoch(&self) -> u64 {
        (self.dataset_size / self.world.max(1) as u64) / self.batch.max(1)
    }

    /// The sample ids of a member's slice of a step's global batch.
    pub fn slice_ids(&self, slice: &crate::core::Slice) -> Vec<u64> {
        let perm = crate::data::permutation(self.seed, self.dataset_size, slice.epoch);
        slice
            .positions()
            .filter_map(|p| perm.get(p as usize).copied())
            .collect()
    }

    /// The sample ids of batch `index` of `epoch` in rank `rank`'s shard.
    pub fn batch_ids(&self, rank: u64, epoch: u64, index: u64) -> Vec<u64> {
        let shard =
            crate::data::shard(self.seed, self.dataset_size, self.world as u64, rank, epoch);
        let b = self.batch as usize;
        let start = index as usize * b;
        shard
            .get(start..start + b)
            .map(<[u64]>::to_vec)
            .unwrap_or_default()
    }

    /// The initial parameters rank `rank` draws on its own.
    pub fn init(&self, rank: usize) -> Vec<f32> {
        self.mlp
            .init(self.seed.wrapping_mul(1_000_003).wrapping_add(rank as u64))
    }
}

/// Buckets over the flat parameters: whole layers, from the last one backwards, closed
/// once they reach `bucket_bytes`. Returned in the order backward produces them.
pub fn make_buckets(mlp: &Mlp, bucket_bytes: usize) -> Vec<Range<usize>> {
    let mut buckets = Vec::new();
    let mut end: Option<usize> = None;
    for l in mlp.layers().iter().rev() {
        let all = l.all();
        let e = *end.get_or_insert(all.end);
        if (e - all.start) * 4 >= bucket_bytes {
            buckets.push(all.start..e);
            end = None;
        }
    }
    if let Some(e) = end {
        buckets.push(0..e);
    }
    buckets
}

impl Args {
    /// World size.
    pub fn world(&self) -> u64 {
        self.world_size.unwrap_or(1 + self.peers.len() as u64)
    }

    /// True if `bug` was turned on.
    pub fn has_bug(&self, bug: Bug) -> bool {
        self.bugs.contains(&bug)
    }

    /// Names of the bugs turned on.
    pub fn bug_names(&self) -> Vec<String> {
        self.bugs.iter().map(|b| b.name()).collect()
    }

    /// The training configuration.
    pub fn train(&self) -> TrainConfig {
        let mut widths = vec![self.input];
        widths.extend(&self.hidden);
        widths.push(self.classes);
        let mlp = Mlp::new(widths);
        let buckets = make_buckets(&mlp, self.bucket_kib.max(1) * 1024);
        TrainConfig {
            world: self.world() as usize,
            seed: self.seed,
            dataset_size: self.dataset_size,
            mlp,
            batch: self.batch,
            lr: self.lr,
            momentum: self.momentum,
            buckets,
            ckpt_every: self.ckpt_every.max(1),
        }
    }

    /// The core's settings for this rank.
    pub fn core_config(&self) -> CoreConfig {
        let t = self.train();
        CoreConfig {
            rank: self.id.saturating_sub(1) as usize,
            world: t.world,
            min_world: t.world / 2 + 1,
            shrink_after_ms: self.shrink_after_ms.max(0),
            batch: t.batch,
            dataset_size: t.dataset_size,
            buckets: t.buckets,
            ckpt_every: t.ckpt_every,
            step_timeout_ms: self.step_timeout_ms.max(10),
            rejoin_ms: 100,
            lr: t.lr,
            momentum: t.momentum,
            max_step: self.steps,
            bugs: Bugs {
                skip_allreduce: self.has_bug(Bug::SkipAllreduce),
                no_init_broadcast: self.has_bug(Bug::NoInitBroadcast),
                unordered_reduce: self.has_bug(Bug::UnorderedReduce),
                stale_bucket_ms: self.has_bug(Bug::StaleBucket).then_some(20),
                shrink_without_rescale: self.has_bug(Bug::ShrinkWithoutRescale),
            },
        }
    }

    /// Checks ids and the data set size.
    pub fn validate(&self) -> Result<(), String> {
        let world = self.world();
        if world == 0 || world > 64 {
            return Err("the world size must be in 1..=64".into());
        }
        if !self.replay {
            if self.id == 0 || self.id > world {
                return Err(format!("--id must be in 1..={world}"));
            }
            let mut seen = std::collections::BTreeSet::new();
            for (peer, _) in &self.peers {
                if *peer == self.id || *peer == 0 || *peer > world || !seen.insert(*peer) {
                    return Err(format!(
                        "bad --peer id {peer}: ids are 1..={world}, distinct, other than --id"
                    ));
                }
            }
            if self.transport == Transport::Shm && self.shm_dir.is_none() {
                return Err(
                    "--transport shm needs --shm-dir (the same directory for every rank)".into(),
                );
            }
            let peers_needed = self.transport == Transport::Tcp || !self.peers.is_empty();
            if peers_needed && self.peers.len() as u64 + 1 != world {
                return Err(format!(
                    "world size {world} needs {} --peer flags",
                    world - 1
                ));
            }
        }
        if self.batch == 0
            || self.dataset_size == 0
            || !self.dataset_size.is_multiple_of(world * self.batch)
        {
            return Err(format!(
                "--dataset-size {} must be a positive multiple of world size × batch = {} (no sampler padding, so every sample is used exactly once per epoch)",
                self.dataset_size,
                world * self.batch
            ));
        }
        if self.batch < world {
            return Err(format!(
                "--batch {} must be at least the world size {world} (after a shrink, every member gets a sample of an epoch's last step)",
                self.batch
            ));
        }
        if let Some(m) = &self.members {
            parse_members(m, world as usize)?;
        }
        if self.input == 0 || self.classes < 2 || self.hidden.contains(&0) {
            return Err(
                "--input, --hidden widths must be positive and --classes at least 2".into(),
            );
        }
        Ok(())
    }
}

/// Parses `--members`: `FROM_STEP:RANK,RANK,...` changes separated by `;`, in step order.
pub fn parse_members(text: &str, world: usize) -> Result<Vec<(u64, Vec<usize>)>, String> {
    let mut out: Vec<(u64, Vec<usize>)> = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("bad --members entry {part:?}: FROM_STEP:RANK,RANK,...");
        let (from, ranks) = part.split_once(':').ok_or_else(bad)?;
        let from: u64 = from.trim().parse().map_err(|_| bad())?;
        let mut ranks: Vec<usize> = ranks
            .split(',')
            .map(|r| r.trim().parse::<usize>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        ranks.sort_unstable();
        ranks.dedup();
        if from == 0 || ranks.is_empty() || ranks.iter().any(|r| *r >= world) {
            return Err(bad());
        }
        if out.last().is_some_and(|(f, _)| *f >= from) {
            return Err(format!("--members: steps must increase at {part:?}"));
        }
        out.push((from, ranks));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_parameters_last_layer_first() {
        let mlp = Mlp::new(vec![32, 256, 256, 10]);
        let b = make_buckets(&mlp, 64 * 1024);
        assert_eq!(b.first().map(|r| r.end), Some(mlp.num_params()));
        assert_eq!(b.last().map(|r| r.start), Some(0));
        for w in b.windows(2) {
            assert_eq!(w[1].end, w[0].start);
        }
        assert!(b.len() >= 2);
    }

    #[test]
    fn parses_and_validates() {
        let args = Args::try_parse_from([
            "splitbrain-ddp",
            "--id",
            "2",
            "--peer",
            "1=127.0.0.1:3",
            "--bug",
            "stale-bucket",
            "--dataset-size",
            "64",
            "--batch",
            "8",
        ])
        .unwrap();
        assert!(args.validate().is_ok());
        assert_eq!(args.core_config().rank, 1);
        assert_eq!(args.core_config().bugs.stale_bucket_ms, Some(20));
        assert_eq!(args.train().steps_per_epoch(), 4);
        let bad = Args::try_parse_from(["splitbrain-ddp", "--dataset-size", "10", "--batch", "3"])
            .unwrap();
        assert!(bad.validate().is_err());
    }
}
