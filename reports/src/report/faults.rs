//! Fault windows read back from the nemesis's ops: each start op opens a window of its
//! class, the matching stop (or the final `heal`, or the history's end) closes it.

use serde_json::Value;
use splitbrain_checkers::{History, Process};

/// One fault, from its start op to its stop op.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultWindow {
    /// The fault class (`partition`, `kill`, `pause`, `clock`, `slow`, ...).
    pub class: String,
    /// What the fault did, in a few words (`halves n1 n2 | n3 n4 n5`, `kill n3 (leader)`).
    pub label: String,
    /// Start time (ns since the test began).
    pub start: u64,
    /// Stop time (ns); the history's end when no stop was recorded.
    pub end: u64,
    /// The start op reported an error (the fault may not have been applied in full).
    pub error: bool,
}

/// The stop op that ends a start op, as `nemesis/src/lib.rs` documents them.
fn class_of_start(f: &str) -> Option<&str> {
    match f {
        "kill" => Some("kill"),
        "pause" => Some("pause"),
        _ => f.strip_prefix("start-"),
    }
}

fn class_of_stop(f: &str) -> Option<&str> {
    match f {
        "restart" => Some("kill"),
        "resume" => Some("pause"),
        _ => f.strip_prefix("stop-"),
    }
}

/// The fill colour of a fault class (RGB), one per class so overlapping faults stay apart.
pub fn class_colour(class: &str) -> (u8, u8, u8) {
    match class {
        "partition" => (214, 39, 40),
        "kill" => (60, 60, 60),
        "pause" => (148, 103, 189),
        "clock" => (31, 119, 180),
        "slow" => (255, 127, 14),
        "loss" => (140, 86, 75),
        "strobe-pause" => (227, 119, 194),
        "slow-client" => (23, 190, 207),
        _ => (188, 189, 34),
    }
}

fn nodes_text(v: &Value) -> String {
    match v.get("nodes").and_then(Value::as_array) {
        Some(ns) => ns
            .iter()
            .map(|n| {
                n.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| n.to_string())
            })
            .collect::<Vec<_>>()
            .join(" "),
        None => String::new(),
    }
}

fn groups_text(groups: &Value) -> String {
    groups
        .as_array()
        .map(|gs| {
            gs.iter()
                .map(|g| nodes_text(&serde_json::json!({ "nodes": g })))
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}

fn num(v: &Value, field: &str) -> String {
    v.get(field).map(|x| x.to_string()).unwrap_or_default()
}

/// The words a band is labelled with: partition shape and sides, which nodes were
/// killed, paused, skewed or slowed, and by how much.
pub fn fault_label(class: &str, v: &Value) -> String {
    let nodes = nodes_text(v);
    let target = v
        .get("target")
        .and_then(Value::as_str)
        .map(|t| format!(" ({t})"))
        .unwrap_or_default();
    let text = match class {
        "partition" => {
            let shape = v
                .get("shape")
                .and_then(Value::as_str)
                .unwrap_or("partition");
            // The sides are recorded under the shape's own name (`halves`, `bridge`, ...).
            let sides = [shape, "halves", "groups"]
                .iter()
                .filter_map(|k| v.get(*k))
                .map(groups_text)
                .find(|s| !s.is_empty());
            let blocked: Vec<String> = v
                .get("blocked")
                .and_then(Value::as_array)
                .map(|b| {
                    b.iter()
                        .filter_map(|pair| {
                            Some(format!(
                                "{}→{}",
                                v_str(pair.get(0)?, ""),
                                v_str(pair.get(1)?, "")
                            ))
                        })
                        .collect()
                })
                .unwrap_or_default();
            match sides {
                Some(s) => format!("{shape}: {s}"),
                None if !blocked.is_empty() => format!("{shape}: {} cut", blocked.join(" ")),
                None => shape.to_string(),
            }
        }
        "kill" | "pause" => format!("{class} {nodes}{target}"),
        "clock" => {
            let mode = v.get("mode").and_then(Value::as_str).unwrap_or("clock");
            format!("clock {mode} {} ms {nodes}", num(v, "offset_ms"))
        }
        "slow" | "slow-client" => format!(
            "{class} {nodes}{target} {}±{} ms",
            num(v, "delay_ms"),
            num(v, "jitter_ms")
        ),
        "loss" => {
            let pct = v.get("fraction").and_then(Value::as_f64).unwrap_or(0.0) * 100.0;
            format!("loss {pct:.0}% {nodes}")
        }
        "strobe-pause" => format!(
            "strobe-pause {nodes}{target} {}/{} ms",
            num(v, "stop_ms"),
            num(v, "every_ms")
        ),
        _ => format!("{class} {nodes}"),
    };
    let text = text.trim().to_string();
    if v.get("error").is_some() {
        format!("{text} [error]")
    } else {
        text
    }
}

/// Every fault window of the history, ordered by start. Reads only the nemesis's ops.
pub fn fault_windows(history: &History) -> Vec<FaultWindow> {
    let end = history
        .len()
        .checked_sub(1)
        .and_then(|p| history.op_time(p))
        .unwrap_or(0);
    let mut done = Vec::new();
    let mut open: Vec<FaultWindow> = Vec::new();
    for pos in 0..history.len() {
        if history.op_process(pos) != Some(Process::Nemesis) {
            continue;
        }
        let (Some(f), Some(t)) = (history.op_f(pos), history.op_time(pos)) else {
            continue;
        };
        let value = history
            .op_value(pos)
            .map(|v| v.into_owned())
            .unwrap_or_default();
        if f == "heal" {
            for mut w in open.drain(..) {
                w.end = t;
                done.push(w);
            }
        } else if f == "churn-partition" {
            // Leader churn moves the cut: close the old window, open one naming the new
            // isolated node.
            if let Some(i) = open.iter().position(|w| w.class == "partition") {
                let mut w = open.remove(i);
                w.end = t;
                done.push(w);
            }
            let who = v_str(&value, "isolated");
            open.push(FaultWindow {
                class: "partition".into(),
                label: format!("leader-churn: isolate {who}"),
                start: t,
                end,
                error: value.get("error").is_some(),
            });
        } else if let Some(class) = class_of_stop(f) {
            if let Some(i) = open.iter().position(|w| w.class == class) {
                let mut w = open.remove(i);
                w.end = t;
                done.push(w);
            }
        } else if let Some(class) = class_of_start(f) {
            // A class never stacks on itself: a second start closes an unstopped first
            // (one whose start failed records no stop).
            if let Some(i) = open.iter().position(|w| w.class == class) {
                let mut w = open.remove(i);
                w.end = t;
                done.push(w);
            }
            open.push(FaultWindow {
                class: class.to_string(),
                label: fault_label(class, &value),
                start: t,
                end,
                error: value.get("error").is_some(),
            });
        }
    }
    done.extend(open);
    done.sort_by_key(|w| (w.start, w.end));
    done
}

/// `v[field]` as text (`v` itself when `field` is empty), strings without quotes.
fn v_str(v: &Value, field: &str) -> String {
    let x = if field.is_empty() {
        Some(v)
    } else {
        v.get(field)
    };
    x.map(|x| {
        x.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| x.to_string())
    })
    .unwrap_or_default()
}

/// The fault classes present, in first-seen order.
pub fn classes(windows: &[FaultWindow]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in windows {
        if !out.contains(&w.class) {
            out.push(w.class.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use splitbrain_checkers::{Op, OpType};

    fn nem(f: &str, v: Value, t: u64) -> Op {
        Op::new(Process::Nemesis, OpType::Info, f, v).at(t)
    }

    #[test]
    fn starts_and_stops_pair_per_class_and_heal_closes_the_rest() {
        let ops = vec![
            nem(
                "start-partition",
                json!({"shape": "halves", "halves": [["n1","n2"],["n3","n4","n5"]]}),
                10,
            ),
            nem("kill", json!({"nodes": ["n3"], "target": "leader"}), 20),
            nem("stop-partition", json!({}), 30),
            nem("restart", json!({"nodes": ["n3"]}), 40),
            nem(
                "start-clock",
                json!({"nodes": ["n2"], "mode": "bump", "offset_ms": 5000}),
                50,
            ),
            nem("heal", json!({"healed": true}), 60),
            nem(
                "start-partition",
                json!({"shape": "isolate-leader", "isolate-leader": [["n1"], ["n2", "n3"]]}),
                70,
            ),
            nem(
                "start-partition",
                json!({"shape": "one-way", "blocked": [["n1", "n2"]]}),
                80,
            ),
        ];
        let w = fault_windows(&History::new(ops).unwrap());
        let got: Vec<(&str, &str, u64, u64)> = w
            .iter()
            .map(|w| (w.class.as_str(), w.label.as_str(), w.start, w.end))
            .collect();
        assert_eq!(
            got,
            vec![
                ("partition", "halves: n1 n2 | n3 n4 n5", 10, 30),
                ("kill", "kill n3 (leader)", 20, 40),
                ("clock", "clock bump 5000 ms n2", 50, 60),
                ("partition", "isolate-leader: n1 | n2 n3", 70, 80),
                ("partition", "one-way: n1→n2 cut", 80, 80),
            ]
        );
    }

    #[test]
    fn each_class_has_its_own_colour() {
        let cs = [
            "partition",
            "kill",
            "pause",
            "clock",
            "slow",
            "loss",
            "strobe-pause",
            "slow-client",
        ];
        let mut colours: Vec<_> = cs.iter().map(|c| class_colour(c)).collect();
        colours.sort();
        colours.dedup();
        assert_eq!(colours.len(), cs.len());
    }
}
