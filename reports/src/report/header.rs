//! The page's header: what ran (from the run's test.json, when there is one), the
//! verdict of each checker, and the exact command that repeats the run.

use super::verdict_class;
use crate::RunSummary;
use maud::{html, Markup};
use serde_json::Value;

/// Quotes a shell word when it holds anything a shell would read differently.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || ",._/:=+-@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(text).collect())
        .unwrap_or_default()
}

/// The `splitbrain test` command that repeats the run test.json describes: every
/// option it records, the seed included, so the same schedule and ops come back.
pub fn repeat_command(test: &Value) -> String {
    let mut words = vec!["splitbrain".to_string(), "test".to_string()];
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            words.push(format!("--{name}"));
            words.push(shell_word(&v));
        }
    };
    flag("target", text(&test["target"]));
    flag("target-spec", text(&test["target_spec"]));
    let m = &test["maelstrom"];
    flag("bin", text(&m["bin"]));
    for arg in list(&m["bin_args"]) {
        flag("bin-arg", Some(arg));
    }
    if m.is_object() {
        flag("latency", text(&m["latency_ms"]));
        flag("latency-dist", text(&m["latency_dist"]));
        flag("topology", text(&m["topology"]));
    }
    flag("workload", text(&test["workload"]));
    let faults = list(&test["nemesis"]);
    match text(&test["nemesis_plan"]) {
        Some(plan) => flag("nemesis-plan", Some(plan)),
        None => flag(
            "nemesis",
            Some(if faults.is_empty() {
                "none".into()
            } else {
                faults.join(",")
            }),
        ),
    }
    if !faults.is_empty() && test["nemesis_plan"].is_null() {
        flag("nemesis-interval", text(&test["nemesis_interval_s"]));
    }
    flag("nodes", text(&test["nodes"]));
    flag("concurrency", text(&test["concurrency"]));
    flag("rate", text(&test["rate"]));
    flag("time-limit", text(&test["time_limit_s"]));
    flag("op-timeout-ms", text(&test["op_timeout_ms"]));
    for bug in list(&test["bugs"]) {
        flag("bug", Some(bug));
    }
    if test["shards"].as_u64().is_some_and(|s| s != 1) {
        flag("shards", text(&test["shards"]));
    }
    flag("read-mode", text(&test["read_mode"]));
    flag("wait", text(&test["wait"]));
    flag("read-from", text(&test["read_from"]));
    flag("replication", text(&test["replication"]));
    flag("transport", text(&test["transport"]));
    for setting in list(&test["settings"]) {
        flag("setting", Some(setting));
    }
    flag("steps", text(&test["steps"]));
    flag("consistency-model", text(&test["consistency_model"]));
    flag(
        "init",
        test.get("init")
            .filter(|v| !v.is_null())
            .map(Value::to_string),
    );
    flag("active-keys", text(&test["active_keys"]));
    flag("ops-per-key", text(&test["ops_per_key"]));
    flag("hedge-delay-ms", text(&test["hedge_delay_ms"]));
    // Only where it differs from the default, which older runs did not store.
    if test["converge_bound_s"].as_f64().is_some_and(|b| b != 20.0) {
        flag("converge-bound", text(&test["converge_bound_s"]));
    }
    flag("seed", text(&test["seed"]));
    words.join(" ")
}

/// The header section: run parameters, verdict per checker, the repeat command.
pub fn header(summary: &RunSummary, test: Option<&Value>) -> Markup {
    let null = Value::Null;
    let t = test.unwrap_or(&null);
    let field = |name: &str| text(&t[name]);
    let bugs = list(&t["bugs"]);
    let faults = list(&t["nemesis"]);
    let seed = field("seed").or(summary.seed.map(|s| s.to_string()));
    let st = &summary.stats;
    let rows: Vec<(&str, Option<String>)> = vec![
        ("target", field("target")),
        ("workload", field("workload")),
        ("read mode", field("read_mode")),
        ("isolation / model", field("consistency_model")),
        (
            "bugs",
            test.map(|_| {
                if bugs.is_empty() {
                    "none (correct mode)".into()
                } else {
                    bugs.join(", ")
                }
            }),
        ),
        (
            "faults",
            test.map(|_| {
                match (
                    faults.is_empty(),
                    field("nemesis_plan"),
                    field("nemesis_interval_s"),
                ) {
                    (true, _, _) => "none".to_string(),
                    // A plan's faults come at the plan's times, not at the interval.
                    (false, Some(plan), _) => format!("{} (plan {plan})", faults.join(", ")),
                    (false, None, Some(i)) => {
                        format!("{} (one every {i} s on average)", faults.join(", "))
                    }
                    (false, None, None) => faults.join(", "),
                }
            }),
        ),
        ("nodes", field("nodes")),
        (
            "clients",
            field("concurrency").map(|c| match field("rate") {
                Some(r) => format!("{c} at {r} ops/s in all"),
                None => c,
            }),
        ),
        ("seed", seed),
        (
            "duration",
            Some(match field("time_limit_s") {
                Some(l) => format!("{:.1} s recorded ({l} s main phase)", st.duration_s),
                None => format!("{:.1} s recorded", st.duration_s),
            }),
        ),
        (
            "history",
            Some(format!(
                "{} client ops: {} ok, {} fail, {} info; {} nemesis events",
                st.ops, st.ok, st.fail, st.info, st.nemesis_events
            )),
        ),
        ("links", summary.links.as_ref().map(|l| l.describe())),
        (
            "links per fault",
            summary
                .links
                .as_ref()
                .map(|l| l.describe_faults().join(" · "))
                .filter(|s| !s.is_empty()),
        ),
        ("run directory", summary.run_dir.clone()),
        ("version", field("version")),
    ];
    html! {
        header {
            h1 {
                (summary.test_name) ": "
                span class=(verdict_class(summary.valid)) { (summary.valid.label()) }
            }
            @if let Some(why) = &summary.incomplete {
                p.warn { "Incomplete run: " (why) ". The verdict covers what was recorded." }
            }
            div.cols {
                table.params {
                    @for (k, v) in &rows {
                        @if let Some(v) = v {
                            tr { th { (k) } td { (v) } }
                        }
                    }
                }
                table.verdicts {
                    tr { th { "checker" } th { "verdict" } th { "checked" } th { "anomalies" } th { "ruled out" } }
                    @for r in &summary.results {
                        tr {
                            td { a href={ "#checker-" (r.checker) } { (r.checker) } }
                            td class=(verdict_class(r.valid)) { (r.valid.label()) }
                            td { (r.coverage.to_string()) }
                            td { (r.anomaly_types.join(", ")) }
                            td { (r.not.join(", ")) }
                        }
                    }
                }
            }
            @match test {
                Some(t) => {
                    p { "Repeat this run:" }
                    pre.cmd { (repeat_command(t)) }
                }
                None => p.muted { "No test.json beside this history: the parameters of the run are unknown; the checks are repeated with " code { "splitbrain check" } " on the history." }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeat_command_carries_every_recorded_option() {
        let t = json!({"target": "kv", "workload": "register", "nemesis": ["partition", "kill"],
            "nemesis_interval_s": 4.0, "nemesis_plan": null, "nodes": 5, "concurrency": 10,
            "rate": 200.0, "time_limit_s": 20.0, "op_timeout_ms": 1000, "seed": 42,
            "bugs": ["stale-read"], "shards": 1, "read_mode": null, "consistency_model": null,
            "active_keys": 8, "ops_per_key": 100, "hedge_delay_ms": 2});
        assert_eq!(
            repeat_command(&t),
            "splitbrain test --target kv --workload register --nemesis partition,kill \
             --nemesis-interval 4.0 --nodes 5 --concurrency 10 --rate 200.0 --time-limit 20.0 \
             --op-timeout-ms 1000 --bug stale-read --active-keys 8 --ops-per-key 100 \
             --hedge-delay-ms 2 --seed 42"
        );
        assert_eq!(shell_word("a b'c"), r"'a b'\''c'");
        let t = json!({"target": "kv", "workload": "register", "nemesis": ["kill"],
            "nemesis_interval_s": 4.0, "nemesis_plan": "/p/plan.json", "seed": 3});
        assert_eq!(
            repeat_command(&t),
            "splitbrain test --target kv --workload register --nemesis-plan /p/plan.json --seed 3"
        );
        let summary = RunSummary::new(
            "kv-register".into(),
            None,
            Vec::new(),
            Default::default(),
            None,
        );
        let page = header(&summary, Some(&t)).into_string();
        assert!(page.contains("kill (plan /p/plan.json)"), "{page}");
        assert!(!page.contains("one every"), "{page}");
        let t = json!({"target": "exec", "target_spec": "/x/kv.toml", "workload": "register",
            "nemesis": [], "seed": 1});
        assert_eq!(
            repeat_command(&t),
            "splitbrain test --target exec --target-spec /x/kv.toml --workload register \
             --nemesis none --seed 1"
        );
        let t = json!({"target": "maelstrom", "workload": "broadcast", "nemesis": [], "seed": 2,
            "maelstrom": {"bin": "/n/b.py", "bin_args": ["-v"], "latency_ms": 10.0,
                "latency_dist": "uniform", "topology": "line"}});
        assert_eq!(
            repeat_command(&t),
            "splitbrain test --target maelstrom --bin /n/b.py --bin-arg -v --latency 10.0 \
             --latency-dist uniform --topology line --workload broadcast --nemesis none --seed 2"
        );
    }
}
