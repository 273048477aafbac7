//! Eventual-consistency checkers (work in progress).
