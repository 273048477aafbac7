//! The client API: `GET /health`, `GET /status`, `POST /txn`, `GET|POST /admin/clock`.

use crate::node::NodeHandle;
use crate::types::{Key, Op, OpKind};
use serde_json::{json, Value};
use splitbrain_target_runtime::http::{clock_admin, Request, Response};
use splitbrain_target_runtime::node::NoAnswer;
use splitbrain_target_runtime::OffsetClock;
use std::time::Duration;

/// What the HTTP handlers share.
#[derive(Clone, Debug)]
pub struct Api {
    /// This node's id.
    pub id: u64,
    /// Cluster size.
    pub nodes: u64,
    /// Isolation name.
    pub isolation: &'static str,
    /// Names of the bugs turned on.
    pub bugs: Vec<String>,
    /// The node's clock.
    pub clock: OffsetClock,
    /// The node thread.
    pub node: NodeHandle,
    /// How long to wait for the core's answer (the core decides well before this).
    pub wait: Duration,
}

/// What `POST /txn` expects, for error messages.
const EXPECTED: &str = "expected {\"ops\":[[f,key,value],...]} with f one of \"r\" (value null), \"w\", \"append\", \"add\" (integer value) and key an integer or string";

impl Api {
    /// Answers one request.
    pub async fn handle(&self, req: Request) -> Response {
        if let Some(resp) = clock_admin(&self.clock, &req) {
            return resp;
        }
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/health") => Response::ok(json!({"ok": true, "id": self.id})),
            ("GET", "/status") => Response::ok(self.status()),
            ("POST", "/txn") => match parse_txn(&req.body) {
                Ok(ops) => Response::ok(self.txn(ops).await),
                Err(detail) => Response::error(400, "bad-request", detail),
            },
            _ => Response::no_route(&req),
        }
    }

    fn status(&self) -> Value {
        let st = self.node.status.lock().map(|s| *s).unwrap_or_default();
        json!({
            "id": self.id,
            "nodes": self.nodes,
            "isolation": self.isolation,
            "bugs": self.bugs,
            "locks": st.locks,
            "in_doubt": st.in_doubt,
            "active": st.active,
        })
    }

    async fn txn(&self, ops: Vec<Op>) -> Value {
        match self.node.ask(ops, self.wait).await {
            Ok(reply) => reply.to_json(),
            Err(NoAnswer::ShuttingDown) => {
                json!({"type": "fail", "error": "unavailable", "detail": "node is shutting down"})
            }
            // The core always answers before its own timeout; only a stuck node gets here.
            Err(NoAnswer::Timeout) => {
                json!({"type": "info", "error": "timeout", "detail": "no answer from the node's core"})
            }
        }
    }
}

/// Validates a `POST /txn` body into ops.
pub fn parse_txn(body: &[u8]) -> Result<Vec<Op>, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("body is not JSON ({e}); {EXPECTED}"))?;
    let ops = v
        .get("ops")
        .and_then(Value::as_array)
        .ok_or_else(|| format!("missing array \"ops\"; {EXPECTED}"))?;
    ops.iter()
        .enumerate()
        .map(|(i, op)| parse_op(op).map_err(|e| format!("op {i}: {e}; {EXPECTED}")))
        .collect()
}

fn parse_op(op: &Value) -> Result<Op, String> {
    let parts = op
        .as_array()
        .filter(|a| a.len() == 3)
        .ok_or("not a [f,key,value] triple")?;
    let f = parts[0]
        .as_str()
        .and_then(OpKind::parse)
        .ok_or("unknown f")?;
    let key = match &parts[1] {
        Value::String(s) => Key::Str(s.clone()),
        Value::Number(n) => Key::Int(n.as_i64().ok_or("integer keys must fit in i64")?),
        _ => return Err("key must be an integer or a string".into()),
    };
    let value = match (f, &parts[2]) {
        (OpKind::Read, Value::Null) => None,
        (OpKind::Read, _) => return Err("a read's value must be null".into()),
        (_, v) => Some(v.as_i64().ok_or("value must be an integer")?),
    };
    Ok(Op { f, key, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_txns_and_explains_bad_ones() {
        let ops = parse_txn(br#"{"ops":[["r",1,null],["append","k",3],["add",2,-1]]}"#).unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[1].key, Key::Str("k".into()));
        assert_eq!(ops[2].value, Some(-1));
        assert!(parse_txn(br#"{"ops":[["r",1,2]]}"#).is_err());
        assert!(parse_txn(br#"{"ops":[["cas",1,2]]}"#).is_err());
        assert!(parse_txn(br#"{"ops":[["w",1,"x"]]}"#).is_err());
        let err = parse_txn(b"nope").unwrap_err();
        assert!(err.contains("expected"), "{err}");
    }
}
