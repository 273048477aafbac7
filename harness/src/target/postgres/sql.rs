//! The SQL behind each workload op: the tables, the statements (prepared once per
//! connection) and how a micro-op runs and is recorded.
//!
//! `list-append`: `lists (k bigint primary key, v bigint[])`; an append is `UPDATE lists
//! SET v = v || x`, and when no row exists yet `INSERT ... ON CONFLICT DO UPDATE`.
//! `rw-register`: `registers (k, v bigint)`, writes by upsert. `bank`: `accounts (k,
//! balance)`; a transfer reads both balances and writes the new ones (read, then write,
//! as an application would: what each isolation level makes of that is the test), and
//! refuses to take a balance below zero; a read is one SELECT of every account.

use super::statement_log::{self, TxnTrace};
use serde_json::{json, Value};
use tokio_postgres::{Client, Statement};

/// The tables every run creates (one per workload).
pub const SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS lists (k bigint PRIMARY KEY, v bigint[] NOT NULL);
CREATE TABLE IF NOT EXISTS registers (k bigint PRIMARY KEY, v bigint);
CREATE TABLE IF NOT EXISTS accounts (k bigint PRIMARY KEY, balance bigint NOT NULL);";

/// The names of the tables [`SCHEMA`] creates.
pub const TABLES: [&str; 3] = ["lists", "registers", "accounts"];

/// The table a workload's ops touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// `list-append`.
    Lists,
    /// `rw-register`.
    Registers,
    /// `bank`.
    Accounts,
}

impl Table {
    /// The table of `--workload`.
    pub fn for_workload(workload: &str) -> Table {
        match workload {
            "rw-register" => Table::Registers,
            "bank" => Table::Accounts,
            _ => Table::Lists,
        }
    }
}

/// Statement slots (indices into [`statements`]).
const READ: usize = 0;
const UPDATE: usize = 1;
const UPSERT: usize = 2;
const READ_ALL: usize = 3;

/// The statements prepared on every connection, in slot order.
pub fn statements(table: Table) -> &'static [&'static str] {
    match table {
        Table::Lists => &[
            "SELECT v FROM lists WHERE k = $1",
            "UPDATE lists SET v = v || $2::bigint WHERE k = $1",
            "INSERT INTO lists AS l (k, v) VALUES ($1, ARRAY[$2::bigint]) ON CONFLICT (k) DO UPDATE SET v = l.v || $2::bigint",
        ],
        Table::Registers => &[
            "SELECT v FROM registers WHERE k = $1",
            "UPDATE registers SET v = $2 WHERE k = $1",
            "INSERT INTO registers AS r (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = $2",
        ],
        Table::Accounts => &[
            "SELECT balance FROM accounts WHERE k = $1",
            "UPDATE accounts SET balance = $2 WHERE k = $1",
            "INSERT INTO accounts AS a (k, balance) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET balance = $2",
            "SELECT k, balance FROM accounts ORDER BY k",
        ],
    }
}

/// One step of a transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Read key `k` (recorded under its JSON `key`).
    Read { key: Value, k: i64 },
    /// Append `v` to key `k`'s list.
    Append { key: Value, k: i64, v: i64 },
    /// Write `v` to key `k`.
    Write { key: Value, k: i64, v: i64 },
    /// Move `amount` from account `from` to account `to`.
    Transfer { from: i64, to: i64, amount: i64 },
    /// Read every account's balance.
    ReadAll,
}

/// The steps a workload op stands for, or why it has none.
pub fn steps(op: &crate::target::Invocation, table: Table) -> Result<Vec<Step>, String> {
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
        (other, _) => Err(format!(
            "the postgres target cannot perform {other:?} on {table:?}"
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
        _ => Err(format!("micro-op {f:?} does not apply to {table:?}")),
    }
}

/// True when every step only reads: such a transaction may go to a standby.
pub fn only_reads(steps: &[Step]) -> bool {
    steps
        .iter()
        .all(|s| matches!(s, Step::Read { .. } | Step::ReadAll))
}

/// How list-append appends: `UPDATE` first and, when it matched no row, `INSERT ... ON
/// CONFLICT DO UPDATE` (the default), or only the upsert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AppendMode {
    /// `UPDATE`, then the upsert when no row matched.
    #[default]
    UpdateThenInsert,
    /// `INSERT ... ON CONFLICT (k) DO UPDATE SET v = l.v || x` alone.
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

/// What a statement's rows are recorded as in the statement log.
fn rows_result(rows: &[Value]) -> Value {
    json!({ "rows": rows })
}

/// Runs one step, recording each statement in `trace`. The outer error is the server's;
/// the inner one the transaction's own refusal (a transfer that would overdraw), which
/// the caller rolls back.
pub async fn perform(
    client: &Client,
    statements: &[Statement],
    table: Table,
    step: &Step,
    append: AppendMode,
    trace: &mut TxnTrace,
) -> Result<Result<Value, String>, tokio_postgres::Error> {
    let slot = |i: usize| &statements[i];
    let text = |i: usize| self::statements(table)[i];
    // Runs `$call` (a future giving Result<T, tokio_postgres::Error>) as statement slot
    // `$i` with `$params`, recording it with `$describe` of its answer.
    macro_rules! logged {
        ($i:expr, $params:expr, $call:expr, $describe:expr) => {{
            let sent = trace.now_us();
            let answer = $call.await;
            if trace.on() {
                let result = match &answer {
                    Ok(a) => $describe(a),
                    Err(e) => statement_log::error_result(e),
                };
                trace.statement(sent, text($i), json!($params), result);
            }
            answer?
        }};
    }
    let affected = |n: &u64| json!({ "rows_affected": n });
    Ok(Ok(match step {
        Step::Read { k, .. } => {
            let row = logged!(
                READ,
                [k],
                client.query_opt(slot(READ), &[k]),
                |r: &Option<tokio_postgres::Row>| rows_result(
                    &r.iter().map(row_value).collect::<Vec<_>>()
                )
            );
            match (row, table) {
                (None, _) => Value::Null,
                (Some(r), Table::Lists) => json!(r.try_get::<_, Vec<i64>>(0)?),
                (Some(r), _) => json!(r.try_get::<_, Option<i64>>(0)?),
            }
        }
        Step::Append { k, v, .. } => {
            let updated = match append {
                AppendMode::UpdateThenInsert => {
                    logged!(
                        UPDATE,
                        [k, v],
                        client.execute(slot(UPDATE), &[k, v]),
                        affected
                    )
                }
                AppendMode::Upsert => 0,
            };
            if updated == 0 {
                logged!(
                    UPSERT,
                    [k, v],
                    client.execute(slot(UPSERT), &[k, v]),
                    affected
                );
            }
            json!(v)
        }
        Step::Write { k, v, .. } => {
            logged!(
                UPSERT,
                [k, v],
                client.execute(slot(UPSERT), &[k, v]),
                affected
            );
            json!(v)
        }
        Step::Transfer { from, to, amount } => {
            let mut balances = [None, None];
            for (i, k) in [*from, *to].into_iter().enumerate() {
                let row = logged!(
                    READ,
                    [k],
                    client.query_opt(slot(READ), &[&k]),
                    |r: &Option<tokio_postgres::Row>| rows_result(
                        &r.iter().map(row_value).collect::<Vec<_>>()
                    )
                );
                balances[i] = row.map(|r| r.try_get::<_, i64>(0)).transpose()?;
            }
            let [Some(from_balance), Some(to_balance)] = balances else {
                return Ok(Err("no such account".into()));
            };
            if from_balance < *amount {
                return Ok(Err("insufficient funds".into()));
            }
            // Lower key first, so two transfers meet in one order more often than not.
            let mut writes = [(*from, from_balance - amount), (*to, to_balance + amount)];
            writes.sort_unstable();
            for (k, balance) in writes {
                logged!(
                    UPDATE,
                    [k, balance],
                    client.execute(slot(UPDATE), &[&k, &balance]),
                    affected
                );
            }
            Value::Null
        }
        Step::ReadAll => {
            let rows = logged!(
                READ_ALL,
                Value::Array(Vec::new()),
                client.query(slot(READ_ALL), &[]),
                |rs: &Vec<tokio_postgres::Row>| json!({ "rows_returned": rs.len() })
            );
            let mut balances = serde_json::Map::new();
            for r in rows {
                let (k, balance): (i64, i64) = (r.try_get(0)?, r.try_get(1)?);
                balances.insert(k.to_string(), json!(balance));
            }
            Value::Object(balances)
        }
    }))
}

/// A row of a single-column read as the log records it: the list, the number, or the
/// column as text when it is neither.
fn row_value(r: &tokio_postgres::Row) -> Value {
    if let Ok(list) = r.try_get::<_, Vec<i64>>(0) {
        return json!(list);
    }
    if let Ok(n) = r.try_get::<_, Option<i64>>(0) {
        return json!(n);
    }
    Value::Null
}

/// What an `ok` op records: the completed micro-ops of a txn, the balances of a bank
/// read, the transfer as asked.
pub fn recorded_value(
    op: &crate::target::Invocation,
    steps: &[Step],
    results: Vec<Value>,
) -> Value {
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
    use crate::target::Invocation;

    fn inv(f: &str, value: Value) -> Invocation {
        Invocation {
            f: f.into(),
            key: None,
            value,
        }
    }

    #[test]
    fn micro_ops_become_steps_of_their_table() {
        let op = inv("txn", json!([["r", 3, null], ["append", 3, 7]]));
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
        let w = inv("txn", json!([["w", 1, 5]]));
        assert_eq!(steps(&w, Table::Accounts).unwrap().len(), 1);
        assert!(steps(&inv("txn", json!([["r", "x", null]])), Table::Lists).is_err());
    }

    #[test]
    fn bank_ops_are_transfers_and_whole_reads() {
        let t = inv("transfer", json!({"from": 1, "to": 0, "amount": 4}));
        assert_eq!(
            steps(&t, Table::Accounts).unwrap(),
            vec![Step::Transfer {
                from: 1,
                to: 0,
                amount: 4
            }]
        );
        assert!(steps(&inv("transfer", json!({"from": 1})), Table::Accounts).is_err());
        let r = inv("read", Value::Null);
        let s = steps(&r, Table::Accounts).unwrap();
        assert_eq!(
            recorded_value(&r, &s, vec![json!({"0": 10})]),
            json!({"0": 10})
        );
        assert!(steps(&r, Table::Lists).is_err());
        for table in [Table::Lists, Table::Registers, Table::Accounts] {
            assert!(statements(table).len() > UPSERT);
        }
        assert!(statements(Table::Accounts).len() > READ_ALL);
    }
}
