//! `splitbrain bench controller`: how many ops per second the controller can record with
//! an in-process no-op client (no network), i.e. the harness's own ceiling.

use crate::recorder::HistoryRecorder;
use crate::target::{BoxFuture, Client, Completion, Invocation};
use crate::worker::{RateLimiter, Worker};
use crate::workload::{register::RegisterWorkload, Workload, WorkloadOptions};
use splitbrain_checkers::OpType;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A client that completes every op `ok` at once.
struct NoopClient;

impl Client for NoopClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            Completion {
                op_type: OpType::Ok,
                value: op.value.clone(),
                node: None,
                error: None,
            }
        })
    }
}

/// Result of one controller benchmark run.
#[derive(Debug, Clone, Copy)]
pub struct ControllerBench {
    /// Client processes.
    pub processes: usize,
    /// Completed operations (invoke + completion each).
    pub ops: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl ControllerBench {
    /// Operations recorded per second.
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds
    }
}

/// Runs `processes` workers with the no-op client for `duration`, recording the
/// register workload's history to `history` (a real file, flushed as in a test).
pub async fn controller_throughput(
    processes: usize,
    duration: Duration,
    history: &Path,
) -> std::io::Result<ControllerBench> {
    let start = Instant::now();
    let recorder = HistoryRecorder::create(history, start, false)?;
    let generator = Arc::new(Mutex::new(RegisterWorkload.generator(WorkloadOptions {
        active_keys: 64,
        ops_per_key: 1000,
    })));
    let cancel = CancellationToken::new();
    let deadline = Instant::now() + duration;
    let mut set = tokio::task::JoinSet::new();
    for slot in 0..processes {
        let w = Worker {
            slot,
            concurrency: processes,
            make_client: Arc::new(|_| Box::new(NoopClient) as Box<dyn Client>),
            generator: generator.clone(),
            recorder: recorder.clone(),
            limiter: Arc::new(RateLimiter::new(0.0, 0)),
            op_timeout: Duration::from_secs(1),
            seed: 1,
        };
        set.spawn(w.run(deadline, cancel.clone()));
    }
    while set.join_next().await.is_some() {}
    let ops = recorder
        .counts
        .ok
        .load(std::sync::atomic::Ordering::Relaxed);
    recorder.finish()?;
    Ok(ControllerBench {
        processes,
        ops,
        seconds: start.elapsed().as_secs_f64(),
    })
}
