//! Rendezvous: forming the group of a generation (see the module docs of `core`).

use super::{Chunk, CkptId, Core, Msg, Output, Phase, Rank, INIT_BUCKET};
use std::collections::BTreeSet;

impl Core {
    pub(super) fn enter_rendezvous(&mut self, gen: u64, now: i64, reason: &str) {
        self.gen = gen;
        self.phase = Phase::Rendezvous;
        self.rings.clear();
        self.saved.clear();
        self.my_join = self.durable.iter().copied().collect();
        self.joins.clear();
        self.joins
            .insert(self.cfg.rank, (self.boot, self.my_join.clone()));
        self.last_progress = now;
        self.outputs.push(Output::Regroup {
            gen,
            reason: reason.to_string(),
        });
        self.announce(now);
        self.try_complete_rendezvous(now);
    }

    pub(super) fn announce(&mut self, now: i64) {
        self.last_join_sent = now;
        let msg = self.my_join_msg();
        let others: Vec<Rank> = self.others().collect();
        for r in others {
            self.send(r, msg.clone());
        }
    }

    fn try_complete_rendezvous(&mut self, now: i64) {
        if self.phase != Phase::Rendezvous || self.joins.len() < self.cfg.world {
            return;
        }
        let mut common: Option<BTreeSet<CkptId>> = None;
        for (_, list) in self.joins.values() {
            let set: BTreeSet<CkptId> = list.iter().copied().collect();
            common = Some(match common {
                None => set,
                Some(c) => c.intersection(&set).copied().collect(),
            });
        }
        let resume = common.and_then(|c| c.iter().max_by_key(|c| (c.step, c.gen)).copied());
        self.last_progress = now;
        match resume {
            Some(ckpt) => {
                self.commit(ckpt.step, ckpt.gen);
                self.phase = Phase::Restoring;
                self.step = ckpt.step;
                self.outputs.push(Output::Restore(ckpt));
            }
            None => {
                self.params = self.init.clone();
                self.momentum.iter_mut().for_each(|m| *m = 0.0);
                self.prev_avg.iter_mut().for_each(|m| *m = 0.0);
                self.step = 0;
                if self.cfg.rank == 0 || self.cfg.world == 1 {
                    if self.cfg.world > 1 {
                        let chunk = Chunk {
                            gen: self.gen,
                            step: 0,
                            bucket: INIT_BUCKET,
                            round: 0,
                            data: self.params.clone(),
                        };
                        self.send(1, Msg::Chunk(chunk));
                    }
                    self.start_step(1, now);
                } else {
                    self.phase = Phase::AwaitInit;
                }
            }
        }
    }

    fn my_join_msg(&self) -> Msg {
        Msg::Join {
            gen: self.gen,
            boot: self.boot,
            ckpts: self.my_join.clone(),
        }
    }

    pub(super) fn on_join(
        &mut self,
        from: Rank,
        gen: u64,
        boot: u64,
        ckpts: Vec<CkptId>,
        now: i64,
    ) {
        if gen > self.gen {
            self.enter_rendezvous(gen, now, &format!("rank {from} announced generation {gen}"));
        }
        let known = self.joins.get(&from).map(|(b, _)| *b);
        if gen == self.gen && self.phase == Phase::Rendezvous {
            self.joins.insert(from, (boot, ckpts));
            self.try_complete_rendezvous(now);
        } else if gen == self.gen && known == Some(boot) {
            // It is still forming the group we already formed: repeat our part.
            let msg = self.my_join_msg();
            self.send(from, msg);
        } else if self.phase == Phase::Rendezvous {
            // An older generation, or a restarted rank: bring it to ours.
            let msg = self.my_join_msg();
            self.send(from, msg);
        } else if gen <= self.gen {
            // A member fell out of our group (it restarted or lost it): re-form.
            let next = self.gen + 1;
            self.enter_rendezvous(
                next,
                now,
                &format!("rank {from} is back in generation {gen}"),
            );
        }
    }
}
