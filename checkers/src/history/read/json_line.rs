//! The shape nearly every op line has, read without serde: the known fields once each, in
//! any order, plain strings (no escapes), integers, and `key`/`value`/`error` in
//! [`simple_json`]'s subset. A line outside that shape is not an error here: the caller
//! reads it with serde_json, whose verdict and message stand. So whatever this accepts
//! it must read exactly as serde_json reads it (`tests` compares the two).

use crate::history::lazy::MopNames;
use crate::history::simple_json::{self, Node};
use crate::history::{OpType, Process};
use std::borrow::Cow;

/// The fields of one op line the lazy reader keeps.
#[derive(Debug, PartialEq)]
pub(crate) struct OpLine<'a> {
    pub index: Option<u64>,
    pub time: u64,
    pub process: Process,
    pub op_type: OpType,
    /// Empty when the line has no `f`.
    pub f: Cow<'a, str>,
    /// The value's text; `None` when absent or `null`.
    pub value: Option<&'a str>,
    /// The key's text; `None` when absent or `null`.
    pub key: Option<&'a str>,
    /// The node; `None` when absent or `null`.
    pub node: Option<Cow<'a, str>>,
    /// The error's text; `None` when absent or `null`.
    pub error: Option<&'a str>,
    /// The micro-op names of the value (none for an absent one), as
    /// `History::op_micro_op_names` gives them; `None` when not recorded (more than
    /// `MOP_NAMES_MAX` of them, or a line read by serde_json).
    pub mop_names: Option<MopNames>,
}

/// The micro-op names of a value parsed into `nodes` (its root first): the first element
/// of each list inside a list, where that is a string. `None` past `MOP_NAMES_MAX`.
fn mop_names(nodes: &[Node<'_>]) -> Option<MopNames> {
    let mut names = MopNames::default();
    let Some(&Node::List { next, .. }) = nodes.first() else {
        return Some(names);
    };
    let mut i = 1;
    while i < next as usize {
        if let (Node::List { len: 1.., .. }, Some(&Node::Str(name))) = (nodes[i], nodes.get(i + 1))
        {
            if !names.insert(name) {
                return None;
            }
        }
        i = simple_json::skip(nodes, i);
    }
    Some(names)
}

/// Reads `line` (already trimmed) when it has the common shape; `scratch` is reused
/// between calls for the parse of its values.
pub(crate) fn read_op_line<'a>(line: &'a str, scratch: &mut Vec<Node<'a>>) -> Option<OpLine<'a>> {
    let mut c = Cursor { line, i: 0 };
    c.expect(b'{')?;
    let mut seen = 0u16;
    let (mut index, mut time, mut f, mut value) = (None, 0, Cow::Borrowed(""), None);
    let (mut process, mut op_type) = (None, None);
    let (mut key, mut node, mut error) = (None, None, None);
    let mut names = Some(MopNames::default());
    c.ws();
    if c.peek() == Some(b'}') {
        c.i += 1;
    } else {
        loop {
            let name = c.plain_string()?;
            c.expect(b':')?;
            c.ws();
            let bit = field_bit(name)?;
            if seen & (1 << bit) != 0 {
                return None; // serde's "duplicate field" error
            }
            seen |= 1 << bit;
            match FIELDS[bit] {
                "index" => index = if c.null() { None } else { Some(c.uint()?) },
                "time" => time = c.uint()?,
                "process" => {
                    process = Some(if c.peek() == Some(b'"') {
                        (c.plain_string()? == "nemesis").then_some(Process::Nemesis)?
                    } else {
                        Process::Client(c.uint()?)
                    })
                }
                "type" => {
                    op_type = Some(match c.plain_string()? {
                        "invoke" => OpType::Invoke,
                        "ok" => OpType::Ok,
                        "fail" => OpType::Fail,
                        "info" => OpType::Info,
                        _ => return None,
                    })
                }
                "f" => f = Cow::Borrowed(c.plain_string()?),
                "node" => {
                    if !c.null() {
                        node = Some(Cow::Borrowed(c.plain_string()?));
                    }
                }
                "value" => {
                    let text = c.subset_value(scratch)?;
                    value = (text != "null").then_some(text);
                    names = mop_names(scratch);
                }
                "key" => {
                    let text = c.subset_value(scratch)?;
                    key = (text != "null").then_some(text);
                }
                _ => {
                    let text = c.subset_value(scratch)?; // error
                    error = (text != "null").then_some(text);
                }
            }
            c.ws();
            match c.next()? {
                b',' => c.ws(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    c.ws();
    (c.i == line.len()).then_some(())?;
    Some(OpLine {
        index,
        time,
        process: process?,
        op_type: op_type?,
        f,
        value,
        key,
        node,
        error,
        mop_names: names,
    })
}

/// The fields of `Op`; any other name sends the line to serde_json.
const FIELDS: [&str; 9] = [
    "index", "time", "process", "type", "f", "key", "value", "node", "error",
];

/// The position of `name` in [`FIELDS`] (by its length and first byte, then the whole
/// name): every line names several fields.
fn field_bit(name: &str) -> Option<usize> {
    let bit = match (name.len(), name.as_bytes().first()?) {
        (5, b'i') => 0,
        (4, b't') => {
            if name.as_bytes()[1] == b'i' {
                1
            } else {
                3
            }
        }
        (7, b'p') => 2,
        (1, b'f') => 4,
        (3, b'k') => 5,
        (5, b'v') => 6,
        (4, b'n') => 7,
        (5, b'e') => 8,
        _ => return None,
    };
    (FIELDS[bit] == name).then_some(bit)
}

struct Cursor<'a> {
    line: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.line.as_bytes().get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.i += 1;
        Some(b)
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Whitespace, then byte `b`.
    fn expect(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.next()? == b).then_some(())
    }

    fn null(&mut self) -> bool {
        let yes = self.line.as_bytes()[self.i..].starts_with(b"null");
        if yes {
            self.i += 4;
        }
        yes
    }

    /// A string without escapes or control characters, unquoted.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.i;
        loop {
            match self.next()? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => {}
            }
        }
        // Both ends are next to an ASCII quote, so on character boundaries.
        self.line.get(start..self.i - 1)
    }

    /// A JSON integer that surely fits a u64: at most 18 digits, no sign, fraction or
    /// exponent.
    fn uint(&mut self) -> Option<u64> {
        let start = self.i;
        let mut v = 0u64;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            v = v * 10 + u64::from(d - b'0');
            self.i += 1;
            if self.i - start > 18 {
                return None;
            }
        }
        let digits = self.i - start;
        let leading_zero = digits > 1 && self.line.as_bytes()[start] == b'0';
        if digits == 0 || leading_zero || matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(v)
    }

    /// A value in [`simple_json`]'s subset (which serde_json reads as a `Value`), as text.
    fn subset_value(&mut self, scratch: &mut Vec<Node<'a>>) -> Option<&'a str> {
        scratch.clear();
        let start = self.i;
        self.i = simple_json::parse_prefix(self.line, start, scratch)?;
        self.line.get(start..self.i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::read::json_lazy::serde_light;
    use proptest::prelude::*;

    /// Fails unless the fast reading of `line`, where it gives one, is the serde reading
    /// the lazy reader falls back to.
    fn agrees(line: &str) -> bool {
        let mut scratch = Vec::new();
        let Some(mut fast) = read_op_line(line, &mut scratch) else {
            return false;
        };
        // Only the fast path records micro-op names; they are compared with the parsed
        // value's in `history::micro_ops`.
        fast.mop_names = None;
        let slow = serde_light(line)
            .unwrap_or_else(|e| panic!("fast read {line:?} which serde refuses: {e}"));
        assert_eq!(fast, slow, "{line}");
        true
    }

    #[test]
    fn reads_the_lines_splitbrain_and_elle_write() {
        for line in [
            r#"{"index":0,"time":2186994659,"process":0,"type":"invoke","f":"write","key":"k0","value":1}"#,
            r#"{"index":11,"time":13000,"process":20,"type":"ok","f":"txn","value":[["append",627,1],["r",803,[]]]}"#,
            r#"{"type":"info","process":"nemesis","f":"start-partition","value":null}"#,
            r#"{ "process" : 3 , "type" : "fail", "error": "timeout", "node": "n1", "value": [1, -2] }"#,
            r#"{"process":1,"type":"ok","value":[["r","x",null]],"node":null,"index":null}"#,
            r#"{"process":0,"type":"ok"}"#,
        ] {
            assert!(agrees(line), "the fast path gave up on {line}");
        }
    }

    #[test]
    fn field_names_are_found_by_length_and_first_byte() {
        for (i, name) in FIELDS.iter().enumerate() {
            assert_eq!(field_bit(name), Some(i), "{name}");
        }
        for name in [
            "", "i", "tame", "tyme", "index2", "valuE", "nodes", "err", "F",
        ] {
            assert_eq!(field_bit(name), None, "{name}");
        }
    }

    #[test]
    fn micro_op_names_are_recorded_from_the_values_parse() {
        for (value, names) in [
            (
                r#"[["r",1,[1,2]],["append",1,3],["r",2,null]]"#,
                Some(vec!["append", "r"]),
            ),
            (r#"[[1,"r"],[],["w"],"append",[["x"]]]"#, Some(vec!["w"])),
            ("17", Some(vec![])),
            ("null", Some(vec![])),
            (r#"[["a"],["b"],["c"],["d"],["e"]]"#, None),
            (
                r#"[["a"],["b"],["a"],["d"],["c"]]"#,
                Some(vec!["a", "b", "c", "d"]),
            ),
            (r#"[["r"],["longname"]]"#, None),
        ] {
            let line = format!(r#"{{"process":0,"type":"ok","f":"txn","value":{value}}}"#);
            let read = read_op_line(&line, &mut Vec::new()).expect("the common shape");
            let names = names.map(|n| n.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(read.mop_names.map(|m| m.names()), names, "{value}");
        }
        let absent = read_op_line(r#"{"process":0,"type":"ok"}"#, &mut Vec::new()).unwrap();
        assert_eq!(absent.mop_names.map(|m| m.len()), Some(0));
    }

    #[test]
    fn leaves_everything_else_to_serde() {
        let mut scratch = Vec::new();
        for line in [
            r#"{"process":0,"type":"ok","value":{"a":1}}"#, // an object value
            r#"{"process":0,"type":"ok","value":1.5}"#,     // a float
            r#"{"process":0,"type":"ok","value":true}"#,    // a boolean
            r#"{"process":0,"type":"ok","f":"r\u0065ad"}"#, // an escape
            r#"{"process":0,"type":"ok","extra":1}"#,       // an unknown field
            r#"{"process":0,"process":1,"type":"ok"}"#,     // a duplicate field
            r#"{"process":-1,"type":"ok"}"#,                // a negative process
            r#"{"process":"n1","type":"ok"}"#,              // a process name
            r#"{"process":0,"type":"done"}"#,               // an unknown type
            r#"{"type":"ok"}"#,                             // no process
            r#"{"process":0,"type":"ok","time":01}"#,       // a leading zero
            r#"{"process":0,"type":"ok","time":1234567890123456789}"#, // 19 digits
            r#"{"process":0,"type":"ok"} x"#,               // trailing text
            r#"{"process":0,"type":"ok",}"#,                // a trailing comma
            r#"{"process":0,"type":"ok""#,                  // unclosed
            r#"{"process":0,"type":"ok","f":null}"#,        // f null
            r#"{"process":0,"type":"ok","time":null}"#,     // time null
        ] {
            assert!(read_op_line(line, &mut scratch).is_none(), "{line}");
        }
    }

    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_string()),
            any::<i64>().prop_map(|i| i.to_string()),
            "[a-z\\\\\"]{0,4}".prop_map(|s| format!("\"{s}\"")),
            Just("1.5".to_string()),
            Just("true".to_string()),
            Just("01".to_string()),
        ]
    }

    fn json_value() -> impl Strategy<Value = String> {
        scalar().prop_recursive(3, 16, 4, |inner| {
            prop::collection::vec(inner, 0..4).prop_map(|v| format!("[{}]", v.join(",")))
        })
    }

    proptest! {
        // About one line in ten is in the shape; 4000 cases compare some 300.
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// Random lines near the common shape: where the fast path reads one, serde_json
        /// reads the same fields from it.
        #[test]
        fn the_fast_path_reads_what_serde_reads(
            fields in prop::collection::vec((0usize..11, json_value(), 0usize..3), 0..8),
        ) {
            let names = ["index", "time", "process", "type", "f", "key", "value", "node", "error", "other", "process"];
            let typed = ["\"invoke\"", "\"ok\"", "\"nemesis\"", "7", "\"x\""];
            let body: Vec<String> = fields
                .iter()
                .map(|(n, v, ws)| {
                    let v = match names[*n] {
                        "type" | "process" | "f" | "node" => typed[v.len() % typed.len()].to_string(),
                        "index" | "time" => (v.len() * 37).to_string(),
                        _ => v.clone(),
                    };
                    let pad = [" ", "", "\t"][*ws];
                    format!("{pad}\"{}\"{pad}:{pad}{v}", names[*n])
                })
                .collect();
            // Most lines carry the two required fields, so most reach the comparison.
            let mut body = body;
            if fields.len() % 4 != 0 {
                body.insert(fields.len() / 2, "\"process\":3,\"type\":\"ok\"".to_string());
            }
            let line = format!("{{{}}}", body.join(","));
            let mut scratch = Vec::new();
            if read_op_line(&line, &mut scratch).is_some() {
                prop_assert!(agrees(&line));
            }
        }
    }
}
