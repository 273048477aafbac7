//! Shared-memory links between ranks on one host: the transport that replaces loopback
//! TCP when every rank runs on the same machine (as NCCL's intra-node transport does).
//!
//! A link carries bytes one way, from one writer process to one reader process, through
//! a file (normally in `/dev/shm`) that both map: a page of header, then a ring of
//! `capacity` bytes. The header holds the positions (bytes written and read since the
//! file was made, `u64`, never wrapping) and the futex words both sides sleep on; each
//! hot word sits on its own cache line. A side first spins briefly (on 2 cores with 4
//! ranks pure spinning would starve the peer it waits for), then sleeps on a futex
//! (without `FUTEX_PRIVATE_FLAG`, so it works across processes), every wait bounded.
//!
//! The reader owns the file: it makes a fresh one at start (write to a temporary name,
//! rename over the link's path) and marks the file it replaces *abandoned*, so a writer
//! still mapping the old one notices and reopens the path. A writer starts a *session*
//! on every attach (and after a write it gave up half way): it records where the session
//! starts and bumps the session number, and the reader drops whatever it was in the middle
//! of and goes on from there, as a receiver does with a new TCP connection. A killed peer
//! therefore costs the other side no more than a bounded wait ([`LinkError::Timeout`]).
//!
//! [`LinkWriter::writable`] and [`LinkReader::readable`] hand out the ring's bytes in place,
//! so the ring all-reduce ([`ring`]) reduces straight from the peer's bytes into the
//! bytes for the next peer; [`frames`] carries the node's messages in the TCP framing.
//! [`direct`] is the all-reduce over one mapping all ranks share (no links: each rank sums
//! chunks from every rank's slot, one meeting per all-reduce).

pub mod direct;
pub mod frames;
pub mod generations;
pub mod ring;

use memmap2::MmapMut;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

const MAGIC: u64 = u64::from_le_bytes(*b"SBSHMv01");
/// Header size: one page, so the ring is page-aligned (and 4-aligned for f32 access).
const HEADER: usize = 4096;
// Header offsets: the fields one side writes often each get a cache line of their own.
const OFF_MAGIC: usize = 0;
const OFF_CAPACITY: usize = 8;
const OFF_ABANDONED: usize = 16;
const OFF_RESYNC: usize = 20;
const OFF_SESSION: usize = 24;
const OFF_SESSION_START: usize = 32;
const OFF_WRITE_POS: usize = 64;
const OFF_DATA_SEQ: usize = 72;
const OFF_READ_POS: usize = 128;
const OFF_SPACE_SEQ: usize = 136;
const OFF_READER_WAITING: usize = 192;
const OFF_WRITER_WAITING: usize = 256;

/// Spins (with the CPU's spin hint) before a wait yields, then sleeps on the futex.
const SPINS: u32 = 200;
/// Yields to the scheduler (another rank may be the one to make progress) before a
/// wait sleeps on the futex.
const YIELDS: u32 = 4;
/// Longest single futex sleep: bounds the cost of a lost wake-up (impossible by the
/// protocol: new data, space, sessions and abandoned files all come with one).
const MAX_SLEEP: Duration = Duration::from_millis(250);

/// What can go wrong on a link.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The link file could not be made, opened or mapped.
    #[error("shared-memory link {path}: {source}")]
    Io {
        /// The link's file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a link (bad magic or size).
    #[error("shared-memory link {0}: not a link file (bad magic or size)")]
    Format(PathBuf),
    /// The peer did not move within the bound (dead, paused or slow).
    #[error("shared-memory link: the peer did not move within {0:?}")]
    Timeout(Duration),
    /// The writer started a new session; the reader dropped what it was reading.
    #[error("shared-memory link: the writer started a new session")]
    Reset,
    /// Link bytes handed out for f32 were not 4-aligned (a writer wrote a partial f32).
    #[error("shared-memory link: f32 data not 4-aligned in the ring")]
    Misaligned,
    /// The reader replaced the file (it restarted); the writer must reopen the path.
    #[error("shared-memory link: the reader replaced the link file")]
    Abandoned,
    /// The caller of a group all-reduce stopped waiting (its protocol moved on).
    #[error("shared-memory all-reduce: the caller stopped waiting")]
    Cancelled,
}

/// A fresh file of `len` bytes beside `path`, under a temporary name the caller renames
/// over `path` once it is filled (so nobody opens it half made): the file and that name.
fn fresh_file(path: &Path, len: usize) -> Result<(std::fs::File, PathBuf), LinkError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let io = |source| LinkError::Io {
        path: tmp.clone(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io)?;
    file.set_len(len as u64).map_err(io)?;
    Ok((file, tmp))
}

/// Opens an existing shared file (a link or a group) for reading and writing.
fn open_shared(path: &Path) -> Result<std::fs::File, LinkError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|source| LinkError::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// One side's mapping of a link file.
struct Mapping {
    /// Keeps the mapping alive; `base` points into it.
    _map: MmapMut,
    base: *mut u8,
    capacity: usize,
    path: PathBuf,
}

// SAFETY: the mapping is owned memory; shared state is only touched through atomics
// and through byte ranges the SPSC protocol gives to one side at a time.
unsafe impl Send for Mapping {}

impl Mapping {
    fn map(file: &std::fs::File, path: &Path) -> Result<Mapping, LinkError> {
        let io = |source| LinkError::Io {
            path: path.to_path_buf(),
            source,
        };
        let len = file.metadata().map_err(io)?.len() as usize;
        if len <= HEADER {
            return Err(LinkError::Format(path.to_path_buf()));
        }
        // SAFETY: the file is a link file that only link code maps; concurrent changes by
        // the peer are confined to the atomics and to ring bytes the protocol hands over.
        let mut map = unsafe { MmapMut::map_mut(file) }.map_err(io)?;
        let base = map.as_mut_ptr();
        Ok(Mapping {
            _map: map,
            base,
            capacity: len - HEADER,
            path: path.to_path_buf(),
        })
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is a fixed, 8-aligned header offset inside the page-aligned map.
        unsafe { &*(self.base.add(off) as *const AtomicU64) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as `u64_at`, 4-aligned.
        unsafe { &*(self.base.add(off) as *const AtomicU32) }
    }

    fn valid(&self) -> bool {
        self.u64_at(OFF_MAGIC).load(SeqCst) == MAGIC
            && self.u64_at(OFF_CAPACITY).load(SeqCst) == self.capacity as u64
    }

    /// `len` ring bytes starting at ring offset `off` (the caller keeps it in the ring).
    fn bytes(&self, off: usize, len: usize) -> *mut u8 {
        debug_assert!(off + len <= self.capacity);
        // SAFETY: in bounds of the mapping by the caller's contract.
        unsafe { self.base.add(HEADER + off) }
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a futex wait on a live, aligned u32 of a shared mapping; no private flag,
    // so a waker in another process reaches it. EAGAIN/ETIMEDOUT/EINTR just return.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: as `futex_wait`.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Bumps `seq` and wakes whoever sleeps on it (only if someone said it waits).
fn notify(seq: &AtomicU32, waiting: &AtomicU32) {
    seq.fetch_add(1, SeqCst);
    if waiting.swap(0, SeqCst) != 0 {
        futex_wake(seq);
    }
}

/// Waits until `ready()` gives `Some`, or `check()` an error, or `timeout` passes: spins,
/// yields, then sleeps on `seq` having said so in `waiting`.
fn wait_for<T>(
    seq: &AtomicU32,
    waiting: &AtomicU32,
    timeout: Duration,
    mut ready: impl FnMut() -> Option<T>,
    mut check: impl FnMut() -> Result<(), LinkError>,
) -> Result<T, LinkError> {
    for _ in 0..SPINS {
        if let Some(v) = ready() {
            return Ok(v);
        }
        std::hint::spin_loop();
    }
    for _ in 0..YIELDS {
        if let Some(v) = ready() {
            return Ok(v);
        }
        std::thread::yield_now();
    }
    let deadline = Instant::now() + timeout;
    loop {
        check()?;
        let seen = seq.load(SeqCst);
        waiting.store(1, SeqCst);
        // Checked after announcing the wait: a change published before the waker looked
        // at `waiting` is seen here, one published after it comes with a wake-up.
        if let Some(v) = ready() {
            return Ok(v);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(LinkError::Timeout(timeout));
        }
        futex_wait(seq, seen, (deadline - now).min(MAX_SLEEP));
    }
}

/// The reading end of a link; made by the reader, which owns the file.
pub struct LinkReader {
    m: Mapping,
    /// Bytes consumed (mirrors the header's read position).
    pos: u64,
    /// The writer's session this reader follows.
    session: u32,
    /// Whether anything was consumed in this session (a new session then voids it).
    consumed: bool,
}

impl LinkReader {
    /// Makes a fresh link file at `path` with a ring of `capacity` bytes (rounded up to a
    /// multiple of 4096), replacing and marking abandoned any file there.
    pub fn create(path: &Path, capacity: usize) -> Result<LinkReader, LinkError> {
        let io = |source| LinkError::Io {
            path: path.to_path_buf(),
            source,
        };
        let capacity = capacity.max(1).div_ceil(4096) * 4096;
        let (file, tmp) = fresh_file(path, HEADER + capacity)?;
        let m = Mapping::map(&file, path)?;
        m.u64_at(OFF_CAPACITY).store(capacity as u64, SeqCst);
        m.u64_at(OFF_MAGIC).store(MAGIC, SeqCst);
        // The old file's writer must learn that nobody reads it any more.
        if let Ok(old) = open_shared(path) {
            if let Ok(old) = Mapping::map(&old, path) {
                if old.valid() {
                    old.u32_at(OFF_ABANDONED).store(1, SeqCst);
                    futex_wake(old.u32_at(OFF_SPACE_SEQ));
                }
            }
        }
        std::fs::rename(&tmp, path).map_err(io)?;
        Ok(LinkReader {
            m,
            pos: 0,
            session: 0,
            consumed: false,
        })
    }

    /// The link file.
    pub fn path(&self) -> &Path {
        &self.m.path
    }

    /// False once the file was removed or replaced by a newer reader: nobody will write
    /// to this mapping any more, so a receiver can stop.
    pub fn is_current(&self) -> bool {
        self.m.u32_at(OFF_ABANDONED).load(SeqCst) == 0 && self.m.path.exists()
    }

    /// Follows a new writer session if one began: drops everything before its start.
    /// `Reset` if that voids anything (bytes consumed in the old session or skipped);
    /// a first writer attaching to a link nobody has written yet voids nothing.
    fn follow_session(&mut self) -> Result<(), LinkError> {
        let s = self.m.u32_at(OFF_SESSION).load(SeqCst);
        if s == self.session {
            return Ok(());
        }
        self.session = s;
        let start = self.m.u64_at(OFF_SESSION_START).load(SeqCst);
        let voids = self.consumed || start != self.pos;
        self.pos = start;
        self.consumed = false;
        self.m.u64_at(OFF_READ_POS).store(self.pos, SeqCst);
        self.m.u32_at(OFF_RESYNC).store(0, SeqCst);
        notify(
            self.m.u32_at(OFF_SPACE_SEQ),
            self.m.u32_at(OFF_WRITER_WAITING),
        );
        if voids {
            Err(LinkError::Reset)
        } else {
            Ok(())
        }
    }

    /// Waits until at least `min(need, bytes to the ring's end)` bytes are readable and
    /// returns them in place, up to `max`; [`LinkReader::consume`] then gives them back.
    /// `Reset` if the writer started a new session (what was read of a message is void).
    pub fn readable(
        &mut self,
        need: usize,
        max: usize,
        timeout: Duration,
    ) -> Result<&[u8], LinkError> {
        self.follow_session()?;
        let cap = self.m.capacity;
        let off = (self.pos % cap as u64) as usize;
        let contiguous = max.min(cap - off);
        let need = need.min(contiguous).max(1) as u64;
        let pos = self.pos;
        let m = &self.m;
        let session = self.session;
        let n = wait_for(
            m.u32_at(OFF_DATA_SEQ),
            m.u32_at(OFF_READER_WAITING),
            timeout,
            || {
                if m.u32_at(OFF_SESSION).load(SeqCst) != session {
                    return Some(0);
                }
                let avail = m.u64_at(OFF_WRITE_POS).load(SeqCst).wrapping_sub(pos);
                (avail >= need && avail <= cap as u64).then(|| (avail as usize).min(contiguous))
            },
            || Ok(()),
        )?;
        if n == 0 {
            // A new session began during the wait: follow it and wait there.
            self.follow_session()?;
            return self.readable(need as usize, max, timeout);
        }
        // SAFETY: bytes [pos, pos + n) are published by the writer and not reused by it
        // until `consume` moves the read position past them.
        Ok(unsafe { std::slice::from_raw_parts(self.m.bytes(off, n), n) })
    }

    /// Gives back `n` bytes handed out by [`LinkReader::readable`].
    pub fn consume(&mut self, n: usize) {
        self.consumed |= n > 0;
        self.pos += n as u64;
        self.m.u64_at(OFF_READ_POS).store(self.pos, SeqCst);
        notify(
            self.m.u32_at(OFF_SPACE_SEQ),
            self.m.u32_at(OFF_WRITER_WAITING),
        );
    }

    /// After a malformed message: asks the writer for a new session and skips bytes
    /// until it starts one (`Ok` then), or `timeout` passes.
    pub fn resync(&mut self, timeout: Duration) -> Result<(), LinkError> {
        self.m.u32_at(OFF_RESYNC).store(1, SeqCst);
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.readable(1, usize::MAX, left.min(MAX_SLEEP)) {
                Ok(b) => {
                    let n = b.len();
                    self.consume(n);
                }
                Err(LinkError::Reset) => return Ok(()),
                Err(LinkError::Timeout(_)) if !left.is_zero() => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The writing end of a link; opens the file the reader made.
pub struct LinkWriter {
    m: Mapping,
    /// Bytes written (mirrors the header's write position).
    pos: u64,
}

impl LinkWriter {
    /// Opens the link at `path` and starts a session there.
    pub fn open(path: &Path) -> Result<LinkWriter, LinkError> {
        let file = open_shared(path)?;
        let m = Mapping::map(&file, path)?;
        if !m.valid() {
            return Err(LinkError::Format(path.to_path_buf()));
        }
        let pos = m.u64_at(OFF_WRITE_POS).load(SeqCst);
        let mut w = LinkWriter { m, pos };
        w.new_session();
        Ok(w)
    }

    /// Starts a new session at the current position: the reader drops any message this
    /// writer (or an earlier writer of the file) left half written.
    pub fn new_session(&mut self) {
        self.m.u32_at(OFF_RESYNC).store(0, SeqCst);
        self.m.u64_at(OFF_SESSION_START).store(self.pos, SeqCst);
        self.m.u32_at(OFF_SESSION).fetch_add(1, SeqCst);
        notify(
            self.m.u32_at(OFF_DATA_SEQ),
            self.m.u32_at(OFF_READER_WAITING),
        );
    }

    /// `Abandoned` once the reader replaced the file; `Reset` if it asked for a new
    /// session (it saw a malformed message).
    fn check(&self) -> Result<(), LinkError> {
        if self.m.u32_at(OFF_ABANDONED).load(SeqCst) != 0 {
            return Err(LinkError::Abandoned);
        }
        if self.m.u32_at(OFF_RESYNC).load(SeqCst) != 0 {
            return Err(LinkError::Reset);
        }
        Ok(())
    }

    /// Waits until at least `min(want, bytes to the ring's end)` bytes are free and
    /// returns them in place, up to `want`, to be filled and then published by
    /// [`LinkWriter::commit`].
    pub fn writable(&mut self, want: usize, timeout: Duration) -> Result<&mut [u8], LinkError> {
        self.check()?;
        let cap = self.m.capacity;
        let off = (self.pos % cap as u64) as usize;
        let contiguous = want.min(cap - off);
        let need = contiguous.max(1) as u64;
        let pos = self.pos;
        let m = &self.m;
        let n = wait_for(
            m.u32_at(OFF_SPACE_SEQ),
            m.u32_at(OFF_WRITER_WAITING),
            timeout,
            || {
                let used = pos.wrapping_sub(m.u64_at(OFF_READ_POS).load(SeqCst));
                let free = (cap as u64).saturating_sub(used);
                (free >= need).then(|| (free as usize).min(contiguous))
            },
            || self.check(),
        )?;
        // SAFETY: bytes [pos, pos + n) were consumed by the reader (or never written) and
        // are not read by it until `commit` publishes them.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.m.bytes(off, n), n) })
    }

    /// Publishes `n` bytes filled after [`LinkWriter::writable`]. `Abandoned` if the
    /// reader has replaced the file meanwhile (the bytes went nowhere).
    pub fn commit(&mut self, n: usize) -> Result<(), LinkError> {
        self.pos += n as u64;
        self.m.u64_at(OFF_WRITE_POS).store(self.pos, SeqCst);
        notify(
            self.m.u32_at(OFF_DATA_SEQ),
            self.m.u32_at(OFF_READER_WAITING),
        );
        if self.m.u32_at(OFF_ABANDONED).load(SeqCst) != 0 {
            return Err(LinkError::Abandoned);
        }
        Ok(())
    }

    /// Writes all of `bytes`, each wait bounded by `timeout`.
    pub fn write_all(&mut self, mut bytes: &[u8], timeout: Duration) -> Result<(), LinkError> {
        while !bytes.is_empty() {
            let room = self.writable(bytes.len(), timeout)?;
            let n = room.len();
            room.copy_from_slice(&bytes[..n]);
            self.commit(n)?;
            bytes = &bytes[n..];
        }
        Ok(())
    }
}

/// Reads all of `out`, each wait bounded by `timeout`.
pub fn read_exact(
    r: &mut LinkReader,
    mut out: &mut [u8],
    timeout: Duration,
) -> Result<(), LinkError> {
    while !out.is_empty() {
        let got = r.readable(out.len(), out.len(), timeout)?;
        let n = got.len();
        out[..n].copy_from_slice(got);
        r.consume(n);
        out = &mut out[n..];
    }
    Ok(())
}

/// The file of the link from rank `from` to rank `to` in the run's link directory.
pub fn link_path(dir: &Path, from: usize, to: usize) -> PathBuf {
    dir.join(format!("link-{from}-{to}"))
}

/// Where link directories go by default: `/dev/shm` (memory) when there is one.
pub fn default_root() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

#[cfg(test)]
mod direct_tests;
#[cfg(test)]
mod tests;
