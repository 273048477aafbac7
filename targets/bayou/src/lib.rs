//! splitbrain reference system 2: a Bayou replica group (work in progress).
