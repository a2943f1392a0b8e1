use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;
use sluice_wire::LinkType;

use crate::{pcap, pcapng};

/// A cheap, shareable handle on a capture file's bytes.
#[derive(Clone)]
pub struct FileBytes(Arc<Contents>);

/// Files this small are read whole rather than mapped. Unmapping a file
/// takes the process's memory-map lock and interrupts every core it runs
/// on to flush their address translations: mapping each in turn made a
/// run over 60,000 one-packet files take 2.4 to 2.9 s, against 0.75 s
/// reading them whole (a 1 MiB file takes some 300 us to analyse, its
/// unmapping some 30 us).
const READ_WHOLE_BELOW: u64 = 1 << 20;

enum Contents {
    Mapped(Mmap),
    /// A small file, or one that cannot be mapped (a pipe).
    Read(Box<[u8]>),
}

impl Contents {
    fn mapped(&self) -> Option<&Mmap> {
        match self {
            Contents::Mapped(map) => Some(map),
            Contents::Read(_) => None,
        }
    }
}

impl FileBytes {
    /// Asks the kernel to start reading `range` of the file from disk, and
    /// returns without waiting: a file that is not (or no longer) in the
    /// page cache then streams in ahead of the reader instead of stalling
    /// it at every missing page. Purely an optimisation; failures are
    /// ignored.
    pub fn read_ahead(&self, range: std::ops::Range<usize>) {
        let Some(map) = self.0.mapped() else { return };
        let end = range.end.min(map.len());
        if range.start < end {
            let _ = map.advise_range(memmap2::Advice::WillNeed, range.start, end - range.start);
        }
    }

    /// Maps `range` of the file into the page tables in one call, ahead of
    /// reading it: one system call instead of a page fault every 64 KiB.
    /// Purely an optimisation; failures (old kernels) are ignored.
    pub fn populate(&self, range: std::ops::Range<usize>) {
        let Some(map) = self.0.mapped() else { return };
        let end = range.end.min(map.len());
        if range.start < end {
            #[cfg(target_os = "linux")]
            let _ = map.advise_range(memmap2::Advice::PopulateRead, range.start, end - range.start);
        }
    }

    /// Drops `range` of the file from this process's resident memory; the
    /// kernel's page cache keeps it. Reading it again later is correct,
    /// only slower, so a caller that releases too early loses time, never
    /// data. Long files would otherwise count in full towards the RSS.
    #[allow(unsafe_code)]
    pub fn release(&self, range: std::ops::Range<usize>) {
        let Some(map) = self.0.mapped() else { return };
        let end = range.end.min(map.len());
        if range.start >= end {
            return;
        }
        #[cfg(unix)]
        // SAFETY: the map is a read-only file mapping that is never written
        // through, so MADV_DONTNEED cannot discard data: later accesses
        // fault the same file pages back in.
        unsafe {
            let _ = map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, range.start, end - range.start);
        }
    }
}

/// What a sequential reader of a mapped file has asked the disk for and
/// populated ahead of itself, and released behind: disk reads overlap the
/// work, the page-table work is done in large calls rather than a fault at
/// a time, and the resident size stays small however long the file. One
/// per file read; the reader reports its position every thousand packets
/// or so.
#[derive(Default)]
pub struct ReadWindow {
    /// File bytes before this offset have been asked for from the disk.
    read_ahead: usize,
    /// File bytes before this offset have been populated.
    populated: usize,
    /// File bytes before this offset have been released.
    released: usize,
}

impl ReadWindow {
    /// The disk is asked for the file this far ahead of the reader: some
    /// 60 ms of reading from a disk that gives 1 GB/s.
    const READ_AHEAD: usize = 64 << 20;
    /// Page tables are populated this far ahead of the reader.
    const POPULATE_AHEAD: usize = 16 << 20;
    /// Resident file pages are released in steps of this many bytes: each
    /// release flushes the translations of every core the process runs
    /// on, so not in the 2 MiB steps the reader could look at.
    const RELEASE_STEP: usize = 8 << 20;

    /// The reader is at `position`: keep the next bytes coming from the
    /// disk and populated. Cheap when there is nothing to do.
    #[inline]
    pub fn populate_ahead(&mut self, bytes: &FileBytes, position: usize) {
        if self.read_ahead < position + Self::READ_AHEAD / 2 {
            let start = self.read_ahead.max(position);
            let end = position + Self::READ_AHEAD;
            bytes.read_ahead(start..end);
            self.read_ahead = end;
        }
        if self.populated < position + Self::POPULATE_AHEAD / 2 {
            let start = self.populated.max(position);
            let end = position + Self::POPULATE_AHEAD;
            bytes.populate(start..end);
            self.populated = end;
        }
    }

    /// Nothing before `needed` will be read again: release it.
    pub fn release_before(&mut self, bytes: &FileBytes, needed: usize) {
        let upto = needed - needed % Self::RELEASE_STEP;
        if upto > self.released {
            bytes.release(self.released..upto);
            self.released = upto;
        }
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &*self.0 {
            Contents::Mapped(map) => map,
            Contents::Read(bytes) => bytes,
        }
    }
}

/// How far ahead of the reader the file's cache lines are requested: two
/// pages, so that a record is there (and its page walked) by the time the
/// reader gets to it even past a slow record. 2 KiB left the realistic
/// mix's reader waiting on the first read of many records; 8 KiB made the
/// unclassified run 4 % shorter, and changed nothing on the worst case's
/// 64-byte records.
const PREFETCH_AHEAD: usize = 8192;

/// Requests every cache line of the file some records ahead of a reader
/// that goes through it in order. The hardware's stream prefetcher stops
/// at each 4 KiB page, and a single line requested per record left most
/// record headers unrequested (a record of the realistic mix spans six
/// lines on average), so the reader waited on memory at most records.
#[derive(Default)]
pub(crate) struct Prefetcher {
    /// Lines before this offset have been requested.
    requested: usize,
}

impl Prefetcher {
    const LINE: usize = 64;

    /// The reader is at `pos`: request the lines up to `PREFETCH_AHEAD`
    /// beyond it that are not yet requested.
    #[inline(always)]
    pub(crate) fn ahead(&mut self, bytes: &[u8], pos: usize) {
        let lines = self.next_lines(bytes.len(), pos);
        // A loop of its own rather than `step_by`, whose iterator costs
        // more than the line or two a record asks for; the offsets are
        // below the file's length.
        let mut at = lines.start;
        while at < lines.end {
            sluice_wire::prefetch(bytes.as_ptr().wrapping_add(at));
            at += Self::LINE;
        }
    }

    /// The bytes of a `len`-byte file that a reader at `pos` wants
    /// requested and has not yet: one offset in each of their lines, a line
    /// apart from the start, is to be requested.
    #[inline(always)]
    fn next_lines(&mut self, len: usize, pos: usize) -> std::ops::Range<usize> {
        let end = (pos + PREFETCH_AHEAD).min(len);
        let start = self.requested.max(pos);
        if start < end {
            self.requested = start + (end - start).next_multiple_of(Self::LINE);
        }
        start..end
    }
}

/// A capture file in memory: mapped, or read whole when small.
pub struct CaptureFile {
    path: PathBuf,
    bytes: FileBytes,
    format: FileFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Pcap { nanos: bool, big_endian: bool },
    PcapNg,
}

impl fmt::Display for FileFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileFormat::Pcap { nanos: true, .. } => f.write_str("pcap (ns)"),
            FileFormat::Pcap { nanos: false, .. } => f.write_str("pcap (µs)"),
            FileFormat::PcapNg => f.write_str("pcapng"),
        }
    }
}

/// Why a file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{path}: is a directory; pass the capture files in it (for example {})",
        path.join("*.pcap").display()
    )]
    Directory { path: PathBuf },
    #[error(
        "{path}: not a pcap or pcapng file (first bytes {magic}); Sluice detects the format from the magic number, so check that this is a capture and not, say, a compressed one"
    )]
    NotACapture { path: PathBuf, magic: String },
    #[error("{path}: {reason} at byte offset {offset}")]
    BadHeader { path: PathBuf, offset: u64, reason: String },
    #[error(
        "{path}: link type {linktype} is not supported (see `sluice analyze --help` for the list); convert the capture with `editcap -T ether` if it wraps Ethernet"
    )]
    UnsupportedLinkType { path: PathBuf, linktype: u32 },
}

/// A problem inside a file that stops or skips part of it, reported with
/// the byte offset where it was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadWarning {
    pub offset: u64,
    pub message: String,
    /// Reading stopped here; the rest of the file was not used.
    pub fatal: bool,
}

/// One captured frame, borrowed from the mapped file.
#[derive(Clone, Copy, Debug)]
pub struct RawPacket<'a> {
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// The frame's length on the wire.
    pub wire_len: u32,
    /// The captured bytes (at most `wire_len`, cut by the snap length).
    pub data: &'a [u8],
    pub link: LinkType,
    /// Offset of this packet's record in the file.
    pub offset: u64,
}

impl CaptureFile {
    pub fn open(path: impl AsRef<Path>) -> Result<CaptureFile, OpenError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| OpenError::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io)?;
        let kind = file.metadata().map_err(io)?;
        if kind.is_dir() {
            return Err(OpenError::Directory { path });
        }
        let not_a_capture = |start: &[u8]| OpenError::NotACapture {
            path: path.clone(),
            magic: if start.is_empty() {
                "none: the file is empty".into()
            } else {
                start
                    .iter()
                    .take(4)
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            },
        };
        let contents = if kind.is_file() && kind.len() >= READ_WHOLE_BELOW {
            Contents::Mapped(map_file(&file).map_err(io)?)
        } else {
            // A pipe or a device has no length to go by: its magic number is
            // checked before the rest is read, so that `/dev/zero` is refused
            // rather than read until memory runs out. A pipe that does carry
            // a capture is held whole in memory.
            let mut bytes = Vec::with_capacity(kind.len() as usize);
            (&file).take(4).read_to_end(&mut bytes).map_err(io)?;
            if detect(&bytes).is_none() {
                return Err(not_a_capture(&bytes));
            }
            (&file).read_to_end(&mut bytes).map_err(io)?;
            Contents::Read(bytes.into_boxed_slice())
        };
        let bytes = FileBytes(Arc::new(contents));
        let format = detect(&bytes).ok_or_else(|| not_a_capture(&bytes))?;
        let capture = CaptureFile { path, bytes, format };
        // Validate the headers now so that errors surface before any work.
        capture.reader()?;
        Ok(capture)
    }

    /// A capture already in memory, read as a file at `path` would be
    /// (`path` only names it in errors): for tests and fuzzing.
    pub fn from_bytes(path: impl AsRef<Path>, bytes: Vec<u8>) -> Result<CaptureFile, OpenError> {
        let path = path.as_ref().to_path_buf();
        let Some(format) = detect(&bytes) else {
            let magic = match bytes.is_empty() {
                true => "none: the file is empty".into(),
                false => bytes
                    .iter()
                    .take(4)
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            return Err(OpenError::NotACapture { path, magic });
        };
        let bytes = FileBytes(Arc::new(Contents::Read(bytes.into_boxed_slice())));
        let capture = CaptureFile { path, bytes, format };
        capture.reader()?;
        Ok(capture)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn format(&self) -> FileFormat {
        self.format
    }

    pub fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The file's bytes, shared with whoever needs to read packets later
    /// (workers borrow packet data from here by offset).
    pub fn bytes(&self) -> FileBytes {
        self.bytes.clone()
    }

    pub fn reader(&self) -> Result<PacketReader<'_>, OpenError> {
        let inner = match self.format {
            FileFormat::Pcap { nanos, big_endian } => {
                Inner::Pcap(pcap::Reader::new(&self.bytes, nanos, big_endian).map_err(|e| self.header_error(e))?)
            }
            FileFormat::PcapNg => Inner::PcapNg(pcapng::Reader::new(&self.bytes).map_err(|e| self.header_error(e))?),
        };
        Ok(PacketReader {
            inner,
            warnings: Warnings::default(),
        })
    }

    /// The file's packets, read by a reader that owns the file's bytes:
    /// they are unmapped (or freed) once the reader and every
    /// [`FileBytes`] handed out are dropped, so a run over many files holds
    /// only those it is reading (each mapping counts towards
    /// `vm.max_map_count`).
    pub fn into_packets(self) -> Result<FilePackets, OpenError> {
        let reader = self.reader()?;
        // SAFETY: the reader borrows the bytes behind the Arc that
        // `FilePackets::bytes` keeps (a mapping or a boxed slice), which
        // never move while the Arc lives: moving an Arc moves only its
        // pointer. The reader is dropped before that Arc (field order) and
        // is lent out only for as long as the `FilePackets` is borrowed,
        // never as 'static.
        #[allow(unsafe_code)]
        let reader = unsafe { std::mem::transmute::<PacketReader<'_>, PacketReader<'static>>(reader) };
        Ok(FilePackets {
            reader,
            bytes: self.bytes(),
        })
    }

    fn header_error(&self, e: HeaderError) -> OpenError {
        match e {
            HeaderError::Bad { offset, reason } => OpenError::BadHeader {
                path: self.path.clone(),
                offset,
                reason,
            },
            HeaderError::LinkType(linktype) => OpenError::UnsupportedLinkType {
                path: self.path.clone(),
                linktype,
            },
        }
    }
}

#[allow(unsafe_code)]
fn map_file(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: the map is read-only. If another process truncates the file
    // while we read it, accesses past the new end fault (SIGBUS); this is
    // the same contract every mmap-based capture reader accepts, and the
    // only way to hand packet bytes to the decoder without a copy.
    let map = unsafe { Mmap::map(file)? };
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Sequential);
    Ok(map)
}

fn detect(bytes: &[u8]) -> Option<FileFormat> {
    let magic: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    Some(match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => FileFormat::Pcap {
            nanos: false,
            big_endian: false,
        },
        [0xa1, 0xb2, 0xc3, 0xd4] => FileFormat::Pcap {
            nanos: false,
            big_endian: true,
        },
        [0x4d, 0x3c, 0xb2, 0xa1] => FileFormat::Pcap {
            nanos: true,
            big_endian: false,
        },
        [0xa1, 0xb2, 0x3c, 0x4d] => FileFormat::Pcap {
            nanos: true,
            big_endian: true,
        },
        [0x0a, 0x0d, 0x0d, 0x0a] => FileFormat::PcapNg,
        _ => return None,
    })
}

pub(crate) enum HeaderError {
    Bad { offset: u64, reason: String },
    LinkType(u32),
}

enum Inner<'a> {
    Pcap(pcap::Reader<'a>),
    PcapNg(pcapng::Reader<'a>),
}

/// The longest frame whose wire length a file is believed about: no link
/// carries more (GRO and GSO aggregates stay well below, and pcap's
/// largest snap length is this too). A file that claims more is damaged
/// or hostile, and a frame counts its captured bytes instead.
pub(crate) const MAX_WIRE_LEN: u32 = 256 << 10;

/// Why a frame's wire length from the file was not believed.
#[cold]
#[inline(never)]
pub(crate) fn untrusted_wire_len(original: u32, captured: u32) -> String {
    let why = if original > MAX_WIRE_LEN {
        "more than 256 KiB"
    } else {
        "less than the bytes captured of it"
    };
    format!("record claims a {original}-byte frame, {why}; counted as its {captured} captured bytes")
}

/// Warnings of one file. A hostile file can hold millions of bad records,
/// so only the first [`Warnings::KEPT`] are kept verbatim; all are counted.
#[derive(Default)]
pub(crate) struct Warnings {
    pub(crate) kept: Vec<ReadWarning>,
    total: u64,
}

impl Warnings {
    const KEPT: usize = 20;

    pub(crate) fn push(&mut self, offset: u64, message: String, fatal: bool) {
        self.total += 1;
        if self.kept.len() < Self::KEPT || fatal {
            self.kept.push(ReadWarning { offset, message, fatal });
        }
    }
}

/// Iterates over the packets of one file. Problems found on the way are
/// collected in [`PacketReader::warnings`]; a fatal one ends the iteration.
pub struct PacketReader<'a> {
    inner: Inner<'a>,
    warnings: Warnings,
}

impl<'a> PacketReader<'a> {
    /// The first warnings (and every fatal one) found so far.
    pub fn warnings(&self) -> &[ReadWarning] {
        &self.warnings.kept
    }

    /// How many warnings there were, including those not kept.
    pub fn warning_count(&self) -> u64 {
        self.warnings.total
    }

    /// Reading stopped before the end of the file.
    pub fn stopped_early(&self) -> bool {
        self.warnings.kept.iter().any(|w| w.fatal)
    }

    /// Bytes consumed so far (for progress reporting).
    pub fn position(&self) -> u64 {
        match &self.inner {
            Inner::Pcap(r) => r.position(),
            Inner::PcapNg(r) => r.position(),
        }
    }

    /// Blocks skipped because their type is unknown or irrelevant (pcapng).
    pub fn skipped_blocks(&self) -> u64 {
        match &self.inner {
            Inner::Pcap(_) => 0,
            Inner::PcapNg(r) => r.skipped_blocks(),
        }
    }
}

/// A capture file's packets in file order, owning the file's bytes (see
/// [`CaptureFile::into_packets`]). Not an iterator: a packet borrows the
/// reader until the next one is read.
pub struct FilePackets {
    // Before `bytes`, so that it is dropped before the mapping it borrows.
    reader: PacketReader<'static>,
    bytes: FileBytes,
}

impl FilePackets {
    #[inline]
    pub fn next_packet(&mut self) -> Option<RawPacket<'_>> {
        self.reader.next()
    }

    /// The reader's warnings and position.
    pub fn reader(&self) -> &PacketReader<'_> {
        &self.reader
    }

    /// The mapped file, for handing packets on by offset.
    pub fn bytes(&self) -> &FileBytes {
        &self.bytes
    }
}

impl<'a> Iterator for PacketReader<'a> {
    type Item = RawPacket<'a>;

    #[inline]
    fn next(&mut self) -> Option<RawPacket<'a>> {
        match &mut self.inner {
            Inner::Pcap(r) => r.next(&mut self.warnings),
            Inner::PcapNg(r) => r.next(&mut self.warnings),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{PREFETCH_AHEAD, Prefetcher};

    /// The offsets requested for a reader going through a `len`-byte file
    /// in records of `sizes` (repeated), asking for lines ahead each time
    /// it moves on to the next record, as the readers do. Checks on the way
    /// that a record starting within reach of the last request was in it.
    fn requests(len: usize, sizes: &[usize]) -> Vec<usize> {
        let mut prefetcher = Prefetcher::default();
        let mut requested: Vec<usize> = Vec::new();
        let mut pos = 24;
        let mut asked_at = None;
        for size in sizes.iter().cycle() {
            pos = (pos + size).min(len);
            if pos < len && asked_at.is_some_and(|at| pos < at + PREFETCH_AHEAD) {
                assert!(
                    requested.iter().any(|&at| at <= pos && pos < at + 64),
                    "the record at {pos} was requested before the reader got to it ({sizes:?})"
                );
            }
            requested.extend(prefetcher.next_lines(len, pos).step_by(64));
            asked_at = Some(pos);
            if pos == len {
                return requested;
            }
        }
        unreachable!("the reader reaches the end")
    }

    #[test]
    fn every_line_is_requested_once_and_ahead_of_the_reader() {
        let len = 5 * PREFETCH_AHEAD + 37;
        for sizes in [&[80][..], &[60, 1514, 70, 300], &[PREFETCH_AHEAD, 16]] {
            let first = 24 + sizes[0];
            let every_line: Vec<usize> = (first..len).step_by(64).collect();
            assert_eq!(requests(len, sizes), every_line, "records of sizes {sizes:?}");
        }
    }

    /// Past a record longer than the distance requested ahead, requests
    /// start again at the reader, and still never repeat a line.
    #[test]
    fn a_long_record_is_skipped_not_requested_twice() {
        let requested = requests(10 * PREFETCH_AHEAD, &[3 * PREFETCH_AHEAD, 100]);
        assert!(requested.windows(2).all(|w| w[1] >= w[0] + 64), "{requested:?}");
        // The second long record starts at 24 + 3A + 100, and the reader
        // then jumps past what it had requested.
        assert!(requested.contains(&(24 + 6 * PREFETCH_AHEAD + 100)), "{requested:?}");
    }
}
