//! Per-replica divergence over time for convergence workloads: after the heal, how many
//! keys each replica still shows differently from the state most replicas ended with.
//! A converging run's lines all fall to zero; a replica that never converges stays up.

use crate::report::plots::{draw_series_labels, err, PlotError, FONT, PLOT_WIDTH};
use plotters::prelude::*;
use serde_json::Value;
use splitbrain_checkers::{History, OpType};
use std::collections::{BTreeMap, HashMap};

/// One replica's line: (seconds since the heal, keys that differ from the final state).
pub type Line = Vec<(f64, usize)>;

/// A value with every array of scalars sorted, so two replicas holding the same elements
/// in another order compare equal (element order is the committed-prefix checker's job).
fn canonical(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Array(items) => {
                let mut items: Vec<Value> = items.iter().map(sort).collect();
                if items.iter().all(|i| !i.is_array() && !i.is_object()) {
                    items.sort_by_key(|i| i.to_string());
                }
                Value::Array(items)
            }
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), sort(v))).collect())
            }
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

/// The lines of every replica that read after the op at `from_index` (the heal), or
/// `None` when there are no such reads.
pub fn divergence(history: &History, from_index: u64) -> Option<(BTreeMap<String, Line>, usize)> {
    // (time, replica, key, canonical value) of every ok read from the heal on.
    let mut reads: Vec<(u64, String, String, String)> = Vec::new();
    let mut start: Option<u64> = None;
    for pos in 0..history.len() {
        let Some(op) = history.op(pos) else { continue };
        if op.index < from_index {
            continue;
        }
        start.get_or_insert(op.time);
        if op.op_type != OpType::Ok || op.f != "read" {
            continue;
        }
        let key = op
            .key
            .as_ref()
            .map(|k| k.as_str().map_or_else(|| k.to_string(), str::to_string));
        if let (Some(node), Some(key)) = (op.node.clone(), key) {
            reads.push((op.time, node, key, canonical(&op.value)));
        }
    }
    let start = start?;
    if reads.is_empty() {
        return None;
    }
    // Each replica's last value per key, and the plurality of those: the final state.
    let mut last: HashMap<(&str, &str), &str> = HashMap::new();
    for (_, node, key, v) in &reads {
        last.insert((node.as_str(), key.as_str()), v.as_str());
    }
    let mut tallies: HashMap<&str, HashMap<&str, usize>> = HashMap::new();
    for (&(_, key), &v) in &last {
        *tallies.entry(key).or_default().entry(v).or_default() += 1;
    }
    let fin: HashMap<&str, &str> = tallies
        .iter()
        .map(|(k, t)| {
            let best = t
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
                .map(|(v, _)| *v)
                .unwrap_or("");
            (*k, best)
        })
        .collect();
    let keys = fin.len();
    // Replay: a key counts as differing until the replica's latest read of it matches.
    let mut current: HashMap<(&str, &str), &str> = HashMap::new();
    let mut differing: BTreeMap<String, usize> = BTreeMap::new();
    let mut lines: BTreeMap<String, Line> = BTreeMap::new();
    for (t, node, key, v) in &reads {
        let d = differing.entry(node.clone()).or_insert(keys);
        let before = current
            .get(&(node.as_str(), key.as_str()))
            .is_some_and(|c| fin.get(key.as_str()) == Some(c));
        current.insert((node.as_str(), key.as_str()), v.as_str());
        let after = fin.get(key.as_str()) == Some(&v.as_str());
        match (before, after) {
            (false, true) => *d -= 1,
            (true, false) => *d += 1,
            _ => {}
        }
        let secs = t.saturating_sub(start) as f64 / 1e9;
        let line = lines.entry(node.clone()).or_default();
        // Only changes (and the last point) are drawn.
        if line.last().map(|p| p.1) != Some(*d) {
            line.push((secs, *d));
        }
    }
    let t_end = reads
        .last()
        .map(|r| r.0.saturating_sub(start) as f64 / 1e9)
        .unwrap_or(0.0);
    for line in lines.values_mut() {
        if let Some(&(_, d)) = line.last() {
            line.push((t_end, d));
        }
    }
    Some((lines, keys))
}

/// The lines as SVG.
pub fn divergence_svg(lines: &BTreeMap<String, Line>, keys: usize) -> Result<String, PlotError> {
    let t1 = lines
        .values()
        .flat_map(|l| l.iter().map(|p| p.0))
        .fold(1e-3, f64::max);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .margin_right(24)
            .x_label_area_size(34)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..t1 * 1.02, 0f64..(keys as f64 * 1.05).max(1.0))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time since the heal (s)")
            .y_desc("keys differing")
            .label_style(("sans-serif", FONT))
            .axis_desc_style(("sans-serif", FONT))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        for (i, (node, line)) in lines.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            // A step line: each value holds until the next change.
            let mut pts = Vec::with_capacity(line.len() * 2);
            for w in line.windows(2) {
                pts.push((w[0].0, w[0].1 as f64));
                pts.push((w[1].0, w[0].1 as f64));
            }
            if let Some(&(t, d)) = line.last() {
                pts.push((t, d as f64));
            }
            chart
                .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
                .map_err(err)?
                .label(node.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
        }
        draw_series_labels(&mut chart)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_checkers::{Op, Process};

    fn read(p: u64, node: &str, key: &str, v: Value, t: u64) -> [Op; 2] {
        let mut done = Op::new(Process::Client(p), OpType::Ok, "read", v)
            .with_key(key)
            .at(t + 1);
        done.node = Some(node.to_string());
        [
            Op::new(Process::Client(p), OpType::Invoke, "read", Value::Null)
                .with_key(key)
                .at(t),
            done,
        ]
    }

    #[test]
    fn a_converging_replica_falls_to_zero_and_a_divergent_one_stays() {
        let mut ops = Vec::new();
        // n1 and n2 end with {1, 2} on k (in either order); n3 keeps {1}.
        ops.extend(read(0, "n1", "k", json!([1]), 10));
        ops.extend(read(1, "n2", "k", json!([2, 1]), 20));
        ops.extend(read(2, "n3", "k", json!([1]), 30));
        ops.extend(read(0, "n1", "k", json!([1, 2]), 40));
        ops.extend(read(2, "n3", "k", json!([1]), 50));
        let h = History::new(ops).unwrap();
        let (lines, keys) = divergence(&h, 0).unwrap();
        assert_eq!(keys, 1);
        assert_eq!(lines["n1"].last().unwrap().1, 0, "{lines:?}");
        assert_eq!(lines["n2"].last().unwrap().1, 0);
        assert_eq!(lines["n3"].last().unwrap().1, 1);
        // n1 first read the old value: it differed, then converged.
        assert_eq!(lines["n1"].first().unwrap().1, 1);
        let svg = divergence_svg(&lines, keys).unwrap();
        assert!(svg.contains("n3") && svg.contains("keys differing"));
    }

    #[test]
    fn reads_before_the_heal_are_left_out() {
        let mut ops = Vec::new();
        ops.extend(read(0, "n1", "k", json!([9]), 10));
        let h = History::new(ops).unwrap();
        assert!(divergence(&h, 5).is_none());
    }
}
