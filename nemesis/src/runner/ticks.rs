//! Faults that act while they last: strobe and skew clocks change offsets on every tick,
//! and `leader-churn` partitions follow each new leader.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::{set_offsets, with_error, Nemesis, NetPart};
use crate::network::CutMode;
use crate::plan::{blocked_flows, ClockMode, NodeNames};
use crate::{ClusterControl, NemesisRecorder};

/// How often a `leader-churn` partition asks who leads.
pub(super) const CHURN_POLL: Duration = Duration::from_millis(20);

/// A running `leader-churn` partition: the node cut off now, and how many more times the
/// cut follows a new leader.
pub(super) struct ChurnJob {
    pub(super) isolated: usize,
    pub(super) handovers_left: u32,
    pub(super) next_tick: Instant,
}

/// A running clock fault; strobe and skew change the offset on every tick.
pub(super) struct ClockJob {
    pub(super) nodes: Vec<usize>,
    pub(super) mode: ClockMode,
    pub(super) offset_ms: i64,
    pub(super) period: Duration,
    pub(super) started: Instant,
    pub(super) next_tick: Instant,
    pub(super) on: bool,
}

/// Groups that cut node `i` off from the rest.
pub(super) fn isolate(names: NodeNames, i: usize, n: usize) -> Vec<Vec<String>> {
    let rest: Vec<usize> = (0..n).filter(|&j| j != i).collect();
    vec![names.names(&[i]), names.names(&rest)]
}

/// How many times a `leader-churn` partition follows a new leader: three hand-overs give
/// Raft's figure 8 its three leaders (one cut off with entries nobody else has, one elected
/// without them and cut off in turn, one that might commit the first one's entries).
pub(super) const CHURN_HANDOVERS: u32 = 3;

impl Nemesis {
    /// One poll of a `leader-churn` partition: once a node other than the cut-off one
    /// leads, cut it off instead (healing the previous one).
    pub(super) async fn churn_tick<C: ClusterControl>(
        &self,
        cluster: &C,
        recorder: &dyn NemesisRecorder,
        k: usize,
        job: &mut ChurnJob,
        n: usize,
    ) {
        job.next_tick = Instant::now() + CHURN_POLL;
        let leaders = cluster.leaders().await;
        let Some(&next) = leaders.iter().find(|&&i| i != job.isolated && i < n) else {
            return;
        };
        let groups = isolate(self.names, next, n);
        let result = blocked_flows(self.names, &groups, &[], n)
            .and_then(|flows| self.set_net_part(k, NetPart::Cut(flows, CutMode::Blackhole), n));
        let v = json!({"isolated": self.names.name(next), "healed": self.names.name(job.isolated),
                       "groups": groups});
        match result {
            Ok(()) => {
                recorder.record("churn-partition", v);
                job.isolated = next;
                job.handovers_left -= 1;
            }
            Err(e) => {
                recorder.record("churn-partition", with_error(v, &[e.to_string()]));
                job.handovers_left = 0;
            }
        }
    }
}

/// Moves a strobe or skew clock fault one step. Errors are not recorded per tick (a
/// tick every few ms would flood the history); the start and stop ops carry the fault.
pub(super) async fn clock_tick<C: ClusterControl>(
    cluster: &C,
    names: NodeNames,
    job: &mut ClockJob,
    now: Instant,
) {
    let offset = match job.mode {
        ClockMode::Strobe => {
            job.on = !job.on;
            if job.on {
                job.offset_ms
            } else {
                0
            }
        }
        ClockMode::Skew => {
            let secs = now.duration_since(job.started).as_secs_f64();
            (job.offset_ms as f64 * secs).round() as i64
        }
        ClockMode::Bump => job.offset_ms,
    };
    let _ = set_offsets(cluster, names, &job.nodes, offset).await;
    job.next_tick = now + job.period;
}
