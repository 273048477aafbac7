//! Reads a kafka history's ops into sends, polls, commits and committed-offset lists.
//! An ok op whose value does not have its shape is counted as malformed and left out,
//! so a foreign history can never make the checker panic.

use crate::history::{value_key_string, History, Outcome};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// An acknowledged `send`: `msg` is at `offset` of `key`.
#[derive(Debug, Clone)]
pub(crate) struct Send {
    pub pair: usize,
    pub key: String,
    pub offset: i64,
    pub msg: String,
}

/// An ok `poll`: what it asked for and what it got, per key, in the order returned.
#[derive(Debug, Clone)]
pub(crate) struct Poll {
    pub pair: usize,
    /// A final read (asked every key from its start, to the end).
    pub final_read: bool,
    pub from: BTreeMap<String, i64>,
    pub msgs: BTreeMap<String, Vec<(i64, String)>>,
}

/// An ok `commit_offsets` (or `list_committed_offsets`): offsets per key, and where the
/// op began and ended in the history.
#[derive(Debug, Clone)]
pub(crate) struct Offsets {
    pub pair: usize,
    pub keys: Vec<String>,
    pub offsets: BTreeMap<String, i64>,
    pub invoke_pos: usize,
    pub complete_pos: usize,
}

/// One consumer's ops in its own order: a poll, or an `list_committed_offsets` that
/// moved its positions (Jepsen's `assign`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    Poll(usize),
    Reassign,
}

/// A decoded kafka history.
#[derive(Debug, Default)]
pub(crate) struct KafkaOps {
    pub sends: Vec<Send>,
    /// Sends whose outcome is unknown (they may have landed at any offset).
    pub unsure_sends: usize,
    pub polls: Vec<Poll>,
    pub commits: Vec<Offsets>,
    pub lists: Vec<Offsets>,
    /// Per process, its polls and reassignments in order.
    pub consumers: BTreeMap<u64, Vec<Step>>,
    /// Ok ops whose value had not the shape of their `f`.
    pub malformed: Vec<usize>,
}

fn offset_map(v: Option<&Value>) -> Option<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, o) in m {
                out.insert(k.clone(), o.as_i64()?);
            }
        }
        _ => return None,
    }
    Some(out)
}

fn poll_msgs(v: Option<&Value>) -> Option<BTreeMap<String, Vec<(i64, String)>>> {
    let mut out = BTreeMap::new();
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, list) in m {
                let mut entries = Vec::new();
                for e in list.as_array()? {
                    match e.as_array().map(Vec::as_slice) {
                        Some([o, msg]) => entries.push((o.as_i64()?, value_key_string(msg))),
                        _ => return None,
                    }
                }
                out.insert(k.clone(), entries);
            }
        }
        _ => return None,
    }
    Some(out)
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m: &Map<String, Value>| m.get(name))
}

impl KafkaOps {
    /// Decodes every client op of `history` that belongs to the kafka workload.
    pub(crate) fn decode(history: &History) -> KafkaOps {
        let mut k = KafkaOps::default();
        for (i, p) in history.pairs().iter().enumerate() {
            if p.f == "send" && p.outcome.is_indeterminate() {
                k.unsure_sends += 1;
            }
            if p.outcome != Outcome::Ok {
                continue;
            }
            let complete_pos = p.complete_pos.unwrap_or(p.invoke_pos);
            let ok = match p.f.as_str() {
                "poll" | "commit_offsets" | "list_committed_offsets" if !p.value.is_object() => {
                    false
                }
                "send" => match (p.key_string(), p.value.as_array().map(Vec::as_slice)) {
                    (Some(key), Some([o, msg])) => o
                        .as_i64()
                        .map(|offset| {
                            k.sends.push(Send {
                                pair: i,
                                key,
                                offset,
                                msg: value_key_string(msg),
                            })
                        })
                        .is_some(),
                    _ => false,
                },
                "poll" => {
                    let final_read = [&p.invoke_value, &p.value]
                        .iter()
                        .any(|v| field(v, "final").and_then(Value::as_bool) == Some(true));
                    match (
                        offset_map(field(&p.value, "offsets")),
                        poll_msgs(field(&p.value, "msgs")),
                    ) {
                        (Some(from), Some(msgs)) => {
                            if !final_read {
                                k.consumers
                                    .entry(p.process)
                                    .or_default()
                                    .push(Step::Poll(k.polls.len()));
                            }
                            k.polls.push(Poll {
                                pair: i,
                                final_read,
                                from,
                                msgs,
                            });
                            true
                        }
                        _ => false,
                    }
                }
                "commit_offsets" | "list_committed_offsets" => {
                    let keys: Vec<String> = field(&p.invoke_value, "keys")
                        .and_then(Value::as_array)
                        .map(|ks| ks.iter().map(value_key_string).collect())
                        .unwrap_or_default();
                    match offset_map(field(&p.value, "offsets")) {
                        Some(offsets) => {
                            let o = Offsets {
                                pair: i,
                                keys,
                                offsets,
                                invoke_pos: p.invoke_pos,
                                complete_pos,
                            };
                            if p.f == "commit_offsets" {
                                k.commits.push(o);
                            } else {
                                k.consumers
                                    .entry(p.process)
                                    .or_default()
                                    .push(Step::Reassign);
                                k.lists.push(o);
                            }
                            true
                        }
                        None => false,
                    }
                }
                _ => true,
            };
            if !ok {
                k.malformed.push(i);
            }
        }
        k
    }
}
