//! The coordinator role: runs a client's txn op by op at each key's owner, then two-phase
//! commit with presumed abort (no abort records; an unknown txn is an aborted one).

use super::Core;
use crate::types::{Message, NodeId, Op, OpError, OpKind, Record, TxnId, TxnReply, Val};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The phase of a coordinated txn before its decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the result of op `next`.
    Executing,
    /// Waiting for votes.
    Preparing,
}

/// A txn this node coordinates, before its decision.
#[derive(Clone, Debug)]
pub struct CoordTxn {
    req: u64,
    ops: Vec<Op>,
    next: usize,
    results: Vec<Value>,
    /// Ops sent to each participant so far.
    sent: BTreeMap<NodeId, usize>,
    votes: BTreeSet<NodeId>,
    phase: Phase,
    deadline: i64,
    /// When the current phase's messages were first sent, and last (re)sent.
    phase_started: i64,
    last_send: i64,
}

impl Core {
    /// A client's transaction, answered later by an [`super::Output::Reply`] with `req`.
    pub fn client_txn(&mut self, req: u64, ops: Vec<Op>, now: i64) {
        if ops.is_empty() {
            self.outputs.push(super::Output::Reply {
                req,
                reply: TxnReply::Ok(Vec::new()),
            });
            return;
        }
        let txn = TxnId {
            node: self.cfg.id,
            boot: self.boot,
            seq: self.next_seq,
        };
        self.next_seq += 1;
        self.coords.insert(
            txn,
            CoordTxn {
                req,
                ops,
                next: 0,
                results: Vec::new(),
                sent: BTreeMap::new(),
                votes: BTreeSet::new(),
                phase: Phase::Executing,
                deadline: now + self.cfg.request_timeout_ms.max(1),
                phase_started: now,
                last_send: now,
            },
        );
        self.send_current_op(txn, now, false);
        self.drain_local(now);
    }

    fn send_current_op(&mut self, txn: TxnId, now: i64, resend: bool) {
        let nodes = self.cfg.nodes;
        let Some(c) = self.coords.get_mut(&txn) else {
            return;
        };
        let Some(op) = c.ops.get(c.next).cloned() else {
            return;
        };
        let owner = op.key.owner(nodes);
        let seen = c.sent.get(&owner).copied().unwrap_or(0);
        if !resend {
            c.sent.insert(owner, seen + 1);
            c.phase_started = now;
        }
        let seen = if resend { seen.saturating_sub(1) } else { seen };
        c.last_send = now;
        let idx = c.next;
        self.send(owner, Message::Exec { txn, idx, seen, op });
    }

    pub(super) fn on_exec_reply(
        &mut self,
        from: NodeId,
        txn: TxnId,
        idx: usize,
        result: Result<Option<Val>, OpError>,
        now: i64,
    ) {
        let Some(c) = self.coords.get_mut(&txn) else {
            if !self.committed.contains(&txn) {
                // A txn that is over (or from before a restart): tell the owner to drop it.
                self.send(from, Message::Abort { txn });
            }
            return;
        };
        if c.phase != Phase::Executing || idx != c.next {
            return; // a duplicate
        }
        let value = match result {
            Ok(v) => v,
            Err(OpError::InsufficientFunds) => {
                return self.abort_txn(
                    txn,
                    "insufficient-funds",
                    format!("op {idx} would go below 0"),
                );
            }
            Err(OpError::TypeMismatch) => {
                return self.abort_txn(
                    txn,
                    "aborted",
                    format!("op {idx} does not fit the key's value type"),
                );
            }
            Err(OpError::Aborted) => {
                return self.abort_txn(txn, "aborted", format!("op {idx} refused by node {from} (lock wait timed out or txn unknown there)"));
            }
        };
        let op = &c.ops[idx];
        let shown = match op.f {
            OpKind::Read | OpKind::Add => value.map_or(Value::Null, |v| v.to_json()),
            OpKind::Write | OpKind::Append => json!(op.value),
        };
        c.results
            .push(json!([op.f.name(), op.key.to_json(), shown]));
        c.next += 1;
        if c.next < c.ops.len() {
            return self.send_current_op(txn, now, false);
        }
        c.phase = Phase::Preparing;
        c.phase_started = now;
        c.last_send = now;
        let sent: Vec<(NodeId, usize)> = c.sent.iter().map(|(n, k)| (*n, *k)).collect();
        for (node, ops) in sent {
            self.send(node, Message::Prepare { txn, ops });
        }
    }

    pub(super) fn on_vote(&mut self, from: NodeId, txn: TxnId, yes: bool, _now: i64) {
        let Some(c) = self.coords.get_mut(&txn) else {
            if yes && !self.committed.contains(&txn) {
                self.send(from, Message::Abort { txn });
            }
            return;
        };
        if c.phase != Phase::Preparing {
            return;
        }
        if !yes {
            return self.abort_txn(txn, "aborted", format!("node {from} voted no"));
        }
        c.votes.insert(from);
        if c.votes.len() == c.sent.len() {
            self.decide_commit(txn, _now);
        }
    }

    fn decide_commit(&mut self, txn: TxnId, now: i64) {
        let Some(c) = self.coords.remove(&txn) else {
            return;
        };
        let participants: Vec<NodeId> = c.sent.keys().copied().collect();
        self.log(
            Record::Committed {
                txn,
                participants: participants.clone(),
            },
            true,
        );
        self.committed.insert(txn);
        self.outputs.push(super::Output::Reply {
            req: c.req,
            reply: TxnReply::Ok(c.results),
        });
        self.committing.insert(
            txn,
            (
                participants.iter().copied().collect(),
                now + self.cfg.resend_ms.max(1),
            ),
        );
        for node in participants {
            self.send(node, Message::Commit { txn });
        }
    }

    fn abort_txn(&mut self, txn: TxnId, error: &'static str, detail: String) {
        let Some(c) = self.coords.remove(&txn) else {
            return;
        };
        let participants: Vec<NodeId> = c.sent.keys().copied().collect();
        for node in participants {
            self.send(node, Message::Abort { txn });
        }
        self.outputs.push(super::Output::Reply {
            req: c.req,
            reply: TxnReply::Fail { error, detail },
        });
    }

    pub(super) fn on_commit_ack(&mut self, from: NodeId, txn: TxnId) {
        let Some((waiting, _)) = self.committing.get_mut(&txn) else {
            return;
        };
        waiting.remove(&from);
        if waiting.is_empty() {
            self.committing.remove(&txn);
            self.log(Record::End { txn }, false);
        }
    }

    /// An in-doubt participant asks: answer from the log; a txn neither committed nor
    /// running is aborted (presumed abort). A running txn's answer comes with its decision.
    pub(super) fn on_query(&mut self, from: NodeId, txn: TxnId) {
        if self.committed.contains(&txn) {
            self.send(from, Message::Decision { txn, commit: true });
        } else if !self.coords.contains_key(&txn) {
            self.send(from, Message::Decision { txn, commit: false });
        }
    }

    pub(super) fn coordinator_tick(&mut self, now: i64) {
        let resend = self.cfg.resend_ms.max(1);
        let mut timed_out = Vec::new();
        let mut resend_op = Vec::new();
        let mut resend_prepare = Vec::new();
        for (txn, c) in &self.coords {
            if now >= c.deadline {
                timed_out.push((*txn, self.unreachable_owner(c)));
            } else if now - c.last_send >= resend {
                match c.phase {
                    Phase::Executing => resend_op.push(*txn),
                    Phase::Preparing => resend_prepare.push(*txn),
                }
            }
        }
        for (txn, unreachable) in timed_out {
            match unreachable {
                Some(node) => self.abort_txn(
                    txn,
                    "unavailable",
                    format!("node {node} did not answer before the request timeout"),
                ),
                None => self.abort_txn(
                    txn,
                    "timeout",
                    "no decision before the request timeout".into(),
                ),
            }
        }
        for txn in resend_op {
            self.send_current_op(txn, now, true);
        }
        for txn in resend_prepare {
            let Some(c) = self.coords.get_mut(&txn) else {
                continue;
            };
            c.last_send = now;
            let missing: Vec<(NodeId, usize)> = c
                .sent
                .iter()
                .filter(|(n, _)| !c.votes.contains(n))
                .map(|(n, k)| (*n, *k))
                .collect();
            for (node, ops) in missing {
                self.send(node, Message::Prepare { txn, ops });
            }
        }
        let mut due = Vec::new();
        for (txn, (waiting, next)) in self.committing.iter_mut() {
            if now >= *next {
                *next = now + resend;
                due.extend(waiting.iter().map(|n| (*n, *txn)));
            }
        }
        for (node, txn) in due {
            self.send(node, Message::Commit { txn });
        }
    }

    /// A remote node this txn is waiting on that has sent nothing since the wait began.
    fn unreachable_owner(&self, c: &CoordTxn) -> Option<NodeId> {
        let waiting_on: Vec<NodeId> = match c.phase {
            Phase::Executing => c
                .ops
                .get(c.next)
                .map(|op| vec![op.key.owner(self.cfg.nodes)])
                .unwrap_or_default(),
            Phase::Preparing => c
                .sent
                .keys()
                .filter(|n| !c.votes.contains(n))
                .copied()
                .collect(),
        };
        waiting_on.into_iter().find(|n| {
            *n != self.cfg.id && self.last_heard.get(n).is_none_or(|t| *t < c.phase_started)
        })
    }
}
