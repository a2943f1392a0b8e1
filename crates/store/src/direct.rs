//! Writing files front to back with `O_DIRECT`: the recorder's capture
//! files and the flow records.
//!
//! Through the page cache every written byte is first copied into a
//! freshly allocated page, and fresh pages are dear: the kernel zeroes and
//! maps each one, and in a virtual machine the host may back each one on
//! first touch. On the machines Sluice is measured on, a buffered write of
//! a new file ran at a fifth of the speed of the same write with `O_DIRECT`
//! (300 MB/s against 1.6 GB/s), and the kernel's copy was a seventh of the
//! CPU time of a whole `sluice analyze`. With `O_DIRECT` the disk reads the
//! bytes from a buffer this process owns and reuses, so the only copy left
//! is into that buffer. Like n2disk, we take the trade: on a disk slower
//! than the data is produced the writer waits for the disk, where the page
//! cache would have absorbed a few gigabytes first.

use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use memmap2::{Advice, MmapMut, MmapOptions};

use crate::write_through::WriteThrough;

/// What `O_DIRECT` asks of buffers, offsets and lengths on the file systems
/// that support it (the logical block size is at most a page).
pub const ALIGN: usize = 4096;

const HUGE_PAGE: usize = 2 << 20;

/// A page-aligned buffer, allocated once and reused: an anonymous memory
/// map, which comes zeroed from the kernel and is aligned without unsafe
/// code by mapping one huge page more than asked and starting inside it.
pub(crate) struct AlignedBuf {
    map: MmapMut,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A buffer whose pages the kernel backs as they are first written.
    pub(crate) fn new(len: usize) -> io::Result<AlignedBuf> {
        // Aligned to a huge page, so that the kernel can back it with huge
        // pages: the copy into it then misses the TLB once per 2 MiB rather
        // than every 4 KiB, and an O_DIRECT write pins two pages per 4 MiB
        // instead of 1024. The extra huge page is never touched, so it
        // costs address space, not memory (a zeroed `Vec` cost both: the
        // allocator cleared all of it, a third more than the buffer).
        let map = MmapOptions::new().len(len + HUGE_PAGE).map_anon().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot map {} MiB of memory for a write buffer: {e}; free some memory or lower the limits on this process's address space",
                    (len + HUGE_PAGE) >> 20
                ),
            )
        })?;
        let start = map.as_ptr().align_offset(HUGE_PAGE);
        // Purely an optimisation (where transparent huge pages are set to
        // `madvise`, the usual default); failure changes nothing.
        let _ = map.advise_range(Advice::HugePage, start, len);
        Ok(AlignedBuf { map, start, len })
    }

    /// A buffer with every page backed now, for a thread that makes
    /// buffers for another: the kernel's zeroing of fresh pages (and, in a
    /// virtual machine, the host's backing of them) then stalls the maker,
    /// not the first copies into the buffer.
    pub(crate) fn faulted_in(len: usize) -> io::Result<AlignedBuf> {
        let mut buf = AlignedBuf::new(len)?;
        // The contents do not matter: every byte written to disk is data or
        // padding set when the block is written. A store of zero into
        // zeroed memory could be optimised away; one is not.
        for page in buf.bytes().iter_mut().step_by(ALIGN) {
            *page = 1;
        }
        std::hint::black_box(&buf.map);
        Ok(buf)
    }

    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        &mut self.map[self.start..self.start + self.len]
    }

    pub(crate) fn filled(&self, len: usize) -> &[u8] {
        &self.map[self.start..self.start + len]
    }
}

/// Opens `path` for writing with `options` (which say whether to create or
/// truncate it), with `O_DIRECT` where the file system takes it. Returns
/// the file and whether it is direct.
pub(crate) fn open_direct(path: &Path, options: &OpenOptions) -> io::Result<(File, bool)> {
    match options.clone().custom_flags(libc::O_DIRECT).open(path) {
        Ok(file) => Ok((file, true)),
        // The kernel refuses O_DIRECT only after it has created the file
        // (ramfs, and tmpfs before Linux 6.6, do): open that empty file,
        // or create it if it was not.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let file = OpenOptions::new().write(true).create(true).truncate(true).open(path)?;
            Ok((file, false))
        }
        Err(e) => Err(e),
    }
}

/// Writes `block` of a direct file (its length a multiple of [`ALIGN`]) at
/// `offset`. Some file systems accept `O_DIRECT` at open and refuse the
/// writes: then the file is reopened without it and `Ok(false)` says so;
/// the caller writes the block again, unpadded, through the page cache.
pub(crate) fn write_block(file: &mut File, path: &Path, block: &[u8], offset: u64) -> io::Result<bool> {
    match file.write_all_at(block, offset) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            *file = OpenOptions::new().write(true).open(path)?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Bytes staged before each write.
const STAGE: usize = 4 << 20;

/// A new file written once, front to back, with `O_DIRECT` through a
/// staging buffer, or with [`WriteThrough`] where the file system refuses
/// `O_DIRECT` (tmpfs, ramfs, some network file systems).
///
/// An older file at the path is emptied by the first write or flush, not
/// when the writer is made (see `Mode::Direct::stage`).
///
/// [`Write::flush`] writes what is staged: its whole blocks directly, and
/// the partial block at its end through the page cache, so that after a
/// flush the file is exactly what was written; padding that block for
/// `O_DIRECT` and cutting the file back after would leave zeros at its end
/// in a process killed between the two. The next full stage overwrites
/// both. Dropping the writer flushes and ignores errors; call `flush` to
/// see them.
pub struct DirectWriter {
    path: PathBuf,
    mode: Mode,
}

enum Mode {
    Direct {
        file: File,
        /// Made at the first write, by the thread that writes, and backed
        /// by memory only as far as it is filled: faulting in all its pages
        /// takes milliseconds (more in a virtual machine), which the thread
        /// that opens the file, often one with other work to start, should
        /// not wait for, and which a small output never needs. The file is
        /// emptied then too: the kernel frees an old file's pages one by
        /// one (25 ms for 150 MB of records here), and opening it did not
        /// wait.
        stage: Option<AlignedBuf>,
        /// Bytes staged: the file's bytes from `written` on.
        staged: usize,
        /// Bytes on disk, always a multiple of `ALIGN`.
        written: u64,
        /// The same file without `O_DIRECT`, for the partial block a flush
        /// writes.
        tail: File,
        /// `(written, staged)` as the last flush left them: a flush with
        /// nothing staged since (the writer's owner flushes, then drops it)
        /// writes nothing again.
        flushed: Option<(u64, usize)>,
    },
    Buffered(WriteThrough),
}

impl DirectWriter {
    /// Creates `path`, or opens it to be emptied at the first write or
    /// flush (which happens at the latest when the writer is dropped).
    pub fn create(path: &Path) -> io::Result<DirectWriter> {
        let (file, direct) = open_direct(path, OpenOptions::new().write(true).create(true).truncate(false))?;
        let mode = match direct {
            true => Mode::Direct {
                tail: OpenOptions::new().write(true).open(path)?,
                file,
                stage: None,
                staged: 0,
                written: 0,
                flushed: None,
            },
            false => Mode::Buffered(WriteThrough::new(file)),
        };
        Ok(DirectWriter {
            path: path.to_owned(),
            mode,
        })
    }

    /// Whether the file is written with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        matches!(self.mode, Mode::Direct { .. })
    }

    /// Writes the staged bytes: the whole stage when it is full, or (for a
    /// flush) its whole blocks directly and the rest through the page
    /// cache, keeping them staged. Goes on through the page cache when the
    /// file system refuses a direct write.
    fn write_stage(&mut self, full: bool) -> io::Result<()> {
        let Mode::Direct {
            file,
            stage,
            staged,
            written,
            tail,
            flushed,
        } = &mut self.mode
        else {
            return Ok(());
        };
        if !full && *flushed == Some((*written, *staged)) {
            return Ok(());
        }
        let Some(stage) = stage else {
            // Nothing written yet: the file is still to be emptied.
            file.set_len(0)?;
            *flushed = Some((*written, *staged));
            return Ok(());
        };
        let len = *staged;
        let blocks = len - len % ALIGN;
        if !write_block(file, &self.path, stage.filled(blocks), *written)? {
            file.seek(SeekFrom::Start(*written))?;
            let mut buffered = WriteThrough::new(file.try_clone()?);
            buffered.write_all(stage.filled(len))?;
            self.mode = Mode::Buffered(buffered);
            return Ok(());
        }
        if full {
            *written += len as u64;
            *staged = 0;
        } else {
            if blocks < len {
                tail.write_all_at(&stage.filled(len)[blocks..], *written + blocks as u64)?;
            }
            *flushed = Some((*written, len));
        }
        Ok(())
    }
}

impl Write for DirectWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let (stage, staged) = match &mut self.mode {
            Mode::Direct {
                stage, staged, file, ..
            } => {
                if stage.is_none() {
                    file.set_len(0)?;
                    *stage = Some(AlignedBuf::new(STAGE)?);
                }
                (stage.as_mut().expect("made above"), staged)
            }
            Mode::Buffered(file) => return file.write(bytes),
        };
        let room = &mut stage.bytes()[*staged..];
        let n = room.len().min(bytes.len());
        room[..n].copy_from_slice(&bytes[..n]);
        *staged += n;
        if *staged == STAGE {
            self.write_stage(true)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_stage(false)?;
        match &mut self.mode {
            Mode::Direct { .. } => Ok(()),
            Mode::Buffered(file) => file.flush(),
        }
    }
}

impl Drop for DirectWriter {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::testing::{self, pattern};
    use super::{ALIGN, AlignedBuf, DirectWriter, STAGE};

    /// A buffer that cannot be mapped says what it was for and how much
    /// it asked for, not only the system's "cannot allocate memory".
    #[test]
    fn a_buffer_too_large_to_map_is_a_clear_error() {
        let error = AlignedBuf::new(1 << 60).err().expect("no machine maps an exbibyte");
        let message = error.to_string();
        assert!(message.contains("write buffer") && message.contains("MiB"), "{message}");
    }

    /// Pieces of every size across several stages, with flushes between
    /// them: the file is every byte in order, and nothing more.
    #[test]
    fn the_file_is_exactly_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        let mut out = DirectWriter::create(&path).unwrap();
        assert_eq!(out.is_direct(), testing::takes_o_direct(dir.path()));
        let mut expected = Vec::new();
        let sizes = [
            1,
            ALIGN - 1,
            ALIGN,
            ALIGN + 1,
            700 << 10,
            STAGE - 5,
            STAGE,
            3 * STAGE + 17,
            9,
        ];
        for (i, &size) in sizes.iter().enumerate() {
            let piece = pattern(size, i as u8);
            out.write_all(&piece).unwrap();
            expected.extend_from_slice(&piece);
            if i % 3 == 1 {
                out.flush().unwrap();
                assert_eq!(std::fs::read(&path).unwrap(), expected, "after a flush");
            }
        }
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }

    /// What this thread has handed to write(2) and pwrite(2) so far.
    fn bytes_written_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("wchar: "))
            .and_then(|n| n.parse().ok())
            .unwrap()
    }

    /// The owner of a writer flushes it to see the errors, then drops it,
    /// which flushes again: the second flush, with nothing written between,
    /// must not write the staged bytes a second time (up to a whole stage
    /// at the end of every run).
    #[test]
    fn a_second_flush_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        let mut out = DirectWriter::create(&path).unwrap();
        let piece = pattern(3 * ALIGN + 100, 5);
        out.write_all(&piece).unwrap();
        out.flush().unwrap();
        let before = bytes_written_by_this_thread();
        out.flush().unwrap();
        drop(out);
        assert_eq!(bytes_written_by_this_thread(), before);
        assert_eq!(std::fs::read(&path).unwrap(), piece);
    }

    /// A writer flushed, or only dropped, before any write (a run with no
    /// flows) still empties the older file it opened.
    #[test]
    fn a_file_never_written_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        for flushed in [true, false] {
            std::fs::write(&path, b"old").unwrap();
            let mut out = DirectWriter::create(&path).unwrap();
            if flushed {
                out.flush().unwrap();
            }
            drop(out);
            assert_eq!(std::fs::read(&path).unwrap(), b"", "flushed: {flushed}");
        }
    }

    /// Writing over an older, longer file leaves none of it behind.
    #[test]
    fn an_old_file_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        std::fs::write(&path, vec![b'x'; 3 * ALIGN]).unwrap();
        let mut out = DirectWriter::create(&path).unwrap();
        out.write_all(b"short").unwrap();
        out.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
    }

    /// Where O_DIRECT is refused (ramfs always) the writer goes through
    /// the page cache, and the file is the same.
    #[test]
    fn a_file_system_without_direct_io_gets_the_same_file() {
        let Some(ramfs) = testing::Ramfs::mount() else {
            return;
        };
        let path = ramfs.dir.path().join("records");
        let mut out = DirectWriter::create(&path).unwrap();
        assert!(!out.is_direct());
        let piece = pattern(STAGE + 100, 3);
        out.write_all(&piece).unwrap();
        out.write_all(&piece).unwrap();
        drop(out);
        assert_eq!(std::fs::read(&path).unwrap(), [&piece[..], &piece[..]].concat());
    }
}

/// File systems and contents for the tests of the writers.
#[cfg(test)]
pub(crate) mod testing {
    use std::fs::OpenOptions;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    /// `len` bytes that differ with `seed` and along the piece, so that a
    /// piece out of place or order shows.
    pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Whether `dir`'s file system takes `O_DIRECT`, as the kernel says
    /// when asked to open a file with it.
    pub(crate) fn takes_o_direct(dir: &Path) -> bool {
        let probe = dir.join("o_direct-probe");
        let opened = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_DIRECT)
            .open(&probe);
        let _ = std::fs::remove_file(&probe);
        match opened {
            Ok(_) => true,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => false,
            Err(e) => panic!("probing {}: {e}", dir.display()),
        }
    }

    /// A ramfs mounted on a temporary directory for as long as it lives:
    /// ramfs has no direct I/O at all, so it refuses `O_DIRECT` on every
    /// kernel (tmpfs accepts it since Linux 6.6).
    pub(crate) struct Ramfs {
        pub(crate) dir: tempfile::TempDir,
    }

    impl Ramfs {
        /// `None`, with a message, where it cannot be mounted (not root).
        pub(crate) fn mount() -> Option<Ramfs> {
            let dir = tempfile::tempdir().unwrap();
            let mounted = std::process::Command::new("mount")
                .args(["-t", "ramfs", "sluice-test"])
                .arg(dir.path())
                .stderr(std::process::Stdio::null())
                .status();
            if !mounted.is_ok_and(|s| s.success()) {
                eprintln!("skipping the ramfs case: mounting a ramfs needs root and mount(8)");
                return None;
            }
            Some(Ramfs { dir })
        }
    }

    impl Drop for Ramfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
        }
    }
}
