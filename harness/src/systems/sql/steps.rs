//! What a workload op asks of a SQL database, independent of its dialect: the table a
//! workload uses, the steps an op stands for, the statements a step runs (named by what
//! they do; each database writes its own SQL for them) and what an `ok` op records.
//!
//! `list-append`: a list per key (a read, an append); `append` the same one key at a time. `rw-register` and `register`: an
//! integer per key (a read, a write by upsert; `register`'s `cas` an `UPDATE ... WHERE v =
//! old` that must match one row). `bank`: a balance per account; a transfer reads both
//! balances and writes the new ones (read, then write, as an application would: what each
//! isolation level makes of that is the test) and refuses to take a balance below zero; a
//! read is one SELECT of every account.

use crate::systems::Invocation;
use serde_json::{json, Value};

/// The table a workload's ops touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `list-append`: `lists (k, v)`, v a list of integers.
    Lists,
    /// `rw-register` and `register`: `registers (k, v)`, v an integer or NULL.
    Registers,
    /// `bank`: `accounts (k, balance)`.
    Accounts,
}

impl Table {
    /// The table of `--workload`.
    pub fn for_workload(workload: &str) -> Table {
        match workload {
            "rw-register" | "register" => Table::Registers,
            "bank" => Table::Accounts,
            _ => Table::Lists,
        }
    }

    /// Its name in SQL.
    pub fn name(self) -> &'static str {
        match self {
            Table::Lists => "lists",
            Table::Registers => "registers",
            Table::Accounts => "accounts",
        }
    }
}

/// How list-append appends: `UPDATE` first and, when it matched no row, the upsert (the
/// default), or only the upsert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendMode {
    /// `UPDATE`, then the upsert when no row matched.
    #[default]
    UpdateThenInsert,
    /// The upsert alone.
    Upsert,
}

impl AppendMode {
    /// The mode named by `--setting splitbrain.append=NAME`.
    pub fn parse(name: &str) -> Result<AppendMode, String> {
        match name {
            "update-insert" => Ok(AppendMode::UpdateThenInsert),
            "upsert" => Ok(AppendMode::Upsert),
            other => Err(format!(
                "splitbrain.append={other}: expected update-insert or upsert"
            )),
        }
    }
}

/// One statement a step runs, with its arguments (`k` the key, `v` the value, `table`
/// the workload's table). A database turns each into its own SQL.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stmt {
    /// The value of key `k` (no row: nothing).
    Read { table: Table, k: i64 },
    /// Lists: append `v` to key `k`'s list; registers and accounts: set key `k` to `v`.
    /// Only an existing row: the affected-row count says whether there was one.
    Update { table: Table, k: i64, v: i64 },
    /// As [`Stmt::Update`], inserting the row (a one-element list) when there is none.
    Upsert { table: Table, k: i64, v: i64 },
    /// Set register `k` to `new` where it holds `old` (one row affected, or none).
    Cas { k: i64, old: i64, new: i64 },
    /// Every account's balance, by key.
    ReadAll,
}

/// A value in a result row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A list of integers (a list-append value).
    List(Vec<i64>),
}

impl Cell {
    /// As JSON, the way the history records it.
    pub fn to_json(&self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Int(i) => json!(i),
            Cell::List(l) => json!(l),
        }
    }
}

/// What a statement returned: the rows it changed and the rows it read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// Rows matched by an UPDATE (found, not only changed), inserted or updated by an upsert.
    pub affected: u64,
    /// The rows a query returned, each a list of cells.
    pub rows: Vec<Vec<Cell>>,
}

/// One step of a transaction (`key` as the history names it, `k` its number).
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Read key `k` (recorded under its JSON `key`).
    Read { key: Value, k: i64 },
    /// Append `v` to key `k`'s list.
    Append { key: Value, k: i64, v: i64 },
    /// Write `v` to key `k`.
    Write { key: Value, k: i64, v: i64 },
    /// Set key `k` to `new` if it holds `old`.
    Cas { k: i64, old: i64, new: i64 },
    /// Move `amount` from account `from` to account `to`.
    Transfer { from: i64, to: i64, amount: i64 },
    /// Read every account's balance.
    ReadAll,
}

/// The integer of a key: an integer, or a string `k<n>` (the `register` workload's keys).
fn key_number(key: &Value) -> Option<i64> {
    key.as_i64()
        .or_else(|| key.as_str()?.strip_prefix('k')?.parse().ok())
}

/// The steps a workload op stands for, or why it has none.
pub fn steps(op: &Invocation, table: Table) -> Result<Vec<Step>, String> {
    let register_key = || {
        op.key
            .as_ref()
            .and_then(key_number)
            .ok_or_else(|| format!("{} needs a key k<n> or an integer: {:?}", op.f, op.key))
    };
    match (op.f.as_str(), table) {
        ("txn", _) => op
            .value
            .as_array()
            .ok_or_else(|| format!("a txn is a list of micro-ops: {}", op.value))?
            .iter()
            .map(|m| micro_op(m, table))
            .collect(),
        ("transfer", Table::Accounts) => {
            let field = |name: &str| {
                op.value[name]
                    .as_i64()
                    .ok_or_else(|| format!("transfer needs from, to and amount: {}", op.value))
            };
            Ok(vec![Step::Transfer {
                from: field("from")?,
                to: field("to")?,
                amount: field("amount")?,
            }])
        }
        ("read", Table::Accounts) => Ok(vec![Step::ReadAll]),
        ("read", Table::Registers | Table::Lists) => Ok(vec![Step::Read {
            key: op.key.clone().unwrap_or(Value::Null),
            k: register_key()?,
        }]),
        ("append", Table::Lists) => Ok(vec![Step::Append {
            key: op.key.clone().unwrap_or(Value::Null),
            k: register_key()?,
            v: op
                .value
                .as_i64()
                .ok_or_else(|| format!("append needs an integer: {}", op.value))?,
        }]),
        ("write", Table::Registers) => Ok(vec![Step::Write {
            key: op.key.clone().unwrap_or(Value::Null),
            k: register_key()?,
            v: op
                .value
                .as_i64()
                .ok_or_else(|| format!("write needs an integer: {}", op.value))?,
        }]),
        ("cas", Table::Registers) => {
            let part = |i: usize| {
                op.value[i]
                    .as_i64()
                    .ok_or_else(|| format!("cas needs [old, new] integers: {}", op.value))
            };
            Ok(vec![Step::Cas {
                k: register_key()?,
                old: part(0)?,
                new: part(1)?,
            }])
        }
        (other, _) => Err(format!(
            "a SQL target cannot perform {other:?} on table {}",
            table.name()
        )),
    }
}

fn micro_op(m: &Value, table: Table) -> Result<Step, String> {
    let bad = || format!("a micro-op is [f, integer key, value]: {m}");
    let (f, key) = (m.get(0).and_then(Value::as_str), m.get(1).cloned());
    let (Some(f), Some(key)) = (f, key) else {
        return Err(bad());
    };
    let k = key.as_i64().ok_or_else(bad)?;
    let v = || m.get(2).and_then(Value::as_i64).ok_or_else(bad);
    match (f, table) {
        ("r", _) => Ok(Step::Read { key, k }),
        ("append", Table::Lists) => Ok(Step::Append { key, k, v: v()? }),
        ("w", Table::Registers | Table::Accounts) => Ok(Step::Write { key, k, v: v()? }),
        _ => Err(format!("micro-op {f:?} does not apply to {}", table.name())),
    }
}

/// True when every step only reads: such a transaction may go to a read replica.
pub fn only_reads(steps: &[Step]) -> bool {
    steps
        .iter()
        .all(|s| matches!(s, Step::Read { .. } | Step::ReadAll))
}

/// What an `ok` op records: the completed micro-ops of a txn, the value a register read
/// or the balances a bank read returned, the argument of anything else.
pub fn recorded_value(op: &Invocation, steps: &[Step], results: Vec<Value>) -> Value {
    match op.f.as_str() {
        "txn" => Value::Array(
            steps
                .iter()
                .zip(results)
                .map(|(step, result)| match step {
                    Step::Read { key, .. } => json!(["r", key, result]),
                    Step::Append { key, .. } => json!(["append", key, result]),
                    Step::Write { key, .. } => json!(["w", key, result]),
                    other => json!([format!("{other:?}"), null, result]),
                })
                .collect(),
        ),
        "read" => results.into_iter().next().unwrap_or(Value::Null),
        _ => op.value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(f: &str, key: Option<Value>, value: Value) -> Invocation {
        Invocation {
            f: f.into(),
            key,
            value,
        }
    }

    #[test]
    fn micro_ops_become_steps_of_their_table() {
        let op = inv("txn", None, json!([["r", 3, null], ["append", 3, 7]]));
        let s = steps(&op, Table::Lists).unwrap();
        assert_eq!(
            s,
            vec![
                Step::Read {
                    key: json!(3),
                    k: 3
                },
                Step::Append {
                    key: json!(3),
                    k: 3,
                    v: 7
                }
            ]
        );
        assert_eq!(
            recorded_value(&op, &s, vec![json!([1, 2]), json!(7)]),
            json!([["r", 3, [1, 2]], ["append", 3, 7]])
        );
        assert!(
            steps(&op, Table::Registers).is_err(),
            "no appends to registers"
        );
        let w = inv("txn", None, json!([["w", 1, 5]]));
        assert_eq!(steps(&w, Table::Accounts).unwrap().len(), 1);
        assert!(steps(&inv("txn", None, json!([["r", "x", null]])), Table::Lists).is_err());
    }

    #[test]
    fn bank_ops_are_transfers_and_whole_reads() {
        let t = inv("transfer", None, json!({"from": 1, "to": 0, "amount": 4}));
        assert_eq!(
            steps(&t, Table::Accounts).unwrap(),
            vec![Step::Transfer {
                from: 1,
                to: 0,
                amount: 4
            }]
        );
        assert!(steps(&inv("transfer", None, json!({"from": 1})), Table::Accounts).is_err());
        let r = inv("read", None, Value::Null);
        let s = steps(&r, Table::Accounts).unwrap();
        assert_eq!(
            recorded_value(&r, &s, vec![json!({"0": 10})]),
            json!({"0": 10})
        );
        assert!(steps(&r, Table::Lists).is_err());
    }

    #[test]
    fn register_ops_use_the_number_of_their_key() {
        let key = Some(json!("k12"));
        let read = inv("read", key.clone(), Value::Null);
        let s = steps(&read, Table::Registers).unwrap();
        assert_eq!(
            s,
            vec![Step::Read {
                key: json!("k12"),
                k: 12
            }]
        );
        assert_eq!(recorded_value(&read, &s, vec![json!(3)]), json!(3));
        let cas = inv("cas", key.clone(), json!([1, 4]));
        assert_eq!(
            steps(&cas, Table::Registers).unwrap(),
            vec![Step::Cas {
                k: 12,
                old: 1,
                new: 4
            }]
        );
        assert_eq!(recorded_value(&cas, &[], vec![Value::Null]), json!([1, 4]));
        assert!(steps(&inv("cas", key.clone(), json!([1])), Table::Registers).is_err());
        assert!(steps(&inv("write", Some(json!("x")), json!(1)), Table::Registers).is_err());
        assert_eq!(Table::for_workload("register"), Table::Registers);
        assert_eq!(Table::for_workload("bank"), Table::Accounts);
        assert_eq!(Table::for_workload("list-append"), Table::Lists);
        let append = inv("append", Some(json!("k3")), json!(9));
        assert_eq!(
            steps(&append, Table::Lists).unwrap(),
            vec![Step::Append {
                key: json!("k3"),
                k: 3,
                v: 9
            }]
        );
        let read = inv("read", Some(json!("k3")), Value::Null);
        let s = steps(&read, Table::Lists).unwrap();
        assert_eq!(recorded_value(&read, &s, vec![json!([9])]), json!([9]));
    }
}
