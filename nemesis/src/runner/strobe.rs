//! `strobe-pause`: nodes stopped (SIGSTOP) for `stop_ms` at the start of every
//! `every_ms` period while the fault lasts, like a garbage collector's pauses.

use std::time::Duration;

use tokio::time::Instant;

use super::Nemesis;
use crate::ClusterControl;

/// Where a strobe stands `elapsed_ms` after it began: whether the nodes should be stopped
/// now, and the time (ms since it began) of the next change. Each period of `every_ms`
/// starts with `stop_ms` stopped.
pub(crate) fn strobe_phase(elapsed_ms: u64, stop_ms: u64, every_ms: u64) -> (bool, u64) {
    let every = every_ms.max(1);
    let period_start = elapsed_ms / every * every;
    if elapsed_ms - period_start < stop_ms.min(every) {
        (true, period_start + stop_ms.min(every))
    } else {
        (false, period_start + every)
    }
}

/// A running strobe-pause fault.
pub(super) struct StrobeJob {
    pub(super) nodes: Vec<usize>,
    stop_ms: u64,
    every_ms: u64,
    started: Instant,
    pub(super) next_tick: Instant,
    /// Whether the nodes are stopped now.
    stopped: bool,
}

impl Nemesis {
    /// Starts strobing `nodes`: they stop at once.
    pub(super) async fn strobe_start<C: ClusterControl>(
        &self,
        cluster: &C,
        nodes: Vec<usize>,
        stop_ms: u64,
        every_ms: u64,
    ) -> super::Started {
        self.state().strobes.extend(nodes.iter().copied());
        let now = Instant::now();
        let mut job = StrobeJob {
            nodes,
            stop_ms,
            every_ms,
            started: now,
            next_tick: now,
            stopped: false,
        };
        self.strobe_tick(cluster, &mut job, now).await;
        super::Started::Strobe(job)
    }

    /// Stops or resumes the nodes as the strobe's phase at `now` requires. Errors are not
    /// recorded per tick (there are many ticks); the start and stop ops carry the fault.
    pub(super) async fn strobe_tick<C: ClusterControl>(
        &self,
        cluster: &C,
        job: &mut StrobeJob,
        now: Instant,
    ) {
        let elapsed = now.duration_since(job.started).as_millis() as u64;
        let (stop, next) = strobe_phase(elapsed, job.stop_ms, job.every_ms);
        if stop != job.stopped {
            for &i in &job.nodes {
                let r = if stop {
                    cluster.pause(i).await
                } else {
                    cluster.resume(i).await
                };
                if r.is_ok() {
                    let mut st = self.state();
                    if stop {
                        st.paused.insert(i);
                    } else {
                        st.paused.remove(&i);
                    }
                }
            }
            job.stopped = stop;
        }
        job.next_tick = job.started + Duration::from_millis(next);
    }

    /// Ends a strobe: its nodes run again. Returns one message per node that could not
    /// be resumed.
    pub(super) async fn strobe_end<C: ClusterControl>(
        &self,
        cluster: &C,
        job: StrobeJob,
    ) -> Vec<String> {
        for &i in &job.nodes {
            self.state().strobes.remove(&i);
        }
        self.resume_paused(cluster, &job.nodes).await
    }

    /// Resumes those of `nodes` that are paused (a node another fault already resumed
    /// is left alone). Returns one message per node that could not be resumed.
    pub(super) async fn resume_paused<C: ClusterControl>(
        &self,
        cluster: &C,
        nodes: &[usize],
    ) -> Vec<String> {
        let mut errors = Vec::new();
        for &i in nodes {
            if !self.state().paused.contains(&i) {
                continue;
            }
            match cluster.resume(i).await {
                Ok(()) => {
                    self.state().paused.remove(&i);
                }
                Err(e) => errors.push(format!("{}: {e}", self.names.name(i))),
            }
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::strobe_phase;

    #[test]
    fn each_period_starts_stopped_for_stop_ms() {
        // 30 ms stopped every 300 ms.
        assert_eq!(strobe_phase(0, 30, 300), (true, 30));
        assert_eq!(strobe_phase(29, 30, 300), (true, 30));
        assert_eq!(strobe_phase(30, 30, 300), (false, 300));
        assert_eq!(strobe_phase(299, 30, 300), (false, 300));
        assert_eq!(strobe_phase(300, 30, 300), (true, 330));
        assert_eq!(strobe_phase(1_000, 30, 300), (false, 1_200));
    }

    #[test]
    fn stopped_share_is_stop_over_every() {
        let stopped = (0..3_000u64)
            .filter(|&t| strobe_phase(t, 30, 300).0)
            .count();
        assert_eq!(stopped, 300);
        // a degenerate period never divides by zero
        assert_eq!(strobe_phase(5, 1, 0), (true, 6));
    }
}
