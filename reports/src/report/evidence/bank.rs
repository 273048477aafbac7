//! Bank totals over time: the sum of every ok read against the total every read must
//! show, reads that broke it in red.

use crate::report::plots::{draw_series_labels, err, PlotError, FONT, PLOT_WIDTH};
use plotters::prelude::*;
use serde_json::Value;
use splitbrain_checkers::{History, Outcome};

/// The sum of a bank read's balances (a map, or EDN's list of pairs); `None` when some
/// balance is nil or not an integer.
pub fn read_total(v: &Value) -> Option<i64> {
    match v {
        Value::Object(m) => m.values().map(Value::as_i64).sum(),
        Value::Array(items) => items
            .iter()
            .map(|p| {
                p.as_array()
                    .and_then(|kv| kv.get(1))
                    .and_then(Value::as_i64)
            })
            .sum(),
        _ => None,
    }
}

/// (seconds, total) of every ok read whose balances all parse.
pub fn totals(history: &History) -> Vec<(f64, i64)> {
    history
        .pair_slots()
        .iter()
        .filter(|s| s.outcome == Outcome::Ok && history.op_f(s.invoke_pos) == Some("read"))
        .filter_map(|s| {
            let c = s.complete_pos?;
            let total = read_total(&*history.op_value(c)?)?;
            Some((
                history.op_time(s.invoke_pos).unwrap_or(0) as f64 / 1e9,
                total,
            ))
        })
        .collect()
}

/// The totals plotted against the expected one.
pub fn bank_svg(points: &[(f64, i64)], expected: Option<i64>) -> Result<String, PlotError> {
    let t1 = points.iter().map(|p| p.0).fold(1e-3, f64::max);
    let lo = points
        .iter()
        .map(|p| p.1)
        .chain(expected)
        .min()
        .unwrap_or(0);
    let hi = points
        .iter()
        .map(|p| p.1)
        .chain(expected)
        .max()
        .unwrap_or(1);
    let pad = ((hi - lo) as f64 * 0.1).max(1.0);
    let (y0, y1) = (lo as f64 - pad, hi as f64 + pad);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, 280)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .margin_right(24)
            .x_label_area_size(34)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..t1 * 1.02, y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time since start (s)")
            .y_desc("sum of balances")
            .label_style(("sans-serif", FONT))
            .axis_desc_style(("sans-serif", FONT))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        if let Some(e) = expected {
            let c = RGBColor(90, 90, 90);
            chart
                .draw_series(LineSeries::new(
                    vec![(0.0, e as f64), (t1 * 1.02, e as f64)],
                    c.stroke_width(1),
                ))
                .map_err(err)?
                .label(format!("expected total {e}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c));
        }
        let good = RGBColor(0, 114, 178);
        let bad = RGBColor(204, 0, 85);
        for (name, colour, wrong) in [("read total", good, false), ("wrong total", bad, true)] {
            let pts: Vec<_> = points
                .iter()
                .filter(|p| expected.is_some_and(|e| e != p.1) == wrong)
                .map(|&(t, v)| {
                    Circle::new((t, v as f64), if wrong { 3 } else { 2 }, colour.filled())
                })
                .collect();
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(pts)
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| Circle::new((x + 8, y), 3, colour.filled()));
        }
        draw_series_labels(&mut chart)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
