//! What the SQL database targets share: the workloads' transactions written once against
//! a connection trait, and the chores of running a database server nobody here wrote.
//!
//! - `steps.rs`: the tables, the steps a workload op stands for, the statements a step
//!   runs (named by purpose: each database writes its own SQL), what an `ok` op records.
//! - `session.rs`: [`SqlSession`] (begin at the isolation level, run a statement, commit,
//!   roll back), [`SqlServer`] (where a session is opened), how errors are judged
//!   ([`ErrorKind`]), and the steps performed against a session.
//! - `client.rs`: [`SqlClient`], one process's transactions on its server (read-only ones
//!   on its reader, when it has one), their outcomes.
//! - `statement_log.rs`: every statement sent and answered, per transaction, in the run's
//!   `statements.jsonl` ([`StatementLog`], [`TxnTrace`]).
//! - `server.rs`: an OS account to run a server as, a work directory outside the run
//!   store, a setup program run with its output in the node's log.

mod client;
mod server;
mod session;
mod statement_log;
mod steps;

pub use client::{SqlClient, Stage};
pub use server::{chown_tree, lookup_user, open_log, run_as_if_root, run_logged, short_work_dir};
pub use session::{
    answer_result, error_result, perform, simple_result, ErrorKind, SqlError, SqlServer, SqlSession,
};
pub use statement_log::{RunStatementLog, StatementLog, TxnTrace, FILE_NAME as STATEMENT_LOG_FILE};
pub use steps::{only_reads, recorded_value, steps, Answer, AppendMode, Cell, Step, Stmt, Table};
