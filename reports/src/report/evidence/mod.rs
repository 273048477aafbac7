//! Each checker's section: its verdict and explanation, the evidence drawn (Elle's
//! cycles as graphs, a linearizability counterexample as bars per process, bank totals
//! over time, a DDP run's per-rank step agreement, per-replica divergence after the heal
//! of a convergence workload), and the evidence ops as recorded.

mod bank;
mod cycle;
mod ddp;
mod divergence;
mod linear;

pub use cycle::{cycles, Cycle, CycleEdge};

use super::{svg_or_warning, verdict_class};
use maud::{html, Markup};
use splitbrain_checkers::{CheckResult, History, Validity};

/// Cycles drawn per anomaly type.
const CYCLES_PER_TYPE: usize = 2;

fn drawn(r: &CheckResult, history: &History) -> Markup {
    let cs = cycles(&r.details, CYCLES_PER_TYPE);
    if !cs.is_empty() {
        return html! {
            div.cycles { @for c in &cs { (cycle::cycle_section(c)) } }
        };
    }
    if r.checker.starts_with("linearizable") && r.valid != Validity::Valid {
        if let Some(m) = linear::linear_section(&r.evidence, &r.details) {
            return m;
        }
    }
    // Replica agreement is worth seeing valid too; the reference row only when it failed.
    if r.checker == "ddp-replicas" || (r.checker == "ddp-reference" && r.valid == Validity::Invalid)
    {
        let reference = (r.checker == "ddp-reference").then_some(&r.details);
        if let Some(grid) = ddp::step_grid(history, reference) {
            let picture = svg_or_warning(ddp::step_grid_svg(&grid));
            return html! {
                figure.ddp {
                    figcaption {
                        "Per rank and committed step: green, the rank's parameter digest is the one most ranks reported; red, it is not"
                        @if reference.is_some() { "; orange, some rank differs from the single-process replay" }
                        " (" (grid.max_step) " steps)"
                    }
                    (picture)
                }
            };
        }
    }
    if r.checker == "convergence" {
        let heal = r
            .details
            .pointer("/quiescence/index")
            .and_then(serde_json::Value::as_u64);
        if let Some((lines, keys)) = heal.and_then(|i| divergence::divergence(history, i)) {
            let picture = svg_or_warning(divergence::divergence_svg(&lines, keys));
            return html! {
                figure.divergence {
                    figcaption {
                        "After the heal: per replica, how many of the " (keys)
                        " keys it still shows differently from the state most replicas ended with (elements compared as sets)"
                    }
                    (picture)
                }
            };
        }
    }
    if r.checker == "bank" {
        let points = bank::totals(history);
        if !points.is_empty() {
            let expected = r.details.get("total").and_then(serde_json::Value::as_i64);
            let picture = svg_or_warning(bank::bank_svg(&points, expected));
            return html! {
                figure.bank {
                    figcaption { "Sum of balances of every ok read (" (points.len()) " reads)" }
                    (picture)
                }
            };
        }
    }
    html! {}
}

/// One section per checker.
pub fn checker_sections(results: &[CheckResult], history: &History) -> Markup {
    html! {
        @for r in results {
            section.checker id={ "checker-" (r.checker) } {
                h3 { (r.checker) ": " span class=(verdict_class(r.valid)) { (r.valid.label()) } }
                @if !r.anomaly_types.is_empty() {
                    p { "Anomalies: " strong { (r.anomaly_types.join(", ")) } }
                }
                @if !r.not.is_empty() {
                    p { "Ruled out: " (r.not.join(", "))
                        @if !r.also_not.is_empty() { "; and so also " (r.also_not.join(", ")) } }
                }
                @if !r.explanation.is_empty() { p.explanation { (r.explanation) } }
                @if !r.coverage.is_empty() { p.coverage { "Checked: " (r.coverage.to_string()) } }
                (drawn(r, history))
                @if let Some(log) = r.details.get("statement_log").and_then(serde_json::Value::as_str) {
                    details.statement-log open {
                        summary { "Statements of the cycles' transactions, as sent and answered (statements.jsonl)" }
                        pre { (log) }
                    }
                }
                @if !r.evidence.is_empty() {
                    details {
                        summary { "Evidence ops (" (r.evidence.len()) ")" }
                        pre { @for e in &r.evidence { (e.to_string()) "\n" } }
                    }
                }
            }
        }
    }
}
