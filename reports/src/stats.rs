//! Figures computed from a history: counts, availability, latency percentiles, throughput.

use serde::{Deserialize, Serialize};
use splitbrain_checkers::{History, Outcome};

/// Latency percentiles of `ok` client ops, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// Summary figures of one history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryStats {
    /// Client operations (invoke/completion pairs).
    pub ops: usize,
    /// Completed `ok`.
    pub ok: usize,
    /// Completed `fail`.
    pub fail: usize,
    /// Completed `info` or never completed.
    pub info: usize,
    /// `ok / ops`: the share of operations that succeeded.
    pub availability: f64,
    /// Latency of `ok` ops.
    pub latency_ms: Latency,
    /// `ok` ops per second over the history's span.
    pub throughput: f64,
    /// Seconds from the first to the last event.
    pub duration_s: f64,
    /// Nemesis events recorded.
    pub nemesis_events: usize,
}

/// Computes the figures of a history. Latency uses op times, so histories without times
/// (Jepsen text logs) report zeros.
pub fn history_stats(history: &History) -> HistoryStats {
    // Slots and op times only, so a lazily read history's values are never parsed here.
    let pairs = history.pair_slots();
    let counts = history.outcome_counts();
    let time = |pos: usize| history.op_time(pos).unwrap_or(0);
    let mut latencies: Vec<u64> = pairs
        .iter()
        .filter(|p| p.outcome == Outcome::Ok)
        .filter_map(|p| {
            p.complete_pos
                .map(|c| time(c).saturating_sub(time(p.invoke_pos)))
        })
        .collect();
    let (p50, p95, p99) = (
        percentile(&mut latencies, 0.50),
        percentile(&mut latencies, 0.95),
        percentile(&mut latencies, 0.99),
    );
    let max = latencies.iter().max();
    let first = time(0);
    let last = history.len().checked_sub(1).map(time).unwrap_or(0);
    let duration_s = last.saturating_sub(first) as f64 / 1e9;
    let ops = pairs.len();
    HistoryStats {
        ops,
        ok: counts.ok,
        fail: counts.fail,
        info: counts.info + counts.pending,
        availability: if ops == 0 {
            0.0
        } else {
            counts.ok as f64 / ops as f64
        },
        latency_ms: Latency {
            p50,
            p95,
            p99,
            max: max.map(|&l| l as f64 / 1e6).unwrap_or(0.0),
        },
        throughput: if duration_s > 0.0 {
            counts.ok as f64 / duration_s
        } else {
            0.0
        },
        duration_s,
        nemesis_events: history.nemesis_count(),
    }
}

/// The `q` quantile of `latencies` (ns) in ms, by [`splitbrain_checkers::quantile`]'s
/// nearest rank, found by selection (a history has millions), which reorders
/// `latencies`; 0 for none (the summary's figures are plain numbers).
fn percentile(latencies: &mut [u64], q: f64) -> f64 {
    splitbrain_checkers::quantile::quantile_by_selection(latencies, q)
        .map_or(0.0, |ns| ns as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_checkers::{Op, OpType, Process};

    #[test]
    fn percentiles_are_those_of_the_sorted_latencies() {
        // Out of order, with repeats: selection must pick what sorting would.
        let latencies: Vec<u64> = (0..1001u64).map(|i| (i * 7919) % 613 * 1_000_000).collect();
        let mut sorted = latencies.clone();
        sorted.sort_unstable();
        for q in [0.0, 0.5, 0.95, 0.99, 1.0] {
            // Nearest rank: rank ⌈q·n⌉, 1-based.
            let at = ((sorted.len() as f64 * q).ceil() as usize).max(1) - 1;
            let mut shuffled = latencies.clone();
            assert_eq!(percentile(&mut shuffled, q), sorted[at] as f64 / 1e6, "{q}");
        }
        assert_eq!(percentile(&mut [], 0.5), 0.0);
    }

    #[test]
    fn counts_and_percentiles() {
        let mut ops = Vec::new();
        for i in 0..100u64 {
            let p = Process::Client(i);
            ops.push(Op::new(p, OpType::Invoke, "read", json!(null)).at(i * 10_000_000));
            let t = if i == 99 { OpType::Info } else { OpType::Ok };
            // Latency of op i is (i + 1) ms.
            ops.push(Op::new(p, t, "read", json!(1)).at(i * 10_000_000 + (i + 1) * 1_000_000));
        }
        ops.sort_by_key(|o| o.time);
        let h = History::new(ops).unwrap();
        let s = history_stats(&h);
        assert_eq!((s.ops, s.ok, s.fail, s.info), (100, 99, 0, 1));
        assert_eq!(s.latency_ms.max, 99.0);
        assert_eq!(s.latency_ms.p50, 50.0);
        assert!((s.availability - 0.99).abs() < 1e-9);
    }
}
