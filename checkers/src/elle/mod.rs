//! Elle-style transactional checking (in progress).
