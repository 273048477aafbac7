//! A self-contained `report.html`: verdicts and explanations, the evidence ops, figures,
//! and a timeline of op latencies with the nemesis's faults shaded.

use crate::{xml_escape as esc, RunSummary};
use splitbrain_checkers::{History, Outcome, Process, Validity};
use std::fmt::Write;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 240.0;

/// Renders the report page for a checked run.
pub fn render_html(summary: &RunSummary, history: &History) -> String {
    let mut h = String::new();
    let verdict_class = match summary.valid {
        Validity::Valid => "valid",
        Validity::Invalid => "invalid",
        Validity::Unknown => "unknown",
    };
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>splitbrain: {name}</title>\
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}}\
.valid{{color:#1a7f37}}.invalid{{color:#cf222e}}.unknown{{color:#9a6700}}\
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;font-size:13px}}\
pre{{background:#f6f8fa;padding:8px;white-space:pre-wrap}}</style></head><body>\
<h1>{name}: <span class=\"{verdict_class}\">{verdict}</span></h1>",
        name = esc(&summary.test_name),
        verdict = summary.valid.label()
    );
    if let Some(dir) = &summary.run_dir {
        let _ = write!(h, "<p>Run directory: <code>{}</code></p>", esc(dir));
    }
    if let Some(seed) = summary.seed {
        let _ = write!(
            h,
            "<p>Seed: <code>{seed}</code> (repeat with <code>--seed {seed}</code>)</p>"
        );
    }
    let st = &summary.stats;
    let _ = write!(
        h,
        "<h2>Figures</h2><table><tr><th>ops</th><th>ok</th><th>fail</th><th>info</th>\
<th>availability</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>max ms</th>\
<th>ok ops/s</th><th>nemesis events</th></tr><tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
<td>{:.1}%</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.0}</td><td>{}</td></tr></table>",
        st.ops, st.ok, st.fail, st.info, st.availability * 100.0, st.latency_ms.p50,
        st.latency_ms.p95, st.latency_ms.p99, st.latency_ms.max, st.throughput, st.nemesis_events
    );
    h.push_str("<h2>Timeline</h2>");
    h.push_str(&timeline_svg(history));
    h.push_str("<h2>Checkers</h2>");
    for r in &summary.results {
        let class = match r.valid {
            Validity::Valid => "valid",
            Validity::Invalid => "invalid",
            Validity::Unknown => "unknown",
        };
        let _ = write!(
            h,
            "<h3>{}: <span class=\"{class}\">{}</span></h3>",
            esc(&r.checker),
            r.valid.label()
        );
        if !r.anomaly_types.is_empty() {
            let _ = write!(h, "<p>Anomalies: {}</p>", esc(&r.anomaly_types.join(", ")));
        }
        if !r.not.is_empty() {
            let _ = write!(
                h,
                "<p>Not: {}; also not: {}</p>",
                esc(&r.not.join(", ")),
                esc(&r.also_not.join(", "))
            );
        }
        if !r.explanation.is_empty() {
            let _ = write!(h, "<pre>{}</pre>", esc(&r.explanation));
        }
        if !r.evidence.is_empty() {
            h.push_str("<details open><summary>Evidence</summary><pre>");
            for e in &r.evidence {
                let _ = writeln!(h, "{}", esc(&e.to_string()));
            }
            h.push_str("</pre></details>");
        }
    }
    h.push_str("</body></html>\n");
    h
}

/// Latency of each op against its invoke time; faults as shaded bands. Reads only op
/// heads and pair slots, so a million-op history is drawn without building its ops.
fn timeline_svg(history: &History) -> String {
    let n = history.len();
    let time = |pos: usize| history.op_time(pos).unwrap_or(0);
    let end = n.checked_sub(1).map(time).unwrap_or(0).max(1) as f64;
    let slots = history.pair_slots();
    let latency = |invoke: usize, complete: Option<usize>| {
        complete.map(|c| time(c).saturating_sub(time(invoke)))
    };
    let max_lat = slots
        .iter()
        .filter_map(|p| latency(p.invoke_pos, p.complete_pos))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let x = |t: u64| t as f64 / end * WIDTH;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{}\" style=\"border:1px solid #ccc\">",
        HEIGHT + 20.0
    );
    // Shade from each `start-*` nemesis event to the next event of the nemesis.
    let nem: Vec<usize> = (0..n)
        .filter(|&pos| history.op_process(pos) == Some(Process::Nemesis))
        .collect();
    for (i, &pos) in nem.iter().enumerate() {
        let f = history.op_f(pos).unwrap_or("");
        if f.starts_with("start") || f == "kill" || f == "pause" {
            let start = time(pos);
            let stop = nem.get(i + 1).map(|&q| time(q)).unwrap_or(end as u64);
            let value = history
                .op_value(pos)
                .map(|v| v.to_string())
                .unwrap_or_default();
            let _ = write!(
                s,
                "<rect x=\"{:.1}\" y=\"0\" width=\"{:.1}\" height=\"{HEIGHT}\" fill=\"#f3d0d0\" opacity=\"0.5\"><title>{}</title></rect>",
                x(start),
                (x(stop) - x(start)).max(1.0),
                esc(&format!("{f} {value}"))
            );
        }
    }
    // Sample at most 5,000 ops so the page stays small.
    let step = (slots.len() / 5000).max(1);
    for p in slots.iter().step_by(step) {
        let lat = latency(p.invoke_pos, p.complete_pos);
        let (lat, color) = match (p.outcome, lat) {
            (Outcome::Ok, Some(l)) => (l, "#1a7f37"),
            (Outcome::Fail, Some(l)) => (l, "#bc4c00"),
            (_, Some(l)) => (l, "#cf222e"),
            (_, None) => (max_lat as u64, "#cf222e"),
        };
        let y = HEIGHT - (lat as f64 / max_lat).sqrt() * (HEIGHT - 4.0);
        let _ = write!(
            s,
            "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"1.5\" fill=\"{color}\"/>",
            x(time(p.invoke_pos))
        );
    }
    let _ = write!(
        s,
        "<text x=\"4\" y=\"{}\" font-size=\"11\">time 0 to {:.1} s; latency (sqrt scale) up to {:.1} ms; green ok, orange fail, red info; shaded: faults</text></svg>",
        HEIGHT + 15.0,
        end / 1e9,
        max_lat / 1e6
    );
    s
}
