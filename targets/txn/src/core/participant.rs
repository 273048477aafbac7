//! The participant role: locks, per-txn workspaces, prepare, apply, in-doubt resolution.

use super::{Core, Isolation};
use crate::locks::{Acquire, Mode};
use crate::types::{Key, Message, NodeId, Op, OpError, OpKind, Record, TxnId, Val, Write};
use std::collections::BTreeMap;

/// Where a participant txn is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartState {
    /// Executing ops; may still abort on its own.
    Active {
        /// Last Exec seen (idle txns are aborted).
        last_active: i64,
        /// When to ask the coordinator whether the txn is still running (its Abort may
        /// have been lost; locks must not linger).
        next_query: i64,
    },
    /// Voted yes; bound by the coordinator's decision.
    Prepared {
        /// When the next in-doubt query (or, with `unilateral-abort`, the abort) is due.
        next_query: i64,
        /// Current query backoff.
        backoff: i64,
    },
}

/// A txn as one participant sees it.
#[derive(Clone, Debug)]
pub struct PartTxn {
    /// Its coordinator.
    pub coord: NodeId,
    /// Buffered writes: the final value of each written key.
    pub writes: BTreeMap<Key, Val>,
    /// The writes as logged in the prepare record (set when prepared; applied at commit).
    pub logged: Vec<(Key, Write)>,
    /// Results of executed ops by index (answers duplicate Execs).
    pub results: BTreeMap<usize, Result<Option<Val>, OpError>>,
    /// An op waiting for a lock.
    pub pending: Option<(usize, Op)>,
    /// Phase.
    pub state: PartState,
}

/// Longest pause between two in-doubt queries.
const MAX_QUERY_BACKOFF_MS: i64 = 1000;

impl Core {
    pub(super) fn restore_prepared(
        &mut self,
        txn: TxnId,
        coord: NodeId,
        logged: Vec<(Key, Write)>,
        now: i64,
    ) {
        for (key, _) in &logged {
            // Fresh table: granted, except two prepared txns on one key (only possible
            // with early-lock-release), where the second waits as it would have.
            let _ = self.locks.acquire(key, txn, Mode::Exclusive, i64::MAX);
        }
        let state = self.prepared_state(now);
        self.parts.insert(
            txn,
            PartTxn {
                coord,
                writes: BTreeMap::new(),
                logged,
                results: BTreeMap::new(),
                pending: None,
                state,
            },
        );
    }

    fn active_state(&self, now: i64) -> PartState {
        PartState::Active {
            last_active: now,
            next_query: now + self.cfg.lock_wait_ms.max(0) + 2 * self.cfg.resend_ms.max(1),
        }
    }

    fn prepared_state(&self, now: i64) -> PartState {
        let timeout = self.cfg.in_doubt_timeout_ms.max(1);
        PartState::Prepared {
            next_query: now + timeout,
            backoff: (timeout / 4).clamp(20, MAX_QUERY_BACKOFF_MS),
        }
    }

    pub(super) fn on_exec(
        &mut self,
        from: NodeId,
        txn: TxnId,
        idx: usize,
        seen: usize,
        op: Op,
        now: i64,
    ) {
        if self.finished.contains(&txn) {
            return self.exec_reply(from, txn, idx, Err(OpError::Aborted));
        }
        if !self.parts.contains_key(&txn) {
            if seen > 0 {
                // Earlier ops of this txn were executed here and forgotten (restart).
                return self.exec_reply(from, txn, idx, Err(OpError::Aborted));
            }
            self.parts.insert(
                txn,
                PartTxn {
                    coord: from,
                    writes: BTreeMap::new(),
                    logged: Vec::new(),
                    results: BTreeMap::new(),
                    pending: None,
                    state: self.active_state(now),
                },
            );
        }
        let Some(part) = self.parts.get_mut(&txn) else {
            return;
        };
        if let Some(result) = part.results.get(&idx) {
            let result = result.clone();
            return self.exec_reply(from, txn, idx, result);
        }
        if part.pending.as_ref().is_some_and(|(i, _)| *i == idx) {
            return; // a resend while the lock wait goes on
        }
        let PartState::Active { .. } = part.state else {
            return self.exec_reply(from, txn, idx, Err(OpError::Aborted));
        };
        let active = self.active_state(now);
        let Some(part) = self.parts.get_mut(&txn) else {
            return;
        };
        if part.results.len() != seen || part.pending.is_some() {
            return self.exec_reply(from, txn, idx, Err(OpError::Aborted));
        }
        part.state = active;
        let mode = match op.f {
            OpKind::Read
                if self.cfg.isolation == Isolation::ReadCommitted || self.cfg.bugs.dirty_read =>
            {
                None
            }
            OpKind::Read => Some(Mode::Shared),
            _ => Some(Mode::Exclusive),
        };
        if let Some(mode) = mode {
            let deadline = now + self.cfg.lock_wait_ms.max(0);
            if self.locks.acquire(&op.key, txn, mode, deadline) == Acquire::Waiting {
                if let Some(part) = self.parts.get_mut(&txn) {
                    part.pending = Some((idx, op));
                }
                return;
            }
        }
        self.execute(txn, idx, op);
    }

    fn exec_reply(
        &mut self,
        to: NodeId,
        txn: TxnId,
        idx: usize,
        result: Result<Option<Val>, OpError>,
    ) {
        self.send(to, Message::ExecReply { txn, idx, result });
    }

    /// Runs an op whose lock is held, records its result and answers the coordinator.
    fn execute(&mut self, txn: TxnId, idx: usize, op: Op) {
        let dirty = self.cfg.bugs.dirty_read;
        let Some(part) = self.parts.get_mut(&txn) else {
            return;
        };
        let current = match part.writes.get(&op.key) {
            Some(v) => Some(v.clone()),
            None => {
                let pending = self.pending_writes.get(&op.key).map(|(_, v)| v.clone());
                match pending {
                    Some(v) if dirty && op.f == OpKind::Read => Some(v),
                    _ => self.store.get(&op.key).cloned(),
                }
            }
        };
        let arg = op.value.unwrap_or(0);
        let result = match (op.f, current) {
            (OpKind::Read, current) => Ok(current),
            (OpKind::Write, _) => Ok(Some(Val::Int(arg))),
            (OpKind::Append, None) => Ok(Some(Val::List(vec![arg]))),
            (OpKind::Append, Some(Val::List(mut l))) => {
                l.push(arg);
                Ok(Some(Val::List(l)))
            }
            (OpKind::Add, None) => add(0, arg),
            (OpKind::Add, Some(Val::Int(x))) => add(x, arg),
            _ => Err(OpError::TypeMismatch),
        };
        if op.f != OpKind::Read {
            if let Ok(Some(new)) = &result {
                part.writes.insert(op.key.clone(), new.clone());
                self.pending_writes
                    .insert(op.key.clone(), (txn, new.clone()));
            }
        }
        part.results.insert(idx, result.clone());
        let coord = part.coord;
        self.exec_reply(coord, txn, idx, result);
    }

    pub(super) fn on_prepare(&mut self, from: NodeId, txn: TxnId, ops: usize, now: i64) {
        let ready = match self.parts.get(&txn) {
            None => false,
            Some(p) => match p.state {
                PartState::Prepared { .. } => {
                    return self.send(from, Message::Vote { txn, yes: true })
                }
                PartState::Active { .. } => {
                    p.pending.is_none()
                        && p.results.len() == ops
                        && p.results.values().all(Result::is_ok)
                }
            },
        };
        if !ready {
            // Unknown here (restarted, or aborted on its own) or incomplete: vote no.
            self.abort_local(txn);
            return self.send(from, Message::Vote { txn, yes: false });
        }
        let state = self.prepared_state(now);
        let Some(part) = self.parts.get_mut(&txn) else {
            return;
        };
        part.state = state;
        let store = &self.store;
        part.logged = part
            .writes
            .iter()
            .map(|(k, v)| (k.clone(), Write::between(store.get(k), v)))
            .collect();
        let record = Record::Prepared {
            txn,
            coord: part.coord,
            writes: part.logged.clone(),
        };
        self.log(record, !self.cfg.bugs.no_prepare_fsync);
        if self.cfg.bugs.early_lock_release {
            let granted = self.locks.release_all(txn);
            self.run_granted(granted);
        }
        self.send(from, Message::Vote { txn, yes: true });
    }

    /// COMMIT (or a commit Decision): apply and acknowledge. A txn unknown here was
    /// already applied (prepare records are durable) — with the `unilateral-abort` and
    /// `no-prepare-fsync` bugs that belief is wrong, which is the point.
    pub(super) fn on_commit(&mut self, from: NodeId, txn: TxnId, ack: bool) {
        if let Some(part) = self.parts.remove(&txn) {
            self.install(&part.logged);
            self.log(Record::Applied { txn }, !self.cfg.bugs.no_prepare_fsync);
            self.finish(txn);
        }
        if ack {
            self.send(from, Message::CommitAck { txn });
        }
    }

    /// Forgets a txn here without applying it, releasing its locks.
    pub(super) fn abort_local(&mut self, txn: TxnId) {
        let Some(part) = self.parts.remove(&txn) else {
            return;
        };
        if let PartState::Prepared { .. } = part.state {
            // Not forced: if lost, the restarted node asks and hears "abort" again.
            self.log(Record::Aborted { txn }, false);
        }
        self.finish(txn);
    }

    fn finish(&mut self, txn: TxnId) {
        self.finished.insert(txn);
        self.pending_writes.retain(|_, (t, _)| *t != txn);
        let granted = self.locks.release_all(txn);
        self.run_granted(granted);
    }

    /// Resumes the ops whose locks were just granted.
    fn run_granted(&mut self, granted: Vec<(TxnId, Key)>) {
        for (txn, key) in granted {
            let Some(part) = self.parts.get_mut(&txn) else {
                continue;
            };
            if part.pending.as_ref().is_some_and(|(_, op)| op.key == key) {
                if let Some((idx, op)) = part.pending.take() {
                    self.execute(txn, idx, op);
                }
            }
        }
    }

    pub(super) fn participant_tick(&mut self, now: i64) {
        let (expired, granted) = self.locks.expire(now);
        for (txn, _) in expired {
            let Some(part) = self.parts.get_mut(&txn) else {
                continue;
            };
            if let Some((idx, _)) = part.pending.take() {
                part.results.insert(idx, Err(OpError::Aborted));
                let coord = part.coord;
                self.exec_reply(coord, txn, idx, Err(OpError::Aborted));
            }
        }
        self.run_granted(granted);
        let idle = self.cfg.idle_abort_ms();
        let mut to_abort = Vec::new();
        let mut to_query = Vec::new();
        for (txn, part) in self.parts.iter_mut() {
            match &mut part.state {
                PartState::Active {
                    last_active,
                    next_query,
                } => {
                    if part.pending.is_none() && now - *last_active > idle {
                        to_abort.push(*txn);
                    } else if part.pending.is_none() && now >= *next_query {
                        // Idle between ops: is the txn still running? A coordinator that
                        // has no such txn answers abort; a running one stays silent.
                        to_query.push((*txn, part.coord));
                        *next_query = now + 2 * self.cfg.resend_ms.max(1);
                    }
                }
                PartState::Prepared {
                    next_query,
                    backoff,
                } => {
                    if now >= *next_query {
                        if self.cfg.bugs.unilateral_abort {
                            to_abort.push(*txn);
                        } else {
                            to_query.push((*txn, part.coord));
                            *next_query = now + *backoff;
                            *backoff = (*backoff * 2).min(MAX_QUERY_BACKOFF_MS);
                        }
                    }
                }
            }
        }
        for txn in to_abort {
            self.abort_local(txn);
        }
        for (txn, coord) in to_query {
            self.send(coord, Message::Query { txn });
        }
    }
}

fn add(current: i64, delta: i64) -> Result<Option<Val>, OpError> {
    match current.checked_add(delta) {
        Some(v) if v >= 0 => Ok(Some(Val::Int(v))),
        _ => Err(OpError::InsufficientFunds),
    }
}
