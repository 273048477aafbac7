//! The bundled data-parallel training cluster (`targets/ddp`): how to start it and its
//! client.
//!
//! Every rank trains on its own; the harness only watches. Each logical process follows
//! one rank (process `p` follows rank `p mod W`) and records every step that rank commits
//! as one `step` op: `POST /steps {"after": last, "wait_ms": .., "max": 1}` long-polls
//! for the next committed step, whose record becomes the op's value. Watching changes
//! nothing, so a poll that sees no new step, or a rank that cannot be reached, is a
//! `fail` (nothing was observed), never `info`: the process keeps following its rank.
//!
//! The group is elastic: a rank gone for longer than the rejoin timeout is left out and
//! the others go on (each record names the members of its step); the rank's follower sees
//! no new steps until the rank is back and in the group again.

use super::{
    bundled_node_args, BoxFuture, BugInfo, Client, Completion, Invocation, Profile, Target,
    TargetOptions,
};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
use std::time::Duration;

/// The directory of a run's shared-memory links (`--transport shm`): under `/dev/shm`
/// (memory) where there is one, named after the run directory (`<run>/<node>/data`), so
/// every rank of the run, and the cleanup, finds the same one and no two runs share one.
/// `None` for a data directory not of that shape.
pub fn shm_dir(data_dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let run = data_dir.parent()?.parent()?;
    let run = std::path::absolute(run).ok()?;
    // FNV-1a of the path: short, stable across processes.
    let hash = run
        .to_string_lossy()
        .bytes()
        .fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
    let root = std::path::Path::new("/dev/shm");
    let root = if root.is_dir() {
        root.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    Some(root.join(format!("splitbrain-ddp-{hash:016x}")))
}

/// The bundled DDP training cluster.
pub struct DdpTarget;

/// Training settings every rank and the reference replay share (small enough that a
/// step takes milliseconds on one core: 32-128-128-10, 22k parameters).
pub const TRAIN_ARGS: &[&str] = &[
    "--seed",
    "7",
    "--dataset-size",
    "13440",
    "--input",
    "32",
    "--hidden",
    "128,128",
    "--classes",
    "10",
    "--batch",
    "16",
    "--lr",
    "0.05",
    "--momentum",
    "0.9",
    "--bucket-kib",
    "32",
    "--ckpt-every",
    "5",
];

/// Samples in the data set ([`TRAIN_ARGS`]). A rank refuses a data set that is not a
/// multiple of world size × batch (no sampler padding), and the world shrinks and grows as
/// ranks die and rejoin: 13440 = 16 × lcm(1..=8), so every world of 1 to 8 ranks (the
/// default `--nodes 5` and all it shrinks to) divides it.
pub const DATASET_SIZE: u64 = 13440;

/// Pause between steps: bounds the history (and the reference replay) to a few thousand
/// steps a minute.
const STEP_DELAY_MS: &str = "20";
/// How often `--steps` polls the ranks' committed step.
const STEPS_POLL: Duration = Duration::from_millis(250);
/// Pause after failing to reach a rank before the op returns.
const UNREACHABLE_BACKOFF: Duration = Duration::from_millis(200);
/// No progress for this long makes a rank abort the step and re-form the group.
const STEP_TIMEOUT_MS: &str = "1000";
/// A re-formation waits this long for missing ranks before the group goes on without
/// them (the rejoin timeout): a rank killed, paused or cut off for longer than about
/// `STEP_TIMEOUT_MS + SHRINK_AFTER_MS` (1.5 s) is left out until it is back, if a strict
/// majority is left (with 4 ranks: one rank down). The kill and pause faults of the
/// default schedule last 1–3 s (`--nemesis kill`, interval 4 s) or 2–6 s (with a second
/// fault class), so most single-node faults shrink the group.
const SHRINK_AFTER_MS: &str = "500";

const BUGS: &[BugInfo<'static>] = &[
    BugInfo {
        name: "skip-allreduce",
        description: "rank 1 applies its local gradient instead of the average every 5th step; replicas diverge (ddp-replicas, ddp-reference) (fault: none needed)",
    },
    BugInfo {
        name: "no-init-broadcast",
        description: "ranks start from their own random parameters instead of rank 0's; replicas differ from step 1 (ddp-replicas) (fault: none needed)",
    },
    BugInfo {
        name: "sampler-overlap",
        description: "the last rank reads rank 0's shard; samples used twice and others never (ddp-data) (fault: none needed)",
    },
    BugInfo {
        name: "resume-without-sampler-state",
        description: "a resume from a checkpoint does not restore the data position; samples repeat or are skipped (ddp-data) (fault: kill, pause, partition)",
    },
    BugInfo {
        name: "unordered-reduce",
        description: "buckets summed in arrival order, a different order on every rank; floating-point results drift apart (ddp-replicas) (fault: none needed)",
    },
    BugInfo {
        name: "shrink-without-rescale",
        description: "after the group shrinks, the gradient sum is still divided by the full world size; the run differs from the replay of its member sequence (ddp-reference) (fault: kill, pause, partition lasting over 1.5 s)",
    },
    BugInfo {
        name: "stale-bucket",
        description: "on the last rank, a bucket not reduced within 20 ms is replaced by the previous step's result; that replica diverges (ddp-replicas) (fault: slow)",
    },
];

impl Target for DdpTarget {
    fn profile(&self) -> Profile<'_> {
        Profile::new(
            "ddp",
            "data-parallel training: W ranks, bucketed ring all-reduce over TCP, SGD with momentum, checkpoints, elastic recovery",
            "splitbrain-ddp",
        )
        .bugs(BUGS)
        .read_modes(&["committed"])
        .workloads(&["train"])
        .accepted_flags(&["transport"])
    }
    fn cleanup_node(&self, _i: usize, layout: &crate::run::node_layout::NodeLayout) {
        // The links live in memory outside the run directory; gone with the last node.
        if let Some(dir) = shm_dir(&layout.data_dir) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    fn node_args(
        &self,
        i: usize,
        client_addr: SocketAddr,
        peer_listen: SocketAddr,
        peer_addrs: &[SocketAddr],
        data_dir: &std::path::Path,
        opts: &TargetOptions,
    ) -> Vec<String> {
        let mut args = bundled_node_args(
            i,
            client_addr,
            peer_listen,
            peer_addrs,
            data_dir,
            &opts.bugs,
        );
        args.extend(TRAIN_ARGS.iter().map(|s| s.to_string()));
        args.extend(
            [
                "--step-delay-ms",
                STEP_DELAY_MS,
                "--step-timeout-ms",
                STEP_TIMEOUT_MS,
                "--shrink-after-ms",
                SHRINK_AFTER_MS,
            ]
            .map(String::from),
        );
        if opts.transport.as_deref() == Some("shm") {
            if let Some(dir) = shm_dir(data_dir) {
                args.extend(["--transport".into(), "shm".into(), "--shm-dir".into()]);
                args.push(dir.display().to_string());
            }
        }
        args
    }

    fn until_steps<'a>(
        &'a self,
        http: &'a reqwest::Client,
        addrs: &'a [SocketAddr],
        steps: Option<u64>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let Some(want) = steps else {
                return std::future::pending().await;
            };
            // Every rank that answers (a killed one does not) has committed `want`.
            loop {
                tokio::time::sleep(STEPS_POLL).await;
                let mut live = 0;
                let mut behind = 0;
                for addr in addrs {
                    let status = http
                        .get(format!("http://{addr}/status"))
                        .timeout(STEPS_POLL)
                        .send()
                        .await;
                    let Ok(answer) = status else { continue };
                    let Ok(v) = answer.json::<Value>().await else {
                        continue;
                    };
                    live += 1;
                    if v["committed"].as_u64().unwrap_or(0) < want {
                        behind += 1;
                    }
                }
                if live > 0 && behind == 0 {
                    return;
                }
            }
        })
    }

    // No rank leads (the default `leaders`): the ring is symmetric and any rank may start
    // a re-formation.

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        let rank = home % addrs.len().max(1);
        Box::new(DdpClient {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(1)
                .build()
                .unwrap_or_default(),
            addr: addrs.get(rank).copied(),
            node: format!("n{}", rank + 1),
            last: 0,
            timeout: opts.op_timeout,
        })
    }
}

/// Follows one rank's committed steps.
struct DdpClient {
    http: reqwest::Client,
    addr: Option<SocketAddr>,
    node: String,
    /// Last step recorded.
    last: u64,
    timeout: Duration,
}

impl DdpClient {
    fn fail(&self, op: &Invocation, error: String) -> Completion {
        Completion {
            op_type: OpType::Fail,
            value: op.value.clone(),
            node: Some(self.node.clone()),
            error: Some(json!(error)),
        }
    }
}

/// The first step record of a `/steps` answer.
fn first_step(answer: &Value) -> Option<(u64, Value)> {
    let rec = answer.get("steps")?.as_array()?.first()?.clone();
    Some((rec.get("step")?.as_u64()?, rec))
}

impl Client for DdpClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let Some(addr) = self.addr else {
                return self.fail(op, "no rank to follow".into());
            };
            if op.f != "step" {
                return self.fail(op, format!("the ddp target cannot perform {:?}", op.f));
            }
            // Leave the client's timeout some room to carry the answer back.
            let wait = self.timeout.saturating_sub(Duration::from_millis(300));
            let body = json!({"after": self.last, "wait_ms": wait.as_millis() as u64, "max": 1});
            let sent = self
                .http
                .post(format!("http://{addr}/steps"))
                .timeout(self.timeout)
                .json(&body)
                .send()
                .await;
            let answer = match sent {
                Ok(r) => r.json::<Value>().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match answer.as_ref().map(first_step) {
                Ok(Some((step, rec))) => {
                    self.last = step;
                    Completion {
                        op_type: OpType::Ok,
                        value: rec,
                        node: Some(self.node.clone()),
                        error: None,
                    }
                }
                Ok(None) => self.fail(op, "no new committed step".into()),
                Err(e) => {
                    // A down rank refuses at once: wait a little so a process at rate 0
                    // does not spin (and flood the history) until it is back.
                    tokio::time::sleep(UNREACHABLE_BACKOFF.min(self.timeout)).await;
                    self.fail(op, format!("unreachable: {e}"))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-rank batch in [`TRAIN_ARGS`] (asserted below to be what the ranks are given).
    const BATCH: u64 = 16;

    #[test]
    fn every_world_of_one_to_eight_ranks_divides_the_data_set() {
        for world in 1..=8u64 {
            assert_eq!(DATASET_SIZE % (world * BATCH), 0, "world {world}");
        }
    }

    #[test]
    fn reads_the_first_record_of_an_answer() {
        let a = json!({"type": "ok", "steps": [{"step": 4, "rank": 1}, {"step": 5}]});
        assert_eq!(first_step(&a), Some((4, json!({"step": 4, "rank": 1}))));
        assert_eq!(first_step(&json!({"steps": []})), None);
        assert_eq!(first_step(&json!({"steps": [{"rank": 1}]})), None);
    }

    #[test]
    fn node_args_carry_the_training_settings_and_bugs() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let opts = TargetOptions {
            shards: 1,
            read_mode: None,
            bugs: vec!["stale-bucket".into()],
            op_timeout: Duration::from_secs(1),
            hedge_delay: Duration::ZERO,
            workload: "train".into(),
            wait: None,
            read_from: None,
            replication: None,
            transport: None,
        };
        let args = DdpTarget.node_args(0, a, a, &[a, a], std::path::Path::new("/tmp/x"), &opts);
        let joined = args.join(" ");
        assert!(joined.contains("--peer 2=127.0.0.1:1") && joined.contains("--bug stale-bucket"));
        assert!(joined.contains(&format!("--dataset-size {DATASET_SIZE}")));
        assert!(joined.contains(&format!("--batch {BATCH}")));
        assert!(
            !joined.contains("--transport"),
            "tcp unless asked: {joined}"
        );
        let shm = TargetOptions {
            transport: Some("shm".into()),
            ..opts
        };
        let data = std::path::Path::new("/tmp/store/run-1/nodes/n1/data");
        let args = DdpTarget.node_args(0, a, a, &[a, a], data, &shm).join(" ");
        let dir = shm_dir(data).unwrap();
        assert!(args.contains(&format!("--transport shm --shm-dir {}", dir.display())));
        // Every rank of the run finds the same directory, another run another one.
        let other_node = std::path::Path::new("/tmp/store/run-1/nodes/n2/data");
        assert_eq!(shm_dir(other_node), Some(dir.clone()));
        assert_ne!(
            shm_dir(std::path::Path::new("/tmp/store/run-2/nodes/n1/data")),
            Some(dir)
        );
    }
}
