//! Per-rank step agreement of a DDP run, drawn: for every committed step and rank, whether
//! the rank's parameter digest agreed with the digest most ranks reported for that step,
//! and (for `ddp-reference`) the steps where a rank differed from the single-process
//! replay. Long runs are binned so the picture stays one screen wide.

use crate::report::plots::{err, PlotError, FONT, PLOT_WIDTH};
use plotters::prelude::*;
use serde_json::Value;
use splitbrain_checkers::{History, Outcome};
use std::collections::{BTreeMap, BTreeSet};

/// At most this many columns; more steps than that share a column.
const MAX_COLUMNS: u64 = 550;

/// What one rank reported at one step, against the other ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Agreement {
    /// Its digest is the one a strict plurality of the step's reports carry.
    Agrees,
    /// Another digest, or no digest won the step.
    Differs,
}

/// The grid drawn: ranks × steps, and the steps the reference replay disagrees with.
#[derive(Debug, Default)]
pub struct StepGrid {
    /// The highest committed step reported.
    pub max_step: u64,
    /// Each (rank, step) reported.
    pub cells: BTreeMap<(u64, u64), Agreement>,
    /// (rank, step) pairs whose digest differs from the reference replay.
    pub reference_mismatch: BTreeSet<(u64, u64)>,
}

/// `(rank, step, digest)` of a step record.
fn record(v: &Value) -> Option<(u64, u64, String)> {
    Some((
        v.get("rank")?.as_u64()?,
        v.get("step")?.as_u64()?,
        v.get("digest")?.as_str()?.to_string(),
    ))
}

/// The grid of the history's ok `step` ops; `reference` is `ddp-reference`'s details
/// (its `reference-mismatch` cases are marked). `None` when no step was recorded.
pub fn step_grid(history: &History, reference: Option<&Value>) -> Option<StepGrid> {
    let mut by_step: BTreeMap<u64, Vec<(u64, String)>> = BTreeMap::new();
    for s in history.pair_slots() {
        if s.outcome != Outcome::Ok || history.op_f(s.invoke_pos) != Some("step") {
            continue;
        }
        let Some(value) = s.complete_pos.and_then(|c| history.op_value(c)) else {
            continue;
        };
        if let Some((rank, step, digest)) = record(&value) {
            by_step.entry(step).or_default().push((rank, digest));
        }
    }
    let max_step = *by_step.keys().next_back()?;
    let mut grid = StepGrid {
        max_step,
        ..StepGrid::default()
    };
    for (step, reports) in &by_step {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, d) in reports {
            *counts.entry(d.as_str()).or_default() += 1;
        }
        let top = counts.values().copied().max().unwrap_or(0);
        let winners: Vec<&str> = counts
            .iter()
            .filter(|(_, &c)| c == top)
            .map(|(d, _)| *d)
            .collect();
        for (rank, d) in reports {
            let agrees = winners.len() == 1 && winners[0] == d;
            let a = if agrees {
                Agreement::Agrees
            } else {
                Agreement::Differs
            };
            // A rank that reported a step twice keeps the worse verdict.
            let cell = grid.cells.entry((*rank, *step)).or_insert(a);
            *cell = (*cell).max(a);
        }
    }
    let cases = reference
        .and_then(|d| d.pointer("/anomalies/reference-mismatch/cases"))
        .and_then(Value::as_array);
    for c in cases.into_iter().flatten() {
        if let (Some(rank), Some(step)) = (
            c.get("rank").and_then(Value::as_u64),
            c.get("step").and_then(Value::as_u64),
        ) {
            grid.reference_mismatch.insert((rank, step));
        }
    }
    Some(grid)
}

/// The grid as SVG: one row per rank (and one for the reference when it disagreed),
/// green where the rank agreed, red where it did not, orange where the reference did not.
pub fn step_grid_svg(grid: &StepGrid) -> Result<String, PlotError> {
    let ranks: BTreeSet<u64> = grid
        .cells
        .keys()
        .map(|(r, _)| *r)
        .chain(grid.reference_mismatch.iter().map(|(r, _)| *r))
        .collect();
    let ranks: Vec<u64> = ranks.into_iter().collect();
    let with_reference = !grid.reference_mismatch.is_empty();
    let rows = ranks.len() + usize::from(with_reference);
    let width = grid.max_step.div_ceil(MAX_COLUMNS).max(1);
    let columns = grid.max_step.div_ceil(width);
    let column = |step: u64| step.saturating_sub(1) / width;
    // (row, column) -> the worst state seen in that column.
    let mut shown: BTreeMap<(usize, u64), Agreement> = BTreeMap::new();
    for (&(rank, step), &a) in &grid.cells {
        let row = ranks.iter().position(|&r| r == rank).unwrap_or(0);
        let cell = shown.entry((row, column(step))).or_insert(a);
        *cell = (*cell).max(a);
    }
    let reference_columns: BTreeSet<u64> = grid
        .reference_mismatch
        .iter()
        .map(|&(_, s)| column(s))
        .collect();

    let x1 = columns as f64;
    // Row labels sit left of step 0, inside the plotting area.
    let x0 = -(x1 * 0.1).max(1.5);
    let height = 90 + 26 * rows as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .margin_right(24)
            .x_label_area_size(34)
            .y_label_area_size(10)
            .build_cartesian_2d(x0..x1, 0f64..rows as f64)
            .map_err(err)?;
        let step_of = move |x: &f64| {
            if *x < 0.0 {
                String::new()
            } else {
                format!("{}", (*x as u64) * width + 1)
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(if width == 1 {
                "committed step".to_string()
            } else {
                format!("committed step ({width} steps per column)")
            })
            .x_label_formatter(&step_of)
            .label_style(("sans-serif", FONT))
            .axis_desc_style(("sans-serif", FONT))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(err)?;
        let agree = RGBColor(0, 158, 115);
        let differ = RGBColor(204, 0, 85);
        let off = RGBColor(230, 159, 0);
        let label = ("sans-serif", FONT).into_font();
        let mut names: Vec<String> = ranks.iter().map(|r| format!("rank {r}")).collect();
        if with_reference {
            names.push("reference".into());
        }
        chart
            .draw_series(names.iter().enumerate().map(|(i, n)| {
                Text::new(
                    n.clone(),
                    (x0 * 0.95, rows as f64 - i as f64 - 0.7),
                    label.clone(),
                )
            }))
            .map_err(err)?;
        let y = |row: usize| rows as f64 - row as f64;
        chart
            .draw_series(shown.iter().map(|(&(row, col), &a)| {
                let c = if a == Agreement::Agrees {
                    agree
                } else {
                    differ
                };
                Rectangle::new(
                    [
                        (col as f64, y(row) - 0.85),
                        (col as f64 + 1.0, y(row) - 0.15),
                    ],
                    c.filled(),
                )
            }))
            .map_err(err)?;
        if with_reference {
            let row = ranks.len();
            chart
                .draw_series(reference_columns.iter().map(|&col| {
                    Rectangle::new(
                        [
                            (col as f64, y(row) - 0.85),
                            (col as f64 + 1.0, y(row) - 0.15),
                        ],
                        off.filled(),
                    )
                }))
                .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_checkers::{Op, OpType, Process};

    /// Two ranks for three steps; rank 1 differs at step 3.
    fn history() -> History {
        let mut ops = Vec::new();
        let mut t = 0;
        for step in 1..=3u64 {
            for rank in 0..2u64 {
                let digest = if rank == 1 && step == 3 {
                    "bad"
                } else {
                    "good"
                };
                let rec = json!({"rank": rank, "step": step, "digest": digest});
                t += 1;
                ops.push(Op::new(Process::Client(rank), OpType::Invoke, "step", json!(null)).at(t));
                t += 1;
                ops.push(Op::new(Process::Client(rank), OpType::Ok, "step", rec).at(t));
            }
        }
        History::new(ops).unwrap()
    }

    #[test]
    fn a_rank_that_differs_is_marked_and_a_tie_marks_both() {
        let g = step_grid(&history(), None).unwrap();
        assert_eq!(g.max_step, 3);
        assert_eq!(g.cells[&(0, 1)], Agreement::Agrees);
        assert_eq!(g.cells[&(1, 2)], Agreement::Agrees);
        // One against one: no digest won step 3, so neither rank is shown agreeing.
        assert_eq!(g.cells[&(0, 3)], Agreement::Differs);
        assert_eq!(g.cells[&(1, 3)], Agreement::Differs);
        let svg = step_grid_svg(&g).unwrap();
        assert!(svg.contains("rank 0") && svg.contains("rank 1"), "{svg}");
        assert!(!svg.contains("reference"));
    }

    #[test]
    fn reference_mismatches_get_their_own_row() {
        let details = json!({"anomalies": {"reference-mismatch": {"cases": [
            {"rank": 1, "step": 3, "digest": "bad", "reference": "good"}]}}});
        let g = step_grid(&history(), Some(&details)).unwrap();
        assert!(g.reference_mismatch.contains(&(1, 3)));
        let svg = step_grid_svg(&g).unwrap();
        assert!(svg.contains("reference"));
    }

    #[test]
    fn no_steps_no_grid() {
        let ops = vec![
            Op::new(Process::Client(0), OpType::Invoke, "read", json!(null)).at(1),
            Op::new(Process::Client(0), OpType::Ok, "read", json!(1)).at(2),
        ];
        assert!(step_grid(&History::new(ops).unwrap(), None).is_none());
    }

    #[test]
    fn long_runs_are_binned_to_one_screen() {
        let mut ops = Vec::new();
        for step in 1..=5_000u64 {
            let rec = json!({"rank": 0, "step": step, "digest": "d"});
            ops.push(Op::new(Process::Client(0), OpType::Invoke, "step", json!(null)).at(step * 2));
            ops.push(Op::new(Process::Client(0), OpType::Ok, "step", rec).at(step * 2 + 1));
        }
        let g = step_grid(&History::new(ops).unwrap(), None).unwrap();
        let svg = step_grid_svg(&g).unwrap();
        assert!(svg.matches("<rect").count() <= MAX_COLUMNS as usize + 5);
        assert!(svg.contains("steps per column"));
    }
}
