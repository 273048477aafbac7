//! Jepsen text log reader (to be written).

use super::ParseContext;
use crate::history::{HistoryError, Op};

pub(crate) fn read_jepsen_log(_text: &str, ctx: &ParseContext) -> Result<Vec<Op>, HistoryError> {
    Err(ctx.error(1, "Jepsen text logs are not supported yet"))
}
