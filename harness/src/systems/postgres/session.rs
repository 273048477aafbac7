//! PostgreSQL sessions (tokio-postgres) for the shared SQL client: the tables, each
//! statement in PostgreSQL's dialect (prepared once per connection), which SQLSTATEs
//! refuse a transaction, and the statement log's questions around COMMIT.
//!
//! `list-append`: `lists (k bigint primary key, v bigint[])`, an append `v || x`;
//! `rw-register` and `register`: `registers (k, v bigint)`; `bank`: `accounts (k,
//! balance)`.
//!
//! With a statement log, before COMMIT the transaction is asked for its transaction id
//! (`pg_current_xact_id_if_assigned()`, none for a transaction that wrote nothing) and its
//! isolation level; that the question is answered shows the transaction was not already
//! aborted (a COMMIT of an aborted transaction is answered `ROLLBACK`, without an error).
//! After an `ok` COMMIT the same connection asks, outside any transaction, for
//! `pg_current_wal_lsn()` (at or after the commit record), `pg_xact_status(xid)` and, with
//! `track_commit_timestamp=on`, the commit timestamp.

use crate::systems::sql::{
    answer_result, error_result, simple_result, Answer, Cell, ErrorKind, SqlError, SqlServer,
    SqlSession, Stmt, Table, TxnTrace,
};
use crate::systems::BoxFuture;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row, Statement};

/// The database superuser `initdb` creates, the one clients log in as (trust auth on
/// loopback only).
pub const SUPERUSER: &str = "splitbrain";

/// The tables every run creates (one per workload).
pub const SCHEMA: &str =
    "CREATE TABLE IF NOT EXISTS lists (k bigint PRIMARY KEY, v bigint[] NOT NULL);
CREATE TABLE IF NOT EXISTS registers (k bigint PRIMARY KEY, v bigint);
CREATE TABLE IF NOT EXISTS accounts (k bigint PRIMARY KEY, balance bigint NOT NULL);";

/// The names of the tables [`SCHEMA`] creates.
pub const TABLES: [&str; 3] = ["lists", "registers", "accounts"];

/// Asked inside the transaction, just before COMMIT.
pub const PRE_COMMIT: &str =
    "SELECT pg_current_xact_id_if_assigned()::text, current_setting('transaction_isolation')";
/// Asked on the same connection after an `ok` COMMIT, outside any transaction (`$1`: the
/// transaction id asked before COMMIT, or null).
pub const POST_COMMIT: &str = "SELECT pg_current_wal_lsn()::text, pg_xact_status($1::text::xid8), \
     CASE WHEN current_setting('track_commit_timestamp')::bool \
     THEN pg_xact_commit_timestamp((($1::text::bigint) % 4294967296)::text::xid)::text END";
/// Asked once per connection.
const BACKEND_PID: &str = "SELECT pg_backend_pid()";

/// Opens a connection to the server at `addr` within `bound`.
pub async fn connect(addr: SocketAddr, bound: Duration) -> Result<tokio_postgres::Client, String> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(addr.ip().to_string())
        .port(addr.port())
        .user(SUPERUSER)
        .dbname("postgres")
        .application_name("splitbrain")
        .connect_timeout(bound);
    let (client, connection) = tokio::time::timeout(bound, cfg.connect(NoTls))
        .await
        .map_err(|_| format!("connecting to {addr}: timeout"))?
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    // The connection task ends when the client is dropped or the server goes away.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The two refusals PostgreSQL asks clients to retry: the transaction was rolled back.
/// (A hot standby cancels a query that conflicts with recovery with 40001 too.)
fn is_refusal(code: Option<&SqlState>) -> bool {
    matches!(code, Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
}

/// How a tokio-postgres error bears on the transaction: a refusal, another answer from
/// the server (the connection is in step), or no answer.
fn classify(e: &tokio_postgres::Error) -> SqlError {
    match e.as_db_error() {
        Some(db) => SqlError::new(
            if is_refusal(e.code()) {
                ErrorKind::Refused
            } else {
                ErrorKind::Rejected
            },
            format!("{}: {}", db.code().code(), db.message()),
        ),
        None => SqlError::new(ErrorKind::Lost, e.to_string()),
    }
}

/// The statement text of `stmt`, with `$n` placeholders in [`params`] order.
fn text(stmt: &Stmt) -> &'static str {
    match *stmt {
        Stmt::Read { table, .. } => match table {
            Table::Lists => "SELECT v FROM lists WHERE k = $1",
            Table::Registers => "SELECT v FROM registers WHERE k = $1",
            Table::Accounts => "SELECT balance FROM accounts WHERE k = $1",
        },
        Stmt::Update { table, .. } => match table {
            Table::Lists => "UPDATE lists SET v = v || $2::bigint WHERE k = $1",
            Table::Registers => "UPDATE registers SET v = $2 WHERE k = $1",
            Table::Accounts => "UPDATE accounts SET balance = $2 WHERE k = $1",
        },
        Stmt::Upsert { table, .. } => match table {
            Table::Lists => "INSERT INTO lists AS l (k, v) VALUES ($1, ARRAY[$2::bigint]) ON CONFLICT (k) DO UPDATE SET v = l.v || $2::bigint",
            Table::Registers => "INSERT INTO registers AS r (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = $2",
            Table::Accounts => "INSERT INTO accounts AS a (k, balance) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET balance = $2",
        },
        Stmt::Cas { .. } => "UPDATE registers SET v = $3 WHERE k = $1 AND v = $2",
        Stmt::ReadAll => "SELECT k, balance FROM accounts ORDER BY k",
    }
}

/// The parameters of `stmt`, in placeholder order.
fn params(stmt: &Stmt) -> Vec<i64> {
    match *stmt {
        Stmt::Read { k, .. } => vec![k],
        Stmt::Update { k, v, .. } | Stmt::Upsert { k, v, .. } => vec![k, v],
        Stmt::Cas { k, old, new } => vec![k, old, new],
        Stmt::ReadAll => Vec::new(),
    }
}

/// The statements a session on `table` may run, one of each kind.
fn statements_of(table: Table) -> Vec<Stmt> {
    let mut out = vec![
        Stmt::Read { table, k: 0 },
        Stmt::Update { table, k: 0, v: 0 },
        Stmt::Upsert { table, k: 0, v: 0 },
    ];
    match table {
        Table::Registers => out.push(Stmt::Cas {
            k: 0,
            old: 0,
            new: 0,
        }),
        Table::Accounts => out.push(Stmt::ReadAll),
        Table::Lists => {}
    }
    out
}

/// A cell of a result row: a list of integers, an integer or NULL.
fn cell(row: &Row, i: usize) -> Result<Cell, tokio_postgres::Error> {
    if let Ok(list) = row.try_get::<_, Vec<i64>>(i) {
        return Ok(Cell::List(list));
    }
    Ok(row
        .try_get::<_, Option<i64>>(i)?
        .map_or(Cell::Null, Cell::Int))
}

/// One PostgreSQL server as a client sees it.
pub struct PgServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its node name in the history (`n1`).
    pub node: String,
    /// The `BEGIN ...` of every transaction sent there.
    pub begin: &'static str,
    /// The table of the run's workload (its statements are prepared on connecting).
    pub table: Table,
    /// Whether the run keeps a statement log (the extra questions are asked only then).
    pub logged: bool,
}

/// A connection with its table's statements prepared on it.
pub struct PgSession {
    client: tokio_postgres::Client,
    begin: &'static str,
    /// The prepared statements, with the statement each stands for.
    prepared: Vec<(Stmt, Statement)>,
    /// The statement log's questions before and after COMMIT, prepared when there is a log.
    probes: Option<(Statement, Statement)>,
    /// The backend serving the connection (`pg_backend_pid()`), when there is a log.
    pid: Option<i32>,
    /// The transaction id answered before COMMIT, asked about after it.
    xid: Option<String>,
}

impl SqlServer for PgServer {
    type Session = PgSession;

    fn node(&self) -> &str {
        &self.node
    }

    fn connect(&self, bound: Duration) -> BoxFuture<'_, Result<PgSession, String>> {
        Box::pin(async move {
            let client = connect(self.addr, bound).await?;
            let failed = |e: tokio_postgres::Error| classify(&e).message;
            let mut prepared = Vec::new();
            for stmt in statements_of(self.table) {
                let statement = client.prepare(text(&stmt)).await.map_err(failed)?;
                prepared.push((stmt, statement));
            }
            let (mut probes, mut pid) = (None, None);
            if self.logged {
                let pre = client.prepare(PRE_COMMIT).await.map_err(failed)?;
                let post = client.prepare(POST_COMMIT).await.map_err(failed)?;
                probes = Some((pre, post));
                let row = client.query_one(BACKEND_PID, &[]).await.map_err(failed)?;
                pid = Some(row.try_get::<_, i32>(0).map_err(failed)?);
            }
            Ok(PgSession {
                client,
                begin: self.begin,
                prepared,
                probes,
                pid,
                xid: None,
            })
        })
    }
}

impl PgSession {
    /// Runs a statement without parameters or rows, recorded in `trace`.
    async fn simple(&mut self, text: &str, trace: &mut TxnTrace) -> Result<(), SqlError> {
        let sent = trace.now_us();
        let done = self
            .client
            .batch_execute(text)
            .await
            .map_err(|e| classify(&e));
        trace.statement(sent, text, json!([]), simple_result(&done));
        done
    }

    async fn answer(&self, stmt: &Stmt) -> Result<Answer, SqlError> {
        let statement = self
            .prepared
            .iter()
            .find(|(s, _)| std::mem::discriminant(s) == std::mem::discriminant(stmt))
            .map(|(_, p)| p)
            .ok_or_else(|| {
                SqlError::new(
                    ErrorKind::Rejected,
                    format!("no statement prepared for {stmt:?}"),
                )
            })?;
        let values = params(stmt);
        let args: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        let failed = |e: tokio_postgres::Error| classify(&e);
        Ok(match stmt {
            Stmt::Read { .. } | Stmt::ReadAll => {
                let rows = self.client.query(statement, &args).await.map_err(failed)?;
                let mut answer = Answer::default();
                for row in &rows {
                    let cells = (0..row.len())
                        .map(|i| cell(row, i))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(failed)?;
                    answer.rows.push(cells);
                }
                answer
            }
            _ => Answer {
                affected: self
                    .client
                    .execute(statement, &args)
                    .await
                    .map_err(failed)?,
                rows: Vec::new(),
            },
        })
    }
}

impl SqlSession for PgSession {
    fn begin<'a>(&'a mut self, trace: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>> {
        Box::pin(async move {
            trace.set("database", json!("postgresql"));
            trace.set("pid", json!(self.pid));
            self.xid = None;
            let begin = self.begin;
            self.simple(begin, trace).await
        })
    }

    fn run<'a>(
        &'a mut self,
        stmt: &'a Stmt,
        trace: &'a mut TxnTrace,
    ) -> BoxFuture<'a, Result<Answer, SqlError>> {
        Box::pin(async move {
            let sent = trace.now_us();
            let answer = self.answer(stmt).await;
            trace.statement(
                sent,
                text(stmt),
                json!(params(stmt)),
                answer_result(stmt, &answer),
            );
            answer
        })
    }

    fn before_commit<'a>(
        &'a mut self,
        trace: &'a mut TxnTrace,
    ) -> BoxFuture<'a, Result<(), SqlError>> {
        Box::pin(async move {
            let Some((pre, _)) = &self.probes else {
                return Ok(());
            };
            // Answered only by a transaction that is not aborted: its COMMIT commits or
            // fails, never quietly rolls back.
            let sent = trace.now_us();
            let asked = self
                .client
                .query_one(pre, &[])
                .await
                .map_err(|e| classify(&e));
            let result = match &asked {
                Ok(row) => {
                    let xid: Option<String> = row.try_get(0).unwrap_or(None);
                    let isolation: Option<String> = row.try_get(1).ok();
                    self.xid = xid.clone();
                    trace.set("isolation", json!(isolation));
                    json!({"rows": [[xid, isolation]]})
                }
                Err(e) => error_result(e),
            };
            trace.statement(sent, PRE_COMMIT, json!([]), result);
            asked.map(|_| ())
        })
    }

    fn commit<'a>(&'a mut self, trace: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>> {
        Box::pin(async move {
            if let Some(xid) = &self.xid {
                trace.set("xid", json!(xid));
            }
            self.simple("COMMIT", trace).await?;
            let Some((_, post)) = &self.probes else {
                return Ok(());
            };
            // After the commit, outside the transaction; the op is ok whatever this says.
            let sent = trace.now_us();
            let xid = self.xid.clone();
            let asked = self.client.query_one(post, &[&xid]).await;
            let result = match &asked {
                Ok(row) => {
                    let field = |i| row.try_get::<_, Option<String>>(i).unwrap_or(None);
                    let (lsn, status, ts) = (field(0), field(1), field(2));
                    trace.set("commit_lsn_after", json!(lsn));
                    trace.set("xact_status", json!(status));
                    trace.set("commit_timestamp", json!(ts));
                    json!({"rows": [[lsn, status, ts]]})
                }
                Err(e) => error_result(&classify(e)),
            };
            trace.statement(sent, POST_COMMIT, json!([xid]), result);
            Ok(())
        })
    }

    fn rollback(&mut self) -> BoxFuture<'_, Result<(), SqlError>> {
        Box::pin(async move {
            self.client
                .batch_execute("ROLLBACK")
                .await
                .map_err(|e| classify(&e))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn recorded(stmt: &Stmt, answer: Answer) -> Value {
        answer_result(stmt, &Ok(answer))
    }

    #[test]
    fn only_serialization_failures_and_deadlocks_are_refusals() {
        assert!(is_refusal(Some(&SqlState::T_R_SERIALIZATION_FAILURE)));
        assert!(is_refusal(Some(&SqlState::T_R_DEADLOCK_DETECTED)));
        assert!(!is_refusal(Some(&SqlState::ADMIN_SHUTDOWN)));
        assert!(!is_refusal(None));
    }

    #[test]
    fn every_statement_has_one_parameter_per_placeholder() {
        for table in [Table::Lists, Table::Registers, Table::Accounts] {
            for stmt in statements_of(table) {
                let highest = (1..=9)
                    .filter(|n| text(&stmt).contains(&format!("${n}")))
                    .max()
                    .unwrap_or(0);
                assert_eq!(highest, params(&stmt).len(), "{}", text(&stmt));
            }
        }
        assert_eq!(statements_of(Table::Accounts).len(), 4);
        assert!(statements_of(Table::Registers)
            .iter()
            .any(|s| matches!(s, Stmt::Cas { .. })));
    }

    #[test]
    fn reads_are_recorded_as_their_rows_and_writes_as_rows_affected() {
        let read = Stmt::Read {
            table: Table::Lists,
            k: 5,
        };
        let rows = vec![vec![Cell::List(vec![1, 2])]];
        assert_eq!(
            recorded(&read, Answer { affected: 0, rows }),
            json!({"rows": [[1, 2]]})
        );
        let update = Stmt::Update {
            table: Table::Lists,
            k: 5,
            v: 3,
        };
        let answer = Answer {
            affected: 1,
            rows: Vec::new(),
        };
        assert_eq!(recorded(&update, answer), json!({"rows_affected": 1}));
    }
}
