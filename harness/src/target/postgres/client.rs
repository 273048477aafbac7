//! The PostgreSQL client of one process: one connection (tokio-postgres), every op one
//! explicit transaction `BEGIN ISOLATION LEVEL ...` .. `COMMIT`.
//!
//! Outcomes: `ok` when COMMIT returned; `fail` when the server refused the transaction
//! (SQLSTATE 40001 serialization failure, 40P01 deadlock, at any statement or at COMMIT)
//! or anything went wrong before COMMIT was sent (a transaction in a BEGIN block commits
//! only on COMMIT, so it certainly did not apply); `info` when the connection broke,
//! the op timed out or another error came back after COMMIT was sent.

use super::server::SUPERUSER;
use super::sql::{self, AppendMode, Step, Table};
use super::statement_log::{self, StatementLog, TxnTrace};
use crate::target::{BoxFuture, Client, Completion, Invocation};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::{NoTls, Statement};

/// How long a ROLLBACK after a refused statement may take before the connection is
/// dropped instead.
const ROLLBACK_BOUND: Duration = Duration::from_millis(200);
/// How long a client waits before it asks a server that refused a connection again.
const RECONNECT_GAP: Duration = Duration::from_millis(50);

/// Opens a connection to the server at `addr` within `bound`.
pub(super) async fn connect(
    addr: SocketAddr,
    bound: Duration,
) -> Result<tokio_postgres::Client, String> {
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

/// A connection with the statements of one table prepared on it.
struct Session {
    client: tokio_postgres::Client,
    statements: Vec<Statement>,
    /// The statement log's questions before and after COMMIT, prepared when there is a log.
    probes: Option<(Statement, Statement)>,
    /// The backend serving the connection (`pg_backend_pid()`), when there is a log.
    pid: Option<i32>,
}

/// A server a client sends transactions to.
pub(super) struct Server {
    /// Where it listens.
    pub(super) addr: SocketAddr,
    /// Its node name in the history (`n1`).
    pub(super) node: String,
    /// The `BEGIN ...` of every transaction sent there.
    pub(super) begin: &'static str,
}

/// One server of a client, with its session when one is open.
struct Endpoint {
    server: Server,
    session: Option<Session>,
    /// Why the last connection attempt failed, for an op that timed out retrying.
    last_connect_error: String,
}

/// The client of one logical process: transactions go to the primary, except those that
/// only read, which go to the process's standby when it has one (`--read-from replica`).
pub(super) struct PgClient {
    table: Table,
    timeout: Duration,
    primary: Endpoint,
    reader: Option<Endpoint>,
    append: AppendMode,
    /// The worker slot this client serves.
    slot: usize,
    /// The run's statement log and this slot's op counter in it, when there is one.
    log: Option<(Arc<StatementLog>, Arc<AtomicU64>)>,
}

impl PgClient {
    /// A client sending transactions on `table` to `primary`, and those that only read
    /// to `reader` when given.
    pub(super) fn new(
        primary: Server,
        reader: Option<Server>,
        table: Table,
        timeout: Duration,
        append: AppendMode,
        slot: usize,
        log: Option<Arc<StatementLog>>,
    ) -> PgClient {
        let endpoint = |server| Endpoint {
            server,
            session: None,
            last_connect_error: String::new(),
        };
        PgClient {
            table,
            timeout,
            primary: endpoint(primary),
            reader: reader.map(endpoint),
            append,
            slot,
            log: log.map(|l| {
                let counter = l.slot_counter(slot);
                (l, counter)
            }),
        }
    }
}

/// How far a transaction got, for judging an error or a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// COMMIT not sent: nothing can have applied.
    BeforeCommit,
    /// COMMIT sent: it may have applied.
    Committing,
}

/// Why a transaction did not end `ok`.
struct TxnError {
    stage: Stage,
    /// The server answered (an error, or our own refusal): the connection is in step and
    /// a ROLLBACK can end the transaction.
    answered: bool,
    /// The server's SQLSTATE, when the server answered with an error.
    code: Option<SqlState>,
    message: String,
}

impl TxnError {
    fn at(stage: Stage) -> impl Fn(tokio_postgres::Error) -> TxnError {
        move |e| TxnError {
            stage,
            answered: e.as_db_error().is_some(),
            code: e.code().cloned(),
            message: match e.as_db_error() {
                Some(db) => format!("{}: {}", db.code().code(), db.message()),
                None => e.to_string(),
            },
        }
    }
}

/// The two refusals PostgreSQL asks clients to retry: the transaction was rolled back.
/// (A hot standby cancels a query that conflicts with recovery with 40001 too.)
fn is_refusal(code: Option<&SqlState>) -> bool {
    matches!(code, Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
}

impl Endpoint {
    /// The session, opened (and its statements prepared) if there is none. A server
    /// that refuses connections (down, or recovering after a kill) is asked again every
    /// [`RECONNECT_GAP`] until `deadline` is near: the op then fails, having reached
    /// nothing, and a down server costs a few failed ops per client, not thousands.
    async fn session(
        &mut self,
        table: Table,
        deadline: Instant,
        logged: bool,
    ) -> Result<&mut Session, TxnError> {
        if self.session.is_none() {
            let before = |message: String| TxnError {
                stage: Stage::BeforeCommit,
                answered: false,
                code: None,
                message,
            };
            let client = loop {
                let remaining = deadline.saturating_duration_since(Instant::now());
                match connect(self.server.addr, remaining).await {
                    Ok(c) => {
                        self.last_connect_error.clear();
                        break c;
                    }
                    Err(e) if remaining > RECONNECT_GAP * 2 => {
                        self.last_connect_error = e;
                        tokio::time::sleep(RECONNECT_GAP).await;
                    }
                    Err(e) => return Err(before(e)),
                }
            };
            let mut statements = Vec::new();
            for text in sql::statements(table) {
                statements.push(
                    client
                        .prepare(text)
                        .await
                        .map_err(TxnError::at(Stage::BeforeCommit))?,
                );
            }
            let (mut probes, mut pid) = (None, None);
            if logged {
                let at = TxnError::at(Stage::BeforeCommit);
                let pre = client
                    .prepare(statement_log::PRE_COMMIT)
                    .await
                    .map_err(&at)?;
                let post = client
                    .prepare(statement_log::POST_COMMIT)
                    .await
                    .map_err(&at)?;
                probes = Some((pre, post));
                let row = client
                    .query_one(statement_log::BACKEND_PID, &[])
                    .await
                    .map_err(&at)?;
                pid = Some(row.try_get::<_, i32>(0).map_err(&at)?);
            }
            self.session = Some(Session {
                client,
                statements,
                probes,
                pid,
            });
        }
        self.session.as_mut().ok_or_else(|| TxnError {
            stage: Stage::BeforeCommit,
            answered: false,
            code: None,
            message: "no session".into(),
        })
    }

    /// Runs `steps` on `table` as one transaction; the recorded results of each step.
    async fn run(
        &mut self,
        table: Table,
        steps: &[Step],
        (stage, deadline, append): (&mut Stage, Instant, AppendMode),
        trace: &mut TxnTrace,
    ) -> Result<Vec<Value>, TxnError> {
        let begin = self.server.begin;
        let session = self.session(table, deadline, trace.on()).await?;
        trace.set("pid", json!(session.pid));
        let before = TxnError::at(Stage::BeforeCommit);
        let sent = trace.now_us();
        let begun = session.client.batch_execute(begin).await;
        trace.statement(sent, begin, json!([]), simple_result(&begun));
        begun.map_err(&before)?;
        let mut results = Vec::with_capacity(steps.len());
        for step in steps {
            match sql::perform(
                &session.client,
                &session.statements,
                table,
                step,
                append,
                trace,
            )
            .await
            .map_err(&before)?
            {
                Ok(v) => results.push(v),
                // The transaction's own decision (not enough money): roll back, fail.
                Err(refused) => {
                    return Err(TxnError {
                        stage: Stage::BeforeCommit,
                        answered: true,
                        code: None,
                        message: refused,
                    })
                }
            }
        }
        if let Some((pre, _)) = &session.probes {
            // Answered only by a transaction that is not aborted: its COMMIT commits or
            // fails, never quietly rolls back.
            let sent = trace.now_us();
            let asked = session.client.query_one(pre, &[]).await;
            let result = match &asked {
                Ok(row) => {
                    let xid: Option<String> = row.try_get(0).unwrap_or(None);
                    let isolation: Option<String> = row.try_get(1).ok();
                    trace.xid = xid.clone();
                    trace.set("isolation", json!(isolation));
                    json!({"rows": [[xid, isolation]]})
                }
                Err(e) => statement_log::error_result(e),
            };
            trace.statement(sent, statement_log::PRE_COMMIT, json!([]), result);
            asked.map_err(&before)?;
        }
        *stage = Stage::Committing;
        let sent = trace.now_us();
        let committed = session.client.batch_execute("COMMIT").await;
        trace.statement(sent, "COMMIT", json!([]), simple_result(&committed));
        committed.map_err(TxnError::at(Stage::Committing))?;
        if let Some((_, post)) = &session.probes {
            // After the commit, outside the transaction; the op is ok whatever this says.
            let sent = trace.now_us();
            let xid = trace.xid.clone();
            let asked = session.client.query_one(post, &[&xid]).await;
            let result = match &asked {
                Ok(row) => {
                    let field = |i| row.try_get::<_, Option<String>>(i).unwrap_or(None);
                    let (lsn, status, ts) = (field(0), field(1), field(2));
                    trace.set("commit_lsn_after", json!(lsn));
                    trace.set("xact_status", json!(status));
                    trace.set("commit_timestamp", json!(ts));
                    json!({"rows": [[lsn, status, ts]]})
                }
                Err(e) => statement_log::error_result(e),
            };
            trace.statement(sent, statement_log::POST_COMMIT, json!([xid]), result);
        }
        Ok(results)
    }

    /// After a transaction that did not commit: roll back if the connection still
    /// answers, else drop it (a broken or timed-out connection is never reused). A
    /// refused COMMIT has ended the transaction already.
    async fn reset(&mut self, e: &TxnError) {
        if e.stage == Stage::Committing {
            if !is_refusal(e.code.as_ref()) {
                self.session = None;
            }
            return;
        }
        if let (true, Some(s)) = (e.answered, &self.session) {
            let rolled_back =
                tokio::time::timeout(ROLLBACK_BOUND, s.client.batch_execute("ROLLBACK")).await;
            if matches!(rolled_back, Ok(Ok(()))) {
                return;
            }
        }
        self.session = None;
    }
}

/// What a simple-protocol statement's answer is recorded as.
fn simple_result(r: &Result<(), tokio_postgres::Error>) -> Value {
    match r {
        Ok(()) => json!("ok"),
        Err(e) => statement_log::error_result(e),
    }
}

impl Client for PgClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let (table, timeout, append) = (self.table, self.timeout, self.append);
            let mut trace = match &self.log {
                Some((log, counter)) => {
                    let seq = counter.fetch_add(1, Ordering::SeqCst);
                    TxnTrace::new(Some(log.clone()), self.slot, seq, &op.value)
                }
                None => TxnTrace::new(None, self.slot, 0, &op.value),
            };
            let steps = match sql::steps(op, table) {
                Ok(s) => s,
                // Nothing was sent, so nothing happened.
                Err(e) => {
                    let node = Some(self.primary.server.node.clone());
                    trace.finish("fail", &op.value, Some(&e));
                    return completion(OpType::Fail, op.value.clone(), node, Some(e));
                }
            };
            let endpoint = match self.reader.as_mut() {
                Some(reader) if sql::only_reads(&steps) => reader,
                _ => &mut self.primary,
            };
            let node = Some(endpoint.server.node.clone());
            trace.set("node", json!(node));
            let mut stage = Stage::BeforeCommit;
            let deadline = Instant::now() + timeout;
            let outcome = tokio::time::timeout_at(
                deadline,
                endpoint.run(table, &steps, (&mut stage, deadline, append), &mut trace),
            )
            .await;
            let e = match outcome {
                Ok(Ok(results)) => {
                    let value = sql::recorded_value(op, &steps, results);
                    trace.finish("ok", &value, None);
                    return completion(OpType::Ok, value, node, None);
                }
                Ok(Err(e)) => e,
                Err(_) => TxnError {
                    stage,
                    answered: false,
                    code: None,
                    message: match (&endpoint.session, endpoint.last_connect_error.as_str()) {
                        (None, why) if !why.is_empty() => format!("timeout ({why})"),
                        _ => "timeout".into(),
                    },
                },
            };
            // A refused or unreadable transaction may leave the server mid-transaction.
            endpoint.reset(&e).await;
            let op_type = if is_refusal(e.code.as_ref()) || e.stage == Stage::BeforeCommit {
                OpType::Fail
            } else {
                OpType::Info
            };
            let message = match (op_type, e.stage) {
                (OpType::Info, _) => format!("{} during COMMIT", e.message),
                _ => e.message,
            };
            let outcome = if op_type == OpType::Fail {
                "fail"
            } else {
                "info"
            };
            trace.finish(outcome, &op.value, Some(&message));
            completion(op_type, op.value.clone(), node, Some(message))
        })
    }
}

fn completion(
    op_type: OpType,
    value: Value,
    node: Option<String>,
    error: Option<String>,
) -> Completion {
    Completion {
        op_type,
        value,
        node,
        error: error.map(|e| json!(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_serialization_failures_and_deadlocks_are_refusals() {
        assert!(is_refusal(Some(&SqlState::T_R_SERIALIZATION_FAILURE)));
        assert!(is_refusal(Some(&SqlState::T_R_DEADLOCK_DETECTED)));
        assert!(!is_refusal(Some(&SqlState::ADMIN_SHUTDOWN)));
        assert!(!is_refusal(None));
    }
}
