//! The replicated state machine: a map from keys to JSON values, and its commands.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A command in the log. Reads appear only in `--read-mode log`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Command {
    /// Set `key` to `value`.
    Write {
        /// The key.
        key: String,
        /// The new value.
        value: Value,
    },
    /// Set `key` to `new` if it currently holds `expected` (null: never written).
    Cas {
        /// The key.
        key: String,
        /// Expected current value.
        expected: Value,
        /// New value.
        new: Value,
    },
    /// Append `value` to the list at `key`.
    Append {
        /// The key.
        key: String,
        /// The element.
        value: Value,
    },
    /// Read `key` at this point of the log.
    Read {
        /// The key.
        key: String,
    },
}

/// The result of applying a command.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Done; reads carry the value read.
    Ok(Option<Value>),
    /// Definitely not done, with an error name (`cas-mismatch`, `not-a-list`).
    Fail(&'static str),
}

/// The key-value map.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KvState {
    map: BTreeMap<String, Value>,
}

impl KvState {
    /// Applies one command deterministically (every replica gets the same outcome).
    pub fn apply(&mut self, cmd: Command) -> Outcome {
        match cmd {
            Command::Write { key, value } => {
                self.map.insert(key, value);
                Outcome::Ok(None)
            }
            Command::Cas { key, expected, new } => {
                if self.get(&key) == expected {
                    self.map.insert(key, new);
                    Outcome::Ok(None)
                } else {
                    Outcome::Fail("cas-mismatch")
                }
            }
            Command::Append { key, value } => match self.map.get_mut(&key) {
                None => {
                    self.map.insert(key, Value::Array(vec![value]));
                    Outcome::Ok(None)
                }
                Some(Value::Array(list)) => {
                    list.push(value);
                    Outcome::Ok(None)
                }
                Some(_) => Outcome::Fail("not-a-list"),
            },
            Command::Read { key } => Outcome::Ok(Some(self.get(&key))),
        }
    }

    /// The value at `key`, null if never written.
    pub fn get(&self, key: &str) -> Value {
        self.map.get(key).cloned().unwrap_or(Value::Null)
    }

    /// Serializes the whole map (for a snapshot).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.map).unwrap_or_default()
    }

    /// Restores a map serialized by [`KvState::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        if bytes.is_empty() {
            return Ok(KvState::default());
        }
        Ok(KvState {
            map: serde_json::from_slice(bytes)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn commands_apply() {
        let mut s = KvState::default();
        let k = || "k".to_string();
        assert_eq!(
            s.apply(Command::Cas {
                key: k(),
                expected: Value::Null,
                new: json!(1)
            }),
            Outcome::Ok(None)
        );
        assert_eq!(
            s.apply(Command::Cas {
                key: k(),
                expected: json!(2),
                new: json!(3)
            }),
            Outcome::Fail("cas-mismatch")
        );
        assert_eq!(
            s.apply(Command::Append {
                key: k(),
                value: json!(1)
            }),
            Outcome::Fail("not-a-list")
        );
        s.apply(Command::Append {
            key: "l".into(),
            value: json!(1),
        });
        s.apply(Command::Append {
            key: "l".into(),
            value: json!(2),
        });
        assert_eq!(s.get("l"), json!([1, 2]));
        assert_eq!(
            s.apply(Command::Read { key: k() }),
            Outcome::Ok(Some(json!(1)))
        );
        let copy = KvState::from_bytes(&s.to_bytes()).unwrap();
        assert_eq!(copy, s);
    }
}
