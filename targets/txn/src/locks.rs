//! The lock table of one owner node: shared and exclusive locks per key, FIFO waiters with
//! deadlines (a bounded wait: a waiter that outlives its deadline is refused, which is how
//! deadlocks are broken — nothing ever waits forever).

use crate::types::{Key, TxnId};
use std::collections::{BTreeMap, VecDeque};

/// A lock mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mode {
    /// Shared (reads).
    Shared,
    /// Exclusive (writes).
    Exclusive,
}

/// The result of asking for a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// Held now.
    Granted,
    /// Queued; [`LockTable::release_all`] or [`LockTable::expire`] will report the outcome.
    Waiting,
}

#[derive(Clone, Debug)]
struct Waiter {
    txn: TxnId,
    mode: Mode,
    deadline: i64,
}

#[derive(Clone, Debug, Default)]
struct KeyLock {
    holders: BTreeMap<TxnId, Mode>,
    waiters: VecDeque<Waiter>,
}

impl KeyLock {
    /// True if `txn` could hold `mode` given the other holders.
    fn compatible(&self, txn: TxnId, mode: Mode) -> bool {
        self.holders
            .iter()
            .all(|(t, m)| *t == txn || (mode == Mode::Shared && *m == Mode::Shared))
    }
}

/// `(txn, key)` pairs: whose lock request on which key an operation decided.
pub type LockEvents = Vec<(TxnId, Key)>;

/// All locks of one node.
#[derive(Clone, Debug, Default)]
pub struct LockTable {
    keys: BTreeMap<Key, KeyLock>,
}

impl LockTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks for `mode` on `key` for `txn`. Granted at once if compatible with the holders
    /// and no one waits ahead (an upgrade S->X jumps the queue: it already holds S);
    /// otherwise queued until `deadline`.
    pub fn acquire(&mut self, key: &Key, txn: TxnId, mode: Mode, deadline: i64) -> Acquire {
        let lock = self.keys.entry(key.clone()).or_default();
        let held = lock.holders.get(&txn).copied();
        if held == Some(Mode::Exclusive) || (held == Some(mode)) {
            return Acquire::Granted;
        }
        let upgrade = held.is_some();
        if lock.compatible(txn, mode) && (upgrade || lock.waiters.is_empty()) {
            lock.holders.insert(txn, mode);
            return Acquire::Granted;
        }
        let waiter = Waiter {
            txn,
            mode,
            deadline,
        };
        if upgrade {
            lock.waiters.push_front(waiter);
        } else {
            lock.waiters.push_back(waiter);
        }
        Acquire::Waiting
    }

    /// The mode `txn` holds on `key`, if any.
    pub fn held(&self, key: &Key, txn: TxnId) -> Option<Mode> {
        self.keys
            .get(key)
            .and_then(|l| l.holders.get(&txn).copied())
    }

    /// Releases every lock of `txn` and drops its waits; returns the waiters granted as a
    /// result, in grant order, as `(txn, key)`.
    pub fn release_all(&mut self, txn: TxnId) -> Vec<(TxnId, Key)> {
        let mut granted = Vec::new();
        let mut empty = Vec::new();
        for (key, lock) in self.keys.iter_mut() {
            let touched = lock.holders.remove(&txn).is_some();
            let before = lock.waiters.len();
            lock.waiters.retain(|w| w.txn != txn);
            if touched || lock.waiters.len() != before {
                grant_waiters(key, lock, &mut granted);
            }
            if lock.holders.is_empty() && lock.waiters.is_empty() {
                empty.push(key.clone());
            }
        }
        for key in empty {
            self.keys.remove(&key);
        }
        granted
    }

    /// Refuses every waiter whose deadline is before `now`; returns them as `(txn, key)`,
    /// plus the waiters granted because a refused one no longer blocks the queue.
    pub fn expire(&mut self, now: i64) -> (LockEvents, LockEvents) {
        let mut expired = Vec::new();
        let mut granted = Vec::new();
        for (key, lock) in self.keys.iter_mut() {
            if !lock.waiters.iter().any(|w| w.deadline < now) {
                continue;
            }
            lock.waiters.retain(|w| {
                let keep = w.deadline >= now;
                if !keep {
                    expired.push((w.txn, key.clone()));
                }
                keep
            });
            grant_waiters(key, lock, &mut granted);
        }
        (expired, granted)
    }

    /// Number of (key, txn) locks held.
    pub fn held_count(&self) -> usize {
        self.keys.values().map(|l| l.holders.len()).sum()
    }
}

/// Grants queued requests from the front while they are compatible.
fn grant_waiters(key: &Key, lock: &mut KeyLock, granted: &mut Vec<(TxnId, Key)>) {
    while let Some(front) = lock.waiters.front() {
        if !lock.compatible(front.txn, front.mode) {
            break;
        }
        let Some(w) = lock.waiters.pop_front() else {
            break;
        };
        lock.holders.insert(w.txn, w.mode);
        granted.push((w.txn, key.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seq: u64) -> TxnId {
        TxnId {
            node: 1,
            boot: 1,
            seq,
        }
    }

    fn k(s: &str) -> Key {
        Key::Str(s.into())
    }

    #[test]
    fn shared_locks_are_compatible_exclusive_ones_conflict() {
        let mut locks = LockTable::new();
        assert_eq!(
            locks.acquire(&k("a"), t(1), Mode::Shared, 10),
            Acquire::Granted
        );
        assert_eq!(
            locks.acquire(&k("a"), t(2), Mode::Shared, 10),
            Acquire::Granted
        );
        assert_eq!(
            locks.acquire(&k("a"), t(3), Mode::Exclusive, 10),
            Acquire::Waiting
        );
        assert_eq!(
            locks.acquire(&k("b"), t(1), Mode::Exclusive, 10),
            Acquire::Granted
        );
        assert_eq!(
            locks.acquire(&k("b"), t(2), Mode::Exclusive, 10),
            Acquire::Waiting
        );
        assert_eq!(
            locks.acquire(&k("b"), t(3), Mode::Shared, 10),
            Acquire::Waiting
        );
        assert_eq!(locks.held_count(), 3);
    }

    #[test]
    fn release_wakes_waiters_in_fifo_order() {
        let mut locks = LockTable::new();
        locks.acquire(&k("a"), t(1), Mode::Exclusive, 10);
        locks.acquire(&k("a"), t(2), Mode::Shared, 10);
        locks.acquire(&k("a"), t(3), Mode::Shared, 10);
        locks.acquire(&k("a"), t(4), Mode::Exclusive, 10);
        // Both readers are granted together; the writer behind them keeps waiting.
        let granted = locks.release_all(t(1));
        assert_eq!(granted, vec![(t(2), k("a")), (t(3), k("a"))]);
        assert_eq!(locks.release_all(t(2)), vec![]);
        assert_eq!(locks.release_all(t(3)), vec![(t(4), k("a"))]);
        assert_eq!(locks.held(&k("a"), t(4)), Some(Mode::Exclusive));
    }

    #[test]
    fn upgrade_is_immediate_when_alone_and_queued_first_otherwise() {
        let mut locks = LockTable::new();
        locks.acquire(&k("a"), t(1), Mode::Shared, 10);
        assert_eq!(
            locks.acquire(&k("a"), t(1), Mode::Exclusive, 10),
            Acquire::Granted
        );
        assert_eq!(locks.held(&k("a"), t(1)), Some(Mode::Exclusive));
        // Re-asking for a weaker mode keeps the stronger one.
        assert_eq!(
            locks.acquire(&k("a"), t(1), Mode::Shared, 10),
            Acquire::Granted
        );
        assert_eq!(locks.held(&k("a"), t(1)), Some(Mode::Exclusive));

        locks.acquire(&k("b"), t(1), Mode::Shared, 10);
        locks.acquire(&k("b"), t(2), Mode::Shared, 10);
        locks.acquire(&k("b"), t(3), Mode::Exclusive, 10);
        assert_eq!(
            locks.acquire(&k("b"), t(2), Mode::Exclusive, 10),
            Acquire::Waiting
        );
        // t2's upgrade waits ahead of t3 and is granted when t1 leaves.
        assert_eq!(locks.release_all(t(1)), vec![(t(2), k("b"))]);
        assert_eq!(locks.held(&k("b"), t(2)), Some(Mode::Exclusive));
    }

    #[test]
    fn waits_are_bounded_and_expiry_unblocks_the_queue() {
        let mut locks = LockTable::new();
        locks.acquire(&k("a"), t(1), Mode::Shared, 0);
        locks.acquire(&k("a"), t(2), Mode::Exclusive, 5);
        locks.acquire(&k("a"), t(3), Mode::Shared, 50);
        // Nothing expires before its deadline.
        assert_eq!(locks.expire(5), (vec![], vec![]));
        // The writer times out; the reader queued behind it is compatible with t1.
        let (expired, granted) = locks.expire(6);
        assert_eq!(expired, vec![(t(2), k("a"))]);
        assert_eq!(granted, vec![(t(3), k("a"))]);
        assert_eq!(locks.held(&k("a"), t(2)), None);
        // A deadlock (t1 and t3 both want to upgrade) is broken by a deadline.
        assert_eq!(
            locks.acquire(&k("a"), t(1), Mode::Exclusive, 20),
            Acquire::Waiting
        );
        assert_eq!(
            locks.acquire(&k("a"), t(3), Mode::Exclusive, 30),
            Acquire::Waiting
        );
        let (expired, granted) = locks.expire(21);
        assert_eq!(expired, vec![(t(1), k("a"))]);
        assert!(granted.is_empty(), "t1 still holds S until it releases");
        assert_eq!(locks.release_all(t(1)), vec![(t(3), k("a"))]);
        assert_eq!(locks.held(&k("a"), t(3)), Some(Mode::Exclusive));
    }
}
