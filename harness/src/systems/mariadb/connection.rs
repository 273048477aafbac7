//! MariaDB sessions (mysql_async): the SQL of each statement in MariaDB's dialect, lists
//! stored as comma-separated text (`CONCAT` appends, as Jepsen's MariaDB test does), and
//! which server errors refuse a transaction.

use crate::systems::sql::{
    answer_result, simple_result, Answer, Cell, ErrorKind, SqlError, SqlServer, SqlSession, Stmt,
    Table, TxnTrace,
};
use crate::systems::BoxFuture;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, OptsBuilder, Params, Row, Value as MyValue};
use std::net::SocketAddr;
use std::time::Duration;

/// The account and database every node has (made by `mariadb-install-db --extra-file`).
pub const USER: &str = "splitbrain";
/// The database the tables live in.
pub const DATABASE: &str = "splitbrain";

/// The tables every run creates (one per workload).
pub const SCHEMA: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS lists (k BIGINT PRIMARY KEY, v TEXT NOT NULL) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS registers (k BIGINT PRIMARY KEY, v BIGINT) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS accounts (k BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB",
];

/// Server errors after which the transaction is certainly rolled back: 1213 deadlock,
/// which Galera also returns for a certification failure or a brute-force abort by a
/// replicated transaction; 1020 "record has changed since last read"
/// (`innodb_snapshot_isolation`).
///
/// 1047 "WSREP has not yet prepared node for application use" is not one: before COMMIT
/// it fails the transaction like any error, but at COMMIT it can come from a node that
/// lost its primary component after the write set left it. A Galera run under kill -9
/// (flush=1, seed 1, 2026-12-04) had an append answered 1047 at the quorum reset on its
/// node and present in every later read.
pub const REFUSALS: [u16; 2] = [1213, 1020];

/// Opens a connection to `addr` within `bound`; `init` runs on it first.
pub async fn connect(addr: SocketAddr, bound: Duration, init: Vec<String>) -> Result<Conn, String> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(USER))
        .db_name(Some(DATABASE))
        .prefer_socket(Some(false))
        .tcp_nodelay(true)
        // An UPDATE's row count is the rows it matched, not only those it changed (a cas
        // that writes the value a register already holds still matched it).
        .client_found_rows(true)
        .init(init);
    tokio::time::timeout(bound, Conn::new(opts))
        .await
        .map_err(|_| format!("connecting to {addr}: timeout"))?
        .map_err(|e| format!("connecting to {addr}: {e}"))
}

/// How a mysql_async error bears on the transaction.
pub fn classify(e: &mysql_async::Error) -> SqlError {
    match e {
        mysql_async::Error::Server(s) => SqlError::new(
            if REFUSALS.contains(&s.code) {
                ErrorKind::Refused
            } else {
                ErrorKind::Rejected
            },
            format!("{}: {}", s.code, s.message),
        ),
        other => SqlError::new(ErrorKind::Lost, other.to_string()),
    }
}

/// The SQL text and parameters of a statement.
fn sql(stmt: &Stmt) -> (&'static str, Vec<MyValue>) {
    let int = |i: i64| MyValue::Int(i);
    match *stmt {
        Stmt::Read { table, k } => (
            match table {
                Table::Lists => "SELECT v FROM lists WHERE k = ?",
                Table::Registers => "SELECT v FROM registers WHERE k = ?",
                Table::Accounts => "SELECT balance FROM accounts WHERE k = ?",
            },
            vec![int(k)],
        ),
        Stmt::Update { table, k, v } => (
            match table {
                Table::Lists => "UPDATE lists SET v = CONCAT(v, ',', ?) WHERE k = ?",
                Table::Registers => "UPDATE registers SET v = ? WHERE k = ?",
                Table::Accounts => "UPDATE accounts SET balance = ? WHERE k = ?",
            },
            vec![int(v), int(k)],
        ),
        Stmt::Upsert { table, k, v } => (
            match table {
                Table::Lists => "INSERT INTO lists (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = CONCAT(v, ',', VALUES(v))",
                Table::Registers => "INSERT INTO registers (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)",
                Table::Accounts => "INSERT INTO accounts (k, balance) VALUES (?, ?) ON DUPLICATE KEY UPDATE balance = VALUES(balance)",
            },
            vec![int(k), int(v)],
        ),
        Stmt::Cas { k, old, new } => (
            "UPDATE registers SET v = ? WHERE k = ? AND v = ?",
            vec![int(new), int(k), int(old)],
        ),
        Stmt::ReadAll => ("SELECT k, balance FROM accounts ORDER BY k", Vec::new()),
    }
}

/// A list stored as comma-separated integers.
fn parse_list(text: &str) -> Result<Vec<i64>, String> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| format!("a list element is not an integer: {text:?}"))
        })
        .collect()
}

/// One cell of a result row: lists are text, everything else an integer or NULL.
fn cell(value: MyValue, list: bool) -> Result<Cell, String> {
    match value {
        MyValue::NULL => Ok(Cell::Null),
        MyValue::Int(i) => Ok(Cell::Int(i)),
        MyValue::UInt(u) => i64::try_from(u).map(Cell::Int).map_err(|e| e.to_string()),
        MyValue::Bytes(b) => {
            let text = String::from_utf8_lossy(&b);
            if list {
                parse_list(&text).map(Cell::List)
            } else {
                text.trim()
                    .parse()
                    .map(Cell::Int)
                    .map_err(|_| format!("not an integer: {text:?}"))
            }
        }
        other => Err(format!("an unexpected value: {other:?}")),
    }
}

/// A session on one MariaDB server.
pub struct MariaDbSession {
    conn: Conn,
}

impl MariaDbSession {
    /// Runs a statement without parameters or rows (`START TRANSACTION`, `COMMIT`),
    /// recorded in `trace`.
    async fn simple(&mut self, text: &str, trace: &mut TxnTrace) -> Result<(), SqlError> {
        let sent = trace.now_us();
        let done = self.conn.query_drop(text).await.map_err(|e| classify(&e));
        trace.statement(sent, text, serde_json::json!([]), simple_result(&done));
        done
    }

    async fn answer(&mut self, stmt: &Stmt) -> Result<Answer, SqlError> {
        let (text, params) = sql(stmt);
        let rows: Vec<Row> = self
            .conn
            .exec(text, Params::Positional(params))
            .await
            .map_err(|e| classify(&e))?;
        let list = matches!(
            stmt,
            Stmt::Read {
                table: Table::Lists,
                ..
            }
        );
        let mut answer = Answer {
            affected: self.conn.affected_rows(),
            rows: Vec::with_capacity(rows.len()),
        };
        for row in rows {
            let cells = row
                .unwrap_raw()
                .into_iter()
                .map(|v| cell(v.unwrap_or(MyValue::NULL), list))
                .collect::<Result<Vec<Cell>, String>>()
                // The server answered, but not as the table holds values: the
                // transaction is ours to roll back.
                .map_err(|e| SqlError::new(ErrorKind::Rejected, e))?;
            answer.rows.push(cells);
        }
        Ok(answer)
    }
}

impl SqlSession for MariaDbSession {
    fn begin<'a>(&'a mut self, trace: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>> {
        trace.set("database", serde_json::json!("mariadb"));
        Box::pin(self.simple("START TRANSACTION", trace))
    }

    fn run<'a>(
        &'a mut self,
        stmt: &'a Stmt,
        trace: &'a mut TxnTrace,
    ) -> BoxFuture<'a, Result<Answer, SqlError>> {
        Box::pin(async move {
            let sent = trace.now_us();
            let answer = self.answer(stmt).await;
            if trace.on() {
                let (text, params) = sql(stmt);
                let params: Vec<i64> = params
                    .iter()
                    .filter_map(|p| match p {
                        MyValue::Int(i) => Some(*i),
                        _ => None,
                    })
                    .collect();
                let result = answer_result(stmt, &answer);
                trace.statement(sent, text, serde_json::json!(params), result);
            }
            answer
        })
    }

    fn commit<'a>(&'a mut self, trace: &'a mut TxnTrace) -> BoxFuture<'a, Result<(), SqlError>> {
        Box::pin(self.simple("COMMIT", trace))
    }

    fn rollback(&mut self) -> BoxFuture<'_, Result<(), SqlError>> {
        Box::pin(async move {
            self.conn
                .query_drop("ROLLBACK")
                .await
                .map_err(|e| classify(&e))
        })
    }
}

/// One MariaDB node as a client sees it: its address, name and the session settings.
pub struct MariaDbServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its node name.
    pub node: String,
    /// `SET SESSION TRANSACTION ISOLATION LEVEL ...`, run on every new connection.
    pub isolation: &'static str,
}

impl SqlServer for MariaDbServer {
    type Session = MariaDbSession;

    fn node(&self) -> &str {
        &self.node
    }

    fn connect(&self, bound: Duration) -> BoxFuture<'_, Result<MariaDbSession, String>> {
        Box::pin(async move {
            let init = vec![format!(
                "SET SESSION TRANSACTION ISOLATION LEVEL {}",
                self.isolation
            )];
            Ok(MariaDbSession {
                conn: connect(self.addr, bound, init).await?,
            })
        })
    }
}

/// A connection to `addr` with no default database, within `bound`: a node outside the
/// primary component refuses to open one (1047), but answers `SHOW STATUS` and takes
/// `SET GLOBAL` on this one.
pub async fn connect_admin(addr: SocketAddr, bound: Duration) -> Result<Conn, String> {
    let opts = OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some(USER))
        .prefer_socket(Some(false));
    tokio::time::timeout(bound, Conn::new(opts))
        .await
        .map_err(|_| format!("connecting to {addr}: timeout"))?
        .map_err(|e| format!("connecting to {addr}: {e}"))
}

/// The value of status variable `name` on the server at `addr`, within `bound`.
pub async fn status(addr: SocketAddr, name: &str, bound: Duration) -> Option<String> {
    let mut conn = connect(addr, bound, Vec::new()).await.ok()?;
    let query = format!("SHOW STATUS LIKE '{name}'");
    let row: Option<(String, String)> = tokio::time::timeout(bound, conn.query_first(query))
        .await
        .ok()?
        .ok()?;
    row.map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_comma_separated_integers() {
        assert_eq!(parse_list("3,1,2"), Ok(vec![3, 1, 2]));
        assert_eq!(parse_list(""), Ok(vec![]));
        assert!(parse_list("3,x").is_err());
        assert_eq!(
            cell(MyValue::Bytes(b"4,5".to_vec()), true),
            Ok(Cell::List(vec![4, 5]))
        );
        assert_eq!(
            cell(MyValue::Bytes(b"42".to_vec()), false),
            Ok(Cell::Int(42))
        );
        assert_eq!(cell(MyValue::NULL, true), Ok(Cell::Null));
    }

    #[test]
    fn deadlocks_certification_failures_and_unready_nodes_are_refusals() {
        let server = |code| {
            mysql_async::Error::Server(mysql_async::ServerError {
                code,
                message: "m".into(),
                state: "HY000".into(),
            })
        };
        for code in REFUSALS {
            assert_eq!(classify(&server(code)).kind, ErrorKind::Refused);
        }
        // "Got error ... during COMMIT": the server does not say the write set went
        // nowhere, so a COMMIT that ends so is not known to have failed.
        assert_eq!(classify(&server(1180)).kind, ErrorKind::Rejected);
        // A node leaving the primary component may say so after the write set left it.
        assert_eq!(classify(&server(1047)).kind, ErrorKind::Rejected);
        assert_eq!(classify(&server(1205)).kind, ErrorKind::Rejected);
        assert!(classify(&server(1213)).message.starts_with("1213: "));
    }

    #[test]
    fn every_statement_has_sql_with_one_parameter_per_placeholder() {
        for table in [Table::Lists, Table::Registers, Table::Accounts] {
            for stmt in [
                Stmt::Read { table, k: 1 },
                Stmt::Update { table, k: 1, v: 2 },
                Stmt::Upsert { table, k: 1, v: 2 },
                Stmt::Cas {
                    k: 1,
                    old: 2,
                    new: 3,
                },
                Stmt::ReadAll,
            ] {
                let (text, params) = sql(&stmt);
                assert_eq!(text.matches('?').count(), params.len(), "{text}");
            }
        }
    }
}
