//! A self-contained `report.html` people read: the run's header and verdicts, latency and
//! throughput plots with the faults banded, a zoomable timeline of every op, and each
//! checker's evidence drawn. Rendered with `maud`; plots by `plotters` (SVG); the
//! timeline is a canvas drawn by inline JS from data embedded in the page. Nothing is
//! fetched from the network.

mod evidence;
mod faults;
mod header;
pub(crate) mod plots;
mod series;
#[cfg(test)]
mod tests;
mod timeline;

pub use evidence::{cycles, Cycle, CycleEdge};
pub use faults::{fault_label, fault_windows, FaultWindow};
pub use header::repeat_command;

use crate::RunSummary;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde_json::Value;
use splitbrain_checkers::{History, Validity};

/// The CSS class of a verdict.
pub(crate) fn verdict_class(v: Validity) -> &'static str {
    match v {
        Validity::Valid => "valid",
        Validity::Invalid => "invalid",
        Validity::Unknown => "unknown",
    }
}

/// JSON for a `<script type="application/json">`: `<` escaped so no `</script>` ends it.
fn script_json(v: &Value) -> String {
    v.to_string().replace('<', "\\u003c")
}

fn figures(summary: &RunSummary) -> Markup {
    let st = &summary.stats;
    html! {
        table {
            tr { th { "ops" } th { "ok" } th { "fail" } th { "info" } th { "availability" }
                 th { "p50 ms" } th { "p95 ms" } th { "p99 ms" } th { "max ms" } th { "ok ops/s" } th { "nemesis events" } }
            tr { td { (st.ops) } td { (st.ok) } td { (st.fail) } td { (st.info) }
                 td { (format!("{:.1}%", st.availability * 100.0)) }
                 td { (format!("{:.2}", st.latency_ms.p50)) } td { (format!("{:.2}", st.latency_ms.p95)) }
                 td { (format!("{:.2}", st.latency_ms.p99)) } td { (format!("{:.2}", st.latency_ms.max)) }
                 td { (format!("{:.0}", st.throughput)) } td { (st.nemesis_events) } }
        }
    }
}

fn fault_legend(windows: &[FaultWindow]) -> Markup {
    let classes = faults::classes(windows);
    html! {
        @if windows.is_empty() {
            p.muted { "No faults were recorded in this history." }
        } @else {
            p.legend { "Faults: "
                @for c in &classes {
                    @let (r, g, b) = faults::class_colour(c);
                    span.item { span.sw style={ "background:rgb(" (r) "," (g) "," (b) ")" } {} (c) }
                }
            }
            details {
                summary { (windows.len()) " fault windows" }
                table {
                    tr { th { "class" } th { "from (s)" } th { "to (s)" } th { "what" } }
                    @for w in windows {
                        tr { td { (w.class) } td { (format!("{:.3}", w.start as f64 / 1e9)) }
                             td { (format!("{:.3}", w.end as f64 / 1e9)) } td { (w.label) } }
                    }
                }
            }
        }
    }
}

/// A drawn SVG, or the reason it could not be drawn.
pub(crate) fn svg_or_warning(r: Result<String, plots::PlotError>) -> Markup {
    match r {
        Ok(svg) => PreEscaped(svg),
        Err(e) => html! { p.warn { (e.to_string()) } },
    }
}

fn plots_section(history: &History, windows: &[FaultWindow]) -> Markup {
    let has_times = (0..history.len()).any(|p| history.op_time(p).unwrap_or(0) != 0);
    if !has_times {
        return html! { p.muted { "This history carries no op times: no latency or throughput to plot." } };
    }
    let s = series::series(history);
    html! {
        h2 id="latency" { "Latency" }
        p.muted { "Every client op at its invoke time; colour by outcome (ok blue, fail orange, info red), marker by "
            code { "f" } ". " (s.total_points) " ops drawn as " (s.points.len()) " points (ops on the same screen cell merged)"
            @if s.pending > 0 { "; " (s.pending) " never completed" } "." }
        (svg_or_warning(plots::latency_svg(&s, windows)))
        h2 id="throughput" { "Throughput" }
        p.muted { "Completions per second in " (s.bucket_s) " s buckets." }
        (svg_or_warning(plots::throughput_svg(&s, windows)))
    }
}

fn timeline_section(history: &History, windows: &[FaultWindow]) -> Markup {
    let data = timeline::timeline_data(history, windows);
    html! {
        h2 id="timeline" { "Timeline" }
        p.muted { "Each client op as a bar from invoke to completion in its lane (a process hands its lane to the one that replaces it). "
            "Hover for the op; wheel to zoom, drag to zoom into a window, double-click to see everything. Bands are faults." }
        div id="tl" {
            div.tl-bar {
                button id="tl-reset" type="button" { "whole run" }
                span.item { span.sw style="background:#0072b2" {} "ok" }
                span.item { span.sw style="background:#e69f00" {} "fail" }
                span.item { span.sw style="background:#cc0055" {} "info / pending" }
                span id="tl-status" { "loading…" }
            }
            canvas id="tl-canvas" {}
            div id="tl-tip" {}
        }
        script type="application/json" id="tl-meta" { (PreEscaped(script_json(&data.meta))) }
        script type="text/plain" id="tl-cols" { (PreEscaped(&data.columns)) }
        script type="text/plain" id="tl-vals" { (PreEscaped(&data.values)) }
        script { (PreEscaped(include_str!("timeline.js"))) }
    }
}

/// Renders the report page for a checked run. `test` is the run's test.json, when there
/// is one (a bare history checked with `splitbrain check` has none): it fills the header
/// and the command that repeats the run.
pub fn render_html(summary: &RunSummary, history: &History, test: Option<&Value>) -> String {
    render_html_with_shrunk(summary, history, test, None)
}

/// What `splitbrain shrink` wrote in a run's `shrunk/`: `schedule.json` (the schedule
/// shrink) and `shrink.json` (the history shrink), each when it is there.
#[derive(Debug, Clone, Default)]
pub struct ShrunkFiles {
    /// `shrunk/schedule.json`.
    pub schedule: Option<Value>,
    /// `shrunk/shrink.json`.
    pub history: Option<Value>,
}

/// The schedule shrink's replay rate: "replay rate: 4 of 5 runs fail the same way",
/// saying so when the budget ended the confirmation runs early or before any, and when
/// the budget left the original unshrunk.
fn replay_rate(s: &Value) -> String {
    let rate = &s["replay_rate"];
    let unshrunk = if s["outcome"] == "budget-ended" {
        " (of the original: the budget ended before the search)"
    } else {
        ""
    };
    match rate["runs"].as_u64() {
        Some(0) => {
            "replay rate: not measured (the budget ended before a confirmation run)".to_string()
        }
        Some(runs) => {
            let cut = if rate["cut_by_budget"] == true {
                format!(
                    "; the budget ended after {runs} of {}",
                    rate["asked"].as_u64().unwrap_or(runs)
                )
            } else {
                String::new()
            };
            format!(
                "replay rate{unshrunk}: {} of {runs} runs fail the same way{cut}",
                rate["failed"].as_u64().unwrap_or(0)
            )
        }
        None => "replay rate: ?".to_string(),
    }
}

/// The "Shrunk reproduction" section: the sizes before and after and the command, with
/// links into `shrunk/`.
fn shrunk_section(files: &ShrunkFiles) -> Markup {
    let num = |v: &Value| match v {
        Value::Null => "?".to_string(),
        other => other.to_string(),
    };
    let before_after = |v: &Value, name: &str| {
        format!(
            "{} → {}",
            num(&v[format!("{name}_before")]),
            num(&v[format!("{name}_after")])
        )
    };
    html! {
        h2 id="shrunk" { "Shrunk reproduction" }
        p { "The smallest reproduction " code { "splitbrain shrink" } " found is in "
            a href="shrunk/" { "shrunk/" } ": "
            a href="shrunk/report.html" { "its minimal history's report" }
            @if files.schedule.is_some() { ", " a href="shrunk/plan.json" { "the fault plan" } } "." }
        ul {
            @if let Some(s) = &files.schedule {
                li { "fault events: " (before_after(s, "events")) }
                li { "run length (s): " (before_after(s, "time_limit_s")) "; clients: " (before_after(s, "concurrency")) "; keys: " (before_after(s, "active_keys")) "; rate: " (before_after(s, "rate")) }
                li { (replay_rate(s)) }
            }
            @if let Some(h) = &files.history {
                li { "history operations: " (before_after(h, "operations")) }
            }
        }
        @if let Some(cmd) = files.schedule.as_ref().and_then(|s| s["command"].as_str()) {
            pre.cmd { (cmd) }
        }
    }
}

/// [`render_html`], with a section on the run's shrunk reproduction when it has one.
pub fn render_html_with_shrunk(
    summary: &RunSummary,
    history: &History,
    test: Option<&Value>,
    shrunk: Option<&ShrunkFiles>,
) -> String {
    let windows = fault_windows(history);
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "splitbrain: " (summary.test_name) " " (summary.valid.label()) }
                style { (PreEscaped(include_str!("style.css"))) }
            }
            body {
                (header::header(summary, test))
                @if let Some(files) = shrunk { (shrunk_section(files)) }
                nav { a href="#latency" { "latency" } " · " a href="#throughput" { "throughput" } " · "
                      a href="#timeline" { "timeline" } " · " a href="#checkers" { "checkers and evidence" } }
                h2 { "Figures" }
                (figures(summary))
                (fault_legend(&windows))
                (plots_section(history, &windows))
                (timeline_section(history, &windows))
                h2 id="checkers" { "Checkers and evidence" }
                (evidence::checker_sections(&summary.results, history))
            }
        }
    };
    page.into_string()
}
