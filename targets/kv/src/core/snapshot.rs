//! Log compaction and InstallSnapshot (Raft §7).

use super::{Apply, Message, NodeId, RaftCore, Snapshot, StorageOp};

impl RaftCore {
    /// The application took a snapshot of its state machine at `index` (at most the
    /// applied index): drop the log up to it. Ignored if `index` is not usable.
    pub fn compact(&mut self, index: u64, data: Vec<u8>) {
        if index <= self.log.snap_index() || index > self.applied {
            return;
        }
        let Some(term) = self.log.term_at(index) else {
            return;
        };
        let snapshot = Snapshot { index, term, data };
        self.log.compact_to(index, term);
        self.snapshot = Some(snapshot.clone());
        self.ready.storage.push(StorageOp::Snapshot {
            snapshot,
            retained: self.log.entries().to_vec(),
        });
    }

    /// The latest snapshot, if any.
    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.snapshot.as_ref()
    }

    /// Leader: the follower needs entries we compacted; send the whole snapshot.
    pub(super) fn send_snapshot(&mut self, peer: NodeId) {
        let Some(snapshot) = self.snapshot.clone() else {
            return;
        };
        if let Some(p) = self.progress.get_mut(&peer) {
            p.next = snapshot.index + 1;
        }
        let msg = Message::InstallSnapshot {
            term: self.term,
            snapshot,
            round: self.round,
        };
        self.send(peer, msg);
    }

    pub(super) fn handle_snapshot(
        &mut self,
        from: NodeId,
        term: u64,
        snapshot: Snapshot,
        round: u64,
    ) {
        let reply = |core: &mut Self, success: bool, match_index: u64| {
            let msg = Message::AppendResp {
                term: core.term,
                success,
                match_index,
                hint: 0,
                round,
            };
            core.send(from, msg);
        };
        if term < self.term {
            reply(self, false, 0);
            return;
        }
        self.become_follower(term, Some(from));
        self.last_leader_contact = Some(self.now);
        self.reset_election_deadline();
        if snapshot.index <= self.commit {
            // We already have (and committed) all of it.
            reply(self, true, snapshot.index);
            return;
        }
        if self.log.term_at(snapshot.index) == Some(snapshot.term) {
            // Our log continues the snapshot: keep the suffix (§7).
            self.log.compact_to(snapshot.index, snapshot.term);
        } else {
            self.log.reset(snapshot.index, snapshot.term);
        }
        self.commit = snapshot.index;
        self.applied = snapshot.index;
        self.snapshot = Some(snapshot.clone());
        self.ready.storage.push(StorageOp::Snapshot {
            snapshot: snapshot.clone(),
            retained: self.log.entries().to_vec(),
        });
        let index = snapshot.index;
        self.ready.apply.push(Apply::Snapshot(snapshot));
        reply(self, true, index);
    }
}
