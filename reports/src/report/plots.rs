//! The latency and throughput plots, drawn by `plotters` into SVG: real axes, a legend,
//! and every fault window as a band in its class's colour with a lane of labels on top.

use super::faults::{class_colour, classes, FaultWindow};
use super::series::{Series, MAX_F_SERIES};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use splitbrain_checkers::Outcome;

/// Width of every plot, in pixels.
pub const PLOT_WIDTH: u32 = 1100;
/// Font size asked of plotters (its SVG text comes out at about 0.8 of it).
pub(crate) const FONT: u32 = 15;
/// Height of one fault lane.
const LANE_H: u32 = 18;
/// Room right of every plot for its legend.
const LEGEND_W: u32 = 190;

/// Room for the y axis labels, the same in lanes and plots so their x axes align.
const Y_LABELS: u32 = 70;
/// Approximate width of one label character at the lane's font size.
const CHAR_PX: f64 = 6.6;

/// A plot could not be drawn (plotters' error, as text).
#[derive(Debug, thiserror::Error)]
#[error("plot: {0}")]
pub struct PlotError(String);

/// plotters' errors as a [`PlotError`].
pub(crate) fn err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError(e.to_string())
}

/// The series legend of a small evidence chart, upper right on a light box.
pub(crate) fn draw_series_labels<'a, 'b: 'a>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
) -> Result<(), PlotError> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(("sans-serif", FONT - 1))
        .draw()
        .map_err(err)
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// The colour of an outcome's points and lines.
pub fn outcome_colour(o: Outcome) -> RGBColor {
    match o {
        Outcome::Ok => RGBColor(0, 114, 178),
        Outcome::Fail => RGBColor(230, 159, 0),
        Outcome::Info | Outcome::Pending => RGBColor(204, 0, 85),
    }
}

fn rgb(class: &str) -> RGBColor {
    let (r, g, b) = class_colour(class);
    RGBColor(r, g, b)
}

/// A marker per `f` (so kinds of op stay apart at one colour): invokes `$draw!` with
/// the shape, relative to the point it marks.
macro_rules! marker {
    ($fi:expr, $filled:expr, $line:expr, $draw:ident) => {
        match $fi % MAX_F_SERIES {
            0 => $draw!(Circle::new((0, 0), 2, $filled)),
            1 => $draw!(TriangleMarker::new((0, 0), 3, $filled)),
            2 => $draw!(Cross::new((0, 0), 3, $line)),
            3 => $draw!(Rectangle::new([(-2, -2), (2, 2)], $filled)),
            4 => $draw!(Circle::new((0, 0), 3, $line)),
            _ => $draw!(Rectangle::new([(-2, -2), (2, 2)], $line)),
        }
    };
}

/// What a legend entry shows before its words.
enum Key {
    Swatch(RGBColor),
    Line(RGBColor, u32),
    Marker(usize),
}

/// The legend, right of the plot (plotters' own would sit on the data).
fn draw_legend(root: &Area<'_>, top: i32, entries: &[(String, Key)]) -> Result<(), PlotError> {
    let x = (PLOT_WIDTH - LEGEND_W) as i32 + 16;
    let grey = RGBColor(60, 60, 60);
    let (filled, line) = (grey.filled(), grey.stroke_width(1));
    for (i, (label, key)) in entries.iter().enumerate() {
        let y = top + 8 + 19 * i as i32;
        match key {
            Key::Swatch(c) => root.draw(&Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled())),
            Key::Line(c, w) => root.draw(&PathElement::new(
                vec![(x - 2, y), (x + 16, y)],
                c.stroke_width(*w),
            )),
            Key::Marker(fi) => {
                macro_rules! one {
                    ($shape:expr) => {
                        root.draw(&(EmptyElement::at((x + 6, y)) + $shape))
                    };
                }
                marker!(*fi, filled, line, one)
            }
        }
        .map_err(err)?;
        root.draw(&Text::new(
            label.clone(),
            (x + 24, y),
            ("sans-serif", FONT - 1)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// Splits off the fault lanes (one row per class) above `root` and draws them; returns
/// the area left for the plot.
fn fault_lanes<'a>(
    root: &Area<'a>,
    windows: &[FaultWindow],
    span: f64,
) -> Result<Area<'a>, PlotError> {
    let cls = classes(windows);
    if cls.is_empty() {
        return Ok(root.clone());
    }
    let (lanes, rest) = root.split_vertically(LANE_H * cls.len() as u32 + 8);
    let mut chart = ChartBuilder::on(&lanes)
        .margin_left(10)
        .margin_right(LEGEND_W)
        .margin_top(4)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(0f64..span, 0f64..cls.len() as f64)
        .map_err(err)?;
    let px_per_s = (PLOT_WIDTH - Y_LABELS - 10 - LEGEND_W) as f64 / span;
    for w in windows {
        let row = cls.iter().position(|c| *c == w.class).unwrap_or(0) as f64;
        let (x0, x1) = (w.start as f64 / 1e9, w.end as f64 / 1e9);
        let (top, bottom) = (cls.len() as f64 - row, cls.len() as f64 - row - 0.85);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x0, top), (x1, bottom)],
                rgb(&w.class).mix(0.4).filled(),
            )))
            .map_err(err)?;
        let room = ((x1 - x0) * px_per_s / CHAR_PX) as usize;
        if room >= 4 {
            let label: String = if w.label.chars().count() > room {
                w.label
                    .chars()
                    .take(room.saturating_sub(1))
                    .chain(['…'])
                    .collect()
            } else {
                w.label.clone()
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    label,
                    (x0, top - 0.45),
                    ("sans-serif", FONT - 1)
                        .into_font()
                        .color(&BLACK)
                        .pos(Pos::new(HPos::Left, VPos::Center)),
                )))
                .map_err(err)?;
        }
    }
    for (i, c) in cls.iter().enumerate() {
        let row_mid = cls.len() as f64 - i as f64 - 0.45;
        let (_, y) = chart.plotting_area().map_coordinate(&(0.0, row_mid));
        let (x, _) = lanes.get_base_pixel();
        root.draw(&Text::new(
            c.clone(),
            (x + 4, y),
            ("sans-serif", FONT)
                .into_font()
                .color(&rgb(c))
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))
        .map_err(err)?;
    }
    Ok(rest)
}

/// A plot over the run's time with its axes drawn, room for the legend on its right.
fn time_chart<'a, Y>(
    area: &Area<'a>,
    span: f64,
    y: Y,
    y_desc: &str,
) -> Result<
    ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y::CoordDescType>>,
    PlotError,
>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<Y::Value>,
{
    let mut chart = ChartBuilder::on(area)
        .margin_left(10)
        .margin_right(LEGEND_W)
        .margin_top(6)
        .x_label_area_size(36)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(0f64..span, y)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time since start (s)")
        .y_desc(y_desc)
        .y_label_formatter(&|v: &f64| axis_number(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .label_style(("sans-serif", FONT))
        .axis_desc_style(("sans-serif", FONT))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// A tick label with at most three significant digits: a log axis's ticks are sums of
/// floats (0.7000000000000001), whose full text overflows the label area.
fn axis_number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Shades every fault window across a plot's full height.
fn shade<'a, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
    windows: &[FaultWindow],
    y: (Y::ValueType, Y::ValueType),
) -> Result<(), PlotError>
where
    Y: Ranged,
    Y::ValueType: Clone + 'static,
{
    chart
        .draw_series(windows.iter().map(|w| {
            Rectangle::new(
                [
                    (w.start as f64 / 1e9, y.0.clone()),
                    (w.end as f64 / 1e9, y.1.clone()),
                ],
                rgb(&w.class).mix(0.13).filled(),
            )
        }))
        .map_err(err)?;
    Ok(())
}

/// Latency of every op against its invoke time (log scale), per outcome colour and per
/// `f` marker, with the p50/p95/p99 lines of ok ops, under the fault bands.
pub fn latency_svg(s: &Series, windows: &[FaultWindow]) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, 420 + lanes_h(windows)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let area = fault_lanes(&root, windows, s.span_s)?;
        // At least a decade, so the log axis has labelled ticks.
        let hi = s.ms_range.1 * 1.25;
        let lo = (s.ms_range.0 * 0.8).min(hi / 10.0);
        let mut chart = time_chart(&area, s.span_s, (lo..hi).log_scale(), "latency (ms, log)")?;
        shade(&mut chart, windows, (lo, hi))?;
        for (fi, _) in s.fs.iter().enumerate() {
            for o in [Outcome::Ok, Outcome::Fail, Outcome::Info] {
                let c = outcome_colour(o);
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .filter(|p| p.f == fi && outcome_key(p.outcome) == outcome_key(o))
                    .map(|p| (p.t, p.ms))
                    .collect();
                let (filled, line) = (c.mix(0.75).filled(), c.mix(0.9).stroke_width(1));
                macro_rules! points {
                    ($shape:expr) => {
                        chart
                            .draw_series(pts.iter().map(|&p| EmptyElement::at(p) + $shape))
                            .map_err(err)?
                    };
                }
                marker!(fi, filled, line, points);
            }
        }
        let present = |o: Outcome| {
            s.points
                .iter()
                .any(|p| outcome_key(p.outcome) == outcome_key(o))
        };
        let mut entries: Vec<(String, Key)> = [Outcome::Ok, Outcome::Fail, Outcome::Info]
            .into_iter()
            .filter(|&o| present(o))
            .map(|o| (outcome_key(o).to_string(), Key::Swatch(outcome_colour(o))))
            .collect();
        entries.extend(
            s.fs.iter()
                .enumerate()
                .map(|(fi, f)| (f.clone(), Key::Marker(fi))),
        );
        let lines = [
            ("p50", RGBColor(0, 0, 0)),
            ("p95", RGBColor(110, 110, 110)),
            ("p99", RGBColor(150, 0, 170)),
        ];
        for (i, (name, c)) in lines.into_iter().enumerate() {
            // A bucket without ok ops breaks the line rather than bridging the gap.
            let runs = s
                .buckets
                .split(|b| b.pct.is_none())
                .filter(|r| !r.is_empty());
            for run in runs {
                let pts: Vec<(f64, f64)> = run
                    .iter()
                    .filter_map(|b| b.pct.map(|p| (b.t, p[i].max(lo))))
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                    .map_err(err)?;
            }
            entries.push((format!("{name} of ok ops"), Key::Line(c, 2)));
        }
        draw_legend(&root, lanes_h(windows) as i32 + 6, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn lanes_h(windows: &[FaultWindow]) -> u32 {
    match classes(windows).len() {
        0 => 0,
        n => LANE_H * n as u32 + 8,
    }
}

fn outcome_key(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::Fail => "fail",
        Outcome::Info | Outcome::Pending => "info",
    }
}

/// ok ops per second per `f` (and fail / info per second) per time bucket, under the
/// fault bands.
pub fn throughput_svg(s: &Series, windows: &[FaultWindow]) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH, 300 + lanes_h(windows)))
            .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let area = fault_lanes(&root, windows, s.span_s)?;
        let top = s
            .buckets
            .iter()
            .map(|b| {
                b.ok_rate
                    .iter()
                    .sum::<f64>()
                    .max(b.fail_rate)
                    .max(b.info_rate)
            })
            .fold(1.0f64, f64::max)
            * 1.15;
        let mut chart = time_chart(&area, s.span_s, 0f64..top, "ops/s")?;
        shade(&mut chart, windows, (0.0, top))?;
        let ok = outcome_colour(Outcome::Ok);
        let mut entries: Vec<(String, Key)> = vec![("ok, all".into(), Key::Line(ok, 2))];
        let total: Vec<(f64, f64)> = s
            .buckets
            .iter()
            .map(|b| (b.t, b.ok_rate.iter().sum()))
            .collect();
        chart
            .draw_series(LineSeries::new(total, ok.stroke_width(2)))
            .map_err(err)?;
        if s.fs.len() > 1 {
            for (fi, fname) in s.fs.iter().enumerate() {
                let c = f_colour(fi);
                let pts: Vec<(f64, f64)> = s.buckets.iter().map(|b| (b.t, b.ok_rate[fi])).collect();
                chart
                    .draw_series(LineSeries::new(pts, c.stroke_width(1)))
                    .map_err(err)?;
                entries.push((format!("ok {fname}"), Key::Line(c, 1)));
            }
        }
        for (name, o) in [("fail", Outcome::Fail), ("info", Outcome::Info)] {
            let c = outcome_colour(o);
            let pts: Vec<(f64, f64)> = s
                .buckets
                .iter()
                .map(|b| {
                    (
                        b.t,
                        if name == "fail" {
                            b.fail_rate
                        } else {
                            b.info_rate
                        },
                    )
                })
                .collect();
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(1)))
                .map_err(err)?;
            entries.push((name.to_string(), Key::Line(c, 1)));
        }
        draw_legend(&root, lanes_h(windows) as i32 + 6, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn f_colour(i: usize) -> RGBColor {
    const PALETTE: [RGBColor; MAX_F_SERIES] = [
        RGBColor(86, 180, 233),
        RGBColor(0, 158, 115),
        RGBColor(0, 60, 120),
        RGBColor(120, 160, 40),
        RGBColor(100, 100, 160),
        RGBColor(80, 80, 80),
    ];
    PALETTE[i % MAX_F_SERIES]
}

#[cfg(test)]
mod tests {
    use super::axis_number;

    #[test]
    fn tick_labels_keep_three_significant_digits() {
        assert_eq!(axis_number(0.7000000000000001), "0.7");
        assert_eq!(axis_number(0.30000000000000004), "0.3");
        assert_eq!(axis_number(1000.0), "1000");
        assert_eq!(axis_number(0.25), "0.25");
        assert_eq!(axis_number(12.345), "12.3");
        assert_eq!(axis_number(0.001234), "0.00123");
        assert_eq!(axis_number(0.0), "0");
        assert_eq!(axis_number(55.0), "55");
    }
}
