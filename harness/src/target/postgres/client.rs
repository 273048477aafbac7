//! The PostgreSQL client of one process: one connection (tokio-postgres), every op one
//! explicit transaction `BEGIN ISOLATION LEVEL ...` .. `COMMIT`.
//!
//! Outcomes: `ok` when COMMIT returned; `fail` when the server refused the transaction
//! (SQLSTATE 40001 serialization failure, 40P01 deadlock, at any statement or at COMMIT)
//! or anything went wrong before COMMIT was sent (a transaction in a BEGIN block commits
//! only on COMMIT, so it certainly did not apply); `info` when the connection broke,
//! the op timed out or another error came back after COMMIT was sent.

use super::server::SUPERUSER;
use super::sql::{self, Step, Table};
use crate::target::{BoxFuture, Client, Completion, Invocation};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
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
}

impl PgClient {
    /// A client sending transactions on `table` to `primary`, and those that only read
    /// to `reader` when given.
    pub(super) fn new(
        primary: Server,
        reader: Option<Server>,
        table: Table,
        timeout: Duration,
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
    async fn session(&mut self, table: Table, deadline: Instant) -> Result<&mut Session, TxnError> {
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
            self.session = Some(Session { client, statements });
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
        stage: &mut Stage,
        deadline: Instant,
    ) -> Result<Vec<Value>, TxnError> {
        let begin = self.server.begin;
        let session = self.session(table, deadline).await?;
        let before = TxnError::at(Stage::BeforeCommit);
        session.client.batch_execute(begin).await.map_err(&before)?;
        let mut results = Vec::with_capacity(steps.len());
        for step in steps {
            match sql::perform(&session.client, &session.statements, table, step)
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
        *stage = Stage::Committing;
        session
            .client
            .batch_execute("COMMIT")
            .await
            .map_err(TxnError::at(Stage::Committing))?;
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

impl Client for PgClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let (table, timeout) = (self.table, self.timeout);
            let steps = match sql::steps(op, table) {
                Ok(s) => s,
                // Nothing was sent, so nothing happened.
                Err(e) => {
                    let node = Some(self.primary.server.node.clone());
                    return completion(OpType::Fail, op.value.clone(), node, Some(e));
                }
            };
            let endpoint = match self.reader.as_mut() {
                Some(reader) if sql::only_reads(&steps) => reader,
                _ => &mut self.primary,
            };
            let node = Some(endpoint.server.node.clone());
            let mut stage = Stage::BeforeCommit;
            let deadline = Instant::now() + timeout;
            let outcome = tokio::time::timeout_at(
                deadline,
                endpoint.run(table, &steps, &mut stage, deadline),
            )
            .await;
            let e = match outcome {
                Ok(Ok(results)) => {
                    let value = sql::recorded_value(op, &steps, results);
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
