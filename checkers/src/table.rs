//! Tables for the terminal and for Markdown: the one place that sets how splitbrain's
//! tables look (built on `tabled`'s builder). Callers give rows of text; the style is
//! chosen here: plain aligned columns, a rounded box, or GitHub Markdown.

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Padding, Style};

/// A table being filled: an optional header row, then rows of cells (a short row is
/// padded with empty cells).
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Option<Vec<String>>,
    rows: Vec<Vec<String>>,
    right: Vec<usize>,
    indent: usize,
}

impl Table {
    /// A table whose first line names the columns.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Self {
        Table {
            header: Some(header.into_iter().map(Into::into).collect()),
            ..Table::default()
        }
    }

    /// A table of rows only (a listing of names and what they are).
    pub fn headless() -> Self {
        Table::default()
    }

    /// Adds a row.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.rows.push(cells.into_iter().map(Into::into).collect());
        self
    }

    /// Aligns these columns (0-based) to the right, as figures are, in the plain and boxed
    /// forms.
    pub fn right_aligned(mut self, columns: &[usize]) -> Self {
        self.right = columns.to_vec();
        self
    }

    /// Starts every line of the plain form with `spaces` spaces.
    pub fn indented(mut self, spaces: usize) -> Self {
        self.indent = spaces;
        self
    }

    /// Whether the table has no rows (a header alone does not count).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn builder(&self, escape_pipes: bool) -> Builder {
        let cell = |s: &String| {
            if escape_pipes {
                s.replace('|', "\\|")
            } else {
                s.clone()
            }
        };
        let mut b = Builder::default();
        for r in self.header.iter().chain(&self.rows) {
            b.push_record(r.iter().map(cell));
        }
        b
    }

    fn aligned(&self, t: &mut tabled::Table) {
        for &c in &self.right {
            t.modify(Columns::single(c), Alignment::right());
        }
    }

    /// For a terminal or a log: columns two spaces apart, no rules, the header (if any) as
    /// the first line; no trailing spaces; each line ends with a newline.
    pub fn plain(&self) -> String {
        if self.header.is_none() && self.rows.is_empty() {
            return String::new();
        }
        let mut t = self.builder(false).build();
        t.with(Style::empty()).with(Padding::new(0, 2, 0, 0));
        self.aligned(&mut t);
        let pad = " ".repeat(self.indent);
        let mut out = String::new();
        for line in t.to_string().lines() {
            out.push_str(&pad);
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// For a terminal, boxed with rounded corners; a rule under the header if there is
    /// one. No trailing newline.
    pub fn boxed(&self) -> String {
        let mut t = self.builder(false).build();
        if self.header.is_some() {
            t.with(Style::rounded());
        } else {
            t.with(Style::rounded().remove_horizontals());
        }
        self.aligned(&mut t);
        t.to_string()
    }

    /// GitHub Markdown: header, rule, rows, each line ending with a newline; a `|` in a
    /// cell is escaped. A headless table gets an empty header (Markdown needs one).
    pub fn markdown(&self) -> String {
        let mut b = self.builder(true);
        if self.header.is_none() {
            let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
            b.insert_record(0, vec![String::new(); columns]);
        }
        let mut t = b.build();
        t.with(Style::markdown());
        let mut out = t.to_string();
        out.push('\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(["name", "ops", "verdict"]);
        t.row(["kv", "1200", "valid"]);
        t.row(["a longer name", "7"]);
        t
    }

    #[test]
    fn plain_columns_line_up_without_trailing_spaces() {
        let text = sample().right_aligned(&[1]).plain();
        assert_eq!(
            text,
            "name            ops  verdict\n\
             kv             1200  valid\n\
             a longer name     7\n"
        );
    }

    #[test]
    fn plain_indents_every_line_and_an_empty_table_is_empty() {
        let mut t = Table::headless().indented(2);
        t.row(["x", "one"]).row(["yy", "two"]);
        assert_eq!(t.plain(), "  x   one\n  yy  two\n");
        assert_eq!(Table::headless().plain(), "");
    }

    #[test]
    fn markdown_has_a_rule_under_the_header_and_escapes_pipes() {
        let mut t = Table::new(["a", "b"]);
        t.row(["x|y", "2"]);
        let md = t.markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines.len(), 3, "{md}");
        assert!(lines[1].starts_with("|--"), "{md}");
        let cells: Vec<&str> = lines[2].split(" | ").map(str::trim).collect();
        assert_eq!(cells, ["| x\\|y", "2 |"], "{md}");
        assert!(md.ends_with("|\n"));
    }

    #[test]
    fn boxed_has_a_header_rule_only_when_there_is_a_header() {
        assert_eq!(
            sample()
                .boxed()
                .lines()
                .filter(|l| l.starts_with('├'))
                .count(),
            1
        );
        let mut t = Table::headless();
        t.row(["verdict", "valid"]).row(["seed", "1"]);
        let text = t.boxed();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(!text.contains('├'), "{text}");
    }
}
