//! The services Maelstrom offers nodes, with Maelstrom's semantics (`doc/services.md`):
//! `lin-kv` (linearizable), `seq-kv` (sequentially consistent: a node may read one of the
//! last 32 states, never older than what it has seen, as Maelstrom's `sequential` buffer),
//! `lww-kv` (last write wins across 5 replicas, one random pair merged per request, as
//! Maelstrom's `eventual`: reads may be stale and concurrent writes lost), each with
//! `read`, `write` and `cas` (`create_if_not_exists` optional); and `lin-tso`, a
//! linearizable timestamp oracle (`ts` → `ts_ok`, from 0). Pure state machines; the
//! network calls them, at any time, also before and while a node handles its `init`.

use super::protocol::error_body;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// How many states back a `seq-kv` read may go (Maelstrom's `sequential` buffer).
const SEQ_STATES: u64 = 32;
/// Replicas of `lww-kv` (Maelstrom's `eventual`).
const LWW_REPLICAS: usize = 5;

/// The names a node may send service requests to.
pub const SERVICE_NAMES: &[&str] = &["lin-kv", "seq-kv", "lww-kv", "lin-tso"];

/// Every service's state.
pub struct Services {
    lin: HashMap<String, Value>,
    seq: SeqKv,
    lww: LwwKv,
    tso: u64,
}

impl Services {
    /// Empty services for `nodes` nodes.
    pub fn new(nodes: usize) -> Services {
        Services {
            lin: HashMap::new(),
            seq: SeqKv::new(nodes),
            lww: LwwKv::new(LWW_REPLICAS),
            tso: 0,
        }
    }

    /// Handles one request from node `caller` to service `name`; returns the reply body.
    /// `rng` (the network's seeded generator) picks which stale state `seq-kv` and `lww-kv`
    /// serve.
    pub fn handle(
        &mut self,
        name: &str,
        caller: usize,
        body: &Map<String, Value>,
        rng: &mut ChaCha8Rng,
    ) -> Map<String, Value> {
        let id = body.get("msg_id").and_then(Value::as_u64);
        let kind = body.get("type").and_then(Value::as_str).unwrap_or("");
        let key = body.get("key").map(|k| k.to_string());
        let mut reply = match (name, kind) {
            ("lin-tso", "ts") => {
                self.tso += 1;
                ok("ts_ok", [("ts", Value::from(self.tso - 1))])
            }
            ("lin-tso", _) => error_body(id, 10, "lin-tso supports only ts"),
            (_, "read" | "write" | "cas") if key.is_none() => {
                error_body(id, 12, "a kv request needs a key")
            }
            ("lin-kv", _) => kv_op(
                &mut LinView(&mut self.lin),
                kind,
                key.unwrap_or_default(),
                body,
                id,
            ),
            ("seq-kv", _) => {
                let key = key.unwrap_or_default();
                // As Maelstrom's `sequential`: an op that would not change the state (a
                // read, a failed or no-op cas, a write of the value already there) runs
                // on some state the caller may still see; one that would, on the newest.
                let old = self.seq.read(caller, &key, rng);
                match unchanged_reply(kind, old, body, id) {
                    Some(reply) => reply,
                    None => {
                        let reply = kv_op(&mut self.seq.latest(caller), kind, key, body, id);
                        self.seq.catch_up(caller);
                        reply
                    }
                }
            }
            ("lww-kv", _) => {
                let n = self.lww.replicas.len();
                let (from, into) = (rng.gen_range(0..n), rng.gen_range(0..n));
                self.lww.merge(from, into);
                let replica = rng.gen_range(0..n);
                let key = key.unwrap_or_default();
                let mut view = self.lww.view(replica);
                kv_op(&mut view, kind, key, body, id)
            }
            _ => error_body(id, 1, &format!("no service {name}")),
        };
        if let Some(id) = id {
            reply.insert("in_reply_to".into(), id.into());
        }
        reply
    }
}

fn ok<const N: usize>(kind: &str, fields: [(&str, Value); N]) -> Map<String, Value> {
    let mut b = Map::new();
    b.insert("type".into(), kind.into());
    for (k, v) in fields {
        b.insert(k.into(), v);
    }
    b
}

fn read_reply(v: Option<Value>, id: Option<u64>) -> Map<String, Value> {
    match v {
        Some(v) => ok("read_ok", [("value", v)]),
        None => error_body(id, 20, "key does not exist"),
    }
}

/// The reply of a kv operation on a state where the key holds `old`, if the operation
/// leaves that state as it is; `None` if it would change it.
fn unchanged_reply(
    kind: &str,
    old: Option<Value>,
    body: &Map<String, Value>,
    id: Option<u64>,
) -> Option<Map<String, Value>> {
    let field = |f: &str| body.get(f).cloned().unwrap_or(Value::Null);
    let create = body.get("create_if_not_exists").and_then(Value::as_bool) == Some(true);
    match (kind, old) {
        ("read", v) => Some(read_reply(v, id)),
        ("write", Some(v)) if v == field("value") => Some(ok("write_ok", [])),
        ("write", _) => None,
        ("cas", None) if create => None,
        ("cas", Some(cur)) if cur == field("from") => {
            (field("from") == field("to")).then(|| ok("cas_ok", []))
        }
        ("cas", old) => kv_op(&mut Fixed(old), kind, String::new(), body, id).into(),
        (other, _) => Some(error_body(
            id,
            10,
            &format!("kv services do not support {other:?}"),
        )),
    }
}

/// One key's value, read-only: a cas that fails on it changes nothing.
struct Fixed(Option<Value>);

impl KvView for Fixed {
    fn get(&self, _key: &str) -> Option<Value> {
        self.0.clone()
    }
    fn put(&mut self, _key: String, _value: Value) {}
}

/// A map a kv operation runs against.
trait KvView {
    fn get(&self, key: &str) -> Option<Value>;
    fn put(&mut self, key: String, value: Value);
}

struct LinView<'a>(&'a mut HashMap<String, Value>);

impl KvView for LinView<'_> {
    fn get(&self, key: &str) -> Option<Value> {
        self.0.get(key).cloned()
    }
    fn put(&mut self, key: String, value: Value) {
        self.0.insert(key, value);
    }
}

/// `read`, `write` or `cas` on one view (Maelstrom: 20 no such key, 22 `from` differs).
fn kv_op(
    view: &mut dyn KvView,
    kind: &str,
    key: String,
    body: &Map<String, Value>,
    id: Option<u64>,
) -> Map<String, Value> {
    let field = |f: &str| body.get(f).cloned().unwrap_or(Value::Null);
    match kind {
        "read" => read_reply(view.get(&key), id),
        "write" => {
            view.put(key, field("value"));
            ok("write_ok", [])
        }
        "cas" => {
            let create = body
                .get("create_if_not_exists")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            match view.get(&key) {
                None if create => {
                    view.put(key, field("to"));
                    ok("cas_ok", [])
                }
                None => error_body(id, 20, "key does not exist"),
                Some(cur) if cur == field("from") => {
                    view.put(key, field("to"));
                    ok("cas_ok", [])
                }
                Some(cur) => error_body(
                    id,
                    22,
                    &format!("expected {}, but had {cur}", field("from")),
                ),
            }
        }
        other => error_body(id, 10, &format!("kv services do not support {other:?}")),
    }
}

/// Sequential consistency: one total order of states; each node reads some state no older
/// than the last it saw, and writes to the newest.
struct SeqKv {
    /// Per key: (state number, value) in state order.
    versions: HashMap<String, Vec<(u64, Value)>>,
    /// The newest state number.
    latest: u64,
    /// The newest state each node has seen.
    seen: Vec<u64>,
}

impl SeqKv {
    fn new(nodes: usize) -> SeqKv {
        SeqKv {
            versions: HashMap::new(),
            latest: 0,
            seen: vec![0; nodes],
        }
    }

    fn read(&mut self, caller: usize, key: &str, rng: &mut ChaCha8Rng) -> Option<Value> {
        let seen = self.seen.get(caller).copied().unwrap_or(self.latest);
        let from = seen.max(self.latest.saturating_sub(SEQ_STATES - 1));
        let at = rng.gen_range(from..=self.latest);
        if let Some(s) = self.seen.get_mut(caller) {
            *s = at;
        }
        let vs = self.versions.get(key)?;
        let n = vs.partition_point(|(state, _)| *state <= at);
        n.checked_sub(1).map(|i| vs[i].1.clone())
    }

    /// The caller has run an op on the newest state: it sees it from now on.
    fn catch_up(&mut self, caller: usize) {
        if let Some(s) = self.seen.get_mut(caller) {
            *s = self.latest;
        }
    }

    fn latest(&mut self, caller: usize) -> SeqLatest<'_> {
        SeqLatest { kv: self, caller }
    }
}

/// The newest state of a [`SeqKv`], as seen by a writer.
struct SeqLatest<'a> {
    kv: &'a mut SeqKv,
    caller: usize,
}

impl KvView for SeqLatest<'_> {
    fn get(&self, key: &str) -> Option<Value> {
        self.kv.versions.get(key)?.last().map(|(_, v)| v.clone())
    }
    fn put(&mut self, key: String, value: Value) {
        self.kv.latest += 1;
        let state = self.kv.latest;
        self.kv
            .versions
            .entry(key)
            .or_default()
            .push((state, value));
        if let Some(s) = self.kv.seen.get_mut(self.caller) {
            *s = state;
        }
    }
}

/// Last write wins: replicas hold (timestamp, value) per key; each request first merges
/// one random replica into another by timestamp, then runs on a third random one.
struct LwwKv {
    replicas: Vec<HashMap<String, (u64, Value)>>,
    clock: u64,
}

impl LwwKv {
    fn new(n: usize) -> LwwKv {
        LwwKv {
            replicas: vec![HashMap::new(); n],
            clock: 0,
        }
    }

    fn merge(&mut self, from: usize, into: usize) {
        if from == into {
            return;
        }
        let source = self.replicas[from].clone();
        let merged = &mut self.replicas[into];
        for (k, (ts, v)) in source {
            if merged.get(&k).is_none_or(|(mine, _)| ts > *mine) {
                merged.insert(k, (ts, v));
            }
        }
    }

    fn view(&mut self, replica: usize) -> LwwView<'_> {
        LwwView { kv: self, replica }
    }
}

struct LwwView<'a> {
    kv: &'a mut LwwKv,
    replica: usize,
}

impl KvView for LwwView<'_> {
    fn get(&self, key: &str) -> Option<Value> {
        self.kv.replicas[self.replica]
            .get(key)
            .map(|(_, v)| v.clone())
    }
    fn put(&mut self, key: String, value: Value) {
        self.kv.clock += 1;
        let ts = self.kv.clock;
        self.kv.replicas[self.replica].insert(key, (ts, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use serde_json::json;

    fn req(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn lin_kv_reads_writes_and_cas_with_maelstrom_errors() {
        let mut s = Services::new(2);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let r = s.handle(
            "lin-kv",
            0,
            &req(json!({"type":"read","key":"x","msg_id":1})),
            &mut rng,
        );
        assert_eq!(
            (
                r["type"].clone(),
                r["code"].clone(),
                r["in_reply_to"].clone()
            ),
            (json!("error"), json!(20), json!(1))
        );
        let r = s.handle("lin-kv", 0, &req(json!({"type":"cas","key":"x","from":1,"to":2,"create_if_not_exists":true,"msg_id":2})), &mut rng);
        assert_eq!(r["type"], "cas_ok");
        let r = s.handle(
            "lin-kv",
            1,
            &req(json!({"type":"cas","key":"x","from":1,"to":3,"msg_id":3})),
            &mut rng,
        );
        assert_eq!(r["code"], 22);
        s.handle(
            "lin-kv",
            1,
            &req(json!({"type":"write","key":"x","value":9,"msg_id":4})),
            &mut rng,
        );
        let r = s.handle(
            "lin-kv",
            0,
            &req(json!({"type":"read","key":"x","msg_id":5})),
            &mut rng,
        );
        assert_eq!(r["value"], 9);
    }

    #[test]
    fn seq_kv_never_goes_back_past_what_a_node_saw() {
        let mut s = Services::new(2);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for v in 0..50 {
            s.handle(
                "seq-kv",
                0,
                &req(json!({"type":"write","key":"k","value":v})),
                &mut rng,
            );
        }
        // Node 1 saw nothing yet: it may read old states, but never older than its last.
        let mut last = -1;
        let mut stale = false;
        for _ in 0..200 {
            let r = s.handle(
                "seq-kv",
                1,
                &req(json!({"type":"read","key":"k"})),
                &mut rng,
            );
            let v = r.get("value").and_then(Value::as_i64).unwrap_or(-1);
            assert!(v >= last, "went back from {last} to {v}");
            // At most 32 states old: state 50 is value 49, state 19 value 18.
            assert!(v >= 18, "{v} is older than Maelstrom's 32 states");
            stale |= v < 49;
            last = v;
        }
        assert!(stale, "seq-kv should serve some stale reads");
        // The writer reads its own writes.
        let r = s.handle(
            "seq-kv",
            0,
            &req(json!({"type":"read","key":"k"})),
            &mut rng,
        );
        assert_eq!(r["value"], 49);
    }

    #[test]
    fn seq_kv_runs_ops_that_change_nothing_on_a_stale_state_as_maelstrom_does() {
        let mut s = Services::new(2);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let send = |s: &mut Services, rng: &mut ChaCha8Rng, caller, v: Value| {
            s.handle("seq-kv", caller, &req(v), rng)
        };
        for v in 0..40 {
            send(
                &mut s,
                &mut rng,
                0,
                json!({"type":"write","key":"k","value":v}),
            );
        }
        // Node 1 never looked: a no-op cas of a value it reads succeeds, stale or not.
        let (mut stale_ok, mut tries) = (false, 0);
        while !stale_ok && tries < 200 {
            tries += 1;
            let r = send(&mut s, &mut rng, 1, json!({"type":"read","key":"k"}));
            let v = r["value"].clone();
            let c = send(
                &mut s,
                &mut rng,
                1,
                json!({"type":"cas","key":"k","from":v,"to":v}),
            );
            assert_eq!(c["type"], "cas_ok", "{c:?}");
            stale_ok = v != json!(39);
            // Reading always catches up eventually; start over from a fresh node view.
            s.seq.seen[1] = 0;
        }
        assert!(stale_ok, "no stale no-op cas in {tries} tries");
        // A cas that changes the value runs on the newest state: from a stale value it fails.
        let c = send(
            &mut s,
            &mut rng,
            1,
            json!({"type":"cas","key":"k","from":5,"to":99}),
        );
        assert_eq!(c["code"], 22, "{c:?}");
        // A write changes the state, so it runs on the newest, and its writer sees it:
        // a cas from there succeeds, and the caller then reads its own cas.
        send(
            &mut s,
            &mut rng,
            1,
            json!({"type":"write","key":"k","value":50}),
        );
        let c = send(
            &mut s,
            &mut rng,
            1,
            json!({"type":"cas","key":"k","from":50,"to":99}),
        );
        assert_eq!(c["type"], "cas_ok");
        let r = send(&mut s, &mut rng, 1, json!({"type":"read","key":"k"}));
        assert_eq!(r["value"], 99);
    }

    #[test]
    fn lin_tso_is_strictly_increasing() {
        let mut s = Services::new(1);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let ts: Vec<u64> = (0..5)
            .map(|_| {
                s.handle("lin-tso", 0, &req(json!({"type":"ts"})), &mut rng)["ts"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        // Maelstrom's `persistent-tso` starts at 0.
        assert_eq!(ts, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn lww_kv_converges_to_the_last_write() {
        let mut s = Services::new(1);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for v in 0..20 {
            s.handle(
                "lww-kv",
                0,
                &req(json!({"type":"write","key":"k","value":v})),
                &mut rng,
            );
        }
        for into in 0..LWW_REPLICAS {
            for from in 0..LWW_REPLICAS {
                s.lww.merge(from, into);
            }
        }
        for into in 0..LWW_REPLICAS {
            for from in 0..LWW_REPLICAS {
                s.lww.merge(from, into);
            }
            assert_eq!(s.lww.view(into).get("\"k\""), Some(json!(19)));
        }
    }
}
