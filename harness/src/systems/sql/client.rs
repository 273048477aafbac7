//! The client of one process of a SQL target: one session on its server (and one on its
//! reader, for transactions that only read, when it has one), every op one explicit
//! transaction recorded in the statement log when the run keeps one, and how its outcome
//! is judged, the same for every database.
//!
//! `ok` when COMMIT returned. `fail` when the server refused the transaction (a
//! [`ErrorKind::Refused`] error, at any statement or at COMMIT), or anything went wrong
//! before COMMIT was sent (an open transaction applies only on COMMIT, so it certainly did
//! not). `info` when the connection broke, the op timed out or another error came back
//! after COMMIT was sent.

use super::session::{perform, ErrorKind, SqlError, SqlServer, SqlSession};
use super::statement_log::{StatementLog, TxnTrace};
use super::steps::{self, AppendMode, Step, Table};
use crate::systems::{BoxFuture, Client, Completion, Invocation};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long a ROLLBACK after a refused statement may take before the connection is
/// dropped instead.
const ROLLBACK_BOUND: Duration = Duration::from_millis(200);
/// How long a client waits before it asks a server that refused a connection again.
const RECONNECT_GAP: Duration = Duration::from_millis(50);

/// How far a transaction got, for judging an error or a timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// COMMIT not sent: nothing can have applied.
    BeforeCommit,
    /// COMMIT sent: it may have applied.
    Committing,
}

/// Why a transaction did not end `ok`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TxnError {
    stage: Stage,
    kind: ErrorKind,
    message: String,
}

impl TxnError {
    fn at(stage: Stage) -> impl Fn(SqlError) -> TxnError {
        move |e| TxnError {
            stage,
            kind: e.kind,
            message: e.message,
        }
    }
}

/// The outcome of a transaction that did not commit: `fail` when it certainly did not
/// apply, `info` when it may have.
fn judged(e: &TxnError) -> OpType {
    if e.kind == ErrorKind::Refused || e.stage == Stage::BeforeCommit {
        OpType::Fail
    } else {
        OpType::Info
    }
}

/// One server of a client, with its session when one is open.
struct Endpoint<S: SqlServer> {
    server: S,
    session: Option<S::Session>,
    /// Why the last connection attempt failed, for an op that timed out retrying.
    last_connect_error: String,
}

impl<S: SqlServer> Endpoint<S> {
    /// The session, opened if there is none. A server that refuses connections (down, or
    /// recovering after a kill) is asked again every [`RECONNECT_GAP`] until `deadline` is
    /// near: the op then fails, having reached nothing, and a down server costs a few
    /// failed ops per client, not thousands.
    async fn session(&mut self, deadline: Instant) -> Result<&mut S::Session, TxnError> {
        if self.session.is_none() {
            let session = loop {
                let remaining = deadline.saturating_duration_since(Instant::now());
                match self.server.connect(remaining).await {
                    Ok(s) => {
                        self.last_connect_error.clear();
                        break s;
                    }
                    Err(e) if remaining > RECONNECT_GAP * 2 => {
                        self.last_connect_error = e;
                        tokio::time::sleep(RECONNECT_GAP).await;
                    }
                    Err(e) => {
                        return Err(TxnError {
                            stage: Stage::BeforeCommit,
                            kind: ErrorKind::Lost,
                            message: e,
                        })
                    }
                }
            };
            self.session = Some(session);
        }
        self.session.as_mut().ok_or_else(|| TxnError {
            stage: Stage::BeforeCommit,
            kind: ErrorKind::Lost,
            message: "no session".into(),
        })
    }

    /// Runs `steps` on `table` as one transaction; the recorded results of each step.
    async fn run(
        &mut self,
        mode: (Table, AppendMode),
        steps: &[Step],
        (stage, deadline): (&mut Stage, Instant),
        trace: &mut TxnTrace,
    ) -> Result<Vec<Value>, TxnError> {
        let session = self.session(deadline).await?;
        let before = TxnError::at(Stage::BeforeCommit);
        session.begin(trace).await.map_err(&before)?;
        let mut results = Vec::with_capacity(steps.len());
        for step in steps {
            match perform(session, mode, step, trace).await.map_err(&before)? {
                Ok(v) => results.push(v),
                // The transaction's own decision (not enough money): roll back, fail.
                Err(refused) => {
                    return Err(TxnError {
                        stage: Stage::BeforeCommit,
                        kind: ErrorKind::Rejected,
                        message: refused,
                    })
                }
            }
        }
        session.before_commit(trace).await.map_err(&before)?;
        *stage = Stage::Committing;
        session
            .commit(trace)
            .await
            .map_err(TxnError::at(Stage::Committing))?;
        Ok(results)
    }

    /// After a transaction that did not commit: roll back if the connection still
    /// answers, else drop it (a broken or timed-out connection is never reused). A
    /// refused COMMIT has ended the transaction already; any other failed COMMIT leaves
    /// the session in a state not worth trusting.
    async fn reset(&mut self, e: &TxnError) {
        if e.stage == Stage::Committing {
            if e.kind != ErrorKind::Refused {
                self.session = None;
            }
            return;
        }
        if let (ErrorKind::Refused | ErrorKind::Rejected, Some(s)) = (e.kind, self.session.as_mut())
        {
            let rolled_back = tokio::time::timeout(ROLLBACK_BOUND, s.rollback()).await;
            if matches!(rolled_back, Ok(Ok(()))) {
                return;
            }
        }
        self.session = None;
    }
}

/// The client of one logical process: transactions on `table` to its server, those that
/// only read to its reader when it has one, each bounded by the op timeout.
pub struct SqlClient<S: SqlServer> {
    table: Table,
    append: AppendMode,
    timeout: Duration,
    endpoint: Endpoint<S>,
    reader: Option<Endpoint<S>>,
    /// The worker slot this client serves.
    slot: usize,
    /// The run's statement log and this slot's op counter in it, when there is one.
    log: Option<(Arc<StatementLog>, Arc<AtomicU64>)>,
}

fn endpoint<S: SqlServer>(server: S) -> Endpoint<S> {
    Endpoint {
        server,
        session: None,
        last_connect_error: String::new(),
    }
}

impl<S: SqlServer> SqlClient<S> {
    /// A client sending transactions on `table` to `server`.
    pub fn new(server: S, table: Table, timeout: Duration) -> SqlClient<S> {
        SqlClient {
            table,
            append: AppendMode::default(),
            timeout,
            endpoint: endpoint(server),
            reader: None,
            slot: 0,
            log: None,
        }
    }

    /// Sends the transactions that only read to `reader` (a replica) instead.
    pub fn with_reader(mut self, reader: Option<S>) -> SqlClient<S> {
        self.reader = reader.map(endpoint);
        self
    }

    /// Appends to lists as `append` says.
    pub fn with_append(mut self, append: AppendMode) -> SqlClient<S> {
        self.append = append;
        self
    }

    /// Records every transaction in `log`, as worker slot `slot`'s.
    pub fn with_log(mut self, log: Option<Arc<StatementLog>>, slot: usize) -> SqlClient<S> {
        self.slot = slot;
        self.log = log.map(|l| {
            let counter = l.slot_counter(slot);
            (l, counter)
        });
        self
    }

    /// The trace of the next op, numbered in its slot's sequence when there is a log.
    fn trace(&self, op: &Invocation) -> TxnTrace {
        match &self.log {
            Some((log, counter)) => {
                let seq = counter.fetch_add(1, Ordering::SeqCst);
                TxnTrace::new(Some(log.clone()), self.slot, seq, &op.value)
            }
            None => TxnTrace::new(None, self.slot, 0, &op.value),
        }
    }
}

impl<S: SqlServer + 'static> Client for SqlClient<S> {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let mut trace = self.trace(op);
            let (mode, timeout) = ((self.table, self.append), self.timeout);
            let steps = match steps::steps(op, self.table) {
                Ok(s) => s,
                // Nothing was sent, so nothing happened.
                Err(e) => {
                    let node = Some(self.endpoint.server.node().to_string());
                    trace.finish("fail", &op.value, Some(&e));
                    return completion(OpType::Fail, op.value.clone(), node, Some(e));
                }
            };
            let endpoint = match self.reader.as_mut() {
                Some(reader) if steps::only_reads(&steps) => reader,
                _ => &mut self.endpoint,
            };
            let node = Some(endpoint.server.node().to_string());
            trace.set("node", json!(node));
            let mut stage = Stage::BeforeCommit;
            let deadline = Instant::now() + timeout;
            let outcome = tokio::time::timeout_at(
                deadline,
                endpoint.run(mode, &steps, (&mut stage, deadline), &mut trace),
            )
            .await;
            let e = match outcome {
                Ok(Ok(results)) => {
                    let value = steps::recorded_value(op, &steps, results);
                    trace.finish("ok", &value, None);
                    return completion(OpType::Ok, value, node, None);
                }
                Ok(Err(e)) => e,
                Err(_) => TxnError {
                    stage,
                    kind: ErrorKind::Lost,
                    message: match (&endpoint.session, endpoint.last_connect_error.as_str()) {
                        (None, why) if !why.is_empty() => format!("timeout ({why})"),
                        _ => "timeout".into(),
                    },
                },
            };
            // A refused or unreadable transaction may leave the server mid-transaction.
            endpoint.reset(&e).await;
            let op_type = judged(&e);
            let (message, outcome) = match op_type {
                OpType::Info => (format!("{} during COMMIT", e.message), "info"),
                _ => (e.message, "fail"),
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
    fn only_refusals_or_failures_before_commit_are_definite() {
        let e = |stage, kind| TxnError {
            stage,
            kind,
            message: String::new(),
        };
        for kind in [ErrorKind::Refused, ErrorKind::Rejected, ErrorKind::Lost] {
            assert_eq!(judged(&e(Stage::BeforeCommit, kind)), OpType::Fail);
        }
        assert_eq!(
            judged(&e(Stage::Committing, ErrorKind::Refused)),
            OpType::Fail
        );
        assert_eq!(
            judged(&e(Stage::Committing, ErrorKind::Rejected)),
            OpType::Info
        );
        assert_eq!(judged(&e(Stage::Committing, ErrorKind::Lost)), OpType::Info);
    }
}
