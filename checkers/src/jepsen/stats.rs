//! Jepsen's `stats` checker: per client `f`, how many ops ended ok, fail and info
//! (pending ones count as info). A test in which some `f` never succeeded proves little
//! about it (a run where no read ever returned checks nothing), so such an `f` makes the
//! result invalid, as in Jepsen.

use super::plural;
use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Counts ops per `f` by outcome; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct StatsChecker;

/// One `f`'s counts.
#[derive(Default)]
struct Counts {
    ok: usize,
    fail: usize,
    info: usize,
}

impl Checker for StatsChecker {
    fn name(&self) -> String {
        "stats".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let mut by_f: BTreeMap<&str, Counts> = BTreeMap::new();
        for s in history.pair_slots() {
            let f = history.op_f(s.invoke_pos).unwrap_or("");
            let c = by_f.entry(f).or_default();
            match s.outcome {
                Outcome::Ok => c.ok += 1,
                Outcome::Fail => c.fail += 1,
                Outcome::Info | Outcome::Pending => c.info += 1,
            }
        }
        let mut total = Counts::default();
        let mut by_f_json = Map::new();
        let mut never: Vec<&str> = Vec::new();
        for (f, c) in &by_f {
            total.ok += c.ok;
            total.fail += c.fail;
            total.info += c.info;
            if c.ok == 0 {
                never.push(f);
            }
            by_f_json.insert((*f).to_string(), counts_json(c, true));
        }
        let mut details = counts_json(&total, !by_f.is_empty());
        details["by_f"] = Value::Object(by_f_json);
        let ops = total.ok + total.fail + total.info;
        let mut r = if by_f.is_empty() {
            CheckResult::new(
                "stats",
                Validity::Unknown,
                "the history has no client operations",
            )
        } else if never.is_empty() {
            CheckResult::new(
                "stats",
                Validity::Valid,
                format!(
                    "{}: {} ok, {} fail, {} info; every f succeeded at least once",
                    plural(ops, "op"),
                    total.ok,
                    total.fail,
                    total.info
                ),
            )
        } else {
            let mut r = CheckResult::new(
                "stats",
                Validity::Invalid,
                format!(
                    "{} never succeeded: {} (of {})",
                    if never.len() == 1 { "an f" } else { "some fs" },
                    never.join(", "),
                    plural(ops, "op")
                ),
            );
            r.anomaly_types = vec!["never-succeeded".into()];
            r
        };
        r.details = details;
        r.with_coverage(Coverage::of([
            ("ops", ops as u64),
            ("ok", total.ok as u64),
            ("fs", by_f.len() as u64),
        ]))
    }
}

fn counts_json(c: &Counts, valid: bool) -> Value {
    json!({
        "valid": valid && c.ok > 0,
        "count": c.ok + c.fail + c.info,
        "ok_count": c.ok,
        "fail_count": c.fail,
        "info_count": c.info,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType, Process};

    #[test]
    fn an_empty_history_is_unknown_and_an_f_that_never_succeeded_is_invalid() {
        let r = StatsChecker.check(&History::new(vec![]).unwrap());
        assert_eq!(r.valid, Validity::Unknown, "{}", r.explanation);
        let h = History::new(vec![
            Op::new(Process::Client(0), OpType::Invoke, "read", Value::Null),
            Op::new(Process::Client(0), OpType::Fail, "read", Value::Null),
        ])
        .unwrap();
        let r = StatsChecker.check(&h);
        assert_eq!(r.valid, Validity::Invalid, "{}", r.explanation);
        assert_eq!(r.coverage.to_string(), "1 ops, 0 ok, 1 fs");
    }
}
