//! Bank checker: transfers between accounts must conserve money.
//!
//! Ops: `transfer` with value `{"from": a, "to": b, "amount": n}` and `read` whose ok
//! value is a map `{account: balance}` of every account. Every ok read must sum to the
//! total (given, or taken from the first ok read), no balance may be nil, and, unless
//! allowed, none may be negative. Anomalies are named as Jepsen's bank checker names
//! them: `wrong-total`, `negative-value`, `nil-balance`.
//!
//! ```
//! use splitbrain_checkers::bank::{BankChecker, BankOptions};
//! use splitbrain_checkers::Checker;
//! let checker = BankChecker::new(BankOptions { total: Some(100), negative_allowed: false });
//! assert_eq!(checker.name(), "bank");
//! ```

use crate::history::{History, Outcome};
use crate::verdict::{CheckResult, Checker, Coverage, Validity};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// How many offending reads are kept per anomaly type (all are counted).
const MAX_CASES: usize = 8;

/// Options for [`BankChecker`].
#[derive(Debug, Clone, Default)]
pub struct BankOptions {
    /// The total every read must sum to; `None` takes the first ok read's sum.
    pub total: Option<i64>,
    /// Whether balances may go negative.
    pub negative_allowed: bool,
}

/// Checks bank-workload histories; see the module docs.
#[derive(Debug, Clone)]
pub struct BankChecker {
    options: BankOptions,
}

impl BankChecker {
    /// A bank checker with the given options.
    pub fn new(options: BankOptions) -> Self {
        BankChecker { options }
    }
}

/// Balances of one read: (account, balance or None for nil / non-integer).
fn balances(v: &Value) -> Option<Vec<(String, Option<i64>)>> {
    match v {
        Value::Object(m) => Some(m.iter().map(|(k, b)| (k.clone(), b.as_i64())).collect()),
        // EDN maps may arrive as a list of [account, balance] pairs.
        Value::Array(items) => items
            .iter()
            .map(|p| match p.as_array().map(Vec::as_slice) {
                Some([k, b]) => Some((crate::history::value_key_string(k), b.as_i64())),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// The sum of a read's balances when it has every balance: the reads the total is taken
/// from when none is given.
pub fn read_sum(value: &Value) -> Option<i64> {
    balances(value)?
        .iter()
        .try_fold(0i64, |a, (_, b)| b.map(|b| a.saturating_add(b)))
}

impl Checker for BankChecker {
    fn name(&self) -> String {
        "bank".into()
    }

    fn check(&self, history: &History) -> CheckResult {
        let mut total = self.options.total;
        let mut reads = 0usize;
        let mut transfers = 0usize;
        let mut malformed = 0usize;
        let mut found: BTreeMap<&'static str, (usize, Vec<Value>, Vec<Value>)> = BTreeMap::new();
        let mut add = |name: &'static str, case: Value, op: Value| {
            let e = found.entry(name).or_insert((0, Vec::new(), Vec::new()));
            e.0 += 1;
            if e.1.len() < MAX_CASES {
                e.1.push(case);
                e.2.push(op);
            }
        };
        for p in history.pairs() {
            if p.outcome != Outcome::Ok {
                continue;
            }
            match p.f.as_str() {
                "transfer" => transfers += 1,
                "read" => {
                    let Some(bs) = balances(&p.value) else {
                        malformed += 1;
                        continue;
                    };
                    reads += 1;
                    let op = p
                        .complete_pos
                        .and_then(|i| history.ops().get(i))
                        .and_then(|o| serde_json::to_value(o).ok())
                        .unwrap_or(Value::Null);
                    let index = history.op_index(p.complete_pos.unwrap_or(p.invoke_pos));
                    let nils: Vec<&String> = bs
                        .iter()
                        .filter(|(_, b)| b.is_none())
                        .map(|(k, _)| k)
                        .collect();
                    if !nils.is_empty() {
                        add(
                            "nil-balance",
                            json!({"index": index, "accounts": nils, "value": p.value}),
                            op.clone(),
                        );
                        continue;
                    }
                    let sum: i64 = bs
                        .iter()
                        .filter_map(|(_, b)| *b)
                        .fold(0i64, |a, b| a.saturating_add(b));
                    let expected = *total.get_or_insert(sum);
                    if sum != expected {
                        add(
                            "wrong-total",
                            json!({"index": index, "total": sum, "expected": expected, "value": p.value}),
                            op.clone(),
                        );
                    }
                    if !self.options.negative_allowed {
                        let neg: Vec<&String> = bs
                            .iter()
                            .filter(|(_, b)| b.is_some_and(|b| b < 0))
                            .map(|(k, _)| k)
                            .collect();
                        if !neg.is_empty() {
                            add(
                                "negative-value",
                                json!({"index": index, "accounts": neg, "value": p.value}),
                                op,
                            );
                        }
                    }
                }
                _ => {}
            }
        }
        let mut details = json!({"reads": reads, "transfers": transfers, "total": total, "malformed-reads": malformed});
        let coverage = Coverage::of([
            ("transfers", transfers as u64),
            ("reads", reads as u64),
            ("malformed reads", malformed as u64),
        ]);
        if found.is_empty() {
            if reads == 0 {
                let mut r = CheckResult::new(
                    self.name(),
                    Validity::Unknown,
                    "no ok read of the balances, so nothing could be checked",
                );
                r.details = details;
                return r.with_coverage(coverage);
            }
            // A read that is not a map of balances saw something the checker cannot
            // judge: reported, never skipped silently under a valid verdict.
            if malformed > 0 {
                let mut r = CheckResult::new(
                    self.name(),
                    Validity::Unknown,
                    format!(
                        "{malformed} ok reads are not a map of account balances, so what they saw is unknown; the other {reads} summed correctly"
                    ),
                );
                r.details = details;
                return r.with_coverage(coverage);
            }
            let mut r = CheckResult::new(
                self.name(),
                Validity::Valid,
                format!(
                    "all {reads} reads summed to {} with no forbidden balance",
                    total.unwrap_or(0)
                ),
            );
            r.details = details;
            return r.with_coverage(coverage);
        }
        let mut explanation = Vec::new();
        let mut evidence = Vec::new();
        let mut errors = serde_json::Map::new();
        for (name, (count, cases, ops)) in &found {
            let first = &cases[0];
            explanation.push(match *name {
                "wrong-total" => format!(
                    "{count} of {reads} reads did not sum to {}; the first, at index {}, summed to {}",
                    first["expected"], first["index"], first["total"]
                ),
                "negative-value" => format!(
                    "{count} reads saw a negative balance; the first, at index {}, in accounts {}",
                    first["index"], first["accounts"]
                ),
                _ => format!("{count} reads saw a nil balance; the first at index {}", first["index"]),
            });
            evidence.extend(ops.iter().take(4).cloned());
            errors.insert(
                (*name).to_string(),
                json!({"count": count, "instances": cases}),
            );
        }
        details["errors"] = Value::Object(errors);
        CheckResult {
            checker: self.name(),
            valid: Validity::Invalid,
            explanation: explanation.join("; "),
            evidence,
            anomaly_types: found.keys().map(|k| (*k).to_string()).collect(),
            not: Vec::new(),
            also_not: Vec::new(),
            details,
            coverage,
        }
    }
}
