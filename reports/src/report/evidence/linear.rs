//! Porcupine's view of a linearizability counterexample: the evidence ops as bars per
//! process on a time axis; ops of the longest linearizable prefix found in one colour,
//! the op that could not take effect marked, the rest grey.

use crate::report::plots::{err, PlotError, FONT, PLOT_WIDTH};
use maud::{html, Markup, PreEscaped};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;
use std::collections::HashSet;

/// One op of the evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceOp {
    /// History index of its invoke.
    pub index: u64,
    /// Client process.
    pub process: String,
    /// Invoke and completion times (ns); no completion for an op that never ended.
    pub span: (u64, Option<u64>),
    /// `write 3`, `read → 5`, `cas [1,2]`.
    pub label: String,
    /// `ok`, `fail`, `info`, `pending`.
    pub outcome: String,
}

fn label(op: &Value) -> String {
    let f = op.get("f").and_then(Value::as_str).unwrap_or("?");
    let key = op
        .get("key")
        .filter(|k| !k.is_null())
        .map(|k| format!(" {k}"))
        .unwrap_or_default();
    let outcome = op.get("outcome").and_then(Value::as_str).unwrap_or("");
    let reads = matches!(f, "read" | "get" | "r");
    let value = op.get("value").cloned().unwrap_or(Value::Null);
    let arg = op.get("invoke_value").cloned().unwrap_or(Value::Null);
    if reads && outcome == "ok" {
        format!("{f}{key} → {value}")
    } else if arg.is_null() {
        format!("{f}{key}")
    } else {
        format!("{f}{key} {arg}")
    }
}

/// The evidence ops of a linearizability result (those carrying times).
pub fn evidence_ops(evidence: &[Value]) -> Vec<EvidenceOp> {
    evidence
        .iter()
        .filter_map(|op| {
            Some(EvidenceOp {
                index: op.get("index")?.as_u64()?,
                process: op.get("process").map(|p| p.to_string()).unwrap_or_default(),
                span: (
                    op.get("time")?.as_u64()?,
                    op.get("complete_time").and_then(Value::as_u64),
                ),
                label: label(op),
                outcome: op
                    .get("outcome")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            })
        })
        .collect()
}

/// The bars as SVG: one row per process.
pub fn linear_svg(
    ops: &[EvidenceOp],
    stuck: Option<u64>,
    prefix: &HashSet<u64>,
) -> Result<String, PlotError> {
    let mut procs: Vec<&str> = ops.iter().map(|o| o.process.as_str()).collect();
    procs.sort_by_key(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.to_string()));
    procs.dedup();
    let t0 = ops.iter().map(|o| o.span.0).min().unwrap_or(0);
    let t1 = ops
        .iter()
        .map(|o| o.span.1.unwrap_or(o.span.0))
        .chain(ops.iter().map(|o| o.span.0))
        .max()
        .unwrap_or(1);
    let pad = ((t1 - t0) as f64 * 0.08).max(1000.0);
    let ms = |t: u64| (t as f64 - t0 as f64) / 1e6;
    let (x0, x1) = (-pad / 1e6, (t1 - t0) as f64 / 1e6 + pad / 1e6);
    let rows = procs.len().max(1);
    let height = 80 + 46 * rows as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .margin_right(24)
            .x_label_area_size(34)
            .y_label_area_size(100)
            .build_cartesian_2d(x0..x1, 0f64..rows as f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc("ms since the first op shown")
            .label_style(("sans-serif", FONT))
            .axis_desc_style(("sans-serif", FONT))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(err)?;
        let centred = Pos::new(HPos::Left, VPos::Center);
        for o in ops {
            let row = procs.iter().position(|p| *p == o.process).unwrap_or(0);
            let y = (rows - row) as f64;
            let end = o.span.1.map(ms).unwrap_or(x1);
            let is_stuck = Some(o.index) == stuck;
            let fill = if is_stuck {
                RGBColor(204, 0, 85)
            } else if prefix.contains(&o.index) {
                RGBColor(0, 114, 178)
            } else {
                RGBColor(170, 170, 170)
            };
            let faint = if o.outcome == "ok" { 0.9 } else { 0.45 };
            // The bar in the row's lower half, its words above it.
            let (top, bottom) = (y - 0.5, y - 0.88);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(ms(o.span.0), top), (end, bottom)],
                    fill.mix(faint).filled(),
                )))
                .map_err(err)?;
            if is_stuck {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(ms(o.span.0), top), (end, bottom)],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(err)?;
            }
            let mut words = o.label.clone();
            if o.outcome != "ok" {
                words.push_str(&format!(" ({})", o.outcome));
            }
            if is_stuck {
                words.push_str(" ✗ cannot take effect");
            }
            chart
                .draw_series(std::iter::once(Text::new(
                    words,
                    (ms(o.span.0), y - 0.3),
                    ("sans-serif", FONT)
                        .into_font()
                        .color(&if is_stuck { fill } else { BLACK })
                        .pos(centred),
                )))
                .map_err(err)?;
        }
        for (row, p) in procs.iter().enumerate() {
            let (_, py) = chart
                .plotting_area()
                .map_coordinate(&(x0, (rows - row) as f64 - 0.5));
            root.draw(&Text::new(
                format!("process {p}"),
                (14, py),
                ("sans-serif", 15).into_font().color(&BLACK).pos(centred),
            ))
            .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The section for one linearizability result: bars, then what the search concluded.
pub fn linear_section(evidence: &[Value], details: &Value) -> Option<Markup> {
    let ops = evidence_ops(evidence);
    if ops.is_empty() {
        return None;
    }
    let stuck = details.pointer("/stuck_op/index").and_then(Value::as_u64);
    let prefix: HashSet<u64> = details
        .get("longest_prefix")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let picture = match linear_svg(&ops, stuck, &prefix) {
        Ok(svg) => PreEscaped(svg),
        Err(e) => html! { p.warn { (e.to_string()) } },
    };
    Some(html! {
        figure.linear {
            figcaption {
                "Ops around the one that could not take effect"
                @if let Some(k) = details.get("key").filter(|k| !k.is_null()) { " (key " (k.to_string()) ")" }
                ": "
                span.sw style="background:#cc0055" {} " could not take effect (index " (stuck.map(|s| s.to_string()).unwrap_or("?".into())) ") "
                span.sw style="background:#0072b2" {} " in the longest linearizable prefix found ("
                (details.get("longest_prefix_len").map(|v| v.to_string()).unwrap_or_default()) " ops) "
                span.sw style="background:#bebebe" {} " other ops; faint bars did not complete ok."
            }
            (picture)
            @if let Some(state) = details.get("state") {
                p { "State after the longest prefix: " code { (state.to_string()) } }
            }
        }
    })
}
