//! Final reads of convergence workloads: every key read at every replica, in rounds, until
//! two rounds in a row return the same value everywhere (or a bound passes).
//!
//! Every read is recorded like any other op, so the checkers see the whole approach to
//! convergence and can time it from the heal; the rounds only decide when to stop reading.
//! One process per replica (a fresh one after an `info`, as Jepsen's process semantics
//! require), ids from [`FINAL_READ_PROCESS_BASE`] up.

use crate::run::recorder::HistoryRecorder;
use crate::run::worker::perform_completion;
use crate::systems::{Client, Invocation};
use serde_json::Value;
use splitbrain_checkers::OpType;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Longest time final reads go on waiting for replicas to agree.
pub const CONVERGE_BOUND: Duration = Duration::from_secs(20);
/// Pause between rounds.
const ROUND_PAUSE: Duration = Duration::from_millis(100);
/// Process ids of final reads: above every id the main phase uses, below setup's.
pub const FINAL_READ_PROCESS_BASE: u64 = 1_000_000;

/// One run of final-read rounds.
pub struct FinalReadRounds {
    /// The reads of one round (one per key), made at every replica.
    pub reads: Arc<Vec<Invocation>>,
    /// Number of replicas.
    pub replicas: usize,
    /// A client pinned to replica `r`.
    pub make_client: Arc<dyn Fn(usize) -> Box<dyn Client> + Send + Sync>,
    /// Where the reads go.
    pub recorder: HistoryRecorder,
    /// Outer bound on one read.
    pub op_timeout: Duration,
    /// When to give up waiting for agreement.
    pub bound: Duration,
}

/// How the rounds ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundsReport {
    /// Rounds made.
    pub rounds: usize,
    /// True when the last two rounds agreed everywhere.
    pub agreed: bool,
    /// From the first round's start to the end of the last.
    pub elapsed: Duration,
}

impl fmt::Display for RoundsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} round(s) in {:.2} s, {}",
            self.rounds,
            self.elapsed.as_secs_f64(),
            if self.agreed {
                "replicas agree"
            } else {
                "replicas still disagree at the bound"
            }
        )
    }
}

/// One replica's reader: its client and current process id.
struct Reader {
    replica: usize,
    process: u64,
    client: Box<dyn Client>,
}

impl FinalReadRounds {
    /// Reads until two consecutive rounds agree, the bound passes, or `cancel` fires.
    pub async fn run(&self, cancel: &CancellationToken) -> RoundsReport {
        let start = Instant::now();
        let mut readers: Vec<Reader> = (0..self.replicas)
            .map(|r| Reader {
                replica: r,
                process: FINAL_READ_PROCESS_BASE + r as u64,
                client: (self.make_client)(r),
            })
            .collect();
        let mut previous: Option<Vec<Option<Value>>> = None;
        let mut rounds = 0;
        loop {
            let (back, values) = self.round(readers).await;
            readers = back;
            rounds += 1;
            let agreed =
                previous.as_ref() == Some(&values) && round_agrees(&values, self.reads.len());
            if agreed || cancel.is_cancelled() || start.elapsed() >= self.bound {
                return RoundsReport {
                    rounds,
                    agreed,
                    elapsed: start.elapsed(),
                };
            }
            previous = Some(values);
            tokio::select! {
                _ = tokio::time::sleep(ROUND_PAUSE) => {}
                _ = cancel.cancelled() => {}
            }
        }
    }

    /// One round: every replica reads every key (replicas in parallel). The values come
    /// back replica-major: `values[r * reads + i]`, `None` where the read was not ok.
    async fn round(&self, readers: Vec<Reader>) -> (Vec<Reader>, Vec<Option<Value>>) {
        let mut tasks = tokio::task::JoinSet::new();
        for mut reader in readers {
            let (reads, recorder, make) = (
                self.reads.clone(),
                self.recorder.clone(),
                self.make_client.clone(),
            );
            let (timeout, stride) = (self.op_timeout, self.replicas as u64);
            tasks.spawn(async move {
                let mut values = Vec::with_capacity(reads.len());
                for inv in reads.iter() {
                    let c = perform_completion(
                        &mut *reader.client,
                        &recorder,
                        reader.process,
                        inv,
                        timeout,
                    )
                    .await;
                    if c.op_type == OpType::Info {
                        // An info retires the process: a fresh one takes over.
                        reader.process += stride;
                        reader.client = make(reader.replica);
                    }
                    values.push((c.op_type == OpType::Ok).then_some(c.value));
                }
                (reader, values)
            });
        }
        let mut slots: Vec<Option<(Reader, Vec<Option<Value>>)>> =
            (0..self.replicas).map(|_| None).collect();
        while let Some(joined) = tasks.join_next().await {
            if let Ok((reader, values)) = joined {
                let r = reader.replica;
                slots[r] = Some((reader, values));
            }
        }
        let mut readers = Vec::with_capacity(self.replicas);
        let mut values = Vec::with_capacity(self.replicas * self.reads.len());
        for (r, slot) in slots.into_iter().enumerate() {
            // A reader lost to a panicked task is replaced, so the next round still covers it.
            let (reader, v) = slot.unwrap_or_else(|| {
                let reader = Reader {
                    replica: r,
                    process: FINAL_READ_PROCESS_BASE + r as u64 + 1000 * self.replicas as u64,
                    client: (self.make_client)(r),
                };
                (reader, vec![None; self.reads.len()])
            });
            readers.push(reader);
            values.extend(v);
        }
        (readers, values)
    }
}

/// True when every read of the round was ok and each key read the same at every replica
/// (`values` replica-major, `reads` per replica).
fn round_agrees(values: &[Option<Value>], reads: usize) -> bool {
    if reads == 0 || values.iter().any(Option::is_none) {
        return reads == 0;
    }
    values.chunks(reads).all(|chunk| chunk == &values[..reads])
}

#[cfg(test)]
mod tests {
    use super::round_agrees;
    use serde_json::json;

    #[test]
    fn a_round_agrees_only_when_every_replica_read_every_key_alike() {
        let a = Some(json!([1, 2]));
        let b = Some(json!([1]));
        let k2 = Some(json!(5));
        assert!(round_agrees(
            &[a.clone(), k2.clone(), a.clone(), k2.clone()],
            2
        ));
        assert!(!round_agrees(&[a.clone(), k2.clone(), b, k2.clone()], 2));
        assert!(!round_agrees(&[a.clone(), k2.clone(), a, None], 2));
    }
}
