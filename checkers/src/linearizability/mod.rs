//! Linearizability checking (in progress).
