//! Compact transactions: keys and values interned to integers, micro-ops in flat arrays.
//!
//! Nothing here clones the history's JSON; reads are stored as ranges into one flat
//! element array, and every distinct (key, value) pair gets a dense "version" id so that
//! per-version facts (writer, position in the version order) live in plain vectors.

use crate::history::{Outcome, PairSlot};
use serde_json::Value;
use std::collections::HashMap;

pub(crate) use super::txn_build::build;
use std::hash::{BuildHasherDefault, Hasher};

/// A small, fast, non-cryptographic hasher for integer keys (FxHash's mixing step).
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        // Multiplication only mixes upward; rotate so the table index (low bits) comes
        // from well-mixed high bits.
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64)
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64)
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64)
    }
}

/// HashMap with [`FxHasher`].
pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Sentinel for "none" in u32 index arrays.
pub(crate) const NONE: u32 = u32::MAX;

/// A list read's start that means "a prefix of its key's shared list" (`Txns::shared`).
pub(crate) const SHARED: u32 = u32::MAX;

/// Micro-op kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MopKind {
    Read,
    Write,
    Append,
}

/// One micro-op. For writes and appends `a` is the version id written. For list reads
/// `a..a+b` is a range of `Txns::elems`, or `a == SHARED` and the read is the first `b`
/// elements of its key's shared list (b == NONE: the read returned nil). For register
/// reads `a` is the version read (NONE: nil).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mop {
    pub kind: MopKind,
    pub key: u32,
    pub a: u32,
    pub b: u32,
}

/// One transaction (a client op pair whose value is a list of micro-ops): 16 bytes, its
/// process and positions are read from the history's pair (`Txns::process` and friends).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Txn {
    pub outcome: Outcome,
    /// Index of its pair in the history's `pair_slots()`.
    pub pair: u32,
    pub mop_start: u32,
    pub mop_len: u32,
}

impl Txn {
    /// ok or info (or pending): the transaction may have taken effect.
    pub fn possible(&self) -> bool {
        self.outcome != Outcome::Fail
    }
    pub fn ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

/// An interned scalar: an integer, or the index of another JSON value's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scalar {
    Int(i64),
    Other(u32),
}

/// A column of scalars in 8 bytes each (an enum of them takes 16): the integers in
/// place, the few other scalars' text indices beside them.
#[derive(Default)]
pub(crate) struct ScalarColumn {
    /// Each scalar's integer (0 for another scalar).
    ints: Vec<i64>,
    /// The positions of the non-integer scalars, and their text indices.
    others: FxMap<u32, u32>,
}

impl ScalarColumn {
    pub fn push(&mut self, s: Scalar) {
        match s {
            Scalar::Int(i) => self.ints.push(i),
            Scalar::Other(o) => {
                self.others.insert(self.ints.len() as u32, o);
                self.ints.push(0);
            }
        }
    }

    pub fn get(&self, at: u32) -> Scalar {
        match self.others.get(&at) {
            Some(&o) => Scalar::Other(o),
            None => Scalar::Int(self.ints[at as usize]),
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.ints.capacity() * 8 + self.others.capacity() * 12
    }
}

/// All transactions of a history in compact form.
#[derive(Default)]
pub(crate) struct Txns<'h> {
    /// The history's pairs, which `Txn::pair` index.
    pub slots: &'h [PairSlot],
    pub txns: Vec<Txn>,
    pub mops: Vec<Mop>,
    pub elems: Vec<u32>,
    /// List-append: per key, the list most of its reads are prefixes of (all of them in
    /// a valid history), so those reads need no elements of their own.
    pub shared: Vec<Vec<u32>>,
    /// Key of each version.
    pub version_key: Vec<u32>,
    /// Value of each version.
    pub version_value: ScalarColumn,
    /// Each key's scalar, for display.
    pub key_scalar: Vec<Scalar>,
    /// Texts of non-integer scalars.
    pub other_text: Vec<String>,
    /// Ops whose value was not a list of well-formed micro-ops (pair indices).
    pub malformed: Vec<u32>,
    /// Micro-op names other than r / w / append, or mixed workloads.
    pub unexpected: Vec<u32>,
}

impl Txns<'_> {
    /// The client process that ran `t`.
    pub fn process(&self, t: &Txn) -> u64 {
        self.slots[t.pair as usize].process
    }

    /// Position of `t`'s invoke in the history.
    pub fn invoke_pos(&self, t: &Txn) -> usize {
        self.slots[t.pair as usize].invoke_pos
    }

    /// Position of `t`'s completion; `usize::MAX` if it never completed.
    pub fn complete_pos(&self, t: &Txn) -> usize {
        self.slots[t.pair as usize]
            .complete_pos
            .unwrap_or(usize::MAX)
    }

    pub fn mops_of(&self, t: &Txn) -> &[Mop] {
        &self.mops[t.mop_start as usize..(t.mop_start + t.mop_len) as usize]
    }

    /// Elements of a list read (`None` for nil, and for any other micro-op).
    pub fn read_list(&self, m: &Mop) -> Option<&[u32]> {
        if m.kind != MopKind::Read || m.b == NONE {
            None
        } else if m.a == SHARED {
            self.shared
                .get(m.key as usize)
                .and_then(|l| l.get(..m.b as usize))
        } else {
            self.elems
                .get(m.a as usize..(m.a as usize).saturating_add(m.b as usize))
        }
    }

    pub fn scalar_json(&self, s: Scalar) -> Value {
        match s {
            Scalar::Int(i) => Value::from(i),
            // Strings are kept unquoted: text that is not JSON was a string.
            Scalar::Other(o) => match self.other_text.get(o as usize) {
                Some(t) => serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.clone())),
                None => Value::Null,
            },
        }
    }

    pub fn scalar_text(&self, s: Scalar) -> String {
        match s {
            Scalar::Int(i) => i.to_string(),
            Scalar::Other(o) => self.other_text.get(o as usize).cloned().unwrap_or_default(),
        }
    }

    pub fn key_text(&self, k: u32) -> String {
        self.scalar_text(self.key_scalar[k as usize])
    }

    pub fn version_text(&self, v: u32) -> String {
        self.scalar_text(self.version_value.get(v))
    }

    /// Renders a list read like Elle: `[1 2 3]`.
    pub fn list_text(&self, elems: &[u32]) -> String {
        let parts: Vec<String> = elems.iter().map(|e| self.version_text(*e)).collect();
        format!("[{}]", parts.join(" "))
    }

    pub fn key_scalar_json(&self, k: u32) -> Value {
        self.scalar_json(self.key_scalar[k as usize])
    }

    pub fn version_json(&self, v: u32) -> Value {
        self.scalar_json(self.version_value.get(v))
    }

    pub fn list_json(&self, elems: &[u32]) -> Value {
        Value::Array(elems.iter().map(|e| self.version_json(*e)).collect())
    }

    pub fn num_versions(&self) -> usize {
        self.version_key.len()
    }

    pub fn num_keys(&self) -> usize {
        self.key_scalar.len()
    }

    /// Approximate bytes held by these tables (for the memory bound).
    pub fn heap_bytes(&self) -> u64 {
        let texts: usize = self.other_text.iter().map(|t| t.capacity() + 24).sum();
        let shared: usize = self.shared.iter().map(|l| l.capacity() * 4 + 24).sum();
        (self.txns.capacity() * std::mem::size_of::<Txn>()
            + self.mops.capacity() * std::mem::size_of::<Mop>()
            + self.elems.capacity() * 4
            + self.version_key.capacity() * 4
            + self.version_value.heap_bytes()
            + self.key_scalar.capacity() * std::mem::size_of::<Scalar>()
            + texts
            + shared
            + (self.malformed.capacity() + self.unexpected.capacity()) * 4) as u64
    }
}
