//! Bank checker (in progress).
