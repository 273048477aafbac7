//! Client-side read policies of the KV store and the latency bookkeeping behind hedging
//! ("The Tail at Scale", Dean and Barroso, CACM 2013: "hedged requests" and
//! "latency-induced probation").
//!
//! A client remembers how long its recent reads took ([`LatencyWindow`]) and how fast each
//! replica has answered it lately ([`HedgeState`] scores). A hedged read goes to a replica
//! that is not on probation; if it has not answered after the running p95 of recent reads
//! (never less than a floor), a second request goes to the best other replica, and the
//! first answer wins.

use std::collections::VecDeque;
use std::time::Duration;

/// How the client spreads reads over replicas (`--read-mode`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ReadPolicy {
    /// Reads go to the leader (`read-index`, `log`, `lease`, and the stale `follower`
    /// mode, which the client does not distinguish).
    Leader,
    /// Each read goes to the client's home replica (`replica-read`).
    Replica,
    /// Replica read plus a second request after the client's running p95 (`hedged`).
    Hedged {
        /// The hedge delay is never shorter than this.
        floor: Duration,
    },
    /// Every replica at once, first answer wins (`read-all`).
    All,
}

impl ReadPolicy {
    /// The policy for a read mode; `floor` is the minimum hedge delay.
    pub(crate) fn for_mode(mode: Option<&str>, floor: Duration) -> ReadPolicy {
        match mode {
            Some("replica-read") => ReadPolicy::Replica,
            Some("hedged") => ReadPolicy::Hedged { floor },
            Some("read-all") => ReadPolicy::All,
            _ => ReadPolicy::Leader,
        }
    }
}

/// Reads remembered for the running quantile.
const WINDOW: usize = 256;
/// Below this many samples the quantile is not trusted and [`WARMUP_DELAY`] is used.
const MIN_SAMPLES: usize = 32;
/// The hedge delay before the window has [`MIN_SAMPLES`] samples.
const WARMUP_DELAY: Duration = Duration::from_millis(10);
/// The quantile of recent read latencies after which a read is hedged.
pub(crate) const HEDGE_QUANTILE: f64 = 0.95;
/// Weight of a new sample in a replica's score (exponentially weighted mean).
const SCORE_WEIGHT: f64 = 0.3;
/// Per read, the score of each replica not chosen first shrinks by this factor, so a
/// replica on probation is tried again after a while (and stays there if still slow).
const SCORE_DECAY: f64 = 0.98;
/// A replica is on probation when its score exceeds the best one's times this, plus
/// [`PROBATION_SLACK_MS`].
const PROBATION_FACTOR: f64 = 2.0;
/// See [`PROBATION_FACTOR`]: absolute slack, so sub-millisecond noise puts nobody on
/// probation.
const PROBATION_SLACK_MS: f64 = 1.0;

/// The last [`WINDOW`] latencies, with quantiles over them.
#[derive(Debug, Clone, Default)]
pub(crate) struct LatencyWindow {
    samples: VecDeque<Duration>,
}

impl LatencyWindow {
    /// Adds one latency, forgetting the oldest beyond [`WINDOW`].
    pub(crate) fn record(&mut self, d: Duration) {
        if self.samples.len() == WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(d);
    }

    /// Number of samples held.
    pub(crate) fn len(&self) -> usize {
        self.samples.len()
    }

    /// The `q` quantile (nearest rank) of the samples, None when empty.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        if self.samples.is_empty() {
            return None;
        }
        let mut v: Vec<Duration> = self.samples.iter().copied().collect();
        v.sort_unstable();
        let rank = ((q.clamp(0.0, 1.0) * v.len() as f64).ceil() as usize).clamp(1, v.len());
        Some(v[rank - 1])
    }
}

/// One client's view of read latency: the window behind the hedge delay and a score per
/// replica behind the choice of replicas.
#[derive(Debug, Clone)]
pub(crate) struct HedgeState {
    window: LatencyWindow,
    /// Exponentially weighted mean answer time per replica, in ms; None until known.
    scores: Vec<Option<f64>>,
    floor: Duration,
    /// The delay computed at the last refresh (recomputed every few samples).
    delay: Duration,
    since_refresh: usize,
}

impl HedgeState {
    /// State for `replicas` replicas and a minimum delay `floor`.
    pub(crate) fn new(replicas: usize, floor: Duration) -> HedgeState {
        HedgeState {
            window: LatencyWindow::default(),
            scores: vec![None; replicas],
            floor,
            delay: floor.max(WARMUP_DELAY),
            since_refresh: 0,
        }
    }

    /// How long to wait before the second request: the running [`HEDGE_QUANTILE`] of
    /// recent first-request latencies, never less than the floor.
    pub(crate) fn delay(&self) -> Duration {
        self.delay
    }

    /// Records how long a read's first request took (or, if it lost to the hedge, how
    /// long it had run when cancelled: a lower bound).
    pub(crate) fn record_read(&mut self, first_request: Duration) {
        self.window.record(first_request);
        self.since_refresh += 1;
        if self.since_refresh >= 8 || self.window.len() == MIN_SAMPLES {
            self.since_refresh = 0;
            self.delay = if self.window.len() < MIN_SAMPLES {
                self.floor.max(WARMUP_DELAY)
            } else {
                self.window
                    .quantile(HEDGE_QUANTILE)
                    .unwrap_or(WARMUP_DELAY)
                    .max(self.floor)
            };
        }
    }

    /// Records that `replica` answered after `d`.
    pub(crate) fn answered(&mut self, replica: usize, d: Duration) {
        self.score(replica, d.as_secs_f64() * 1000.0);
    }

    /// Records that a request to `replica` was cancelled after `d` without an answer
    /// (it lost to another replica) or failed: it counts as twice as slow, since all
    /// that is known is that it would have taken longer.
    pub(crate) fn lost(&mut self, replica: usize, d: Duration) {
        self.score(replica, 2.0 * d.as_secs_f64() * 1000.0);
    }

    fn score(&mut self, replica: usize, ms: f64) {
        if let Some(s) = self.scores.get_mut(replica) {
            *s = Some(match *s {
                Some(old) => old + SCORE_WEIGHT * (ms - old),
                None => ms,
            });
        }
    }

    fn score_of(&self, replica: usize) -> f64 {
        self.scores.get(replica).copied().flatten().unwrap_or(0.0)
    }

    /// True when `replica` answers markedly slower than the best replica.
    pub(crate) fn on_probation(&self, replica: usize) -> bool {
        let best = (0..self.scores.len())
            .map(|r| self.score_of(r))
            .fold(f64::INFINITY, f64::min);
        self.score_of(replica) > best * PROBATION_FACTOR + PROBATION_SLACK_MS
    }

    /// The replicas for the next read: the first request goes to `home` unless it is on
    /// probation (then to the next replica after it that is not); the second, if any,
    /// to the best-scored other replica. Scores of replicas not asked first decay.
    pub(crate) fn choose(&mut self, home: usize) -> (usize, usize) {
        let n = self.scores.len().max(1);
        let first = (0..n)
            .map(|k| (home + k) % n)
            .find(|&r| !self.on_probation(r))
            .unwrap_or(home % n);
        let second = (1..n)
            .map(|k| (first + k) % n)
            .min_by(|&a, &b| self.score_of(a).total_cmp(&self.score_of(b)))
            .unwrap_or(first);
        for (r, s) in self.scores.iter_mut().enumerate() {
            if r != first {
                if let Some(v) = s {
                    *v *= SCORE_DECAY;
                }
            }
        }
        (first, second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    #[test]
    fn quantiles_use_nearest_rank_over_the_window() {
        let mut w = LatencyWindow::default();
        assert_eq!(w.quantile(0.95), None);
        for i in 1..=100 {
            w.record(ms(i));
        }
        assert_eq!(w.quantile(0.95), Some(ms(95)));
        assert_eq!(w.quantile(0.5), Some(ms(50)));
        assert_eq!(w.quantile(1.0), Some(ms(100)));
        // The window forgets the oldest samples.
        for _ in 0..WINDOW {
            w.record(ms(1));
        }
        assert_eq!(w.len(), WINDOW);
        assert_eq!(w.quantile(1.0), Some(ms(1)));
    }

    #[test]
    fn hedge_delay_follows_the_running_p95_with_a_floor() {
        let mut h = HedgeState::new(3, ms(2));
        // Before enough samples: the warm-up delay.
        assert_eq!(h.delay(), WARMUP_DELAY);
        // 95 fast reads and 5 slow ones per hundred: p95 is a fast one.
        for i in 0..400u64 {
            h.record_read(if i % 20 == 0 { ms(50) } else { ms(4) });
        }
        assert_eq!(h.delay(), ms(4));
        // Mostly slow reads: the delay rises with them.
        for _ in 0..WINDOW {
            h.record_read(ms(30));
        }
        assert_eq!(h.delay(), ms(30));
        // Very fast reads: the floor holds.
        for _ in 0..WINDOW {
            h.record_read(Duration::from_micros(300));
        }
        assert_eq!(h.delay(), ms(2));
    }

    #[test]
    fn a_slow_home_replica_goes_on_probation_and_is_retried_later() {
        let mut h = HedgeState::new(3, ms(1));
        for r in 0..3 {
            h.answered(r, ms(1));
        }
        assert_eq!(h.choose(0).0, 0);
        // Replica 0 loses to a hedge a few times: the client stops asking it first and
        // asks the next replica instead.
        for _ in 0..3 {
            h.lost(0, ms(12));
        }
        assert!(h.on_probation(0));
        let (first, second) = h.choose(0);
        assert_eq!(first, 1);
        assert_eq!(second, 2);
        // Its score decays while others answer fast, so it is tried again eventually.
        let mut retried = false;
        for _ in 0..500 {
            let (first, _) = h.choose(0);
            if first == 0 {
                retried = true;
                break;
            }
            h.answered(first, ms(1));
        }
        assert!(retried);
    }

    #[test]
    fn policies_are_named_by_read_mode() {
        let f = ms(2);
        assert_eq!(
            ReadPolicy::for_mode(Some("read-index"), f),
            ReadPolicy::Leader
        );
        assert_eq!(ReadPolicy::for_mode(None, f), ReadPolicy::Leader);
        assert_eq!(
            ReadPolicy::for_mode(Some("replica-read"), f),
            ReadPolicy::Replica
        );
        assert_eq!(
            ReadPolicy::for_mode(Some("hedged"), f),
            ReadPolicy::Hedged { floor: f }
        );
        assert_eq!(ReadPolicy::for_mode(Some("read-all"), f), ReadPolicy::All);
    }
}
