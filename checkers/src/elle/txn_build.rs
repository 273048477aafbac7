//! Building compact transactions from a history, straight from each op's value: parsed
//! JSON when the history holds it, else the value's text (read with a small allocation-free
//! parser, falling back to serde_json for anything unusual). No op value is cloned.

use super::txn::{FxMap, Mop, MopKind, Scalar, Txn, Txns, NONE, SHARED};
use crate::history::simple_json::{self, Node};
use crate::history::{History, PairSlot, ValueRef};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;

/// A key or value before interning: an integer that fits in an i64, or any other JSON
/// scalar as text (strings unquoted, everything else as JSON).
enum ScalarIn<'a> {
    Int(i64),
    Text(Cow<'a, str>),
}

impl<'a> ScalarIn<'a> {
    fn of_value(v: &'a Value) -> ScalarIn<'a> {
        if let Some(i) = v.as_i64() {
            return ScalarIn::Int(i);
        }
        ScalarIn::Text(match v {
            Value::String(s) => Cow::Borrowed(s),
            other => Cow::Owned(other.to_string()),
        })
    }

    /// `None` for a list (its text is only known to serde_json).
    fn of_node(n: &Node<'a>) -> Option<ScalarIn<'a>> {
        match *n {
            Node::Int(i) => Some(ScalarIn::Int(i)),
            Node::Str(s) => Some(ScalarIn::Text(Cow::Borrowed(s))),
            Node::Null => Some(ScalarIn::Text(Cow::Borrowed("null"))),
            Node::List { .. } => None,
        }
    }
}

/// Why a transaction's value is not usable.
enum Bad {
    /// Not a list of `[f key value]` micro-ops.
    Malformed,
    /// A micro-op name other than r / w / append.
    Unexpected,
}

/// Integer keys in 0..this are found by indexing `Builder::small_keys` instead of hashing
/// (histories mostly use small integer keys: a few thousand, or millions when keys
/// rotate, as Elle's generator's do); the table grows to the largest key seen, at most
/// 16 MiB.
const SMALL_KEYS: i64 = 1 << 22;

struct Builder<'h> {
    out: Txns<'h>,
    /// Key ids of integer keys in 0..SMALL_KEYS, indexed by the key (NONE: unseen).
    small_keys: Vec<u32>,
    /// Key ids of every other key.
    keys: FxMap<Scalar, u32>,
    /// Per key, version ids indexed directly by small integer values (NONE: unseen).
    dense: Vec<Vec<u32>>,
    /// Versions of values in 0..2^32 beyond their key's dense table: (key << 32 | value).
    small_versions: FxMap<u64, u32>,
    /// Per key: whether any of its versions went to `small_versions`.
    sparse_keys: Vec<bool>,
    versions: FxMap<(u32, Scalar), u32>,
    others: HashMap<String, u32>,
    list_reads: bool,
}

impl Builder<'_> {
    fn scalar(&mut self, s: ScalarIn<'_>) -> Scalar {
        let text = match s {
            ScalarIn::Int(i) => return Scalar::Int(i),
            ScalarIn::Text(t) => t,
        };
        if let Some(&id) = self.others.get(text.as_ref()) {
            return Scalar::Other(id);
        }
        let id = self.out.other_text.len() as u32;
        self.others.insert(text.to_string(), id);
        self.out.other_text.push(text.into_owned());
        Scalar::Other(id)
    }

    fn key(&mut self, s: ScalarIn<'_>) -> u32 {
        let next = self.out.key_scalar.len() as u32;
        let (key, ks) = match s {
            ScalarIn::Int(i) if (0..SMALL_KEYS).contains(&i) => {
                let at = i as usize;
                if at >= self.small_keys.len() {
                    self.small_keys.resize(at + 1, NONE);
                }
                if self.small_keys[at] == NONE {
                    self.small_keys[at] = next;
                }
                (self.small_keys[at], Scalar::Int(i))
            }
            s => {
                let ks = self.scalar(s);
                (*self.keys.entry(ks).or_insert(next), ks)
            }
        };
        if key == next {
            self.out.key_scalar.push(ks);
            if self.list_reads {
                self.out.shared.push(Vec::new());
            }
            self.dense.push(Vec::new());
            self.sparse_keys.push(false);
        }
        key
    }

    fn new_version(&mut self, key: u32, value: Scalar) {
        self.out.version_key.push(key);
        self.out.version_value.push(value);
    }

    fn version(&mut self, key: u32, v: ScalarIn<'_>) -> u32 {
        let next = self.out.version_key.len() as u32;
        if let ScalarIn::Int(i) = v {
            if let Ok(small) = u32::try_from(i) {
                let packed = ((key as u64) << 32) | small as u64;
                // Dense per-key table while values stay small relative to its size, so
                // memory stays proportional to the versions seen. Values too far ahead
                // go to `small_versions`; only keys that have some there need a look.
                let table = &mut self.dense[key as usize];
                let s = small as usize;
                if s < table.len() || s < 2 * table.len() + 64 {
                    if s >= table.len() {
                        table.resize(s + 1, NONE);
                    }
                    if table[s] == NONE {
                        let known = if self.sparse_keys[key as usize] {
                            self.small_versions.get(&packed).copied()
                        } else {
                            None
                        };
                        let id = known.unwrap_or(next);
                        table[s] = id;
                        if id == next {
                            self.out.version_key.push(key);
                            self.out.version_value.push(Scalar::Int(i));
                        }
                        return id;
                    }
                    return table[s];
                }
                self.sparse_keys[key as usize] = true;
                let id = *self.small_versions.entry(packed).or_insert(next);
                if id == next {
                    self.new_version(key, Scalar::Int(i));
                }
                return id;
            }
        }
        let s = self.scalar(v);
        let id = *self.versions.entry((key, s)).or_insert(next);
        if id == next {
            self.new_version(key, s);
        }
        id
    }

    /// Adds the micro-ops of one parsed transaction value.
    fn value_mops(&mut self, mops: &[Value]) -> Result<(), Bad> {
        for m in mops {
            let Some(parts) = m.as_array().filter(|a| a.len() == 3) else {
                return Err(Bad::Malformed);
            };
            let kind = mop_kind(parts[0].as_str()).ok_or(Bad::Unexpected)?;
            let key = self.key(ScalarIn::of_value(&parts[1]));
            let mop = match (kind, &parts[2]) {
                (MopKind::Write | MopKind::Append, v) => {
                    let a = self.version(key, ScalarIn::of_value(v));
                    Mop { kind, key, a, b: 0 }
                }
                (MopKind::Read, Value::Null) if self.list_reads => nil_list_read(key),
                (MopKind::Read, Value::Array(items)) if self.list_reads => {
                    let start = self.out.elems.len();
                    for it in items {
                        let e = self.version(key, ScalarIn::of_value(it));
                        self.out.elems.push(e);
                    }
                    self.list_read(key, start)
                }
                (MopKind::Read, _) if self.list_reads => return Err(Bad::Malformed),
                (MopKind::Read, Value::Null) => Mop {
                    kind,
                    key,
                    a: NONE,
                    b: 0,
                },
                (MopKind::Read, v) => {
                    let a = self.version(key, ScalarIn::of_value(v));
                    Mop { kind, key, a, b: 0 }
                }
            };
            self.out.mops.push(mop);
        }
        Ok(())
    }

    /// As [`Builder::value_mops`], from nodes of `simple_json` (`root` is a list). `None`
    /// when a key or value is a list where a scalar belongs: only serde_json knows its
    /// text, so the caller retries with the parsed value.
    fn node_mops(&mut self, nodes: &[Node<'_>], root: usize) -> Option<Result<(), Bad>> {
        let end = simple_json::skip(nodes, root);
        let mut i = root + 1;
        while i < end {
            let next = simple_json::skip(nodes, i);
            if !matches!(nodes[i], Node::List { len: 3, .. }) {
                return Some(Err(Bad::Malformed));
            }
            let kind = match nodes[i + 1] {
                Node::Str(s) => mop_kind(Some(s)),
                _ => None,
            };
            let Some(kind) = kind else {
                return Some(Err(Bad::Unexpected));
            };
            let key = self.key(ScalarIn::of_node(&nodes[i + 2])?);
            let v = simple_json::skip(nodes, i + 2);
            let mop = match (kind, nodes[v]) {
                (MopKind::Write | MopKind::Append, n) => {
                    let a = self.version(key, ScalarIn::of_node(&n)?);
                    Mop { kind, key, a, b: 0 }
                }
                (MopKind::Read, Node::Null) if self.list_reads => nil_list_read(key),
                (MopKind::Read, Node::List { len, next }) if self.list_reads => {
                    let start = self.out.elems.len();
                    for it in &nodes[v + 1..next as usize] {
                        let e = self.version(key, ScalarIn::of_node(it)?);
                        self.out.elems.push(e);
                    }
                    debug_assert_eq!(self.out.elems.len() - start, len as usize);
                    self.list_read(key, start)
                }
                (MopKind::Read, _) if self.list_reads => return Some(Err(Bad::Malformed)),
                (MopKind::Read, Node::Null) => Mop {
                    kind,
                    key,
                    a: NONE,
                    b: 0,
                },
                (MopKind::Read, n) => {
                    let a = self.version(key, ScalarIn::of_node(&n)?);
                    Mop { kind, key, a, b: 0 }
                }
            };
            self.out.mops.push(mop);
            i = next;
        }
        Some(Ok(()))
    }
}

fn nil_list_read(key: u32) -> Mop {
    Mop {
        kind: MopKind::Read,
        key,
        a: 0,
        b: NONE,
    }
}

impl Builder<'_> {
    /// The list read whose elements were just pushed to `elems` from `start`. Reads of a
    /// key mostly see prefixes of one list: a read that is a prefix of its key's shared
    /// list (or extends it, which then grows) is kept as a length into it, its elements
    /// dropped from `elems`; any other read keeps its own elements.
    fn list_read(&mut self, key: u32, start: usize) -> Mop {
        let read = &self.out.elems[start..];
        let len = read.len();
        let Some(shared) = self.out.shared.get_mut(key as usize) else {
            return list_read(key, start as u32, len as u32);
        };
        let common = len.min(shared.len());
        if read[..common] != shared[..common] {
            return list_read(key, start as u32, len as u32);
        }
        if len > shared.len() {
            shared.extend_from_slice(&read[common..]);
        }
        self.out.elems.truncate(start);
        list_read(key, SHARED, len as u32)
    }
}

fn list_read(key: u32, start: u32, len: u32) -> Mop {
    Mop {
        kind: MopKind::Read,
        key,
        a: start,
        b: len,
    }
}

/// Micro-op function names, tolerant of EDN-style keywords (`:r`).
fn mop_kind(f: Option<&str>) -> Option<MopKind> {
    match f?.trim_start_matches(':') {
        "r" => Some(MopKind::Read),
        "w" => Some(MopKind::Write),
        "append" => Some(MopKind::Append),
        _ => None,
    }
}

/// Transactions parsed per block: big enough to amortize the hand-off, small enough that
/// the parsed nodes stay in cache-friendly, bounded buffers.
const BLOCK: usize = 8192;

/// Transactions per piece of a block, the unit of parallel parsing: while one thread
/// interns a block, the next one is parsed in pieces, and the interning thread takes the
/// pieces left when it is done (parsing costs more than interning).
const PIECE: usize = 512;

/// The simple-subset parse of one piece of a block's transaction values.
#[derive(Default)]
struct ParsedPiece<'h> {
    nodes: Vec<Node<'h>>,
    /// Per slot of the piece, its root in `nodes`; NONE when not parsed here.
    roots: Vec<u32>,
}

/// Parses the text values of `slots` (those outside the subset are left to the builder).
fn parse_piece<'h>(history: &'h History, slots: &[PairSlot], out: &mut ParsedPiece<'h>) {
    out.nodes.clear();
    out.roots.clear();
    for slot in slots {
        let root = out.nodes.len();
        let parsed = match history.value_ref(slot.value_pos()) {
            Some(ValueRef::Text(text)) if text.starts_with('[') => {
                simple_json::parse_append(text, &mut out.nodes)
            }
            _ => false,
        };
        if parsed {
            plain_names_in_place(&mut out.nodes, root);
        }
        out.roots.push(if parsed { root as u32 } else { NONE });
    }
}

/// Points the micro-op names `r`, `w` and `append` of the value parsed at `root` of
/// `nodes` at constant strings of the same text, while the parsing thread has the value's
/// text at hand: the interning thread then reads each name without touching the history's
/// text (a mapped file's pages, cold in its core's cache).
fn plain_names_in_place(nodes: &mut [Node<'_>], root: usize) {
    let Some(&Node::List { next, .. }) = nodes.get(root) else {
        return;
    };
    let mut i = root + 1;
    while i < next as usize {
        if let (Node::List { len: 1.., .. }, Some(Node::Str(name))) =
            (nodes[i], nodes.get_mut(i + 1))
        {
            match *name {
                "r" => *name = "r",
                "w" => *name = "w",
                "append" => *name = "append",
                _ => {}
            }
        }
        i = simple_json::skip(nodes, i);
    }
}

/// Parses a block's text values into `pieces` (one per [`PIECE`] slots), in parallel.
fn parse_block<'h>(
    history: &'h History,
    slots: &[PairSlot],
    mut pieces: Vec<ParsedPiece<'h>>,
) -> Vec<ParsedPiece<'h>> {
    use rayon::prelude::*;
    pieces.resize_with(slots.len().div_ceil(PIECE), ParsedPiece::default);
    pieces
        .par_iter_mut()
        .zip(slots.par_chunks(PIECE))
        .with_max_len(1)
        .for_each(|(piece, slots)| parse_piece(history, slots, piece));
    pieces
}

/// Builds compact transactions from every client op whose value is a list of micro-ops.
/// `list_reads`: reads return lists (list-append) rather than single values.
///
/// Values are parsed a block ahead (in pieces, on both threads) while this thread
/// interns keys and versions (which must happen in history order).
pub(crate) fn build(history: &History, list_reads: bool) -> Txns<'_> {
    let slots = history.pair_slots();
    let mut b = Builder {
        out: Txns {
            slots,
            ..Txns::default()
        },
        small_keys: Vec::new(),
        keys: FxMap::default(),
        dense: Vec::new(),
        sparse_keys: Vec::new(),
        small_versions: FxMap::default(),
        versions: FxMap::default(),
        others: HashMap::new(),
        list_reads,
    };
    b.out.txns.reserve(slots.len());
    let blocks: Vec<&[PairSlot]> = slots.chunks(BLOCK).collect();
    let mut current = match blocks.first() {
        Some(first) => parse_block(history, first, Vec::new()),
        None => Vec::new(),
    };
    let mut spare = Vec::new();
    for (k, block) in blocks.iter().enumerate() {
        let (next, ()) = rayon::join(
            || {
                blocks
                    .get(k + 1)
                    .map(|n| parse_block(history, n, std::mem::take(&mut spare)))
            },
            || {
                for (j, slot) in block.iter().enumerate() {
                    let pi = (k * BLOCK + j) as u32;
                    let piece = &current[j / PIECE];
                    b.add(history, pi, slot, &piece.nodes, piece.roots[j % PIECE]);
                }
            },
        );
        match next {
            Some(n) => spare = std::mem::replace(&mut current, n),
            None => break,
        }
        // Later blocks' values all come after their first invoke: hand back the text
        // before it (a mapped file's pages).
        if let Some(first) = blocks.get(k + 1).and_then(|n| n.first()) {
            history.release_before(first.invoke_pos);
        }
    }
    history.release_before(history.len());
    b.out
}

impl Builder<'_> {
    /// Adds pair `pi`'s transaction; `root` is its value's parse in `nodes` (or NONE).
    fn add(&mut self, history: &History, pi: u32, slot: &PairSlot, nodes: &[Node<'_>], root: u32) {
        let (mop_start, elem_start) = (self.out.mops.len(), self.out.elems.len());
        let fast = (root != NONE)
            .then(|| self.node_mops(nodes, root as usize))
            .flatten();
        let result = fast.or_else(|| {
            // What the fast path added before it gave up is read again below.
            self.out.mops.truncate(mop_start);
            self.out.elems.truncate(elem_start);
            match history.value_ref(slot.value_pos()) {
                Some(ValueRef::Json(Value::Array(mops))) => Some(self.value_mops(mops)),
                Some(ValueRef::Text(text)) if text.starts_with('[') => {
                    match serde_json::from_str::<Value>(text) {
                        Ok(Value::Array(mops)) => Some(self.value_mops(&mops)),
                        _ => None,
                    }
                }
                _ => None,
            }
        });
        let outcome = match result {
            Some(r) => r,
            None => {
                if history.op_f(slot.invoke_pos) == Some("txn") {
                    self.out.malformed.push(pi);
                }
                return;
            }
        };
        if let Err(bad) = outcome {
            self.out.mops.truncate(mop_start);
            match bad {
                Bad::Malformed => self.out.malformed.push(pi),
                Bad::Unexpected => self.out.unexpected.push(pi),
            }
            return;
        }
        self.out.txns.push(Txn {
            outcome: slot.outcome,
            pair: pi,
            mop_start: mop_start as u32,
            mop_len: (self.out.mops.len() - mop_start) as u32,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elle::bench::{generate, GenConfig};
    use crate::history::read::read_str;
    use crate::history::write::write_json_lines;
    use crate::history::OpType;
    use serde_json::json;
    use std::path::Path;

    /// Everything the builder produced, as text to compare.
    fn summary(t: &Txns<'_>) -> String {
        let values: Vec<Scalar> = (0..t.version_key.len() as u32)
            .map(|v| t.version_value.get(v))
            .collect();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            t.txns,
            t.mops,
            t.elems,
            t.shared,
            t.version_key,
            values,
            t.key_scalar,
            t.other_text,
            t.malformed,
            t.unexpected
        )
    }

    /// Values in every shape the builder treats apart: the parser's subset, what only
    /// serde_json reads, malformed micro-ops and unexpected names.
    fn odd_value(i: usize) -> serde_json::Value {
        match i % 9 {
            0 => json!([["append", 1]]),
            1 => json!([["x", 1, 2]]),
            2 => json!([["r", 1, [1, [2]]]]),
            3 => json!([["append", 1.5, 2]]),
            4 => json!("txn"),
            5 => json!([
                ["r", "k\"q", ["a", null, -4]],
                ["append", "k\"q", 12_345_678_901_234_567_890u64]
            ]),
            6 => json!([["w", 3, 4], ["r", 3, 4]]),
            7 => json!([["r", 9, null], ["append", 9, 4_294_967_296u64]]),
            _ => json!([]),
        }
    }

    /// The text path (simple_json's parse, a block ahead, in pieces on both threads)
    /// builds exactly what the parsed-value path builds, across many blocks and pieces.
    #[test]
    fn text_values_in_pieces_build_what_parsed_values_build() {
        for (seed, odd_every) in [(1u64, 0usize), (2, 97), (3, 13)] {
            let mut cfg = GenConfig::new(seed, BLOCK * 2 + 3 * PIECE + 17, 40, 12);
            cfg.fail_ratio = 0.05;
            cfg.info_ratio = 0.05;
            let mut ops = generate(&cfg).into_ops();
            let mut oks = 0;
            for op in ops.iter_mut().filter(|o| o.op_type == OpType::Ok) {
                oks += 1;
                if odd_every > 0 && oks % odd_every == 0 {
                    op.value = odd_value(oks / odd_every);
                }
            }
            let eager = History::new(ops).unwrap();
            let mut text = Vec::new();
            write_json_lines(&mut text, eager.ops()).unwrap();
            let lazy = read_str(
                &String::from_utf8(text).unwrap(),
                Path::new("t.jsonl"),
                None,
            )
            .unwrap();
            assert!(matches!(lazy.value_ref(0), Some(ValueRef::Text(_))));
            for list_reads in [true, false] {
                let from_text = build(&lazy, list_reads);
                let from_values = build(&eager, list_reads);
                assert!(from_text.txns.len() > BLOCK * 2, "seed {seed}");
                if list_reads {
                    assert_eq!(
                        from_text.malformed.is_empty() && from_text.unexpected.is_empty(),
                        odd_every == 0,
                        "seed {seed}"
                    );
                }
                let (a, b) = (summary(&from_text), summary(&from_values));
                for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
                    if x != y {
                        let at = x.bytes().zip(y.bytes()).take_while(|(p, q)| p == q).count();
                        let lo = at.saturating_sub(200);
                        panic!(
                            "seed {seed}, list_reads {list_reads}: field {i} differs at {at}:\n{}\n{}",
                            &x[lo..(at + 200).min(x.len())],
                            &y[lo..(at + 200).min(y.len())]
                        );
                    }
                }
                assert_eq!(a, b, "seed {seed}");
            }
        }
    }
}
