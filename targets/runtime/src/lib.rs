//! Runtime shared by the bundled targets.
