//! A file written once, front to back, that may grow far larger than it is
//! worth caching, on a file system that refuses `O_DIRECT` (where it does
//! not, [`crate::DirectWriter`] writes around the page cache altogether).
//!
//! Through the page cache alone, every written byte lands in a freshly
//! allocated page that stays dirty, then cached, until memory runs short.
//! Fresh pages are costly (the kernel zeroes and maps each one, and in a
//! virtual machine the host may back each one on first touch): writing the
//! records took more system time than producing them. So once a run has
//! written more than a few chunks, this writer starts each chunk's
//! writeback as soon as it is complete, waits for the oldest one to reach
//! the disk and drops it from the page cache, so that the same few hundred
//! MiB of pages are reused for the whole file. It is what n2disk does for
//! its dumps where it cannot use `O_DIRECT`, with `sync_file_range(2)` and
//! `posix_fadvise(2)`. Outputs under a few chunks are never waited on;
//! past that, a disk slower than the records are produced makes the run
//! wait for it, as the kernel's dirty-page limit would a little later.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;

/// Bytes whose writeback is started at once.
const CHUNK: u64 = 64 << 20;
/// Chunks whose writeback may still be running before the oldest is
/// waited for and dropped: the page cache this file keeps, at most.
const IN_FLIGHT: u64 = 2;

pub struct WriteThrough {
    file: File,
    /// `CHUNK`, but in tests.
    chunk: u64,
    written: u64,
    /// Writeback was started for everything before this offset.
    started: u64,
    /// Everything before this offset is on disk and out of the page cache.
    dropped: u64,
    /// The file system takes no `sync_file_range` (a pipe, some network
    /// file systems): plain writes from then on.
    plain: bool,
}

impl WriteThrough {
    pub fn new(file: File) -> WriteThrough {
        WriteThrough::with_chunk(file, CHUNK)
    }

    fn with_chunk(file: File, chunk: u64) -> WriteThrough {
        WriteThrough {
            file,
            chunk,
            written: 0,
            started: 0,
            dropped: 0,
            plain: false,
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    #[allow(unsafe_code)]
    fn write_back(&mut self) -> io::Result<()> {
        while !self.plain && self.written - self.started >= self.chunk {
            self.sync_range(self.started, libc::SYNC_FILE_RANGE_WRITE)?;
            self.started += self.chunk;
        }
        while !self.plain && self.started - self.dropped > IN_FLIGHT * self.chunk {
            let wait =
                libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
            self.sync_range(self.dropped, wait)?;
            // Advice only: pages it leaves behind are merely cached.
            // SAFETY: a plain system call on a descriptor this writer owns.
            unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    self.dropped as libc::off_t,
                    self.chunk as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                );
            }
            self.dropped += self.chunk;
        }
        Ok(())
    }

    /// Starts (and with `WAIT_AFTER`, finishes) the writeback of the chunk
    /// at `offset`. A write error of the disk comes back here, and is the
    /// caller's; a file that cannot take the call is written plainly.
    #[allow(unsafe_code)]
    fn sync_range(&mut self, offset: u64, flags: libc::c_uint) -> io::Result<()> {
        // SAFETY: a plain system call on a descriptor this writer owns.
        let status = unsafe {
            libc::sync_file_range(
                self.file.as_raw_fd(),
                offset as libc::off64_t,
                self.chunk as libc::off64_t,
                flags,
            )
        };
        if status == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINVAL | libc::ESPIPE | libc::ENOSYS | libc::EOPNOTSUPP) => {
                self.plain = true;
                Ok(())
            }
            _ => Err(error),
        }
    }
}

impl Write for WriteThrough {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        self.write_back()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::{IN_FLIGHT, WriteThrough};
    use crate::direct::testing::pattern;

    const CHUNK: u64 = 1 << 20;

    /// Past the chunks it may keep in flight, the file still holds every
    /// byte in order, and the writer has dropped the chunks behind it.
    #[test]
    fn a_file_larger_than_the_window_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        let mut out = WriteThrough::with_chunk(std::fs::File::create(&path).unwrap(), CHUNK);
        let pieces: Vec<Vec<u8>> = (0..12).map(|i| pattern(700 << 10, i)).collect();
        for piece in &pieces {
            out.write_all(piece).unwrap();
        }
        out.flush().unwrap();
        let total = out.written();
        assert_eq!(total, 12 * (700 << 10));
        assert!(!out.plain, "a file in a temporary directory takes sync_file_range");
        assert!(out.dropped > 0, "chunks behind the window are dropped");
        assert!(out.started - out.dropped <= IN_FLIGHT * CHUNK);
        drop(out);
        let mut back = Vec::new();
        std::fs::File::open(&path).unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back.len() as u64, total);
        assert!(back.chunks(700 << 10).zip(&pieces).all(|(a, b)| a == &b[..]));
    }

    #[test]
    fn a_pipe_is_written_plainly() {
        let (reader, writer) = std::io::pipe().unwrap();
        let reading = std::thread::spawn(move || {
            let mut reader = reader;
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all.len()
        });
        let file: std::fs::File = std::os::fd::OwnedFd::from(writer).into();
        let mut out = WriteThrough::with_chunk(file, CHUNK);
        let piece = pattern(CHUNK as usize + 1, 7);
        out.write_all(&piece).unwrap();
        assert!(out.plain, "a pipe takes no sync_file_range");
        drop(out);
        assert_eq!(reading.join().unwrap(), piece.len());
    }
}
