//! `bank`: transfers between a fixed set of accounts and reads of every balance, checked
//! by the bank checker (every read sums to the total; no negative balance). The accounts
//! are keys `0..BANK_ACCOUNTS`, each given `BANK_INITIAL` by one setup transaction.

use super::{OpGenerator, Workload, WorkloadOptions};
use crate::check::CheckOptions;
use crate::target::Invocation;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::Checker;

/// Number of accounts; their keys are `0..BANK_ACCOUNTS`.
pub const BANK_ACCOUNTS: u64 = 8;
/// Opening balance of every account.
pub const BANK_INITIAL: i64 = 10;
/// Largest amount moved by one transfer.
const MAX_TRANSFER: i64 = 5;

/// Transfers and whole-bank reads.
pub struct BankWorkload;

impl Workload for BankWorkload {
    fn name(&self) -> &'static str {
        "bank"
    }
    fn description(&self) -> &'static str {
        "transfers between 8 accounts and reads of all balances; totals must be conserved, no balance negative"
    }
    fn generator(&self, _opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(BankGenerator)
    }
    fn checkers(&self, check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        check.for_workload(self.name())
    }
}

struct BankGenerator;

impl OpGenerator for BankGenerator {
    fn next_op(&mut self, rng: &mut ChaCha8Rng) -> Invocation {
        if rng.gen_bool(0.5) {
            return Invocation {
                f: "read".into(),
                key: None,
                value: Value::Null,
            };
        }
        let from = rng.gen_range(0..BANK_ACCOUNTS);
        let to = (from + rng.gen_range(1..BANK_ACCOUNTS)) % BANK_ACCOUNTS;
        Invocation {
            f: "transfer".into(),
            key: None,
            value: json!({"from": from, "to": to, "amount": rng.gen_range(1..=MAX_TRANSFER)}),
        }
    }

    fn setup_ops(&self) -> Vec<Invocation> {
        let writes: Vec<Value> = (0..BANK_ACCOUNTS)
            .map(|k| json!(["w", k, BANK_INITIAL]))
            .collect();
        vec![Invocation {
            f: "txn".into(),
            key: None,
            value: Value::Array(writes),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn transfers_move_money_between_distinct_accounts() {
        let mut g = BankGenerator;
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut transfers = 0;
        for _ in 0..500 {
            let inv = g.next_op(&mut rng);
            if inv.f == "transfer" {
                transfers += 1;
                let (from, to) = (inv.value["from"].as_u64(), inv.value["to"].as_u64());
                assert_ne!(from, to);
                assert!(from.unwrap() < BANK_ACCOUNTS && to.unwrap() < BANK_ACCOUNTS);
                assert!((1..=MAX_TRANSFER).contains(&inv.value["amount"].as_i64().unwrap()));
            } else {
                assert_eq!(inv.f, "read");
            }
        }
        assert!(transfers > 100);
        assert_eq!(
            g.setup_ops()[0].value.as_array().unwrap().len() as u64,
            BANK_ACCOUNTS
        );
    }
}
