//! Positions in configuration texts (suite files, target specs), for error messages that
//! name the line.

/// The 1-based line of byte offset `pos` in `text` (a span's start from `toml::Spanned`).
pub(crate) fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}
