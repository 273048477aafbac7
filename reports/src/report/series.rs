//! What the plots draw, computed from op times alone (never the ops' values): latency
//! points merged per screen cell, percentile lines and throughput per time bucket.

use splitbrain_checkers::{History, Outcome};
use std::collections::HashSet;

/// Horizontal cells a latency plot is merged into (about two pixels each).
const X_CELLS: u64 = 600;
/// Vertical cells (log scale) a latency plot is merged into.
const Y_CELLS: f64 = 160.0;
/// Points a latency plot keeps at most (each is about 100 bytes of SVG).
const MAX_POINTS: usize = 25_000;
/// At most this many `f` names get their own marker; the rest share the last.
pub const MAX_F_SERIES: usize = 6;

/// One plotted latency point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyPoint {
    /// Invoke time, seconds since the test began.
    pub t: f64,
    /// Latency in milliseconds.
    pub ms: f64,
    /// How the op ended.
    pub outcome: Outcome,
    /// Which entry of [`Series::fs`] the op's `f` is.
    pub f: usize,
}

/// One time bucket of the percentile and throughput lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bucket {
    /// The bucket's midpoint, seconds.
    pub t: f64,
    /// p50 / p95 / p99 latency of ok ops invoked in the bucket (ms); `None` without any.
    pub pct: Option<[f64; 3]>,
    /// ok ops per second per `f` (indexed like [`Series::fs`]), completed in the bucket.
    pub ok_rate: Vec<f64>,
    /// fail ops per second completed in the bucket.
    pub fail_rate: f64,
    /// info ops per second completed in the bucket.
    pub info_rate: f64,
}

/// Everything the latency and throughput plots need.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// The `f` names with their own marker and line, most frequent first.
    pub fs: Vec<String>,
    /// Latency points, at most one per (f, outcome, screen cell).
    pub points: Vec<LatencyPoint>,
    /// Client ops in all, before merging.
    pub total_points: usize,
    /// Ops that never completed (no latency to draw).
    pub pending: usize,
    /// Percentile and rate buckets over the run.
    pub buckets: Vec<Bucket>,
    /// Bucket width in seconds.
    pub bucket_s: f64,
    /// The run's span in seconds (last op time).
    pub span_s: f64,
    /// Smallest and largest latency drawn (ms), for the log axis.
    pub ms_range: (f64, f64),
}

fn bucket_width(span_s: f64) -> f64 {
    // About 40 buckets, none shorter than a quarter second (so each p99 has ops behind
    // it) unless the whole history is shorter than ten seconds.
    let floor = if span_s < 10.0 { 0.0 } else { 0.25 };
    [
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
        300.0,
    ]
    .into_iter()
    .find(|&w| w >= floor && span_s / w <= 40.0)
    .unwrap_or(600.0)
}

/// The `q` quantile of a bucket's sorted latencies ([`splitbrain_checkers::quantile`]'s
/// nearest rank); 0 for an empty bucket.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    splitbrain_checkers::quantile::quantile_of_sorted(sorted, q).unwrap_or(0.0)
}

/// Computes the plots' data for a history.
pub fn series(history: &History) -> Series {
    let slots = history.pair_slots();
    let time = |pos: usize| history.op_time(pos).unwrap_or(0);
    let span_ns = history.len().checked_sub(1).map(time).unwrap_or(0).max(1);
    let span_s = span_ns as f64 / 1e9;
    // f names by frequency (interned names would do, but op_f is cheap enough).
    let mut counts: Vec<(String, usize)> = Vec::new();
    let f_of: Vec<usize> = slots
        .iter()
        .map(|s| {
            let f = history.op_f(s.invoke_pos).unwrap_or("?");
            match counts.iter().position(|(n, _)| n == f) {
                Some(i) => {
                    counts[i].1 += 1;
                    i
                }
                None => {
                    counts.push((f.to_string(), 1));
                    counts.len() - 1
                }
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(counts[i].1));
    let mut rank = vec![0usize; counts.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i] = r.min(MAX_F_SERIES - 1);
    }
    let mut fs: Vec<String> = order.iter().map(|&i| counts[i].0.clone()).collect();
    if fs.len() > MAX_F_SERIES {
        fs.truncate(MAX_F_SERIES - 1);
        fs.push("other".into());
    }

    let bucket_s = bucket_width(span_s);
    let nb = ((span_s / bucket_s).ceil() as usize).max(1);
    let mut lat_by_bucket: Vec<Vec<f64>> = vec![Vec::new(); nb];
    let mut buckets: Vec<Bucket> = (0..nb)
        .map(|i| Bucket {
            t: (i as f64 + 0.5) * bucket_s,
            ok_rate: vec![0.0; fs.len()],
            ..Bucket::default()
        })
        .collect();
    let bucket_of = |ns: u64| ((ns as f64 / 1e9 / bucket_s) as usize).min(nb - 1);

    let (mut lo, mut hi) = (f64::MAX, 0.0f64);
    let mut raw: Vec<LatencyPoint> = Vec::with_capacity(slots.len());
    let mut pending = 0;
    for (s, &fi) in slots.iter().zip(&f_of) {
        let Some(c) = s.complete_pos else {
            pending += 1;
            continue;
        };
        let (start, stop) = (time(s.invoke_pos), time(c));
        // Latency floor of 1 µs keeps the log axis finite.
        let ms = (stop.saturating_sub(start) as f64 / 1e6).max(0.001);
        lo = lo.min(ms);
        hi = hi.max(ms);
        let f = rank[fi];
        raw.push(LatencyPoint {
            t: start as f64 / 1e9,
            ms,
            outcome: s.outcome,
            f,
        });
        let b = &mut buckets[bucket_of(stop)];
        match s.outcome {
            Outcome::Ok => {
                b.ok_rate[f] += 1.0 / bucket_s;
                lat_by_bucket[bucket_of(start)].push(ms);
            }
            Outcome::Fail => b.fail_rate += 1.0 / bucket_s,
            _ => b.info_rate += 1.0 / bucket_s,
        }
    }
    for (b, mut l) in buckets.iter_mut().zip(lat_by_bucket) {
        if !l.is_empty() {
            l.sort_by(f64::total_cmp);
            b.pct = Some([
                percentile(&l, 0.5),
                percentile(&l, 0.95),
                percentile(&l, 0.99),
            ]);
        }
    }
    if raw.is_empty() {
        (lo, hi) = (0.1, 1.0);
    }
    // Merge points that would land on the same screen cell: the picture is the same,
    // the page stays small for a million ops. Where even that leaves too many (a dense
    // cloud), merge over coarser cells until it fits.
    let (llo, lhi) = (lo.log10(), hi.log10().max(lo.log10() + 1e-9));
    let total_points = raw.len();
    let mut points = Vec::new();
    for coarse in [1.0, 2.0, 4.0, 8.0, 16.0] {
        let (xn, yn) = (X_CELLS as f64 / coarse, Y_CELLS / coarse);
        let mut seen = HashSet::new();
        points = raw
            .iter()
            .filter(|p| {
                let xc = (p.t / span_s * xn) as u64;
                let yc = ((p.ms.log10() - llo) / (lhi - llo) * yn) as u64;
                seen.insert((p.f, p.outcome as u8, xc, yc))
            })
            .copied()
            .collect();
        if points.len() <= MAX_POINTS {
            break;
        }
    }
    Series {
        fs,
        points,
        total_points,
        pending,
        buckets,
        bucket_s,
        span_s,
        ms_range: (lo, hi),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_checkers::{Op, OpType, Process};

    #[test]
    fn dense_points_merge_and_rates_count_ok_ops() {
        let mut ops = Vec::new();
        // 2,000 reads of 1 ms each, one every 5 ms: 10 s at 200 ok/s.
        for i in 0..2000u64 {
            let p = Process::Client(i % 4);
            ops.push(Op::new(p, OpType::Invoke, "read", json!(null)).at(i * 5_000_000));
            ops.push(Op::new(p, OpType::Ok, "read", json!(1)).at(i * 5_000_000 + 1_000_000));
        }
        let s = series(&History::new(ops).unwrap());
        assert_eq!(s.total_points, 2000);
        assert!(s.points.len() <= X_CELLS as usize + 1, "{}", s.points.len());
        assert_eq!(s.fs, vec!["read".to_string()]);
        let mid = &s.buckets[s.buckets.len() / 2];
        assert!((mid.ok_rate[0] - 200.0).abs() < 1.0, "{:?}", mid.ok_rate);
        assert_eq!(mid.pct.map(|p| p[1]), Some(1.0));
    }
}
