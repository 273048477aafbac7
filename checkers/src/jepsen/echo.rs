//! Maelstrom's `echo` check: every ok `echo` op came back with exactly the payload it sent.
//! A node that answers with another request's payload, or mangles it, is caught here.

use super::{plural, MAX_LISTED};
use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Value};

/// Checks echo histories; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoChecker;

impl Checker for EchoChecker {
    fn name(&self) -> String {
        "echo".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let (mut attempted, mut acknowledged) = (0usize, 0usize);
        let mut wrong: Vec<Value> = Vec::new();
        let mut wrong_count = 0usize;
        for p in history.pairs().iter().filter(|p| p.f == "echo") {
            attempted += 1;
            if p.outcome != Outcome::Ok {
                continue;
            }
            acknowledged += 1;
            if p.value != p.invoke_value {
                wrong_count += 1;
                if wrong.len() < MAX_LISTED {
                    let index = history.op_index(p.complete_pos.unwrap_or(p.invoke_pos));
                    wrong
                        .push(json!({"index": index, "sent": p.invoke_value, "received": p.value}));
                }
            }
        }
        let details = json!({
            "attempted_count": attempted,
            "acknowledged_count": acknowledged,
            "mismatched_count": wrong_count,
        });
        let mut r = match wrong.first() {
            Some(first) => {
                let mut r = CheckResult::new(
                    "echo",
                    Validity::Invalid,
                    format!(
                        "{} came back with a payload other than the one sent; the first (op {}) sent {} and received {}",
                        plural(wrong_count, "echo"),
                        first["index"],
                        first["sent"],
                        first["received"]
                    ),
                );
                r.anomaly_types = vec!["wrong-echo".into()];
                r.evidence = wrong;
                r
            }
            None => CheckResult::new(
                "echo",
                Validity::Valid,
                format!("{acknowledged} acknowledged echoes of {attempted} attempted, each returned its own payload"),
            ),
        };
        r.details = details;
        r.with_coverage(Coverage::of([
            ("attempted", attempted as u64),
            ("echoes", acknowledged as u64),
        ]))
        .unless_unobserved(acknowledged as u64, "no acknowledged echo")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    fn echo(process: u64, sent: &str, got: Option<&str>) -> Vec<Op> {
        let inv = Op::new(
            Process::Client(process),
            OpType::Invoke,
            "echo",
            json!(sent),
        );
        let done = match got {
            Some(g) => Op::new(Process::Client(process), OpType::Ok, "echo", json!(g)),
            None => Op::new(Process::Client(process), OpType::Info, "echo", json!(sent)),
        };
        vec![inv, done]
    }

    #[test]
    fn own_payloads_are_valid_and_timeouts_do_not_count() {
        let mut ops = echo(0, "a", Some("a"));
        ops.extend(echo(1, "b", None));
        let r = EchoChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Valid, "{}", r.explanation);
        assert_eq!(r.details["acknowledged_count"], 1);
    }

    #[test]
    fn no_acknowledged_echo_is_unknown() {
        let mut ops = echo(0, "a", None);
        ops.extend(echo(1, "b", None));
        let r = EchoChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        assert!(
            r.explanation.contains("no acknowledged echo"),
            "{}",
            r.explanation
        );
        assert_eq!(r.coverage.get("echoes"), Some(0));
    }

    #[test]
    fn a_crossed_reply_is_invalid_and_named() {
        let mut ops = echo(0, "a", Some("a"));
        ops.extend(echo(1, "b", Some("a")));
        let r = EchoChecker.check(&History::new(ops).unwrap());
        assert_eq!(r.valid, Validity::Invalid);
        assert_eq!(r.anomaly_types, vec!["wrong-echo".to_string()]);
        assert_eq!(r.evidence[0]["sent"], "b");
        assert_eq!(r.evidence[0]["received"], "a");
    }
}
