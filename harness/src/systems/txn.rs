//! The bundled two-phase-commit database (`targets/txn`): how to start it and its client.
//!
//! Protocol: `POST /txn {"ops": [[f, key, value], ...]}` answers `{"type": "ok", "value":
//! [...completed micro-ops]}`, `{"type": "fail", "error": ...}` (certainly not committed) or
//! `{"type": "info", ...}`. The node a client talks to coordinates its transaction, so a
//! refused connection is a definite failure and the client may try the next node.
//!
//! Workload ops map onto transactions: `txn` is sent as is (list-append, rw-register);
//! the bank's `transfer` becomes two `add` micro-ops (the database refuses to take a
//! balance below zero) and its `read` reads every account.

use super::{
    bundled_node_args, post_json, request_timeout_args, BoxFuture, BugInfo, Client, Completion,
    Invocation, Posted, Profile, Target, TargetOptions,
};
use crate::workload::bank::{BANK_ACCOUNTS, BANK_HOT_ACCOUNT};
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The bundled 2PC database over strict two-phase locking.
pub struct TxnTarget;

/// How long a prepared participant on node n1 waits for the decision before it asks
/// (milliseconds). Below the shortest decision path a `slow` fault can make (vote and
/// decision each delayed by its smallest delay, 20 ms less a quarter of jitter).
const HASTY_IN_DOUBT_TIMEOUT_MS: u64 = 25;
/// The same for every other node, at least: they wait the decision out (see
/// [`in_doubt_timeout_ms`]).
const PATIENT_IN_DOUBT_TIMEOUT_MS: u64 = 2_000;

/// Every participant of a transaction waits the same time for the decision (from its own
/// prepare to the commit, whose delays on its link cancel out), so with one timeout
/// everywhere a slow link makes all of them give up or none — and `unilateral-abort`
/// shows only when noise puts that time near the timeout, which is luck. n1 (the owner of
/// the bank's hot account, key 0) gives up after 25 ms and the others wait: any slow link
/// on the decision path of a transaction that spans n1 and another node then splits it.
/// A correct participant only asks its coordinator when the timeout passes.
///
/// The others wait twice the client's op timeout, longer than any decision the
/// coordinator still makes (it decides within its request timeout, shorter than that).
fn in_doubt_timeout_ms(i: usize, op_timeout: Duration) -> u64 {
    if i == 0 {
        HASTY_IN_DOUBT_TIMEOUT_MS
    } else {
        let twice = u64::try_from(op_timeout.as_millis().saturating_mul(2)).unwrap_or(u64::MAX);
        twice.max(PATIENT_IN_DOUBT_TIMEOUT_MS)
    }
}

const BUGS: &[BugInfo<'static>] = &[
    BugInfo {
        name: "dirty-read",
        description: "reads ignore other transactions' locks and see their uncommitted writes; aborted and intermediate reads (G1a, G1b) (fault: none needed; list-append)",
    },
    BugInfo {
        name: "early-lock-release",
        description: "a participant releases a transaction's locks when it votes yes, before the decision; lost updates and G-single / G2 cycles under contention (fault: none needed)",
    },
    BugInfo {
        name: "unilateral-abort",
        description: "a prepared participant that hears no decision in time aborts on its own while the coordinator commits; partial commits (fault: slow; partition, pause)",
    },
    BugInfo {
        name: "no-prepare-fsync",
        description: "prepare records are not fsync'd and stay in a user-space buffer; kill -9 makes a participant forget a prepared transaction that then commits elsewhere (fault: kill)",
    },
];

impl Target for TxnTarget {
    fn profile(&self) -> Profile<'_> {
        Profile::new(
            "txn",
            "two-phase-commit database over strict two-phase locking, keys partitioned over nodes, durable WAL; read modes = isolation levels",
            "splitbrain-txn",
        )
        .bugs(BUGS)
        .read_modes(&["serializable", "read-committed"])
        .workloads(&["list-append", "rw-register", "bank"])
    }

    fn node_args(
        &self,
        i: usize,
        client_addr: SocketAddr,
        peer_listen: SocketAddr,
        peer_addrs: &[SocketAddr],
        data_dir: &std::path::Path,
        opts: &TargetOptions,
    ) -> Vec<String> {
        let mut args = bundled_node_args(
            i,
            client_addr,
            peer_listen,
            peer_addrs,
            data_dir,
            &opts.bugs,
        );
        if let Some(mode) = &opts.read_mode {
            args.push("--isolation".into());
            args.push(mode.clone());
        }
        args.push("--in-doubt-timeout-ms".into());
        args.push(in_doubt_timeout_ms(i, opts.op_timeout).to_string());
        // The coordinator decides (abort) before the client gives up, so most
        // transactions end ok or fail rather than info.
        args.extend(request_timeout_args(opts.op_timeout, 200));
        args
    }

    // No node leads (the default `leaders`): every node coordinates its own clients'
    // transactions.

    fn client(&self, addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> Box<dyn Client> {
        txn_client(addrs, home, opts)
    }
}

/// A client of `POST /txn` (the bundled database's, and any `exec` target's that serves
/// `list-append`, `rw-register` or `bank`): the home node first, the next one when a
/// connection is refused.
pub(crate) fn txn_client(
    addrs: &[SocketAddr],
    home: usize,
    opts: &TargetOptions,
) -> Box<dyn Client> {
    Box::new(TxnClient {
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(2)
            .build()
            .unwrap_or_default(),
        addrs: addrs.to_vec(),
        home: home % addrs.len().max(1),
        timeout: opts.op_timeout,
    })
}

struct TxnClient {
    http: reqwest::Client,
    addrs: Vec<SocketAddr>,
    home: usize,
    timeout: Duration,
}

/// The transaction a workload op stands for, or why it has none.
fn micro_ops(op: &Invocation) -> Result<Value, String> {
    match op.f.as_str() {
        "txn" if op.value.is_array() => Ok(op.value.clone()),
        "transfer" => {
            let (from, to, amount) = (
                &op.value["from"],
                &op.value["to"],
                op.value["amount"].as_i64(),
            );
            match amount {
                // Every bank transaction locks its accounts in one order, the hot account
                // last (as reads do): two transactions never wait for each other in a
                // cycle, so contention queues transfers instead of deadlocking them.
                Some(a) if !from.is_null() && !to.is_null() => {
                    let (from_op, to_op) = (json!(["add", from, -a]), json!(["add", to, a]));
                    if lock_order(from) <= lock_order(to) {
                        Ok(json!([from_op, to_op]))
                    } else {
                        Ok(json!([to_op, from_op]))
                    }
                }
                _ => Err(format!("transfer needs from, to and amount: {}", op.value)),
            }
        }
        // The hot account last: a read walks the accounts one owner at a time and holds
        // each shared lock to its commit, so the account every transfer wants is held
        // only from the read's last step, not through a slow link to every other owner.
        "read" => {
            let mut accounts: Vec<Value> = (0..BANK_ACCOUNTS).map(Value::from).collect();
            accounts.sort_by_key(lock_order);
            Ok(accounts.iter().map(|k| json!(["r", k, null])).collect())
        }
        other => Err(format!("the txn target cannot perform {other:?}")),
    }
}

/// Where a bank account comes in the one order every bank transaction locks in: by
/// number, the hot account last.
fn lock_order(account: &Value) -> (bool, u64) {
    let k = account.as_u64().unwrap_or(u64::MAX);
    (k == BANK_HOT_ACCOUNT, k)
}

/// The recorded value of an ok op, from the completed micro-ops.
fn ok_value(op: &Invocation, completed: &Value) -> Option<Value> {
    match op.f.as_str() {
        "txn" => completed.is_array().then(|| completed.clone()),
        // A bank read: {account: balance} from the read results.
        "read" => {
            let mut balances = serde_json::Map::new();
            for mop in completed.as_array()? {
                let key = mop.get(1)?;
                let name = key
                    .as_u64()
                    .map(|k| k.to_string())
                    .or_else(|| key.as_str().map(str::to_string))?;
                balances.insert(name, mop.get(2).cloned().unwrap_or(Value::Null));
            }
            Some(Value::Object(balances))
        }
        _ => Some(op.value.clone()),
    }
}

/// Result of one HTTP attempt.
enum Attempt {
    Done(Completion),
    /// The node could not be reached: the transaction never started there.
    Unreachable,
}

impl TxnClient {
    async fn attempt(
        &self,
        node: usize,
        op: &Invocation,
        ops: &Value,
        deadline: Instant,
    ) -> Attempt {
        let addr = self.addrs[node];
        let name = Some(format!("n{}", node + 1));
        let remaining = deadline.saturating_duration_since(Instant::now());
        let body = json!({ "ops": ops });
        let v = match post_json(&self.http, format!("http://{addr}/txn"), &body, remaining).await {
            Posted::Answer(v) => v,
            Posted::Unreachable => return Attempt::Unreachable,
            Posted::Unknown(why) => {
                return Attempt::Done(Completion::info(op.value.clone(), why, name))
            }
        };
        let done = match v["type"].as_str() {
            Some("ok") => match ok_value(op, &v["value"]) {
                Some(value) => Completion {
                    op_type: OpType::Ok,
                    value,
                    node: name,
                    error: None,
                },
                // Committed, but we cannot say what it read: unknown, not fail.
                None => Completion::info(
                    op.value.clone(),
                    format!("ok answer without micro-op results: {v}"),
                    name,
                ),
            },
            Some("fail") => Completion {
                op_type: OpType::Fail,
                value: op.value.clone(),
                node: name,
                error: v.get("error").cloned(),
            },
            _ => Completion::info(
                op.value.clone(),
                v.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string(),
                name,
            ),
        };
        Attempt::Done(done)
    }
}

impl Client for TxnClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let ops = match micro_ops(op) {
                Ok(ops) => ops,
                // Nothing was sent, so nothing happened.
                Err(e) => {
                    return Completion {
                        op_type: OpType::Fail,
                        value: op.value.clone(),
                        node: None,
                        error: Some(json!(e)),
                    }
                }
            };
            let deadline = Instant::now() + self.timeout;
            // The home node first, then the others: a node that refuses the connection
            // never began the transaction, so trying another is safe.
            for step in 0..self.addrs.len() {
                let node = (self.home + step) % self.addrs.len();
                if let Attempt::Done(c) = self.attempt(node, op, &ops, deadline).await {
                    return c;
                }
            }
            Completion {
                op_type: OpType::Fail,
                value: op.value.clone(),
                node: None,
                error: Some(json!("connection-refused")),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(f: &str, value: Value) -> Invocation {
        Invocation {
            f: f.into(),
            key: None,
            value,
        }
    }

    #[test]
    fn transfers_become_two_adds_and_reads_cover_every_account() {
        let t = micro_ops(&inv("transfer", json!({"from": 1, "to": 3, "amount": 4}))).unwrap();
        assert_eq!(t, json!([["add", 1, -4], ["add", 3, 4]]));
        let t = micro_ops(&inv(
            "transfer",
            json!({"from": BANK_HOT_ACCOUNT, "to": 2, "amount": 1}),
        ));
        assert_eq!(
            t.unwrap(),
            json!([["add", 2, 1], ["add", BANK_HOT_ACCOUNT, -1]])
        );
        let r = micro_ops(&inv("read", Value::Null)).unwrap();
        let mut keys: Vec<u64> = r
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m[1].as_u64().unwrap())
            .collect();
        assert_eq!(keys.last(), Some(&BANK_HOT_ACCOUNT));
        keys.sort_unstable();
        assert_eq!(keys, (0..BANK_ACCOUNTS).collect::<Vec<_>>());
        assert!(micro_ops(&inv("transfer", json!({"from": 1}))).is_err());
        assert!(micro_ops(&inv("cas", json!([1, 2]))).is_err());
    }

    #[test]
    fn only_n1_gives_up_on_a_decision_sooner_than_a_slow_link_delivers_it() {
        let op_timeout = Duration::from_millis(1000);
        assert_eq!(
            in_doubt_timeout_ms(0, op_timeout),
            HASTY_IN_DOUBT_TIMEOUT_MS
        );
        for i in 1..5 {
            assert_eq!(in_doubt_timeout_ms(i, op_timeout), 2_000);
        }
        assert_eq!(in_doubt_timeout_ms(3, Duration::from_secs(5)), 10_000);
    }

    #[test]
    fn bank_reads_are_recorded_as_balance_maps() {
        let done = json!([["r", 0, 10], ["r", 1, null]]);
        assert_eq!(
            ok_value(&inv("read", Value::Null), &done),
            Some(json!({"0": 10, "1": null}))
        );
        let txn = json!([["append", 2, 7]]);
        assert_eq!(ok_value(&inv("txn", txn.clone()), &txn), Some(txn));
        assert_eq!(ok_value(&inv("txn", json!([])), &json!(null)), None);
    }
}
