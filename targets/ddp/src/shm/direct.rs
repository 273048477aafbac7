//! The direct all-reduce over one shared mapping: every rank's gradient lives in its slot
//! of a file all ranks map, so rank `r` forms the sums of its own chunk `r` of every
//! bucket by reading that chunk from all `n` slots in one pass, and writes them once, over
//! its own input. Two barriers per all-reduce (inputs written; sums written) instead of the
//! ring's `2(n−1)` hand-offs, and no all-gather: a consumer reads chunk `c` of the result
//! straight from slot `c` ([`Reduced`]), or copies it out ([`Reduced::copy_to`]).
//!
//! Per element the order is the ring's ([`reference_average`]): chunk `c` of a bucket is
//! `((g_c + g_{c+1}) + …) + g_{c+n−1}`, divided once at the end, so the results are
//! bit-identical with [`BucketRing`], [`super::ring::ShmRing`] and the reference replay.
//!
//! Two banks of slots alternate by epoch, so a rank writes its next input while peers may
//! still read the last result from its other bank. Each rank publishes how far it got in
//! an arrival word of its own cache line; waits spin briefly, yield, then sleep on one
//! shared futex word (4 ranks on 2 cores: a spinning rank would starve the one it waits
//! for), each bounded: a dead or paused peer makes the others return
//! [`LinkError::Timeout`], never hang.
//!
//! [`reference_average`]: crate::core::ring::reference_average
//! [`BucketRing`]: crate::core::ring::BucketRing

use super::{fresh_file, notify, open_shared, wait_for, LinkError};
use crate::core::ring::chunk_range;
use memmap2::MmapMut;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

const MAGIC: u64 = u64::from_le_bytes(*b"SBGRPv01");
const PAGE: usize = 4096;
const LINE: usize = 64;
// Header: magic, world, floats in the first line; the futex word and the waiter
// flag on lines of their own; then one arrival line per rank.
const OFF_MAGIC: usize = 0;
const OFF_WORLD: usize = 8;
const OFF_FLOATS: usize = 16;
const OFF_SEQ: usize = LINE;
const OFF_WAITING: usize = 2 * LINE;
const OFF_ARRIVED: usize = 3 * LINE;

fn header_len(world: usize) -> usize {
    (OFF_ARRIVED + world * LINE).div_ceil(PAGE) * PAGE
}

fn slot_len(floats: usize) -> usize {
    (4 * floats).max(1).div_ceil(PAGE) * PAGE
}

fn file_len(world: usize, floats: usize) -> usize {
    header_len(world) + 2 * world * slot_len(floats)
}

/// Where one all-reduce's time went at this rank (for the benchmark's phase split).
#[derive(Debug, Default, Clone, Copy)]
pub struct PhaseTimes {
    /// Waiting for every rank's input.
    pub wait_inputs: Duration,
    /// Summing this rank's chunks.
    pub reduce: Duration,
    /// Waiting for every rank's sums.
    pub wait_sums: Duration,
}

/// One rank's view of a group's shared mapping.
pub struct ShmGroup {
    /// Keeps the mapping alive; `base` points into it.
    _map: MmapMut,
    base: *mut u8,
    rank: usize,
    world: usize,
    floats: usize,
    /// All-reduces started; the next one is `epoch + 1` and uses bank `(epoch + 1) % 2`.
    epoch: u64,
    timeout: Duration,
    path: PathBuf,
    /// The phase split of the last all-reduce.
    pub last: PhaseTimes,
}

// SAFETY: the mapping is owned memory; shared state is touched through atomics and
// through slot ranges the barriers give to one rank at a time.
unsafe impl Send for ShmGroup {}

impl ShmGroup {
    /// Makes a fresh group file at `path` for `world` ranks all-reducing up to `floats`
    /// f32 each (a temporary name renamed over whatever was there).
    pub fn create(path: &Path, world: usize, floats: usize) -> Result<(), LinkError> {
        let io = |source| LinkError::Io {
            path: path.to_path_buf(),
            source,
        };
        let world = world.max(1);
        let (file, tmp) = fresh_file(path, file_len(world, floats))?;
        // SAFETY: a file this process just made and nobody else has opened yet.
        let mut map = unsafe { MmapMut::map_mut(&file) }.map_err(io)?;
        let mut head = |off: usize, v: u64| map[off..off + 8].copy_from_slice(&v.to_le_bytes());
        head(OFF_WORLD, world as u64);
        head(OFF_FLOATS, floats as u64);
        head(OFF_MAGIC, MAGIC);
        map.flush().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        Ok(())
    }

    /// Maps the group file at `path` as `rank`, making it first if there is none (whoever
    /// of the ranks comes first: the file is linked into place only if the path is free,
    /// so all end up on the same one).
    pub fn create_or_open(
        path: &Path,
        world: usize,
        floats: usize,
        rank: usize,
        timeout: Duration,
    ) -> Result<ShmGroup, LinkError> {
        if !path.exists() {
            let made = path.with_extension(format!("new{}", std::process::id()));
            ShmGroup::create(&made, world, floats)?;
            let linked = std::fs::hard_link(&made, path);
            let _ = std::fs::remove_file(&made);
            match linked {
                Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                    return Err(LinkError::Io {
                        path: path.to_path_buf(),
                        source: e,
                    })
                }
                _ => {}
            }
        }
        ShmGroup::open(path, rank, timeout)
    }

    /// Maps the group file at `path` as `rank`; every wait bounded by `timeout`.
    pub fn open(path: &Path, rank: usize, timeout: Duration) -> Result<ShmGroup, LinkError> {
        let io = |source| LinkError::Io {
            path: path.to_path_buf(),
            source,
        };
        let bad = || LinkError::Format(path.to_path_buf());
        let file = open_shared(path)?;
        let len = file.metadata().map_err(io)?.len() as usize;
        if len < PAGE {
            return Err(bad());
        }
        // SAFETY: a group file only group code maps; peers change only the atomics and
        // the slots the protocol gives them. Populated: the page tables are filled once
        // here, not by a minor fault per page of every peer's slot in the first rounds.
        let mut map =
            unsafe { memmap2::MmapOptions::new().populate().map_mut(&file) }.map_err(io)?;
        let word = |off: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&map[off..off + 8]);
            u64::from_le_bytes(b) as usize
        };
        let (world, floats) = (word(OFF_WORLD), word(OFF_FLOATS));
        if word(OFF_MAGIC) as u64 != MAGIC
            || world == 0
            || rank >= world
            || header_len(world) > len
            || file_len(world, floats) != len
        {
            return Err(bad());
        }
        let base = map.as_mut_ptr();
        let g = ShmGroup {
            _map: map,
            base,
            rank,
            world,
            floats,
            epoch: 0,
            timeout,
            path: path.to_path_buf(),
            last: PhaseTimes::default(),
        };
        // A rank that attaches again starts where its peers are, not at zero.
        let arrived = g.arrived(rank).load(SeqCst);
        let mut g = g;
        g.epoch = arrived / 2;
        Ok(g)
    }

    /// The group file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// f32 per rank the group all-reduces.
    pub fn floats(&self) -> usize {
        self.floats
    }

    fn word32(&self, off: usize) -> &AtomicU32 {
        // SAFETY: a fixed, 4-aligned header offset inside the page-aligned mapping.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    /// Rank `r`'s arrival word: `2e + 1` once its input of epoch `e` is written, `2e + 2`
    /// once its sums of epoch `e` are.
    fn arrived(&self, r: usize) -> &AtomicU64 {
        // SAFETY: `r < world`, so the line is inside the header; 8-aligned.
        unsafe { &*(self.base.add(OFF_ARRIVED + r * LINE) as *const AtomicU64) }
    }

    fn slot_ptr(&self, epoch: u64, r: usize) -> *mut f32 {
        let bank = (epoch % 2) as usize;
        let off = header_len(self.world) + (bank * self.world + r) * slot_len(self.floats);
        // SAFETY: inside the mapping by `file_len`; page-aligned, so 4-aligned.
        unsafe { self.base.add(off) as *mut f32 }
    }

    /// This rank's input for the next all-reduce, to be filled in place (where backward
    /// would write its gradient). Peers read it only after [`ShmGroup::allreduce`] says so.
    pub fn input(&mut self) -> &mut [f32] {
        // SAFETY: this rank's slot of the next epoch's bank: peers stopped reading it
        // before they arrived at the end of the last epoch (which the last all-reduce
        // waited for), and start again only after this rank arrives with its input.
        unsafe {
            std::slice::from_raw_parts_mut(self.slot_ptr(self.epoch + 1, self.rank), self.floats)
        }
    }

    /// Publishes this rank's arrival at `phase` and waits until every rank got there.
    fn barrier(&self, phase: u64) -> Result<(), LinkError> {
        self.arrived(self.rank).store(phase, SeqCst);
        let (seq, waiting) = (self.word32(OFF_SEQ), self.word32(OFF_WAITING));
        notify(seq, waiting);
        wait_for(
            seq,
            waiting,
            self.timeout,
            || {
                (0..self.world)
                    .all(|r| self.arrived(r).load(SeqCst) >= phase)
                    .then_some(())
            },
            || Ok(()),
        )
    }

    /// All-reduces the `buckets` (ranges of the inputs every rank wrote through
    /// [`ShmGroup::input`], each cut into `world` chunks as the ring cuts a bucket; the same
    /// at every rank), dividing the sums by `divisor`; the result stays in the mapping
    /// until this rank's next all-reduce. `Timeout` if a peer did not arrive within the
    /// bound (the group is then unusable: make a new one).
    pub fn allreduce<'a>(
        &'a mut self,
        buckets: &'a [Range<usize>],
        divisor: usize,
    ) -> Result<Reduced<'a>, LinkError> {
        let e = self.epoch + 1;
        self.epoch = e;
        let t0 = Instant::now();
        self.barrier(2 * e - 1)?;
        let t1 = Instant::now();
        self.reduce_own_chunks(e, buckets, divisor.max(1) as f32);
        let t2 = Instant::now();
        self.barrier(2 * e)?;
        self.last = PhaseTimes {
            wait_inputs: t1 - t0,
            reduce: t2 - t1,
            wait_sums: t2.elapsed(),
        };
        Ok(Reduced {
            g: self,
            buckets,
            epoch: e,
        })
    }

    /// `b` cut to the slot (a range past it would read another slot).
    fn clip(&self, b: &Range<usize>) -> Range<usize> {
        b.start.min(self.floats)..b.end.min(self.floats).max(b.start.min(self.floats))
    }

    /// Arrives with this rank's input and goes no further: a rank that dies between the
    /// barriers, for the tests of its peers' bounded waits.
    #[cfg(test)]
    pub(super) fn arrive_with_input_only(&mut self) {
        self.epoch += 1;
        self.arrived(self.rank).store(2 * self.epoch - 1, SeqCst);
        notify(self.word32(OFF_SEQ), self.word32(OFF_WAITING));
    }

    /// Sums chunk `rank` of every bucket over all slots in the ring's order and writes the
    /// sums over this rank's own input.
    fn reduce_own_chunks(&self, e: u64, buckets: &[Range<usize>], scale: f32) {
        let (rank, world) = (self.rank, self.world);
        for b in buckets {
            let b = self.clip(b);
            let chunk = chunk_range(b.len(), world, rank);
            let (at, n) = (b.start + chunk.start, chunk.len());
            // SAFETY: between the two barriers only this rank writes chunk `rank` of its
            // slot, and nobody writes the other slots' chunk `rank`; `at + n <= floats`.
            let own = unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(e, rank).add(at), n) };
            let peers: Vec<&[f32]> = (1..world)
                .map(|k| {
                    let peer = (rank + k) % world;
                    // SAFETY: as above; a peer's slot is only read in this phase.
                    unsafe { std::slice::from_raw_parts(self.slot_ptr(e, peer).add(at), n) }
                })
                .collect();
            sum_in_order(own, &peers, scale);
        }
    }
}

/// `own = (((own + p_0) + p_1) + …) / scale`, element by element in exactly that order
/// (so bit-identical with the ring), up to three inputs fused per pass: one pass reading
/// four streams runs about twice as fast as blocked passes over one input at a time.
pub fn sum_in_order(own: &mut [f32], peers: &[&[f32]], scale: f32) {
    if peers.is_empty() {
        own.iter_mut().for_each(|o| *o /= scale);
    }
    let passes = peers.len().div_ceil(3);
    for (i, group) in peers.chunks(3).enumerate() {
        let last = i + 1 == passes;
        match (group, last) {
            ([a], false) => own.iter_mut().zip(*a).for_each(|(o, a)| *o += *a),
            ([a], true) => own
                .iter_mut()
                .zip(*a)
                .for_each(|(o, a)| *o = (*o + *a) / scale),
            ([a, b], false) => own
                .iter_mut()
                .zip(a.iter().zip(*b))
                .for_each(|(o, (a, b))| *o = (*o + *a) + *b),
            ([a, b], true) => own
                .iter_mut()
                .zip(a.iter().zip(*b))
                .for_each(|(o, (a, b))| *o = ((*o + *a) + *b) / scale),
            ([a, b, c], false) => own
                .iter_mut()
                .zip(a.iter().zip(b.iter().zip(*c)))
                .for_each(|(o, (a, (b, c)))| *o = ((*o + *a) + *b) + *c),
            ([a, b, c], true) => own
                .iter_mut()
                .zip(a.iter().zip(b.iter().zip(*c)))
                .for_each(|(o, (a, (b, c)))| *o = (((*o + *a) + *b) + *c) / scale),
            _ => {}
        }
    }
}

/// The result of one all-reduce, read in place: chunk `c` of every bucket is in rank
/// `c`'s slot.
pub struct Reduced<'a> {
    g: &'a ShmGroup,
    buckets: &'a [Range<usize>],
    epoch: u64,
}

impl Reduced<'_> {
    /// The result as pieces `(offset, values)`, bucket by bucket and chunk by chunk, each
    /// read straight from the slot of the rank that summed it.
    pub fn pieces(&self) -> impl Iterator<Item = (usize, &[f32])> + '_ {
        let g = self.g;
        self.buckets.iter().flat_map(move |b| {
            let b = g.clip(b);
            (0..g.world).map(move |c| {
                let r = chunk_range(b.len(), g.world, c);
                let at = b.start + r.start;
                // SAFETY: chunk `c` of rank `c`'s slot holds final sums after the second
                // barrier, and stays unchanged until this rank's next all-reduce (rank
                // `c` rewrites this bank two epochs on, after everyone arrived at the
                // next one).
                let v = unsafe {
                    std::slice::from_raw_parts(g.slot_ptr(self.epoch, c).add(at), r.len())
                };
                (at, v)
            })
        })
    }

    /// Copies the result into `out` at the same offsets (what fits).
    pub fn copy_to(&self, out: &mut [f32]) {
        for (at, v) in self.pieces() {
            if at >= out.len() {
                continue;
            }
            let n = v.len().min(out.len() - at);
            out[at..at + n].copy_from_slice(&v[..n]);
        }
    }
}
