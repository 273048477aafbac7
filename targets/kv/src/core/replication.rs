//! Log replication (Raft §5.3) and the commit rule (§5.4.2).

use super::{Apply, Entry, Message, NodeId, RaftCore, Role};

impl RaftCore {
    /// Leader: appends an entry of the current term to its own log.
    pub(super) fn append_local(&mut self, data: Vec<u8>) -> (u64, u64) {
        let entry = Entry {
            term: self.term,
            index: self.log.last_index() + 1,
            data,
        };
        let id = (entry.index, entry.term);
        let noop = entry.data.is_empty();
        self.log.push(entry.clone());
        self.persist_entries(vec![entry]);
        // Replicate on the next take_ready, once for all proposals of this batch.
        if noop || !self.cfg.bugs.lazy_replication {
            self.need_broadcast = true;
        }
        if self.cfg.voters.len() == 1 {
            self.maybe_commit();
        }
        id
    }

    /// Leader: sends AppendEntries (or a snapshot) to every follower, starting a new
    /// heartbeat round.
    pub(super) fn broadcast_append(&mut self) {
        self.round += 1;
        self.round_sent.insert(self.round, self.now);
        self.heartbeat_due = self.now + self.cfg.heartbeat_ms;
        self.need_broadcast = false;
        for peer in self.peers() {
            self.send_append(peer);
        }
        // Alone, the leader is its own quorum for every round.
        self.update_quorum_round();
    }

    /// Leader: sends `peer` the entries from its `next` index (optimistically assuming
    /// they will arrive: pipelining), or the snapshot if they were compacted away.
    pub(super) fn send_append(&mut self, peer: NodeId) {
        let Some(progress) = self.progress.get(&peer).copied() else {
            return;
        };
        let prev_index = progress.next.saturating_sub(1);
        let Some(prev_term) = self.log.term_at(prev_index) else {
            self.send_snapshot(peer);
            return;
        };
        let entries = self.log.slice(progress.next, self.cfg.max_batch);
        let sent_up_to = prev_index + entries.len() as u64;
        if let Some(p) = self.progress.get_mut(&peer) {
            p.next = sent_up_to + 1;
            p.commit_sent = self.commit;
        }
        let msg = Message::Append {
            term: self.term,
            prev_index,
            prev_term,
            entries,
            commit: self.commit,
            round: self.round,
        };
        self.send(peer, msg);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn handle_append(
        &mut self,
        from: NodeId,
        term: u64,
        prev_index: u64,
        prev_term: u64,
        mut entries: Vec<Entry>,
        leader_commit: u64,
        round: u64,
    ) {
        if term < self.term {
            self.reply_append(from, false, 0, 0, round);
            return;
        }
        self.become_follower(term, Some(from));
        self.last_leader_contact = Some(self.now);
        self.reset_election_deadline();

        let (mut prev_index, mut prev_term) = (prev_index, prev_term);
        let sent_up_to = prev_index + entries.len() as u64;
        // Entries at or below our snapshot are committed, hence identical: skip them.
        if prev_index < self.log.snap_index() {
            let skip = (self.log.snap_index() - prev_index) as usize;
            if skip >= entries.len() {
                self.reply_append(from, true, sent_up_to, 0, round);
                return;
            }
            entries.drain(..skip);
            prev_index = self.log.snap_index();
            prev_term = self.log.snap_term();
        }
        // Consistency check (§5.3): we must hold the entry before the new ones.
        match self.log.term_at(prev_index) {
            None => {
                let hint = self.log.last_index() + 1;
                self.reply_append(from, false, 0, hint, round);
                return;
            }
            Some(t) if t != prev_term => {
                let hint = self.log.first_index_of_term(prev_index);
                self.reply_append(from, false, 0, hint, round);
                return;
            }
            Some(_) => {}
        }
        let mut stored = Vec::new();
        for entry in entries {
            match self.log.term_at(entry.index) {
                Some(t) if t == entry.term => continue,
                Some(_) => {
                    // Conflict: delete the entry and all that follow it (§5.3).
                    if entry.index <= self.commit {
                        self.violations += 1;
                    }
                    self.log.truncate_from(entry.index);
                }
                None => {}
            }
            if self.log.push(entry.clone()) {
                stored.push(entry);
            }
        }
        self.persist_entries(stored);
        let last_new = sent_up_to.min(self.log.last_index());
        if leader_commit > self.commit {
            let new_commit = leader_commit.min(last_new);
            if new_commit > self.commit {
                self.commit = new_commit;
                self.emit_committed();
            }
        }
        self.reply_append(from, true, last_new, 0, round);
    }

    fn reply_append(&mut self, to: NodeId, success: bool, match_index: u64, hint: u64, round: u64) {
        let msg = Message::AppendResp {
            term: self.term,
            success,
            match_index,
            hint,
            round,
        };
        self.send(to, msg);
    }

    pub(super) fn handle_append_resp(
        &mut self,
        from: NodeId,
        term: u64,
        success: bool,
        match_index: u64,
        hint: u64,
        round: u64,
    ) {
        if term > self.term {
            self.become_follower(term, None);
            return;
        }
        if self.role != Role::Leader || term < self.term {
            return;
        }
        let now = self.now;
        let last_index = self.log.last_index();
        let Some(progress) = self.progress.get_mut(&from) else {
            return;
        };
        progress.last_ack = now;
        progress.acked_round = progress.acked_round.max(round);
        let mut resend = false;
        if success {
            progress.matched = progress.matched.max(match_index.min(last_index));
            progress.next = progress.next.max(progress.matched + 1);
            // Entries beyond the batch limit are still unsent.
            resend = progress.next <= last_index;
        } else if hint > 0 {
            progress.next = hint.max(progress.matched + 1).min(last_index + 1);
            resend = true;
        }
        if resend {
            self.send_append(from);
        }
        if success {
            self.maybe_commit();
        }
        self.update_quorum_round();
    }

    /// Leader: advances the commit index to the highest index stored on a majority —
    /// but only if that entry is of the current term (§5.4.2, figure 8), unless the
    /// `commit_old_term` bug is on.
    pub(super) fn maybe_commit(&mut self) {
        if self.role != Role::Leader {
            return;
        }
        let mut matched: Vec<u64> = self
            .cfg
            .voters
            .iter()
            .map(|&v| {
                if v == self.cfg.id {
                    self.log.last_index()
                } else {
                    self.progress.get(&v).map_or(0, |p| p.matched)
                }
            })
            .collect();
        matched.sort_unstable_by(|a, b| b.cmp(a));
        let Some(&candidate) = matched.get(self.quorum() - 1) else {
            return;
        };
        if candidate <= self.commit {
            return;
        }
        let current_term = self.log.term_at(candidate) == Some(self.term);
        if current_term || self.cfg.bugs.commit_old_term {
            self.commit = candidate;
            self.emit_committed();
            self.process_reads();
        }
    }

    /// Hands out every newly committed entry for applying.
    pub(super) fn emit_committed(&mut self) {
        while self.applied < self.commit {
            let Some(entry) = self.log.entry(self.applied + 1) else {
                break;
            };
            self.ready.apply.push(Apply::Entry(entry.clone()));
            self.applied += 1;
        }
    }
}
