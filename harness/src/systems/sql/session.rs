//! The connection a SQL target's client holds ([`SqlSession`]): begin a transaction at the
//! run's isolation level, run a [`Stmt`], commit, roll back, each recorded in the
//! transaction's [`TxnTrace`]; and how a server's error is judged ([`SqlError`]). The
//! steps of every workload are performed against it once, here ([`perform`]), whatever
//! the database.

use super::statement_log::TxnTrace;
use super::steps::{Answer, AppendMode, Cell, Step, Stmt, Table};
use crate::systems::BoxFuture;
use serde_json::{json, Value};
use std::time::Duration;

/// What a failed statement says about the transaction it was part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The server refused and rolled the transaction back (a serialization or
    /// certification failure, a deadlock, a node not ready to serve): even at COMMIT, it
    /// certainly did not apply.
    Refused,
    /// The server answered with another error: the connection is in step, the
    /// transaction may still be open, and at COMMIT its fate is not known.
    Rejected,
    /// No answer came (the connection broke or timed out): nothing is known, and the
    /// connection is not to be used again.
    Lost,
}

/// A failed statement: its kind and the server's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    /// How the failure bears on the transaction.
    pub kind: ErrorKind,
    /// The message, with the server's code first when it gave one.
    pub message: String,
}

impl SqlError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> SqlError {
        SqlError {
            kind,
            message: message.into(),
        }
    }
}

/// One open connection to a SQL server, at the isolation level its client was made with.
/// Every statement it sends for a transaction is recorded in that transaction's trace
/// (a no-op when the run keeps no statement log).
pub trait SqlSession: Send {
    /// Starts a transaction at the session's isolation level.
    fn begin<'a>(&'a mut self, trace: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>>;
    /// Runs one statement of the open transaction.
    fn run<'a>(
        &'a mut self,
        stmt: &'a Stmt,
        trace: &'a mut TxnTrace,
    ) -> BoxFuture<'a, Result<Answer, SqlError>>;
    /// Asked after the last step, before COMMIT is sent: an error here still fails the
    /// transaction definitely. Nothing by default.
    fn before_commit<'a>(
        &'a mut self,
        _trace: &'a mut TxnTrace,
    ) -> BoxFuture<'a, Result<(), SqlError>> {
        Box::pin(async { Ok(()) })
    }
    /// Commits the open transaction.
    fn commit<'a>(&'a mut self, trace: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>>;
    /// Rolls the open transaction back.
    fn rollback(&mut self) -> BoxFuture<'_, Result<(), SqlError>>;
}

/// How a client reaches one server: what the history calls it, and how a session is
/// opened there.
pub trait SqlServer: Send + Sync {
    /// The session type.
    type Session: SqlSession + 'static;
    /// Its node name in the history (`n1`).
    fn node(&self) -> &str;
    /// Opens a session within `bound` (the error says why not).
    fn connect(&self, bound: Duration) -> BoxFuture<'_, Result<Self::Session, String>>;
}

/// Runs one step in the open transaction. The outer error is the server's; the inner one
/// the transaction's own refusal (a transfer that would overdraw, a cas whose register
/// held another value), which the caller rolls back as a definite failure.
pub async fn perform<S: SqlSession + ?Sized>(
    session: &mut S,
    (table, append): (Table, AppendMode),
    step: &Step,
    trace: &mut TxnTrace,
) -> Result<Result<Value, String>, SqlError> {
    Ok(Ok(match step {
        Step::Read { k, .. } => {
            let answer = session.run(&Stmt::Read { table, k: *k }, trace).await?;
            answer
                .rows
                .first()
                .and_then(|r| r.first())
                .map_or(Value::Null, Cell::to_json)
        }
        Step::Append { k, v, .. } => {
            let (k, v) = (*k, *v);
            let table = Table::Lists;
            let updated = match append {
                AppendMode::UpdateThenInsert => {
                    session
                        .run(&Stmt::Update { table, k, v }, trace)
                        .await?
                        .affected
                }
                AppendMode::Upsert => 0,
            };
            if updated == 0 {
                session.run(&Stmt::Upsert { table, k, v }, trace).await?;
            }
            json!(v)
        }
        Step::Write { k, v, .. } => {
            let (k, v) = (*k, *v);
            session.run(&Stmt::Upsert { table, k, v }, trace).await?;
            json!(v)
        }
        Step::Cas { k, old, new } => {
            let (k, old, new) = (*k, *old, *new);
            if session
                .run(&Stmt::Cas { k, old, new }, trace)
                .await?
                .affected
                != 1
            {
                return Ok(Err(format!("cas: register {k} did not hold {old}")));
            }
            Value::Null
        }
        Step::Transfer { from, to, amount } => {
            let (Some(from_balance), Some(to_balance)) = (
                balance(session, *from, trace).await?,
                balance(session, *to, trace).await?,
            ) else {
                return Ok(Err("no such account".into()));
            };
            if from_balance < *amount {
                return Ok(Err("insufficient funds".into()));
            }
            // Lower key first, so two transfers meet in one order more often than not.
            let mut writes = [(*from, from_balance - amount), (*to, to_balance + amount)];
            writes.sort_unstable();
            let table = Table::Accounts;
            for (k, v) in writes {
                session.run(&Stmt::Update { table, k, v }, trace).await?;
            }
            Value::Null
        }
        Step::ReadAll => {
            let mut balances = serde_json::Map::new();
            for row in session.run(&Stmt::ReadAll, trace).await?.rows {
                if let [Cell::Int(k), Cell::Int(b)] = row.as_slice() {
                    balances.insert(k.to_string(), json!(b));
                }
            }
            Value::Object(balances)
        }
    }))
}

/// Account `k`'s balance, if it has one.
async fn balance<S: SqlSession + ?Sized>(
    session: &mut S,
    k: i64,
    trace: &mut TxnTrace,
) -> Result<Option<i64>, SqlError> {
    let table = Table::Accounts;
    let answer = session.run(&Stmt::Read { table, k }, trace).await?;
    Ok(match answer.rows.first().and_then(|r| r.first()) {
        Some(Cell::Int(b)) => Some(*b),
        _ => None,
    })
}

/// What a statement's answer is recorded as: the rows a read returned (each row's first
/// cell: the list or the number), the rows an update or upsert affected, the number of
/// rows a whole-table read returned, or the error.
pub fn answer_result(stmt: &Stmt, answer: &Result<Answer, SqlError>) -> Value {
    match (stmt, answer) {
        (_, Err(e)) => error_result(e),
        (Stmt::Read { .. }, Ok(a)) => json!({
            "rows": a.rows.iter().map(|r| r.first().map_or(Value::Null, Cell::to_json)).collect::<Vec<_>>()
        }),
        (Stmt::ReadAll, Ok(a)) => json!({ "rows_returned": a.rows.len() }),
        (Stmt::Update { .. } | Stmt::Upsert { .. } | Stmt::Cas { .. }, Ok(a)) => {
            json!({ "rows_affected": a.affected })
        }
    }
}

/// What a statement without rows (BEGIN, COMMIT) is recorded as.
pub fn simple_result(r: &Result<(), SqlError>) -> Value {
    match r {
        Ok(()) => json!("ok"),
        Err(e) => error_result(e),
    }
}

/// What an error is recorded as: the server's code and message.
pub fn error_result(e: &SqlError) -> Value {
    json!({ "error": e.message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A session over maps, to hold the steps' logic to what each statement does.
    #[derive(Default)]
    struct MapSession {
        ints: BTreeMap<i64, i64>,
        lists: BTreeMap<i64, Vec<i64>>,
        ran: Vec<Stmt>,
    }

    impl SqlSession for MapSession {
        fn begin<'a>(&'a mut self, _: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>> {
            Box::pin(async { Ok(()) })
        }
        fn run<'a>(
            &'a mut self,
            stmt: &'a Stmt,
            _: &'a mut TxnTrace,
        ) -> BoxFuture<'a, Result<Answer, SqlError>> {
            self.ran.push(*stmt);
            let mut answer = Answer::default();
            match *stmt {
                Stmt::Read {
                    table: Table::Lists,
                    k,
                } => {
                    answer.rows = self
                        .lists
                        .get(&k)
                        .map(|l| vec![Cell::List(l.clone())])
                        .into_iter()
                        .collect();
                }
                Stmt::Read { k, .. } => {
                    answer.rows = self
                        .ints
                        .get(&k)
                        .map(|v| vec![Cell::Int(*v)])
                        .into_iter()
                        .collect();
                }
                Stmt::Update {
                    table: Table::Lists,
                    k,
                    v,
                } => {
                    if let Some(l) = self.lists.get_mut(&k) {
                        l.push(v);
                        answer.affected = 1;
                    }
                }
                Stmt::Upsert {
                    table: Table::Lists,
                    k,
                    v,
                } => {
                    self.lists.entry(k).or_default().push(v);
                    answer.affected = 1;
                }
                Stmt::Update { k, v, .. } => {
                    if let Some(x) = self.ints.get_mut(&k) {
                        *x = v;
                        answer.affected = 1;
                    }
                }
                Stmt::Upsert { k, v, .. } => {
                    self.ints.insert(k, v);
                    answer.affected = 1;
                }
                Stmt::Cas { k, old, new } => {
                    if self.ints.get(&k) == Some(&old) {
                        self.ints.insert(k, new);
                        answer.affected = 1;
                    }
                }
                Stmt::ReadAll => {
                    answer.rows = self
                        .ints
                        .iter()
                        .map(|(k, v)| vec![Cell::Int(*k), Cell::Int(*v)])
                        .collect();
                }
            }
            Box::pin(async move { Ok(answer) })
        }
        fn commit<'a>(&'a mut self, _: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>> {
            Box::pin(async { Ok(()) })
        }
        fn rollback(&mut self) -> BoxFuture<'_, Result<(), SqlError>> {
            Box::pin(async { Ok(()) })
        }
    }

    fn block<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn an_append_inserts_the_row_it_does_not_find() {
        let mut s = MapSession::default();
        let append = |v| Step::Append {
            key: json!(1),
            k: 1,
            v,
        };
        block(async {
            assert_eq!(
                perform(
                    &mut s,
                    (Table::Lists, AppendMode::default()),
                    &append(5),
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Ok(json!(5)))
            );
            assert_eq!(
                perform(
                    &mut s,
                    (Table::Lists, AppendMode::default()),
                    &append(6),
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Ok(json!(6)))
            );
            let read = Step::Read {
                key: json!(1),
                k: 1,
            };
            assert_eq!(
                perform(
                    &mut s,
                    (Table::Lists, AppendMode::default()),
                    &read,
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Ok(json!([5, 6])))
            );
        });
        // The first append found no row, the second did.
        assert_eq!(s.ran.len(), 4);
        assert!(matches!(s.ran[1], Stmt::Upsert { .. }));
        assert!(matches!(s.ran[2], Stmt::Update { .. }));
        // Appending by upsert alone sends no UPDATE.
        s.ran.clear();
        let mode = (Table::Lists, AppendMode::Upsert);
        let mut trace = TxnTrace::new(None, 0, 0, &Value::Null);
        block(perform(&mut s, mode, &append(7), &mut trace))
            .unwrap()
            .unwrap();
        assert!(matches!(s.ran[..], [Stmt::Upsert { v: 7, .. }]));
        assert_eq!(s.lists[&1], [5, 6, 7]);
    }

    #[test]
    fn a_cas_or_a_transfer_that_cannot_apply_is_the_transactions_own_refusal() {
        let mut s = MapSession::default();
        s.ints.extend([(0, 10), (1, 3)]);
        block(async {
            let cas = |old| Step::Cas { k: 1, old, new: 4 };
            assert!(matches!(
                perform(
                    &mut s,
                    (Table::Registers, AppendMode::default()),
                    &cas(2),
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Err(_))
            ));
            assert_eq!(
                perform(
                    &mut s,
                    (Table::Registers, AppendMode::default()),
                    &cas(3),
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Ok(Value::Null))
            );
            let transfer = |amount| Step::Transfer {
                from: 0,
                to: 1,
                amount,
            };
            assert!(matches!(
                perform(
                    &mut s,
                    (Table::Accounts, AppendMode::default()),
                    &transfer(11),
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Err(_))
            ));
            assert_eq!(
                perform(
                    &mut s,
                    (Table::Accounts, AppendMode::default()),
                    &transfer(6),
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Ok(Value::Null))
            );
            assert_eq!(
                perform(
                    &mut s,
                    (Table::Accounts, AppendMode::default()),
                    &Step::ReadAll,
                    &mut TxnTrace::new(None, 0, 0, &Value::Null)
                )
                .await,
                Ok(Ok(json!({"0": 4, "1": 10})))
            );
        });
    }
}
