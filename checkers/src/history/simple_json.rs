//! A parser for the small JSON subset that transaction values use: `null`, integers that
//! fit in an i64, strings without escapes, and arrays of those. Anything else makes it
//! give up (callers then fall back to serde_json), so whatever it accepts it reads exactly
//! as serde_json would, without allocating per element.

/// One node of a parsed value, in pre-order: a `List` is followed by its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node<'a> {
    Null,
    Int(i64),
    Str(&'a str),
    /// `len` items follow; `next` is the index just past the last of them.
    List {
        len: u32,
        next: u32,
    },
}

/// Nesting beyond this is left to serde_json.
const MAX_DEPTH: u32 = 32;

/// Parses `text` into `out` (cleared first). False when the text is outside the subset
/// (or not JSON); `out` is then meaningless.
#[cfg(test)]
pub(crate) fn parse<'a>(text: &'a str, out: &mut Vec<Node<'a>>) -> bool {
    out.clear();
    parse_append(text, out)
}

/// As [`parse`], appending to `out` (List `next` indices are absolute); on failure `out`
/// is left as it was.
pub(crate) fn parse_append<'a>(text: &'a str, out: &mut Vec<Node<'a>>) -> bool {
    let before = out.len();
    let ok = parse_prefix(text, 0, out).is_some_and(|end| {
        let mut p = Parser {
            text,
            bytes: text.as_bytes(),
            i: end,
        };
        p.skip_ws();
        p.i == p.bytes.len()
    });
    if !ok {
        out.truncate(before);
    }
    ok
}

/// Parses the one value that starts at byte `start` of `text` (after any whitespace),
/// appending its nodes to `out`; the byte just past it, or `None` (with `out` left
/// meaningless past its old length) when it is outside the subset.
pub(crate) fn parse_prefix<'a>(
    text: &'a str,
    start: usize,
    out: &mut Vec<Node<'a>>,
) -> Option<usize> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        i: start,
    };
    p.value(out, 0).then_some(p.i)
}

/// For JSON whose syntax is already known to be valid: true when serde_json will surely
/// also build a `Value` from it, i.e. it has no exponent or `true`/`false` (which a byte
/// scan cannot tell apart), no run of over 300 digits (out of f64 range) and nests at most
/// 100 deep. False means "parse it to find out".
pub(crate) fn surely_fits(text: &str) -> bool {
    let mut depth = 0u32;
    let mut digits = 0u32;
    let mut in_str = false;
    let mut escaped = false;
    for &c in text.as_bytes() {
        if in_str {
            match c {
                // `\u` escapes may be lone surrogates, which serde_json rejects.
                b'u' if escaped => return false,
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'0'..=b'9' => {
                digits += 1;
                if digits > 300 {
                    return false;
                }
                continue;
            }
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > 100 {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'e' | b'E' => return false,
            _ => {}
        }
        digits = 0;
    }
    true
}

/// Index just past node `i` and its items.
pub(crate) fn skip(nodes: &[Node<'_>], i: usize) -> usize {
    match nodes.get(i) {
        Some(Node::List { next, .. }) => *next as usize,
        _ => i + 1,
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.i) {
            self.i += 1;
        }
    }

    fn value(&mut self, out: &mut Vec<Node<'a>>, depth: u32) -> bool {
        self.skip_ws();
        match self.bytes.get(self.i) {
            Some(b'n') if self.bytes[self.i..].starts_with(b"null") => {
                self.i += 4;
                out.push(Node::Null);
                true
            }
            Some(b'"') => self.string(out),
            Some(b'-' | b'0'..=b'9') => self.int(out),
            Some(b'[') if depth < MAX_DEPTH => self.list(out, depth),
            _ => false,
        }
    }

    fn string(&mut self, out: &mut Vec<Node<'a>>) -> bool {
        let start = self.i + 1;
        let mut j = start;
        loop {
            match self.bytes.get(j) {
                Some(b'"') => break,
                // Escapes and control characters: serde_json's business.
                Some(b'\\') | None => return false,
                Some(c) if *c < 0x20 => return false,
                Some(_) => j += 1,
            }
        }
        // `"` is ASCII, so both ends are char boundaries.
        let Some(s) = self.text.get(start..j) else {
            return false;
        };
        out.push(Node::Str(s));
        self.i = j + 1;
        true
    }

    fn int(&mut self, out: &mut Vec<Node<'a>>) -> bool {
        let neg = self.bytes[self.i] == b'-';
        let mut j = self.i + usize::from(neg);
        let digits_start = j;
        let mut v: i64 = 0;
        while let Some(d @ b'0'..=b'9') = self.bytes.get(j) {
            v = v * 10 + i64::from(d - b'0');
            j += 1;
            // 18 digits always fit in an i64.
            if j - digits_start > 18 {
                return false;
            }
        }
        let n = j - digits_start;
        // No digits, a leading zero, `-0` (a float to serde_json) or a fraction/exponent.
        if n == 0
            || (n > 1 && self.bytes[digits_start] == b'0')
            || (neg && v == 0)
            || matches!(self.bytes.get(j), Some(b'.' | b'e' | b'E'))
        {
            return false;
        }
        out.push(Node::Int(if neg { -v } else { v }));
        self.i = j;
        true
    }

    fn list(&mut self, out: &mut Vec<Node<'a>>, depth: u32) -> bool {
        let at = out.len();
        out.push(Node::List { len: 0, next: 0 });
        self.i += 1;
        self.skip_ws();
        let mut len = 0u32;
        if self.bytes.get(self.i) == Some(&b']') {
            self.i += 1;
        } else {
            loop {
                if !self.value(out, depth + 1) {
                    return false;
                }
                len += 1;
                self.skip_ws();
                match self.bytes.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b']') => {
                        self.i += 1;
                        break;
                    }
                    _ => return false,
                }
            }
        }
        out[at] = Node::List {
            len,
            next: out.len() as u32,
        };
        true
    }
}

/// The JSON string `text` (exactly one, no whitespace around it) as a value, when it has
/// no escapes and no control characters (which serde_json refuses); `None` for any other
/// text, which the caller reads with serde_json. Keys are nearly always such strings.
pub(crate) fn plain_string_value(text: &str) -> Option<serde_json::Value> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    let plain = inner.bytes().all(|b| b != b'"' && b != b'\\' && b >= 0x20);
    plain.then(|| serde_json::Value::String(inner.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain string reads as serde_json reads it; anything else is left to serde_json.
    #[test]
    fn a_plain_string_value_is_serdes() {
        for text in [r#""k8""#, r#""""#, r#""a b/c""#, r#""é""#] {
            let want: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(plain_string_value(text), Some(want), "{text}");
        }
        for text in [
            r#""a\"b""#,
            r#""a\nb""#,
            "\"a\tb\"",
            r#""ab"#,
            r#"ab""#,
            r#"" ""x""#,
            "\"",
            "7",
            "null",
            r#"["k"]"#,
            r#" "k""#,
        ] {
            assert_eq!(plain_string_value(text), None, "{text}");
        }
    }

    fn ok(text: &str) -> Option<Vec<Node<'_>>> {
        let mut out = Vec::new();
        parse(text, &mut out).then_some(out)
    }

    #[test]
    fn reads_micro_ops() {
        let n = ok(r#"[["append", 5, 1], ["r",-3,[1,2]], ["r","k",null]]"#).unwrap();
        assert_eq!(n[0], Node::List { len: 3, next: 15 });
        assert_eq!(n[2], Node::Str("append"));
        assert_eq!(n[7], Node::Int(-3));
        assert_eq!(n[8], Node::List { len: 2, next: 11 });
        assert_eq!(skip(&n, 5), 11);
        assert_eq!(n[13], Node::Str("k"));
        assert_eq!(n[14], Node::Null);
    }

    #[test]
    fn gives_up_outside_the_subset() {
        for t in [
            "1.5",
            "1e3",
            "-0",
            "01",
            "\"a\\n\"",
            "{}",
            "true",
            "[1,]",
            "[1 2]",
            "nul",
            "1234567890123456789",
            "[1] x",
            "",
        ] {
            assert!(ok(t).is_none(), "{t}");
        }
        assert_eq!(
            ok(" 123456789012345678 ").unwrap(),
            [Node::Int(123456789012345678)]
        );
        assert_eq!(ok("[]").unwrap(), [Node::List { len: 0, next: 1 }]);
    }

    #[test]
    fn surely_fits_only_what_serde_json_reads() {
        let deep = "[".repeat(101) + &"]".repeat(101);
        let long = "9".repeat(301);
        for t in ["1e400", "true", "[1E9]", deep.as_str(), long.as_str()] {
            assert!(!surely_fits(t), "{t}");
        }
        for t in [r#"["e\"]", 5]"#, "[[1,2],{\"a\":null}]", "-1.25"] {
            assert!(surely_fits(t), "{t}");
            assert!(serde_json::from_str::<serde_json::Value>(t).is_ok(), "{t}");
        }
    }
}
