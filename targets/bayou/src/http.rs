//! The client API: `GET /health`, `GET /status`, `POST /write`, `POST /read`,
//! `GET|POST /admin/clock` (see the contract in the crate README).

use crate::core::Request;
use crate::node::NodeHandle;
use crate::types::{Kind, Op, Session};
use serde::Deserialize;
use serde_json::{json, Value};
use splitbrain_target_runtime::http::{clock_admin, Request as HttpRequest, Response};
use splitbrain_target_runtime::node::NoAnswer;
use splitbrain_target_runtime::OffsetClock;
use std::time::Duration;

/// What the HTTP handlers share.
#[derive(Clone, Debug)]
pub struct Api {
    /// This replica's id.
    pub id: u64,
    /// Group size.
    pub nodes: u64,
    /// The primary's id.
    pub primary: u64,
    /// Names of the bugs turned on.
    pub bugs: Vec<String>,
    /// The replica's clock.
    pub clock: OffsetClock,
    /// The node thread.
    pub node: NodeHandle,
    /// How long to wait for the core's answer (it answers within the session wait).
    pub wait: Duration,
}

const EXPECTED_WRITE: &str = "expected {\"key\":K,\"op\":OP,\"session\":{\"read\":VV,\"write\":VV}} with OP one of {\"type\":\"add\",\"element\":E}, {\"type\":\"incr\",\"delta\":N>=0}, {\"type\":\"book\",\"id\":ID,\"alternatives\":[[room,slot],...]}";
const EXPECTED_READ: &str = "expected {\"key\":K,\"session\":{\"read\":VV,\"write\":VV}} (optional \"type\": \"set\"|\"counter\"|\"schedule\" for a key never written)";

#[derive(Deserialize)]
struct WriteBody {
    #[serde(default, deserialize_with = "key_text")]
    key: String,
    op: Op,
    #[serde(default)]
    session: Option<Session>,
}

#[derive(Deserialize)]
struct ReadBody {
    #[serde(default, deserialize_with = "key_text")]
    key: String,
    #[serde(default)]
    session: Option<Session>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// A key is a JSON string; an integer key is taken as its decimal text, so a client that
/// sends `7` and one that sends `"7"` name the same key; an absent or null key is `""`, the
/// one object of a workload without keys.
fn key_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        Value::Null => Ok(String::new()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!(
            "key must be a string, got {other}"
        ))),
    }
}

impl Api {
    /// Answers one request.
    pub async fn handle(&self, req: HttpRequest) -> Response {
        if let Some(resp) = clock_admin(&self.clock, &req) {
            return resp;
        }
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/health") => Response::ok(json!({"ok": true, "id": self.id})),
            ("GET", "/status") => Response::ok(self.status()),
            ("POST", "/write") => match parse_write(&req.body) {
                Ok(request) => Response::ok(self.ask(request).await),
                Err(detail) => Response::error(400, "bad-request", detail),
            },
            ("POST", "/read") => match parse_read(&req.body) {
                Ok(request) => Response::ok(self.ask(request).await),
                Err(detail) => Response::error(400, "bad-request", detail),
            },
            _ => Response::no_route(&req),
        }
    }

    fn status(&self) -> Value {
        let st = self
            .node
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        json!({
            "id": self.id,
            "nodes": self.nodes,
            "primary": self.primary,
            "is_primary": self.id == self.primary,
            "vv": st.vv,
            "csn": st.csn,
            "log_len": st.log_len,
            "tentative": st.tentative,
            "checkpoint_csn": st.checkpoint_csn,
            "clock": st.clock,
            "bugs": self.bugs,
        })
    }

    async fn ask(&self, request: Request) -> Value {
        match self.node.ask(request, self.wait).await {
            Ok(reply) => reply.to_json(),
            Err(NoAnswer::ShuttingDown) => {
                json!({"type": "fail", "error": "unavailable", "detail": "node is shutting down"})
            }
            // The core always answers within the session wait; only a stuck node gets here.
            Err(NoAnswer::Timeout) => {
                json!({"type": "info", "error": "timeout", "detail": "no answer from the replica's core"})
            }
        }
    }
}

/// Validates a `POST /write` body.
pub fn parse_write(body: &[u8]) -> Result<Request, String> {
    let w: WriteBody =
        serde_json::from_slice(body).map_err(|e| format!("{e}; {EXPECTED_WRITE}"))?;
    match &w.op {
        Op::Incr { delta } if *delta < 0 => {
            return Err(format!("incr delta must be >= 0; {EXPECTED_WRITE}"))
        }
        Op::Book { alternatives, .. } if alternatives.is_empty() => {
            return Err(format!(
                "book needs at least one alternative; {EXPECTED_WRITE}"
            ))
        }
        _ => {}
    }
    Ok(Request::Write {
        key: w.key,
        op: w.op,
        session: w.session.unwrap_or_default(),
    })
}

/// Validates a `POST /read` body.
pub fn parse_read(body: &[u8]) -> Result<Request, String> {
    let r: ReadBody = serde_json::from_slice(body).map_err(|e| format!("{e}; {EXPECTED_READ}"))?;
    let kind = match r.kind.as_deref() {
        None => None,
        Some("set") => Some(Kind::Set),
        Some("counter") => Some(Kind::Counter),
        Some("schedule") => Some(Kind::Schedule),
        Some(other) => return Err(format!("unknown type {other:?}; {EXPECTED_READ}")),
    };
    Ok(Request::Read {
        key: r.key,
        kind,
        session: r.session.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requests_and_explains_bad_ones() {
        let w = parse_write(br#"{"key":"k1","op":{"type":"book","id":3,"alternatives":[[1,2]]},"session":{"read":{"1":4}}}"#).unwrap();
        let Request::Write { key, op, session } = w else {
            panic!("not a write")
        };
        assert_eq!(key, "k1");
        assert_eq!(
            op,
            Op::Book {
                id: 3,
                alternatives: vec![(1, 2)]
            }
        );
        assert_eq!(session.read.get(&1), Some(&4));
        assert!(session.write.is_empty());
        assert!(parse_write(br#"{"key":"k","op":{"type":"incr","delta":-1}}"#).is_err());
        assert!(parse_write(br#"{"key":"k","op":{"type":"cas"}}"#).is_err());
        let err = parse_read(b"nope").unwrap_err();
        assert!(err.contains("expected"), "{err}");
        let r = parse_read(br#"{"key":7,"type":"counter","session":{"read":null}}"#).unwrap();
        assert!(matches!(&r, Request::Read { key, kind: Some(Kind::Counter), .. } if key == "7"));
        assert!(parse_read(br#"{"key":[1]}"#).is_err());
        let r = parse_read(br#"{"key":null}"#).unwrap();
        assert!(matches!(&r, Request::Read { key, kind: None, .. } if key.is_empty()));
        assert!(parse_write(br#"{"op":{"type":"add","element":1}}"#).is_ok());
    }
}
