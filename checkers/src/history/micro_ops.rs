//! The micro-op names of a transaction's value (`[["r", k, v], ["append", k, 3]]` →
//! `r`, `append`), read straight from the op's JSON text: a pass over every transaction
//! (the harness's hollow-run rule) must not build each value as a `serde_json::Value`,
//! which at 10M transactions cost more than the check it stands beside.

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
        let mut names = match self.value_ref(pos) {
            Some(ValueRef::Json(v)) => names_of_value(v),
            Some(ValueRef::Text(t)) => {
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
            None => Vec::new(),
        };
        names.sort();
        names.dedup();
        names
    }
}

impl History {
    /// Whether the value of the op at `pos` has a micro-op named `name`, as
    /// [`History::op_micro_op_names`] would say, but a text without the quoted name (and
    /// without escapes, which could spell it otherwise) is answered without parsing it.
    pub fn op_has_micro_op(&self, pos: usize, name: &str) -> bool {
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
        assert_eq!(seen_names, 8);
        assert_eq!(from_text[0], vec!["append", "r"]);
        assert_eq!(from_text[4], vec!["r\"q"]);
    }
}
