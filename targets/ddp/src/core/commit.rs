//! Checkpoints and commit: `Saved` bookkeeping and what a commit publishes (see the
//! module docs of `core`).

use super::{CkptId, Core, Msg, Output, Rank};

impl Core {
    /// The driver made checkpoint `id` durable.
    pub fn checkpoint_saved(&mut self, id: CkptId, now: i64) {
        if id.step < self.committed {
            return;
        }
        self.durable.insert(id);
        // Our own checkpoints of this generation, and the resume point we adopted.
        if id.gen == self.gen || Some(id) == self.resume {
            self.say_saved(id.step, now);
        }
    }

    /// Tells the members that our checkpoint of `step` (this generation's, or the resume
    /// point) is durable.
    pub(crate) fn say_saved(&mut self, step: u64, now: i64) {
        let gen = self.gen;
        for r in self.other_members() {
            self.send(r, Msg::Saved { gen, step });
        }
        self.heard_saved(self.cfg.rank, step, now);
    }

    pub(super) fn heard_saved(&mut self, from: Rank, step: u64, _now: i64) {
        if !self.members.contains(&from) {
            return;
        }
        let set = self.saved.entry(step).or_default();
        set.insert(from);
        if set.len() >= self.members.len() {
            let gen = match self.resume {
                Some(r) if r.step == step => r.gen,
                _ => self.gen,
            };
            self.commit(step, gen);
        }
    }

    /// How many committed checkpoints are remembered (enough to cover any absence a
    /// joiner can come back from while its own checkpoints are still of use).
    const LINEAGE: usize = 256;

    pub(super) fn commit(&mut self, through: u64, gen: u64) {
        if through <= self.committed {
            return;
        }
        // The resume point comes first: its records are in checkpoints of its generation.
        if let Some(r) = self.resume {
            if r.step > self.committed && r.step < through {
                self.commit(r.step, r.gen);
            }
        }
        self.committed = through;
        self.note_committed(CkptId { step: through, gen });
        self.durable.retain(|c| c.step >= through);
        self.saved.retain(|s, _| *s > through);
        self.outputs.push(Output::Commit { through, gen });
    }

    pub(crate) fn note_committed(&mut self, id: CkptId) {
        self.lineage.insert(id);
        while self.lineage.len() > Self::LINEAGE {
            self.lineage.pop_first();
        }
    }
}
