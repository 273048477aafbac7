//! `list-append` and `rw-register`: Elle's transactional workloads. Each op is a
//! transaction of 1-4 micro-ops on rotating integer keys — reads and appends of unique
//! elements (list-append), or reads and writes of unique values (rw-register) — checked
//! by the Elle-style checker at `--consistency-model` (default strict-serializable).

use super::{KeyRotation, OpGenerator, Workload, WorkloadOptions};
use crate::check_options::CheckOptions;
use crate::systems::Invocation;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::elle::ElleWorkload;
use splitbrain_checkers::Checker;

/// Longest transaction generated, in micro-ops.
const MAX_TXN_LEN: usize = 4;

/// Transactions of reads and appends to per-key lists.
pub struct ListAppendWorkload;

impl Workload for ListAppendWorkload {
    fn name(&self) -> &'static str {
        "list-append"
    }
    fn description(&self) -> &'static str {
        "transactions of reads and appends (unique elements) over rotating keys; Elle list-append checker"
    }
    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(TxnGenerator::new(opts, "append"))
    }
    fn checkers(&self, check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        Ok(vec![check.elle(ElleWorkload::ListAppend)?])
    }
}

/// Transactions of reads and writes of registers.
pub struct RwRegisterWorkload;

impl Workload for RwRegisterWorkload {
    fn name(&self) -> &'static str {
        "rw-register"
    }
    fn description(&self) -> &'static str {
        "transactions of reads and writes (unique values) over rotating keys; Elle rw-register checker"
    }
    fn generator(&self, opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(TxnGenerator::new(opts, "w"))
    }
    fn checkers(&self, check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        Ok(vec![check.elle(ElleWorkload::RwRegister)?])
    }
}

/// Generates transactions; `write` is the writing micro-op (`append` or `w`).
struct TxnGenerator {
    keys: KeyRotation,
    write: &'static str,
    /// Values are unique across the whole run, so unique per key as Elle needs.
    next_value: u64,
}

impl TxnGenerator {
    fn new(opts: WorkloadOptions, write: &'static str) -> TxnGenerator {
        TxnGenerator {
            keys: KeyRotation::new(opts.active_keys, opts.ops_per_key),
            write,
            next_value: 0,
        }
    }
}

impl OpGenerator for TxnGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        let len = rng.gen_range(1..=MAX_TXN_LEN);
        let mops: Vec<Value> = (0..len)
            .map(|_| {
                let key = self.keys.pick(rng);
                if rng.gen_bool(0.5) {
                    json!(["r", key, null])
                } else {
                    self.next_value += 1;
                    json!([self.write, key, self.next_value])
                }
            })
            .collect();
        Invocation {
            f: "txn".into(),
            key: None,
            value: Value::Array(mops),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn transactions_are_short_and_writes_unique() {
        let opts = WorkloadOptions {
            active_keys: 3,
            ops_per_key: 10,
        };
        let mut g = TxnGenerator::new(opts, "append");
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let inv = g.next_op(&mut rng);
            assert_eq!(inv.f, "txn");
            let mops = inv.value.as_array().unwrap();
            assert!((1..=MAX_TXN_LEN).contains(&mops.len()));
            for m in mops {
                match m[0].as_str().unwrap() {
                    "r" => assert!(m[2].is_null()),
                    "append" => assert!(seen.insert(m[2].as_u64().unwrap())),
                    other => panic!("unexpected micro-op {other}"),
                }
            }
        }
        assert!(!seen.is_empty());
    }
}
