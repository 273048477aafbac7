//! Client processes as Jepsen has them: a global rate limiter handing out start slots,
//! one worker per logical process (an op that ends `info` retires the process and a
//! fresh one takes over), and the recording of each op's invoke and completion.

use crate::run::recorder::HistoryRecorder;
use crate::systems::{Client, Completion, Invocation};
use crate::workload::OpGenerator;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use splitbrain_checkers::{Op, OpType, Process};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Global rate limiter: hands out start slots to all clients as a Poisson process of the
/// given rate (exponential gaps, seeded), as independent real clients arrive.
///
/// Evenly spaced slots would never let two ops overlap whenever an op is faster than the
/// slot interval (an idle machine at 200 ops/s: 5 ms apart, 1.5 ms each), so a bug that
/// needs two transactions on one lock at once would show only on a loaded machine.
/// Random gaps make such overlaps a steady fraction of ops at any machine speed.
pub struct RateLimiter {
    mean_gap: Option<f64>,
    next: Mutex<(Instant, ChaCha8Rng)>,
}

/// No gap is longer than this many mean gaps (a bound on a rare long silence).
const MAX_GAP_FACTOR: f64 = 8.0;

impl RateLimiter {
    /// `rate` ops per second in total (0 means unlimited); `seed` fixes the gaps.
    pub fn new(rate: f64, seed: u64) -> RateLimiter {
        RateLimiter {
            mean_gap: (rate > 0.0).then(|| 1.0 / rate),
            next: Mutex::new((
                Instant::now(),
                ChaCha8Rng::seed_from_u64(seed ^ 0x5241_5445),
            )),
        }
    }

    /// Waits for this caller's slot.
    pub async fn acquire(&self) {
        let Some(mean) = self.mean_gap else {
            return;
        };
        let slot = {
            let mut g = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let (next, rng) = &mut *g;
            let slot = (*next).max(Instant::now());
            // Exponential gap by inversion: -ln(U) for U uniform in (0, 1].
            let u: f64 = 1.0 - rand::Rng::gen::<f64>(rng);
            let gap = (-u.ln()).min(MAX_GAP_FACTOR) * mean;
            *next = slot + Duration::from_secs_f64(gap);
            slot
        };
        tokio::time::sleep_until(slot.into()).await;
    }
}

/// One client worker: Jepsen's process semantics. An op that ends `info` retires the
/// process; a fresh process id (old + concurrency) and a fresh client take over.
pub struct Worker {
    /// Worker slot, 0..concurrency.
    pub slot: usize,
    /// Number of workers (the process-id stride).
    pub concurrency: usize,
    /// Makes a fresh client for a new process.
    pub make_client: Arc<dyn Fn(usize) -> Box<dyn Client> + Send + Sync>,
    /// The shared generator.
    pub generator: Arc<Mutex<Box<dyn OpGenerator>>>,
    /// Where ops go.
    pub recorder: HistoryRecorder,
    /// Shared rate limiter.
    pub limiter: Arc<RateLimiter>,
    /// Outer bound on one op (the client's own timeout plus slack).
    pub op_timeout: Duration,
    /// Seed of this worker's random choices.
    pub seed: u64,
}

impl Worker {
    /// Runs ops until `deadline` or cancellation. An op in flight at cancellation is left
    /// without completion (it counts as `info`).
    pub async fn run(self, deadline: Instant, cancel: CancellationToken) {
        let mut rng = ChaCha8Rng::seed_from_u64(
            self.seed ^ (self.slot as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let mut process = self.slot as u64;
        let mut client = (self.make_client)(self.slot);
        while Instant::now() < deadline && !cancel.is_cancelled() {
            tokio::select! {
                _ = self.limiter.acquire() => {}
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep_until(deadline.into()) => return,
            }
            let inv = self
                .generator
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .next_op(&mut rng);
            let done = tokio::select! {
                c = perform(&mut *client, &self.recorder, process, &inv, self.op_timeout) => c,
                _ = cancel.cancelled() => return,
            };
            if done == OpType::Info {
                process += self.concurrency as u64;
                client = (self.make_client)(self.slot);
            }
        }
    }
}

/// Records the invoke, performs the op (bounded by `timeout`: a timeout is `info`), and
/// records the completion. Returns the completion type.
pub async fn perform(
    client: &mut dyn Client,
    recorder: &HistoryRecorder,
    process: u64,
    inv: &Invocation,
    timeout: Duration,
) -> OpType {
    perform_completion(client, recorder, process, inv, timeout)
        .await
        .op_type
}

/// [`perform`], returning the whole completion as recorded.
pub async fn perform_completion(
    client: &mut dyn Client,
    recorder: &HistoryRecorder,
    process: u64,
    inv: &Invocation,
    timeout: Duration,
) -> Completion {
    let mut op = Op::new(
        Process::Client(process),
        OpType::Invoke,
        inv.f.clone(),
        inv.value.clone(),
    );
    op.key = inv.key.clone();
    recorder.record(op.clone());
    let invoked = std::time::Instant::now();
    let c = match tokio::time::timeout(timeout, client.invoke(inv)).await {
        Ok(c) => c,
        Err(_) => Completion::info(inv.value.clone(), "timeout", None),
    };
    {
        use std::sync::atomic::Ordering::Relaxed;
        let us = invoked.elapsed().as_micros().min(u64::MAX as u128) as u64;
        recorder.counts.latency_us.fetch_add(us, Relaxed);
        recorder.counts.timed.fetch_add(1, Relaxed);
    }
    op.op_type = c.op_type;
    op.value = c.value.clone();
    op.node = c.node.clone();
    op.error = c.error.clone();
    recorder.record(op);
    c
}
