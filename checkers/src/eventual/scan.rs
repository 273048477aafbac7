//! Picking the few fields the eventual checkers need (`key`, `node`, `value`) straight
//! out of an op's JSON text, and reading integer lists without building `Value` trees:
//! on a million-op set history that is most of the checking time.
//!
//! The text was fully validated as JSON when the history was read, so the scanner only
//! has to find boundaries. Anything outside the simple shapes (escapes in strings,
//! non-integer numbers) answers `None`, and callers fall back to serde_json.

/// The raw JSON texts of an op object's `key`, `node` and `value` fields.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OpFields<'a> {
    pub key: Option<&'a str>,
    pub node: Option<&'a str>,
    pub value: Option<&'a str>,
}

/// Walks the fields of the object in `text`: `each(name, start)` gets each field's name
/// and where its value starts, and answers where the value ends. Answers the index just
/// past the object's closing brace.
fn object_fields<'a>(
    text: &'a str,
    mut each: impl FnMut(&'a str, usize) -> Option<usize>,
) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let name_end = string_end(b, i)?;
        let name = text.get(i + 1..name_end - 1)?;
        i = ws(b, name_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        i = ws(b, each(name, i)?);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Some(i + 1),
            _ => return None,
        }
    }
}

/// A set read's value read in place: a plain list, or committed and tentative lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetRead {
    List(Vec<i64>),
    Split {
        committed: Vec<i64>,
        tentative: Vec<i64>,
    },
}

/// The set read value starting at `b[i]`, and where it ends; other fields of an object
/// (a booking's schedule) are skipped.
fn set_read_at(text: &str, i: usize) -> Option<(usize, SetRead)> {
    let b = text.as_bytes();
    if b.get(i) == Some(&b'[') {
        let mut list = Vec::new();
        let end = int_list_at(b, i, &mut list)?;
        return Some((end, SetRead::List(list)));
    }
    let (mut committed, mut tentative) = (None, Vec::new());
    let inner = text.get(i..)?;
    let ib = inner.as_bytes();
    let end = object_fields(inner, |name, j| match name {
        "committed" => {
            let mut v = Vec::new();
            let e = int_list_at(ib, j, &mut v)?;
            committed = Some(v);
            Some(e)
        }
        "tentative" => int_list_at(ib, j, &mut tentative),
        _ => value_end(ib, j),
    })?;
    Some((
        i + end,
        SetRead::Split {
            committed: committed?,
            tentative,
        },
    ))
}

/// The `key`, `node` and `value` of one op line; with `set_value`, the value is also read
/// as a set read where it has that shape.
pub(crate) fn op_fields(line: &str, set_value: bool) -> Option<(OpFields<'_>, Option<SetRead>)> {
    let mut f = OpFields::default();
    let mut read = None;
    let b = line.as_bytes();
    object_fields(line, |name, i| {
        let parsed = if set_value && name == "value" {
            set_read_at(line, i)
        } else {
            None
        };
        let end = match parsed {
            Some((end, r)) => {
                read = Some(r);
                end
            }
            None => value_end(b, i)?,
        };
        let v = line.get(i..end);
        match name {
            "key" => f.key = v,
            "node" => f.node = v,
            "value" => f.value = v,
            _ => {}
        }
        Some(end)
    })?;
    Some((f, read))
}

/// Named fields of a JSON object (up to `N`), in the order of `names`.
pub(crate) fn named<'a, const N: usize>(
    text: &'a str,
    names: [&str; N],
) -> Option<[Option<&'a str>; N]> {
    let mut out = [None; N];
    let b = text.as_bytes();
    object_fields(text, |name, i| {
        let end = value_end(b, i)?;
        if let Some(k) = names.iter().position(|n| *n == name) {
            out[k] = text.get(i..end);
        }
        Some(end)
    })?;
    Some(out)
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Index just past the string starting at `i` (a `"`).
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'"' => return Some(j + 1),
            b'\\' => j += 2,
            _ => j += 1,
        }
    }
}

/// Bytes that matter when skipping a nested value: quotes and brackets.
const STRUCTURAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t
};

/// Index just past the JSON value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                // Skip digits, commas and spaces in one tight loop.
                j += b.get(j..)?.iter().position(|&c| STRUCTURAL[c as usize])?;
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    _ => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while !matches!(
                b.get(j),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// A JSON string without escapes, unquoted; `None` for anything else.
pub(crate) fn plain_string(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

/// An integer that fits an i64 (no fraction or exponent).
pub(crate) fn int(text: &str) -> Option<i64> {
    let t = text.trim();
    let digits = t.strip_prefix('-').unwrap_or(t);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// A JSON array of integers, appended to `out`; false (with `out` unchanged) otherwise.
pub(crate) fn int_list_into(text: &str, out: &mut Vec<i64>) -> bool {
    let b = text.as_bytes();
    let before = out.len();
    match int_list_at(b, ws(b, 0), out) {
        Some(end) if ws(b, end) == b.len() => true,
        Some(_) => {
            out.truncate(before);
            false
        }
        None => false,
    }
}

/// The array of integers starting at `b[i]` (a `[`), appended to `out`; the index just
/// past its `]`. On `None` `out` is unchanged.
fn int_list_at(b: &[u8], i: usize, out: &mut Vec<i64>) -> Option<usize> {
    let before = out.len();
    let parsed = int_list_items(b, i, out);
    if parsed.is_none() {
        out.truncate(before);
    }
    parsed
}

fn int_list_items(b: &[u8], i: usize, out: &mut Vec<i64>) -> Option<usize> {
    if b.get(i) != Some(&b'[') {
        return None;
    }
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Some(i + 1);
    }
    loop {
        let neg = b.get(i) == Some(&b'-');
        let start = i + usize::from(neg);
        let mut j = start;
        let mut v: i64 = 0;
        while let Some(d @ b'0'..=b'9') = b.get(j) {
            v = v.checked_mul(10)?.checked_add(i64::from(d - b'0'))?;
            j += 1;
        }
        if j == start || matches!(b.get(j), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        out.push(if neg { -v } else { v });
        i = ws(b, j);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b']') => return Some(i + 1),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_fields_whatever_their_order_and_spacing() {
        let line = r#"{ "index":3, "value" : {"committed":[1, 2],"tentative":[]} ,"key":"k\"7","node":"n2","f":"read"}"#;
        let (f, read) = op_fields(line, true).unwrap();
        assert_eq!(
            read,
            Some(SetRead::Split {
                committed: vec![1, 2],
                tentative: vec![]
            })
        );
        assert_eq!(f.value, Some(r#"{"committed":[1, 2],"tentative":[]}"#));
        assert_eq!(f.key, Some(r#""k\"7""#));
        assert_eq!(plain_string(f.key.unwrap()), None);
        assert_eq!(f.node.and_then(plain_string), Some("n2"));
        let [c, t, s] = named(f.value.unwrap(), ["committed", "tentative", "schedule"]).unwrap();
        assert_eq!((c, t, s), (Some("[1, 2]"), Some("[]"), None));
        assert_eq!(
            op_fields(r#"{"value":null}"#, true).unwrap().0.value,
            Some("null")
        );
        assert_eq!(
            op_fields(r#"{"value":-12}"#, false)
                .unwrap()
                .0
                .value
                .and_then(int),
            Some(-12)
        );
    }

    #[test]
    fn reads_integer_lists_and_refuses_the_rest() {
        let mut v = Vec::new();
        assert!(int_list_into("[1, -2 ,30]", &mut v));
        assert!(int_list_into("[ ]", &mut v));
        assert_eq!(v, [1, -2, 30]);
        for bad in [
            "[1.5]",
            "[1e3]",
            "[\"a\"]",
            "[1,]",
            "{}",
            "[99999999999999999999]",
            "[1] x",
        ] {
            assert!(!int_list_into(bad, &mut v), "{bad}");
            assert_eq!(v.len(), 3);
        }
        assert_eq!(int("1.0"), None);
        assert_eq!(int("-"), None);
    }
}
