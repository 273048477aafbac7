//! The direct all-reduce over one shared mapping: every rank's gradient lives in its slot
//! of a file all ranks map, so chunk `c` of a bucket is summed by reading that chunk from
//! all `n` slots in one pass and written once, over slot `c`'s input. One meeting per
//! all-reduce (every input written) instead of the ring's `2(n−1)` hand-offs; then the
//! ranks take chunks from a shared counter until none is left (with more ranks than
//! cores, the ranks that are running do the work) and wait until every chunk is finished.
//! No all-gather: a consumer reads chunk `c` of the result straight from slot `c`
//! ([`Reduced`]), or copies it out ([`Reduced::copy_to`]).
//!
//! Per element the order is the ring's ([`reference_average`]): chunk `c` of a bucket is
//! `((g_c + g_{c+1}) + …) + g_{c+n−1}`, divided once at the end, so the results are
//! bit-identical with [`BucketRing`], [`super::ring::ShmRing`] and the reference replay.
//!
//! Two banks of slots alternate by all-reduce, so a rank writes its next input while peers
//! may still read the last result from its other bank (a bank is rewritten only after
//! every rank arrived at the next all-reduce, so had done with the last one). Each rank
//! publishes its arrivals in a word of its own cache line; waits spin briefly, yield, then
//! sleep on one shared futex word (4 ranks on 2 cores: a spinning rank would starve the one it waits
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
/// How often a wait asks its caller whether to go on.
pub const WAIT_SLICE: Duration = Duration::from_millis(2);
const LINE: usize = 64;
// Header: magic, world, floats in the first line; the futex word and the waiter
// flag on lines of their own; then one arrival line per rank.
const OFF_MAGIC: usize = 0;
const OFF_WORLD: usize = 8;
const OFF_FLOATS: usize = 16;
const OFF_SEQ: usize = LINE;
const OFF_WAITING: usize = 2 * LINE;
/// Chunks taken and chunks finished, counted over the group's life.
const OFF_CLAIMED: usize = 3 * LINE;
const OFF_DONE: usize = 4 * LINE;
const OFF_ARRIVED: usize = 5 * LINE;

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
    /// Summing the chunks this rank took.
    pub reduce: Duration,
    /// Waiting for the chunks other ranks took.
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
// through slot ranges the arrivals and the chunk counter give to one rank at a time.
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
        g.epoch = arrived;
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

    /// Rank `r`'s arrival word: `e` once its input of all-reduce `e` is written.
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

    fn word64(&self, off: usize) -> &AtomicU64 {
        // SAFETY: a fixed, 8-aligned header offset inside the page-aligned mapping.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    /// Waits (bounded) until `ready` holds, woken by the group's futex word; every
    /// [`WAIT_SLICE`] asks `keep_waiting` (which may do other work) whether to go on.
    fn wait_until(
        &self,
        ready: impl Fn() -> bool,
        keep_waiting: &mut impl FnMut() -> bool,
    ) -> Result<(), LinkError> {
        let (seq, waiting) = (self.word32(OFF_SEQ), self.word32(OFF_WAITING));
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match wait_for(
                seq,
                waiting,
                left.min(WAIT_SLICE),
                || ready().then_some(()),
                || Ok(()),
            ) {
                Err(LinkError::Timeout(_)) if !left.is_zero() => {
                    if !keep_waiting() {
                        return Err(LinkError::Cancelled);
                    }
                }
                Err(LinkError::Timeout(_)) => return Err(LinkError::Timeout(self.timeout)),
                other => return other,
            }
        }
    }

    fn wake(&self) {
        notify(self.word32(OFF_SEQ), self.word32(OFF_WAITING));
    }

    /// All-reduces the `buckets` (ranges of the inputs every rank wrote through
    /// [`ShmGroup::input`], each cut into `world` chunks as the ring cuts a bucket; the same
    /// at every rank), dividing the sums by `divisor`; the result stays in the mapping
    /// until this rank's next all-reduce. `Timeout` if a peer did not arrive, or a chunk
    /// a peer took was not finished, within the bound (the group is then unusable: make a
    /// new one).
    ///
    /// The chunks are shared out by a counter rather than by rank: whichever ranks are
    /// running take the next chunk until none is left, so with more ranks than cores a
    /// rank that is not scheduled holds nobody up once it has arrived with its input (the
    /// sums do not depend on who forms them: the order is the chunk's).
    pub fn allreduce<'a>(
        &'a mut self,
        buckets: &'a [Range<usize>],
        divisor: usize,
    ) -> Result<Reduced<'a>, LinkError> {
        self.allreduce_with(buckets, divisor, || true)
    }

    /// [`ShmGroup::allreduce`], asking `keep_waiting` every [`WAIT_SLICE`] of a wait
    /// whether to go on (a node answers its peers' messages there); `Cancelled` when it
    /// says no (the group is then unusable, as after a timeout).
    pub fn allreduce_with<'a>(
        &'a mut self,
        buckets: &'a [Range<usize>],
        divisor: usize,
        mut keep_waiting: impl FnMut() -> bool,
    ) -> Result<Reduced<'a>, LinkError> {
        let e = self.epoch + 1;
        self.epoch = e;
        let t0 = Instant::now();
        self.arrived(self.rank).store(e, SeqCst);
        self.wake();
        self.wait_until(
            || (0..self.world).all(|r| self.arrived(r).load(SeqCst) >= e),
            &mut keep_waiting,
        )?;
        let t1 = Instant::now();
        // Chunks of all-reduce `e` are numbers `(e - 1) T .. e T`; every earlier one was
        // finished before any rank got past the arrivals above.
        let per = (buckets.len() * self.world) as u64;
        let (first, end) = ((e - 1) * per, e * per);
        let (claimed, done) = (self.word64(OFF_CLAIMED), self.word64(OFF_DONE));
        let scale = divisor.max(1) as f32;
        loop {
            let k = claimed.load(SeqCst);
            if k >= end {
                break;
            }
            if claimed.compare_exchange(k, k + 1, SeqCst, SeqCst).is_err() {
                continue;
            }
            let item = (k - first) as usize;
            self.reduce_chunk(e, &buckets[item / self.world], item % self.world, scale);
            if done.fetch_add(1, SeqCst) + 1 == end {
                self.wake();
            }
        }
        let t2 = Instant::now();
        self.wait_until(|| done.load(SeqCst) >= end, &mut keep_waiting)?;
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

    /// Arrives with this rank's input, takes a chunk and goes no further: a rank that
    /// dies in the middle of an all-reduce, for the tests of its peers' bounded waits.
    #[cfg(test)]
    pub(super) fn arrive_and_take_a_chunk(&mut self) {
        self.epoch += 1;
        // Taken before arriving, so the peers cannot have taken every chunk already.
        self.word64(OFF_CLAIMED).fetch_add(1, SeqCst);
        self.arrived(self.rank).store(self.epoch, SeqCst);
        self.wake();
    }

    /// Sums chunk `c` of bucket `b` over all slots in the ring's order (from rank `c` on)
    /// and writes the sums over rank `c`'s input of it.
    fn reduce_chunk(&self, e: u64, b: &Range<usize>, c: usize, scale: f32) {
        let world = self.world;
        let b = self.clip(b);
        let chunk = chunk_range(b.len(), world, c);
        let (at, n) = (b.start + chunk.start, chunk.len());
        // SAFETY: between the arrivals and the last chunk's completion only the rank that
        // took chunk `c` of `b` (this one) writes it, in slot `c`, and nobody writes the
        // other slots' chunk; `at + n <= floats`.
        let own = unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(e, c).add(at), n) };
        let peers: Vec<&[f32]> = (1..world)
            .map(|k| {
                // SAFETY: as above; the other slots' chunk is only read in this phase.
                unsafe { std::slice::from_raw_parts(self.slot_ptr(e, (c + k) % world).add(at), n) }
            })
            .collect();
        sum_in_order(own, &peers, scale);
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
                // SAFETY: chunk `c` of rank `c`'s slot holds final sums once every chunk is
                // finished, and stays unchanged until this rank's next all-reduce (rank
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
