//! A byte-level, recursive-descent EDN value parser producing JSON values.
//!
//! Mapping: keywords and symbols become strings (without the colon), `nil` becomes null,
//! vectors, lists and sets become arrays, maps become objects (keys rendered as strings),
//! characters become one-character strings and tagged literals (`#inst "..."`) become their
//! value. `#_` discards the next form. Nesting is capped at [`MAX_DEPTH`] so hostile input
//! cannot overflow the stack; every step consumes input, so parsing is linear.

use serde_json::{Map, Number, Value};

/// Deepest nesting of collections (and tags/discards) accepted.
pub(crate) const MAX_DEPTH: usize = 128;

/// A parse error: the 1-based line of the offending token and what went wrong.
#[derive(Debug)]
pub(crate) struct EdnError {
    pub(crate) line: usize,
    pub(crate) reason: String,
}

/// Cursor over EDN text that tracks the current line.
pub(crate) struct EdnParser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: usize,
}

/// True for bytes that end a token (symbol, keyword, number).
fn is_delimiter(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t'
            | b'\n'
            | b'\r'
            | b'\x0c'
            | b','
            | b'('
            | b')'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'"'
            | b';'
    )
}

impl<'a> EdnParser<'a> {
    /// A parser over `text`, whose first line is numbered `first_line`.
    pub(crate) fn new(text: &'a str, first_line: usize) -> EdnParser<'a> {
        EdnParser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            line: first_line,
        }
    }

    /// The current line (1-based).
    pub(crate) fn line(&self) -> usize {
        self.line
    }

    /// The current byte offset.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The next byte, if any.
    pub(crate) fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// Consumes one byte (never a newline: callers only bump past delimiters they peeked).
    pub(crate) fn bump(&mut self) {
        if self.pos < self.bytes.len() {
            self.pos += 1;
        }
    }

    /// The unparsed rest of the input.
    pub(crate) fn rest(&self) -> &'a str {
        self.text.get(self.pos..).unwrap_or("")
    }

    /// Builds an error at the current line.
    pub(crate) fn error(&self, reason: impl Into<String>) -> EdnError {
        EdnError {
            line: self.line,
            reason: reason.into(),
        }
    }

    /// Describes what is at the cursor, for "expected X, found Y" messages.
    pub(crate) fn found(&self) -> String {
        match self.peek() {
            None => "end of input".to_string(),
            Some(b) if is_delimiter(b) && !b.is_ascii_whitespace() => {
                format!("`{}`", b as char)
            }
            Some(_) => {
                let end = self.token_end(self.pos + 1);
                format!("`{}`", snippet(self.text, self.pos, end))
            }
        }
    }

    /// The source text between two offsets, shortened for messages.
    pub(crate) fn source(&self, start: usize, end: usize) -> String {
        snippet(self.text, start, end)
    }

    /// Skips whitespace, commas, `;` comments and `#_` discarded forms.
    pub(crate) fn skip_ws(&mut self, depth: usize) -> Result<(), EdnError> {
        while let Some(b) = self.peek() {
            match b {
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' | b'\x0c' | b',' => self.pos += 1,
                b';' => {
                    while let Some(c) = self.peek() {
                        if c == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                b'#' if self.bytes.get(self.pos + 1) == Some(&b'_') => {
                    self.check_depth(depth)?;
                    self.pos += 2;
                    self.skip_ws(depth + 1)?;
                    self.parse_value(depth + 1)?;
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// Skips whitespace and reports whether the input is exhausted.
    pub(crate) fn at_end(&mut self, depth: usize) -> Result<bool, EdnError> {
        self.skip_ws(depth)?;
        Ok(self.pos >= self.bytes.len())
    }

    fn check_depth(&self, depth: usize) -> Result<(), EdnError> {
        if depth >= MAX_DEPTH {
            Err(self.error(format!("expected at most {MAX_DEPTH} levels of nesting")))
        } else {
            Ok(())
        }
    }

    /// Offset of the first delimiter at or after `from`.
    fn token_end(&self, from: usize) -> usize {
        let mut end = from.min(self.bytes.len());
        while end < self.bytes.len() && !is_delimiter(self.bytes[end]) {
            end += 1;
        }
        end
    }

    /// Consumes a token (a run of non-delimiter bytes) and returns it.
    fn take_token(&mut self) -> &'a str {
        let start = self.pos;
        let end = self.token_end(start);
        self.pos = end;
        // Delimiters are ASCII, so `start..end` always lies on character boundaries.
        self.text.get(start..end).unwrap_or("")
    }

    /// If the cursor is at a keyword, consumes it and returns its name (without `:`).
    pub(crate) fn take_keyword(&mut self) -> Option<&'a str> {
        if self.peek() != Some(b':') {
            return None;
        }
        let start = self.pos;
        self.pos += 1;
        let name = self.take_token();
        let name = name.trim_start_matches(':');
        if name.is_empty() {
            self.pos = start;
            return None;
        }
        Some(name)
    }

    /// Parses one value; the cursor must be at its first byte (whitespace skipped).
    pub(crate) fn parse_value(&mut self, depth: usize) -> Result<Value, EdnError> {
        self.check_depth(depth)?;
        let Some(b) = self.peek() else {
            return Err(self.error("expected a value, found end of input"));
        };
        match b {
            b'"' => self.parse_string().map(Value::String),
            b'[' => self.parse_seq(b']', depth),
            b'(' => self.parse_seq(b')', depth),
            b'{' => self.parse_map(depth),
            b'#' => self.parse_dispatch(depth),
            b':' => match self.take_keyword() {
                Some(name) => Ok(Value::String(name.to_string())),
                None => Err(self.error(format!(
                    "expected a keyword name after `:`, found {}",
                    self.found()
                ))),
            },
            b'\\' => self.parse_char(),
            b']' | b')' | b'}' => {
                Err(self.error(format!("expected a value, found {}", self.found())))
            }
            b'0'..=b'9' => self.parse_number(),
            b'+' | b'-' if self.bytes.get(self.pos + 1).is_some_and(u8::is_ascii_digit) => {
                self.parse_number()
            }
            _ => {
                let token = self.take_token();
                Ok(match token {
                    "nil" => Value::Null,
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    sym => Value::String(sym.to_string()),
                })
            }
        }
    }

    fn parse_seq(&mut self, close: u8, depth: usize) -> Result<Value, EdnError> {
        let open_line = self.line;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws(depth + 1)?;
            match self.peek() {
                Some(c) if c == close => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                None => {
                    return Err(self.error(format!(
                        "expected `{}` closing the collection opened on line {open_line}, \
                         found end of input",
                        close as char
                    )))
                }
                Some(_) => items.push(self.parse_value(depth + 1)?),
            }
        }
    }

    fn parse_map(&mut self, depth: usize) -> Result<Value, EdnError> {
        let open_line = self.line;
        self.pos += 1;
        let mut map = Map::new();
        loop {
            self.skip_ws(depth + 1)?;
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                None => {
                    return Err(self.error(format!(
                        "expected `}}` closing the map opened on line {open_line}, \
                         found end of input"
                    )))
                }
                Some(_) => {}
            }
            let key = key_string(self.parse_value(depth + 1)?);
            self.skip_ws(depth + 1)?;
            if matches!(self.peek(), None | Some(b'}')) {
                return Err(self.error(format!(
                    "expected a value for map key {key:?}, found {}",
                    self.found()
                )));
            }
            let value = self.parse_value(depth + 1)?;
            map.insert(key, value);
        }
    }

    /// `#{...}` sets, `##Inf`-style symbolic values and `#tag value` literals.
    fn parse_dispatch(&mut self, depth: usize) -> Result<Value, EdnError> {
        match self.bytes.get(self.pos + 1) {
            Some(b'{') => {
                self.pos += 1;
                self.parse_seq(b'}', depth)
            }
            Some(b'#') => {
                self.pos += 2;
                match self.take_token() {
                    // JSON has no infinities or NaN; null is the honest rendering.
                    "Inf" | "-Inf" | "NaN" => Ok(Value::Null),
                    other => Err(self.error(format!(
                        "expected ##Inf, ##-Inf or ##NaN, found `##{}`",
                        snippet(other, 0, other.len())
                    ))),
                }
            }
            Some(c) if c.is_ascii_alphabetic() => {
                self.pos += 1;
                self.take_token();
                self.skip_ws(depth + 1)?;
                if self.peek().is_none() {
                    return Err(self.error("expected a value after a tag, found end of input"));
                }
                self.parse_value(depth + 1)
            }
            _ => Err(self.error(format!(
                "expected `#{{`, `#_` or a tag after `#`, found {}",
                self.found()
            ))),
        }
    }

    fn parse_char(&mut self) -> Result<Value, EdnError> {
        self.pos += 1;
        // A character literal is `\` plus one character plus any following token bytes
        // (`\newline`, `\u0041`); `\(` is a single delimiter character.
        let start = self.pos;
        let Some(first) = self.text.get(start..).and_then(|s| s.chars().next()) else {
            return Err(self.error("expected a character after `\\`, found end of input"));
        };
        if first == '\n' {
            return Err(self.error("expected a character after `\\`, found a line break"));
        }
        let end = self.token_end(start + first.len_utf8());
        self.pos = end;
        let token = self.text.get(start..end).unwrap_or("");
        let c = match token {
            "newline" => '\n',
            "space" => ' ',
            "tab" => '\t',
            "return" => '\r',
            "formfeed" => '\x0c',
            "backspace" => '\x08',
            t if t.len() == 5 && t.starts_with('u') => u32::from_str_radix(&t[1..], 16)
                .ok()
                .and_then(char::from_u32)
                .ok_or_else(|| {
                    self.error(format!("expected a \\uXXXX character, found `\\{t}`"))
                })?,
            t if t.chars().count() == 1 => first,
            t => {
                return Err(self.error(format!(
                    "expected a character literal, found `\\{}`",
                    snippet(t, 0, t.len())
                )))
            }
        };
        Ok(Value::String(c.to_string()))
    }

    fn parse_number(&mut self) -> Result<Value, EdnError> {
        let token = self.take_token();
        number_value(token).ok_or_else(|| {
            self.error(format!(
                "expected a number, found `{}`",
                snippet(token, 0, token.len())
            ))
        })
    }

    /// Parses a string literal; the cursor is at the opening quote.
    fn parse_string(&mut self) -> Result<String, EdnError> {
        let open_line = self.line;
        self.pos += 1;
        let mut out = String::new();
        let mut chunk_start = self.pos;
        loop {
            let Some(b) = self.peek() else {
                return Err(EdnError {
                    line: open_line,
                    reason: "expected `\"` closing the string, found end of input".to_string(),
                });
            };
            match b {
                b'"' => {
                    out.push_str(self.text.get(chunk_start..self.pos).unwrap_or(""));
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    out.push_str(self.text.get(chunk_start..self.pos).unwrap_or(""));
                    self.pos += 1;
                    self.parse_escape(&mut out)?;
                    chunk_start = self.pos;
                }
                b'\n' => {
                    self.line += 1;
                    self.pos += 1;
                }
                _ => self.pos += 1,
            }
        }
    }

    /// Decodes one escape; the cursor is just past the backslash.
    fn parse_escape(&mut self, out: &mut String) -> Result<(), EdnError> {
        let Some(b) = self.peek() else {
            return Err(self.error("expected an escape character after `\\`, found end of input"));
        };
        self.pos += 1;
        match b {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'n' => out.push('\n'),
            b't' => out.push('\t'),
            b'r' => out.push('\r'),
            b'b' => out.push('\x08'),
            b'f' => out.push('\x0c'),
            b'u' => {
                let hi = self.hex4()?;
                let c = if (0xD800..0xDC00).contains(&hi)
                    && self.bytes.get(self.pos) == Some(&b'\\')
                    && self.bytes.get(self.pos + 1) == Some(&b'u')
                {
                    self.pos += 2;
                    let lo = self.hex4()?;
                    let combined =
                        0x10000 + ((hi - 0xD800) << 10) + (lo.wrapping_sub(0xDC00) & 0x3FF);
                    char::from_u32(combined).unwrap_or(char::REPLACEMENT_CHARACTER)
                } else {
                    char::from_u32(hi).unwrap_or(char::REPLACEMENT_CHARACTER)
                };
                out.push(c);
            }
            other => {
                self.pos -= 1;
                return Err(self.error(format!(
                    "expected one of \\\" \\\\ \\n \\t \\r \\b \\f \\uXXXX, found `\\{}`",
                    other.escape_ascii()
                )));
            }
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, EdnError> {
        let digits = self.bytes.get(self.pos..self.pos + 4).unwrap_or(b"");
        let parsed = std::str::from_utf8(digits)
            .ok()
            .filter(|s| s.len() == 4)
            .and_then(|s| u32::from_str_radix(s, 16).ok());
        match parsed {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => Err(self.error("expected four hex digits after `\\u`")),
        }
    }
}

/// Converts an EDN number token (`42`, `-7`, `3.5`, `1e9`, `12N`, `1.5M`, `1/3`) to JSON.
/// Integers beyond 64 bits become floats; non-finite results are rejected.
fn number_value(token: &str) -> Option<Value> {
    let body = token
        .strip_suffix('N')
        .or_else(|| token.strip_suffix('M'))
        .unwrap_or(token);
    let body = body.strip_prefix('+').unwrap_or(body);
    let is_float = body.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'));
    if !is_float {
        if let Some((num, den)) = body.split_once('/') {
            let (num, den) = (num.parse::<f64>().ok()?, den.parse::<f64>().ok()?);
            return Number::from_f64(num / den).map(Value::Number);
        }
        if let Ok(i) = body.parse::<i64>() {
            return Some(Value::Number(i.into()));
        }
        if let Ok(u) = body.parse::<u64>() {
            return Some(Value::Number(u.into()));
        }
        if !body
            .bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-'))
        {
            return None;
        }
    }
    // `f64::from_str` accepts "inf" and "NaN"; require a digit-led body first.
    if !body
        .trim_start_matches('-')
        .starts_with(|c: char| c.is_ascii_digit())
    {
        return None;
    }
    body.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
}

/// Renders a map key as a JSON object key: strings (and keywords) as they are, anything
/// else as its JSON text.
pub(crate) fn key_string(v: Value) -> String {
    match v {
        Value::String(s) => s,
        Value::Null => "nil".to_string(),
        other => other.to_string(),
    }
}

/// `text[start..end]`, cut to at most 40 characters and never panicking.
fn snippet(text: &str, start: usize, end: usize) -> String {
    let s = text.get(start..end.min(text.len())).unwrap_or("");
    let mut out: String = s.chars().take(40).collect();
    if s.chars().nth(40).is_some() {
        out.push_str("...");
    }
    out.escape_debug().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Result<Value, EdnError> {
        let mut p = EdnParser::new(s, 1);
        p.skip_ws(0)?;
        p.parse_value(0)
    }

    #[test]
    fn parses_scalars_and_collections() {
        let v = parse(r#"{:a [1 -2 3.5 nil true "s\n"], "b" #{:x}, 3 (\a \newline), :c 99999999999999999999}"#)
            .unwrap();
        assert_eq!(
            v,
            json!({"a": [1, -2, 3.5, null, true, "s\n"], "b": ["x"], "3": ["a", "\n"],
                   "c": 99_999_999_999_999_999_999.0_f64})
        );
        assert_eq!(parse("#inst \"2020\"").unwrap(), json!("2020"));
        assert_eq!(parse("[1 #_ 2 3 ; c\n 4N]").unwrap(), json!([1, 3, 4]));
        assert_eq!(parse(":jepsen/ns").unwrap(), json!("jepsen/ns"));
    }

    #[test]
    fn rejects_deep_nesting_and_bad_tokens() {
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).unwrap_err().reason.contains("nesting"));
        let deep_discard = "#_".repeat(10_000);
        assert!(parse(&deep_discard).is_err());
        let e = parse("[1\n 2\n \"abc").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(parse("1x").is_err());
        assert!(parse("\"\\q\"").is_err());
        assert!(parse("\\").is_err());
        assert!(parse("{:a}").is_err());
    }
}
