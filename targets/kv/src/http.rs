//! The client API: HTTP/1.1 with JSON bodies (see the crate README for the protocol).

use crate::node::{ClientOp, ShardEvent, ShardHandle};
use crate::shard::ShardMap;
use serde_json::{json, Value};
use splitbrain_target_runtime::http::{clock_admin, Request, Response};
use splitbrain_target_runtime::OffsetClock;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct Api {
    /// This node's id.
    pub id: u64,
    /// Read mode name.
    pub read_mode: &'static str,
    /// Names of the bugs turned on.
    pub bugs: Vec<String>,
    /// The node's clock.
    pub clock: OffsetClock,
    /// Keys to shards to replicas.
    pub map: ShardMap,
    /// The shards this node replicates.
    pub shards: Arc<BTreeMap<u32, ShardHandle>>,
    /// How long the shard threads wait; the HTTP layer waits a little longer.
    pub request_timeout: Duration,
}

impl Api {
    /// Answers one request.
    pub async fn handle(&self, req: Request) -> Response {
        if let Some(resp) = clock_admin(&self.clock, &req) {
            return resp;
        }
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/health") => Response::ok(json!({"ok": true})),
            ("GET", "/status") => Response::ok(self.status()),
            ("POST", "/kv") => match parse_op(&req.body) {
                Ok(op) => Response::ok(self.kv(op).await),
                Err(detail) => Response::error(400, "bad-request", detail),
            },
            _ => Response::no_route(&req),
        }
    }

    fn status(&self) -> Value {
        let shards: Vec<Value> = (0..self.map.shards())
            .map(|s| match self.shards.get(&s) {
                Some(handle) => match handle.status.lock() {
                    Ok(st) => serde_json::to_value(&*st).unwrap_or(Value::Null),
                    Err(_) => Value::Null,
                },
                None => json!({
                    "shard": s, "replicas": self.map.replicas(s), "role": null, "leader": null,
                    "term": 0, "commit_index": 0, "applied_index": 0
                }),
            })
            .collect();
        json!({
            "id": self.id,
            "read_mode": self.read_mode,
            "bugs": self.bugs,
            "clock_offset_ms": self.clock.offset_ms(),
            "shards": shards,
        })
    }

    async fn kv(&self, op: ClientOp) -> Value {
        let shard = self.map.shard_of(&op.key);
        let Some(handle) = self.shards.get(&shard) else {
            // Not a replica of this key's shard: a definite failure, no leader to hint.
            return json!({"type": "fail", "error": "not-leader", "leader": null});
        };
        let is_read = op.f == "read";
        let (tx, rx) = oneshot::channel();
        if handle
            .tx
            .send(ShardEvent::Client { op, reply: tx })
            .is_err()
        {
            return json!({"type": "fail", "error": "unavailable"});
        }
        let wait = self.request_timeout + Duration::from_millis(500);
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(body)) => body,
            // The shard thread answers every request; this only happens if it is stuck or
            // gone, after the request may have been proposed.
            _ if is_read => json!({"type": "fail", "error": "timeout"}),
            _ => json!({"type": "info", "error": "timeout"}),
        }
    }
}

/// Validates a `POST /kv` body.
pub fn parse_op(body: &[u8]) -> Result<ClientOp, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let f = v
        .get("f")
        .and_then(Value::as_str)
        .ok_or("missing string field \"f\"")?;
    if !matches!(f, "read" | "write" | "cas" | "append") {
        return Err(format!("unknown f {f:?}: use read, write, cas or append"));
    }
    let key = match v.get("key") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err("missing field \"key\" (string or number)".into()),
    };
    let value = v.get("value").cloned().unwrap_or(Value::Null);
    if f == "cas" && value.as_array().is_none_or(|a| a.len() != 2) {
        return Err("cas needs \"value\": [expected, new]".into());
    }
    Ok(ClientOp {
        f: f.to_string(),
        key,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ops() {
        let op = parse_op(br#"{"f":"cas","key":3,"value":[null,1]}"#).unwrap();
        assert_eq!((op.f.as_str(), op.key.as_str()), ("cas", "3"));
        assert!(parse_op(br#"{"f":"cas","key":"k","value":1}"#).is_err());
        assert!(parse_op(br#"{"f":"delete","key":"k"}"#).is_err());
        assert!(parse_op(b"nope").is_err());
    }
}
