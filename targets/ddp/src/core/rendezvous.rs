//! Rendezvous: forming the group of a generation, shrinking and growing it, and handing
//! the resume state to joiners (see the module docs of `core`).

use super::{CkptId, Core, DataPos, Msg, Output, Phase, Rank, StateMsg};

/// One rank's announcement for a generation.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinInfo {
    /// Generation.
    pub gen: u64,
    /// Incarnation.
    pub boot: u64,
    /// Checkpoints held.
    pub ckpts: Vec<CkptId>,
    /// Last committed checkpoint.
    pub committed: Option<CkptId>,
    /// Fixed view of the members, if any.
    pub view: Option<Vec<Rank>>,
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn floats(v: &[u32]) -> Vec<f32> {
    v.iter().map(|b| f32::from_bits(*b)).collect()
}

impl Core {
    pub(super) fn enter_rendezvous(&mut self, gen: u64, now: i64, reason: &str) {
        self.gen = gen;
        self.phase = Phase::Rendezvous;
        self.rings.clear();
        self.saved.clear();
        self.members.clear();
        self.resume = None;
        self.my_view = None;
        self.rdv_since = now;
        self.my_join = self.durable.iter().copied().collect();
        self.my_committed = self
            .lineage
            .iter()
            .rev()
            .find(|c| c.step == self.committed)
            .copied();
        self.joins.clear();
        let mine = self.my_info();
        self.joins.insert(self.cfg.rank, mine);
        self.last_progress = now;
        self.outputs.push(Output::Regroup {
            gen,
            reason: reason.to_string(),
        });
        self.announce(now);
        self.try_complete_rendezvous(now);
    }

    fn my_info(&self) -> JoinInfo {
        JoinInfo {
            gen: self.gen,
            boot: self.boot,
            ckpts: self.my_join.clone(),
            committed: self.my_committed,
            view: self.my_view.clone(),
        }
    }

    pub(super) fn announce(&mut self, now: i64) {
        self.last_join_sent = now;
        let msg = self.my_join_msg();
        let others: Vec<Rank> = self.others().collect();
        for r in others {
            self.send(r, msg.clone());
        }
    }

    fn fix_view(&mut self, view: Vec<Rank>, now: i64) {
        self.my_view = Some(view);
        let mine = self.my_info();
        self.joins.insert(self.cfg.rank, mine);
        self.announce(now);
    }

    pub(super) fn try_complete_rendezvous(&mut self, now: i64) {
        if self.phase != Phase::Rendezvous {
            return;
        }
        if self.my_view.is_none() {
            let heard: Vec<Rank> = self.joins.keys().copied().collect();
            let waited = now - self.rdv_since >= self.cfg.shrink_after_ms;
            let quorum = self.cfg.min_world.max(self.cfg.world / 2 + 1);
            if heard.len() >= self.cfg.world || (waited && heard.len() >= quorum) {
                self.fix_view(heard, now);
            } else {
                return;
            }
        }
        let Some(view) = self.my_view.clone() else {
            return;
        };
        let agreed = view.iter().all(|r| {
            self.joins
                .get(r)
                .is_some_and(|j| j.view.as_ref() == Some(&view))
        });
        if !agreed {
            return;
        }
        self.form(view, now);
    }

    /// Every member announced the same view: form the group and pick the resume point.
    fn form(&mut self, view: Vec<Rank>, now: i64) {
        self.members = view;
        self.last_progress = now;
        let infos: Vec<&JoinInfo> = self
            .members
            .iter()
            .filter_map(|r| self.joins.get(r))
            .collect();
        // The newest checkpoint any member holds: every committed checkpoint is held by
        // all members of the group that committed it, and that group shares a member
        // with this one (both are majorities), so nothing committed is passed over.
        let resume = infos
            .iter()
            .flat_map(|j| j.ckpts.iter().copied())
            .max_by_key(|c| (c.step, c.gen));
        self.resume = resume;
        let holders: Vec<Rank> = self
            .members
            .iter()
            .copied()
            .filter(|r| {
                resume.is_some_and(|c| self.joins.get(r).is_some_and(|j| j.ckpts.contains(&c)))
            })
            .collect();
        let everyone_holds = holders.len() == self.members.len();
        match resume {
            Some(ckpt) if holders.contains(&self.cfg.rank) => {
                if everyone_holds {
                    self.commit(ckpt.step, ckpt.gen);
                } else {
                    // Durable here; joiners say so once they have saved it too.
                    self.say_saved(ckpt.step, now);
                }
                self.phase = Phase::Restoring;
                self.step = ckpt.step;
                self.outputs.push(Output::Restore(ckpt));
            }
            Some(ckpt) => {
                self.step = ckpt.step;
                self.phase = Phase::AwaitState;
            }
            None => {
                self.params = self.init.clone();
                self.momentum.iter_mut().for_each(|m| *m = 0.0);
                self.prev_avg.iter_mut().for_each(|m| *m = 0.0);
                self.pos = DataPos::default();
                self.step = 0;
                if self.members.first() == Some(&self.cfg.rank) {
                    self.send_state_to_joiners();
                    self.start_step(1, now);
                } else {
                    self.phase = Phase::AwaitState;
                }
            }
        }
    }

    /// The members that do not hold the resume point (all but the first from scratch).
    fn joiners(&self) -> Vec<Rank> {
        self.members
            .iter()
            .copied()
            .filter(|r| match self.resume {
                Some(c) => !self.joins.get(r).is_some_and(|j| j.ckpts.contains(&c)),
                None => Some(r) != self.members.first(),
            })
            .collect()
    }

    /// The first member holding the resume point sends it to the joiners.
    pub(super) fn send_state_to_joiners(&mut self) {
        let donor = self.members.iter().copied().find(|r| match self.resume {
            Some(c) => self.joins.get(r).is_some_and(|j| j.ckpts.contains(&c)),
            None => true,
        });
        if donor != Some(self.cfg.rank) {
            return;
        }
        let state = StateMsg {
            gen: self.gen,
            ckpt: self.resume,
            pos: self.pos,
            params: bits(&self.params),
            momentum: bits(&self.momentum),
            lineage: self.lineage.iter().copied().collect(),
            joiner_committed: 0,
            records: Vec::new(),
        };
        for r in self.joiners() {
            if r != self.cfg.rank {
                let mut msg = state.clone();
                msg.joiner_committed = self
                    .joins
                    .get(&r)
                    .and_then(|j| j.committed)
                    .map(|c| c.step)
                    .unwrap_or(0);
                self.send(r, Msg::State(Box::new(msg)));
            }
        }
    }

    /// The resume state from the donor.
    pub(super) fn on_state(&mut self, from: Rank, state: StateMsg, now: i64) {
        if state.gen != self.gen
            || self.phase != Phase::AwaitState
            || state.ckpt != self.resume
            || !self.members.contains(&from)
            || state.params.len() != self.params.len()
            || state.momentum.len() != self.params.len()
        {
            return;
        }
        // Publish our own records of checkpoints the group has committed while we were
        // away (we were a member for those steps), before adopting the newer state.
        for c in &state.lineage {
            self.note_committed(*c);
        }
        let confirmed = self
            .durable
            .iter()
            .copied()
            .filter(|c| c.step > self.committed && self.lineage.contains(c))
            .max_by_key(|c| (c.step, c.gen));
        if let Some(c) = confirmed {
            self.commit(c.step, c.gen);
        }
        // From scratch the no-init-broadcast bug keeps our own initial parameters.
        if state.ckpt.is_some() || !self.cfg.bugs.no_init_broadcast {
            self.params = floats(&state.params);
        }
        self.momentum = floats(&state.momentum);
        self.prev_avg.iter_mut().for_each(|m| *m = 0.0);
        self.pos = state.pos;
        if let Some(c) = state.ckpt {
            self.committed = self.committed.max(c.step);
            self.note_committed(c);
            self.durable.retain(|d| d.step >= c.step);
            self.outputs.push(Output::Adopt {
                id: c,
                records: state.records,
            });
        }
        self.start_step(self.step + 1, now);
    }

    fn my_join_msg(&self) -> Msg {
        Msg::Join {
            gen: self.gen,
            boot: self.boot,
            ckpts: self.my_join.clone(),
            committed: self.my_committed,
            view: self.my_view.clone(),
        }
    }

    pub(super) fn on_join(&mut self, from: Rank, join: JoinInfo, now: i64) {
        let gen = join.gen;
        if gen > self.gen {
            self.enter_rendezvous(gen, now, &format!("rank {from} announced generation {gen}"));
        }
        let known = self.joins.get(&from).map(|j| j.boot);
        if gen == self.gen && self.phase == Phase::Rendezvous {
            let theirs = join.view.clone();
            self.joins.insert(from, join);
            match (&self.my_view, theirs) {
                (None, Some(v)) if v.contains(&self.cfg.rank) => self.fix_view(v, now),
                (None, Some(_)) => {
                    // A group is forming without us: make it re-form with us.
                    let next = self.gen + 1;
                    self.enter_rendezvous(next, now, &format!("left out by rank {from}"));
                    return;
                }
                (Some(mine), Some(v)) if *mine != v => {
                    let next = self.gen + 1;
                    self.enter_rendezvous(next, now, &format!("rank {from} saw other members"));
                    return;
                }
                _ => {}
            }
            self.try_complete_rendezvous(now);
        } else if gen == self.gen && known == Some(join.boot) && self.members.contains(&from) {
            // It is still forming the group we already formed: repeat our part.
            let msg = self.my_join_msg();
            self.send(from, msg);
        } else if self.phase == Phase::Rendezvous {
            // An older generation, or a restarted rank: bring it to ours.
            let msg = self.my_join_msg();
            self.send(from, msg);
        } else if gen <= self.gen {
            // A member fell out of our group (it restarted or lost it), or a rank outside
            // the group is back: re-form (the group grows, as torchrun restarts its
            // workers when a node is waiting).
            let next = self.gen + 1;
            let why = if self.members.contains(&from) {
                format!("rank {from} is back in generation {gen}")
            } else {
                format!("rank {from} asks to join (generation {gen})")
            };
            self.enter_rendezvous(next, now, &why);
        }
    }
}
