//! The statement log: every SQL statement a client sent and every result it got, one
//! JSON line per transaction in the run directory's `statements.jsonl`, so an anomaly can
//! be shown as a database developer reads a bug report (and checked against the server's
//! own word, not only the checker's inference).
//!
//! A line: the worker slot and the op's sequence number within that slot (the n-th op
//! any client of slot s invoked: the n-th invoke of the processes `p` with `p mod
//! concurrency = s` in the history), the node, the op as invoked, the outcome, and
//! `statements`: each with the time it was sent and its answer came (microseconds since
//! the log was opened, one clock for every client), the SQL, its parameters and what came
//! back. A database's session adds its own fields (PostgreSQL: the backend PID, the
//! transaction id and isolation level asked before COMMIT, the commit's WAL position and
//! status asked after it).

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// The file name in the run directory.
pub const FILE_NAME: &str = "statements.jsonl";

/// The log of one run, shared by every client.
#[derive(Debug)]
pub struct StatementLog {
    file: Mutex<std::fs::File>,
    start: Instant,
    path: PathBuf,
    /// Per worker slot: ops invoked so far.
    seqs: Mutex<Vec<Arc<AtomicU64>>>,
}

impl StatementLog {
    /// A fresh log at `run_dir/statements.jsonl`.
    pub fn create(run_dir: &Path) -> std::io::Result<StatementLog> {
        let path = run_dir.join(FILE_NAME);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        Ok(StatementLog {
            file: Mutex::new(file),
            start: Instant::now(),
            path,
            seqs: Mutex::new(Vec::new()),
        })
    }

    /// Where it is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Microseconds since the log was opened.
    pub fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// The op counter of worker slot `slot` (shared by every client that slot gets, as
    /// an `info` op makes a fresh client for a fresh process).
    pub fn slot_counter(&self, slot: usize) -> Arc<AtomicU64> {
        let mut seqs = self.seqs.lock().unwrap_or_else(|e| e.into_inner());
        while seqs.len() <= slot {
            seqs.push(Arc::new(AtomicU64::new(0)));
        }
        seqs[slot].clone()
    }

    /// Appends one transaction's line (one write, so lines never interleave).
    fn write(&self, line: &Value) {
        let mut text = line.to_string();
        text.push('\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // A log that cannot be written loses evidence, not correctness: the history is
        // what is checked.
        let _ = f.write_all(text.as_bytes());
    }
}

/// A target's statement log for the run: opened once, when the first node's arguments
/// are made (the first moment a target learns the run directory: the node's data
/// directory is `<run>/nodes/n1/data`), then shared by every client.
#[derive(Debug, Default, Clone)]
pub struct RunStatementLog(OnceLock<Option<Arc<StatementLog>>>);

impl RunStatementLog {
    /// Opens the log in the run directory above node data directory `data_dir`, once.
    /// A log that cannot be opened loses evidence, not the run: it says so and goes on.
    pub fn open_above(&self, data_dir: &Path) {
        self.0.get_or_init(|| {
            let run = data_dir.ancestors().nth(3)?;
            match StatementLog::create(run) {
                Ok(l) => Some(Arc::new(l)),
                Err(e) => {
                    eprintln!("splitbrain: no statement log: {e}");
                    None
                }
            }
        });
    }

    /// The log, once opened.
    pub fn get(&self) -> Option<Arc<StatementLog>> {
        self.0.get().cloned().flatten()
    }
}

/// One transaction's record while it runs; written when finished, or when dropped
/// unfinished (an op the worker's outer bound cut off: `abandoned`).
pub struct TxnTrace {
    log: Option<Arc<StatementLog>>,
    head: serde_json::Map<String, Value>,
    statements: Vec<Value>,
    written: bool,
}

impl TxnTrace {
    /// A trace of op `seq` of worker slot `slot` (nothing recorded without a log).
    pub fn new(log: Option<Arc<StatementLog>>, slot: usize, seq: u64, op: &Value) -> TxnTrace {
        let mut head = serde_json::Map::new();
        if let Some(l) = &log {
            head.insert("slot".into(), json!(slot));
            head.insert("seq".into(), json!(seq));
            head.insert("invoked_us".into(), json!(l.now_us()));
            head.insert("op".into(), op.clone());
        }
        TxnTrace {
            log,
            head,
            statements: Vec::new(),
            written: false,
        }
    }

    /// True when statements are recorded (the extra questions are asked only then).
    pub fn on(&self) -> bool {
        self.log.is_some()
    }

    /// The log's clock (0 without a log).
    pub fn now_us(&self) -> u64 {
        self.log.as_ref().map_or(0, |l| l.now_us())
    }

    /// Sets a field of the transaction's line (`node`, `pid`, `isolation`, ...).
    pub fn set(&mut self, field: &str, value: Value) {
        if self.on() {
            self.head.insert(field.into(), value);
        }
    }

    /// Records a statement sent at `sent_us` with `params`, answered now with `result`.
    pub fn statement(&mut self, sent_us: u64, sql: &str, params: Value, result: Value) {
        if !self.on() {
            return;
        }
        let done = self.now_us();
        self.statements.push(json!({
            "sent_us": sent_us, "done_us": done, "sql": sql, "params": params, "result": result,
        }));
    }

    /// Writes the line with the op's outcome (`ok`, `fail`, `info`) and error, if any.
    pub fn finish(&mut self, outcome: &str, value: &Value, error: Option<&str>) {
        let Some(log) = self.log.clone() else {
            return;
        };
        let mut line = std::mem::take(&mut self.head);
        line.insert("outcome".into(), json!(outcome));
        line.insert("value".into(), value.clone());
        if let Some(e) = error {
            line.insert("error".into(), json!(e));
        }
        line.insert("completed_us".into(), json!(log.now_us()));
        line.insert(
            "statements".into(),
            Value::Array(std::mem::take(&mut self.statements)),
        );
        log.write(&Value::Object(line));
        self.written = true;
    }
}

impl Drop for TxnTrace {
    fn drop(&mut self) {
        if !self.written && self.on() {
            self.finish(
                "abandoned",
                &Value::Null,
                Some("the op's outer bound cut it off"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_transaction_is_one_line_with_its_statements_in_order_and_slots_count_ops() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(StatementLog::create(dir.path()).unwrap());
        let c = log.slot_counter(2);
        assert_eq!(c.fetch_add(1, Ordering::SeqCst), 0);
        assert_eq!(
            log.slot_counter(2).load(Ordering::SeqCst),
            1,
            "one counter per slot"
        );
        let op = json!([["r", 5, null]]);
        let mut t = TxnTrace::new(Some(log.clone()), 2, 0, &op);
        t.set("pid", json!(42));
        t.statement(1, "BEGIN", json!([]), json!("ok"));
        t.statement(
            2,
            "SELECT v FROM lists WHERE k = $1",
            json!([5]),
            json!({"rows": []}),
        );
        t.finish("ok", &json!([["r", 5, null]]), None);
        // Dropped unfinished: still logged, as abandoned.
        drop(TxnTrace::new(Some(log.clone()), 1, 0, &op));
        // Without a log nothing is written and nothing is asked.
        assert!(!TxnTrace::new(None, 0, 0, &op).on());
        let text = std::fs::read_to_string(log.path()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["slot"], 2);
        assert_eq!(lines[0]["pid"], 42);
        assert_eq!(lines[0]["outcome"], "ok");
        let sqls: Vec<&str> = lines[0]["statements"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["sql"].as_str().unwrap())
            .collect();
        assert_eq!(sqls, ["BEGIN", "SELECT v FROM lists WHERE k = $1"]);
        assert_eq!(lines[1]["outcome"], "abandoned");
    }
}
