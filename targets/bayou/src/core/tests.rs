//! Unit tests of the replica core (filled below).
