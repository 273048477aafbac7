//! The DDP replica-consistency checker (work in progress).
