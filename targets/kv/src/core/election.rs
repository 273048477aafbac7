//! Leader election (Raft §5.2) with the voting restriction (§5.4.1) and leader
//! stickiness (§4.2.3 of Ongaro's thesis), which leases rely on.

use super::{Message, NodeId, Progress, RaftCore, Role};

impl RaftCore {
    /// Election timeout elapsed: become a candidate for the next term and ask for votes.
    pub(super) fn start_election(&mut self) {
        self.term += 1;
        self.role = Role::Candidate;
        self.vote = Some(self.cfg.id);
        self.leader = None;
        self.votes.clear();
        self.votes.insert(self.cfg.id);
        self.persist_hard_state();
        self.reset_election_deadline();
        if self.votes.len() >= self.quorum() {
            self.become_leader();
            return;
        }
        let msg = Message::Vote {
            term: self.term,
            last_index: self.log.last_index(),
            last_term: self.log.last_term(),
        };
        for peer in self.peers() {
            self.send(peer, msg.clone());
        }
    }

    pub(super) fn handle_vote(&mut self, from: NodeId, term: u64, last_index: u64, last_term: u64) {
        // Leader stickiness: while we heard from a live leader less than an election
        // timeout ago, ignore candidates. This bounds when a new leader can appear, which
        // is what makes leader leases sound, and stops partitioned nodes from disrupting.
        if term > self.term && self.role == Role::Follower && self.leader.is_some() {
            if let Some(contact) = self.last_leader_contact {
                if self.now - contact < self.cfg.election_timeout_ms {
                    return;
                }
            }
        }
        if term > self.term {
            self.become_follower(term, None);
        }
        let log_ok =
            self.log.is_up_to_date(last_index, last_term) || self.cfg.bugs.vote_without_log_check;
        let granted = term == self.term && self.vote.is_none_or(|v| v == from) && log_ok;
        if granted && self.vote.is_none() {
            self.vote = Some(from);
            self.persist_hard_state();
        }
        if granted {
            self.reset_election_deadline();
        }
        self.send(
            from,
            Message::VoteResp {
                term: self.term,
                granted,
            },
        );
    }

    pub(super) fn handle_vote_resp(&mut self, from: NodeId, term: u64, granted: bool) {
        if term > self.term {
            self.become_follower(term, None);
            return;
        }
        if self.role != Role::Candidate || term != self.term || !granted {
            return;
        }
        self.votes.insert(from);
        if self.votes.len() >= self.quorum() {
            self.become_leader();
        }
    }

    /// Becomes a follower in `term` (clearing the vote if the term is new).
    pub(super) fn become_follower(&mut self, term: u64, leader: Option<NodeId>) {
        if term > self.term {
            self.term = term;
            self.vote = None;
            self.persist_hard_state();
        }
        if self.role == Role::Leader {
            self.fail_pending_reads();
            self.lease_until = i64::MIN;
        }
        if self.role != Role::Follower || leader.is_none() {
            self.reset_election_deadline();
        }
        self.role = Role::Follower;
        self.leader = leader;
    }

    fn become_leader(&mut self) {
        self.role = Role::Leader;
        self.leader = Some(self.cfg.id);
        self.progress.clear();
        let next = self.log.last_index() + 1;
        for peer in self.peers() {
            self.progress.insert(
                peer,
                Progress {
                    next,
                    matched: 0,
                    acked_round: 0,
                    last_ack: self.now,
                    commit_sent: 0,
                },
            );
        }
        self.round = 0;
        self.round_sent.clear();
        self.quorum_round = 0;
        self.lease_until = i64::MIN;
        self.pending_reads.clear();
        if self.cfg.bugs.commit_old_term {
            // The bug relies on earlier-term entries being counted alone; a no-op of the
            // new term would be committed together with them and hide it.
            self.term_start_index = 0;
        } else {
            // Raft §8: a no-op of the new term commits everything before it, and tells the
            // leader its commit index is current (needed by read-index, §6.4).
            let (index, _) = self.append_local(Vec::new());
            self.term_start_index = index;
        }
        self.broadcast_append();
        self.maybe_commit();
    }

    /// True while a majority (counting this leader) answered within twice the election
    /// timeout.
    pub(super) fn has_recent_quorum(&self) -> bool {
        let window = 2 * self.cfg.election_timeout_ms;
        let recent = self
            .progress
            .values()
            .filter(|p| self.now - p.last_ack < window)
            .count();
        recent + 1 >= self.quorum()
    }
}
