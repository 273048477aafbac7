//! Reports of splitbrain runs.
