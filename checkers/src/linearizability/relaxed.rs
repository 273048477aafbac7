//! Checking a relaxed search's result (see `search.rs`).

use super::fxhash::FxHashMap;
use super::search::{Frame, PartOp};

/// Whether a relaxed linearization (optional ops reusable) can be made real by giving
/// each use of an optional class its own member of that class.
///
/// A use may take any member invoked before the first completion of a required op still
/// unplaced at that step (the same just-in-time rule the search applies). Members only
/// have a lower bound (invoke) and uses only an upper bound, so serving uses in order of
/// their bound with the earliest-invoked free member finds a matching if one exists.
pub(crate) fn relaxed_is_real(ops: &[PartOp], stack: &[Frame]) -> bool {
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
