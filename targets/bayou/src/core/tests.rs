//! Unit tests of the replica core, driven by hand through a tiny synchronous network.

use super::*;
use crate::db::set_elements as elements;
use crate::types::Message;

/// Replicas whose messages are delivered at once, unless an end is cut off; each has a
/// disk (the records and checkpoint its effects wrote).
struct Net {
    cores: Vec<Core>,
    disks: Vec<(Option<Checkpoint>, Vec<Record>)>,
    replies: BTreeMap<u64, Reply>,
    cut: Vec<ReplicaId>,
    next_req: u64,
    now: i64,
}

impl Net {
    fn new(n: u64, tweak: impl Fn(&mut CoreConfig)) -> Net {
        let cores = (1..=n)
            .map(|id| {
                let mut cfg = CoreConfig::new(id, n);
                tweak(&mut cfg);
                Core::new(cfg, None, &[], 0)
            })
            .collect();
        Net {
            cores,
            disks: vec![(None, Vec::new()); n as usize],
            replies: BTreeMap::new(),
            cut: Vec::new(),
            next_req: 1,
            now: 0,
        }
    }

    fn core(&self, id: ReplicaId) -> &Core {
        &self.cores[id as usize - 1]
    }

    /// Runs effects until no message is left (messages to or from a cut replica vanish).
    fn settle(&mut self) {
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..self.cores.len() {
                let from = i as ReplicaId + 1;
                for effect in self.cores[i].take_effects() {
                    moved = true;
                    match effect {
                        Effect::Append(r) | Effect::Note(r) => self.disks[i].1.push(r),
                        Effect::Checkpoint { checkpoint, log } => {
                            self.disks[i] = (Some(checkpoint), log)
                        }
                        Effect::Reply { req, reply } => {
                            self.replies.insert(req, reply);
                        }
                        Effect::Send { to, msg } => {
                            if !self.cut.contains(&to) && !self.cut.contains(&from) {
                                self.cores[to as usize - 1].receive(from, msg, self.now);
                            }
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

    /// Anti-entropy rounds: every replica runs `rounds` rounds (round-robin partners).
    fn rounds(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.now += 1000;
            for i in 0..self.cores.len() {
                self.cores[i].tick(self.now);
                self.settle();
            }
        }
    }

    fn request(&mut self, at: ReplicaId, request: Request) -> u64 {
        let req = self.next_req;
        self.next_req += 1;
        self.cores[at as usize - 1].client(req, request, self.now);
        self.settle();
        req
    }

    fn write(&mut self, at: ReplicaId, key: &str, op: Op) -> Reply {
        let req = self.request(
            at,
            Request::Write {
                key: key.into(),
                op,
                session: Session::default(),
            },
        );
        self.replies
            .remove(&req)
            .expect("a write is answered at once")
    }

    fn read(&self, at: ReplicaId, key: &str) -> Value {
        self.core(at).read_value(key, None)
    }
}

fn book(id: i64, alternatives: &[(i64, i64)]) -> Op {
    Op::Book {
        id,
        alternatives: alternatives.to_vec(),
    }
}

#[test]
fn writes_accepted_in_a_partition_converge_by_anti_entropy() {
    // SOSP'95 §2 / SOSP'97 §3: every replica accepts writes alone; pairwise anti-entropy
    // spreads them, the primary commits them, and all replicas end in the same state.
    let mut net = Net::new(3, |_| {});
    net.cut = vec![1, 2, 3];
    for (r, e) in [(1, 10), (2, 20), (3, 30), (3, 31)] {
        assert!(matches!(
            net.write(r, "s", Op::Add { element: e }),
            Reply::Written { .. }
        ));
    }
    assert_eq!(
        net.read(3, "s"),
        json!({"committed": [], "tentative": [30, 31]})
    );
    net.cut.clear();
    net.rounds(3);
    let want = net.read(1, "s");
    for r in 1..=3 {
        assert_eq!(net.read(r, "s"), want);
        assert_eq!(net.core(r).csn(), 4);
        assert_eq!(net.core(r).status().tentative, 0);
    }
    // The primary's own write was committed at once; the others in its order.
    assert_eq!(want["committed"][0], json!(10));
}

#[test]
fn a_write_that_sorts_earlier_rolls_back_and_replays_a_booking() {
    // SOSP'95 §5: replica 2 applied its booking tentatively; a booking with an earlier
    // stamp arrives, so replica 2 undoes its own, applies the earlier one, and replays its
    // own, whose merge procedure now picks the second alternative.
    for no_rollback in [false, true] {
        let mut net = Net::new(3, |c| c.bugs.no_rollback = no_rollback);
        net.cut = vec![1, 2, 3];
        net.write(2, "x", Op::Add { element: 1 }); // stamp 1 at replica 2
        net.write(2, "b", book(2, &[(1, 1), (1, 2)])); // stamp 2
        net.write(3, "b", book(1, &[(1, 1), (1, 2)])); // stamp 1: sorts first
        assert_eq!(net.read(2, "b")["schedule"], json!([[2, 1, 1]]));
        net.cut = vec![1];
        net.rounds(2);
        let at2 = net.read(2, "b");
        let at3 = net.read(3, "b");
        if no_rollback {
            // Arrival order: each replica keeps its own booking in (1,1) — they diverge.
            assert_eq!(at2["schedule"], json!([[1, 1, 2], [2, 1, 1]]));
            assert_ne!(at2, at3);
        } else {
            assert_eq!(at2["tentative"], json!([1, 2]));
            assert_eq!(at2["schedule"], json!([[1, 1, 1], [2, 1, 2]]));
            assert_eq!(at2, at3);
        }
    }
}

#[test]
fn committed_writes_sort_before_tentative_ones_in_csn_order() {
    // SOSP'95 §5: the primary's commit order is final and precedes every tentative write,
    // even one with a smaller stamp.
    let mut net = Net::new(3, |_| {});
    net.cut = vec![3];
    net.write(2, "x", Op::Add { element: 0 });
    net.write(2, "s", Op::Add { element: 2 }); // stamp 2 at replica 2
    net.rounds(2); // replica 1 commits both
    net.cut = vec![1, 2, 3];
    net.write(3, "s", Op::Add { element: 3 }); // stamp 1 at replica 3: tentative
    net.cut = vec![1];
    net.rounds(2);
    assert_eq!(
        net.read(3, "s"),
        json!({"committed": [2], "tentative": [3]})
    );
    assert_eq!(net.read(2, "s"), net.read(3, "s"));
    net.cut.clear();
    net.rounds(3);
    for r in 1..=3 {
        assert_eq!(
            net.read(r, "s"),
            json!({"committed": [2, 3], "tentative": []})
        );
    }
}

#[test]
fn a_replica_behind_the_truncated_log_gets_the_checkpoint() {
    // SOSP'97 §4: replica 3 missed writes the others folded into checkpoints; anti-entropy
    // sends it the checkpoint, then the writes after it.
    let mut net = Net::new(3, |c| c.checkpoint_every = 2);
    net.cut = vec![3];
    for e in 0..9 {
        net.write(1 + e as u64 % 2, "s", Op::Add { element: e });
        net.write(2, "c", Op::Incr { delta: 2 });
    }
    net.write(1, "b", book(7, &[(3, 3)]));
    net.rounds(2);
    assert!(net.core(1).status().checkpoint_csn >= 15);
    net.cut.clear();
    net.rounds(3);
    for key in ["s", "c", "b"] {
        assert_eq!(net.read(3, key), net.read(1, key), "{key}");
    }
    assert_eq!(net.read(3, "c"), json!(18));
    assert_eq!(net.core(3).csn(), 19);
    assert!(net.core(3).status().checkpoint_csn > 0);
    assert!(net.core(3).status().log_len <= 4);
}

#[test]
fn sessions_wait_for_anti_entropy_then_fail_session_behind() {
    // Terry et al. 1994: a replica serves a session only if it holds what the session
    // wrote and read; it waits for anti-entropy up to the session wait.
    let mut net = Net::new(3, |_| {});
    net.cut = vec![1, 2, 3];
    let Reply::Written { wid, .. } = net.write(2, "s", Op::Add { element: 5 }) else {
        panic!("write refused");
    };
    let mut session = Session::default();
    session.write.insert(wid.replica, wid.stamp);
    let read = Request::Read {
        key: "s".into(),
        kind: None,
        session: session.clone(),
    };
    let req = net.request(3, read.clone());
    assert!(!net.replies.contains_key(&req), "must wait");
    net.cores[2].tick(net.now + 301);
    net.settle();
    assert_eq!(
        net.replies.get(&req),
        Some(&Reply::Fail {
            error: "session-behind".into()
        })
    );
    // Served once anti-entropy brings the write.
    let req = net.request(3, read);
    net.cut.clear();
    net.cores[1].tick(net.now + 100);
    net.settle();
    let Some(Reply::Read { value, .. }) = net.replies.get(&req) else {
        panic!("not served: {:?}", net.replies.get(&req));
    };
    assert_eq!(elements(value), vec![5]);
    // With the stale-session bug the same read is answered at once, without the write.
    let mut net = Net::new(3, |c| c.bugs.stale_session = true);
    net.cut = vec![1, 2, 3];
    net.write(2, "s", Op::Add { element: 5 });
    let req = net.request(
        3,
        Request::Read {
            key: "s".into(),
            kind: None,
            session,
        },
    );
    assert!(
        matches!(net.replies.get(&req), Some(Reply::Read { value, .. }) if elements(value).is_empty())
    );
}

#[test]
fn recovery_from_the_disk_rebuilds_the_same_state() {
    let mut net = Net::new(3, |c| c.checkpoint_every = 3);
    net.cut = vec![3];
    for e in 0..10 {
        net.write(2, "s", Op::Add { element: e });
        net.write(1, "b", book(e, &[(1, e % 3), (2, e % 3)]));
    }
    net.rounds(2);
    net.cut = vec![1, 2, 3];
    net.write(2, "s", Op::Add { element: 99 }); // tentative at replica 2
    for id in 1..=2u64 {
        let (ck, log) = net.disks[id as usize - 1].clone();
        let before = net.core(id);
        let after = Core::new(before.config().clone(), ck, &log, 0);
        assert_eq!(after.log_order(), before.log_order());
        assert_eq!(after.status(), before.status());
        for key in ["s", "b"] {
            assert_eq!(after.read_value(key, None), before.read_value(key, None));
        }
    }
}

#[test]
fn wrong_type_is_refused_and_unwritten_keys_read_empty() {
    let mut net = Net::new(1, |_| {});
    net.write(1, "c", Op::Incr { delta: 4 });
    assert_eq!(
        net.write(1, "c", Op::Add { element: 1 }),
        Reply::Fail {
            error: "wrong-type".into()
        }
    );
    assert_eq!(net.core(1).read_value("c", None), json!(4));
    assert_eq!(
        net.core(1).read_value("none", Some(Kind::Counter)),
        json!(0)
    );
    assert_eq!(
        net.core(1).read_value("none", Some(Kind::Schedule)),
        json!({"committed": [], "tentative": [], "schedule": []})
    );
    assert_eq!(net.core(1).csn(), 1);
}

#[test]
fn lose_tentative_acknowledges_writes_it_never_logs() {
    let mut net = Net::new(2, |c| c.bugs.lose_tentative = true);
    net.cut = vec![1, 2];
    assert!(matches!(
        net.write(2, "s", Op::Add { element: 1 }),
        Reply::Written { .. }
    ));
    // Only its stamp reaches the disk: a restart keeps the vector, loses the write.
    let wid = Wid {
        stamp: 1,
        replica: 2,
    };
    assert_eq!(net.disks[1].1, vec![Record::Seen(wid)]);
    let restarted = Core::new(net.core(2).config().clone(), None, &net.disks[1].1, 0);
    assert_eq!(restarted.read_value("s", None)["tentative"], json!([]));
    assert_eq!(restarted.vv().get(&2), Some(&1));
    // Once committed, the write is logged with its commit.
    net.cut.clear();
    net.rounds(2);
    assert!(net.disks[1].1.contains(&Record::Commit { csn: 1, wid }));
}

#[test]
fn stale_commit_sync_never_tells_a_holder_the_csn() {
    for bug in [false, true] {
        let mut net = Net::new(3, |c| c.bugs.stale_commit_sync = bug);
        net.cut = vec![1];
        net.write(2, "s", Op::Add { element: 1 });
        net.rounds(1); // replica 3 holds the write tentatively
        net.cut = vec![3];
        net.rounds(1); // replica 1 commits it
        net.cut.clear();
        net.rounds(3);
        assert_eq!(net.core(3).csn(), if bug { 0 } else { 1 });
    }
}

#[test]
fn reorder_commit_primary_recommits_in_reverse_after_a_restart() {
    for bug in [false, true] {
        let mut net = Net::new(2, |c| c.bugs.reorder_commit = bug);
        for e in 0..3 {
            net.write(1, "s", Op::Add { element: e });
        }
        let (ck, log) = net.disks[0].clone();
        let restarted = Core::new(net.core(1).config().clone(), ck, &log, 0);
        let order = restarted.read_value("s", None)["committed"].clone();
        assert_eq!(
            order,
            if bug {
                json!([2, 1, 0])
            } else {
                json!([0, 1, 2])
            }
        );
    }
}

#[test]
fn stale_and_duplicate_pushes_change_nothing() {
    // SOSP'97 §3: a batch describes its own range, so replaying an old one is harmless.
    let mut net = Net::new(2, |_| {});
    net.cut = vec![1, 2];
    net.write(2, "s", Op::Add { element: 1 });
    let batch = net.cores[1].batch_for(&Vv::new(), 0);
    net.write(2, "s", Op::Add { element: 2 });
    let newer = net.cores[1].batch_for(&Vv::new(), 0);
    net.cores[0].receive(
        2,
        Message::Push {
            batch: newer.clone(),
            back: None,
        },
        0,
    );
    net.cores[0].receive(2, Message::Push { batch, back: None }, 0);
    net.cores[0].receive(
        2,
        Message::Push {
            batch: newer,
            back: None,
        },
        0,
    );
    assert_eq!(
        net.read(1, "s"),
        json!({"committed": [1, 2], "tentative": []})
    );
    assert_eq!(net.core(1).csn(), 2);
}
