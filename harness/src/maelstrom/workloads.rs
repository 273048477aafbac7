//! Maelstrom's workloads (`doc/workloads.md`): the requests clients send, how each reply
//! becomes an op's completion, and the splitbrain checkers that judge the history.
//!
//! | workload | requests | checkers |
//! |---|---|---|
//! | `echo` | `echo` | echo (every payload came back) |
//! | `unique-ids` | `generate` | unique-ids |
//! | `broadcast` | `topology` (once), `broadcast`, `read` | convergence (set) + set-full: every acknowledged message read everywhere after the heal, stale reads and time to visibility |
//! | `g-set` | `add`, `read` | convergence (set) + set-full |
//! | `g-counter`, `pn-counter` | `add` (delta), `read` | convergence (counter): final reads agree and lie between the acknowledged and the possible sums |
//! | `lin-kv` | `read`, `write`, `cas` per key | linearizability (cas-register per key) |
//! | `txn-list-append`, `txn-rw-register` | `txn` | Elle at `--consistency-model` |
//! | `kafka` | `send`, `poll`, `commit_offsets`, `list_committed_offsets` ([`super::kafka`]) | kafka: no lost, misplaced or reordered message, monotonic committed offsets |

use crate::check_options::CheckOptions;
use crate::systems::Invocation;
use crate::workload::{
    eventual::checkers_for, register, txn, OpGenerator, Workload, WorkloadOptions,
};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Map, Value};
use splitbrain_checkers::eventual::{ConvergenceChecker, EventualDataType, SetFullChecker};
use splitbrain_checkers::jepsen::{
    echo::EchoChecker, kafka::KafkaChecker, unique_ids::UniqueIdsChecker,
};
use splitbrain_checkers::Checker;

/// One of Maelstrom's workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaelstromWorkload {
    /// `echo`.
    Echo,
    /// `unique-ids`.
    UniqueIds,
    /// `broadcast`.
    Broadcast,
    /// `g-set`.
    GSet,
    /// `g-counter`.
    GCounter,
    /// `pn-counter`.
    PnCounter,
    /// `lin-kv`.
    LinKv,
    /// `txn-list-append`.
    TxnListAppend,
    /// `txn-rw-register`.
    TxnRwRegister,
    /// `kafka`.
    Kafka,
}

/// Every workload with its `--workload` name.
pub const WORKLOADS: &[(&str, MaelstromWorkload)] = &[
    ("echo", MaelstromWorkload::Echo),
    ("unique-ids", MaelstromWorkload::UniqueIds),
    ("broadcast", MaelstromWorkload::Broadcast),
    ("g-set", MaelstromWorkload::GSet),
    ("g-counter", MaelstromWorkload::GCounter),
    ("pn-counter", MaelstromWorkload::PnCounter),
    ("lin-kv", MaelstromWorkload::LinKv),
    ("txn-list-append", MaelstromWorkload::TxnListAppend),
    ("txn-rw-register", MaelstromWorkload::TxnRwRegister),
    ("kafka", MaelstromWorkload::Kafka),
];

pub use super::protocol::Reply;

impl MaelstromWorkload {
    /// Looks a workload up by its `--workload` name.
    pub fn parse(name: &str) -> Option<MaelstromWorkload> {
        WORKLOADS.iter().find(|(n, _)| *n == name).map(|(_, w)| *w)
    }

    /// Its `--workload` name.
    pub fn name(self) -> &'static str {
        WORKLOADS
            .iter()
            .find(|(_, w)| *w == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// Whether the nodes get a `topology` message after `init`.
    pub fn wants_topology(self) -> bool {
        self == MaelstromWorkload::Broadcast
    }

    /// The request body (without `msg_id`) for an invocation; a kafka request as a fresh
    /// consumer would send it (the client sends its own consumer's).
    pub fn request(self, inv: &Invocation) -> Map<String, Value> {
        use MaelstromWorkload::*;
        // Maelstrom's lin-kv keys are integers: `k7` goes out as 7.
        let key = inv.key.as_ref().map_or(Value::Null, integer_key);
        let body = match (self, inv.f.as_str()) {
            (Echo, _) => json!({"type": "echo", "echo": inv.value}),
            (UniqueIds, _) => json!({"type": "generate"}),
            (Broadcast, "add") => json!({"type": "broadcast", "message": inv.value}),
            (GSet, "add") => json!({"type": "add", "element": inv.value}),
            (GCounter | PnCounter, "add") => json!({"type": "add", "delta": inv.value}),
            (Broadcast | GSet | GCounter | PnCounter, _) => json!({"type": "read"}),
            (LinKv, "read") => json!({"type": "read", "key": key}),
            (LinKv, "write") => json!({"type": "write", "key": key, "value": inv.value}),
            (LinKv, _) => {
                json!({"type": "cas", "key": key, "from": inv.value[0], "to": inv.value[1]})
            }
            (TxnListAppend | TxnRwRegister, _) => json!({"type": "txn", "txn": inv.value}),
            (Kafka, _) => return super::kafka::Consumer::default().request(inv),
        };
        match body {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    /// What a reply body means for the invocation it answers. A kafka `ok` is the whole
    /// reply body, which the client's consumer turns into the recorded value.
    pub fn reply(self, inv: &Invocation, body: &Map<String, Value>) -> Reply {
        use MaelstromWorkload::*;
        let kind = body.get("type").and_then(Value::as_str).unwrap_or("");
        if kind == "error" {
            let code = body.get("code").and_then(Value::as_i64).unwrap_or(-1);
            // A lin-kv read of a key nobody wrote observes "no value": the register's nil.
            if self == LinKv && inv.f == "read" && code == 20 {
                return Reply::Ok(Value::Null);
            }
            return Reply::Error {
                code,
                definite: super::protocol::is_definite(code),
                error: json!({
                    "code": code,
                    "name": super::protocol::error_name(code),
                    "text": body.get("text").cloned().unwrap_or(Value::Null),
                }),
            };
        }
        let want = match self.request(inv).get("type").and_then(Value::as_str) {
            Some(t) => format!("{t}_ok"),
            None => String::new(),
        };
        if kind != want {
            return Reply::Malformed(format!(
                "expected a {want} or error reply, got type {kind:?}"
            ));
        }
        let field = |name: &str| match body.get(name) {
            Some(v) => Reply::Ok(v.clone()),
            None => Reply::Malformed(format!("expected {want} to carry \"{name}\"")),
        };
        match (self, inv.f.as_str()) {
            (Echo, _) => field("echo"),
            (UniqueIds, _) => field("id"),
            (Broadcast, "read") => sorted_set(field("messages")),
            (GSet, "read") => sorted_set(field("value")),
            (GCounter | PnCounter | LinKv, "read") => field("value"),
            (TxnListAppend | TxnRwRegister, _) => field("txn"),
            (Kafka, _) => Reply::Ok(Value::Object(body.clone())),
            _ => Reply::Ok(inv.value.clone()),
        }
    }
}

/// A set read (broadcast's `messages`, g-set's `value`) in one order, so two replicas
/// holding the same set read the same (final-read rounds compare values as they are).
/// `null` is the empty set: Maelstrom's reply schema (`[s/Any]`, Plumatic Schema) accepts
/// nil for a sequence and its set-full checker reads it as no elements, and a Go node
/// answers a read before any broadcast with `null` (a nil slice marshals so).
fn sorted_set(reply: Reply) -> Reply {
    match reply {
        Reply::Ok(Value::Null) => Reply::Ok(Value::Array(Vec::new())),
        Reply::Ok(Value::Array(mut items)) => {
            items.sort_by(|a, b| match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                _ => a.to_string().cmp(&b.to_string()),
            });
            Reply::Ok(Value::Array(items))
        }
        other => other,
    }
}

/// A generator's key `k<N>` as Maelstrom's integer key `N`; any other key as it is.
fn integer_key(key: &Value) -> Value {
    key.as_str()
        .and_then(|k| k.strip_prefix('k'))
        .and_then(|n| n.parse::<u64>().ok())
        .map_or_else(|| key.clone(), Value::from)
}

impl Workload for MaelstromWorkload {
    fn name(&self) -> &'static str {
        MaelstromWorkload::name(*self)
    }

    fn description(&self) -> &'static str {
        use MaelstromWorkload::*;
        match self {
            Echo => "Maelstrom echo: every payload comes back",
            UniqueIds => "Maelstrom unique-ids: generate ids, none twice",
            Broadcast => {
                "Maelstrom broadcast: every acknowledged message read everywhere after the heal"
            }
            GSet => "Maelstrom g-set: a grow-only set that converges",
            GCounter => "Maelstrom g-counter: final reads equal the sum of the increments",
            PnCounter => "Maelstrom pn-counter: final reads equal the sum of the deltas",
            LinKv => "Maelstrom lin-kv: linearizable read/write/cas per key",
            TxnListAppend => "Maelstrom txn-list-append: Elle list-append transactions",
            TxnRwRegister => "Maelstrom txn-rw-register: Elle rw-register transactions",
            Kafka => "Maelstrom kafka: append-only logs with offsets, polls and committed offsets",
        }
    }

    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        use MaelstromWorkload::*;
        match self {
            LinKv => register::RegisterWorkload.generator(opts),
            TxnListAppend => txn::ListAppendWorkload.generator(opts),
            TxnRwRegister => txn::RwRegisterWorkload.generator(opts),
            Kafka => Box::new(super::kafka::KafkaGenerator::new(opts.active_keys)),
            other => Box::new(KeylessGenerator {
                workload: *other,
                next: 0,
            }),
        }
    }

    fn checkers(&self, check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        use MaelstromWorkload::*;
        Ok(match self {
            Echo => vec![Box::new(EchoChecker)],
            UniqueIds => vec![Box::new(UniqueIdsChecker)],
            Broadcast | GSet => vec![
                Box::new(ConvergenceChecker::new(EventualDataType::Set)),
                Box::new(SetFullChecker),
            ],
            // Maelstrom judges counters by their final reads only: reads during the run may lag.
            GCounter | PnCounter => {
                let mut c = checkers_for(EventualDataType::Counter);
                c.truncate(1);
                c
            }
            LinKv => register::RegisterWorkload.checkers(check)?,
            TxnListAppend => in_maelstrom_terms(txn::ListAppendWorkload.checkers(check)?),
            TxnRwRegister => in_maelstrom_terms(txn::RwRegisterWorkload.checkers(check)?),
            Kafka => vec![Box::new(KafkaChecker)],
        })
    }
}

/// What a garbage read means to someone coming from Maelstrom, whose checker passes it.
pub const GARBAGE_READ_NOTE: &str = "Maelstrom users: your node returned a value no \
transaction wrote, such as 0 for a key nobody wrote (a Go map's zero value). Every key \
starts as null: a read of a key nobody wrote must return null. Maelstrom's checker does \
not flag this; splitbrain does, on purpose (docs/maelstrom.md)";

/// Wraps the transactional checkers so that a garbage read is also explained in a
/// Maelstrom user's terms.
fn in_maelstrom_terms(checkers: Vec<Box<dyn Checker>>) -> Vec<Box<dyn Checker>> {
    checkers
        .into_iter()
        .map(|c| Box::new(MaelstromTerms(c)) as Box<dyn Checker>)
        .collect()
}

struct MaelstromTerms(Box<dyn Checker>);

impl Checker for MaelstromTerms {
    fn name(&self) -> String {
        self.0.name()
    }

    fn check(&self, history: &splitbrain_checkers::History) -> splitbrain_checkers::CheckResult {
        let mut r = self.0.check(history);
        if r.anomaly_types.iter().any(|a| a == "garbage-read") {
            r.explanation = format!("{}. {GARBAGE_READ_NOTE}", r.explanation);
            if let Some(d) = r.details.as_object_mut() {
                d.insert("maelstrom_note".into(), GARBAGE_READ_NOTE.into());
            }
        }
        r
    }
}

/// The workloads on one unnamed object (Maelstrom's echo, ids, broadcast, sets, counters):
/// half updates, half reads; elements unique across the run.
struct KeylessGenerator {
    workload: MaelstromWorkload,
    next: u64,
}

impl OpGenerator for KeylessGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        use MaelstromWorkload::*;
        self.next += 1;
        let (f, value) = match self.workload {
            Echo => ("echo", json!(format!("Please echo {}", self.next))),
            UniqueIds => ("generate", Value::Null),
            _ if rng.gen_bool(0.5) => ("read", Value::Null),
            Broadcast | GSet => ("add", json!(self.next)),
            GCounter => ("add", json!(rng.gen_range(1..=5))),
            _ => {
                let d: i64 = rng.gen_range(1..=5);
                ("add", json!(if rng.gen_bool(0.5) { d } else { -d }))
            }
        };
        Invocation {
            f: f.into(),
            key: None,
            value,
        }
    }

    fn final_reads(&self) -> Vec<Invocation> {
        use MaelstromWorkload::*;
        match self.workload {
            Broadcast | GSet | GCounter | PnCounter => vec![Invocation {
                f: "read".into(),
                key: None,
                value: Value::Null,
            }],
            _ => Vec::new(),
        }
    }

    fn final_reads_per_replica(&self) -> bool {
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An invocation, for tests.
    pub(crate) fn inv(f: &str, key: Option<Value>, value: Value) -> Invocation {
        Invocation {
            f: f.into(),
            key,
            value,
        }
    }

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn requests_have_maelstrom_shapes() {
        let w = MaelstromWorkload::LinKv;
        let cas = w.request(&inv("cas", Some(json!(3)), json!([1, 2])));
        assert_eq!(
            Value::Object(cas),
            json!({"type":"cas","key":3,"from":1,"to":2})
        );
        // Maelstrom's lin-kv keys are integers.
        let read = w.request(&inv("read", Some(json!("k12")), Value::Null));
        assert_eq!(Value::Object(read), json!({"type":"read","key":12}));
        let b = MaelstromWorkload::Broadcast.request(&inv("add", None, json!(7)));
        assert_eq!(Value::Object(b), json!({"type":"broadcast","message":7}));
        let c = MaelstromWorkload::PnCounter.request(&inv("add", None, json!(-2)));
        assert_eq!(Value::Object(c), json!({"type":"add","delta":-2}));
    }

    #[test]
    fn replies_become_completions_with_maelstrom_error_meanings() {
        let w = MaelstromWorkload::LinKv;
        let read = inv("read", Some(json!(1)), Value::Null);
        assert_eq!(
            w.reply(&read, &body(json!({"type":"read_ok","value":4}))),
            Reply::Ok(json!(4))
        );
        assert_eq!(
            w.reply(&read, &body(json!({"type":"error","code":20}))),
            Reply::Ok(Value::Null)
        );
        let cas = inv("cas", Some(json!(1)), json!([1, 2]));
        assert!(matches!(
            w.reply(&cas, &body(json!({"type":"error","code":22}))),
            Reply::Error { definite: true, .. }
        ));
        assert!(matches!(
            w.reply(&cas, &body(json!({"type":"error","code":0}))),
            Reply::Error {
                definite: false,
                ..
            }
        ));
        assert!(matches!(
            w.reply(&cas, &body(json!({"type":"read_ok"}))),
            Reply::Malformed(_)
        ));
        // Sets come back in one order, whichever the node used.
        let r = MaelstromWorkload::Broadcast.reply(
            &inv("read", None, Value::Null),
            &body(json!({"type":"read_ok","messages":[3, 10, 1]})),
        );
        assert_eq!(r, Reply::Ok(json!([1, 3, 10])));
        let r = MaelstromWorkload::Broadcast.reply(
            &inv("read", None, Value::Null),
            &body(json!({"type":"read_ok"})),
        );
        assert!(matches!(r, Reply::Malformed(m) if m.contains("\"messages\"")));
        // A Go node's empty set (a nil slice) is `null`: the empty set, as in Maelstrom.
        for (w, field) in [
            (MaelstromWorkload::Broadcast, "messages"),
            (MaelstromWorkload::GSet, "value"),
        ] {
            let r = w.reply(
                &inv("read", None, Value::Null),
                &body(json!({"type": "read_ok", field: null})),
            );
            assert_eq!(r, Reply::Ok(json!([])), "{field}");
        }
    }

    #[test]
    fn a_garbage_read_is_explained_in_a_maelstrom_users_terms() {
        // Two transactions read key 1 as 0, which nobody wrote (the initial value is null).
        let text = r#"{"index":0,"time":1,"process":0,"type":"invoke","f":"txn","value":[["r",1,null]]}
{"index":1,"time":2,"process":0,"type":"ok","f":"txn","value":[["r",1,0]]}
{"index":2,"time":3,"process":1,"type":"invoke","f":"txn","value":[["w",2,5]]}
{"index":3,"time":4,"process":1,"type":"ok","f":"txn","value":[["w",2,5]]}
"#;
        let h = splitbrain_checkers::history::read::read_str(
            text,
            std::path::Path::new("t.jsonl"),
            None,
        )
        .unwrap();
        let check = CheckOptions::default();
        let checkers = MaelstromWorkload::TxnRwRegister.checkers(&check).unwrap();
        let r = checkers[0].check(&h);
        assert!(r.anomaly_types.iter().any(|a| a == "garbage-read"), "{r:?}");
        assert!(
            r.explanation
                .contains("Maelstrom users: your node returned"),
            "{}",
            r.explanation
        );
        assert_eq!(r.details["maelstrom_note"], GARBAGE_READ_NOTE);
        // A clean history says nothing of it.
        let clean = &text[text.find("{\"index\":2").unwrap()..];
        let h =
            splitbrain_checkers::history::read::read_str(clean, std::path::Path::new("t"), None)
                .unwrap();
        assert!(!checkers[0]
            .check(&h)
            .explanation
            .contains("Maelstrom users"));
    }
}
