//! Jepsen EDN reader (to be written).

use super::ParseContext;
use crate::history::{HistoryError, Op};

pub(crate) fn read_edn(_text: &str, ctx: &ParseContext) -> Result<Vec<Op>, HistoryError> {
    Err(ctx.error(1, "EDN histories are not supported yet"))
}
