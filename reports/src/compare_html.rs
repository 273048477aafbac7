//! The HTML form of a [`Comparison`]: one self-contained page (inline style, no scripts,
//! no fetches), rendered through `maud` templates so every cell is escaped.

use crate::compare::Comparison;
use maud::{html, Markup, DOCTYPE};

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}\
th{background:#f3f3f3}th.differs{background:#ffe8a8}td.differs{background:#fff4d0;font-weight:600}\
td.invalid{color:#b00020}td.valid{color:#17663a}tr.baseline td{border-bottom:2px solid #888}\
.regressions li{color:#b00020}";

/// Renders the comparison page.
pub(crate) fn render(c: &Comparison) -> String {
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "splitbrain compare: " (c.rows.len()) " runs" }
                style { (STYLE) }
            }
            body {
                h1 { "Comparison of " (c.rows.len()) " runs" }
                p { "Highlighted columns differ between runs." }
                table {
                    thead { tr {
                        @for (name, differs) in c.columns.iter().zip(&c.differs) {
                            th class=[differs.then_some("differs")] { (name) }
                        }
                    } }
                    tbody {
                        @for (i, row) in c.rows.iter().enumerate() {
                            tr class=[(i == 0 && c.baseline.is_some()).then_some("baseline")] {
                                @for (cell, differs) in row.iter().zip(&c.differs) {
                                    td class=(cell_class(cell, *differs)) { (cell) }
                                }
                            }
                        }
                    }
                }
                @if let Some(base) = &c.baseline {
                    @if c.regressions.is_empty() {
                        p { "No regression against the baseline " code { (base) } "." }
                    } @else {
                        h2 { "Regressions against the baseline " code { (base) } }
                        ul.regressions { @for r in &c.regressions { li { (r) } } }
                    }
                }
            }
        }
    };
    page.into_string()
}

/// CSS classes of a cell: highlighted when its column differs, coloured by verdict.
fn cell_class(cell: &str, differs: bool) -> String {
    let mut classes = Vec::new();
    if differs {
        classes.push("differs");
    }
    if cell.to_ascii_lowercase().starts_with("invalid") {
        classes.push("invalid");
    } else if cell == "valid" {
        classes.push("valid");
    }
    classes.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_cells_and_marks_differences() {
        let c = Comparison {
            columns: vec!["run".into(), "verdict".into()],
            rows: vec![
                vec!["<a>".into(), "valid".into()],
                vec!["b".into(), "invalid (G1c)".into()],
            ],
            differs: vec![false, true],
            baseline: Some("<a>".into()),
            regressions: vec!["b: verdict invalid where the baseline was valid".into()],
        };
        let page = render(&c);
        assert!(
            page.contains("&lt;a&gt;") && !page.contains("<a>"),
            "{page}"
        );
        assert!(
            page.contains(r#"<th class="differs">verdict</th>"#),
            "{page}"
        );
        assert!(
            page.contains(r#"<td class="differs invalid">invalid (G1c)</td>"#),
            "{page}"
        );
        assert!(page.contains("<li>b: verdict invalid where the baseline was valid</li>"));
    }
}
