//! Healing: undo everything a run left broken, and record it.

use std::collections::BTreeSet;

use serde_json::json;

use super::{with_error, Nemesis, NetPart};
use crate::plan::NodeNames;
use crate::{ClusterControl, NemesisError, NemesisRecorder};

impl Nemesis {
    /// Undoes every fault: heals the network, resets clocks, resumes paused nodes,
    /// restarts dead ones. Safe to call more than once. Records each undo and a final
    /// `heal` op; returns an error naming every step that failed (after trying them all).
    pub async fn heal<C: ClusterControl>(
        &self,
        cluster: &C,
        recorder: &dyn NemesisRecorder,
    ) -> Result<(), NemesisError> {
        let mut errors = Vec::new();
        let (paused, killed, clocks, net_kinds, strobes) = {
            let mut st = self.state();
            let kinds: BTreeSet<&'static str> = st.net.values().map(NetPart::kind).collect();
            st.net.clear();
            let strobes = std::mem::take(&mut st.strobes);
            (
                std::mem::take(&mut st.paused),
                std::mem::take(&mut st.killed),
                std::mem::take(&mut st.clocks),
                kinds,
                strobes,
            )
        };
        if let Some(net) = &self.network {
            if let Err(e) = net.heal_all() {
                errors.push(format!("network: {e}"));
            }
        }
        for kind in &net_kinds {
            recorder.record(&format!("stop-{kind}"), json!({"healed": true}));
        }
        let step =
            |f: &str, nodes: &BTreeSet<usize>, errs: Vec<String>, errors: &mut Vec<String>| {
                if !nodes.is_empty() {
                    let nodes: Vec<usize> = nodes.iter().copied().collect();
                    recorder.record(
                        f,
                        with_error(
                            json!({"nodes": self.names.names(&nodes), "healed": true}),
                            &errs,
                        ),
                    );
                }
                errors.extend(errs);
            };
        let mut errs = Vec::new();
        for &i in &paused {
            if let Err(e) = cluster.resume(i).await {
                errs.push(format!("resume {}: {e}", self.names.name(i)));
            }
        }
        step("resume", &paused, errs, &mut errors);
        // a strobe still running when the run ended: its nodes were resumed just above
        step("stop-strobe-pause", &strobes, Vec::new(), &mut errors);
        let mut errs = Vec::new();
        for &i in &killed {
            if let Err(e) = cluster.restart(i).await {
                errs.push(format!("restart {}: {e}", self.names.name(i)));
            }
        }
        step("restart", &killed, errs, &mut errors);
        let clock_nodes: Vec<usize> = clocks.iter().copied().collect();
        let errs = reset_clocks(cluster, self.names, &clock_nodes).await;
        step("stop-clock", &clocks, errs, &mut errors);
        recorder.record("heal", with_error(json!({"healed": true}), &errors));
        recorder.set_active("");
        if errors.is_empty() {
            Ok(())
        } else {
            Err(NemesisError::Fault(format!(
                "heal incomplete: {}",
                errors.join("; ")
            )))
        }
    }
}

/// How long healing keeps retrying a clock reset: a node just restarted by the same heal
/// may take a moment before its admin endpoint answers.
const CLOCK_RESET_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Resets the clocks of `nodes` to offset 0, retrying each failed node until
/// [`CLOCK_RESET_BOUND`]; returns one message per node still failing.
async fn reset_clocks<C: ClusterControl>(
    cluster: &C,
    names: NodeNames,
    nodes: &[usize],
) -> Vec<String> {
    let start = std::time::Instant::now();
    let mut pending: Vec<usize> = nodes.to_vec();
    loop {
        let mut still = Vec::new();
        let mut errors = Vec::new();
        for &i in &pending {
            if let Err(e) = cluster.set_clock_offset(i, 0).await {
                still.push(i);
                errors.push(format!("clock {}: {e}", names.name(i)));
            }
        }
        if still.is_empty() || start.elapsed() >= CLOCK_RESET_BOUND {
            return errors;
        }
        pending = still;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Sets the clock offset of every node in `nodes`; returns one message per failure.
pub(super) async fn set_offsets<C: ClusterControl>(
    cluster: &C,
    names: NodeNames,
    nodes: &[usize],
    offset_ms: i64,
) -> Vec<String> {
    let mut errors = Vec::new();
    for &i in nodes {
        if let Err(e) = cluster.set_clock_offset(i, offset_ms).await {
            errors.push(format!("clock {}: {e}", names.name(i)));
        }
    }
    errors
}
