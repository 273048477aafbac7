//! The page of `splitbrain bench tail`: read latency of each read policy under each
//! slow-server scenario, as the measured table and as latency-quantile curves (one chart
//! per scenario, one line per policy, the quantiles on a "nines" axis and latency on a log
//! axis), so where hedging pays off is seen at a glance. Self-contained: inline style and
//! SVG, no scripts, no fetches.

use crate::report::plots::{err, PlotError, FONT, PLOT_WIDTH};
use maud::{html, Markup, PreEscaped, DOCTYPE};
use plotters::prelude::*;
use splitbrain_checkers::Validity;

/// The quantiles each curve is drawn at, with their axis labels.
pub const TAIL_QUANTILES: &[(f64, &str)] = &[
    (0.5, "p50"),
    (0.9, "p90"),
    (0.95, "p95"),
    (0.99, "p99"),
    (0.995, "p99.5"),
    (0.999, "p99.9"),
    (1.0, "max"),
];

/// One measured cell of the bench: a policy under a scenario.
#[derive(Debug, Clone)]
pub struct TailRun {
    /// Read policy (`--read-mode`).
    pub policy: String,
    /// Scenario label, e.g. `(b) follower client link +50 ms`.
    pub scenario: String,
    /// `ok` reads measured.
    pub reads: usize,
    /// Read latency in ms at each of [`TAIL_QUANTILES`], in that order.
    pub latency_ms: Vec<f64>,
    /// HTTP read requests sent per read op (the cost of a policy).
    pub requests_per_read: f64,
    /// Share of reads that sent a second (hedged) request.
    pub hedged_share: f64,
    /// `ok` operations per second over the run.
    pub ok_per_s: f64,
    /// The linearizability checker's verdict on the run (with several runs of a cell,
    /// the worst of them).
    pub verdict: Validity,
    /// p99 read latency of every run of the cell, in the order they ran; the other
    /// figures are those of the run with the median p99. Empty or one entry for a cell
    /// run once.
    pub p99_runs_ms: Vec<f64>,
}

impl TailRun {
    /// Latency at quantile `q`, if it is one of [`TAIL_QUANTILES`].
    pub fn at(&self, q: f64) -> Option<f64> {
        let i = TAIL_QUANTILES.iter().position(|(x, _)| *x == q)?;
        self.latency_ms.get(i).copied()
    }
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}\
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}\
th{background:#f3f3f3}td.l{text-align:left}td.invalid{color:#b00020;font-weight:600}td.valid{color:#17663a}\
p.muted{color:#666}p.warn{color:#b00020}";

/// Line colours of the policies, in order of first appearance (colour-blind safe).
const COLOURS: &[RGBColor] = &[
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
];

/// The whole page: `intro` (what was run: load, nodes, seed) above the table and one
/// quantile chart per scenario, scenarios in the order they first appear in `runs`.
pub fn tail_page(intro: &str, runs: &[TailRun]) -> String {
    let mut scenarios: Vec<&str> = Vec::new();
    let mut policies: Vec<&str> = Vec::new();
    for r in runs {
        if !scenarios.contains(&r.scenario.as_str()) {
            scenarios.push(&r.scenario);
        }
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "splitbrain bench tail" }
                style { (STYLE) }
            }
            body {
                h1 { "Read tail latency by read policy" }
                p { (intro) }
                table {
                    thead { tr {
                        th { "scenario" } th { "policy" } th { "reads" } th { "p50 ms" }
                        th { "p99 ms" } th { "p99.9 ms" } th { "requests/read" } th { "hedged" }
                        th { "ok ops/s" } th { "verdict" } th { "p99 of each run, ms" }
                    } }
                    tbody {
                        @for r in runs {
                            tr {
                                td.l { (r.scenario) } td.l { (r.policy) } td { (r.reads) }
                                td { (ms(r.at(0.5))) } td { (ms(r.at(0.99))) } td { (ms(r.at(0.999))) }
                                td { (format!("{:.3}", r.requests_per_read)) }
                                td { (format!("{:.1}%", 100.0 * r.hedged_share)) }
                                td { (format!("{:.0}", r.ok_per_s)) }
                                td class=(verdict_class(r.verdict)) { (r.verdict.label()) }
                                td { (runs_ms(&r.p99_runs_ms)) }
                            }
                        }
                    }
                }
                @for s in &scenarios {
                    h2 { (s) }
                    @let in_scenario: Vec<&TailRun> = runs.iter().filter(|r| r.scenario == *s).collect();
                    @match quantile_svg(&in_scenario, &policies) {
                        Ok(svg) => (PreEscaped(svg)),
                        Err(e) => p.warn { (e.to_string()) },
                    }
                }
                p.muted { "Quantiles are nearest-rank over the ok reads of one run, from invoke to completion as the history records them. A cell run several times shows the run with the median p99 (its figures and its curve) and, in the last column, every run's p99; the verdict is the worst of its runs." }
            }
        }
    };
    page.into_string()
}

/// The p99 of every run of a cell, `a / b / c`.
pub fn runs_ms(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

fn verdict_class(v: Validity) -> &'static str {
    match v {
        Validity::Valid => "valid",
        Validity::Invalid => "invalid",
        Validity::Unknown => "l",
    }
}

/// One scenario's chart: x = the index into [`TAIL_QUANTILES`], y = latency (log).
fn quantile_svg(runs: &[&TailRun], policies: &[&str]) -> Result<String, PlotError> {
    let values = runs.iter().flat_map(|r| r.latency_ms.iter().copied());
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return Err(err("no read latencies to draw"));
    }
    let last = (TAIL_QUANTILES.len() - 1) as f64;
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (PLOT_WIDTH.min(900), 380)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.2..last + 0.2, (lo * 0.8..hi * 1.25).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels(TAIL_QUANTILES.len())
            .x_label_formatter(&|x| quantile_label(*x))
            .y_labels(8)
            .y_desc("read latency, ms (log)")
            .x_desc("quantile")
            .label_style(("sans-serif", FONT))
            .draw()
            .map_err(err)?;
        for r in runs {
            let i = policies.iter().position(|p| *p == r.policy).unwrap_or(0);
            let colour = COLOURS[i % COLOURS.len()];
            let points: Vec<(f64, f64)> = r
                .latency_ms
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite() && **v > 0.0)
                .map(|(k, v)| (k as f64, *v))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                .map_err(err)?
                .label(format!(
                    "{} ({:.3} req/read)",
                    r.policy, r.requests_per_read
                ))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, colour.filled())),
                )
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            // curves rise to the right, so the lower right corner is the emptiest
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", FONT - 1))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// The axis label at position `x`: a quantile's name at whole positions, else nothing.
fn quantile_label(x: f64) -> String {
    let k = x.round();
    if (x - k).abs() > 1e-6 || k < 0.0 {
        return String::new();
    }
    TAIL_QUANTILES
        .get(k as usize)
        .map(|(_, l)| l.to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: &str, scenario: &str, base: f64, verdict: Validity) -> TailRun {
        TailRun {
            policy: policy.into(),
            scenario: scenario.into(),
            reads: 1000,
            latency_ms: (0..TAIL_QUANTILES.len())
                .map(|k| base * (1.0 + k as f64))
                .collect(),
            requests_per_read: 1.02,
            hedged_share: 0.02,
            ok_per_s: 900.0,
            verdict,
            p99_runs_ms: vec![base * 3.5, base * 4.0, base * 6.0],
        }
    }

    #[test]
    fn page_has_a_row_per_run_and_a_chart_per_scenario() {
        let runs = vec![
            run("replica-read", "(a) no fault", 0.8, Validity::Valid),
            run("hedged", "(a) no fault", 0.8, Validity::Valid),
            run("replica-read", "(b) slow <client>", 50.0, Validity::Invalid),
            run("hedged", "(b) slow <client>", 4.0, Validity::Valid),
        ];
        let page = tail_page("3 nodes & 16 clients", &runs);
        assert_eq!(page.matches("<svg").count(), 2, "one chart per scenario");
        assert_eq!(page.matches("<tr>").count(), 1 + runs.len());
        // escaped text, both in the table and in the intro
        assert!(page.contains("(b) slow &lt;client&gt;"));
        assert!(page.contains("3 nodes &amp; 16 clients"));
        assert!(page.contains("class=\"invalid\">INVALID"));
        // the p99 column of the (b) replica-read row: base 50 at index 3 is 200
        assert!(page.contains("<td>200.00</td>"));
        // and every run's p99 of that cell
        assert!(page.contains("<td>175.00 / 200.00 / 300.00</td>"));
        // every quantile is named on the axis
        for (_, label) in TAIL_QUANTILES {
            // plotters writes each label on a line of its own inside <text>
            assert!(
                page.contains(&format!(">\n{label}\n</text>")),
                "axis label {label}"
            );
        }
    }

    #[test]
    fn a_scenario_without_latencies_says_so_instead_of_a_chart() {
        let mut r = run("hedged", "(c) strobe", 1.0, Validity::Unknown);
        r.latency_ms = vec![0.0; TAIL_QUANTILES.len()];
        let page = tail_page("x", &[r]);
        assert!(page.contains("no read latencies to draw"));
        assert_eq!(page.matches("<svg").count(), 0);
    }

    #[test]
    fn quantile_labels_fall_on_whole_positions_only() {
        assert_eq!(quantile_label(0.0), "p50");
        assert_eq!(quantile_label(3.0), "p99");
        assert_eq!(quantile_label(6.0), "max");
        assert_eq!(quantile_label(2.5), "");
        assert_eq!(quantile_label(-0.2), "");
    }
}
