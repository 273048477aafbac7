//! Linearizable reads without writing the log: read-index (Raft §6.4) and leader leases
//! (§6.4.1), both built on numbered heartbeat rounds. With `read_index_lease` (the
//! replica-read modes), a read index is given from the lease while it holds, and from a
//! heartbeat round otherwise.
//!
//! Every broadcast of AppendEntries is a numbered round; followers echo the round in their
//! answers. Once a majority (the leader included) answered round `r`, the leader knows it
//! was still leader when round `r` was sent. A read that arrived before round `r` was sent
//! may then be served at the commit index (read-index); and since followers ignore
//! candidates for an election timeout after hearing from the leader, nobody else can lead
//! before `sent(r) + election timeout` (the lease), measured on the leader's clock.

use super::{Message, NodeId, NotLeader, PendingRead, RaftCore, ReadState, Role};

impl RaftCore {
    /// Asks for a read index for request `ctx`. The answer arrives in a later `Ready` as
    /// a [`ReadState`] (serve the read once `index` is applied) or in `failed_reads`.
    /// On a follower, the request is forwarded to the leader (replica reads).
    pub fn read_index(&mut self, now: i64, ctx: u64) -> Result<(), NotLeader> {
        self.observe_time(now);
        match self.role {
            Role::Leader => {
                match self.read_index_from_lease() {
                    Some(index) => self.ready.reads.push(ReadState { ctx, index }),
                    None => self.enqueue_read(ctx, None),
                }
                Ok(())
            }
            _ => match self.leader {
                Some(leader) => {
                    self.send(leader, Message::ReadIndex { ctx });
                    Ok(())
                }
                None => Err(NotLeader { leader: None }),
            },
        }
    }

    /// Lease read: `Some(index)` if this leader's lease is valid at `now`; serve the read
    /// once `index` is applied. `None`: fall back to [`RaftCore::read_index`].
    pub fn lease_read(&mut self, now: i64) -> Option<u64> {
        self.observe_time(now);
        if !self.cfg.bugs.lease_no_margin {
            // Jump guard: a clock that moved backwards must not stretch the lease beyond
            // its nominal length from now.
            let length =
                self.cfg.lease_ms.min(self.cfg.election_timeout_ms) - self.cfg.max_drift_ms;
            self.lease_until = self.lease_until.min(now.saturating_add(length));
        }
        let term_committed = self.commit >= self.term_start_index;
        (self.role == Role::Leader && term_committed && now < self.lease_until)
            .then_some(self.commit)
    }

    /// The leader's lease expiry on its own clock (`i64::MIN` when it has none).
    pub fn lease_until(&self) -> i64 {
        self.lease_until
    }

    /// With [`Config::read_index_lease`](super::Config::read_index_lease): the read index
    /// a leader may give now without a heartbeat round, its commit index, while its lease
    /// holds (no other leader can exist yet, and this term has committed an entry, so the
    /// commit index covers every write acknowledged before the read arrived).
    fn read_index_from_lease(&mut self) -> Option<u64> {
        if !self.cfg.read_index_lease {
            return None;
        }
        let now = self.now;
        self.lease_read(now)
    }

    pub(super) fn handle_read_index(&mut self, from: NodeId, ctx: u64) {
        if self.role == Role::Leader {
            if let Some(index) = self.read_index_from_lease() {
                self.send(
                    from,
                    Message::ReadIndexResp {
                        ctx,
                        index: Some(index),
                    },
                );
                // The follower serves once it has applied `index`; if it has not been
                // told that `index` is committed, tell it now (in the current round)
                // rather than at the next write or heartbeat.
                if self
                    .progress
                    .get(&from)
                    .is_some_and(|p| p.commit_sent < index)
                {
                    self.send_append(from);
                }
                return;
            }
            self.enqueue_read(ctx, Some(from));
        } else {
            self.send(from, Message::ReadIndexResp { ctx, index: None });
        }
    }

    fn enqueue_read(&mut self, ctx: u64, from: Option<NodeId>) {
        // The read must be confirmed by a round sent after it arrived.
        self.pending_reads.push(PendingRead {
            ctx,
            round: self.round + 1,
            from,
            commit_at_arrival: self.commit,
        });
        self.need_broadcast = true;
        if self.cfg.voters.len() == 1 {
            self.broadcast_append();
        }
    }

    /// Recomputes the highest round a majority answered; extends the lease and releases
    /// reads accordingly.
    pub(super) fn update_quorum_round(&mut self) {
        if self.role != Role::Leader {
            return;
        }
        let mut rounds: Vec<u64> = self.progress.values().map(|p| p.acked_round).collect();
        rounds.push(self.round);
        rounds.sort_unstable_by(|a, b| b.cmp(a));
        let Some(&quorum_round) = rounds.get(self.quorum() - 1) else {
            return;
        };
        if quorum_round > self.quorum_round {
            self.quorum_round = quorum_round;
            let lease_until = if self.cfg.bugs.lease_no_margin {
                // Bug: counts from when the acks arrived, for a whole election timeout.
                self.now + self.cfg.election_timeout_ms
            } else {
                let sent = self
                    .round_sent
                    .get(&quorum_round)
                    .copied()
                    .unwrap_or(i64::MIN / 2);
                let length = self.cfg.lease_ms.min(self.cfg.election_timeout_ms);
                sent + length - self.cfg.max_drift_ms
            };
            self.lease_until = self.lease_until.max(lease_until);
        }
        let keep_from = self.quorum_round;
        self.round_sent.retain(|&r, _| r >= keep_from);
        self.process_reads();
    }

    /// Releases reads whose round is confirmed, once this term has committed an entry.
    pub(super) fn process_reads(&mut self) {
        if self.role != Role::Leader || self.commit < self.term_start_index {
            return;
        }
        let confirmed = self.quorum_round;
        let term_start = self.term_start_index;
        let commit = self.commit;
        // §6.4: the index is the commit index when the read arrived, if that already
        // covers this term's first entry (then it covers every entry committed before
        // the read). It is smaller than the current commit index, so a follower, which
        // learnt it from the very round that confirmed the read, need not wait for the
        // next heartbeat to apply it.
        let index_of = |r: &PendingRead| {
            if r.commit_at_arrival >= term_start {
                r.commit_at_arrival
            } else {
                commit
            }
        };
        let (ready, waiting): (Vec<_>, Vec<_>) = self
            .pending_reads
            .drain(..)
            .partition(|r| r.round <= confirmed);
        self.pending_reads = waiting;
        for read in ready {
            match read.from {
                None => self.ready.reads.push(ReadState {
                    ctx: read.ctx,
                    index: index_of(&read),
                }),
                Some(peer) => self.send(
                    peer,
                    Message::ReadIndexResp {
                        ctx: read.ctx,
                        index: Some(index_of(&read)),
                    },
                ),
            }
        }
    }

    /// Leadership lost: every waiting read fails.
    pub(super) fn fail_pending_reads(&mut self) {
        for read in std::mem::take(&mut self.pending_reads) {
            match read.from {
                None => self.ready.failed_reads.push(read.ctx),
                Some(peer) => self.send(
                    peer,
                    Message::ReadIndexResp {
                        ctx: read.ctx,
                        index: None,
                    },
                ),
            }
        }
    }
}
