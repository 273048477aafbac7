//! splitbrain reference system 4: a DDP training cluster (work in progress).
