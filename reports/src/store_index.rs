//! The store's index page for `splitbrain serve`: every run with its test, time, verdict,
//! target, faults and duration, filterable by verdict; links to each run's report, history
//! and files. One self-contained page rendered through `maud` (every value escaped).

use crate::compare::ComparedRun;
use maud::{html, Markup, DOCTYPE};
use splitbrain_checkers::Validity;

/// One line of the index: a stored run and when it started (display text).
#[derive(Debug, Clone)]
pub struct IndexedRun<'a> {
    /// The run (its label is its path in the store, `<test>/<run>`).
    pub run: &'a ComparedRun,
    /// When it started, as text (`2026-12-01 02:55:04 UTC`), if known.
    pub started: Option<String>,
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}\
th{background:#f3f3f3}.INVALID{color:#b00020;font-weight:600}.valid{color:#17663a}\
.unknown{color:#8a6d00}nav a{margin-right:1em}";

/// Renders the index. `filter` keeps only runs with that verdict; the page links to the
/// other filters. Run links are `/runs/<test>/<run>/...`.
pub fn store_index_html(runs: &[IndexedRun<'_>], filter: Option<Validity>) -> String {
    let shown: Vec<&IndexedRun<'_>> = runs
        .iter()
        .filter(|r| filter.is_none_or(|v| r.run.summary.valid == v))
        .collect();
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "splitbrain store" }
                style { (STYLE) }
            }
            body {
                h1 { "splitbrain store" }
                nav {
                    a href="/" { "all (" (runs.len()) ")" }
                    @for v in [Validity::Valid, Validity::Invalid, Validity::Unknown] {
                        a href={ "/?verdict=" (v.label().to_ascii_lowercase()) } {
                            (v.label()) " (" (runs.iter().filter(|r| r.run.summary.valid == v).count()) ")"
                        }
                    }
                }
                @if shown.is_empty() {
                    p { "No runs." }
                } @else {
                    table {
                        thead { tr {
                            th { "run" } th { "started" } th { "verdict" } th { "target" }
                            th { "workload" } th { "bugs" } th { "faults" } th { "seed" }
                            th { "duration s" } th { "files" }
                        } }
                        tbody {
                            @for r in &shown {
                                @let o = &r.run.options;
                                @let base = format!("/runs/{}", r.run.label);
                                tr {
                                    td { a href={ (base) "/report.html" } { (r.run.label) } }
                                    td { (r.started.as_deref().unwrap_or("-")) }
                                    td class=(r.run.summary.valid.label()) { (r.run.summary.valid.label()) }
                                    td { (o.target) }
                                    td { (o.workload) }
                                    td { (o.bugs.join(", ")) }
                                    td { (o.faults.join(", ")) }
                                    td { (o.seed.map(|s| s.to_string()).unwrap_or_default()) }
                                    td { (format!("{:.1}", r.run.summary.stats.duration_s)) }
                                    td {
                                        a href={ (base) "/history.jsonl" } { "history" } " "
                                        a href={ (base) "/" } { "all files" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    page.into_string()
}

/// A directory listing inside a run (node logs and data), links relative to `base`.
pub fn directory_html(base: &str, entries: &[(String, bool)]) -> String {
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { (base) } style { (STYLE) } }
            body {
                h1 { (base) }
                p { a href="/" { "all runs" } }
                ul {
                    @for (name, is_dir) in entries {
                        li { a href={ (base.trim_end_matches('/')) "/" (name) @if *is_dir { "/" } } {
                            (name) @if *is_dir { "/" }
                        } }
                    }
                }
            }
        }
    };
    page.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunOptions, RunSummary};
    use splitbrain_checkers::CheckResult;

    fn run(label: &str, valid: Validity) -> ComparedRun {
        ComparedRun {
            label: label.into(),
            options: RunOptions {
                target: "kv".into(),
                bugs: vec!["<b>".into()],
                ..RunOptions::default()
            },
            summary: RunSummary::new(
                label.into(),
                None,
                vec![CheckResult::new("linearizable", valid, "")],
                Default::default(),
                None,
            ),
        }
    }

    #[test]
    fn lists_and_filters_runs_with_links_and_escaping() {
        let (a, b) = (run("t/1", Validity::Valid), run("t/2", Validity::Invalid));
        let runs = [
            IndexedRun {
                run: &a,
                started: None,
            },
            IndexedRun {
                run: &b,
                started: Some("2026-12-01 02:00:00 UTC".into()),
            },
        ];
        let all = store_index_html(&runs, None);
        assert!(
            all.contains(r#"<a href="/runs/t/1/report.html">t/1</a>"#),
            "{all}"
        );
        assert!(all.contains("&lt;b&gt;") && !all.contains("<b>"), "{all}");
        assert!(all.contains("INVALID (1)") && all.contains("valid (1)"));
        let invalid = store_index_html(&runs, Some(Validity::Invalid));
        assert!(
            invalid.contains("/runs/t/2/report.html") && !invalid.contains("/runs/t/1/report.html")
        );
    }

    #[test]
    fn directory_listing_links_inside_the_run() {
        let page = directory_html(
            "/runs/t/1/nodes",
            &[("n1".into(), true), ("x.log".into(), false)],
        );
        assert!(page.contains(r#"href="/runs/t/1/nodes/n1/""#), "{page}");
        assert!(page.contains(r#"href="/runs/t/1/nodes/x.log""#), "{page}");
    }
}
