//! JSON Lines writer: one op per line, the native history format.

use super::Op;
use std::io::{self, Write};

/// Writes one op as a JSON line (with the trailing newline).
pub fn write_op_line<W: Write>(out: &mut W, op: &Op) -> io::Result<()> {
    serde_json::to_writer(&mut *out, op).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

/// Writes every op as JSON Lines.
pub fn write_json_lines<'a, W: Write>(
    out: &mut W,
    ops: impl IntoIterator<Item = &'a Op>,
) -> io::Result<()> {
    for op in ops {
        write_op_line(out, op)?;
    }
    Ok(())
}
