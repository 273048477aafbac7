//! The statements behind an anomaly: for each Elle cycle a checker reported, the
//! statement log's lines of the cycle's transactions, merged and ordered by the time each
//! statement was sent, put into the result's `details.statement_log` (printed after the
//! verdict table and in report.html).
//!
//! A history op is matched to its log line by worker slot and sequence: the n-th op a
//! client process `p` of slot `p mod concurrency` invoked is the log's line (slot, n).

use crate::systems::sql::STATEMENT_LOG_FILE as FILE_NAME;
use serde_json::{json, Value};
use splitbrain_checkers::{CheckResult, History, OpType, Process};
use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path;

/// Cycles annotated per anomaly type (every instance Elle keeps).
const CYCLES_PER_TYPE: usize = 8;
/// Process ids from here up are setup ops, which have clients of their own.
const SETUP_PROCESS_BASE: u64 = 2_000_000;

/// The statement log's lines by (slot, seq).
pub fn read_log(run_dir: &Path) -> Option<HashMap<(u64, u64), Value>> {
    let text = std::fs::read_to_string(run_dir.join(FILE_NAME)).ok()?;
    let mut lines = HashMap::new();
    for l in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        if let (Some(slot), Some(seq)) = (v["slot"].as_u64(), v["seq"].as_u64()) {
            lines.insert((slot, seq), v);
        }
    }
    Some(lines)
}

/// Each client op's history index (of its completion, the index results name
/// transactions by) mapped to its (slot, seq).
pub fn op_slots(history: &History, concurrency: usize) -> HashMap<u64, (u64, u64)> {
    let concurrency = concurrency.max(1) as u64;
    let mut next_seq: HashMap<u64, u64> = HashMap::new();
    let mut pending: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut out = HashMap::new();
    for (pos, op) in history.ops().iter().enumerate() {
        let Process::Client(p) = op.process else {
            continue;
        };
        if p >= SETUP_PROCESS_BASE {
            continue;
        }
        let slot = p % concurrency;
        if op.op_type == OpType::Invoke {
            let seq = next_seq.entry(slot).or_insert(0);
            pending.insert(p, (slot, *seq));
            *seq += 1;
        } else if let Some(at) = pending.remove(&p) {
            out.insert(history.op_index(pos), at);
        }
    }
    out
}

/// The log line of the op the history names `index`: the line of its (slot, seq), when
/// that line recorded the same completion value (setup ops, which run on clients of
/// slots 0.., shift a slot's count; a line that does not match is not used).
fn line_for<'l>(
    history: &History,
    slots: &HashMap<u64, (u64, u64)>,
    log: &'l HashMap<(u64, u64), Value>,
    index: u64,
) -> Option<&'l Value> {
    let line = log.get(slots.get(&index)?)?;
    let pos = (0..history.len()).find(|&p| history.op_index(p) == index)?;
    let op = history.op(pos)?;
    (line["value"] == op.value).then_some(line)
}

/// Adds `details.statement_log` (the text) and `details.statement_log_confirmed` (every
/// cycle shown was confirmed) to every result with cycles, when the run has a log.
pub fn annotate(
    results: &mut [CheckResult],
    history: &History,
    run_dir: &Path,
    concurrency: usize,
) {
    let Some(log) = read_log(run_dir) else {
        return;
    };
    let slots = op_slots(history, concurrency);
    for r in results.iter_mut() {
        let mut text = String::new();
        let mut all_confirmed = true;
        let mut confirmable = true;
        let mut any = false;
        let anomalies = r
            .details
            .get("anomalies")
            .and_then(Value::as_object)
            .cloned();
        for (name, a) in anomalies.iter().flatten() {
            let instances = a.get("instances").and_then(Value::as_array);
            for inst in instances.into_iter().flatten().take(CYCLES_PER_TYPE) {
                let Some(steps) = inst.get("steps").and_then(Value::as_array) else {
                    continue;
                };
                let ids: Vec<u64> = steps.iter().filter_map(|s| s["from"].as_u64()).collect();
                if ids.is_empty() {
                    continue;
                }
                any = true;
                let line_of = |ix: &u64| line_for(history, &slots, &log, *ix);
                let txns: Vec<(String, Option<&Value>)> = ids
                    .iter()
                    .map(|ix| (format!("T{ix}"), line_of(ix)))
                    .collect();
                let lines: HashMap<u64, &Value> = ids
                    .iter()
                    .filter_map(|ix| Some((*ix, line_of(ix)?)))
                    .collect();
                let names: Vec<String> = txns.iter().map(|(n, _)| n.clone()).collect();
                let _ = writeln!(
                    text,
                    "{name} cycle {} -> {}: statements as the clients sent and received them (ms since the log opened)",
                    names.join(" -> "),
                    names[0]
                );
                text.push_str(&render(&txns));
                if !lines.values().any(|l| is_postgres(l)) {
                    // Only PostgreSQL's session asks the server about each transaction.
                    confirmable = false;
                    continue;
                }
                let c = confirm(steps, &lines, &log);
                all_confirmed &= c.confirmed;
                for l in &c.lines {
                    let _ = writeln!(text, "  {l}");
                }
            }
        }
        if !any {
            continue;
        }
        if let Value::Object(d) = &mut r.details {
            d.insert("statement_log".into(), json!(text));
            if confirmable {
                d.insert("statement_log_confirmed".into(), json!(all_confirmed));
            }
        }
    }
}

/// What the statement log says of one cycle, independently of the checker's inference.
#[derive(Debug)]
pub struct Confirmation {
    /// Every transaction committed at SERIALIZABLE and every edge is shown by statements.
    pub confirmed: bool,
    /// What was shown, and what was not.
    pub lines: Vec<String>,
}

/// True for a line PostgreSQL's session wrote: it asked the server about the transaction
/// (backend, xid, isolation, status after COMMIT), so the line can confirm what the
/// server said. (Logs written before lines named their database have a `pid` only.)
fn is_postgres(line: &Value) -> bool {
    line["database"] == "postgresql"
        || (line.get("database").is_none() && line.get("pid").is_some())
}

fn statements(line: &Value) -> &[Value] {
    line["statements"].as_array().map_or(&[], Vec::as_slice)
}

fn is_table_write(sql: &str) -> bool {
    sql.starts_with("UPDATE lists") || sql.starts_with("INSERT INTO lists")
}

/// The list a SELECT of `key` answered: Some(None) for no row, None for an error.
fn selects(line: &Value, key: &Value) -> Vec<(u64, Option<Vec<i64>>)> {
    statements(line)
        .iter()
        .filter(|s| {
            s["sql"]
                .as_str()
                .is_some_and(|q| q.starts_with("SELECT v FROM lists"))
                && s["params"].get(0) == Some(key)
        })
        .filter_map(|s| {
            let rows = s["result"].get("rows")?.as_array()?;
            let list = rows.first().map(|r| {
                r.as_array()
                    .map(|l| l.iter().filter_map(Value::as_i64).collect())
                    .unwrap_or_default()
            });
            Some((s["sent_us"].as_u64().unwrap_or(0), list))
        })
        .collect()
}

/// The statements that appended `value` to `key`, with the rows each affected.
fn appends<'a>(line: &'a Value, key: &Value, value: &Value) -> Vec<(&'a str, u64)> {
    statements(line)
        .iter()
        .filter(|s| {
            s["sql"].as_str().is_some_and(is_table_write)
                && s["params"].get(0) == Some(key)
                && s["params"].get(1) == Some(value)
        })
        .map(|s| {
            let verb = s["sql"]
                .as_str()
                .and_then(|q| q.split(' ').next())
                .unwrap_or("?");
            (verb, s["result"]["rows_affected"].as_u64().unwrap_or(0))
        })
        .collect()
}

/// Checks a cycle's transactions and edges against the statement log (`lines`: the
/// cycle's transactions; `all`: every line, where a ww edge's order is looked for in
/// what any transaction's SELECT was answered).
pub fn confirm(
    steps: &[Value],
    lines: &HashMap<u64, &Value>,
    all: &HashMap<(u64, u64), Value>,
) -> Confirmation {
    let mut out = Vec::new();
    let mut ok = true;
    for s in steps {
        let Some(t) = s["from"].as_u64() else {
            continue;
        };
        let Some(l) = lines.get(&t) else {
            ok = false;
            out.push(format!("T{t}: not in the statement log"));
            continue;
        };
        let sts = statements(l);
        let answered = |sql: &str| {
            sts.iter()
                .find(|x| x["sql"].as_str().is_some_and(|q| q.starts_with(sql)))
                .map(|x| &x["result"])
        };
        let mut bad = Vec::new();
        if l["outcome"] != "ok" {
            bad.push("the op did not end ok");
        }
        if answered("BEGIN ISOLATION LEVEL SERIALIZABLE") != Some(&json!("ok")) {
            bad.push("no BEGIN ISOLATION LEVEL SERIALIZABLE answered ok");
        }
        if l["isolation"] != "serializable" {
            bad.push("transaction_isolation inside it was not serializable");
        }
        if answered("SELECT pg_current_xact_id_if_assigned")
            .is_none_or(|r| r.get("error").is_some())
        {
            bad.push("not shown unaborted before COMMIT");
        }
        if answered("COMMIT") != Some(&json!("ok")) {
            bad.push("COMMIT not answered ok");
        }
        let wrote = !l["xid"].is_null();
        if wrote && l["xact_status"] != "committed" {
            bad.push("pg_xact_status(xid) after COMMIT was not committed");
        }
        if bad.is_empty() {
            out.push(format!(
                "T{t}: committed at SERIALIZABLE (BEGIN ISOLATION LEVEL SERIALIZABLE; transaction_isolation = serializable; answered before COMMIT, so not aborted; COMMIT ok{})",
                if wrote { format!("; pg_xact_status({}) = committed", l["xid"].as_str().unwrap_or("?")) } else { "; wrote nothing".into() }
            ));
        } else {
            ok = false;
            out.push(format!("T{t}: NOT confirmed: {}", bad.join("; ")));
        }
    }
    for s in steps {
        let (Some(a), Some(b)) = (s["from"].as_u64(), s["to"].as_u64()) else {
            continue;
        };
        let kind = s["type"].as_str().unwrap_or("?");
        let d = &s["detail"];
        let key = &d["key"];
        let (la, lb) = (lines.get(&a), lines.get(&b));
        let shown = match (kind, la, lb) {
            ("rw", Some(la), Some(lb)) => {
                let v = &d["value'"];
                let vi = v.as_i64();
                let missed = selects(la, key).into_iter().find(|(_, l)| {
                    l.as_ref()
                        .is_none_or(|l| !vi.is_some_and(|x| l.contains(&x)))
                });
                let wrote = appends(lb, key, v);
                match missed {
                    Some((at, list)) if wrote.iter().any(|(_, n)| *n == 1) => Some(format!(
                        "T{a} -rw-> T{b}: T{a}'s SELECT of key {key} (sent at {:.3} ms) found {}, without {v}; T{b} appended {v} to key {key} ({})",
                        at as f64 / 1000.0,
                        match list { None => "NO ROW".to_string(), Some(l) => format!("{l:?}") },
                        wrote.iter().map(|(verb, n)| format!("{verb}: {n} row(s)")).collect::<Vec<_>>().join(", then ")
                    )),
                    _ => None,
                }
            }
            ("wr", Some(la), Some(lb)) => {
                let v = &d["value"];
                let vi = v.as_i64();
                let seen = selects(lb, key).into_iter().find(|(_, l)| {
                    l.as_ref()
                        .is_some_and(|l| vi.is_some_and(|x| l.contains(&x)))
                });
                let wrote = appends(la, key, v);
                match seen {
                    Some((at, Some(list))) if wrote.iter().any(|(_, n)| *n == 1) => Some(format!(
                        "T{a} -wr-> T{b}: T{b}'s SELECT of key {key} (sent at {:.3} ms) found {list:?}, holding {v}, which T{a} appended",
                        at as f64 / 1000.0
                    )),
                    _ => None,
                }
            }
            ("ww", Some(la), Some(lb)) => {
                let (v1, v2) = (&d["value"], &d["value'"]);
                let (w1, w2) = (appends(la, key, v1), appends(lb, key, v2));
                let pos =
                    |l: &[i64], v: &Value| v.as_i64().and_then(|x| l.iter().position(|e| *e == x));
                // A SELECT of the key, by any transaction, answered with v1 right before v2.
                let order = all
                    .values()
                    .flat_map(|l| selects(l, key))
                    .find_map(|(at, l)| {
                        let l = l?;
                        let (p1, p2) = (pos(&l, v1)?, pos(&l, v2)?);
                        (p1 + 1 == p2).then_some(at)
                    });
                match order {
                    Some(at) if w1.iter().any(|(_, n)| *n == 1) && w2.iter().any(|(_, n)| *n == 1) => Some(format!(
                        "T{a} -ww-> T{b}: T{a} appended {v1} and T{b} appended {v2} to key {key} ({} / {}); a SELECT of key {key} sent at {:.3} ms was answered with {v2} right after {v1}",
                        w1.iter().map(|(verb, n)| format!("{verb}: {n} row(s)")).collect::<Vec<_>>().join(", then "),
                        w2.iter().map(|(verb, n)| format!("{verb}: {n} row(s)")).collect::<Vec<_>>().join(", then "),
                        at as f64 / 1000.0
                    )),
                    _ => None,
                }
            }
            _ => None,
        };
        match shown {
            Some(line) => out.push(line),
            None => {
                ok = false;
                out.push(format!(
                    "T{a} -{kind}-> T{b}: NOT shown by the statement log"
                ));
            }
        }
    }
    // Commit order: when each COMMIT was answered, the WAL position asked right after it,
    // and the commit timestamp (track_commit_timestamp=on).
    let mut order: Vec<(u64, String)> = lines
        .iter()
        .filter_map(|(t, l)| {
            let c = statements(l).iter().find(|s| s["sql"] == "COMMIT")?;
            let done = c["done_us"].as_u64()?;
            let first = statements(l).get(1).and_then(|s| s["sent_us"].as_u64()).unwrap_or(0);
            Some((
                done,
                format!(
                    "T{t}: first statement (its snapshot) sent at {:.3} ms, COMMIT answered at {:.3} ms, WAL position after it {}, commit timestamp {}",
                    first as f64 / 1000.0,
                    done as f64 / 1000.0,
                    l["commit_lsn_after"].as_str().unwrap_or("-"),
                    l["commit_timestamp"].as_str().unwrap_or("-")
                ),
            ))
        })
        .collect();
    order.sort();
    out.push("commit order:".into());
    out.extend(order.into_iter().map(|(_, l)| format!("  {l}")));
    out.push(if ok {
        "CONFIRMED by the statement log: all committed at SERIALIZABLE, every edge shown by the statements and answers".into()
    } else {
        "NOT confirmed by the statement log".into()
    });
    Confirmation {
        confirmed: ok,
        lines: out,
    }
}

/// The transactions' summary lines, then every statement of them ordered by send time.
pub fn render(txns: &[(String, Option<&Value>)]) -> String {
    let mut out = String::new();
    let mut rows: Vec<(u64, String)> = Vec::new();
    for (name, line) in txns {
        let Some(l) = line else {
            let _ = writeln!(out, "  {name}: not in the statement log");
            continue;
        };
        let s = |f: &str| match &l[f] {
            Value::Null => "-".to_string(),
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        if is_postgres(l) {
            let _ = writeln!(
                out,
                "  {name}: {} on {} pid {}, xid {}, {}; xact_status {}, commit LSN <= {}, commit time {}",
                s("outcome"),
                s("node"),
                s("pid"),
                s("xid"),
                s("isolation"),
                s("xact_status"),
                s("commit_lsn_after"),
                s("commit_timestamp")
            );
        } else {
            let _ = writeln!(out, "  {name}: {} on {}", s("outcome"), s("node"));
        }
        for st in l["statements"].as_array().into_iter().flatten() {
            let sent = st["sent_us"].as_u64().unwrap_or(0);
            let done = st["done_us"].as_u64().unwrap_or(0);
            let result = match &st["result"] {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            rows.push((
                sent,
                format!(
                    "  {:>10.3} ms  {:<7} {} {} -> {}  (answered at {:.3} ms)",
                    sent as f64 / 1000.0,
                    name,
                    st["sql"].as_str().unwrap_or("?"),
                    st["params"],
                    result,
                    done as f64 / 1000.0,
                ),
            ));
        }
    }
    rows.sort_by_key(|(t, _)| *t);
    for (_, r) in rows {
        out.push_str(&r);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitbrain_checkers::Op;

    fn op(index: u64, process: u64, t: OpType) -> Op {
        let mut o = Op::new(Process::Client(process), t, "txn", json!([]));
        o.index = index;
        o
    }

    #[test]
    fn ops_are_matched_to_log_lines_by_slot_and_sequence_across_fresh_processes() {
        // Two slots; process 0 ends info, process 2 (slot 0 again) takes over.
        let h = History::new(vec![
            op(0, 0, OpType::Invoke),
            op(1, 1, OpType::Invoke),
            op(2, 0, OpType::Info),
            op(3, 2, OpType::Invoke),
            op(4, 1, OpType::Ok),
            op(5, 2, OpType::Ok),
        ])
        .unwrap();
        let m = op_slots(&h, 2);
        assert_eq!(m[&2], (0, 0));
        assert_eq!(m[&4], (1, 0));
        assert_eq!(m[&5], (0, 1), "the second op of slot 0, by a fresh process");
        // A line is used only when it recorded the op's completion value.
        let log = HashMap::from([
            ((1, 0), json!({"value": []})),
            ((0, 1), json!({"value": [["r", 1, [7]]]})),
        ]);
        assert!(line_for(&h, &m, &log, 4).is_some());
        assert!(line_for(&h, &m, &log, 5).is_none(), "another op's line");
    }

    #[test]
    fn statements_of_several_transactions_are_merged_by_send_time() {
        let a = json!({"outcome": "ok", "pid": 7, "statements": [
            {"sent_us": 10, "done_us": 11, "sql": "BEGIN", "params": [], "result": "ok"},
            {"sent_us": 30, "done_us": 31, "sql": "COMMIT", "params": [], "result": "ok"}]});
        let b = json!({"outcome": "ok", "pid": 8, "statements": [
            {"sent_us": 20, "done_us": 21, "sql": "SELECT v FROM lists WHERE k = $1", "params": [146], "result": {"rows": []}}]});
        let text = render(&[
            ("T1".into(), Some(&a)),
            ("T2".into(), Some(&b)),
            ("T3".into(), None),
        ]);
        let order: Vec<usize> = ["BEGIN", "SELECT v", "COMMIT"]
            .iter()
            .map(|s| text.find(s).unwrap())
            .collect();
        assert!(order[0] < order[1] && order[1] < order[2], "{text}");
        assert!(text.contains("T3: not in the statement log"), "{text}");
        assert!(text.contains("pid 7"), "{text}");
    }

    /// A statement-log line of a committed serializable transaction with `stmts`
    /// (sql, params, result) between its BEGIN and COMMIT.
    #[test]
    fn a_line_of_another_database_is_shown_without_postgresql_fields() {
        let maria = json!({"database": "mariadb", "outcome": "ok", "node": "n2", "statements": [
            {"sent_us": 1000, "done_us": 1200, "sql": "START TRANSACTION", "params": [], "result": "ok"}]});
        assert!(!is_postgres(&maria));
        let text = render(&[("T3".into(), Some(&maria))]);
        assert!(text.contains("T3: ok on n2"), "{text}");
        assert!(!text.contains("xid"), "{text}");
        assert!(is_postgres(&json!({"database": "postgresql"})));
        assert!(
            is_postgres(&json!({"pid": 7})),
            "a log from before the field"
        );
    }

    fn txn(xid: Option<&str>, stmts: &[(&str, Value, Value)], t0: u64) -> Value {
        let mut sts = vec![
            json!({"sent_us": t0, "done_us": t0 + 1, "sql": "BEGIN ISOLATION LEVEL SERIALIZABLE", "params": [], "result": "ok"}),
        ];
        for (i, (sql, params, result)) in stmts.iter().enumerate() {
            let at = t0 + 10 * (i as u64 + 1);
            sts.push(json!({"sent_us": at, "done_us": at + 1, "sql": sql, "params": params, "result": result}));
        }
        let end = t0 + 100;
        sts.push(json!({"sent_us": end, "done_us": end + 1, "sql": super::super::session::PRE_COMMIT, "params": [], "result": {"rows": [[xid, "serializable"]]}}));
        sts.push(json!({"sent_us": end + 2, "done_us": end + 3, "sql": "COMMIT", "params": [], "result": "ok"}));
        json!({"outcome": "ok", "isolation": "serializable", "xid": xid,
               "xact_status": xid.map(|_| "committed"), "statements": sts})
    }

    const SELECT: &str = "SELECT v FROM lists WHERE k = $1";
    const UPDATE: &str = "UPDATE lists SET v = v || $2::bigint WHERE k = $1";
    const UPSERT: &str = "INSERT INTO lists AS l (k, v) VALUES ($1, ARRAY[$2::bigint]) ON CONFLICT (k) DO UPDATE SET v = l.v || $2::bigint";

    /// The CI cycle's shape: T1 found no row for key 146 that T2 created; T3 saw T2's row
    /// but not T1's append to key 144.
    fn ci_cycle(t1_read_of_146: Value) -> (Vec<Value>, HashMap<u64, Value>) {
        let steps = vec![
            json!({"from": 1, "to": 2, "type": "rw", "detail": {"key": 146, "read": [], "value'": 7259}}),
            json!({"from": 2, "to": 3, "type": "wr", "detail": {"key": 146, "value": 7260}}),
            json!({"from": 3, "to": 1, "type": "rw", "detail": {"key": 144, "read": [7268], "value'": 7272}}),
        ];
        let t1 = txn(
            Some("801"),
            &[
                (UPDATE, json!([144, 7272]), json!({"rows_affected": 1})),
                (SELECT, json!([146]), t1_read_of_146),
                (SELECT, json!([144]), json!({"rows": [[7268, 7272]]})),
            ],
            0,
        );
        let t2 = txn(
            Some("800"),
            &[
                (UPDATE, json!([146, 7259]), json!({"rows_affected": 0})),
                (UPSERT, json!([146, 7259]), json!({"rows_affected": 1})),
                (UPDATE, json!([146, 7260]), json!({"rows_affected": 1})),
            ],
            5,
        );
        let t3 = txn(
            None,
            &[
                (SELECT, json!([146]), json!({"rows": [[7259, 7260]]})),
                (SELECT, json!([144]), json!({"rows": [[7268]]})),
            ],
            200,
        );
        (steps, HashMap::from([(1, t1), (2, t2), (3, t3)]))
    }

    #[test]
    fn a_cycle_whose_reads_and_commits_are_in_the_log_is_confirmed() {
        let (steps, lines) = ci_cycle(json!({"rows": []}));
        let refs: HashMap<u64, &Value> = lines.iter().map(|(k, v)| (*k, v)).collect();
        let c = confirm(&steps, &refs, &HashMap::new());
        assert!(c.confirmed, "{:#?}", c.lines);
        let text = c.lines.join("\n");
        assert!(text.contains("found NO ROW, without 7259"), "{text}");
        assert!(
            text.contains("UPDATE: 0 row(s), then INSERT: 1 row(s)"),
            "{text}"
        );
    }

    #[test]
    fn a_cycle_the_log_contradicts_or_an_uncommitted_member_is_not_confirmed() {
        // The server answered the read with the row: the history's empty read was ours.
        let (steps, lines) = ci_cycle(json!({"rows": [[7259]]}));
        let refs: HashMap<u64, &Value> = lines.iter().map(|(k, v)| (*k, v)).collect();
        let c = confirm(&steps, &refs, &HashMap::new());
        assert!(!c.confirmed);
        assert!(
            c.lines.iter().any(|l| l.contains("T1 -rw-> T2: NOT shown")),
            "{:#?}",
            c.lines
        );
        // A member whose COMMIT quietly rolled back (an aborted transaction's COMMIT).
        let (steps, mut lines) = ci_cycle(json!({"rows": []}));
        lines.get_mut(&2).unwrap()["xact_status"] = json!("aborted");
        let refs: HashMap<u64, &Value> = lines.iter().map(|(k, v)| (*k, v)).collect();
        let c = confirm(&steps, &refs, &HashMap::new());
        assert!(!c.confirmed);
        assert!(
            c.lines.iter().any(|l| l.contains("T2: NOT confirmed")),
            "{:#?}",
            c.lines
        );
        // A member that ran at another isolation level.
        let (steps, mut lines) = ci_cycle(json!({"rows": []}));
        lines.get_mut(&3).unwrap()["isolation"] = json!("repeatable read");
        let refs: HashMap<u64, &Value> = lines.iter().map(|(k, v)| (*k, v)).collect();
        assert!(!confirm(&steps, &refs, &HashMap::new()).confirmed);
    }

    #[test]
    fn a_ww_edge_needs_both_appends_and_an_answer_that_orders_them() {
        let steps = vec![
            json!({"from": 1, "to": 2, "type": "ww", "detail": {"key": 262, "value": 13154, "value'": 13156}}),
        ];
        let t1 = txn(
            Some("8541"),
            &[(UPSERT, json!([262, 13154]), json!({"rows_affected": 1}))],
            0,
        );
        let t2 = txn(
            Some("8545"),
            &[(UPDATE, json!([262, 13156]), json!({"rows_affected": 1}))],
            200,
        );
        let lines = HashMap::from([(1, &t1), (2, &t2)]);
        let reader = |list: Value| {
            txn(
                None,
                &[(SELECT, json!([262]), json!({"rows": [list]}))],
                400,
            )
        };
        let all = HashMap::from([((0, 0), reader(json!([13154, 13156, 13160])))]);
        let c = confirm(&steps, &lines, &all);
        assert!(c.confirmed, "{:#?}", c.lines);
        // Answered the other way round: the order is not the server's.
        let all = HashMap::from([((0, 0), reader(json!([13156, 13154])))]);
        assert!(!confirm(&steps, &lines, &all).confirmed);
        assert!(!confirm(&steps, &lines, &HashMap::new()).confirmed);
    }
}
