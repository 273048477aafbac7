//! A read-only memory map of a history file, so a multi-gigabyte JSON Lines history is
//! read in place instead of copied into the heap, and the pages a pass is done with are
//! handed back (`release`): they stay in the page cache, not in the process.
//!
//! The crate's unsafe code (besides the JSON Lines reader's one call of
//! [`Mapped::assume_utf8`] once it has checked every chunk). The map is private and
//! read-only; a file changed by another process while it is mapped gives undefined
//! contents (as with any reader that reads a file twice; text it vouched for as UTF-8
//! may then not be), and a file truncated meanwhile can raise SIGBUS, so only big files
//! are mapped (see `read_path`).

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;

/// A file's bytes, mapped read-only.
pub(crate) struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
    page: usize,
    /// The whole file is known to be valid UTF-8 ([`Mapped::assume_utf8`]).
    utf8: bool,
}

// SAFETY: the mapping is read-only and owned by this value; `&[u8]` views of it are
// shareable across threads, and `release` only asks the kernel to drop pages, which it
// reloads from the file on the next access.
unsafe impl Send for Mapped {}
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps all of `file`; `None` for an empty file (nothing to map).
    pub fn open(file: &File) -> io::Result<Option<Mapped>> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file too large"))?;
        if len == 0 {
            return Ok(None);
        }
        // SAFETY: a fresh private read-only mapping of `len` bytes of an open file.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two());
        Ok(Some(Mapped {
            ptr,
            len,
            page: page.unwrap_or(4096),
            utf8: false,
        }))
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes for as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }

    /// Marks the whole file as valid UTF-8, so [`Mapped::str`] does not check each slice
    /// again (the reader checked every chunk once, in parallel; the values' text is then
    /// asked for several times each).
    ///
    /// # Safety
    /// Every byte of the file must have been checked to be valid UTF-8 (as `from_utf8` of
    /// slices that cover it, each ending on a character boundary).
    pub unsafe fn assume_utf8(&mut self) {
        self.utf8 = true;
    }

    /// The text of `range`; `None` outside the file, off a character boundary, or not
    /// UTF-8.
    pub fn str(&self, range: Range<usize>) -> Option<&str> {
        let all = self.bytes();
        let bytes = all.get(range.clone())?;
        if !self.utf8 {
            return std::str::from_utf8(bytes).ok();
        }
        // A character starts at any byte but a continuation byte (0b10xx_xxxx).
        let boundary = |i: usize| all.get(i).is_none_or(|&b| (b as i8) >= -0x40);
        if !(boundary(range.start) && boundary(range.end)) {
            return None;
        }
        // SAFETY: the whole file is valid UTF-8 (`assume_utf8`'s contract) and the slice
        // starts and ends on character boundaries, so it is valid UTF-8 too.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    }

    /// Gives back the whole pages inside `range`: the process stops holding them, the
    /// next read of them reloads them from the page cache. Contents never change.
    pub fn release(&self, range: Range<usize>) {
        let start = range.start.min(self.len).next_multiple_of(self.page);
        let end = range.end.min(self.len) / self.page * self.page;
        if start >= end {
            return;
        }
        // SAFETY: [start, end) is page-aligned and inside the mapping; MADV_DONTNEED on a
        // private read-only file mapping only drops its resident pages.
        unsafe {
            libc::madvise(
                (self.ptr as *mut u8).add(start) as *mut libc::c_void,
                end - start,
                libc::MADV_DONTNEED,
            );
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `open` mapped, once.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}
