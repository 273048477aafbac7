//! What the SQL database targets share: the workloads' transactions written once against
//! a connection trait, and the chores of running a database server nobody here wrote.
//!
//! - `steps.rs`: the tables, the steps a workload op stands for, the statements a step
//!   runs (named by purpose: each database writes its own SQL), what an `ok` op records.
//! - `session.rs`: [`SqlSession`] (begin at the isolation level, run a statement, commit,
//!   roll back), [`SqlServer`] (where a session is opened), how errors are judged
//!   ([`ErrorKind`]), and the steps performed against a session.
//! - `client.rs`: [`SqlClient`], one process's transactions on one server, its outcomes.
//! - `server.rs`: an OS account to run a server as, a work directory outside the run
//!   store, a setup program run with its output in the node's log.

mod client;
mod server;
mod session;
mod steps;

pub use client::{SqlClient, Stage};
pub use server::{chown_tree, lookup_user, open_log, run_logged, short_work_dir};
pub use session::{perform, ErrorKind, SqlError, SqlServer, SqlSession};
pub use steps::{only_reads, recorded_value, steps, Answer, Cell, Step, Stmt, Table};
