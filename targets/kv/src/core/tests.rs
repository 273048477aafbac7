//! Unit tests of the core, each naming the Raft paper section it checks
//! (Ongaro & Ousterhout, "In Search of an Understandable Consensus Algorithm", 2014;
//! §6 refers to the extended version / Ongaro's thesis for client interaction).

use super::*;

const T: i64 = 100;

fn config(id: NodeId, n: u64) -> Config {
    let mut cfg = Config::new(id, (1..=n).collect(), 7);
    cfg.election_timeout_ms = T;
    cfg.heartbeat_ms = 20;
    cfg.lease_ms = 80;
    cfg.max_drift_ms = 10;
    cfg
}

fn cluster(n: u64) -> Vec<RaftCore> {
    (1..=n)
        .map(|id| RaftCore::new(config(id, n), Persisted::default(), 0))
        .collect()
}

/// Delivers every message until quiet (bounded), skipping nodes in `down`.
fn settle(nodes: &mut [RaftCore], now: i64, down: &[NodeId]) -> Vec<(NodeId, Ready)> {
    let mut outputs = Vec::new();
    for _ in 0..50 {
        let mut msgs = Vec::new();
        for node in nodes.iter_mut() {
            let mut ready = node.take_ready();
            for (to, m) in std::mem::take(&mut ready.messages) {
                msgs.push((node.id(), to, m));
            }
            outputs.push((node.id(), ready));
        }
        if msgs.is_empty() {
            break;
        }
        for (from, to, m) in msgs {
            if down.contains(&from) || down.contains(&to) {
                continue;
            }
            nodes[(to - 1) as usize].step(now, from, m);
        }
    }
    outputs
}

fn elect(nodes: &mut [RaftCore], id: NodeId, now: i64) {
    nodes[(id - 1) as usize].tick(now + 10 * T);
    settle(nodes, now + 10 * T, &[]);
    assert_eq!(nodes[(id - 1) as usize].role(), Role::Leader);
}

#[test]
fn election_elects_one_leader_and_followers_learn_it() {
    // §5.2: a candidate with votes from a majority becomes leader; others follow it.
    let mut nodes = cluster(3);
    elect(&mut nodes, 2, 0);
    assert_eq!(nodes[0].leader(), Some(2));
    assert_eq!(nodes[2].leader(), Some(2));
    assert_eq!(nodes[0].role(), Role::Follower);
    assert_eq!(nodes[0].term(), nodes[1].term());
}

#[test]
fn a_node_votes_at_most_once_per_term() {
    // §5.2: "each server will vote for at most one candidate in a given term".
    let mut node = RaftCore::new(config(1, 3), Persisted::default(), 0);
    node.step(
        0,
        2,
        Message::Vote {
            term: 1,
            last_index: 0,
            last_term: 0,
        },
    );
    node.step(
        0,
        3,
        Message::Vote {
            term: 1,
            last_index: 0,
            last_term: 0,
        },
    );
    let ready = node.take_ready();
    let grants: Vec<bool> = ready
        .messages
        .iter()
        .map(|(_, m)| matches!(m, Message::VoteResp { granted: true, .. }))
        .collect();
    assert_eq!(grants, vec![true, false]);
    assert_eq!(
        ready.hard_state,
        Some(HardState {
            term: 1,
            vote: Some(2)
        })
    );
}

#[test]
fn votes_are_refused_to_candidates_with_stale_logs_unless_bugged() {
    // §5.4.1: grant only if the candidate's log is at least as up to date.
    let persisted = Persisted {
        hard_state: HardState {
            term: 2,
            vote: None,
        },
        snapshot: None,
        entries: vec![Entry {
            term: 2,
            index: 1,
            data: vec![1],
        }],
    };
    for bug in [false, true] {
        let mut cfg = config(1, 3);
        cfg.bugs.vote_without_log_check = bug;
        let mut node = RaftCore::new(cfg, persisted.clone(), 0);
        // Candidate has a longer log but of an older term: not up to date.
        node.step(
            0,
            2,
            Message::Vote {
                term: 3,
                last_index: 5,
                last_term: 1,
            },
        );
        let granted = node
            .take_ready()
            .messages
            .iter()
            .any(|(_, m)| matches!(m, Message::VoteResp { granted: true, .. }));
        assert_eq!(granted, bug);
    }
}

#[test]
fn append_checks_consistency_and_truncates_conflicts() {
    // §5.3: reject when the log has no entry at prevLogIndex with prevLogTerm; delete a
    // conflicting entry and all that follow it.
    let persisted = Persisted {
        hard_state: HardState {
            term: 2,
            vote: None,
        },
        snapshot: None,
        entries: vec![
            Entry {
                term: 1,
                index: 1,
                data: vec![1],
            },
            Entry {
                term: 2,
                index: 2,
                data: vec![2],
            },
            Entry {
                term: 2,
                index: 3,
                data: vec![3],
            },
        ],
    };
    let mut node = RaftCore::new(config(1, 3), persisted, 0);
    node.step(
        0,
        2,
        Message::Append {
            term: 3,
            prev_index: 3,
            prev_term: 3,
            entries: vec![],
            commit: 0,
            round: 1,
        },
    );
    let ready = node.take_ready();
    assert!(matches!(
        ready.messages[0].1,
        Message::AppendResp {
            success: false,
            hint: 2,
            ..
        }
    ));
    let new = vec![Entry {
        term: 3,
        index: 2,
        data: vec![9],
    }];
    node.step(
        0,
        2,
        Message::Append {
            term: 3,
            prev_index: 1,
            prev_term: 1,
            entries: new.clone(),
            commit: 2,
            round: 2,
        },
    );
    let ready = node.take_ready();
    assert!(matches!(
        ready.messages[0].1,
        Message::AppendResp {
            success: true,
            match_index: 2,
            ..
        }
    ));
    assert_eq!(ready.storage, vec![StorageOp::Append(new)]);
    assert_eq!(node.log().last_index(), 2);
    // §5.3: commitIndex = min(leaderCommit, index of last new entry).
    assert_eq!(node.commit_index(), 2);
    assert_eq!(ready.apply.len(), 2);
}

#[test]
fn leader_commits_with_a_majority_and_followers_apply() {
    // §5.3: an entry is committed once replicated on a majority; followers learn it.
    let mut nodes = cluster(3);
    elect(&mut nodes, 1, 0);
    let (index, term) = nodes[0].propose(1000, b"x".to_vec()).unwrap();
    // Node 3 is down: nodes 1 and 2 are a majority.
    settle(&mut nodes, 1000, &[3]);
    assert_eq!(nodes[0].commit_index(), index);
    nodes[0].tick(1000 + 25);
    settle(&mut nodes, 1025, &[3]);
    assert_eq!(nodes[1].commit_index(), index);
    assert_eq!(nodes[1].log().term_at(index), Some(term));
    assert_eq!(nodes[2].commit_index(), 0);
    assert!(nodes[1].propose(1025, b"y".to_vec()).is_err());
}

#[test]
fn old_term_entries_are_not_committed_by_counting_replicas() {
    // §5.4.2 / figure 8: a leader never commits an entry of an earlier term by counting
    // replicas; only once an entry of its own term is committed. With the bug, it does.
    for bug in [false, true] {
        let old = Entry {
            term: 2,
            index: 1,
            data: vec![7],
        };
        let persisted = |term| Persisted {
            hard_state: HardState { term, vote: None },
            snapshot: None,
            entries: vec![old.clone()],
        };
        let mut cfg = config(1, 5);
        cfg.bugs.commit_old_term = bug;
        let mut leader = RaftCore::new(cfg, persisted(3), 0);
        leader.tick(10 * T);
        let _ = leader.take_ready();
        for voter in [2, 3] {
            leader.step(
                10 * T,
                voter,
                Message::VoteResp {
                    term: 4,
                    granted: true,
                },
            );
        }
        assert_eq!(leader.role(), Role::Leader);
        let _ = leader.take_ready();
        // Node 2 answers that it holds index 1 (the term-2 entry) but not the no-op.
        leader.step(
            10 * T,
            2,
            Message::AppendResp {
                term: 4,
                success: true,
                match_index: 1,
                hint: 0,
                round: 1,
            },
        );
        assert_eq!(leader.commit_index(), 0, "only 2 of 5 have it");
        leader.step(
            10 * T,
            3,
            Message::AppendResp {
                term: 4,
                success: true,
                match_index: 1,
                hint: 0,
                round: 1,
            },
        );
        // 3 of 5 hold the term-2 entry: committed only with the bug.
        assert_eq!(leader.commit_index(), u64::from(bug));
        if !bug {
            // Once the term-4 no-op at index 2 is on a majority, both commit.
            leader.step(
                10 * T,
                2,
                Message::AppendResp {
                    term: 4,
                    success: true,
                    match_index: 2,
                    hint: 0,
                    round: 1,
                },
            );
            leader.step(
                10 * T,
                3,
                Message::AppendResp {
                    term: 4,
                    success: true,
                    match_index: 2,
                    hint: 0,
                    round: 1,
                },
            );
            assert_eq!(leader.commit_index(), 2);
        }
    }
}

#[test]
fn read_index_waits_for_a_quorum_round() {
    // §6.4: the leader confirms it still leads with a heartbeat round before serving.
    let mut nodes = cluster(3);
    elect(&mut nodes, 1, 0);
    let now = 2000;
    nodes[0].read_index(now, 42).unwrap();
    // Followers down: no confirmation.
    let out = settle(&mut nodes, now, &[2, 3]);
    assert!(out.iter().all(|(_, r)| r.reads.is_empty()));
    nodes[0].read_index(now, 43).unwrap();
    let out = settle(&mut nodes, now, &[]);
    let reads: Vec<ReadState> = out.into_iter().flat_map(|(_, r)| r.reads).collect();
    assert!(reads
        .iter()
        .any(|r| r.ctx == 43 && r.index == nodes[0].commit_index()));
    // A follower forwards (replica reads) and gets the index from the leader.
    nodes[1].read_index(now, 7).unwrap();
    let out = settle(&mut nodes, now, &[]);
    assert!(out
        .iter()
        .any(|(id, r)| *id == 2 && r.reads.iter().any(|s| s.ctx == 7)));
}

#[test]
fn read_index_is_the_commit_index_at_arrival() {
    // §6.4 step 1: the leader records its commit index when the read arrives; entries
    // committed while it confirms leadership are not waited for.
    let mut nodes = cluster(3);
    elect(&mut nodes, 1, 0);
    let now = 2000;
    let at_arrival = nodes[0].commit_index();
    nodes[0].read_index(now, 9).unwrap();
    nodes[0].propose(now, b"x".to_vec()).unwrap();
    let out = settle(&mut nodes, now, &[]);
    assert!(nodes[0].commit_index() > at_arrival);
    let index = out
        .iter()
        .filter(|(id, _)| *id == 1)
        .flat_map(|(_, r)| r.reads.iter())
        .find(|r| r.ctx == 9)
        .map(|r| r.index);
    assert_eq!(index, Some(at_arrival));
    // A follower's read index (§6.4, reads served by followers) is already covered by
    // the commit index it learnt from the round that confirmed the read.
    nodes[1].read_index(now, 11).unwrap();
    let out = settle(&mut nodes, now, &[]);
    let index = out
        .iter()
        .filter(|(id, _)| *id == 2)
        .flat_map(|(_, r)| r.reads.iter())
        .find(|r| r.ctx == 11)
        .map(|r| r.index);
    assert!(index.is_some_and(|i| i <= nodes[1].commit_index()));
}

#[test]
fn lease_holds_only_within_its_length() {
    // §6.4.1: leases bounded by the election timeout, minus the drift allowance.
    let mut nodes = cluster(3);
    elect(&mut nodes, 1, 0);
    let sent = 10 * T + 50;
    nodes[0].tick(sent);
    settle(&mut nodes, sent, &[]);
    assert!(nodes[0].lease_read(sent + 10).is_some());
    // lease_ms 80 - drift 10 = 70 ms from when the round was sent.
    assert!(nodes[0].lease_read(sent + 71).is_none());
}

#[test]
fn a_read_index_is_given_from_the_lease_only_while_it_holds() {
    // §6.4.1 applied to §6.4: with `read_index_lease`, a leader whose lease holds gives
    // the read index (its commit index) at once, to itself and to a follower, with no
    // heartbeat round; once the lease has run out, a read index waits for a round again.
    let (mut nodes, sent) = cluster_with_fresh_lease(|cfg| cfg.read_index_lease = true);
    let now = sent + 10;
    let commit = nodes[0].commit_index();
    // Both followers down: nothing can confirm a round, yet the lease answers.
    nodes[0].read_index(now, 1).unwrap();
    let ready = nodes[0].take_ready();
    assert_eq!(
        ready
            .reads
            .iter()
            .map(|r| (r.ctx, r.index))
            .collect::<Vec<_>>(),
        vec![(1, commit)]
    );
    assert!(ready.messages.is_empty(), "no heartbeat round was needed");
    // A follower's forwarded request: answered by the leader's next output alone.
    nodes[1].read_index(now, 2).unwrap();
    let forwarded = nodes[1].take_ready().messages;
    assert_eq!(forwarded.len(), 1);
    for (to, m) in forwarded {
        assert_eq!(to, 1);
        nodes[0].step(now, 2, m);
    }
    let answer = nodes[0].take_ready().messages;
    assert!(matches!(
        answer.as_slice(),
        [(2, Message::ReadIndexResp { ctx: 2, index: Some(i) })] if *i == commit
    ));
    // An entry committed since the followers last heard the commit index: the answer
    // comes with an AppendEntries that tells the asking follower, so it can apply the
    // index at once instead of at the next write or heartbeat.
    nodes[0].propose(now, b"x".to_vec()).unwrap();
    settle(&mut nodes, now, &[]);
    let commit = nodes[0].commit_index();
    assert!(
        nodes[1].commit_index() < commit,
        "the follower is not told yet"
    );
    nodes[1].read_index(now, 5).unwrap();
    for (_, m) in nodes[1].take_ready().messages {
        nodes[0].step(now, 2, m);
    }
    let answer = nodes[0].take_ready().messages;
    assert!(matches!(
        answer.as_slice(),
        [(2, Message::ReadIndexResp { ctx: 5, index: Some(i) }),
         (2, Message::Append { commit: c, .. })] if *i == commit && *c == commit
    ));
    for (_, m) in answer {
        nodes[1].step(now, 1, m);
    }
    assert_eq!(nodes[1].commit_index(), commit);
    // Lease over (80 - 10 ms after the last round, the proposal's, was sent at `now`) and
    // the followers cut off: the read waits for a round that nobody can confirm.
    let later = now + 71;
    nodes[0].read_index(later, 3).unwrap();
    let out = settle(&mut nodes, later, &[2, 3]);
    assert!(out.iter().all(|(_, r)| r.reads.iter().all(|s| s.ctx != 3)));
    // Without the option, the lease is not used for a read index even while it holds.
    let (mut plain, sent) = leader_with_fresh_lease(false);
    plain[0].read_index(sent + 10, 4).unwrap();
    let out = settle(&mut plain, sent + 10, &[2, 3]);
    assert!(out.iter().all(|(_, r)| r.reads.is_empty()));
}

#[test]
fn followers_ignore_candidates_while_the_leader_is_alive() {
    // Thesis §4.2.3 (leader stickiness), which makes leases safe.
    let mut nodes = cluster(3);
    elect(&mut nodes, 1, 0);
    let now = 10 * T + 50;
    nodes[0].tick(now);
    settle(&mut nodes, now, &[]);
    nodes[1].step(
        now + 10,
        3,
        Message::Vote {
            term: 50,
            last_index: 100,
            last_term: 50,
        },
    );
    assert!(nodes[1].take_ready().messages.is_empty());
    assert_eq!(nodes[1].term(), nodes[0].term());
}

#[test]
fn lagging_follower_gets_a_snapshot() {
    // §7: entries compacted away are sent as a snapshot.
    let mut nodes = cluster(3);
    elect(&mut nodes, 1, 0);
    let now = 4000;
    for k in 0..5u8 {
        nodes[0].propose(now, vec![k + 1]).unwrap();
        settle(&mut nodes, now, &[3]);
    }
    let applied = nodes[0].applied_index();
    nodes[0].compact(applied, b"state".to_vec());
    assert_eq!(nodes[0].log().snap_index(), applied);
    nodes[0].tick(now + 30);
    let out = settle(&mut nodes, now + 30, &[]);
    assert!(out.iter().any(|(id, r)| *id == 3
        && r.apply
            .iter()
            .any(|a| matches!(a, Apply::Snapshot(s) if s.data == b"state"))));
    assert_eq!(nodes[2].commit_index(), applied);
}

#[test]
fn single_node_commits_alone() {
    let mut node = RaftCore::new(config(1, 1), Persisted::default(), 0);
    node.tick(10 * T);
    assert_eq!(node.role(), Role::Leader);
    let (index, _) = node.propose(10 * T, b"x".to_vec()).unwrap();
    assert_eq!(node.commit_index(), index);
    node.read_index(10 * T, 1).unwrap();
    assert_eq!(node.take_ready().reads, vec![ReadState { ctx: 1, index }]);
}

/// Three nodes, n1 elected and its lease just renewed by a heartbeat round sent at the
/// returned time; `bug` turns on `lease_no_margin`.
fn leader_with_fresh_lease(bug: bool) -> (Vec<RaftCore>, i64) {
    cluster_with_fresh_lease(|cfg| cfg.bugs.lease_no_margin = bug)
}

/// As [`leader_with_fresh_lease`], each node's configuration changed by `tweak`.
fn cluster_with_fresh_lease(tweak: impl Fn(&mut Config)) -> (Vec<RaftCore>, i64) {
    let mut nodes: Vec<RaftCore> = (1..=3)
        .map(|id| {
            let mut cfg = config(id, 3);
            tweak(&mut cfg);
            RaftCore::new(cfg, Persisted::default(), 0)
        })
        .collect();
    elect(&mut nodes, 1, 0);
    let sent = 10 * T + 50;
    nodes[0].tick(sent);
    settle(&mut nodes, sent, &[]);
    (nodes, sent)
}

#[test]
fn a_clock_jumping_back_stretches_only_the_bugged_lease() {
    // §6.4.1 relies on bounded drift; the correct lease also refuses to be stretched by a
    // backwards jump, the `lease-no-margin` one is not.
    for bug in [false, true] {
        let (mut nodes, sent) = leader_with_fresh_lease(bug);
        // The leader's clock jumps back by 1 s, then 150 ms of real time pass.
        let after = sent - 1000 + 150;
        assert!(nodes[0].lease_read(sent - 1000).is_some());
        assert_eq!(nodes[0].lease_read(after).is_some(), bug, "bug = {bug}");
    }
}

#[test]
fn a_jump_back_seen_by_a_tick_does_not_stretch_the_correct_lease() {
    // The jump is noticed when it happens (the node ticks), while the first read comes
    // much later: a clamp applied only at read time would grant a fresh lease then.
    for bug in [false, true] {
        let (mut nodes, sent) = leader_with_fresh_lease(bug);
        // Cut off from here on. 5 ms later the clock jumps back 4 s; ticks go on.
        let jump = 4000;
        let mut t = sent + 5;
        while t <= sent + 800 {
            nodes[0].tick(t - jump);
            t += 5;
        }
        // 800 ms of real time after the last quorum: far past any correct lease.
        assert_eq!(
            nodes[0].lease_read(sent + 800 - jump).is_some(),
            bug,
            "bug = {bug}"
        );
        assert_eq!(
            nodes[0].role() == Role::Leader,
            bug,
            "check-quorum also runs in real time unless bugged (bug = {bug})"
        );
    }
}
