//! The one quantile definition every printed percentile uses (the summary's latency
//! figures, the report's percentile lines, the convergence checker's times to
//! visibility, the benches (the echo bench's median round trip too), Maelstrom's network
//! statistics, the kv hedge delay, a suite cell's median time to detect), so a run's p99
//! is the same figure wherever it is shown, and a median is always the p50.
//!
//! **Nearest rank**: the `q` quantile of `n` values is the value at rank `⌈q·n⌉` (1-based)
//! of the sorted values, rank 1 for `q = 0`. It is always a value that was observed
//! (never a blend of two latencies no request had), and it promises what a tail-latency
//! figure is read as: at least a fraction `q` of the values are at or below it. p100 is
//! the maximum, p0 the minimum. No values have no quantile (`None`), not a zero that would
//! read as "instant".

/// The 0-based index of the `q` quantile (nearest rank) among `len` sorted values, `None`
/// when `len` is 0. `q` is clamped to `[0, 1]`; a NaN `q` is taken as 0.
pub fn nearest_rank_index(len: usize, q: f64) -> Option<usize> {
    if len == 0 {
        return None;
    }
    let q = if q.is_nan() { 0.0 } else { q.clamp(0.0, 1.0) };
    let rank = ((q * len as f64).ceil() as usize).clamp(1, len);
    Some(rank - 1)
}

/// The `q` quantile (nearest rank) of values already sorted ascending.
pub fn quantile_of_sorted<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    nearest_rank_index(sorted.len(), q).map(|i| sorted[i])
}

/// The `q` quantile (nearest rank) of unsorted values, found by selection rather than a
/// full sort (histories hold millions of latencies); reorders `values`.
pub fn quantile_by_selection<T: Ord + Copy>(values: &mut [T], q: f64) -> Option<T> {
    let i = nearest_rank_index(values.len(), q)?;
    Some(*values.select_nth_unstable(i).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_values_have_no_quantile() {
        assert_eq!(nearest_rank_index(0, 0.5), None);
        assert_eq!(quantile_of_sorted::<f64>(&[], 0.99), None);
        assert_eq!(quantile_by_selection::<u64>(&mut [], 0.0), None);
    }

    #[test]
    fn one_value_is_every_quantile() {
        for q in [0.0, 0.5, 0.99, 1.0] {
            assert_eq!(quantile_of_sorted(&[7.5], q), Some(7.5), "{q}");
            assert_eq!(quantile_by_selection(&mut [7u64], q), Some(7), "{q}");
        }
    }

    #[test]
    fn p0_is_the_minimum_and_p100_the_maximum() {
        let sorted = [1, 2, 3, 4, 5];
        assert_eq!(quantile_of_sorted(&sorted, 0.0), Some(1));
        assert_eq!(quantile_of_sorted(&sorted, 1.0), Some(5));
        // Out of range and NaN are clamped, not a panic.
        assert_eq!(quantile_of_sorted(&sorted, -1.0), Some(1));
        assert_eq!(quantile_of_sorted(&sorted, 2.0), Some(5));
        assert_eq!(quantile_of_sorted(&sorted, f64::NAN), Some(1));
    }

    #[test]
    fn nearest_rank_takes_the_ceiling_rank() {
        // 1..=1000: p50 is the 500th value, p99 the 990th, p99.9 the 999th.
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(quantile_of_sorted(&v, 0.5), Some(500));
        assert_eq!(quantile_of_sorted(&v, 0.99), Some(990));
        assert_eq!(quantile_of_sorted(&v, 0.999), Some(999));
        // Four values: p50 is the 2nd (at least half are at or below it), p51 the 3rd.
        assert_eq!(quantile_of_sorted(&[10, 20, 30, 40], 0.5), Some(20));
        assert_eq!(quantile_of_sorted(&[10, 20, 30, 40], 0.51), Some(30));
    }

    #[test]
    fn selection_agrees_with_sorting() {
        let values: Vec<u64> = (0..1001u64).map(|i| (i * 7919) % 613).collect();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        for q in [0.0, 0.25, 0.5, 0.95, 0.99, 1.0] {
            let mut shuffled = values.clone();
            assert_eq!(
                quantile_by_selection(&mut shuffled, q),
                quantile_of_sorted(&sorted, q),
                "{q}"
            );
        }
    }
}
