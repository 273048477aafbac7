//! The store's index page for `splitbrain serve`: every run with its test, time, verdict,
//! target, faults and duration, filterable by verdict; links to each run's report, history
//! and files. One self-contained page rendered through `maud` (every value escaped).

use crate::compare::ComparedRun;
use crate::live::LiveStatus;
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

/// Renders the index. `running` are the runs not checked yet, each with its last
/// `live.json` (label `<test>/<run>`), listed first with a link to their live page.
/// `filter` keeps only checked runs with that verdict; the page links to the other
/// filters. Run links are `/runs/<test>/<run>/...`.
pub fn store_index_html(
    runs: &[IndexedRun<'_>],
    running: &[(String, LiveStatus)],
    filter: Option<Validity>,
) -> String {
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
                @if !running.is_empty() {
                    h2 { "Not checked yet" }
                    table {
                        thead { tr {
                            th { "run" } th { "state" } th { "main phase s" } th { "ok" }
                            th { "fail" } th { "info" } th { "fault" } th { "anomalies found" }
                        } }
                        tbody {
                            @for (label, s) in running {
                                tr {
                                    td { a href={ "/live/" (label) } { (label) } }
                                    td { (s.state) }
                                    td { (format!("{:.0} / {:.0}", s.elapsed_s, s.time_limit_s)) }
                                    td { (s.ok) } td { (s.fail) } td { (s.info) }
                                    td { (s.fault) }
                                    td class=@if s.anomalies.is_empty() { "" } @else { "INVALID" } {
                                        (s.anomalies.len())
                                    }
                                }
                            }
                        }
                    }
                    h2 { "Checked" }
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
        let all = store_index_html(&runs, &[], None);
        assert!(
            all.contains(r#"<a href="/runs/t/1/report.html">t/1</a>"#),
            "{all}"
        );
        assert!(all.contains("&lt;b&gt;") && !all.contains("<b>"), "{all}");
        assert!(all.contains("INVALID (1)") && all.contains("valid (1)"));
        let invalid = store_index_html(&runs, &[], Some(Validity::Invalid));
        assert!(
            invalid.contains("/runs/t/2/report.html") && !invalid.contains("/runs/t/1/report.html")
        );
    }

    #[test]
    fn runs_not_checked_yet_come_first_with_their_live_page() {
        let checked = run("t/1", Validity::Valid);
        let runs = [IndexedRun {
            run: &checked,
            started: None,
        }];
        let status = LiveStatus {
            state: "running".into(),
            elapsed_s: 12.3,
            time_limit_s: 60.0,
            ok: 410,
            fail: 2,
            info: 1,
            fault: "partition <n1>".into(),
            anomalies: vec!["linearizable: key 7 INVALID at 4.4 s".into()],
            updated_unix_ms: 0,
        };
        let page = store_index_html(&runs, &[("kv/2".into(), status)], None);
        let (running, checked) = page.split_once("Checked").expect("two sections");
        assert!(
            running.contains(r#"<a href="/live/kv/2">kv/2</a>"#),
            "{page}"
        );
        assert!(
            running.contains("12 / 60") && running.contains("410"),
            "{page}"
        );
        assert!(running.contains("partition &lt;n1&gt;"), "{page}");
        assert!(running.contains(r#"class="INVALID">1<"#), "{page}");
        assert!(checked.contains("/runs/t/1/report.html"), "{page}");
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
