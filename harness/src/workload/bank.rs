//! `bank`: transfers between a fixed set of accounts and reads of every balance, checked
//! by the bank checker (every read sums to the total; no negative balance). The accounts
//! are keys `0..BANK_ACCOUNTS`, each given `BANK_INITIAL` by one setup transaction.
//!
//! Transfers collide on purpose: most of them move money into or out of one hot account,
//! so two transfers in flight at once almost always want the same lock. Bugs that need
//! two writers of one account at the same moment (a lock released early, a participant
//! deciding alone) then show on an idle machine as well as a loaded one, where the
//! contention would otherwise come only from slow, overlapping requests.

use super::{OpGenerator, Workload, WorkloadOptions};
use crate::check_options::CheckOptions;
use crate::systems::Invocation;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use splitbrain_checkers::bank::{BankChecker, BankOptions};
use splitbrain_checkers::Checker;

/// Number of accounts; their keys are `0..BANK_ACCOUNTS`.
pub const BANK_ACCOUNTS: u64 = 8;
/// Opening balance of every account.
pub const BANK_INITIAL: i64 = 10;
/// Largest amount moved by one transfer.
const MAX_TRANSFER: i64 = 5;
/// The account most transfers touch (its owner node is a participant of most transfers
/// as well).
pub const BANK_HOT_ACCOUNT: u64 = 0;
/// Share of transfers that touch [`BANK_HOT_ACCOUNT`]; the rest pick two accounts uniformly.
const HOT_SHARE: f64 = 0.75;

/// Transfers and whole-bank reads.
pub struct BankWorkload;

impl Workload for BankWorkload {
    fn name(&self) -> &'static str {
        "bank"
    }
    fn description(&self) -> &'static str {
        "transfers between 8 accounts (most into or out of one hot account) and reads of all balances; totals must be conserved, no balance negative"
    }
    fn generator(&self, _opts: WorkloadOptions) -> Box<dyn OpGenerator> {
        Box::new(BankGenerator)
    }
    /// Judged by the balances alone: the check's options (models, bounds) do not apply.
    fn checkers(&self, _check: &CheckOptions) -> anyhow::Result<Vec<Box<dyn Checker>>> {
        Ok(vec![Box::new(BankChecker::new(BankOptions {
            total: None,
            negative_allowed: false,
        }))])
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
        let (from, to) = if rng.gen_bool(HOT_SHARE) {
            let other = (BANK_HOT_ACCOUNT + rng.gen_range(1..BANK_ACCOUNTS)) % BANK_ACCOUNTS;
            // Both directions, so the hot balance wanders rather than drains.
            if rng.gen_bool(0.5) {
                (BANK_HOT_ACCOUNT, other)
            } else {
                (other, BANK_HOT_ACCOUNT)
            }
        } else {
            let from = rng.gen_range(0..BANK_ACCOUNTS);
            (
                from,
                (from + rng.gen_range(1..BANK_ACCOUNTS)) % BANK_ACCOUNTS,
            )
        };
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
        let (mut transfers, mut hot, mut cold) = (0, 0, 0);
        let mut hot_from = 0;
        for _ in 0..500 {
            let inv = g.next_op(&mut rng);
            if inv.f == "transfer" {
                transfers += 1;
                let (from, to) = (inv.value["from"].as_u64(), inv.value["to"].as_u64());
                assert_ne!(from, to);
                assert!(from.unwrap() < BANK_ACCOUNTS && to.unwrap() < BANK_ACCOUNTS);
                assert!((1..=MAX_TRANSFER).contains(&inv.value["amount"].as_i64().unwrap()));
                if from == Some(BANK_HOT_ACCOUNT) || to == Some(BANK_HOT_ACCOUNT) {
                    hot += 1;
                    hot_from += usize::from(from == Some(BANK_HOT_ACCOUNT));
                } else {
                    cold += 1;
                }
            } else {
                assert_eq!(inv.f, "read");
            }
        }
        assert!(transfers > 100);
        // Most transfers collide on the hot account, in both directions; some do not.
        assert!(
            hot > transfers * 2 / 3,
            "{hot} of {transfers} touch the hot account"
        );
        assert!(cold > 0);
        assert!(hot_from > hot / 4 && hot_from < hot * 3 / 4);
        assert_eq!(
            g.setup_ops()[0].value.as_array().unwrap().len() as u64,
            BANK_ACCOUNTS
        );
    }
}
