//! Compact transactions: keys and values interned to integers, micro-ops in flat arrays.
//!
//! Nothing here clones the history's JSON; reads are stored as ranges into one flat
//! element array, and every distinct (key, value) pair gets a dense "version" id so that
//! per-version facts (writer, position in the version order) live in plain vectors.

use crate::history::{History, Outcome};
use serde_json::Value;
use std::collections::HashMap;
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

/// Micro-op kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MopKind {
    Read,
    Write,
    Append,
}

/// One micro-op. For writes and appends `a` is the version id written. For list reads
/// `a..a+b` is a range of `Txns::elems` (b == NONE: the read returned nil). For register
/// reads `a` is the version read (NONE: nil).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mop {
    pub kind: MopKind,
    pub key: u32,
    pub a: u32,
    pub b: u32,
}

/// One transaction (a client op pair whose value is a list of micro-ops).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Txn {
    pub outcome: Outcome,
    pub process: u64,
    pub invoke_pos: usize,
    /// `usize::MAX` if it never completed.
    pub complete_pos: usize,
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

/// All transactions of a history in compact form.
#[derive(Default)]
pub(crate) struct Txns {
    pub txns: Vec<Txn>,
    pub mops: Vec<Mop>,
    pub elems: Vec<u32>,
    /// Key of each version.
    pub version_key: Vec<u32>,
    /// Value of each version.
    pub version_value: Vec<Scalar>,
    /// Each key's scalar, for display.
    pub key_scalar: Vec<Scalar>,
    /// Texts of non-integer scalars.
    pub other_text: Vec<String>,
    /// Ops whose value was not a list of well-formed micro-ops (pair indices).
    pub malformed: Vec<u32>,
    /// Micro-op names other than r / w / append, or mixed workloads.
    pub unexpected: Vec<u32>,
}

struct Interner {
    keys: FxMap<Scalar, u32>,
    /// Per key, version ids indexed directly by small integer values (NONE: unseen).
    dense: Vec<Vec<u32>>,
    /// Fast path: (key << 32 | value) for values in 0..2^32, the common case.
    small_versions: FxMap<u64, u32>,
    versions: FxMap<(u32, Scalar), u32>,
    others: HashMap<String, u32>,
}

impl Txns {
    pub fn mops_of(&self, t: &Txn) -> &[Mop] {
        &self.mops[t.mop_start as usize..(t.mop_start + t.mop_len) as usize]
    }

    /// Elements of a list read (`None` for nil).
    pub fn read_list(&self, m: &Mop) -> Option<&[u32]> {
        if m.b == NONE {
            None
        } else {
            Some(&self.elems[m.a as usize..(m.a + m.b) as usize])
        }
    }

    pub fn scalar_json(&self, s: Scalar) -> Value {
        match s {
            Scalar::Int(i) => Value::from(i),
            Scalar::Other(o) => self
                .other_text
                .get(o as usize)
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or(Value::Null),
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
        self.scalar_text(self.version_value[v as usize])
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
        self.scalar_json(self.version_value[v as usize])
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
}

fn scalar(v: &Value, others: &mut HashMap<String, u32>, texts: &mut Vec<String>) -> Scalar {
    if let Some(i) = v.as_i64() {
        return Scalar::Int(i);
    }
    let text = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let next = texts.len() as u32;
    let id = *others.entry(text.clone()).or_insert(next);
    if id == next {
        texts.push(text);
    }
    Scalar::Other(id)
}

/// Micro-op function names, tolerant of EDN-style keywords (`:r`).
fn mop_kind(f: &Value) -> Option<MopKind> {
    let s = f.as_str()?;
    match s.trim_start_matches(':') {
        "r" => Some(MopKind::Read),
        "w" => Some(MopKind::Write),
        "append" => Some(MopKind::Append),
        _ => None,
    }
}

/// Builds compact transactions from every client op whose value is a list of micro-ops.
/// `list_reads`: reads return lists (list-append) rather than single values.
pub(crate) fn build(history: &History, list_reads: bool) -> Txns {
    let mut out = Txns::default();
    let mut small_versions = FxMap::default();
    small_versions.reserve(history.pairs().len());
    let mut int = Interner {
        small_versions,
        dense: Vec::new(),
        keys: FxMap::default(),
        versions: FxMap::default(),
        others: HashMap::new(),
    };
    let pairs = history.pairs();
    out.txns.reserve(pairs.len());
    for (pi, p) in pairs.iter().enumerate() {
        let pi = pi as u32;
        let Value::Array(mops) = &p.value else {
            if p.f == "txn" {
                out.malformed.push(pi);
            }
            continue;
        };
        let mop_start = out.mops.len() as u32;
        let mut ok = true;
        for m in mops {
            let Some(parts) = m.as_array().filter(|a| a.len() == 3) else {
                ok = false;
                break;
            };
            let Some(kind) = mop_kind(&parts[0]) else {
                out.unexpected.push(pi);
                ok = false;
                break;
            };
            let ks = scalar(&parts[1], &mut int.others, &mut out.other_text);
            let next_key = out.key_scalar.len() as u32;
            let key = *int.keys.entry(ks).or_insert(next_key);
            if key == next_key {
                out.key_scalar.push(ks);
                int.dense.push(Vec::new());
            }
            let version = |v: &Value, out: &mut Txns, int: &mut Interner| -> u32 {
                let next = out.version_key.len() as u32;
                if let Some(small) = v.as_u64().filter(|x| *x <= u32::MAX as u64) {
                    // Dense per-key table while values stay small relative to its size,
                    // so memory stays proportional to the versions seen.
                    let table = &mut int.dense[key as usize];
                    let s = small as usize;
                    if s < table.len() || s < 2 * table.len() + 64 {
                        if s >= table.len() {
                            table.resize(s + 1, NONE);
                        }
                        if table[s] == NONE {
                            let id = *int
                                .small_versions
                                .entry(((key as u64) << 32) | small)
                                .or_insert(next);
                            table[s] = id;
                            if id == next {
                                out.version_key.push(key);
                                out.version_value.push(Scalar::Int(small as i64));
                            }
                        }
                        return table[s];
                    }
                    let id = *int
                        .small_versions
                        .entry(((key as u64) << 32) | small)
                        .or_insert(next);
                    if id == next {
                        out.version_key.push(key);
                        out.version_value.push(Scalar::Int(small as i64));
                    }
                    return id;
                }
                let s = scalar(v, &mut int.others, &mut out.other_text);
                let id = *int.versions.entry((key, s)).or_insert(next);
                if id == next {
                    out.version_key.push(key);
                    out.version_value.push(s);
                }
                id
            };
            let mop = match kind {
                MopKind::Write | MopKind::Append => {
                    let a = version(&parts[2], &mut out, &mut int);
                    Mop { kind, key, a, b: 0 }
                }
                MopKind::Read if list_reads => match &parts[2] {
                    Value::Null => Mop {
                        kind,
                        key,
                        a: 0,
                        b: NONE,
                    },
                    Value::Array(items) => {
                        let start = out.elems.len() as u32;
                        for it in items {
                            let e = version(it, &mut out, &mut int);
                            out.elems.push(e);
                        }
                        Mop {
                            kind,
                            key,
                            a: start,
                            b: items.len() as u32,
                        }
                    }
                    _ => {
                        ok = false;
                        break;
                    }
                },
                MopKind::Read => match &parts[2] {
                    Value::Null => Mop {
                        kind,
                        key,
                        a: NONE,
                        b: 0,
                    },
                    v => {
                        let a = version(v, &mut out, &mut int);
                        Mop { kind, key, a, b: 0 }
                    }
                },
            };
            out.mops.push(mop);
        }
        if !ok {
            out.mops.truncate(mop_start as usize);
            if out.unexpected.last().is_none_or(|u| *u != pi) {
                out.malformed.push(pi);
            }
            continue;
        }
        out.txns.push(Txn {
            outcome: p.outcome,
            process: p.process,
            invoke_pos: p.invoke_pos,
            complete_pos: p.complete_pos.unwrap_or(usize::MAX),
            mop_start,
            mop_len: out.mops.len() as u32 - mop_start,
        });
    }
    out
}
