//! Whether the faults a test asked for actually happened.
//!
//! A run that asked for partitions and kills but in which no partition ever took effect
//! (a leader that could not be found, a backend that refused the rule, a time limit shorter
//! than the first fault) has not tested partitions: its `valid` would be a claim about
//! something it never saw. [`FaultCoverageChecker`] reads the nemesis ops of the history
//! (every start and stop is recorded, with `error` when it failed), counts per requested
//! fault class how often it took effect and for how long, and is `unknown` naming every
//! class that never did. It works from the history and test.json alone, so a re-check of
//! a stored run applies it too.

use serde_json::{json, Value};
use splitbrain_checkers::{CheckResult, Checker, History, Op, Process, Validity};
use std::collections::BTreeMap;

/// The fault classes a test asked for (`--nemesis` names, or a plan's steps), judged
/// against what the nemesis recorded.
#[derive(Debug, Clone, Default)]
pub struct FaultCoverageChecker {
    /// Class names as the nemesis ops are grouped (`kill-one` counts as `kill`).
    requested: Vec<String>,
}

impl FaultCoverageChecker {
    /// From a stored or resolved test.json: its `nemesis` names, or, for a plan, the kinds
    /// of its `nemesis_schedule`. `None` when no fault was asked for.
    pub fn from_test_json(test: &Value) -> Option<FaultCoverageChecker> {
        let mut requested: Vec<String> = Vec::new();
        let planned = test
            .get("nemesis_plan")
            .is_some_and(|p| !p.is_null() && p != "");
        if planned {
            for step in test["nemesis_schedule"].as_array().into_iter().flatten() {
                if let Some(f) = step["f"].as_str() {
                    requested.push(planned_class(f, step["shape"].as_str()).to_string());
                }
            }
        } else {
            for name in test["nemesis"].as_array().into_iter().flatten() {
                match name.as_str() {
                    Some("none") | None => {}
                    Some(n) => requested.push(requested_class(n).to_string()),
                }
            }
        }
        requested.sort();
        requested.dedup();
        (!requested.is_empty()).then_some(FaultCoverageChecker { requested })
    }
}

/// `--nemesis` names that the history cannot tell apart are one class.
fn requested_class(name: &str) -> &str {
    match name {
        "kill-one" => "kill",
        other => other,
    }
}

/// The class of a plan step (`f` tag, and a partition's shape).
fn planned_class<'a>(f: &'a str, shape: Option<&str>) -> &'a str {
    match (f, shape) {
        ("partition", Some("isolate-leader")) => "partition-leader",
        ("partition", Some("leader-churn")) => "leader-churn",
        ("partition", Some("figure-8")) => "figure-8",
        (f, _) => f,
    }
}

/// What one nemesis op means for coverage.
enum Event<'a> {
    /// A fault of this class started (or staged a round): it took effect unless `error`.
    Start(&'a str),
    /// Rounds of a staged fault that act while it lasts (figure 8, leader churn).
    Round(&'a str),
    /// The fault of this timeline stopped.
    Stop(Timeline),
    /// Everything stopped.
    Heal,
    Other,
}

/// Faults of one timeline never overlap, so a stop closes whatever of it is open.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Timeline {
    Kill,
    Pause,
    Strobe,
    Clock,
    Net(&'static str),
}

fn event(op: &Op) -> Event<'static> {
    let shape = op.value.get("shape").and_then(Value::as_str);
    match op.f.as_str() {
        "kill" => Event::Start("kill"),
        "pause" => Event::Start("pause"),
        "start-strobe-pause" => Event::Start("strobe-pause"),
        "start-clock" => Event::Start("clock"),
        "start-slow" => Event::Start("slow"),
        "start-loss" => Event::Start("loss"),
        "start-slow-client" => Event::Start("slow-client"),
        "start-partition" => Event::Start(planned_class("partition", shape)),
        "figure-8" => Event::Round("figure-8"),
        "churn-partition" => Event::Round("leader-churn"),
        "restart" => Event::Stop(Timeline::Kill),
        "resume" => Event::Stop(Timeline::Pause),
        "stop-strobe-pause" => Event::Stop(Timeline::Strobe),
        "stop-clock" => Event::Stop(Timeline::Clock),
        "stop-slow" => Event::Stop(Timeline::Net("slow")),
        "stop-loss" => Event::Stop(Timeline::Net("loss")),
        "stop-slow-client" => Event::Stop(Timeline::Net("slow-client")),
        "stop-partition" => Event::Stop(Timeline::Net("partition")),
        "heal" => Event::Heal,
        _ => Event::Other,
    }
}

fn timeline(class: &str) -> Timeline {
    match class {
        "kill" => Timeline::Kill,
        "pause" => Timeline::Pause,
        "strobe-pause" => Timeline::Strobe,
        "clock" => Timeline::Clock,
        "slow" => Timeline::Net("slow"),
        "loss" => Timeline::Net("loss"),
        "slow-client" => Timeline::Net("slow-client"),
        _ => Timeline::Net("partition"),
    }
}

/// Per class: how often it took effect, failed, and how long it was active.
#[derive(Default, Debug)]
struct ClassCount {
    took_effect: u64,
    failed: u64,
    active_ns: u64,
    first_error: Option<String>,
}

/// A start that did something: no error, and, where it names nodes, at least one.
fn took_effect(op: &Op) -> bool {
    let no_error = op.value.get("error").is_none_or(Value::is_null)
        && op.error.as_ref().is_none_or(Value::is_null);
    let names_nodes = match op.value.get("nodes") {
        Some(Value::Array(a)) => !a.is_empty(),
        _ => true,
    };
    no_error && names_nodes
}

impl Checker for FaultCoverageChecker {
    fn name(&self) -> String {
        "fault-coverage".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let mut counts: BTreeMap<&str, ClassCount> = self
            .requested
            .iter()
            .map(|c| (c.as_str(), ClassCount::default()))
            .collect();
        let mut open: BTreeMap<Timeline, (&str, u64)> = BTreeMap::new();
        let mut end = 0u64;
        let mut nemesis_ops = 0u64;
        // Positions, not `ops()`: a long history's client ops are never built for this.
        for pos in 0..history.len() {
            end = end.max(history.op_time(pos).unwrap_or(0));
            if history.op_process(pos) != Some(Process::Nemesis) {
                continue;
            }
            let Some(op) = history.op(pos) else { continue };
            let op: &Op = &op;
            nemesis_ops += 1;
            match event(op) {
                Event::Start(class) => {
                    let effect = took_effect(op);
                    let Some(c) = counts.get_mut(class) else {
                        continue;
                    };
                    // A staged fault acts through its rounds, counted below.
                    let staged = matches!(class, "figure-8");
                    if effect {
                        if !staged {
                            c.took_effect += 1;
                        }
                        open.entry(timeline(class)).or_insert((class, op.time));
                    } else {
                        c.failed += 1;
                        if c.first_error.is_none() {
                            let error = op.value.get("error").or(op.error.as_ref());
                            c.first_error = error.map(|e| match e {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            });
                        }
                    }
                }
                Event::Round(class) => {
                    if let Some(c) = counts.get_mut(class) {
                        if took_effect(op) {
                            c.took_effect += 1;
                        }
                    }
                }
                Event::Stop(t) => {
                    if let Some((class, t0)) = open.remove(&t) {
                        if let Some(c) = counts.get_mut(class) {
                            c.active_ns += op.time.saturating_sub(t0);
                        }
                    }
                }
                Event::Heal => close_all(&mut open, &mut counts, op.time),
                Event::Other => {}
            }
        }
        close_all(&mut open, &mut counts, end);
        judge(counts, nemesis_ops)
    }
}

fn close_all(
    open: &mut BTreeMap<Timeline, (&str, u64)>,
    counts: &mut BTreeMap<&str, ClassCount>,
    at: u64,
) {
    for (_, (class, t0)) in std::mem::take(open) {
        if let Some(c) = counts.get_mut(class) {
            c.active_ns += at.saturating_sub(t0);
        }
    }
}

fn judge(counts: BTreeMap<&str, ClassCount>, nemesis_ops: u64) -> CheckResult {
    let mut exercised = Vec::new();
    let mut missing = Vec::new();
    let mut details = serde_json::Map::new();
    for (class, c) in &counts {
        let secs = c.active_ns as f64 / 1e9;
        details.insert(
            (*class).to_string(),
            json!({"took_effect": c.took_effect, "failed": c.failed,
                   "active_s": (secs * 1000.0).round() / 1000.0,
                   "first_error": c.first_error}),
        );
        if c.took_effect > 0 {
            exercised.push(format!("{class} {}× ({secs:.1} s)", c.took_effect));
        } else {
            missing.push(match (&c.first_error, c.failed) {
                (Some(e), n) => format!("{class} ({n} attempt(s) failed, first: {e})"),
                (None, 0) => format!("{class} (never started)"),
                (None, n) => format!("{class} ({n} attempt(s) affected no node)"),
            });
        }
    }
    let mut r = if missing.is_empty() {
        CheckResult::new(
            "fault-coverage",
            Validity::Valid,
            format!(
                "every requested fault took effect: {}",
                exercised.join(", ")
            ),
        )
    } else {
        let also = if exercised.is_empty() {
            String::new()
        } else {
            format!("; exercised: {}", exercised.join(", "))
        };
        CheckResult::new(
            "fault-coverage",
            Validity::Unknown,
            format!(
                "not exercised: {}{also}. A run in which a requested fault never took effect \
                 has not tested it",
                missing.join(", ")
            ),
        )
    };
    r.details = json!({"nemesis_ops": nemesis_ops, "classes": details});
    let took_effect: u64 = counts.values().map(|c| c.took_effect).sum();
    r.with_coverage(splitbrain_checkers::Coverage::of([
        ("nemesis ops", nemesis_ops),
        ("faults", took_effect),
        ("fault classes", exercised.len() as u64),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitbrain_checkers::OpType;

    fn nemesis(time: u64, f: &str, value: Value) -> Op {
        let mut op = Op::new(Process::Nemesis, OpType::Info, f, value);
        op.time = time;
        op
    }

    fn client_pair(time: u64) -> [Op; 2] {
        let mut a = Op::new(Process::Client(0), OpType::Invoke, "read", Value::Null);
        a.time = time;
        let mut b = Op::new(Process::Client(0), OpType::Ok, "read", json!(1));
        b.time = time + 1;
        [a, b]
    }

    fn history(mut ops: Vec<Op>) -> History {
        ops.sort_by_key(|o| o.time);
        History::new(ops).unwrap()
    }

    fn checker(nemesis: &[&str]) -> FaultCoverageChecker {
        FaultCoverageChecker::from_test_json(&json!({"nemesis": nemesis})).unwrap()
    }

    #[test]
    fn every_requested_class_that_took_effect_is_valid_with_its_time() {
        let mut ops = vec![
            nemesis(1_000_000_000, "start-partition", json!({"shape": "halves"})),
            nemesis(3_000_000_000, "stop-partition", json!({})),
            nemesis(4_000_000_000, "kill", json!({"nodes": ["n2"]})),
            nemesis(5_000_000_000, "restart", json!({"nodes": ["n2"]})),
        ];
        ops.extend(client_pair(0));
        let r = checker(&["partition", "kill-one"]).check(&history(ops));
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        assert_eq!(r.details["classes"]["partition"]["active_s"], 2.0);
        assert_eq!(r.details["classes"]["kill"]["took_effect"], 1);
    }

    #[test]
    fn a_class_that_never_took_effect_makes_the_run_unknown_and_is_named() {
        let ops = vec![
            nemesis(1, "start-partition", json!({"shape": "halves"})),
            nemesis(2, "stop-partition", json!({})),
            nemesis(3, "kill", json!({"nodes": [], "error": "no leader"})),
            nemesis(4, "kill", json!({"nodes": []})),
        ];
        let r = checker(&["partition", "kill", "clock"]).check(&history(ops));
        assert_eq!(r.valid, Validity::Unknown);
        assert!(
            r.explanation
                .contains("kill (2 attempt(s) failed, first: no leader)"),
            "{}",
            r.explanation
        );
        assert!(
            r.explanation.contains("clock (never started)"),
            "{}",
            r.explanation
        );
        assert!(
            r.explanation.contains("exercised: partition 1×"),
            "{}",
            r.explanation
        );
    }

    #[test]
    fn figure_8_counts_its_rounds_not_its_healed_start() {
        let start = vec![
            nemesis(1, "start-partition", json!({"shape": "figure-8"})),
            nemesis(9, "stop-partition", json!({})),
        ];
        let r = checker(&["figure-8"]).check(&history(start.clone()));
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        let mut with_round = start;
        with_round.push(nemesis(5, "figure-8", json!({"stage": "isolate"})));
        let r = checker(&["figure-8"]).check(&history(with_round));
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
    }

    #[test]
    fn no_fault_asked_for_adds_no_result_and_a_plan_asks_for_its_steps() {
        assert!(FaultCoverageChecker::from_test_json(&json!({"nemesis": ["none"]})).is_none());
        assert!(FaultCoverageChecker::from_test_json(&json!({})).is_none());
        let planned = FaultCoverageChecker::from_test_json(&json!({
            "nemesis": [], "nemesis_plan": "p.json",
            "nemesis_schedule": [{"f": "partition", "shape": "isolate-leader"}, {"f": "kill"}]
        }))
        .unwrap();
        assert_eq!(planned.requested, ["kill", "partition-leader"]);
    }

    #[test]
    fn a_fault_still_active_at_the_end_counts_until_the_last_op() {
        let mut ops = vec![nemesis(1_000_000_000, "pause", json!({"nodes": ["n1"]}))];
        ops.extend(client_pair(2_000_000_000));
        let r = checker(&["pause"]).check(&history(ops));
        assert_eq!(r.valid, Validity::Valid);
        assert_eq!(r.details["classes"]["pause"]["active_s"], 1.0);
    }
}
