//! Jepsen's generic checkers, under Jepsen's names: [`counter`], [`unique_ids`]
//! (`unique-ids`), [`echo`] (Maelstrom's), [`total_queue`] (`total-queue`), [`kafka`], [`long_fork`] (`long-fork`),
//! [`lost_appends`] (`lost-appends`, Jepsen's set-full for lists),
//! [`stats`] and [`exceptions`]. Each is pure and reads a [`History`] from anywhere.
//!
//! ```
//! use splitbrain_checkers::jepsen::by_name;
//! let checker = by_name("unique-ids").expect("a Jepsen checker");
//! assert_eq!(checker.name(), "unique-ids");
//! ```

pub mod counter;
pub mod echo;
pub mod exceptions;
pub mod kafka;
pub mod long_fork;
pub mod lost_appends;
pub mod stats;
pub mod total_queue;
pub mod unique_ids;

use crate::history::{History, OpPair, Outcome};
use crate::verdict::Checker;
use serde_json::{json, Value};

/// How many offending ops or values a result lists (all are counted).
pub(crate) const MAX_LISTED: usize = 8;

/// The names [`by_name`] accepts, with what each checks.
pub const CHECKERS: &[(&str, &str)] = &[
    (
        "counter",
        "reads of an `add`/`read` counter lie within the acknowledged and attempted increments",
    ),
    ("unique-ids", "no id returned by `generate` twice"),
    (
        "echo",
        "every ok `echo` returned the payload it sent (Maelstrom's echo workload)",
    ),
    (
        "total-queue",
        "every acknowledged `enqueue` dequeued, none twice, none never enqueued",
    ),
    (
        "kafka",
        "append-only logs with offsets: no lost, misplaced or reordered message, monotonic polls and committed offsets",
    ),
    (
        "long-fork",
        "no two reads observe two single writes in opposite orders (snapshot isolation)",
    ),
    (
        "lost-appends",
        "every acknowledged `append` to a list is in its key's last read invoked after it",
    ),
    (
        "stats",
        "per `f`: counts by outcome; an `f` that never succeeded is flagged",
    ),
    (
        "exceptions",
        "info and fail ops grouped by error, with counts and an example",
    ),
];

/// One of Jepsen's checkers by its Jepsen name (see [`CHECKERS`]) with default options.
pub fn by_name(name: &str) -> Option<Box<dyn Checker>> {
    Some(match name {
        "counter" => Box::new(counter::CounterChecker::default()),
        "unique-ids" => Box::new(unique_ids::UniqueIdsChecker),
        "echo" => Box::new(echo::EchoChecker),
        "total-queue" => Box::new(total_queue::TotalQueueChecker),
        "kafka" => Box::new(kafka::KafkaChecker),
        "long-fork" => Box::new(long_fork::LongForkChecker),
        "lost-appends" => Box::new(lost_appends::LostAppendsChecker),
        "stats" => Box::new(stats::StatsChecker),
        "exceptions" => Box::new(exceptions::ExceptionsChecker),
        _ => return None,
    })
}

/// A pair as evidence, named by the history's own indices.
pub(crate) fn pair_json(history: &History, p: &OpPair) -> Value {
    json!({
        "index": history.op_index(p.invoke_pos),
        "complete_index": p.complete_pos.map(|c| history.op_index(c)),
        "process": p.process,
        "f": p.f,
        "value": p.value,
        "outcome": outcome_name(p.outcome),
        "error": p.error,
    })
}

/// The history's name for an outcome.
pub(crate) fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Ok => "ok",
        Outcome::Fail => "fail",
        Outcome::Info => "info",
        Outcome::Pending => "pending",
    }
}

/// `n thing` or `n things`.
pub(crate) fn plural(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}
