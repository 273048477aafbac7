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
//! - focus on the next deadline: let R be the unplaced required op that completes first.
//!   If every candidate has a footprint (see [`Model::footprint`]), only candidates with
//!   R's footprint are tried. Sound and complete: take any valid continuation and move
//!   the ops with other footprints that it places before R to just after R. They commute
//!   with R's ops, and none of them must precede one of R's ops in real time: such an op
//!   Y has Y.end >= R.end (R completes first), while an op Z placed before R has
//!   Z.invoke < R.end (else R would have to precede Z). This turns the product of the
//!   keys' search spaces of an unsplit keyed history into (roughly) their sum;
//! - a relaxed pass (optional ops reusable, not recorded in the memo's set) for models with
//!   small state spaces: every real linearization is a relaxed one, so a relaxed failure
//!   proves the part invalid at polynomial cost, where the exact search would have to try
//!   every subset of indeterminate ops.

use super::fxhash::{FxHashMap, FxHashSet};
use super::model::Model;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

const NIL: u32 = u32::MAX;
const NO_STATE: u32 = u32::MAX;

/// One op of a part, ready for the search.
#[derive(Debug, Clone)]
pub(crate) struct PartOp {
    /// Index into `History::pairs()`.
    pub pair: usize,
    /// Interned model-op id (index into `Part::values`).
    pub op: u32,
    /// Surely took effect (ok, or an observation); otherwise optional.
    pub required: bool,
    /// Invoke position in the history.
    pub invoke: usize,
    /// Completion position; `usize::MAX` for optional ops.
    pub end: usize,
}

/// One independently checkable part of a history (one key, or everything).
#[derive(Debug, Clone)]
pub(crate) struct Part<O> {
    /// The key, or `None` for an unkeyed/unsplit part.
    pub key: Option<String>,
    /// Ops in invoke order.
    pub ops: Vec<PartOp>,
    /// Distinct model ops.
    pub values: Vec<O>,
}

/// Shared limits and the cancellation flag of one check.
pub(crate) struct Budget {
    pub deadline: Option<Instant>,
    pub max_memory: Option<u64>,
    pub used_memory: AtomicU64,
    pub cancel: AtomicBool,
}

/// Why a search stopped without a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Time,
    Memory,
    Cancelled,
    /// The search's step allowance for this round ran out; the driver retries the part
    /// with a larger one, so no part can starve the others.
    Steps,
}

/// How far a search got.
#[derive(Debug, Clone)]
pub(crate) struct Progress<S> {
    /// Part-op indices of the longest linearizable prefix found, in order.
    pub best_prefix: Vec<u32>,
    /// Required ops in that prefix, and in the part.
    pub best_required: usize,
    pub total_required: usize,
    /// The model state after the best prefix.
    pub best_state: S,
    /// Memo entries, and the estimated bytes of memo, interned states and transitions.
    pub memo_entries: usize,
    pub memo_bytes: u64,
}

/// What one search concluded.
#[derive(Debug)]
pub(crate) enum Outcome<S> {
    /// A linearization exists. `exact` is false when a relaxed search found one that
    /// reuses an optional op, which proves nothing.
    Linearizable { exact: bool },
    /// No linearization exists.
    NotLinearizable(Progress<S>),
    /// A bound or cancellation stopped the search.
    Stopped(Stop, Progress<S>),
}

struct Frame {
    entry: u32,
    focus: u64,
    phase: u8,
    prev_state: u32,
    op: u32,
    lifted: bool,
}

/// Per-entry memo overhead beyond the key words: box header, table slot and control byte,
/// allocator rounding.
const MEMO_ENTRY_OVERHEAD: u64 = 48;

/// A cached transition: key, target and control byte, with the table's slack.
const TRANS_ENTRY_BYTES: u64 = 24;

/// Per-state overhead beyond the state itself: the index's slot and id.
const STATE_ENTRY_OVERHEAD: u64 = 16;

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

    // The entry list; entry 0 is the head sentinel.
    let mut events: Vec<(usize, u32, bool)> = Vec::with_capacity(2 * n);
    for (i, o) in ops.iter().enumerate() {
        events.push((o.invoke, i as u32, true));
        if o.required {
            events.push((o.end, i as u32, false));
        }
    }
    events.sort_unstable_by_key(|e| (e.0, !e.2));
    let m = events.len() + 1;
    let mut next = vec![NIL; m];
    let mut prev = vec![NIL; m];
    let mut op_of = vec![0u32; m];
    let mut is_call = vec![false; m];
    let mut call_entry = vec![NIL; n];
    let mut ret_entry = vec![NIL; n];
    for (i, &(_, o, call)) in events.iter().enumerate() {
        let id = i + 1;
        prev[id] = i as u32;
        next[i] = id as u32;
        op_of[id] = o;
        is_call[id] = call;
        if call {
            call_entry[o as usize] = id as u32;
        } else {
            ret_entry[o as usize] = id as u32;
        }
    }

    let mut states: Vec<M::State> = vec![model.init()];
    let mut state_ids: FxHashMap<M::State, u32> = FxHashMap::default();
    state_ids.insert(model.init(), 0);
    let mut trans: FxHashMap<u64, u32> = FxHashMap::default();

    let words = n / 64 + 1;
    // `bits` marks placed required ops. Optional ops' bits stay set, so the memo key's
    // trimming of finished words still works; the exact search tracks them in `used_bits`.
    let mut bits = vec![0u64; words];
    let mut opt_index = vec![0u32; n];
    let mut n_optional = 0usize;
    for (i, o) in ops.iter().enumerate() {
        if !o.required {
            bits[i / 64] |= 1 << (i % 64);
            opt_index[i] = n_optional as u32;
            n_optional += 1;
        }
    }
    let opt_words = n_optional / 64 + 1;
    let mut used_bits = vec![0u64; opt_words];
    // Dominance memo of the exact search with optional ops: (placed required ops, state)
    // -> the sets of used optional ops seen with it. A configuration that has used a
    // superset of a seen set's optional ops can do no more than the seen one (same window,
    // same state, fewer ops left), so it is cut. Equal sets are the plain memo's rule.
    let dominance = mark_optional && n_optional > 0;
    let mut dmemo: FxHashMap<Box<[u64]>, Vec<u64>> = FxHashMap::default();
    let mut memo_entries = 0usize;
    let mut memo: FxHashSet<Box<[u64]>> = FxHashSet::default();
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
    let footprint: Vec<u64> = ops
        .iter()
        .map(|o| model.footprint(&part.values[o.op as usize]).unwrap_or(ANY))
        .collect();
    let confined = footprint.iter().all(|&f| f != ANY);
    // The footprint of the first return entry in the list, or ANY.
    let focus_of = |next: &[u32]| -> u64 {
        if !confined {
            return ANY;
        }
        let mut e = next[0];
        while e != NIL {
            if !is_call[e as usize] {
                return footprint[op_of[e as usize] as usize];
            }
            e = next[e as usize];
        }
        ANY
    };
    let mut entry = next[0];
    let mut focus = focus_of(&next);
    let mut phase: u8 = 0;
    let mut iterations: u64 = 0;

    let progress = |best: &[u32], best_required, best_state: &M::State, memo_len, bytes| Progress {
        best_prefix: best.to_vec(),
        best_required,
        total_required,
        best_state: best_state.clone(),
        memo_entries: memo_len,
        memo_bytes: bytes,
    };

    let stop = loop {
        if remaining == 0 {
            break None;
        }
        iterations += 1;
        if iterations & 1023 == 0 {
            // The tables' own slots, which grow in jumps (a resize doubles them).
            let slots = (memo.capacity() + dmemo.capacity()) * 17
                + state_ids.capacity() * (std::mem::size_of::<M::State>() + 5)
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
        if entry != NIL && is_call[entry as usize] {
            let o = op_of[entry as usize];
            let po = &ops[o as usize];
            let eligible = (focus == ANY || footprint[o as usize] == focus)
                && if po.required {
                    phase == 0
                } else {
                    phase == 1 && ordinal[o as usize] == used[po.op as usize]
                };
            if eligible {
                let tkey = ((po.op as u64) << 32) | state as u64;
                let ns = match trans.get(&tkey) {
                    Some(&s) => s,
                    None => {
                        let s = match model
                            .step(&states[state as usize], &part.values[po.op as usize])
                        {
                            None => NO_STATE,
                            Some(next_state) => match state_ids.get(&next_state) {
                                Some(&id) => id,
                                None => {
                                    // Held twice (the list and the index), plus a slot.
                                    memo_bytes += 2 * model.state_bytes(&next_state) as u64
                                        + STATE_ENTRY_OVERHEAD;
                                    let id = states.len() as u32;
                                    states.push(next_state.clone());
                                    state_ids.insert(next_state, id);
                                    id
                                }
                            },
                        };
                        trans.insert(tkey, s);
                        memo_bytes += TRANS_ENTRY_BYTES;
                        s
                    }
                };
                if ns != NO_STATE {
                    let lift = po.required || !relaxed;
                    let oi = opt_index[o as usize] as usize;
                    if po.required {
                        bits[o as usize / 64] |= 1 << (o % 64);
                    } else if mark_optional {
                        used_bits[oi / 64] |= 1 << (oi % 64);
                    }
                    let key = memo_key(&bits, ns);
                    let key_bytes = key.len() as u64 * 8 + MEMO_ENTRY_OVERHEAD;
                    let fresh = if dominance {
                        let seen = dmemo.entry(key).or_default();
                        let dominated = seen.chunks(opt_words).any(|u| {
                            u.iter()
                                .zip(&used_bits)
                                .all(|(&seen_w, &w)| seen_w & !w == 0)
                        });
                        if !dominated {
                            if seen.is_empty() {
                                memo_bytes += key_bytes;
                            }
                            seen.extend_from_slice(&used_bits);
                            memo_bytes += opt_words as u64 * 8;
                        }
                        !dominated
                    } else if memo.insert(key) {
                        memo_bytes += key_bytes;
                        true
                    } else {
                        false
                    };
                    if fresh {
                        memo_entries += 1;
                        stack.push(Frame {
                            entry,
                            focus,
                            phase,
                            prev_state: state,
                            op: o,
                            lifted: lift,
                        });
                        state = ns;
                        if lift {
                            remove(&mut next, &mut prev, call_entry[o as usize]);
                            if po.required {
                                remove(&mut next, &mut prev, ret_entry[o as usize]);
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
                        entry = next[0];
                        focus = focus_of(&next);
                        phase = 0;
                        continue;
                    }
                    if po.required {
                        bits[o as usize / 64] &= !(1 << (o % 64));
                    } else if mark_optional {
                        used_bits[oi / 64] &= !(1 << (oi % 64));
                    }
                }
            }
            entry = next[entry as usize];
            continue;
        }
        // The end of the window: the return of an op not yet linearized.
        if phase == 0 && optional_live > 0 {
            phase = 1;
            entry = next[0];
            continue;
        }
        let Some(f) = stack.pop() else {
            break None;
        };
        low_water = low_water.min(stack.len());
        let po = &ops[f.op as usize];
        state = f.prev_state;
        if f.lifted {
            if po.required {
                bits[f.op as usize / 64] &= !(1 << (f.op % 64));
            } else if mark_optional {
                let oi = opt_index[f.op as usize] as usize;
                used_bits[oi / 64] &= !(1 << (oi % 64));
            }
            if po.required {
                restore(&mut next, &mut prev, ret_entry[f.op as usize]);
                remaining += 1;
            } else {
                used[po.op as usize] -= 1;
                optional_live += 1;
            }
            restore(&mut next, &mut prev, call_entry[f.op as usize]);
        }
        entry = next[f.entry as usize];
        phase = f.phase;
        focus = f.focus;
    };
    budget
        .used_memory
        .fetch_sub(reported_bytes, Ordering::Relaxed);

    let prog = |best: &[u32]| {
        progress(
            best,
            best_required,
            &states[best_state as usize],
            memo_entries,
            memo_bytes.max(reported_bytes),
        )
    };
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
        let garbage = (memo, dmemo, states, state_ids, trans);
        // If no thread can be had, the failed spawn frees them here: late but correct.
        let _ = std::thread::Builder::new().spawn(move || drop(garbage));
    }
    outcome
}

/// Memo entries plus states above which a search's tables are freed in the background.
const LARGE_SEARCH: usize = 100_000;

/// Whether a relaxed linearization (optional ops reusable) can be made real by giving
/// each use of an optional class its own member of that class.
///
/// A use may take any member invoked before the first completion of a required op still
/// unplaced at that step (the same just-in-time rule the search applies). Members only
/// have a lower bound (invoke) and uses only an upper bound, so serving uses in order of
/// their bound with the earliest-invoked free member finds a matching if one exists.
fn relaxed_is_real(ops: &[PartOp], stack: &[Frame]) -> bool {
    let mut ends: Vec<(usize, u32)> = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.required)
        .map(|(i, o)| (o.end, i as u32))
        .collect();
    ends.sort_unstable();
    let mut placed = vec![false; ops.len()];
    let mut cursor = 0;
    // (class, bound) for every use of an optional op.
    let mut uses: Vec<(u32, usize)> = Vec::new();
    for f in stack {
        let o = &ops[f.op as usize];
        if o.required {
            placed[f.op as usize] = true;
        } else {
            while cursor < ends.len() && placed[ends[cursor].1 as usize] {
                cursor += 1;
            }
            let bound = ends.get(cursor).map_or(usize::MAX, |e| e.0);
            uses.push((o.op, bound));
        }
    }
    if uses.is_empty() {
        return true;
    }
    uses.sort_unstable();
    let mut members: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    for o in ops.iter().filter(|o| !o.required) {
        members.entry(o.op).or_default().push(o.invoke);
    }
    let mut taken: FxHashMap<u32, usize> = FxHashMap::default();
    // Within a class, uses are sorted by bound and members by invoke (part ops are in
    // invoke order), so the greedy match is a single merge.
    uses.iter().all(|&(class, bound)| {
        let t = taken.entry(class).or_insert(0);
        let ok = members
            .get(&class)
            .and_then(|m| m.get(*t))
            .is_some_and(|&inv| inv < bound);
        *t += 1;
        ok
    })
}

/// The memo key: the state id and the linearized set, trimmed of leading all-ones words
/// (ops long done) and trailing zero words (ops not reached).
fn memo_key(bits: &[u64], state: u32) -> Box<[u64]> {
    let lo = bits
        .iter()
        .position(|&w| w != u64::MAX)
        .unwrap_or(bits.len());
    let hi = bits
        .iter()
        .rposition(|&w| w != 0)
        .map_or(0, |i| i + 1)
        .max(lo);
    let mut key = Vec::with_capacity(1 + hi - lo);
    key.push(((lo as u64) << 32) | state as u64);
    key.extend_from_slice(&bits[lo..hi]);
    key.into_boxed_slice()
}

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
