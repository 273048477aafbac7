//! The just-in-time linearization search (Wing & Gong, Lowe; as in Porcupine) for one part.
//!
//! Call and return entries sit in a doubly linked list in history order. An op may be
//! linearized next iff its call comes before the first return entry of a not yet
//! linearized op; linearizing it lifts its entries out of the list (dancing links, undone
//! on backtrack). A memo of (linearized set, state id) makes every configuration be
//! explored at most once, so the search is bounded by the number of distinct
//! configurations, which the memory bound caps.
//!
//! Beyond the published algorithm:
//! - states and ops are interned to u32 ids; transitions are cached by (op, state);
//! - indeterminate (optional) ops have no return entry: they may take effect any time
//!   after their invoke, or never. The search succeeds once every required op is placed;
//! - optional ops with identical model ops are interchangeable, and an earlier-invoked one
//!   is available wherever a later one is, so only the earliest unused op of each class is
//!   tried (the used ops of a class are always a prefix of it in invoke order);
//! - the exact search's memo is a dominance memo: a configuration whose used optional ops
//!   are a superset of those of a seen configuration with the same placed required ops
//!   and state is cut (it has the same window and state and fewer ops left). This turns
//!   the 2^k subsets of k indeterminate ops into a few antichains (etcd_002: 912k
//!   iterations down to 15k);
//! - candidates: required ops first, optional ops only when no required op fits;
//! - components: ops declare footprints ([`Model::footprint`]); atoms joined by a
//!   multi-atom op form one component (see `factor.rs`), each op lies in one component,
//!   and each component has its own entry list. The return entries are also linked in one
//!   list, so R, the unplaced required op that completes first, is always at hand;
//! - focus on the next deadline: only candidates in R's component are tried. Sound and
//!   complete: take any valid continuation and move the ops of other components that it
//!   places before R to just after R. They commute with R's component's ops, and none of
//!   them must precede one of those in real time: such an op Y has Y.end >= R.end (R
//!   completes first), while an op Z placed before R has Z.invoke < R.end (else R would
//!   have to precede Z). So the candidates are exactly the JIT candidates of R's
//!   component's own sub-history, and a scan walks only that component's list;
//! - a factored memo (exact search with several components; `factor.rs` has the full
//!   argument): the search state is the tuple of the components' projected states, and a
//!   dead configuration is recorded as a nogood against one component only: (component,
//!   its projected state, its placed ops). A configuration is dead as soon as one
//!   component's restriction is, whatever the others do, so a nogood prunes every
//!   combination sharing it, and a failure backjumps straight to the frame that last
//!   changed the dead component. The memo is the sum of the components' memos, not their
//!   product: c50 of Porcupine's kv, unsplit, from no verdict to seconds;
//! - a read lookahead (unfactored search, models with [`Model::grows`]): after a step to
//!   state s, walk the entry list from its head. Every op placed before an unplaced
//!   required read G has its call before G's return, so while the calls seen so far are
//!   all of growing ops, the state G sees is s grown by some of them, and if
//!   [`Model::may_reach`] says no such growth can satisfy G, the configuration is dead.
//!   A wrong order of concurrent appends dies at its first wrong append instead of at
//!   the read that refutes it (c50 of Porcupine's kv: ~900k iterations down to a few
//!   thousand);
//! - a relaxed pass (optional ops reusable, not recorded in the memo's set) for models with
//!   small state spaces: every real linearization is a relaxed one, so a relaxed failure
//!   proves the part invalid at polynomial cost, where the exact search would have to try
//!   every subset of indeterminate ops.

use super::factor::{Components, Factored};
use super::fxhash::FxHashMap;
use super::model::Model;
pub(crate) use super::part::{Budget, Outcome, Part, PartOp, Progress, Stop};
use super::relaxed::relaxed_is_real;
use super::tables::{Interner, KeySet, Placed};
use std::sync::atomic::Ordering;
use std::time::Instant;

const NIL: u32 = u32::MAX;
pub(crate) const NO_STATE: u32 = u32::MAX;

/// One placed op on the search stack, with what is needed to undo it.
pub(crate) struct Frame {
    entry: u32,
    focus: u64,
    phase: u8,
    /// The window's end when the op was placed (see `window_end`).
    window_end: usize,
    prev_state: u32,
    /// The op's component's projected state before it (factored search only).
    prev_proj: u32,
    /// The op was a required read ([`Model::read_only`]) that fits the state. Any valid
    /// continuation can be reordered to place it first: it is available now, no unplaced
    /// op must precede it (its call is before every unplaced return), it succeeds here,
    /// and it changes no state wherever it was placed, so the others see the same states. So if this child fails, its parent fails too,
    /// and the parent's other candidates are not tried. (Within one component the same
    /// holds for the component's restriction, so the reason for the failure carries over.)
    forced: bool,
    pub(crate) op: u32,
    lifted: bool,
}

/// Per-entry memo overhead beyond the key words: box header, table slot and control byte,
/// allocator rounding.
const MEMO_ENTRY_OVERHEAD: u64 = 48;

/// A cached transition: key, target and control byte, with the table's slack.
const TRANS_ENTRY_BYTES: u64 = 24;

/// Per-state overhead beyond the state itself: the index's slot and id.
pub(crate) const STATE_ENTRY_OVERHEAD: u64 = 16;

/// How the search treats optional (indeterminate) ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Optional ops are reusable and absent from the memo: an over-approximation, so a
    /// failure proves the part invalid; a success is checked by [`relaxed_is_real`].
    Relaxed,
    /// Optional ops are used once but left out of the memo key: cheap, and a success is a
    /// real linearization, but a failure proves nothing (the memo may cut real paths).
    Greedy,
    /// The complete search.
    Exact,
}

/// Runs the search on one part in the given mode.
pub(crate) fn search<M: Model>(
    model: &M,
    part: &Part<M::Op>,
    mode: Mode,
    budget: &Budget,
    max_steps: u64,
    comps: Option<&Components>,
) -> Outcome<M::State> {
    let relaxed = mode == Mode::Relaxed;
    let mark_optional = mode == Mode::Exact;
    let ops = &part.ops;
    let n = ops.len();

    // Classes of optional ops: same model op. `ordinal` = rank within its class.
    let mut class_count: FxHashMap<u32, u32> = FxHashMap::default();
    let mut ordinal = vec![0u32; n];
    for (i, o) in ops.iter().enumerate() {
        if !o.required {
            let c = class_count.entry(o.op).or_insert(0);
            ordinal[i] = *c;
            *c += 1;
        }
    }
    let mut used = vec![0u32; part.values.len()];
    // Each class's ops in invoke order (`used[c]` of them are placed: always a prefix), and
    // per component the classes with ops in it: phase 1 tries each class's first unused op
    // (a relaxed pass: its first op, reusable), so a scan costs the classes, not every
    // indeterminate op invoked so far (which made a key's search quadratic in its info ops).
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); part.values.len()];
    for (i, o) in ops.iter().enumerate() {
        if !o.required {
            members[o.op as usize].push(i as u32);
        }
    }
    let mut comp_classes: Vec<Vec<u32>> = vec![Vec::new(); comps.map_or(1, |c| c.sizes.len())];
    for (c, m) in members.iter().enumerate() {
        if let Some(&first) = m.first() {
            let comp = comps.map_or(0, |cs| cs.comp_of[first as usize] as usize);
            comp_classes[comp].push(c as u32);
        }
    }

    // The entry lists: one per component (just one without components), entries `0..heads`
    // are their head sentinels, holding the required ops' calls and returns. Optional ops'
    // calls are in lists of their own (sentinels `heads..2 * heads`): they have no return,
    // so in one list with the required ops they would stay in every later window and each
    // scan would walk all of them (quadratic in a key's info ops). Phase 1 walks the focus
    // component's classes instead (`comp_classes`), trying each one's first unused op if it
    // was invoked before the window's end; the optional lists serve the read lookahead. A
    // relaxed pass never lifts optional ops and tries only a class's first member, so only
    // first members are linked then.
    // With components, the return entries are also linked in one list of their own
    // (sentinel `rhead`), whose first entry sets the focus.
    let heads = comps.map_or(1, |c| c.sizes.len());
    let focused = comps.is_some();
    let n_events = n + part.by_end.len();
    let m = 2 * heads + n_events + 1;
    let rhead = m - 1;
    let mut next = vec![NIL; m];
    let mut prev = vec![NIL; m];
    let mut rnext = vec![NIL; if focused { m } else { 0 }];
    let mut rprev = rnext.clone();
    let mut tail: Vec<usize> = (0..2 * heads).collect();
    let mut rtail = rhead;
    let mut op_of = vec![0u32; m];
    let mut is_call = vec![false; m];
    let mut call_entry = vec![NIL; n];
    let mut ret_entry = vec![NIL; n];
    for (i, (o, call)) in part.events().enumerate() {
        let id = 2 * heads + i;
        op_of[id] = o;
        is_call[id] = call;
        if call {
            call_entry[o as usize] = id as u32;
        } else {
            ret_entry[o as usize] = id as u32;
        }
        let comp = comps.map_or(0, |c| c.comp_of[o as usize] as usize);
        let optional = !ops[o as usize].required;
        if optional && relaxed && ordinal[o as usize] != 0 {
            continue;
        }
        let list = if optional { heads + comp } else { comp };
        prev[id] = tail[list] as u32;
        next[tail[list]] = id as u32;
        tail[list] = id;
        if focused && !call {
            rprev[id] = rtail as u32;
            rnext[rtail] = id as u32;
            rtail = id;
        }
    }

    let mut states: Interner<M::State> = Interner::new();
    states.intern(model.init());
    let mut trans: FxHashMap<u64, u32> = FxHashMap::default();

    // `bits` marks placed required ops, by their rank among the required ops (`req_index`),
    // so a memo key spans only the window of required ops (optional ops, never "done",
    // would stretch it to the part's last one); the exact search tracks optional ops in
    // `used_bits`, by `opt_index`.
    let mut opt_index = vec![0u32; n];
    let mut req_index = vec![0u32; n];
    let mut n_optional = 0usize;
    for (i, o) in ops.iter().enumerate() {
        if o.required {
            req_index[i] = (i - n_optional) as u32;
        } else {
            opt_index[i] = n_optional as u32;
            n_optional += 1;
        }
    }
    let mut bits = Placed::new(n - n_optional);
    let opt_words = n_optional / 64 + 1;
    let mut used_bits = vec![0u64; opt_words];
    // Dominance memo of the exact search with optional ops: (placed required ops, state)
    // -> the sets of used optional ops seen with it. A configuration that has used a
    // superset of a seen set's optional ops can do no more than the seen one (same window,
    // same state, fewer ops left), so it is cut. Equal sets are the plain memo's rule.
    let dominance = mark_optional && n_optional > 0;
    let mut dmemo: FxHashMap<Box<[u64]>, Vec<u64>> = FxHashMap::default();
    let mut memo_entries = 0usize;
    let mut memo = KeySet::new();
    let mut memo_bytes: u64 = 0;
    let mut reported_bytes: u64 = 0;

    let total_required = ops.iter().filter(|o| o.required).count();
    let mut remaining = total_required;
    let mut optional_live = n - total_required;
    let mut stack: Vec<Frame> = Vec::new();
    let mut state: u32 = 0;

    let mut best: Vec<u32> = Vec::new();
    let mut best_required = 0usize;
    let mut best_state: u32 = 0;
    let mut low_water = 0usize;

    const ANY: u64 = u64::MAX;
    let footprint: Vec<u64> = match comps {
        Some(c) => c.comp_of.iter().map(|&c| c as u64).collect(),
        None => Vec::new(),
    };
    // The component of the first return entry, or ANY; and the list to scan for it.
    let focus_of = |rnext: &[u32]| -> u64 {
        match rnext.get(rhead) {
            Some(&e) if e != NIL => footprint[op_of[e as usize] as usize],
            _ => ANY,
        }
    };
    let head_of = |focus: u64| if focus == ANY { 0 } else { focus as usize };
    // The factored memo of the exact search (see the module docs). Not for the relaxed
    // pass: its pushes of reusable optional ops need the plain memo's visited marks to
    // avoid cycles, which nogoods (learnt on failure) do not give.
    let mut fac = comps
        .filter(|_| mode == Mode::Exact)
        .map(|c| Factored::new(model, c));
    let mut focus = focus_of(&rnext);
    let mut entry = next[head_of(focus)];
    let mut phase: u8 = 0;
    // Phase 1's bound: the position of the window's first return (the first unplaced
    // required op's completion), `usize::MAX` when none is left in the list.
    let mut window_end = usize::MAX;
    let mut iterations: u64 = 0;

    let progress =
        |best: &[u32], best_required, best_state: &M::State, memo_len, bytes, stuck| Progress {
            best_prefix: best.to_vec(),
            stuck,
            best_required,
            total_required,
            best_state: best_state.clone(),
            memo_entries: memo_len,
            memo_bytes: bytes,
        };

    // The component found dead from the start, when the factored search fails.
    let mut dead_component: Option<u64> = None;
    let read_only: Vec<bool> = part.values.iter().map(|v| model.read_only(v)).collect();
    let growing: Vec<bool> = part.values.iter().map(|v| model.grows(v)).collect();
    // The lookahead needs whole states (no factoring) and a read it can reason about.
    let lookahead = comps.is_none() && read_only.iter().zip(&growing).any(|(&r, &g)| r && g);
    let mut key_buf: Vec<u64> = Vec::new();
    // The current configuration is known dead before its window is exhausted.
    let mut dead_now = false;
    let stop = loop {
        if remaining == 0 {
            break None;
        }
        iterations += 1;
        if iterations & 1023 == 0 {
            // The tables' own slots, which grow in jumps (a resize doubles them).
            let fac_slots = fac
                .as_ref()
                .map_or(0, |f| f.nogoods.capacity() * 17 + f.states.capacity() * 17);
            let slots = fac_slots
                + (memo.capacity() + dmemo.capacity()) * 17
                + states.capacity() * 17
                + trans.capacity() * 13;
            let current = memo_bytes + slots as u64;
            let delta = current.saturating_sub(reported_bytes);
            reported_bytes = reported_bytes.max(current);
            let total = budget.used_memory.fetch_add(delta, Ordering::Relaxed) + delta;
            if budget.cancel.load(Ordering::Relaxed) {
                break Some(Stop::Cancelled);
            }
            if budget.max_memory.is_some_and(|max| total > max) {
                break Some(Stop::Memory);
            }
            if budget.deadline.is_some_and(|d| Instant::now() >= d) {
                break Some(Stop::Time);
            }
            if iterations >= max_steps {
                break Some(Stop::Steps);
            }
        }
        // Phase 1 walks the focus component's classes: skip those whose next unused op
        // is missing or invoked after the window's end (bounded by the classes).
        if phase == 1 && entry != NIL {
            let list = &comp_classes[head_of(focus)];
            while let Some(&c) = list.get(entry as usize) {
                let next_op = members[c as usize].get(used[c as usize] as usize);
                if next_op.is_some_and(|&o| ops[o as usize].invoke < window_end) {
                    break;
                }
                entry += 1;
            }
            if entry as usize >= list.len() {
                entry = NIL;
            }
        }
        let in_window = entry != NIL && (phase == 1 || is_call[entry as usize]);
        if in_window {
            let o = if phase == 0 {
                op_of[entry as usize]
            } else {
                let c = comp_classes[head_of(focus)][entry as usize] as usize;
                members[c][used[c] as usize]
            };
            let po = &ops[o as usize];
            // (Every entry of the scanned list, and every class walked, is in the focus
            // component; phase 0's list holds required ops only, and phase 1 gives each
            // class's first unused op.)
            // The factored search steps the op's component's projected state alone.
            let from = match fac.as_ref() {
                Some(f) => f.cur[f.comps.comp_of[o as usize] as usize],
                None => state,
            };
            let tkey = ((po.op as u64) << 32) | from as u64;
            let ns = match trans.get(&tkey) {
                Some(&s) => s,
                None if fac.is_some() => {
                    let f = fac.as_mut().expect("checked");
                    let value = &part.values[po.op as usize];
                    let s = f.step(model, from, value, &mut memo_bytes);
                    trans.insert(tkey, s);
                    memo_bytes += TRANS_ENTRY_BYTES;
                    s
                }
                None => {
                    let s = match model.step(states.get(state), &part.values[po.op as usize]) {
                        None => NO_STATE,
                        Some(next_state) => {
                            let bytes = model.state_bytes(&next_state) as u64;
                            let (id, fresh) = states.intern(next_state);
                            if fresh {
                                memo_bytes += bytes + STATE_ENTRY_OVERHEAD;
                            }
                            id
                        }
                    };
                    trans.insert(tkey, s);
                    memo_bytes += TRANS_ENTRY_BYTES;
                    s
                }
            };
            // A required read that fits can go first in any valid continuation: see
            // `Frame::forced`.
            let noop = po.required && ns == from && read_only[po.op as usize];
            let pruned = lookahead
                && ns != NO_STATE
                && !reads_reachable(
                    model,
                    states.get(ns),
                    // A relaxed pass's optional op stays available, so it still counts.
                    if po.required || !relaxed { o } else { NIL },
                    Lists {
                        next: &next,
                        is_call: &is_call,
                        op_of: &op_of,
                    },
                    part,
                    &growing,
                    &read_only,
                );
            if ns != NO_STATE {
                let lift = po.required || !relaxed;
                let oi = opt_index[o as usize] as usize;
                if po.required {
                    bits.set(req_index[o as usize] as usize);
                } else if mark_optional {
                    used_bits[oi / 64] |= 1 << (oi % 64);
                }
                let fresh = if pruned {
                    false
                } else if let Some(f) = fac.as_mut() {
                    // Only this op's component changed: only its nogoods can apply.
                    // (A relaxed search's optional ops stay available: never marked.)
                    if lift {
                        f.set(o, true);
                    }
                    let c = f.comps.comp_of[o as usize];
                    f.bits[c as usize].key(&mut key_buf, c, ns);
                    let dead = f.nogoods.contains(&key_buf);
                    if dead && lift {
                        f.set(o, false);
                    }
                    !dead
                } else if dominance {
                    bits.key(&mut key_buf, 0, ns);
                    let key_bytes = key_buf.len() as u64 * 8 + MEMO_ENTRY_OVERHEAD;
                    // Looked up by the borrowed key: a boxed copy of it is made only when
                    // the configuration is new (not at every step, as `entry` would).
                    let dominated = match dmemo.get_mut(key_buf.as_slice()) {
                        Some(seen) => {
                            let dominated = seen.chunks(opt_words).any(|u| {
                                u.iter()
                                    .zip(&used_bits)
                                    .all(|(&seen_w, &w)| seen_w & !w == 0)
                            });
                            if !dominated {
                                seen.extend_from_slice(&used_bits);
                            }
                            dominated
                        }
                        None => {
                            dmemo.insert(key_buf.as_slice().into(), used_bits.clone());
                            memo_bytes += key_bytes;
                            false
                        }
                    };
                    if !dominated {
                        memo_bytes += opt_words as u64 * 8;
                    }
                    !dominated
                } else {
                    // The plain memo: (placed ops, state), with a zero component.
                    bits.key(&mut key_buf, 0, ns);
                    let fresh = memo.insert(&key_buf);
                    if fresh {
                        memo_bytes += key_buf.len() as u64 * 8 + MEMO_ENTRY_OVERHEAD;
                    }
                    fresh
                };
                if fresh {
                    let mut prev_proj = 0;
                    if let Some(f) = fac.as_mut() {
                        let c = f.comps.comp_of[o as usize] as usize;
                        prev_proj = std::mem::replace(&mut f.cur[c], ns);
                    } else {
                        memo_entries += 1;
                    }
                    stack.push(Frame {
                        entry,
                        focus,
                        phase,
                        window_end,
                        prev_state: state,
                        prev_proj,
                        forced: noop,
                        op: o,
                        lifted: lift,
                    });
                    if fac.is_none() {
                        state = ns;
                    }
                    if lift {
                        remove(&mut next, &mut prev, call_entry[o as usize]);
                        if po.required {
                            remove(&mut next, &mut prev, ret_entry[o as usize]);
                            if focused {
                                remove(&mut rnext, &mut rprev, ret_entry[o as usize]);
                            }
                            remaining -= 1;
                        } else {
                            used[po.op as usize] += 1;
                            optional_live -= 1;
                        }
                    }
                    let depth = total_required - remaining;
                    if depth > best_required {
                        best.truncate(low_water.min(best.len()));
                        best.extend(stack[best.len()..].iter().map(|f| f.op));
                        best_required = depth;
                        best_state = state;
                        low_water = stack.len();
                    }
                    focus = focus_of(&rnext);
                    entry = next[head_of(focus)];
                    phase = 0;
                    continue;
                }
                if po.required {
                    bits.clear(req_index[o as usize] as usize);
                } else if mark_optional {
                    used_bits[oi / 64] &= !(1 << (oi % 64));
                }
                if noop {
                    // Placing this no-op first was already refuted (see `forced`).
                    dead_now = true;
                }
            }
            entry = if dead_now {
                NIL
            } else if phase == 1 {
                entry + 1
            } else {
                next[entry as usize]
            };
            continue;
        }
        // The end of the window: the return of an op not yet linearized.
        if phase == 0 && optional_live > 0 && !dead_now {
            phase = 1;
            window_end = if entry == NIL {
                usize::MAX
            } else {
                ops[op_of[entry as usize] as usize].end
            };
            entry = 0;
            continue;
        }
        // The configuration is dead. Its focus component is the reason: no op of that
        // component can go next (the children that failed for another component's
        // reason backjumped past it). Pop to the frame that last changed the reason's
        // component; every configuration popped on the way shares the dead projection.
        let reason = focus;
        dead_now = false;
        let f = loop {
            let Some(f) = stack.pop() else {
                break None;
            };
            low_water = low_water.min(stack.len());
            let po = &ops[f.op as usize];
            state = f.prev_state;
            let mut changed_reason = true;
            if let Some(fc) = fac.as_mut() {
                let c = fc.comps.comp_of[f.op as usize];
                changed_reason = c as u64 == reason;
                if changed_reason {
                    // Learn: this projection of the reason's component cannot be extended.
                    fc.bits[c as usize].key(&mut key_buf, c, fc.cur[c as usize]);
                    memo_bytes += key_buf.len() as u64 * 8 + MEMO_ENTRY_OVERHEAD;
                    fc.nogoods.insert(&key_buf);
                    memo_entries += 1;
                }
                if f.lifted {
                    fc.set(f.op, false);
                }
                fc.cur[c as usize] = f.prev_proj;
            }
            if f.lifted {
                if po.required {
                    bits.clear(req_index[f.op as usize] as usize);
                } else if mark_optional {
                    let oi = opt_index[f.op as usize] as usize;
                    used_bits[oi / 64] &= !(1 << (oi % 64));
                }
                if po.required {
                    restore(&mut next, &mut prev, ret_entry[f.op as usize]);
                    if focused {
                        restore(&mut rnext, &mut rprev, ret_entry[f.op as usize]);
                    }
                    remaining += 1;
                } else {
                    used[po.op as usize] -= 1;
                    optional_live += 1;
                }
                restore(&mut next, &mut prev, call_entry[f.op as usize]);
            }
            // A forced frame's parent had no other choice worth trying: it is dead too.
            if changed_reason && !f.forced {
                break Some(f);
            }
        };
        let Some(f) = f else {
            dead_component = Some(reason);
            break None;
        };
        entry = if f.phase == 1 {
            f.entry + 1
        } else {
            next[f.entry as usize]
        };
        phase = f.phase;
        focus = f.focus;
        window_end = f.window_end;
    };
    budget
        .used_memory
        .fetch_sub(reported_bytes, Ordering::Relaxed);

    // The factored search kept no whole states: rebuild the best prefix's by replaying it.
    let mut stuck = None;
    if let Some(f) = fac.as_ref() {
        // A refutation concerns one component: report its part of the best prefix and its
        // first op that could not be placed after it.
        if let (Some(dead), None) = (dead_component, stop) {
            best.retain(|&i| f.comps.comp_of[i as usize] as u64 == dead);
            best_required = best.iter().filter(|&&i| ops[i as usize].required).count();
            let mut in_prefix = vec![false; n];
            for &i in &best {
                in_prefix[i as usize] = true;
            }
            stuck = (0..n)
                .filter(|&i| ops[i].required && !in_prefix[i] && f.comps.comp_of[i] as u64 == dead)
                .min_by_key(|&i| ops[i].end)
                .map(|i| i as u32);
        }
        let mut whole = model.init();
        for &i in &best {
            if let Some(s) = model.step(&whole, &part.values[ops[i as usize].op as usize]) {
                whole = s;
            }
        }
        best_state = states.intern(whole).0;
    }
    let prog = |best: &[u32]| {
        progress(
            best,
            best_required,
            states.get(best_state),
            memo_entries,
            memo_bytes.max(reported_bytes),
            stuck,
        )
    };
    if super::run::profiling() {
        eprintln!(
            "linearizability profile:   {mode:?} search: {iterations} iterations, {} memo \
             entries, {} states, stop {stop:?}, {remaining} of {total_required} required left",
            memo_entries + dmemo.len(),
            states.len()
        );
    }
    let outcome = match stop {
        Some(s) => Outcome::Stopped(s, prog(&best)),
        None if remaining == 0 => {
            let exact = !relaxed || relaxed_is_real(ops, &stack);
            Outcome::Linearizable { exact }
        }
        None => Outcome::NotLinearizable(prog(&best)),
    };
    // Freeing millions of memo entries and states takes seconds (5 s for 1M states of
    // an unsplit map), which would overrun the time limit: hand big ones to a thread.
    if memo_entries + states.len() > LARGE_SEARCH {
        let fac = fac.map(|f| (f.states, f.nogoods));
        let garbage = (memo, dmemo, states, trans, fac);
        // If no thread can be had, the failed spawn frees them here: late but correct.
        let _ = std::thread::Builder::new().spawn(move || drop(garbage));
    }
    outcome
}

/// The entry lists the lookahead walks: the required ops' (head 0) and the optional ops'
/// calls (head 1), of an unfactored search.
struct Lists<'a> {
    next: &'a [u32],
    is_call: &'a [bool],
    op_of: &'a [u32],
}

/// How many pending reads the lookahead checks, and how many entries it walks at most,
/// so that a step costs no more than a short scan of the window.
const LOOKAHEAD_READS: usize = 4;
const LOOKAHEAD_ENTRIES: usize = 256;

/// The read lookahead (see the module docs): false if some unplaced required read that
/// only growing ops can precede cannot be reached from `state`, reached by placing
/// `placing` (whose own entries are still in the list). The walk is that of the two lists
/// merged in history order: it ends at the first call of an op that does not grow.
fn reads_reachable<M: Model>(
    model: &M,
    state: &M::State,
    placing: u32,
    lists: Lists<'_>,
    part: &Part<M::Op>,
    growing: &[bool],
    read_only: &[bool],
) -> bool {
    // The first optional call that does not grow ends the merged walk; an unfinished
    // search for it ends it at the last optional call seen (earlier is always safe).
    let mut optional_stop = usize::MAX;
    let mut e = lists.next[1];
    let mut walked = 0;
    while e != NIL {
        let o = lists.op_of[e as usize];
        walked += 1;
        if walked == LOOKAHEAD_ENTRIES
            || (o != placing && !growing[part.ops[o as usize].op as usize])
        {
            optional_stop = part.ops[o as usize].invoke;
            break;
        }
        e = lists.next[e as usize];
    }
    let mut e = lists.next[0];
    let mut reads = 0;
    let mut walked = 0;
    while e != NIL && walked < LOOKAHEAD_ENTRIES {
        walked += 1;
        let o = lists.op_of[e as usize];
        if o != placing {
            let v = part.ops[o as usize].op as usize;
            if lists.is_call[e as usize] {
                if !growing[v] {
                    return true;
                }
            } else if part.ops[o as usize].end > optional_stop {
                return true;
            } else if read_only[v] && growing[v] {
                if !model.may_reach(state, &part.values[v]) {
                    return false;
                }
                reads += 1;
                if reads == LOOKAHEAD_READS {
                    return true;
                }
            }
        }
        e = lists.next[e as usize];
    }
    true
}

/// Memo entries plus states above which a search's tables are freed in the background.
const LARGE_SEARCH: usize = 100_000;

fn remove(next: &mut [u32], prev: &mut [u32], e: u32) {
    let (p, nx) = (prev[e as usize], next[e as usize]);
    next[p as usize] = nx;
    if nx != NIL {
        prev[nx as usize] = p;
    }
}

fn restore(next: &mut [u32], prev: &mut [u32], e: u32) {
    let (p, nx) = (prev[e as usize], next[e as usize]);
    next[p as usize] = e;
    if nx != NIL {
        prev[nx as usize] = e;
    }
}
