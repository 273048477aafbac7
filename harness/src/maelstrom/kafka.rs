//! Maelstrom's `kafka` workload: append-only logs per key with offsets.
//!
//! Each client is one consumer (and producer). It remembers, per key, the next offset
//! to poll, so its polls continue where the last one ended; `commit_offsets` commits
//! the highest offset it has processed per key, and `list_committed_offsets` moves it
//! to the committed offsets (Jepsen's `assign`: a consumer resuming from the commit
//! point). A fresh client (after an `info`) starts every key from offset 0.
//!
//! Requests and what the history records (the `kafka` checker reads these shapes):
//!
//! | op | request | ok value |
//! |---|---|---|
//! | `send` key k, value m | `{"type":"send","key":k,"msg":m}` | `[offset, m]` |
//! | `poll` | `{"type":"poll","offsets":{k: next}}` | `{"offsets": asked, "msgs": {k: [[o, m], ...]}}` |
//! | `commit_offsets` | `{"type":"commit_offsets","offsets":{k: next - 1}}` | `{"offsets": committed}` |
//! | `list_committed_offsets` value `{"keys": [...]}` | `{"type":"list_committed_offsets","keys":[...]}` | `{"offsets": listed}` |
//!
//! Final reads are polls marked `"final": true`, from offset 0 of every key, repeated
//! until every key returns nothing new: the whole log as one node serves it.

use super::protocol::Reply;
use crate::systems::Invocation;
use crate::workload::OpGenerator;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// The most keys a run uses: few, so producers and consumers meet on every key.
pub const MAX_KEYS: usize = 4;

/// How many final reads run, each from a fresh client on the next node.
const FINAL_READS: usize = 3;

/// Generates sends (half the ops), polls, commits and listings on a few fixed keys.
pub struct KafkaGenerator {
    keys: Vec<String>,
    next_msg: u64,
}

impl KafkaGenerator {
    /// A generator over `min(active_keys, MAX_KEYS)` keys `"0"..`, Maelstrom's (its kafka
    /// workload names logs by integers written as strings).
    pub fn new(active_keys: usize) -> KafkaGenerator {
        KafkaGenerator {
            keys: (0..active_keys.clamp(1, MAX_KEYS))
                .map(|i| i.to_string())
                .collect(),
            next_msg: 0,
        }
    }

    fn all_keys(&self) -> Value {
        json!(self.keys)
    }
}

impl OpGenerator for KafkaGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        let roll: f64 = rng.gen();
        let (f, key, value) = if roll < 0.5 {
            self.next_msg += 1;
            let k = &self.keys[rng.gen_range(0..self.keys.len())];
            ("send", Some(json!(k)), json!(self.next_msg))
        } else if roll < 0.82 {
            ("poll", None, json!({ "keys": self.all_keys() }))
        } else if roll < 0.95 {
            ("commit_offsets", None, Value::Null)
        } else {
            (
                "list_committed_offsets",
                None,
                json!({ "keys": self.all_keys() }),
            )
        };
        Invocation {
            f: f.into(),
            key,
            value,
        }
    }

    fn final_reads(&self) -> Vec<Invocation> {
        (0..FINAL_READS)
            .map(|_| Invocation {
                f: "poll".into(),
                key: None,
                value: json!({"final": true, "keys": self.all_keys()}),
            })
            .collect()
    }
}

/// The keys an invocation names in `{"keys": [...]}`.
fn keys_of(inv: &Invocation) -> Vec<String> {
    inv.value
        .get("keys")
        .and_then(Value::as_array)
        .map(|ks| {
            ks.iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an invocation is a final read.
pub fn is_final_read(inv: &Invocation) -> bool {
    inv.f == "poll" && inv.value.get("final").and_then(Value::as_bool) == Some(true)
}

/// An object's entries as a map body.
fn body(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// `{key: offset}` from a reply field: `None` if it is not such a map.
fn offsets_field(reply: &Map<String, Value>, name: &str) -> Option<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    match reply.get(name) {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, o) in m {
                out.insert(k.clone(), o.as_i64()?);
            }
        }
        Some(_) => return None,
    }
    Some(out)
}

/// The last offset of each key in a `poll_ok`'s `msgs`, checking its shape.
fn last_offsets(msgs: &Value) -> Result<BTreeMap<String, Option<i64>>, String> {
    let m = msgs
        .as_object()
        .ok_or("expected poll_ok \"msgs\" to be a map of keys to [[offset, msg], ...]")?;
    let mut out = BTreeMap::new();
    for (k, list) in m {
        let list = list
            .as_array()
            .ok_or_else(|| format!("expected poll_ok msgs[{k:?}] to be an array"))?;
        let mut last = None;
        for e in list {
            match e.as_array().map(Vec::as_slice) {
                Some([o, _]) if o.is_i64() => last = o.as_i64(),
                _ => {
                    return Err(format!(
                        "expected each of poll_ok msgs[{k:?}] to be [offset, msg], got {e}"
                    ))
                }
            }
        }
        out.insert(k.clone(), last);
    }
    Ok(out)
}

/// One client's consumer state: the next offset to poll per key.
#[derive(Debug, Default)]
pub struct Consumer {
    next: BTreeMap<String, i64>,
}

impl Consumer {
    /// The request body (without `msg_id`) for a main-phase invocation.
    pub fn request(&self, inv: &Invocation) -> Map<String, Value> {
        body(match inv.f.as_str() {
            "send" => json!({"type": "send", "key": inv.key, "msg": inv.value}),
            "poll" => {
                let offsets: Map<String, Value> = keys_of(inv)
                    .into_iter()
                    .map(|k| {
                        let at = self.next.get(&k).copied().unwrap_or(0);
                        (k, json!(at))
                    })
                    .collect();
                json!({"type": "poll", "offsets": offsets})
            }
            "commit_offsets" => {
                let offsets: Map<String, Value> = self
                    .next
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| (k.clone(), json!(n - 1)))
                    .collect();
                json!({"type": "commit_offsets", "offsets": offsets})
            }
            _ => json!({"type": "list_committed_offsets", "keys": keys_of(inv)}),
        })
    }

    /// What an `ok` reply (of the type the request asked for) makes of the op, moving
    /// the consumer's positions as a poll or listing says.
    pub fn complete(
        &mut self,
        inv: &Invocation,
        request: &Map<String, Value>,
        reply: &Map<String, Value>,
    ) -> Reply {
        match inv.f.as_str() {
            "send" => match reply.get("offset").and_then(Value::as_i64) {
                Some(o) => Reply::Ok(json!([o, inv.value])),
                None => Reply::Malformed("expected send_ok to carry an integer \"offset\"".into()),
            },
            "poll" => {
                let msgs = reply.get("msgs").cloned().unwrap_or(Value::Null);
                match last_offsets(&msgs) {
                    Ok(lasts) => {
                        for (k, last) in lasts {
                            if let Some(o) = last {
                                self.next.insert(k, o + 1);
                            }
                        }
                        Reply::Ok(json!({"offsets": request.get("offsets"), "msgs": msgs}))
                    }
                    Err(why) => Reply::Malformed(why),
                }
            }
            "commit_offsets" => Reply::Ok(json!({"offsets": request.get("offsets")})),
            _ => match offsets_field(reply, "offsets") {
                Some(listed) => {
                    for k in keys_of(inv) {
                        let at = listed.get(&k).map_or(0, |c| c + 1);
                        self.next.insert(k, at);
                    }
                    Reply::Ok(json!({ "offsets": listed }))
                }
                None => Reply::Malformed(
                    "expected list_committed_offsets_ok \"offsets\" to map keys to integers".into(),
                ),
            },
        }
    }
}

/// A final read in progress: polls every key from 0 until each returns nothing new.
#[derive(Debug)]
pub struct FinalRead {
    keys: Vec<String>,
    next: BTreeMap<String, i64>,
    msgs: BTreeMap<String, Vec<Value>>,
    done: bool,
}

impl FinalRead {
    /// Upper bound on polls per final read (a node returning offsets that do not
    /// advance would otherwise be polled forever).
    const MAX_POLLS: usize = 1000;

    /// A final read of the invocation's keys.
    pub fn new(inv: &Invocation) -> FinalRead {
        let keys = keys_of(inv);
        FinalRead {
            next: keys.iter().map(|k| (k.clone(), 0)).collect(),
            msgs: keys.iter().map(|k| (k.clone(), Vec::new())).collect(),
            keys,
            done: false,
        }
    }

    /// The next poll to send, or `None` when the read is complete.
    pub fn next_request(&self, polls_sent: usize) -> Option<Map<String, Value>> {
        if self.done || polls_sent >= Self::MAX_POLLS {
            return None;
        }
        Some(body(json!({"type": "poll", "offsets": self.next})))
    }

    /// Takes in one `poll_ok`; keys that returned nothing new are finished.
    pub fn absorb(&mut self, reply: &Map<String, Value>) -> Result<(), String> {
        let msgs = reply.get("msgs").cloned().unwrap_or(Value::Null);
        let lasts = last_offsets(&msgs)?;
        let mut progressed = false;
        for (k, last) in lasts {
            let (Some(last), Some(at)) = (last, self.next.get(&k).copied()) else {
                continue;
            };
            if last < at {
                continue;
            }
            progressed = true;
            self.next.insert(k.clone(), last + 1);
            if let Some(list) = msgs.get(&k).and_then(Value::as_array) {
                self.msgs.entry(k).or_default().extend(list.iter().cloned());
            }
        }
        self.done = !progressed;
        Ok(())
    }

    /// The recorded value: every message of every key, asked from offset 0.
    pub fn value(&self) -> Value {
        let from: Map<String, Value> = self.keys.iter().map(|k| (k.clone(), json!(0))).collect();
        json!({"offsets": from, "msgs": self.msgs, "final": true})
    }
}

#[cfg(test)]
mod tests {
    use super::super::workloads::tests::inv;
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_consumer_polls_from_where_it_stopped_and_commits_what_it_read() {
        let mut c = Consumer::default();
        let poll = inv("poll", None, json!({"keys": ["k0", "k1"]}));
        let req = c.request(&poll);
        assert_eq!(
            Value::Object(req.clone()),
            json!({"type": "poll", "offsets": {"k0": 0, "k1": 0}})
        );
        let reply = body(json!({"type": "poll_ok", "msgs": {"k0": [[0, 5], [3, 6]]}}));
        let r = c.complete(&poll, &req, &reply);
        assert_eq!(
            r,
            Reply::Ok(json!({"offsets": {"k0": 0, "k1": 0}, "msgs": {"k0": [[0, 5], [3, 6]]}}))
        );
        assert_eq!(
            Value::Object(c.request(&poll)),
            json!({"type": "poll", "offsets": {"k0": 4, "k1": 0}})
        );
        let commit = inv("commit_offsets", None, Value::Null);
        assert_eq!(
            Value::Object(c.request(&commit)),
            json!({"type": "commit_offsets", "offsets": {"k0": 3}})
        );
        // Listing moves the consumer to just past the committed offsets.
        let list = inv(
            "list_committed_offsets",
            None,
            json!({"keys": ["k0", "k1"]}),
        );
        let req = c.request(&list);
        let reply = body(json!({"type": "list_committed_offsets_ok", "offsets": {"k0": 1}}));
        assert_eq!(
            c.complete(&list, &req, &reply),
            Reply::Ok(json!({"offsets": {"k0": 1}}))
        );
        assert_eq!(
            Value::Object(c.request(&poll)),
            json!({"type": "poll", "offsets": {"k0": 2, "k1": 0}})
        );
        let send = inv("send", Some(json!("k1")), json!(9));
        assert_eq!(
            Value::Object(c.request(&send)),
            json!({"type": "send", "key": "k1", "msg": 9})
        );
        let reply = body(json!({"type": "send_ok", "offset": 7}));
        assert_eq!(
            c.complete(&send, &Map::new(), &reply),
            Reply::Ok(json!([7, 9]))
        );
        let bad = body(json!({"type": "poll_ok", "msgs": {"k0": [5]}}));
        assert!(matches!(c.complete(&poll, &req, &bad), Reply::Malformed(_)));
    }

    #[test]
    fn a_final_read_polls_until_nothing_is_new() {
        let f = inv("poll", None, json!({"final": true, "keys": ["a", "b"]}));
        assert!(is_final_read(&f));
        let mut r = FinalRead::new(&f);
        let req = r.next_request(0).unwrap();
        assert_eq!(
            Value::Object(req),
            json!({"type":"poll","offsets":{"a":0,"b":0}})
        );
        r.absorb(&body(json!({"msgs": {"a": [[0, 1], [1, 2]]}})))
            .unwrap();
        let req = r.next_request(1).unwrap();
        assert_eq!(
            Value::Object(req),
            json!({"type":"poll","offsets":{"a":2,"b":0}})
        );
        r.absorb(&body(json!({"msgs": {"a": [[2, 3]], "b": []}})))
            .unwrap();
        r.absorb(&body(json!({"msgs": {}}))).unwrap();
        assert!(r.next_request(3).is_none());
        assert_eq!(
            r.value(),
            json!({"offsets":{"a":0,"b":0},"msgs":{"a":[[0,1],[1,2],[2,3]],"b":[]},"final":true})
        );
    }

    #[test]
    fn the_generator_mixes_every_op_on_few_keys() {
        let mut g = KafkaGenerator::new(8);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut fs = std::collections::BTreeSet::new();
        let mut keys = std::collections::BTreeSet::new();
        for _ in 0..500 {
            let i = g.next_op(&mut rng);
            if let Some(k) = &i.key {
                keys.insert(k.to_string());
            }
            fs.insert(i.f);
        }
        assert_eq!(fs.len(), 4, "{fs:?}");
        assert_eq!(keys.len(), MAX_KEYS);
        assert_eq!(g.final_reads().len(), FINAL_READS);
    }
}
