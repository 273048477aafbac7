//! The terminal summary table printed at the end of `splitbrain test` and `check`.

use crate::RunSummary;
use splitbrain_checkers::table::Table;

/// One line of the table: a label and its value.
type Row = [String; 2];

fn row(label: &str, value: impl Into<String>) -> Row {
    [label.to_string(), value.into()]
}

/// Renders the summary: verdict per checker with what it checked, op counts, availability, latency
/// percentiles, throughput and the run's path.
pub fn summary_table(s: &RunSummary) -> String {
    let mut rows = Vec::new();
    for r in &s.results {
        let mut v = r.valid.label().to_string();
        if !r.anomaly_types.is_empty() {
            v.push_str(&format!(" ({})", r.anomaly_types.join(", ")));
        }
        rows.push(row(&format!("checker {}", r.checker), v));
        // What the verdict rests on, so a valid over nothing cannot pass unseen.
        if !r.coverage.is_empty() {
            rows.push(row("  checked", r.coverage.to_string()));
        }
    }
    rows.push(row("verdict", s.valid.label()));
    let st = &s.stats;
    rows.push(row(
        "operations",
        format!(
            "{} total: {} ok, {} fail, {} info",
            st.ops, st.ok, st.fail, st.info
        ),
    ));
    rows.push(row(
        "availability",
        format!("{:.1}% ok", st.availability * 100.0),
    ));
    rows.push(row(
        "latency (ms)",
        format!(
            "p50 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2}",
            st.latency_ms.p50, st.latency_ms.p95, st.latency_ms.p99, st.latency_ms.max
        ),
    ));
    rows.push(row(
        "throughput",
        format!("{:.0} ok ops/s over {:.1} s", st.throughput, st.duration_s),
    ));
    rows.push(row("nemesis events", st.nemesis_events.to_string()));
    if let Some(fs) = &s.fault_search {
        rows.push(row(
            "fault search",
            format!(
                "{}: {} states, {} (state, fault) pairs, {} leader changes; signals: {}",
                fs.search, fs.states, fs.pairs, fs.leader_changes, fs.signals
            ),
        ));
        if let Some(plan) = &fs.plan_file {
            rows.push(row("  its plan", plan.clone()));
        }
        if let Some(m) = &fs.memory {
            let from = if m.runs == 0 {
                "cold (no earlier runs)".to_string()
            } else {
                format!("{} earlier runs, {} pairs", m.runs, m.pairs)
            };
            let note = m
                .note
                .as_deref()
                .map(|n| format!("; {n}"))
                .unwrap_or_default();
            rows.push(row("  memory", format!("{from}: {}{note}", m.file)));
        }
    }
    if let Some(links) = &s.links {
        rows.push(row("links", links.describe()));
        for line in links.describe_faults() {
            rows.push(row("  per fault", line));
        }
    }
    if let Some(seed) = s.seed {
        rows.push(row("seed", seed.to_string()));
    }
    if let Some(net) = &s.net {
        rows.push(row(
            "messages",
            format!(
                "{} total: {} server-server, {} client, {} service; dropped {} (partition) {} (loss)",
                net.messages,
                net.server_messages,
                net.client_messages,
                net.service_messages,
                net.dropped_partition,
                net.dropped_loss
            ),
        ));
        rows.push(row(
            "msgs per op",
            format!(
                "{:.2} total, {:.2} server-server",
                net.msgs_per_op, net.server_msgs_per_op
            ),
        ));
        for (node, n) in &net.by_node {
            rows.push(row(
                &format!("node {node}"),
                format!(
                    "sent {} recv {}; {} client ops, p50 {:.2} p99 {:.2} ms",
                    n.sent, n.received, n.client_ops, n.latency_ms.p50, n.latency_ms.p99
                ),
            ));
        }
        for (kind, t) in &net.by_op_type {
            rows.push(row(
                &format!("op {kind}"),
                format!(
                    "{} client ops, p50 {:.2} p95 {:.2} p99 {:.2} ms",
                    t.client_ops, t.latency_ms.p50, t.latency_ms.p95, t.latency_ms.p99
                ),
            ));
        }
    }
    if let Some(why) = &s.incomplete {
        rows.push(row("incomplete", why.clone()));
    }
    if let Some(dir) = &s.run_dir {
        rows.push(row("run", dir.clone()));
    }
    let mut table = Table::headless();
    for r in rows {
        table.row(r);
    }
    let mut out = table.boxed();
    for r in &s.results {
        if r.valid != splitbrain_checkers::Validity::Valid && !r.explanation.is_empty() {
            out.push_str(&format!("\n{}: {}", r.checker, r.explanation));
        }
        // The statements a database client sent and received for a cycle's transactions
        // (a PostgreSQL run's statement log).
        if let Some(log) = r.details.get("statement_log").and_then(|v| v.as_str()) {
            out.push_str(&format!("\n{log}"));
        }
    }
    out
}
