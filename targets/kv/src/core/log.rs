//! The in-memory Raft log: a snapshot boundary plus the entries after it.

use super::Entry;

/// Log entries after a snapshot point. Index `snap_index` is the last index covered by the
/// snapshot (0 when there is none); `entries[k]` has index `snap_index + 1 + k`.
#[derive(Debug, Clone, Default)]
pub struct RaftLog {
    snap_index: u64,
    snap_term: u64,
    entries: Vec<Entry>,
}

impl RaftLog {
    /// A log restored from a snapshot point and the persisted entries. Entries at or below
    /// the snapshot are skipped; the rest must be contiguous (the first gap ends the log).
    pub fn new(snap_index: u64, snap_term: u64, persisted: Vec<Entry>) -> Self {
        let mut log = RaftLog {
            snap_index,
            snap_term,
            entries: Vec::new(),
        };
        for e in persisted {
            if e.index <= snap_index {
                continue;
            }
            if e.index != log.last_index() + 1 {
                break;
            }
            log.entries.push(e);
        }
        log
    }

    /// Index of the last entry covered by the snapshot.
    pub fn snap_index(&self) -> u64 {
        self.snap_index
    }

    /// Term of the last entry covered by the snapshot.
    pub fn snap_term(&self) -> u64 {
        self.snap_term
    }

    /// Index of the last entry (the snapshot index when the log is empty).
    pub fn last_index(&self) -> u64 {
        self.snap_index + self.entries.len() as u64
    }

    /// Term of the last entry.
    pub fn last_term(&self) -> u64 {
        self.entries.last().map_or(self.snap_term, |e| e.term)
    }

    /// Term of the entry at `index`, if known (known for the snapshot point too).
    pub fn term_at(&self, index: u64) -> Option<u64> {
        if index == self.snap_index {
            return Some(self.snap_term);
        }
        self.entry(index).map(|e| e.term)
    }

    /// The entry at `index`, if it is in the log (not compacted).
    pub fn entry(&self, index: u64) -> Option<&Entry> {
        if index <= self.snap_index {
            return None;
        }
        self.entries.get((index - self.snap_index - 1) as usize)
    }

    /// Up to `max` entries starting at `from` (which must be above the snapshot point).
    pub fn slice(&self, from: u64, max: usize) -> Vec<Entry> {
        if from <= self.snap_index {
            return Vec::new();
        }
        let start = (from - self.snap_index - 1) as usize;
        self.entries.iter().skip(start).take(max).cloned().collect()
    }

    /// All entries (after the snapshot point).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Removes the entry at `index` and everything after it.
    pub fn truncate_from(&mut self, index: u64) {
        if index <= self.snap_index {
            self.entries.clear();
            return;
        }
        self.entries
            .truncate((index - self.snap_index - 1) as usize);
    }

    /// Appends one entry; its index must be `last_index() + 1` (else it is ignored and
    /// `false` is returned).
    pub fn push(&mut self, entry: Entry) -> bool {
        if entry.index != self.last_index() + 1 {
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// Moves the snapshot point to `(index, term)`, keeping the entries after it. The
    /// caller guarantees the entries after `index` follow that point (Raft §7).
    pub fn compact_to(&mut self, index: u64, term: u64) {
        if index <= self.snap_index {
            return;
        }
        let drop = ((index - self.snap_index) as usize).min(self.entries.len());
        self.entries.drain(..drop);
        self.snap_index = index;
        self.snap_term = term;
    }

    /// Discards every entry and sets the snapshot point (an installed snapshot whose point
    /// this log does not contain).
    pub fn reset(&mut self, index: u64, term: u64) {
        self.entries.clear();
        self.snap_index = index;
        self.snap_term = term;
    }

    /// Raft §5.4.1: a candidate's log is at least as up to date as ours if its last term is
    /// higher, or the terms are equal and its log is at least as long.
    pub fn is_up_to_date(&self, last_index: u64, last_term: u64) -> bool {
        last_term > self.last_term()
            || (last_term == self.last_term() && last_index >= self.last_index())
    }

    /// First index (above the snapshot) holding the same term as the entry at `index`; a
    /// rejection hint that skips a whole conflicting term at once (Raft §5.3, the
    /// optimization at the end of the section).
    pub fn first_index_of_term(&self, index: u64) -> u64 {
        let Some(term) = self.term_at(index) else {
            return self.last_index() + 1;
        };
        let mut i = index;
        while i > self.snap_index + 1 && self.term_at(i - 1) == Some(term) {
            i -= 1;
        }
        i.max(self.snap_index + 1)
    }
}
