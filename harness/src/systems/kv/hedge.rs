//! Client-side read policies of the KV store and the latency bookkeeping behind hedging
//! ("The Tail at Scale", Dean and Barroso, CACM 2013: "hedged requests" and
//! "latency-induced probation").
//!
//! The clients of one cluster in this process share one view ([`HedgeState`], as the
//! threads of an application share its client library): how long recent first requests
//! to each replica took ([`LatencyWindow`]) and how fast each replica has answered lately
//! (scores), and how many requests each has outstanding. A hedged read goes first to the
//! replica not on probation with the fewest requests outstanding (the client's home
//! replica among equals): a replica that has just stalled collects unanswered requests
//! within a millisecond or two, long before any of them misses the hedge delay, and new
//! reads then go around it ("join the shortest queue"). If the first has not
//! answered after the running p95 of a typical replica's first requests (the median over
//! the replicas of each one's p95; never less than a floor), a second request goes to the
//! best other replica, and the first answer wins. A replica on probation is
//! asked nothing a read waits for; now and then a read also sends it a "shadow" request,
//! whose answer only updates its score, so it comes back once it is fast again. A read
//! still waiting on a replica when another read puts it on probation sends its second
//! request at once rather than at the end of its own delay.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How the client spreads reads over replicas (`--read-mode`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ReadPolicy {
    /// Reads go to the leader (`read-index`, `log`, `lease`, and the stale `follower`
    /// mode, which the client does not distinguish).
    Leader,
    /// Each read goes to the client's home replica (`replica-read`).
    Replica,
    /// Replica read plus a second request after the clients' shared running p95, with
    /// probation and shadow requests (`hedged`).
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

/// First requests remembered per replica for the running quantile.
const WINDOW: usize = 256;
/// A replica's window with fewer samples is not trusted; with no trusted window,
/// [`WARMUP_DELAY`] is used.
const MIN_SAMPLES: usize = 32;
/// The hedge delay before any replica's window has [`MIN_SAMPLES`] samples.
const WARMUP_DELAY: Duration = Duration::from_millis(10);
/// The quantile of recent read latencies after which a read is hedged.
pub(crate) const HEDGE_QUANTILE: f64 = 0.95;
/// Weight of a new sample in a replica's score (exponentially weighted mean).
const SCORE_WEIGHT: f64 = 0.3;
/// A replica goes on probation when this many first requests to it in a row (from any
/// client) were not answered within the hedge delay: a replica that is paused or whose
/// link is slow does that at once, a healthy one (95% within the delay) rarely.
pub(crate) const PROBATION_STRIKES: u32 = 2;
/// A replica on probation gets a shadow request at most this often (and never while one
/// is outstanding): often enough to notice within a few tens of ms that a pause ended,
/// rarely enough to cost a few percent of requests at most.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(20);

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

    /// The `q` quantile ([`splitbrain_checkers::quantile`]'s nearest rank) of the samples,
    /// None when empty.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        let mut v: Vec<Duration> = self.samples.iter().copied().collect();
        // A selection, not a sort: the delay takes one per replica every few reads, under
        // the lock every client shares.
        splitbrain_checkers::quantile::quantile_by_selection(&mut v, q)
    }
}

/// Where one hedged read sends its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadPlan {
    /// The replica asked first.
    pub(crate) first: usize,
    /// The replica asked if the first has not answered after the hedge delay.
    pub(crate) second: usize,
    /// A replica on probation to send a shadow request to now, whose answer only updates
    /// its score (report it with [`HedgeState::shadow_done`]).
    pub(crate) shadow: Option<usize>,
}

/// The clients' shared view of read latency: per replica, the window of its first
/// requests behind the hedge delay, a score behind the choice of replicas, and the
/// shadow-request bookkeeping.
#[derive(Debug, Clone)]
pub(crate) struct HedgeState {
    /// Recent first-request latencies, by the replica asked first.
    windows: Vec<LatencyWindow>,
    /// Exponentially weighted mean answer time per replica, in ms; None until known.
    scores: Vec<Option<f64>>,
    /// First requests in a row per replica not answered within the hedge delay.
    strikes: Vec<u32>,
    probation: Vec<bool>,
    /// Requests outstanding per replica (first, second and shadow requests of reads).
    outstanding: Vec<u32>,
    /// Woken when a replica goes on probation, so reads waiting on it hedge at once.
    put_on_probation: Vec<Arc<Notify>>,
    /// When each replica last got a shadow request, and whether one is outstanding.
    probed_at: Vec<Option<Instant>>,
    probing: Vec<bool>,
    floor: Duration,
    /// The delay computed at the last refresh (recomputed every few samples).
    delay: Duration,
    since_refresh: usize,
}

impl HedgeState {
    /// State for `replicas` replicas and a minimum delay `floor`.
    pub(crate) fn new(replicas: usize, floor: Duration) -> HedgeState {
        HedgeState {
            windows: vec![LatencyWindow::default(); replicas],
            scores: vec![None; replicas],
            strikes: vec![0; replicas],
            probation: vec![false; replicas],
            outstanding: vec![0; replicas],
            put_on_probation: (0..replicas).map(|_| Arc::new(Notify::new())).collect(),
            probed_at: vec![None; replicas],
            probing: vec![false; replicas],
            floor,
            delay: floor.max(WARMUP_DELAY),
            since_refresh: 0,
        }
    }

    /// How long to wait before the second request: the running [`HEDGE_QUANTILE`] of a
    /// typical replica's first requests, never less than the floor.
    pub(crate) fn delay(&self) -> Duration {
        self.delay
    }

    /// Records how long a read's first request, to `replica`, took (or, if it lost to
    /// the hedge, how long it had run when cancelled: a lower bound).
    pub(crate) fn record_read(&mut self, replica: usize, first_request: Duration) {
        let Some(window) = self.windows.get_mut(replica) else {
            return;
        };
        window.record(first_request);
        let trusted_now = window.len() == MIN_SAMPLES;
        self.since_refresh += 1;
        if self.since_refresh >= 8 || trusted_now {
            self.since_refresh = 0;
            self.delay = self
                .typical_quantile()
                .unwrap_or(WARMUP_DELAY)
                .max(self.floor);
        }
    }

    /// The median over the replicas with a trusted window of each one's
    /// [`HEDGE_QUANTILE`] (the lower median of an even count). Not the quantile of all
    /// first requests together: a replica slow for more than 5% of the reads would make
    /// that as slow as itself, so no first request to it would ever miss the delay, no
    /// strike would count, and hedging would turn itself off (a bench run with one
    /// client link +50 ms, 2026-12-03, kept 19% of its reads at 52 ms that way).
    fn typical_quantile(&self) -> Option<Duration> {
        let mut q: Vec<Duration> = self
            .windows
            .iter()
            .filter(|w| w.len() >= MIN_SAMPLES)
            .filter_map(|w| w.quantile(HEDGE_QUANTILE))
            .collect();
        q.sort_unstable();
        q.get(q.len().checked_sub(1)? / 2).copied()
    }

    /// Records that `replica` answered after `d`. Within the hedge delay, that ends its
    /// strikes and its probation: it is as fast as 95% of reads again.
    pub(crate) fn answered(&mut self, replica: usize, d: Duration) {
        self.score(replica, d.as_secs_f64() * 1000.0);
        if d <= self.delay {
            if let (Some(s), Some(p)) = (
                self.strikes.get_mut(replica),
                self.probation.get_mut(replica),
            ) {
                *s = 0;
                *p = false;
            }
        }
    }

    /// Records that the first request to `replica` was not answered within the hedge
    /// delay (the hedge fires): a strike; [`PROBATION_STRIKES`] in a row put it on
    /// probation, at once for every client sharing this view.
    pub(crate) fn first_slow(&mut self, replica: usize) {
        if let Some(s) = self.strikes.get_mut(replica) {
            *s += 1;
            if *s >= PROBATION_STRIKES {
                self.begin_probation(replica);
            }
        }
    }

    /// Puts `replica` on probation; if it was not, wakes the reads waiting on it.
    fn begin_probation(&mut self, replica: usize) {
        if let Some(p) = self.probation.get_mut(replica) {
            if !*p {
                *p = true;
                self.put_on_probation[replica].notify_waiters();
            }
        }
    }

    /// Woken when `replica` goes on probation: a read waiting on it then hedges at once
    /// (a stalled replica caught several reads before the first strikes came in; the
    /// later ones need not each wait out a whole delay of their own).
    pub(crate) fn probation_signal(&self, replica: usize) -> Option<Arc<Notify>> {
        self.put_on_probation.get(replica).cloned()
    }

    /// Records that the first request to `replica` was outraced: a second request sent a
    /// hedge delay later, to another replica, was answered while this one still was
    /// not. A replica merely slower than usual rarely loses that race; a paused one, or
    /// one behind a slow link, always does, so it goes on probation at once (a second
    /// strike would cost one more read the whole stall).
    pub(crate) fn outraced(&mut self, replica: usize) {
        if let Some(s) = self.strikes.get_mut(replica) {
            *s = (*s).max(PROBATION_STRIKES);
            self.begin_probation(replica);
        }
    }

    /// Records that a request to `replica` was cancelled after `d` without an answer
    /// (it lost to another replica) or failed: it counts as twice as slow, since all
    /// that is known is that it would have taken longer.
    pub(crate) fn lost(&mut self, replica: usize, d: Duration) {
        self.score(replica, 2.0 * d.as_secs_f64() * 1000.0);
    }

    /// Records the end of the shadow request to `replica` after `d`: answered (`ok`) or
    /// not (failed or timed out, which counts as [`HedgeState::lost`]).
    pub(crate) fn shadow_done(&mut self, replica: usize, d: Duration, ok: bool) {
        if let Some(p) = self.probing.get_mut(replica) {
            *p = false;
        }
        if ok {
            self.answered(replica, d);
        } else {
            self.lost(replica, d);
        }
    }

    fn score(&mut self, replica: usize, ms: f64) {
        if let Some(s) = self.scores.get_mut(replica) {
            *s = Some(match *s {
                Some(old) => old + SCORE_WEIGHT * (ms - old),
                None => ms,
            });
        }
    }

    /// A replica never heard from scores 0, so it is tried as a hedge target. The score
    /// only orders hedge targets; probation comes from strikes.
    fn score_of(&self, replica: usize) -> f64 {
        self.scores.get(replica).copied().flatten().unwrap_or(0.0)
    }

    /// Records that a request to `replica` was sent (paired with [`HedgeState::ended`]).
    pub(crate) fn sent(&mut self, replica: usize) {
        if let Some(n) = self.outstanding.get_mut(replica) {
            *n += 1;
        }
    }

    /// Records that a request to `replica` was answered, failed or was dropped.
    pub(crate) fn ended(&mut self, replica: usize) {
        if let Some(n) = self.outstanding.get_mut(replica) {
            *n = n.saturating_sub(1);
        }
    }

    fn outstanding_at(&self, replica: usize) -> u32 {
        self.outstanding.get(replica).copied().unwrap_or(0)
    }

    /// True when `replica` is on probation: asked first by nobody, and a hedge target
    /// only if every other replica is on probation too.
    pub(crate) fn on_probation(&self, replica: usize) -> bool {
        self.probation.get(replica).copied().unwrap_or(false)
    }

    /// The replicas for the next read at `now`: the first request goes to the replica not
    /// on probation with the fewest requests outstanding, the first of equals counting
    /// from `home` (if every replica is on probation, to `home`); the second, if any, to
    /// another replica, preferring one not on probation, then fewer outstanding, then the
    /// best score. A replica on probation whose last shadow request is done and
    /// [`PROBE_INTERVAL`] old gets a new one.
    pub(crate) fn choose(&mut self, home: usize, now: Instant) -> ReadPlan {
        let n = self.scores.len().max(1);
        let first = (0..n)
            .map(|k| (home + k) % n)
            .filter(|&r| !self.on_probation(r))
            .min_by_key(|&r| self.outstanding_at(r))
            .unwrap_or(home % n);
        let rank = |r: usize| {
            (
                self.on_probation(r),
                self.outstanding_at(r),
                self.score_of(r),
            )
        };
        let second = (1..n)
            .map(|k| (first + k) % n)
            .min_by(|a, b| {
                rank(*a)
                    .partial_cmp(&rank(*b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .unwrap_or(first);
        let shadow = (0..n).find(|&r| {
            r != first
                && self.on_probation(r)
                && !self.probing[r]
                && !matches!(self.probed_at[r],
                    Some(t) if now.saturating_duration_since(t) < PROBE_INTERVAL)
        });
        if let Some(r) = shadow {
            self.probing[r] = true;
            self.probed_at[r] = Some(now);
        }
        ReadPlan {
            first,
            second,
            shadow,
        }
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
        // 95 fast reads and 5 slow ones per hundred at every replica: p95 is a fast one.
        for i in 0..1200u64 {
            h.record_read((i % 3) as usize, if i % 60 < 3 { ms(50) } else { ms(4) });
        }
        assert_eq!(h.delay(), ms(4));
        // Mostly slow reads: the delay rises with them.
        for i in 0..3 * WINDOW {
            h.record_read(i % 3, ms(30));
        }
        assert_eq!(h.delay(), ms(30));
        // Very fast reads: the floor holds.
        for i in 0..3 * WINDOW {
            h.record_read(i % 3, Duration::from_micros(300));
        }
        assert_eq!(h.delay(), ms(2));
    }

    /// One replica slow for every read it is asked (a third of them) does not drag the
    /// delay up with it: the delay is a typical replica's p95, so its first requests
    /// miss it, and strikes put it on probation.
    #[test]
    fn a_replica_slow_for_a_third_of_the_reads_does_not_raise_the_delay() {
        let mut h = HedgeState::new(3, ms(2));
        for i in 0..3 * WINDOW {
            let r = i % 3;
            h.record_read(r, if r == 2 { ms(52) } else { ms(3) });
        }
        assert_eq!(h.delay(), ms(3));
        // Two of three slow: the typical replica is slow (the median), as it should be.
        for i in 0..3 * WINDOW {
            let r = i % 3;
            h.record_read(r, if r == 0 { ms(3) } else { ms(40) });
        }
        assert_eq!(h.delay(), ms(40));
        // A replica asked nothing yet is no evidence either way.
        let mut fresh = HedgeState::new(3, ms(2));
        for _ in 0..MIN_SAMPLES {
            fresh.record_read(1, ms(7));
        }
        assert_eq!(fresh.delay(), ms(7));
    }

    /// A view with a settled hedge delay of 2 ms and every replica answering in 1 ms.
    fn settled() -> HedgeState {
        let mut h = HedgeState::new(3, ms(2));
        for i in 0..3 * WINDOW {
            h.record_read(i % 3, ms(1));
        }
        assert_eq!(h.delay(), ms(2));
        for r in 0..3 {
            h.answered(r, ms(1));
        }
        h
    }

    #[test]
    fn a_slow_home_replica_goes_on_probation_and_gets_only_shadow_requests() {
        let t0 = Instant::now();
        let mut h = settled();
        let plan = h.choose(0, t0);
        assert_eq!((plan.first, plan.shadow), (0, None));
        // Replica 0 misses the hedge delay twice in a row: nobody asks it first any
        // more, and it is not a hedge target either.
        h.first_slow(0);
        assert!(!h.on_probation(0));
        h.first_slow(0);
        h.lost(0, ms(3));
        assert!(h.on_probation(0));
        let plan = h.choose(0, t0);
        assert_eq!((plan.first, plan.second), (1, 2));
        assert_eq!(h.choose(1, t0).second, 2);
        // That read carried a shadow request to it; while it is outstanding, and then
        // until PROBE_INTERVAL has passed, no other is sent.
        assert_eq!(plan.shadow, Some(0));
        assert_eq!(h.choose(0, t0 + PROBE_INTERVAL * 3).shadow, None);
        h.shadow_done(0, ms(50), true);
        assert!(h.on_probation(0));
        assert_eq!(h.choose(2, t0 + PROBE_INTERVAL / 2).shadow, None);
        let later = t0 + PROBE_INTERVAL;
        assert_eq!(h.choose(2, later).shadow, Some(0));
        // A shadow answered within the hedge delay ends the probation: it is asked
        // first again and gets no more shadows.
        h.shadow_done(0, ms(1), true);
        assert!(!h.on_probation(0));
        assert_eq!(h.choose(0, later + PROBE_INTERVAL).first, 0);
        assert_eq!(h.choose(1, later + PROBE_INTERVAL * 2).shadow, None);
    }

    #[test]
    fn strikes_must_be_in_a_row_and_a_failed_shadow_keeps_probation() {
        let t0 = Instant::now();
        let mut h = settled();
        // An answer within the delay between two slow ones: no probation.
        h.first_slow(1);
        h.answered(1, ms(1));
        h.first_slow(1);
        assert!(!h.on_probation(1));
        // An answer slower than the delay does not forgive a strike.
        h.answered(1, ms(5));
        h.first_slow(1);
        assert!(h.on_probation(1));
        let plan = h.choose(1, t0);
        assert_eq!(plan.first, 2);
        assert_eq!(plan.shadow, Some(1));
        let before = h.score_of(1);
        h.shadow_done(1, ms(10), false);
        assert!(h.score_of(1) > before);
        assert!(h.on_probation(1));
        // Everyone on probation: the home replica is asked first regardless.
        for r in [0, 2] {
            h.first_slow(r);
            h.first_slow(r);
        }
        assert_eq!(h.choose(2, t0).first, 2);
    }

    #[test]
    fn a_replica_outraced_by_its_hedge_goes_on_probation_at_once() {
        let t0 = Instant::now();
        let mut h = settled();
        // One miss of the hedge delay alone is a strike, not probation...
        h.first_slow(2);
        assert!(!h.on_probation(2));
        // ...but the hedge answering while the first request still has not means the
        // replica is stalled: nobody asks it first, and a shadow will tell when it is back.
        h.outraced(2);
        assert!(h.on_probation(2));
        let plan = h.choose(2, t0);
        assert_eq!((plan.first, plan.shadow), (0, Some(2)));
        // Its first answer within the hedge delay ends it, as for any probation.
        h.shadow_done(2, ms(1), true);
        assert!(!h.on_probation(2));
        assert_eq!(h.choose(2, t0 + PROBE_INTERVAL).first, 2);
    }

    /// Reads waiting on a replica are woken when it goes on probation (by strikes or by
    /// an outraced request), once, and not by strikes that do not reach probation.
    #[test]
    fn going_on_probation_wakes_the_reads_waiting_on_that_replica() {
        use std::future::Future;
        use std::pin::Pin;
        use std::task::{Context, Waker};
        fn woken(f: Pin<&mut tokio::sync::futures::Notified<'_>>) -> bool {
            f.poll(&mut Context::from_waker(Waker::noop())).is_ready()
        }
        let mut h = settled();
        let signal = h.probation_signal(1).expect("replica 1 exists");
        let other = h.probation_signal(2).expect("replica 2 exists");
        let waiting = signal.notified();
        let elsewhere = other.notified();
        tokio::pin!(waiting, elsewhere);
        waiting.as_mut().enable();
        elsewhere.as_mut().enable();
        h.first_slow(1);
        assert!(!woken(waiting.as_mut()));
        h.first_slow(1);
        assert!(woken(waiting.as_mut()));
        assert!(!woken(elsewhere.as_mut()));
        // Already on probation: another strike wakes nobody new.
        let later = signal.notified();
        tokio::pin!(later);
        later.as_mut().enable();
        h.first_slow(1);
        h.outraced(1);
        assert!(!woken(later.as_mut()));
        // An outraced request puts a replica on probation at once, and wakes its reads.
        h.outraced(2);
        assert!(woken(elsewhere.as_mut()));
        assert!(h.probation_signal(7).is_none());
    }

    /// A replica that has stopped answering collects outstanding requests; new reads go
    /// to one with fewer before any of them misses the hedge delay. Equals: home first.
    #[test]
    fn reads_go_first_to_the_replica_with_the_fewest_requests_outstanding() {
        let t0 = Instant::now();
        let mut h = settled();
        assert_eq!(h.choose(1, t0).first, 1);
        h.sent(1);
        let plan = h.choose(1, t0);
        assert_eq!((plan.first, plan.second), (2, 0));
        h.sent(2);
        h.sent(2);
        assert_eq!(h.choose(1, t0).first, 0);
        h.sent(0);
        // 1, 2, 1 outstanding: of the two with one, the first counting from home 2 is 0.
        assert_eq!(h.choose(2, t0).first, 0);
        for r in [0, 1, 2, 2] {
            h.ended(r);
        }
        assert_eq!(h.choose(1, t0).first, 1);
        // Never below zero, and a replica on probation is not asked first however idle.
        h.ended(1);
        h.sent(0);
        h.outraced(1);
        assert_eq!(h.choose(1, t0).first, 2);
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
