//! Ops kept as JSON Lines text until someone needs them whole.
//!
//! Parsing every op's value into a `serde_json::Value` tree costs several times the file's
//! size in memory and most of the time of checking a big history; checkers that read
//! values straight from the text (Elle) or need none (summaries) skip that entirely.

use super::read::json_line;
use super::{Op, OpType, Process};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;

/// The fields every consumer needs, for each op, without its JSON: 24 bytes an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpHead {
    pub time: u64,
    /// The client process's id (0 for the nemesis).
    client: u64,
    /// Index into the history's op names.
    pub f: u32,
    pub op_type: OpType,
    nemesis: bool,
    /// The micro-op names of the op's value, as an index into the history's table of
    /// name sets ([`MopNameSets`]), when the reader recorded them (in the head's padding:
    /// no extra memory); [`MOP_NAMES_UNRECORDED`] otherwise.
    pub mop_names: u8,
}

/// `OpHead::mop_names` of an op whose micro-op names were not recorded when read.
pub(crate) const MOP_NAMES_UNRECORDED: u8 = u8::MAX;

/// Distinct micro-op names a recorded set holds at most; a value naming more is left
/// unrecorded (read from its text when asked).
pub(crate) const MOP_NAMES_MAX: usize = 4;

/// The micro-op names of one value, distinct, each packed into a u64 (its bytes and its
/// length), so that comparing and deduplicating them costs no string comparison: the
/// reader does this for every op. Names of more than 7 bytes are not recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MopNames {
    /// Packed names, ascending (a canonical order; not the names' text order).
    keys: [u64; MOP_NAMES_MAX],
    len: u8,
}

/// `name` packed into a u64 (length in the top byte); `None` past 7 bytes.
fn pack_name(name: &str) -> Option<u64> {
    let b = name.as_bytes();
    if b.len() > 7 {
        return None;
    }
    let mut k = [0u8; 8];
    k[..b.len()].copy_from_slice(b);
    k[7] = b.len() as u8;
    Some(u64::from_le_bytes(k))
}

/// The name [`pack_name`] packed.
fn unpack_name(k: u64) -> String {
    let len = (k >> 56) as usize;
    let bytes: Vec<u8> = (0..len.min(7)).map(|i| (k >> (8 * i)) as u8).collect();
    // The bytes were a whole `str` of at most 7 bytes.
    String::from_utf8(bytes).unwrap_or_default()
}

impl MopNames {
    /// Adds `name`; false when it cannot be recorded (more than [`MOP_NAMES_MAX`]
    /// distinct names, or a long one).
    pub fn insert(&mut self, name: &str) -> bool {
        let Some(k) = pack_name(name) else {
            return false;
        };
        let len = self.len as usize;
        let mut at = len;
        for (i, &x) in self.keys[..len].iter().enumerate() {
            if x == k {
                return true;
            }
            if x > k {
                at = i;
                break;
            }
        }
        if len == MOP_NAMES_MAX {
            return false;
        }
        self.keys.copy_within(at..len, at + 1);
        self.keys[at] = k;
        self.len += 1;
        true
    }

    /// How many names.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// The names, sorted by their text.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.keys[..self.len as usize]
            .iter()
            .map(|&k| unpack_name(k))
            .collect();
        names.sort();
        names
    }
}

/// The distinct sets of micro-op names a history's values hold (a handful: `r`,
/// `append`, both, none), each sorted; ops name them by index (`OpHead::mop_names`).
#[derive(Debug, Clone, Default)]
pub(crate) struct MopNameSets {
    pub sets: Vec<Vec<String>>,
    /// Each set as it was interned.
    keys: Vec<MopNames>,
    /// The last set found: consecutive ops often share one.
    last: Option<u8>,
}

impl MopNameSets {
    /// The index of `names` (added if new); [`MOP_NAMES_UNRECORDED`] once the table is
    /// full.
    pub fn intern(&mut self, names: MopNames) -> u8 {
        if let Some(id) = self.last.filter(|&id| self.keys[id as usize] == names) {
            return id;
        }
        let id = match self.keys.iter().position(|k| *k == names) {
            Some(id) => id as u8,
            None if self.keys.len() < MOP_NAMES_UNRECORDED as usize => {
                self.keys.push(names);
                self.sets.push(names.names());
                (self.keys.len() - 1) as u8
            }
            None => return MOP_NAMES_UNRECORDED,
        };
        self.last = Some(id);
        id
    }

    /// The sets interned, as they were.
    pub fn keys(&self) -> &[MopNames] {
        &self.keys
    }
}

impl OpHead {
    pub fn new(time: u64, process: Process, op_type: OpType, f: u32) -> OpHead {
        let (client, nemesis) = match process {
            Process::Client(p) => (p, false),
            Process::Nemesis => (0, true),
        };
        OpHead {
            time,
            client,
            f,
            op_type,
            nemesis,
            mop_names: MOP_NAMES_UNRECORDED,
        }
    }

    pub fn process(&self) -> Process {
        if self.nemesis {
            Process::Nemesis
        } else {
            Process::Client(self.client)
        }
    }
}

/// Interns op names (`f`): a history has a handful of distinct ones.
#[derive(Default)]
pub(crate) struct NameTable {
    pub names: Vec<String>,
    ids: HashMap<String, u32>,
    /// The last name interned: consecutive ops mostly share one.
    last: Option<u32>,
}

impl NameTable {
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.last.filter(|&id| self.names[id as usize] == name) {
            return id;
        }
        if let Some(&id) = self.ids.get(name) {
            self.last = Some(id);
            return id;
        }
        self.last = Some(self.names.len() as u32);
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
}

/// A byte range of the source text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: usize,
    pub len: u32,
}

/// A history's text: read into memory, or mapped from its file (big files).
pub(crate) enum Text {
    Owned(String),
    Mapped(super::mapped::Mapped),
}

impl Text {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Text::Owned(s) => s.as_bytes(),
            Text::Mapped(m) => m.bytes(),
        }
    }

    /// The text of `start..start + len`; `None` outside the text or off a character
    /// boundary (a mapped file's chunks were validated as UTF-8 when read).
    fn get(&self, start: usize, len: usize) -> Option<&str> {
        match self {
            Text::Owned(s) => s.get(start..start.checked_add(len)?),
            Text::Mapped(m) => m.str(start..start.checked_add(len)?),
        }
    }

    /// Hands back the memory of `range` when mapped (no-op for text in memory).
    pub fn release(&self, range: std::ops::Range<usize>) {
        if let Text::Mapped(m) = self {
            m.release(range);
        }
    }
}

/// The op of a line in the common shape ([`json_line`]'s, which reads exactly what
/// serde_json reads), its values parsed on their own: several times faster than serde's
/// reading of the whole `Op`. `None` for any other line.
fn fast_op(line: &str) -> Option<Op> {
    let mut scratch = Vec::new();
    let l = json_line::read_op_line(line.trim(), &mut scratch)?;
    let json = |t: Option<&str>| match t {
        Some(t) => serde_json::from_str::<Value>(t).ok().map(Some),
        None => Some(None),
    };
    Some(Op {
        index: l.index.unwrap_or(super::NO_INDEX),
        time: l.time,
        process: l.process,
        op_type: l.op_type,
        f: l.f.into_owned(),
        key: json(l.key)?,
        value: json(l.value)?.unwrap_or(Value::Null),
        node: l.node.map(|n| n.into_owned()),
        error: json(l.error)?,
    })
}

/// Where each op's line, value and key are in the text: 26 bytes an op, in six columns.
#[derive(Default)]
pub(crate) struct Spans {
    line_start: Vec<u64>,
    line_len: Vec<u32>,
    /// Offset of the value within its line.
    value_off: Vec<u32>,
    /// 0 when the value was absent or null.
    value_len: Vec<u32>,
    /// Offset of the key within its line.
    key_off: Vec<u32>,
    /// 0 when the key was absent or null; [`KEY_UNRECORDED`] when it is too long to
    /// record here (its line is then parsed for it).
    key_len: Vec<u16>,
}

/// `key_len` of a key whose text is not recorded (65,535 bytes or longer).
const KEY_UNRECORDED: u16 = u16::MAX;

/// Where an op's key is, as [`Spans`] recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyText<'a> {
    /// No key, or a null one.
    Absent,
    /// The key's JSON text.
    Text(&'a str),
    /// Too long to have been recorded: read the line.
    Unrecorded,
}

impl Spans {
    /// Adds an op's line, its value and its key (`len == 0`: none; else inside the line).
    pub fn push(&mut self, line: Span, value: Span, key: Span) {
        self.line_start.push(line.start as u64);
        self.line_len.push(line.len);
        let off = |s: Span| {
            if s.len == 0 {
                0
            } else {
                s.start.saturating_sub(line.start) as u32
            }
        };
        self.value_off.push(off(value));
        self.value_len.push(value.len);
        self.key_off.push(off(key));
        // A key of exactly 65,535 bytes is marked unrecorded too: its line is read for it.
        self.key_len
            .push(u16::try_from(key.len).unwrap_or(KEY_UNRECORDED));
    }

    fn line(&self, pos: usize) -> Option<(usize, usize)> {
        Some((
            *self.line_start.get(pos)? as usize,
            *self.line_len.get(pos)? as usize,
        ))
    }

    fn value(&self, pos: usize) -> Option<(usize, usize)> {
        let (start, _) = self.line(pos)?;
        let len = *self.value_len.get(pos)? as usize;
        (len > 0).then(|| (start + self.value_off[pos] as usize, len))
    }

    /// The key's place: `Ok(None)` when absent, `Err(())` when not recorded.
    fn key(&self, pos: usize) -> Option<Result<Option<(usize, usize)>, ()>> {
        let (start, _) = self.line(pos)?;
        Some(match *self.key_len.get(pos)? {
            0 => Ok(None),
            KEY_UNRECORDED => Err(()),
            len => Ok(Some((start + self.key_off[pos] as usize, len as usize))),
        })
    }
}

/// The text of a JSON Lines history and where each op (and its value) is in it. Every
/// line was fully validated as an [`Op`] when read, so materializing cannot fail.
pub(crate) struct LineSource {
    text: Text,
    spans: Spans,
}

impl fmt::Debug for LineSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LineSource")
            .field("bytes", &self.text.bytes().len())
            .field("ops", &self.spans.line_start.len())
            .finish()
    }
}

impl LineSource {
    pub fn new(text: Text, spans: Spans) -> LineSource {
        LineSource { text, spans }
    }

    /// The JSON text of op `pos`'s value; `None` when it is null or absent.
    pub fn value_text(&self, pos: usize) -> Option<&str> {
        let (start, len) = self.spans.value(pos)?;
        self.text.get(start, len)
    }

    /// The JSON text of op `pos`'s key, as recorded when read; `None` outside the history.
    pub fn key_text(&self, pos: usize) -> Option<KeyText<'_>> {
        Some(match self.spans.key(pos)? {
            Ok(None) => KeyText::Absent,
            Ok(Some((start, len))) => KeyText::Text(self.text.get(start, len)?),
            Err(()) => KeyText::Unrecorded,
        })
    }

    /// The JSON text of op `pos`'s whole line.
    pub fn line_text(&self, pos: usize) -> Option<&str> {
        let (start, len) = self.spans.line(pos)?;
        self.text.get(start, len)
    }

    /// Hands back the memory of the text before op `pos`'s line (a mapped file's pages;
    /// nothing for text in memory): a pass that has read those ops is done with them.
    /// Reading them again later is still correct, only slower.
    pub fn release_before(&self, pos: usize) {
        let end = match self.spans.line(pos) {
            Some((start, _)) => start,
            None => self.text.bytes().len(),
        };
        self.text.release(0..end);
    }

    /// Parses op `pos` on its own.
    pub fn op(&self, pos: usize, head: &OpHead, names: &[String]) -> Op {
        let parsed = self
            .line_text(pos)
            .and_then(|line| fast_op(line).or_else(|| serde_json::from_str::<Op>(line).ok()));
        let mut op = parsed.unwrap_or_else(|| {
            // Unreachable for validated text; keep what the head knows rather than panic.
            let f = names.get(head.f as usize).cloned().unwrap_or_default();
            Op::new(head.process(), head.op_type, f, Value::Null).at(head.time)
        });
        op.index = pos as u64;
        if op.f.is_empty() {
            // The reader inferred the name of an op that carried none.
            op.f = names.get(head.f as usize).cloned().unwrap_or_default();
        }
        op
    }

    /// Parses every op (in parallel).
    pub fn materialize(&self, heads: &[OpHead], names: &[String]) -> Vec<Op> {
        use rayon::prelude::*;
        heads
            .par_iter()
            .enumerate()
            .with_min_len(4096)
            .map(|(pos, head)| self.op(pos, head, names))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_op_is_serdes_op() {
        for line in [
            r#"{"index":0,"time":2186994659,"process":0,"type":"invoke","f":"write","key":"k0","value":1}"#,
            r#"{"index":3,"time":5,"process":2,"type":"ok","f":"cas","key":7,"value":[1,2],"node":"n1"}"#,
            r#"{"index":11,"time":13000,"process":20,"type":"ok","f":"txn","value":[["append",627,1],["r",803,[]]]}"#,
            r#"{ "process" : 3 , "type" : "fail", "error": ["timeout", 5], "node": null, "value": [1, -2] }"#,
            r#"{"process":"nemesis","type":"info","f":"start","value":null,"key":null,"error":null}"#,
            r#"{"process":0,"type":"ok"}"#,
        ] {
            let fast = fast_op(line).unwrap_or_else(|| panic!("no fast reading of {line}"));
            let slow: Op = serde_json::from_str(line).unwrap();
            assert_eq!(fast, slow, "{line}");
        }
        // Outside the common shape: left to serde.
        assert_eq!(
            fast_op(r#"{"process":0,"type":"ok","value":{"a":1}}"#),
            None
        );
    }
}
