//! Benchmark (not a test): the size of report.html and the time to render it for a big
//! generated register history with faults.
//!
//! `cargo run --release -p splitbrain-reports --example report_size -- [OPS] [DIR]`
//! writes DIR/history.jsonl (OPS client ops, default 1,000,000) and DIR/report.html and
//! prints the figures; load DIR/report.html in a browser to time the page itself.

use serde_json::json;
use splitbrain_checkers::history::read::read_path;
use splitbrain_checkers::jepsen::stats::StatsChecker;
use splitbrain_checkers::Checker;
use splitbrain_reports::{history_stats, render_html, RunSummary};
use std::io::Write;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let ops: u64 = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let dir = std::path::PathBuf::from(args.next().unwrap_or_else(|| "report-bench".into()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("history.jsonl");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
    // 20 clients at ~5,000 ops/s; a partition, a kill or a pause every 10 s; a little
    // seeded-by-arithmetic noise in latency, outcomes and values.
    let clients = 20u64;
    let mut index = 0u64;
    let mut line = |v: serde_json::Value, w: &mut dyn Write| -> std::io::Result<()> {
        let mut v = v;
        v["index"] = json!(index);
        index += 1;
        writeln!(w, "{v}")
    };
    let faults = ["partition", "kill", "pause"];
    let mut next_fault = 5_000_000_000u64;
    let mut fault_k = 0usize;
    let mut open: Option<(&str, u64)> = None;
    let mut process = vec![0u64; clients as usize];
    for (c, p) in process.iter_mut().enumerate() {
        *p = c as u64;
    }
    for i in 0..ops {
        let t = i * 200_000; // 5,000 invokes per second
        if t >= next_fault {
            match open.take() {
                Some((kind, _)) => {
                    let stop = match kind {
                        "kill" => "restart",
                        "pause" => "resume",
                        _ => "stop-partition",
                    };
                    line(
                        json!({"process": "nemesis", "type": "info", "f": stop, "value": {}, "time": t}),
                        &mut w,
                    )?;
                    next_fault = t + 5_000_000_000;
                }
                None => {
                    let kind = faults[fault_k % faults.len()];
                    fault_k += 1;
                    let (f, v) = match kind {
                        "partition" => (
                            "start-partition",
                            json!({"shape": "halves", "halves": [["n1","n2"],["n3","n4","n5"]]}),
                        ),
                        "kill" => ("kill", json!({"nodes": ["n3"], "target": "leader"})),
                        _ => (
                            "pause",
                            json!({"nodes": ["n1", "n2"], "target": "minority"}),
                        ),
                    };
                    line(
                        json!({"process": "nemesis", "type": "info", "f": f, "value": v, "time": t}),
                        &mut w,
                    )?;
                    open = Some((kind, t));
                    next_fault = t + 5_000_000_000;
                }
            }
        }
        let slot = (i % clients) as usize;
        let p = process[slot];
        let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        let (f, inv, done) = match h % 3 {
            0 => ("read", json!(null), json!(h % 50)),
            1 => ("write", json!(h % 50), json!(h % 50)),
            _ => (
                "cas",
                json!([h % 50, (h >> 8) % 50]),
                json!([h % 50, (h >> 8) % 50]),
            ),
        };
        let key = format!("k{}", (i / 100) % 64);
        let outcome = match h % 100 {
            0 => "info",
            1..=4 => "fail",
            _ => "ok",
        };
        let lat = 300_000 + (h % 2_000) * 1_000 + if open.is_some() { 20_000_000 } else { 0 };
        line(
            json!({"process": p, "type": "invoke", "f": f, "key": key, "value": inv, "time": t}),
            &mut w,
        )?;
        line(
            json!({"process": p, "type": outcome, "f": f, "key": key, "value": done, "time": t + lat.min(3_900_000)}),
            &mut w,
        )?;
        if outcome == "info" {
            process[slot] += clients;
        }
    }
    w.flush()?;
    drop(w);
    let started = Instant::now();
    let history = read_path(&path)?;
    let read_s = started.elapsed().as_secs_f64();
    let results = vec![StatsChecker.check(&history)];
    let summary = RunSummary::new(
        "bench-1m".into(),
        None,
        results,
        history_stats(&history),
        Some(1),
    );
    let started = Instant::now();
    let html = render_html(&summary, &history, None);
    let render_s = started.elapsed().as_secs_f64();
    std::fs::write(dir.join("report.html"), &html)?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_vec_pretty(&summary)?,
    )?;
    println!(
        "{ops} client ops ({} history lines): read {read_s:.2} s, rendered in {render_s:.2} s, report.html {:.2} MB ({} bytes) at {}",
        history.len(),
        html.len() as f64 / 1e6,
        html.len(),
        dir.join("report.html").display()
    );
    Ok(())
}
