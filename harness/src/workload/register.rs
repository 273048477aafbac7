//! `register`: read/write/cas on rotating keys; `append`: appends to per-key lists and
//! reads of them (lost writes show up as missing elements). Both are checked for
//! linearizability key by key.

use super::{KeyRotation, OpGenerator, Workload, WorkloadOptions};
use crate::check_options::CheckOptions;
use crate::systems::Invocation;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::Checker;

/// Read/write/cas registers, one per key.
pub struct RegisterWorkload;

impl Workload for RegisterWorkload {
    fn name(&self) -> &'static str {
        "register"
    }
    fn description(&self) -> &'static str {
        "read / write / cas on rotating keys (values 0-4), checked as linearizable cas-registers"
    }
    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(RegisterGenerator {
            keys: KeyRotation::new(opts.active_keys, opts.ops_per_key),
        })
    }
    fn checkers(&self, check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        Ok(vec![check.linearizability("cas-register")?])
    }
}

struct RegisterGenerator {
    keys: KeyRotation,
}

impl OpGenerator for RegisterGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        let key = Some(KeyRotation::key_value(self.keys.pick(rng)));
        // Weighted mix: half reads, a quarter writes, a quarter cas.
        let roll = rng.gen_range(0..4);
        let (f, value) = match roll {
            0 | 1 => ("read", Value::Null),
            2 => ("write", json!(rng.gen_range(0..5))),
            _ => ("cas", json!([rng.gen_range(0..5), rng.gen_range(0..5)])),
        };
        Invocation {
            f: f.into(),
            key,
            value,
        }
    }
}

/// Single-key appends of unique elements and reads of whole lists.
pub struct AppendWorkload;

impl Workload for AppendWorkload {
    fn name(&self) -> &'static str {
        "append"
    }
    fn description(&self) -> &'static str {
        "append unique elements to per-key lists and read them back; lost or reordered writes are visible"
    }
    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(AppendGenerator {
            keys: KeyRotation::new(opts.active_keys, opts.ops_per_key),
            next_element: 0,
        })
    }
    fn checkers(&self, check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        // linearizability decides; lost-appends names what a lost write took with it
        Ok(vec![
            check.linearizability("list-append")?,
            Box::new(splitbrain_checkers::jepsen::lost_appends::LostAppendsChecker),
        ])
    }
}

struct AppendGenerator {
    keys: KeyRotation,
    next_element: u64,
}

impl OpGenerator for AppendGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        let key = Some(KeyRotation::key_value(self.keys.pick(rng)));
        if rng.gen_bool(0.6) {
            self.next_element += 1;
            Invocation {
                f: "append".into(),
                key,
                value: json!(self.next_element),
            }
        } else {
            Invocation {
                f: "read".into(),
                key,
                value: Value::Null,
            }
        }
    }

    fn final_reads(&self) -> Vec<Invocation> {
        self.keys
            .active_keys()
            .into_iter()
            .map(|k| Invocation {
                f: "read".into(),
                key: Some(KeyRotation::key_value(k)),
                value: Value::Null,
            })
            .collect()
    }
}
