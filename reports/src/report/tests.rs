//! Tests of the whole page: sections present, text escaped, fault bands labelled, each
//! kind of evidence drawn from the checkers' own results.

use super::{render_html, render_html_with_shrunk, ShrunkFiles};
use crate::{history_stats, RunSummary};
use serde_json::{json, Value};
use splitbrain_checkers::bank::{BankChecker, BankOptions};
use splitbrain_checkers::elle::{ElleChecker, ElleOptions, ElleWorkload};
use splitbrain_checkers::linearizability::{LinearizabilityChecker, LinearizabilityOptions};
use splitbrain_checkers::{Checker, History, Op, OpType, Process};

fn op(p: u64, ty: OpType, f: &str, v: Value, t_ms: u64) -> Op {
    Op::new(Process::Client(p), ty, f, v).at(t_ms * 1_000_000)
}

fn page(name: &str, history: &History, checker: &dyn Checker, test: Option<&Value>) -> String {
    let results = vec![checker.check(history)];
    let summary = RunSummary::new(name.into(), None, results, history_stats(history), Some(7));
    render_html(&summary, history, test)
}

/// A register history with a partition and a kill, and a stale read at the end.
fn register_history() -> History {
    let mut ops = vec![Op::new(
        Process::Nemesis,
        OpType::Info,
        "start-partition",
        json!({"shape": "halves", "halves": [["n1", "n2"], ["n3", "n4", "n5"]]}),
    )
    .at(5_000_000)];
    for i in 0..40u64 {
        let p = i % 3;
        ops.push(op(p, OpType::Invoke, "write", json!(i), 10 + i * 4));
        ops.push(op(p, OpType::Ok, "write", json!(i), 12 + i * 4));
    }
    ops.push(Op::new(Process::Nemesis, OpType::Info, "stop-partition", json!({})).at(200_000_000));
    ops.push(
        Op::new(
            Process::Nemesis,
            OpType::Info,
            "kill",
            json!({"nodes": ["n3"], "target": "leader"}),
        )
        .at(250_000_000),
    );
    ops.push(op(5, OpType::Invoke, "read", json!(null), 500));
    ops.push(op(5, OpType::Ok, "read", json!(3), 505));
    ops.push(Op::new(Process::Nemesis, OpType::Info, "heal", json!({})).at(510_000_000));
    History::new(ops).unwrap()
}

fn linearizable() -> LinearizabilityChecker {
    LinearizabilityChecker::new("register", LinearizabilityOptions::default()).unwrap()
}

#[test]
fn every_section_is_present_and_the_header_repeats_the_run() {
    let h = register_history();
    let test = json!({"target": "kv", "workload": "register", "nemesis": ["partition", "kill"],
        "nemesis_interval_s": 4.0, "nodes": 5, "seed": 99, "bugs": ["stale-read"], "time_limit_s": 0.5});
    let html = page("kv-register", &h, &linearizable(), Some(&test));
    for needle in [
        "<!DOCTYPE html>",
        "id=\"latency\"",
        "id=\"throughput\"",
        "id=\"tl-canvas\"",
        "id=\"tl-cols\"",
        "id=\"checkers\"",
        "linearizable: <span class=\"invalid\">INVALID",
        "splitbrain test --target kv --workload register --nemesis partition,kill",
        "--bug stale-read",
        "--seed 99",
        "stale-read</td>",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
    // Self-contained: nothing is loaded from elsewhere.
    for remote in ["src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!html.contains(remote), "remote reference {remote}");
    }
}

#[test]
fn each_checker_shows_what_it_checked_in_the_table_and_its_section() {
    let h = register_history();
    let html = page("kv-register", &h, &linearizable(), None);
    let r = linearizable().check(&h);
    let line = r.coverage.to_string();
    assert!(line.starts_with("41 ops"), "{line}");
    assert!(
        html.contains(&format!("<td>{line}</td>")),
        "no coverage cell"
    );
    assert!(
        html.contains(&format!("Checked: {line}")),
        "no coverage line"
    );
    let summary = RunSummary::new("x".into(), None, vec![r], history_stats(&h), None);
    assert!(crate::summary_table(&summary).contains(&line));
}

#[test]
fn a_shrunk_reproduction_is_linked_with_its_sizes_and_command_only_when_there() {
    let h = register_history();
    let r = linearizable().check(&h);
    let summary = RunSummary::new("kv-register".into(), None, vec![r], history_stats(&h), None);
    let files = ShrunkFiles {
        schedule: Some(json!({"events_before": 12, "events_after": 1,
            "time_limit_s_before": 20.0, "time_limit_s_after": 5.0,
            "replay_rate": {"failed": 4, "runs": 5},
            "command": "splitbrain test --target kv --nemesis-plan run/shrunk/plan.json"})),
        history: Some(json!({"operations_before": 400, "operations_after": 3})),
    };
    let html = render_html_with_shrunk(&summary, &h, None, Some(&files));
    for needle in [
        "id=\"shrunk\"",
        "href=\"shrunk/plan.json\"",
        "fault events: 12 → 1",
        "run length (s): 20.0 → 5.0",
        "4 of 5 runs",
        "history operations: 400 → 3",
        "--nemesis-plan run/shrunk/plan.json",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
    assert!(!render_html(&summary, &h, None).contains("Shrunk reproduction"));
}

#[test]
fn a_replay_rate_the_budget_cut_or_never_measured_is_said_so() {
    let h = register_history();
    let r = linearizable().check(&h);
    let summary = RunSummary::new("kv-register".into(), None, vec![r], history_stats(&h), None);
    let render = |schedule: Value| {
        let files = ShrunkFiles {
            schedule: Some(schedule),
            history: None,
        };
        render_html_with_shrunk(&summary, &h, None, Some(&files))
    };
    let never = render(json!({"outcome": "budget-ended",
        "replay_rate": {"failed": 0, "runs": 0, "asked": 5, "cut_by_budget": true}}));
    assert!(never.contains("not measured"), "{never}");
    assert!(!never.contains("0 of 0"));
    let cut = render(json!({"outcome": "reproduced",
        "replay_rate": {"failed": 1, "runs": 1, "asked": 5, "cut_by_budget": true}}));
    assert!(cut.contains("1 of 1 runs fail the same way; the budget ended after 1 of 5"));
    let original = render(json!({"outcome": "budget-ended",
        "replay_rate": {"failed": 3, "runs": 5, "asked": 5, "cut_by_budget": false}}));
    assert!(original.contains("of the original"), "{original}");
}

#[test]
fn a_bare_history_without_test_json_says_what_is_unknown() {
    let h = register_history();
    let html = page("history.jsonl", &h, &linearizable(), None);
    assert!(html.contains("No test.json beside this history"));
    assert!(!html.contains("Repeat this run"));
}

#[test]
fn text_from_the_history_and_results_is_escaped() {
    let ops = vec![
        op(0, OpType::Invoke, "write", json!("</script><b>x"), 1),
        op(0, OpType::Ok, "write", json!("</script><b>x"), 2),
    ];
    let h = History::new(ops).unwrap();
    let html = page("<img src=x onerror=alert(1)>", &h, &linearizable(), None);
    assert!(!html.contains("<img src=x"), "test name not escaped");
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    // Exactly the page's own four scripts open and close.
    assert_eq!(html.matches("</script>").count(), 4);
    assert_eq!(html.matches("<b>").count(), 0);
}

#[test]
fn fault_bands_are_labelled_in_their_class_colour() {
    let h = register_history();
    let html = page("kv-register", &h, &linearizable(), None);
    // The lanes above the plots name the partition's sides and the killed node.
    // Each label stands in both plots' lanes, the window table and the timeline's data.
    for label in ["halves: n1 n2 | n3 n4 n5", "kill n3 (leader)"] {
        let svg_text = format!(">\n{label}\n</text>");
        assert_eq!(html.matches(&svg_text).count(), 2, "{label} in both plots");
        assert!(html.matches(label).count() >= 4, "{label}");
    }
    // Partition bands in the partition colour (#D62728), kill in its own (#3C3C3C).
    assert!(html.to_uppercase().contains("#D62728"));
    assert!(html.to_uppercase().contains("#3C3C3C"));
    // The timeline gets the same windows.
    assert!(html.contains("\"class\":\"partition\""));
}

#[test]
fn a_linearizability_counterexample_marks_the_stuck_op() {
    let h = register_history();
    let html = page("kv-register", &h, &linearizable(), None);
    assert!(html.contains("could not take effect (index"), "caption");
    // The stale read is the op that could not take effect: red bar, labelled with its value.
    assert!(html.contains("read → 3"), "stuck op label");
    assert!(html.to_uppercase().contains("#CC0055"));
}

#[test]
fn an_elle_cycle_is_drawn_with_every_edge_explained() {
    // G1c: each transaction reads the other's append.
    let t = |p: u64, ty: OpType, v: Value, ms: u64| op(p, ty, "txn", v, ms);
    let ops = vec![
        t(
            0,
            OpType::Invoke,
            json!([["append", "x", 1], ["r", "y", null]]),
            1,
        ),
        t(
            1,
            OpType::Invoke,
            json!([["append", "y", 1], ["r", "x", null]]),
            2,
        ),
        t(
            0,
            OpType::Ok,
            json!([["append", "x", 1], ["r", "y", [1]]]),
            3,
        ),
        t(
            1,
            OpType::Ok,
            json!([["append", "y", 1], ["r", "x", [1]]]),
            4,
        ),
    ];
    let h = History::new(ops).unwrap();
    let elle = ElleChecker::new(ElleWorkload::ListAppend, ElleOptions::default()).unwrap();
    let result = elle.check(&h);
    let cycles = super::cycles(&result.details, 2);
    assert!(!cycles.is_empty(), "{}", result.details);
    let kinds: Vec<&str> = cycles[0].edges.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["wr", "wr"], "{:?}", cycles[0]);
    let html = page("txn", &h, &elle, None);
    assert!(html.contains("<figure class=\"cycle\">"));
    // Each edge drawn with its kind as a label, and explained in words beneath.
    assert!(html.matches(">\nwr\n</text>").count() >= 2, "edge labels");
    for e in &cycles[0].edges {
        let text = maud::html! { (e.explanation) }.into_string();
        assert!(html.contains(&text), "explanation {}", e.explanation);
    }
    for c in &cycles[0].txns {
        assert!(
            html.contains(&format!(">\nT{}\n</text>", c.0)),
            "node T{}",
            c.0
        );
    }
}

#[test]
fn bank_totals_are_drawn_with_wrong_ones_apart() {
    let read = |p, ms, a: i64, b: i64| {
        [
            op(p, OpType::Invoke, "read", Value::Null, ms),
            op(p, OpType::Ok, "read", json!({"a": a, "b": b}), ms + 1),
        ]
    };
    let mut ops = Vec::new();
    ops.extend(read(0, 10, 50, 50));
    ops.extend(read(0, 20, 40, 60));
    ops.extend(read(1, 30, 40, 70));
    let h = History::new(ops).unwrap();
    let bank = BankChecker::new(BankOptions {
        total: Some(100),
        negative_allowed: false,
    });
    let html = page("bank", &h, &bank, None);
    assert!(html.contains("Sum of balances of every ok read (3 reads)"));
    assert!(html.contains("expected total 100"));
    assert!(html.contains("wrong total"));
}
