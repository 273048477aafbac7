//! Maelstrom's wire format: newline-delimited JSON messages `{"src", "dest", "body"}` whose
//! body has a `type`, and optionally `msg_id` and `in_reply_to` (Maelstrom's
//! `doc/protocol.md`), and its error codes with their definite / indefinite meaning.

use serde_json::{Map, Value};

/// One message as a node wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Sender: a node (`n1`..), a client (`c1`..) or a service (`lin-kv`..).
    pub src: String,
    /// Receiver.
    pub dest: String,
    /// The payload; always has a string `type`.
    pub body: Map<String, Value>,
}

impl Message {
    /// Builds a message.
    pub fn new(src: impl Into<String>, dest: impl Into<String>, body: Map<String, Value>) -> Self {
        Message {
            src: src.into(),
            dest: dest.into(),
            body,
        }
    }

    /// The body's `type`.
    pub fn kind(&self) -> &str {
        self.body.get("type").and_then(Value::as_str).unwrap_or("")
    }

    /// The body's `in_reply_to`, if it is an integer.
    pub fn in_reply_to(&self) -> Option<u64> {
        self.body.get("in_reply_to").and_then(Value::as_u64)
    }

    /// The body's `msg_id`, if it is an integer.
    pub fn msg_id(&self) -> Option<u64> {
        self.body.get("msg_id").and_then(Value::as_u64)
    }

    /// The message as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        let mut m = Map::new();
        m.insert("src".into(), Value::String(self.src.clone()));
        m.insert("dest".into(), Value::String(self.dest.clone()));
        m.insert("body".into(), Value::Object(self.body.clone()));
        Value::Object(m).to_string()
    }
}

/// Parses one line a node wrote; the error says what was expected. As Maelstrom's network
/// does, only `src`, `dest` and a body are required: what a body holds between nodes is
/// the nodes' business (a `type`-less body, or `"in_reply_to": null` on a reply to a
/// message that had no `msg_id`, passes). The body must be a JSON object.
pub fn parse_line(line: &str) -> Result<Message, String> {
    let v: Value = serde_json::from_str(line)
        .map_err(|e| format!("expected a JSON message object, got invalid JSON ({e})"))?;
    let Value::Object(mut m) = v else {
        return Err("expected a JSON object {\"src\", \"dest\", \"body\"}".into());
    };
    let mut field = |name: &str| match m.remove(name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(format!("expected \"{name}\" to be a string, got {other}")),
        None => Err(format!("expected the message to have \"{name}\"")),
    };
    let (src, dest) = (field("src")?, field("dest")?);
    let body = match m.remove("body") {
        Some(Value::Object(b)) => b,
        Some(other) => return Err(format!("expected \"body\" to be an object, got {other}")),
        None => return Err("expected the message to have \"body\"".into()),
    };
    Ok(Message { src, dest, body })
}

/// Maelstrom's error codes: `(code, name, definite)`, its `doc/protocol.md` table. Codes 0
/// (timeout) and 13 (crash) are indefinite: the operation may have happened. A code it does
/// not define (a node's own, 1000 and up) is indefinite too, as in Maelstrom's client
/// (`throw-errors!`: `(:definite? error false)`), so such an op is `info`, never `fail`.
pub const ERROR_CODES: &[(i64, &str, bool)] = &[
    (0, "timeout", false),
    (1, "node-not-found", true),
    (10, "not-supported", true),
    (11, "temporarily-unavailable", true),
    (12, "malformed-request", true),
    (13, "crash", false),
    (14, "abort", true),
    (20, "key-does-not-exist", true),
    (21, "key-already-exists", true),
    (22, "precondition-failed", true),
    (30, "txn-conflict", true),
];

/// Whether an error with this code means the operation definitely did not happen.
pub fn is_definite(code: i64) -> bool {
    ERROR_CODES
        .iter()
        .find(|(c, _, _)| *c == code)
        .is_some_and(|(_, _, definite)| *definite)
}

/// Maelstrom's name of an error code (`error-CODE` for codes it does not define).
pub fn error_name(code: i64) -> String {
    ERROR_CODES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map(|(_, n, _)| n.to_string())
        .unwrap_or_else(|| format!("error-{code}"))
}

/// An error reply body.
pub fn error_body(in_reply_to: Option<u64>, code: i64, text: &str) -> Map<String, Value> {
    let mut b = Map::new();
    b.insert("type".into(), "error".into());
    if let Some(id) = in_reply_to {
        b.insert("in_reply_to".into(), id.into());
    }
    b.insert("code".into(), code.into());
    b.insert("text".into(), text.into());
    b
}

/// What a reply made of an op.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `ok` with this value.
    Ok(Value),
    /// A Maelstrom error: definite (`fail`) or not (`info`).
    Error {
        /// The error code.
        code: i64,
        /// Whether the op definitely did not happen.
        definite: bool,
        /// `{code, name, text}` for the history.
        error: Value,
    },
    /// The reply broke the workload's schema: a protocol violation.
    Malformed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_message_and_writes_it_back() {
        let line =
            r#"{"src":"n1","dest":"c2","body":{"type":"echo_ok","in_reply_to":3,"echo":"x"}}"#;
        let m = parse_line(line).unwrap();
        assert_eq!(
            (m.src.as_str(), m.dest.as_str(), m.kind()),
            ("n1", "c2", "echo_ok")
        );
        assert_eq!(m.in_reply_to(), Some(3));
        assert_eq!(parse_line(&m.to_line()).unwrap(), m);
    }

    #[test]
    fn says_what_was_expected() {
        for (line, want) in [
            ("hello", "invalid JSON"),
            ("[1]", "JSON object"),
            (r#"{"dest":"n1","body":{"type":"x"}}"#, "\"src\""),
            (
                r#"{"src":"n1","dest":"n2","body":3}"#,
                "\"body\" to be an object",
            ),
        ] {
            let e = parse_line(line).unwrap_err();
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn bodies_between_nodes_are_the_nodes_business() {
        // Maelstrom's Ruby CRDT demo answers a `merge` that had no msg_id.
        let m =
            parse_line(r#"{"src":"n1","dest":"n2","body":{"type":"merge_ok","in_reply_to":null}}"#)
                .unwrap();
        assert_eq!((m.kind(), m.in_reply_to()), ("merge_ok", None));
        let m = parse_line(r#"{"src":"n1","dest":"n2","body":{"v":1}}"#).unwrap();
        assert_eq!(m.kind(), "");
    }

    #[test]
    fn timeout_crash_and_unknown_codes_are_indefinite() {
        assert!(!is_definite(0) && !is_definite(13));
        assert!(!is_definite(1005) && !is_definite(-1) && !is_definite(2));
        for code in [1, 10, 11, 12, 14, 20, 21, 22, 30] {
            assert!(is_definite(code), "{code}");
        }
        assert_eq!(error_name(22), "precondition-failed");
        assert_eq!(error_name(1005), "error-1005");
    }
}
