//! The workload client of etcd's v3 JSON gateway (grpc-gateway over the KV service: keys
//! and values base64, 64-bit numbers as decimal strings, fields left out when zero).
//!
//! `register`: `read` is `/v3/kv/range` (`serializable: true` in that read mode), `write`
//! is `/v3/kv/put`, `cas` is a `/v3/kv/txn` whose compare is the value. `append`: the
//! value is a JSON list; an append is a read-modify-write txn comparing `mod_revision`,
//! whose failure branch reads the key again, so a conflict (definite: nothing was written)
//! is retried with the fresh list.
//!
//! Outcomes: a refused connection is definite (the member never saw the request) and the
//! next member is tried; a timeout or broken connection is `info`; an etcd error is `info`
//! unless its code says the request was refused before it was proposed. A read has no
//! effect, so every read that did not succeed is `fail`, as Jepsen's etcd client does.

use crate::systems::{post_json, BoxFuture, Client, Completion, Invocation, Posted, TargetOptions};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};
use splitbrain_checkers::OpType;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Conflicting read-modify-write attempts an append makes before it gives up (`fail`).
const APPEND_ATTEMPTS: usize = 20;

/// gRPC status codes etcd gives to requests it refused before proposing them:
/// InvalidArgument (3, e.g. request too large) and ResourceExhausted (8, too many
/// requests). Anything else (Unavailable: timed out, leader changed, ...) may have been
/// applied.
const DEFINITE_CODES: [i64; 2] = [3, 8];

/// One process's client: every request to its home member first.
pub(crate) struct GatewayClient {
    http: reqwest::Client,
    addrs: Vec<SocketAddr>,
    home: usize,
    timeout: Duration,
    serializable: bool,
    /// The `append` workload: values are lists.
    lists: bool,
}

/// What one gateway request came to.
enum Reply {
    /// A successful answer's body.
    Body(Value),
    /// Every member refused the connection: certainly not applied.
    Refused,
    /// etcd answered with an error it gives only to requests it never proposed.
    Rejected(String),
    /// May or may not have been applied.
    Unknown(String),
}

impl GatewayClient {
    pub(crate) fn new(addrs: &[SocketAddr], home: usize, opts: &TargetOptions) -> GatewayClient {
        GatewayClient {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(4)
                .build()
                .unwrap_or_default(),
            addrs: addrs.to_vec(),
            home: home % addrs.len().max(1),
            timeout: opts.op_timeout,
            serializable: opts.read_mode.as_deref() == Some("serializable"),
            lists: opts.workload == "append",
        }
    }

    /// Posts `body` to `path` at the home member, then at the next ones while the
    /// connection is refused. Returns the reply and the member that gave it.
    async fn send(&self, path: &str, body: &Value, deadline: Instant) -> (Reply, usize) {
        let mut node = self.home;
        for _ in 0..self.addrs.len() {
            let url = format!("http://{}{path}", self.addrs[node]);
            let remaining = deadline.saturating_duration_since(Instant::now());
            let reply = match post_json(&self.http, url, body, remaining).await {
                Posted::Unreachable => {
                    node = (node + 1) % self.addrs.len();
                    continue;
                }
                Posted::Unknown(why) => Reply::Unknown(why),
                Posted::Answer(v) => match v.get("error") {
                    None => Reply::Body(v),
                    Some(e) => {
                        let msg = e.as_str().unwrap_or("etcd error").to_string();
                        if v["code"]
                            .as_i64()
                            .is_some_and(|c| DEFINITE_CODES.contains(&c))
                        {
                            Reply::Rejected(msg)
                        } else {
                            Reply::Unknown(msg)
                        }
                    }
                },
            };
            return (reply, node);
        }
        (Reply::Refused, node)
    }

    /// The key's current kv (`None` when absent), read in the client's read mode.
    async fn range(&self, key: &str, deadline: Instant) -> (Result<Option<Value>, String>, usize) {
        let mut body = json!({ "key": B64.encode(key) });
        if self.serializable {
            body["serializable"] = json!(true);
        }
        let (reply, node) = self.send("/v3/kv/range", &body, deadline).await;
        let kv = match reply {
            Reply::Body(v) => Ok(first_kv(&v)),
            Reply::Refused => Err("connection-refused".to_string()),
            Reply::Rejected(e) | Reply::Unknown(e) => Err(e),
        };
        (kv, node)
    }

    async fn read(&self, op: &Invocation, key: &str, deadline: Instant) -> Completion {
        let (kv, node) = self.range(key, deadline).await;
        let node = Some(member(node));
        match kv.and_then(|kv| self.decode(kv.as_ref())) {
            Ok(value) => ok(value, node),
            // A read changes nothing, so one that did not succeed certainly had no effect.
            Err(e) => failed(OpType::Fail, op, e, node),
        }
    }

    /// The workload's value of a kv: a register's JSON scalar or null, a list (empty when
    /// the key is absent).
    fn decode(&self, kv: Option<&Value>) -> Result<Value, String> {
        let value = match kv {
            Some(kv) => decode_value(kv)?,
            None => Value::Null,
        };
        Ok(match value {
            Value::Null if self.lists => json!([]),
            v => v,
        })
    }

    async fn write(&self, op: &Invocation, key: &str, deadline: Instant) -> Completion {
        let body = json!({ "key": B64.encode(key), "value": encode_value(&op.value) });
        let (reply, node) = self.send("/v3/kv/put", &body, deadline).await;
        written(op, reply, node, |_| true)
    }

    async fn cas(&self, op: &Invocation, key: &str, deadline: Instant) -> Completion {
        let (Some(expected), Some(new)) = (op.value.get(0), op.value.get(1)) else {
            return failed(OpType::Fail, op, "cas needs [expected, new]".into(), None);
        };
        let k = B64.encode(key);
        let body = json!({
            "compare": [{ "key": k, "target": "VALUE", "result": "EQUAL", "value": encode_value(expected) }],
            "success": [{ "request_put": { "key": k, "value": encode_value(new) } }],
        });
        let (reply, node) = self.send("/v3/kv/txn", &body, deadline).await;
        written(op, reply, node, succeeded)
    }

    /// Read, then a txn putting the longer list if the key's `mod_revision` is still the
    /// one read (0: absent); on a conflict the txn's failure branch returns the key as it
    /// is now, and the next attempt starts from that.
    async fn append(&self, op: &Invocation, key: &str, deadline: Instant) -> Completion {
        let (kv, node) = self.range(key, deadline).await;
        let mut kv = match kv {
            Ok(kv) => kv,
            // Nothing was written yet.
            Err(e) => return failed(OpType::Fail, op, e, Some(member(node))),
        };
        let k = B64.encode(key);
        let mut last = node;
        for _ in 0..APPEND_ATTEMPTS {
            let list = match self.decode(kv.as_ref()) {
                Ok(Value::Array(mut l)) => {
                    l.push(op.value.clone());
                    Value::Array(l)
                }
                Ok(other) => {
                    let e = format!("key {key} holds {other}, not a list");
                    return failed(OpType::Fail, op, e, Some(member(last)));
                }
                Err(e) => return failed(OpType::Fail, op, e, Some(member(last))),
            };
            let revision = kv
                .as_ref()
                .and_then(|kv| number(&kv["mod_revision"]))
                .unwrap_or(0);
            let body = json!({
                "compare": [{ "key": k, "target": "MOD", "result": "EQUAL", "mod_revision": revision.to_string() }],
                "success": [{ "request_put": { "key": k, "value": encode_value(&list) } }],
                "failure": [{ "request_range": { "key": k } }],
            });
            let (reply, node) = self.send("/v3/kv/txn", &body, deadline).await;
            last = node;
            match reply {
                Reply::Body(v) if !succeeded(&v) => {
                    // A definite conflict: the compare failed, nothing was put.
                    kv = v["responses"][0]["response_range"]
                        .get("kvs")
                        .and_then(|kvs| kvs.get(0))
                        .cloned();
                }
                reply => return written(op, reply, node, |_| true),
            }
        }
        let e = format!("conflict: {APPEND_ATTEMPTS} attempts");
        failed(OpType::Fail, op, e, Some(member(last)))
    }
}

impl Client for GatewayClient {
    fn invoke<'a>(&'a mut self, op: &'a Invocation) -> BoxFuture<'a, Completion> {
        Box::pin(async move {
            let deadline = Instant::now() + self.timeout;
            let key = match &op.key {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => return failed(OpType::Fail, op, "no key".into(), None),
            };
            match op.f.as_str() {
                "read" => self.read(op, &key, deadline).await,
                "write" => self.write(op, &key, deadline).await,
                "cas" => self.cas(op, &key, deadline).await,
                "append" => self.append(op, &key, deadline).await,
                f => failed(OpType::Fail, op, format!("etcd has no op {f:?}"), None),
            }
        })
    }
}

/// The completion of a write-like request: `ok` when the body `took` (a txn whose
/// compare held), `fail` when it certainly did not take effect, `info` otherwise.
fn written(
    op: &Invocation,
    reply: Reply,
    node: usize,
    took: impl Fn(&Value) -> bool,
) -> Completion {
    let name = Some(member(node));
    match reply {
        Reply::Body(v) if took(&v) => ok(op.value.clone(), name),
        Reply::Body(_) => failed(OpType::Fail, op, "compare-failed".into(), name),
        Reply::Refused => failed(OpType::Fail, op, "connection-refused".into(), name),
        Reply::Rejected(e) => failed(OpType::Fail, op, e, name),
        Reply::Unknown(e) => Completion::info(op.value.clone(), e, name),
    }
}

fn ok(value: Value, node: Option<String>) -> Completion {
    Completion {
        op_type: OpType::Ok,
        value,
        node,
        error: None,
    }
}

fn failed(op_type: OpType, op: &Invocation, error: String, node: Option<String>) -> Completion {
    Completion {
        op_type,
        value: op.value.clone(),
        node,
        error: Some(Value::String(error)),
    }
}

fn member(i: usize) -> String {
    format!("n{}", i + 1)
}

/// A txn's `succeeded` (left out of the body when false).
fn succeeded(v: &Value) -> bool {
    v["succeeded"].as_bool().unwrap_or(false)
}

/// The first kv of a range answer (`kvs` is left out when there is none).
fn first_kv(v: &Value) -> Option<Value> {
    v.get("kvs").and_then(|kvs| kvs.get(0)).cloned()
}

/// A workload value as stored: its JSON text, base64.
fn encode_value(v: &Value) -> String {
    B64.encode(v.to_string())
}

/// The workload value a kv holds (its `value` is base64 of JSON text; an empty value is
/// left out of the answer).
fn decode_value(kv: &Value) -> Result<Value, String> {
    let Some(b64) = kv.get("value").and_then(Value::as_str) else {
        return Ok(Value::Null);
    };
    let bytes = B64
        .decode(b64)
        .map_err(|e| format!("value is not base64: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "value {:?} is not JSON: {e}",
            String::from_utf8_lossy(&bytes)
        )
    })
}

/// A 64-bit number the gateway prints as a decimal string (or, leniently, a number).
fn number(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => s.parse().ok(),
        other => other.as_u64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_the_gateway_encoding() {
        for v in [json!(3), json!([1, 2, 9]), json!("x")] {
            let kv = json!({ "value": encode_value(&v) });
            assert_eq!(decode_value(&kv), Ok(v));
        }
        assert_eq!(decode_value(&json!({})), Ok(Value::Null));
        assert!(decode_value(&json!({ "value": "!!" })).is_err());
        assert!(decode_value(&json!({ "value": B64.encode("[1,") })).is_err());
    }

    #[test]
    fn a_txn_whose_compare_failed_leaves_succeeded_out() {
        assert!(succeeded(&json!({ "succeeded": true })));
        assert!(!succeeded(&json!({ "header": {} })));
        assert_eq!(number(&json!("42")), Some(42));
        assert_eq!(first_kv(&json!({ "count": "0" })), None);
    }
}
