//! Unit tests of the core's commit and abort paths, driven by hand.

use super::*;
use crate::types::{Op, OpError, OpKind};
use serde_json::json;

/// A tiny synchronous cluster: delivers every message at once unless told to hold some.
struct Net {
    cores: Vec<Core>,
    /// Durable WAL per node (every record, forced or not).
    wal: Vec<Vec<Record>>,
    replies: Vec<(u64, TxnReply)>,
    held: Vec<(NodeId, NodeId, Message)>,
    /// Messages to these nodes are held instead of delivered.
    cut: Vec<NodeId>,
}

impl Net {
    fn new(n: u64) -> Net {
        let cores = (1..=n)
            .map(|id| Core::new(CoreConfig::new(id, n), &[], 0))
            .collect();
        let mut net = Net {
            cores,
            wal: vec![Vec::new(); n as usize],
            replies: Vec::new(),
            held: Vec::new(),
            cut: Vec::new(),
        };
        net.settle(0);
        net
    }

    fn settle(&mut self, now: i64) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..self.cores.len() {
                for out in self.cores[i].take_outputs() {
                    moved = true;
                    let from = i as NodeId + 1;
                    match out {
                        Output::Log { record, .. } => self.wal[i].push(record),
                        Output::Reply { req, reply } => self.replies.push((req, reply)),
                        Output::Send { to, msg }
                            if self.cut.contains(&to) || self.cut.contains(&from) =>
                        {
                            self.held.push((from, to, msg))
                        }
                        Output::Send { to, msg } => {
                            self.cores[to as usize - 1].receive(from, msg, now)
                        }
                    }
                }
            }
            if !moved {
                return;
            }
        }
        panic!("did not settle");
    }

    fn txn(&mut self, node: NodeId, req: u64, ops: Vec<Op>, now: i64) {
        self.cores[node as usize - 1].client_txn(req, ops, now);
        self.settle(now);
    }

    fn reply(&self, req: u64) -> Option<&TxnReply> {
        self.replies
            .iter()
            .find(|(r, _)| *r == req)
            .map(|(_, rep)| rep)
    }
}

fn op(f: OpKind, key: i64, value: Option<i64>) -> Op {
    Op {
        f,
        key: Key::Int(key),
        value,
    }
}

#[test]
fn a_multi_node_txn_commits_everywhere_and_reads_its_own_writes() {
    let mut net = Net::new(3);
    // Keys 0, 1, 2 live on nodes 1, 2, 3.
    let ops = vec![
        op(OpKind::Append, 0, Some(5)),
        op(OpKind::Append, 1, Some(5)),
        op(OpKind::Read, 1, None),
        op(OpKind::Add, 2, Some(7)),
    ];
    net.txn(1, 1, ops, 0);
    let Some(TxnReply::Ok(results)) = net.reply(1) else {
        panic!("expected ok, got {:?}", net.reply(1));
    };
    assert_eq!(
        results,
        &vec![
            json!(["append", 0, 5]),
            json!(["append", 1, 5]),
            json!(["r", 1, [5]]),
            json!(["add", 2, 7])
        ]
    );
    assert_eq!(
        net.cores[0].committed_value(&Key::Int(0)),
        Some(&Val::List(vec![5]))
    );
    assert_eq!(
        net.cores[1].committed_value(&Key::Int(1)),
        Some(&Val::List(vec![5]))
    );
    assert_eq!(
        net.cores[2].committed_value(&Key::Int(2)),
        Some(&Val::Int(7))
    );
    for core in &net.cores {
        assert!(core.is_quiet(), "node {} still busy", core.id());
        assert_eq!(core.status().locks, 0);
    }
    // The coordinator's commit record precedes the reply; all acks led to an End record.
    assert!(net.wal[0]
        .iter()
        .any(|r| matches!(r, Record::Committed { .. })));
    assert!(net.wal[0].iter().any(|r| matches!(r, Record::End { .. })));
}

#[test]
fn insufficient_funds_aborts_the_whole_txn_and_releases_locks() {
    let mut net = Net::new(3);
    let ops = vec![op(OpKind::Write, 0, Some(1)), op(OpKind::Add, 1, Some(-1))];
    net.txn(2, 1, ops, 0);
    assert!(matches!(
        net.reply(1),
        Some(TxnReply::Fail {
            error: "insufficient-funds",
            ..
        })
    ));
    assert_eq!(net.cores[0].committed_value(&Key::Int(0)), None);
    for core in &net.cores {
        assert!(core.is_quiet());
        assert_eq!(core.status().locks, 0);
    }
}

#[test]
fn lock_conflicts_wait_bounded_then_abort() {
    let mut net = Net::new(3);
    // Txn 1 writes key 1 (node 2) and then waits on node 3, which is cut off: it keeps
    // its lock on key 1.
    net.cut = vec![3];
    net.txn(
        1,
        1,
        vec![op(OpKind::Write, 1, Some(1)), op(OpKind::Write, 2, Some(1))],
        0,
    );
    net.txn(2, 2, vec![op(OpKind::Read, 1, None)], 10);
    assert!(
        net.reply(2).is_none(),
        "the reader must wait for the writer's lock"
    );
    // The wait is bounded by --lock-wait-ms.
    net.cores[1].tick(400);
    net.settle(400);
    assert!(matches!(
        net.reply(2),
        Some(TxnReply::Fail {
            error: "aborted",
            ..
        })
    ));
    // The writer times out as unavailable: node 3 never answered.
    net.cores[0].tick(1600);
    net.settle(1600);
    assert!(matches!(
        net.reply(1),
        Some(TxnReply::Fail {
            error: "unavailable",
            ..
        })
    ));
    assert_eq!(net.cores[1].status().locks, 0);
}

#[test]
fn an_in_doubt_participant_holds_its_locks_and_asks_the_coordinator() {
    // A cluster where the coordinator's Commit to node 2 is lost.
    let mut net = Net::new(2);
    net.cores[0].client_txn(
        1,
        vec![op(OpKind::Write, 0, Some(1)), op(OpKind::Write, 1, Some(2))],
        0,
    );
    // Run until node 1 commits, dropping its Commit to node 2.
    for _ in 0..20 {
        for i in 0..2 {
            for out in net.cores[i].take_outputs() {
                match out {
                    Output::Send {
                        to: 2,
                        msg: Message::Commit { .. },
                    } => {}
                    Output::Send { to, msg } => {
                        net.cores[to as usize - 1].receive(i as u64 + 1, msg, 0)
                    }
                    Output::Reply { req, reply } => net.replies.push((req, reply)),
                    Output::Log { record, .. } => net.wal[i].push(record),
                }
            }
        }
    }
    assert!(matches!(net.reply(1), Some(TxnReply::Ok(_))));
    assert_eq!(net.cores[1].status().in_doubt, 1);
    assert_eq!(net.cores[1].committed_value(&Key::Int(1)), None);
    // Node 2 restarts from its WAL: still prepared, locks re-taken.
    let wal = net.wal[1].clone();
    net.cores[1] = Core::new(CoreConfig::new(2, 2), &wal, 0);
    assert_eq!(net.cores[1].status().in_doubt, 1);
    assert_eq!(net.cores[1].status().locks, 1);
    // Coordinator resends are off (no tick on node 1); the participant asks after the
    // in-doubt timeout and learns the commit.
    net.cores[1].tick(1000);
    net.settle(1000);
    assert_eq!(
        net.cores[1].committed_value(&Key::Int(1)),
        Some(&Val::Int(2))
    );
    assert_eq!(net.cores[1].status().locks, 0);
}

#[test]
fn presumed_abort_answers_unknown_txns_and_refuses_forgotten_work() {
    let mut net = Net::new(2);
    let ghost = TxnId {
        node: 1,
        boot: 1,
        seq: 99,
    };
    net.cores[0].receive(2, Message::Query { txn: ghost }, 0);
    let outs = net.cores[0].take_outputs();
    assert!(outs.contains(&Output::Send {
        to: 2,
        msg: Message::Decision {
            txn: ghost,
            commit: false
        }
    }));
    // A participant that never saw the txn votes no.
    net.cores[1].receive(1, Message::Prepare { txn: ghost, ops: 1 }, 0);
    let outs = net.cores[1].take_outputs();
    assert!(outs.contains(&Output::Send {
        to: 1,
        msg: Message::Vote {
            txn: ghost,
            yes: false
        }
    }));
    // An Exec that claims earlier ops here that it does not have is refused.
    net.cores[1].receive(
        1,
        Message::Exec {
            txn: ghost,
            idx: 3,
            seen: 1,
            op: op(OpKind::Write, 1, Some(1)),
        },
        0,
    );
    let outs = net.cores[1].take_outputs();
    assert!(outs.contains(&Output::Send {
        to: 1,
        msg: Message::ExecReply {
            txn: ghost,
            idx: 3,
            result: Err(OpError::Aborted)
        }
    }));
}

#[test]
fn boot_counter_makes_txn_ids_unique_across_restarts() {
    let core = Core::new(CoreConfig::new(1, 1), &[Record::Boot, Record::Boot], 0);
    assert_eq!(core.boot(), 3);
}

#[test]
fn read_committed_reads_take_no_locks_but_never_see_dirty_data() {
    let mut cfg = CoreConfig::new(1, 2);
    cfg.isolation = Isolation::ReadCommitted;
    let mut core = Core::new(cfg, &[], 0);
    let _ = core.take_outputs();
    // A writer coordinated by node 2 holds key 0's exclusive lock.
    let writer = TxnId {
        node: 2,
        boot: 1,
        seq: 50,
    };
    core.receive(
        2,
        Message::Exec {
            txn: writer,
            idx: 0,
            seen: 0,
            op: op(OpKind::Write, 0, Some(9)),
        },
        0,
    );
    let _ = core.take_outputs();
    core.client_txn(7, vec![op(OpKind::Read, 0, None)], 0);
    let outs = core.take_outputs();
    let reply = outs.iter().find_map(|o| match o {
        Output::Reply { req: 7, reply } => Some(reply.clone()),
        _ => None,
    });
    assert_eq!(reply, Some(TxnReply::Ok(vec![json!(["r", 0, null])])));
}

#[test]
fn dirty_read_bug_sees_pending_writes() {
    let mut cfg = CoreConfig::new(1, 2);
    cfg.bugs.dirty_read = true;
    let mut core = Core::new(cfg, &[], 0);
    // A writer coordinated by node 2 holds key 0's exclusive lock.
    let writer = TxnId {
        node: 2,
        boot: 1,
        seq: 50,
    };
    core.receive(
        2,
        Message::Exec {
            txn: writer,
            idx: 0,
            seen: 0,
            op: op(OpKind::Write, 0, Some(9)),
        },
        0,
    );
    core.client_txn(7, vec![op(OpKind::Read, 0, None)], 0);
    let outs = core.take_outputs();
    assert!(outs.contains(&Output::Reply {
        req: 7,
        reply: TxnReply::Ok(vec![json!(["r", 0, 9])])
    }));
}
