//! The micro-op names of a transaction's value (`[["r", k, v], ["append", k, 3]]` →
//! `r`, `append`), read straight from the op's JSON text: a pass over every transaction
//! (the harness's hollow-run rule) must not build each value as a `serde_json::Value`,
//! which at 10M transactions cost more than the check it stands beside.

use super::lazy::MOP_NAMES_UNRECORDED;
use super::{History, ValueRef};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// A JSON scalar (null, bool, number, string) in a place where only arrays count.
macro_rules! scalars_are {
    ($none:expr) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($none)
        }
    };
}

impl History {
    /// The distinct names of the micro-ops in the value of the op at `pos`, sorted: the
    /// first element of each array inside the value when that is a string. Empty when the
    /// value is not an array (or is absent).
    pub fn op_micro_op_names(&self, pos: usize) -> Vec<String> {
        self.op_micro_op_names_borrowed(pos)
            .into_iter()
            .map(Cow::into_owned)
            .collect()
    }

    /// [`History::op_micro_op_names`] borrowing the names from the history where it can
    /// (a name without escapes in the text, or a parsed value's): one allocation per op,
    /// for passes over every transaction.
    pub fn op_micro_op_names_borrowed(&self, pos: usize) -> Vec<Cow<'_, str>> {
        if let Some(id) = self.op_micro_op_set(pos) {
            return self.mop_sets[id]
                .iter()
                .map(|n| Cow::Borrowed(n.as_str()))
                .collect();
        }
        let mut names = match self.value_ref(pos) {
            Some(ValueRef::Json(v)) => names_of_value(v),
            Some(ValueRef::Text(t)) => match scan_names(t) {
                Some(names) => names,
                None => {
                    let mut de = serde_json::Deserializer::from_str(t);
                    match de.deserialize_any(TxnNames) {
                        Ok(names) => names,
                        // Every line was validated when read, so this is not reached; the
                        // parsed value gives the same answer if it ever is.
                        Err(_) => names_of_value(&serde_json::from_str(t).unwrap_or(Value::Null))
                            .into_iter()
                            .map(|n| Cow::Owned(n.into_owned()))
                            .collect(),
                    }
                }
            },
            None => Vec::new(),
        };
        names.sort();
        names.dedup();
        names
    }
}

impl History {
    /// The micro-op names of the value of the op at `pos` as the reader recorded them
    /// (JSON Lines ops of the common shape): an index for
    /// [`History::micro_op_name_set`], which then holds what
    /// [`History::op_micro_op_names`] says, without the value's text being read again.
    /// `None` when they were not recorded.
    pub fn op_micro_op_set(&self, pos: usize) -> Option<usize> {
        let id = self.heads.get(pos)?.mop_names;
        (id != MOP_NAMES_UNRECORDED && (id as usize) < self.mop_sets.len()).then_some(id as usize)
    }

    /// The names (sorted, distinct) of a set [`History::op_micro_op_set`] named; empty
    /// for an index it never gave.
    pub fn micro_op_name_set(&self, id: usize) -> &[String] {
        self.mop_sets.get(id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Whether the value of the op at `pos` has a micro-op named `name`, as
    /// [`History::op_micro_op_names`] would say, but a text without the quoted name (and
    /// without escapes, which could spell it otherwise) is answered without parsing it.
    pub fn op_has_micro_op(&self, pos: usize, name: &str) -> bool {
        if let Some(id) = self.op_micro_op_set(pos) {
            return self.mop_sets[id].iter().any(|m| m == name);
        }
        if let Some(ValueRef::Text(t)) = self.value_ref(pos) {
            let quoted = t
                .match_indices(name)
                .any(|(i, _)| t[..i].ends_with('"') && t[i + name.len()..].starts_with('"'));
            if !quoted && !t.contains('\\') {
                return false;
            }
        }
        self.op_micro_op_names_borrowed(pos)
            .iter()
            .any(|m| m == name)
    }
}

/// The micro-op names of a value's JSON text by a scan of its bytes that builds nothing
/// (a read's list of thousands of elements is skipped, not parsed); `None` where the
/// text has an escape or anything the scan does not expect, for the parser to answer.
/// The text was validated as JSON when the history was read.
fn scan_names(t: &str) -> Option<Vec<Cow<'_, str>>> {
    let b = t.as_bytes();
    let mut i = skip_ws(b, 0);
    let mut names = Vec::new();
    if b.get(i) != Some(&b'[') {
        // Not an array: no micro-ops (a scalar, an object, nothing).
        return Some(names);
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Some(names);
    }
    loop {
        if b.get(i) == Some(&b'[') {
            let j = skip_ws(b, i + 1);
            if b.get(j) == Some(&b'"') {
                let end = j + 1 + b[j + 1..].iter().position(|&c| c == b'"')?;
                let name = &t[j + 1..end];
                if name.contains('\\') {
                    return None;
                }
                names.push(Cow::Borrowed(name));
            }
        }
        i = skip_value(b, i)?;
        i = skip_ws(b, i);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b']' => return Some(names),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index just past the JSON value starting at `i`; `None` for text it cannot skip.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i),
        b'[' | b'{' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match *b.get(j)? {
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            // A number or a literal: up to the next delimiter.
            let n = b[i..]
                .iter()
                .position(|&c| matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(b.len() - i);
            Some(i + n)
        }
    }
}

/// The index just past the string whose opening quote is at `i` (escapes skipped).
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match *b.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
}

/// The names of a parsed value, the definition the text reader must agree with.
fn names_of_value(v: &Value) -> Vec<Cow<'_, str>> {
    v.as_array()
        .map(|mops| {
            mops.iter()
                .filter_map(|m| m.get(0).and_then(Value::as_str).map(Cow::Borrowed))
                .collect()
        })
        .unwrap_or_default()
}

/// The whole value: an array of micro-ops gives their names, anything else none.
struct TxnNames;

impl<'de> Visitor<'de> for TxnNames {
    type Value = Vec<Cow<'de, str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut names = Vec::new();
        while let Some(name) = seq.next_element_seed(MicroName)? {
            names.extend(name);
        }
        Ok(names)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| Vec::new())
    }
    scalars_are!(Vec::new());
}

/// One element of the array: its first element when it is an array starting with a string.
struct MicroName;

impl<'de> serde::de::DeserializeSeed<'de> for MicroName {
    type Value = Option<Cow<'de, str>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MicroName {
    type Value = Option<Cow<'de, str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let first = seq.next_element_seed(FirstName)?.flatten();
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(first)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| None)
    }
    scalars_are!(None);
}

/// A micro-op's first element: its text when it is a string (borrowed when it has no
/// escapes), nothing for any other value, which is skipped without being built.
struct FirstName;

impl<'de> serde::de::DeserializeSeed<'de> for FirstName {
    type Value = Option<Cow<'de, str>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FirstName {
    type Value = Option<Cow<'de, str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(s.to_string())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| None)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn json_text() -> impl Strategy<Value = String> {
        let scalar = prop_oneof![
            Just("null".to_string()),
            any::<i32>().prop_map(|i| i.to_string()),
            Just("-1.5e3".to_string()),
            Just("true".to_string()),
            "[a-z\\\\\"\\[\\]{},]{0,4}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        ];
        scalar.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..5), 0usize..3).prop_map(|(v, ws)| {
                    let pad = [" ", "", "\n "][ws];
                    format!("[{pad}{}{pad}]", v.join(&format!("{pad},{pad}")))
                }),
                prop::collection::vec(inner, 0..3).prop_map(|v| {
                    let entries: Vec<String> = v
                        .iter()
                        .enumerate()
                        .map(|(i, x)| format!("\"k{i}\":{x}"))
                        .collect();
                    format!("{{{}}}", entries.join(","))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]
        /// The byte scan names what the parsed value names, or leaves the text to the
        /// parser; it never names differently.
        #[test]
        fn the_scan_names_what_the_parsed_value_names(text in json_text()) {
            let value: Value = serde_json::from_str(&text).unwrap();
            let mut expected: Vec<String> =
                names_of_value(&value).into_iter().map(Cow::into_owned).collect();
            expected.sort();
            if let Some(scanned) = scan_names(&text) {
                let mut scanned: Vec<String> = scanned.into_iter().map(Cow::into_owned).collect();
                scanned.sort();
                prop_assert_eq!(scanned, expected.clone(), "{}", text);
            }
            // What the JSON Lines reader records as it reads a line with this value.
            expected.dedup();
            let line = format!(r#"{{"process":0,"type":"ok","f":"txn","value":{text}}}"#);
            let mut scratch = Vec::new();
            if let Some(recorded) = crate::history::read::json_line::read_op_line(&line, &mut scratch)
                .and_then(|l| l.mop_names)
            {
                prop_assert_eq!(recorded.names(), expected, "{}", text);
            }
        }
    }
    use crate::history::read::read_str;
    use std::path::Path;

    /// Reads `values` as the values of invoke/ok `txn` pairs of a JSON Lines history, so
    /// the text path is taken, and compares it with the parsed-value definition.
    #[test]
    fn names_from_the_text_are_those_of_the_parsed_value() {
        let values = [
            r#"[["r", 1, [1, 2, "]"]], ["append", 1, 3], ["append", 2, 4]]"#,
            r#"[["w", "k", {"a": [1, "[\"x\"]"]}], [3, "r"], [], "r", null, {"r": 1}]"#,
            r#"[[["nested"], 1], [null, 2], ["r\"q", 1, null], [true]]"#,
            r#" [ [ "w" , 2 , "a\\\"]" ] , ["r",-1.5e3,{"]":"["}] , [ ] ] "#,
            r#"{"r": [["append"]]}"#,
            r#""append""#,
            "17",
            "null",
            "[]",
        ];
        let mut lines = String::new();
        for (i, v) in values.iter().enumerate() {
            let t = 2 * i;
            lines.push_str(&format!(
                "{{\"process\": 0, \"type\": \"invoke\", \"f\": \"txn\", \"time\": {t}, \"value\": {v}}}\n"
            ));
            lines.push_str(&format!(
                "{{\"process\": 0, \"type\": \"ok\", \"f\": \"txn\", \"time\": {}, \"value\": {v}}}\n",
                t + 1
            ));
        }
        let lazy = read_str(&lines, Path::new("t.jsonl"), None).expect("a history");
        assert!(
            matches!(lazy.value_ref(0), Some(ValueRef::Text(_))),
            "the values must be read from the text"
        );
        let from_text: Vec<Vec<String>> = (0..2 * values.len())
            .map(|pos| lazy.op_micro_op_names(pos))
            .collect();
        let parsed = History::new(lazy.ops().to_vec()).unwrap();
        let mut seen_names = 0;
        for (pos, from_text) in from_text.iter().enumerate() {
            let from_value = parsed.op_micro_op_names(pos);
            let value: Value = serde_json::from_str(values[pos / 2]).unwrap();
            let mut expected = names_of_value(&value);
            expected.sort();
            expected.dedup();
            assert_eq!(from_text, &expected, "value {}", values[pos / 2]);
            assert_eq!(
                lazy.op_micro_op_names_borrowed(pos),
                expected,
                "value {}",
                values[pos / 2]
            );
            assert_eq!(from_value, expected, "value {}", values[pos / 2]);
            seen_names += from_text.len();
        }
        for pos in 0..2 * values.len() {
            for name in ["append", "r", "w", "r\"q", "nested"] {
                assert_eq!(
                    lazy.op_has_micro_op(pos, name),
                    from_text[pos].iter().any(|m| m == name),
                    "{name} in value {}",
                    values[pos / 2]
                );
            }
        }
        // The cases must exercise names, not only empty answers.
        assert_eq!(seen_names, 12);
        assert_eq!(from_text[0], vec!["append", "r"]);
        assert_eq!(from_text[4], vec!["r\"q"]);
    }
}
