//! An Elle cycle as a small graph: transactions on a ring, one arrow per dependency
//! edge, labelled with its kind, and every edge's explanation listed beneath.

use crate::report::plots::{err, PlotError};
use maud::{html, Markup, PreEscaped};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

const SIZE: (u32, u32) = (560, 340);
const NODE_R: i32 = 24;

/// One edge of a cycle as Elle's checker explains it.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleEdge {
    /// History index of the transaction the edge leaves.
    pub from: u64,
    /// History index of the transaction the edge enters.
    pub to: u64,
    /// `ww`, `wr`, `rw`, `realtime` or `process`.
    pub kind: String,
    /// Why the edge holds, in words.
    pub explanation: String,
}

/// One anomaly instance that is a cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycle {
    /// The anomaly's name (`G1c`, `G-single`, ...).
    pub anomaly: String,
    /// The transactions in cycle order: (history index, process).
    pub txns: Vec<(u64, String)>,
    /// The edges, `txns[i] -> txns[i+1]`.
    pub edges: Vec<CycleEdge>,
}

/// The cycles in an Elle result's details (`anomalies.<type>.instances[].steps`), at most
/// `per_type` per anomaly type.
pub fn cycles(details: &Value, per_type: usize) -> Vec<Cycle> {
    let Some(anomalies) = details.get("anomalies").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, a) in anomalies {
        let instances = a.get("instances").and_then(Value::as_array);
        for inst in instances.into_iter().flatten().take(per_type) {
            let Some(steps) = inst.get("steps").and_then(Value::as_array) else {
                continue;
            };
            let edges: Vec<CycleEdge> = steps
                .iter()
                .filter_map(|s| {
                    Some(CycleEdge {
                        from: s.get("from")?.as_u64()?,
                        to: s.get("to")?.as_u64()?,
                        kind: s
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string(),
                        explanation: s
                            .get("explanation")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    })
                })
                .collect();
            if edges.is_empty() {
                continue;
            }
            let process_of = |ix: u64| {
                inst.get("cycle")
                    .and_then(Value::as_array)
                    .and_then(|c| {
                        c.iter()
                            .find(|t| t.get("index").and_then(Value::as_u64) == Some(ix))
                    })
                    .and_then(|t| t.get("process"))
                    .map(|p| p.to_string())
                    .unwrap_or_default()
            };
            let txns = edges.iter().map(|e| (e.from, process_of(e.from))).collect();
            out.push(Cycle {
                anomaly: name.clone(),
                txns,
                edges,
            });
        }
    }
    out
}

/// The colour of a dependency kind.
fn kind_colour(kind: &str) -> RGBColor {
    match kind {
        "ww" => RGBColor(31, 119, 180),
        "wr" => RGBColor(44, 160, 44),
        "rw" => RGBColor(214, 39, 40),
        "realtime" => RGBColor(110, 110, 110),
        "process" => RGBColor(148, 103, 189),
        _ => RGBColor(0, 0, 0),
    }
}

/// The cycle drawn as SVG.
pub fn cycle_svg(c: &Cycle) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let n = c.txns.len().max(1);
        let (cx, cy) = (SIZE.0 as f64 / 2.0, SIZE.1 as f64 / 2.0);
        let radius = if n == 1 { 0.0 } else { 115.0 };
        // Ring positions, the first transaction at the top, clockwise.
        let pos: Vec<(f64, f64)> = (0..n)
            .map(|i| {
                let a = -std::f64::consts::FRAC_PI_2 + i as f64 * std::f64::consts::TAU / n as f64;
                (cx + radius * 1.6 * a.cos(), cy + radius * a.sin())
            })
            .collect();
        let at = |ix: u64| c.txns.iter().position(|t| t.0 == ix).map(|i| pos[i]);
        let centred = Pos::new(HPos::Center, VPos::Center);
        for e in &c.edges {
            let (Some(a), Some(b)) = (at(e.from), at(e.to)) else {
                continue;
            };
            let colour = kind_colour(&e.kind);
            let (dx, dy) = (b.0 - a.0, b.1 - a.1);
            let len = (dx * dx + dy * dy).sqrt().max(1.0);
            let (ux, uy) = (dx / len, dy / len);
            // Shift each arrow to its right so that a->b and b->a do not overlap.
            let (ox, oy) = (-uy * 7.0, ux * 7.0);
            let r = NODE_R as f64 + 3.0;
            let p0 = (a.0 + ux * r + ox, a.1 + uy * r + oy);
            let p1 = (b.0 - ux * r + ox, b.1 - uy * r + oy);
            let ip = |p: (f64, f64)| (p.0.round() as i32, p.1.round() as i32);
            root.draw(&PathElement::new(
                vec![ip(p0), ip(p1)],
                colour.stroke_width(2),
            ))
            .map_err(err)?;
            let head = [
                p1,
                (p1.0 - ux * 11.0 - uy * 5.0, p1.1 - uy * 11.0 + ux * 5.0),
                (p1.0 - ux * 11.0 + uy * 5.0, p1.1 - uy * 11.0 - ux * 5.0),
            ];
            root.draw(&Polygon::new(
                head.iter().map(|&p| ip(p)).collect::<Vec<_>>(),
                colour.filled(),
            ))
            .map_err(err)?;
            let mid = (
                (p0.0 + p1.0) / 2.0 + ox * 2.0,
                (p0.1 + p1.1) / 2.0 + oy * 2.0,
            );
            root.draw(&Text::new(
                e.kind.clone(),
                ip(mid),
                ("sans-serif", 17)
                    .into_font()
                    .style(FontStyle::Bold)
                    .color(&colour)
                    .pos(centred),
            ))
            .map_err(err)?;
        }
        for (i, (ix, process)) in c.txns.iter().enumerate() {
            let p = (pos[i].0.round() as i32, pos[i].1.round() as i32);
            root.draw(&Circle::new(p, NODE_R, RGBColor(250, 250, 250).filled()))
                .map_err(err)?;
            root.draw(&Circle::new(p, NODE_R, BLACK.stroke_width(1)))
                .map_err(err)?;
            root.draw(&Text::new(
                format!("T{ix}"),
                (p.0, p.1 - 5),
                ("sans-serif", 16).into_font().color(&BLACK).pos(centred),
            ))
            .map_err(err)?;
            if !process.is_empty() {
                root.draw(&Text::new(
                    format!("p{process}"),
                    (p.0, p.1 + 9),
                    ("sans-serif", 13)
                        .into_font()
                        .color(&RGBColor(90, 90, 90))
                        .pos(centred),
                ))
                .map_err(err)?;
            }
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The graph and the list of its edges, each with its explanation.
pub fn cycle_section(c: &Cycle) -> Markup {
    let picture = match cycle_svg(c) {
        Ok(svg) => PreEscaped(svg),
        Err(e) => html! { p.warn { (e.to_string()) } },
    };
    html! {
        figure.cycle {
            figcaption { (c.anomaly) " cycle: "
                @for (i, t) in c.txns.iter().enumerate() {
                    @if i > 0 { " → " } "T" (t.0)
                }
                " → T" (c.txns.first().map(|t| t.0).unwrap_or(0))
            }
            (picture)
            ol.edges {
                @for e in &c.edges {
                    li {
                        span.kind style={ "color:" (css(kind_colour(&e.kind))) } { (e.kind) }
                        " T" (e.from) " → T" (e.to) ": " (e.explanation)
                    }
                }
            }
        }
    }
}

fn css(c: RGBColor) -> String {
    format!("rgb({},{},{})", c.0, c.1, c.2)
}
