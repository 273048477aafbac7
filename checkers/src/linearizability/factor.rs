//! Components of a part, and why the search's factored memo is exact.
//!
//! # Components
//!
//! [`Model::footprint`] names the atoms (map keys, registers) an op reads or writes. Atoms
//! are joined by union-find: two are in one component if some op of the part touches
//! both, so a transaction over keys a and b puts a, b and every op on either in one
//! component. Every op then lies in exactly one component; ops of different components
//! touch disjoint atoms, so they commute, and an op changes only its component's
//! projection of the state ([`Model::project`]). The search steps projected states alone:
//! `project(step(s, op)) == step(project(s), op)` for an op of that component, which is
//! what the footprint promises. This is one object, one search, one linearization order
//! (and a keyed history whose ops span keys is not cut apart): the components only say
//! which parts of the state an op can see.
//!
//! # The factored memo (nogoods)
//!
//! A configuration C of the exact search is (placed ops, state). Its restriction to a
//! component K is (K's placed ops, K's projected state); its *K-problem* asks for an order
//! of K's unplaced ops, consistent with real time among them, in which K's model steps
//! succeed from K's projected state, all required ones placed.
//!
//! 1. If some restriction's K-problem has no solution, C cannot be extended: restricting
//!    any extension of C to K's ops gives a K-solution (real time restricts to a subset,
//!    and other components' ops leave K's projection unchanged). So "K-restriction r is
//!    dead" is a fact about r alone, true in every configuration whose K-restriction is r:
//!    it is recorded as the nogood (K, K's projected state, K's placed ops).
//! 2. Which K to blame. The search focuses on R's component F (see `search.rs`). If a
//!    child fails for a component G != F, the child's G-restriction equals C's (placing
//!    an F op changes only F), so C is dead for G too, and so is every ancestor up to the
//!    frame that placed a G op: the search pops them all (backjumping) and records the
//!    nogood at that frame. If every child fails for F (or steps fail, or hits an
//!    F-nogood), C's F-problem is dead: the children are exactly the JIT first moves of
//!    F's own sub-history (R completes first, so F's window is C's window restricted to
//!    F), and each of them is dead for F. The symmetry rule for optional ops (only the
//!    earliest unused op of a class) also holds inside one component, since equal model
//!    ops have equal footprints.
//! 3. No path configuration is ever covered by a nogood: pushes check the one component
//!    they change (the others are unchanged from a parent that was not covered), and a
//!    nogood learnt at frame P covers P's child, which has strictly more of that
//!    component's ops placed than any configuration left on the stack. So every
//!    configuration is entered at most once, as with the plain memo.
//!
//! The plain memo is the special case of one component. Costs: a nogood lookup per
//! candidate, and the lost work of the other components above a backjump target, which
//! is replayed cheaply since their own dead ends are already nogoods.

use super::fxhash::FxHashMap;
use super::model::Model;
use super::search::{Part, PartOp, NO_STATE, STATE_ENTRY_OVERHEAD};
use super::tables::{Interner, KeySet, Placed};

/// The components of one part.
pub(crate) struct Components {
    /// Component of each part op.
    pub comp_of: Vec<u32>,
    /// Index of each part op among its component's ops (in invoke order).
    pub local: Vec<u32>,
    /// Number of ops in each component.
    pub sizes: Vec<usize>,
    /// Each component's atoms, for [`Model::project`].
    pub atoms: Vec<Vec<u64>>,
}

impl Components {
    /// The components of `part`, or `None` when the factored memo cannot or need not be
    /// used: an op without a footprint, a model without projections, or a single component.
    pub fn new<M: Model>(model: &M, part: &Part<M::Op>) -> Option<Components> {
        // The model is asked only here and at the end; the grouping in between is
        // compiled once rather than once per model type.
        let footprints: Vec<Vec<u64>> = part
            .values
            .iter()
            .map(|value| model.footprint(value))
            .collect::<Option<_>>()?;
        let comps = Components::of_footprints(&footprints, &part.ops)?;
        model.project(&model.init(), &comps.atoms[0])?;
        Some(comps)
    }

    /// The components given each distinct model op's footprint, or `None` for an empty
    /// footprint or a single component.
    fn of_footprints(footprints: &[Vec<u64>], ops: &[PartOp]) -> Option<Components> {
        let mut index: FxHashMap<u64, usize> = FxHashMap::default();
        let mut parent: Vec<usize> = Vec::new();
        // Each distinct model op's atoms, joined; and its first atom.
        let mut value_atom = Vec::with_capacity(footprints.len());
        for footprint in footprints {
            let ids: Vec<usize> = footprint
                .iter()
                .map(|a| {
                    *index.entry(*a).or_insert_with(|| {
                        parent.push(parent.len());
                        parent.len() - 1
                    })
                })
                .collect();
            for w in ids.windows(2) {
                let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
                parent[a] = b;
            }
            value_atom.push(*ids.first()?);
        }
        let first_atom: Vec<usize> = ops.iter().map(|o| value_atom[o.op as usize]).collect();
        // Dense component numbers, in order of first appearance.
        let mut dense: FxHashMap<usize, u32> = FxHashMap::default();
        let mut comp_of = Vec::with_capacity(ops.len());
        let mut local = Vec::with_capacity(ops.len());
        let mut sizes: Vec<usize> = Vec::new();
        for &a in &first_atom {
            let root = find(&mut parent, a);
            let next = dense.len() as u32;
            let c = *dense.entry(root).or_insert(next);
            if c as usize == sizes.len() {
                sizes.push(0);
            }
            comp_of.push(c);
            local.push(sizes[c as usize] as u32);
            sizes[c as usize] += 1;
        }
        if sizes.len() < 2 {
            return None;
        }
        let mut atoms = vec![Vec::new(); sizes.len()];
        for (&atom, &i) in &index {
            let root = find(&mut parent, i);
            if let Some(&c) = dense.get(&root) {
                atoms[c as usize].push(atom);
            }
        }
        for a in &mut atoms {
            a.sort_unstable();
        }
        Some(Components {
            comp_of,
            local,
            sizes,
            atoms,
        })
    }
}

fn find(parent: &mut [usize], mut a: usize) -> usize {
    // Bounded: each step moves one link closer to the root, and halving shortens the path.
    while parent[a] != a {
        parent[a] = parent[parent[a]];
        a = parent[a];
    }
    a
}

/// The factored search's tables (exact search of a part with several components). The
/// whole state is never built: it is the tuple of the components' projected states.
pub(crate) struct Factored<'c, S> {
    pub comps: &'c Components,
    /// Per component: its placed required and used optional ops, by local index.
    pub bits: Vec<Placed>,
    /// Per component: the id of its current projected state.
    pub cur: Vec<u32>,
    /// Interned projected states.
    pub states: Interner<S>,
    /// Dead (component, projected state, placed ops of the component) triples.
    pub nogoods: KeySet,
}

impl<'c, S: Clone + Eq + std::hash::Hash> Factored<'c, S> {
    pub fn new<M: Model<State = S>>(model: &M, comps: &'c Components) -> Self {
        let mut f = Factored {
            comps,
            bits: comps.sizes.iter().map(|&n| Placed::new(n)).collect(),
            cur: Vec::with_capacity(comps.atoms.len()),
            states: Interner::new(),
            nogoods: KeySet::new(),
        };
        let init = model.init();
        let mut bytes = 0;
        for atoms in &comps.atoms {
            // `Components::new` checked that the model projects.
            let p = model.project(&init, atoms).unwrap_or_else(|| init.clone());
            let id = f.intern(model, p, &mut bytes);
            f.cur.push(id);
        }
        f
    }

    fn intern<M: Model<State = S>>(&mut self, model: &M, p: S, bytes_out: &mut u64) -> u32 {
        let bytes = model.state_bytes(&p) as u64;
        let (id, fresh) = self.states.intern(p);
        if fresh {
            *bytes_out += bytes + STATE_ENTRY_OVERHEAD;
        }
        id
    }

    /// Steps projected state `from` by `op` (an op of that component): the successor's
    /// id, or `NO_STATE`.
    pub fn step<M: Model<State = S>>(
        &mut self,
        model: &M,
        from: u32,
        op: &M::Op,
        bytes: &mut u64,
    ) -> u32 {
        match model.step(self.states.get(from), op) {
            Some(next) => self.intern(model, next, bytes),
            None => NO_STATE,
        }
    }

    /// Marks part op `o` placed (or not) in its component's set.
    pub fn set(&mut self, o: u32, placed: bool) {
        let c = self.comps.comp_of[o as usize] as usize;
        let l = self.comps.local[o as usize] as usize;
        if placed {
            self.bits[c].set(l);
        } else {
            self.bits[c].clear(l);
        }
    }
}
