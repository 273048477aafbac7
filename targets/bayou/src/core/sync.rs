//! Anti-entropy, commit knowledge, checkpoints and recovery.
//!
//! Petersen et al., SOSP'97: a sender computes from the receiver's version vector the
//! writes it lacks and sends them in (stamp, replica) order (§3, the prefix property: each
//! replica holds a prefix of every other replica's writes, so one stamp per replica
//! describes what it holds); commit knowledge travels as (CSN, write) pairs beyond the
//! receiver's committed count; a receiver behind the sender's truncated log (its vector
//! not covering the omitted vector O, or its CSN below the checkpoint's) gets the
//! checkpoint instead of the truncated writes (§4).

use super::{Core, Effect};
use crate::types::{vv_get, vv_le, vv_raise, Batch, Checkpoint, Csn, Record, Wid, Write};

impl Core {
    /// Rebuilds the state from the durable checkpoint and log (file order).
    pub(super) fn recover(&mut self, checkpoint: Option<Checkpoint>, log: &[Record]) {
        if let Some(ck) = checkpoint {
            self.install_checkpoint(ck);
        }
        // reorder-commit: a restarted primary forgets the CSNs it gave out.
        let forget_commits = self.cfg.bugs.reorder_commit && self.is_primary();
        for record in log {
            match record {
                Record::Write(w) => {
                    if !self.holds(w.wid) {
                        self.insert_tentative(w.clone(), false);
                    }
                }
                Record::Commit { csn, wid } => {
                    if !forget_commits && *csn == self.csn() + 1 {
                        self.commit_one(*wid, false);
                    }
                }
                Record::Seen(wid) => {
                    vv_raise(&mut self.vv, wid.replica, wid.stamp);
                    self.clock = self.clock.max(wid.stamp);
                }
            }
        }
        if self.is_primary() {
            // Writes logged but not yet committed when the primary stopped.
            self.commit_tentative(forget_commits);
        }
        self.maybe_checkpoint();
    }

    /// Makes `ck` the base of the state: the committed prefix it folds in is dropped from
    /// the log, and so are tentative writes it covers.
    fn install_checkpoint(&mut self, mut ck: Checkpoint) {
        ck.db.reindex();
        self.committed.clear();
        let omitted = ck.omitted.clone();
        self.tentative
            .retain(|wid, _| wid.stamp > vv_get(&omitted, wid.replica));
        let tentative = &self.tentative;
        self.by_key.retain(|_, set| {
            set.retain(|wid| tentative.contains_key(wid));
            !set.is_empty()
        });
        self.unlogged.retain(|wid| tentative.contains_key(wid));
        for (r, s) in &omitted {
            vv_raise(&mut self.vv, *r, *s);
        }
        self.clock = self.clock.max(ck.clock);
        self.committed_db = ck.db.clone();
        if self.cfg.bugs.no_rollback {
            // Arrival order is lost with the truncated writes: start again from the
            // checkpoint and the writes still held.
            self.arrival_db = ck.db.clone();
            for w in self.tentative.values() {
                self.arrival_db.apply(w, None);
            }
        }
        self.ckpt = ck;
    }

    /// The log records that describe the state after the checkpoint.
    fn retained_records(&self) -> Vec<Record> {
        let base = self.ckpt.csn;
        let mut log = Vec::new();
        for (i, w) in self.committed.iter().enumerate() {
            log.push(Record::Write(w.clone()));
            log.push(Record::Commit {
                csn: base + 1 + i as u64,
                wid: w.wid,
            });
        }
        for w in self.tentative.values() {
            if self.unlogged.contains(&w.wid) {
                log.push(Record::Seen(w.wid));
            } else {
                log.push(Record::Write(w.clone()));
            }
        }
        log
    }

    /// Folds the oldest committed writes into a new checkpoint once `2 × every` are in
    /// the log, keeping the newest `every`: a peer a little behind still gets writes, not
    /// the whole checkpoint (SOSP'97 §4 leaves how much log to keep to each replica).
    pub(super) fn maybe_checkpoint(&mut self) {
        let every = self.cfg.checkpoint_every.max(1) as usize;
        if self.committed.len() < 2 * every {
            return;
        }
        let fold = self.committed.len() - every;
        let mut db = std::mem::take(&mut self.ckpt.db);
        for (i, w) in self.committed.drain(..fold).enumerate() {
            db.apply(&w, Some(self.ckpt.csn + 1 + i as u64));
            vv_raise(&mut self.ckpt.omitted, w.wid.replica, w.wid.stamp);
        }
        self.ckpt.csn += fold as u64;
        self.ckpt.clock = self.clock;
        self.ckpt.db = db;
        let log = self.retained_records();
        self.effects.push(Effect::Checkpoint {
            checkpoint: self.ckpt.clone(),
            log,
        });
    }

    /// What a replica with vector `vv` and `csn` committed writes lacks.
    pub(super) fn batch_for(&self, vv: &crate::types::Vv, csn: Csn) -> Batch {
        let need_checkpoint =
            self.ckpt.csn > 0 && (csn < self.ckpt.csn || !vv_le(&self.ckpt.omitted, vv));
        let mut from = vv.clone();
        if need_checkpoint {
            for (r, s) in &self.ckpt.omitted {
                vv_raise(&mut from, *r, *s);
            }
        }
        let mut writes: Vec<(Write, Option<Csn>)> = self
            .committed
            .iter()
            .chain(self.tentative.values())
            .filter(|w| w.wid.stamp > vv_get(&from, w.wid.replica))
            .map(|w| (w.clone(), self.csn_of.get(&w.wid).copied()))
            .collect();
        // A prefix of the (stamp, replica) order is a prefix of every replica's writes,
        // so a cut batch still extends the receiver's vector without gaps.
        writes.sort_by_key(|(w, _)| w.wid);
        writes.truncate(self.cfg.max_batch);
        let commits = if self.cfg.bugs.stale_commit_sync {
            Vec::new()
        } else {
            let after = csn.max(self.ckpt.csn);
            self.committed_ids()
                .filter(|(c, _)| *c > after)
                .take(self.cfg.max_batch)
                .collect()
        };
        Batch {
            from,
            checkpoint: need_checkpoint.then(|| self.ckpt.clone()),
            writes,
            commits,
        }
    }

    /// Takes in what a peer sent: its checkpoint if ahead of us, the writes that extend
    /// our vector without a gap, and commit knowledge in CSN order without a gap.
    pub(super) fn absorb(&mut self, batch: Batch) {
        if let Some(ck) = batch.checkpoint {
            if ck.csn > self.csn() {
                self.install_checkpoint(ck);
                let log = self.retained_records();
                self.effects.push(Effect::Checkpoint {
                    checkpoint: self.ckpt.clone(),
                    log,
                });
            }
        }
        let mut commits: Vec<(Csn, Wid)> = batch.commits;
        for (write, csn) in batch.writes {
            let wid = write.wid;
            if let Some(c) = csn {
                commits.push((c, wid));
            }
            let have = vv_get(&self.vv, wid.replica);
            if self.holds(wid) || wid.stamp <= have || have < vv_get(&batch.from, wid.replica) {
                // Already held, or there is a gap before it: a later round fills it.
                continue;
            }
            self.insert_tentative(write, true);
        }
        commits.sort();
        commits.dedup();
        for (csn, wid) in commits {
            if csn <= self.csn() {
                continue;
            }
            if csn != self.csn() + 1 || !self.commit_one(wid, true) {
                break;
            }
        }
    }
}
