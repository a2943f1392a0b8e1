//! Recording a capture to disk at line rate: pcap (or pcapng) files
//! written in large aligned blocks by a dedicated thread, rotated by size
//! and time, pruned to a total size, each with a block index beside it.
//!
//! The capture side copies each packet's record into the block being
//! filled. That copy cannot be avoided: the ring's blocks must go back to
//! the kernel as soon as they are read, or it runs out of room and drops,
//! while a disk write may stall for much longer. Records run on across
//! block boundaries, so that every block but a file's last is full and can
//! be written with `O_DIRECT` (which needs aligned offsets and lengths);
//! the last is zero-padded to the alignment, written, and the file cut
//! back to its exact length. The format only changes the bytes of the file
//! header and of each record ([`CaptureFormat`]); blocks, the index and
//! crash safety are the same for both.
//!
//! Between the capture side and the writer, an indexer thread decodes the
//! records of each filled block for the index's Bloom filter: that decode
//! costs more than the copy, and the capture side, which must keep up with
//! the ring (or, reading a file, with the disk), does nothing but copy.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Instant;

use sluice_wire::LinkType;

use crate::direct::{ALIGN, AlignedBuf, open_direct, write_block};
use crate::format::CaptureFormat;
use crate::index::{BlockEntry, IndexWriter, index_path};

pub const DEFAULT_BLOCK_BYTES: usize = 4 << 20;
pub const MIN_BLOCK_BYTES: usize = 1 << 20;

/// Where and how to record.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    pub dir: PathBuf,
    pub link: LinkType,
    pub snaplen: u32,
    /// pcap (the default) or pcapng, both with nanosecond timestamps.
    pub format: CaptureFormat,
    /// Size of each write, a multiple of [`ALIGN`], at least
    /// [`MIN_BLOCK_BYTES`].
    pub block_bytes: usize,
    /// Filled blocks that may wait for the disk: the buffer between a
    /// stalled disk and back-pressure on the capture.
    pub queue_blocks: usize,
    /// Start a new file before one grows past this many bytes.
    pub rotate_bytes: Option<u64>,
    /// Start a new file at the first packet this long after the file's
    /// first packet.
    pub rotate_ns: Option<u64>,
    /// After each file is closed, delete the oldest recordings in `dir`
    /// (this run's and earlier ones') until they take at most this much.
    pub keep_bytes: Option<u64>,
    /// Try `O_DIRECT`; false writes through the page cache.
    pub direct: bool,
    /// Build the index's Bloom filters on a thread of their own, so that
    /// the capture side only copies. Worth it where a core would otherwise
    /// idle (one capture thread); where every core is busy already, as with
    /// `sluice live`'s workers, the extra thread only adds work (it reads
    /// each block again), and the capture side decodes for the index
    /// itself.
    pub index_thread: bool,
    /// When every block waits for the disk: true (the default) makes the
    /// capture side wait for the writer, so nothing is lost and the
    /// slowest consumer sets the pace; false drops the packet and counts it
    /// ([`RecorderStats::dropped`]), so that a slow disk never holds up the
    /// capture's other consumers.
    pub lossless: bool,
    /// Back every block of the pool at start (true, the default), so that
    /// the kernel's zeroing of fresh pages stalls the start, not the first
    /// copies: what a live capture needs, since a stalled capture thread
    /// loses packets. False makes the blocks as they are first needed,
    /// which a file's reader can wait for: a recording of a small file, or
    /// of one the disk keeps up with, never backs the whole pool.
    pub prefault: bool,
}

impl RecorderConfig {
    pub fn new(dir: impl Into<PathBuf>, link: LinkType, snaplen: u32) -> RecorderConfig {
        RecorderConfig {
            dir: dir.into(),
            link,
            snaplen,
            format: CaptureFormat::Pcap,
            block_bytes: DEFAULT_BLOCK_BYTES,
            queue_blocks: 16,
            rotate_bytes: None,
            rotate_ns: None,
            keep_bytes: None,
            direct: true,
            index_thread: true,
            lossless: true,
            prefault: true,
        }
    }
}

/// How the files' data went to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Every file with `O_DIRECT`.
    Direct,
    /// Every file through the page cache: the file system refused
    /// `O_DIRECT` (tmpfs does) or it was not asked for.
    Buffered,
    /// Some files each way.
    Mixed,
    /// No file was written.
    None,
}

impl WriteMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteMode::Direct => "o_direct",
            WriteMode::Buffered => "buffered",
            WriteMode::Mixed => "mixed",
            WriteMode::None => "none",
        }
    }
}

/// Counts while recording and at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    pub packets: u64,
    /// Captured bytes (after the snap length).
    pub bytes: u64,
    pub wire_bytes: u64,
    /// Bytes written to capture files, headers included.
    pub written_bytes: u64,
    /// Times the capture side found no free block and waited for the
    /// writer, and how long in total.
    pub writer_waits: u64,
    pub writer_wait_ns: u64,
    /// Packets not recorded because every block was waiting for the disk
    /// ([`RecorderConfig::lossless`] off).
    pub dropped: u64,
    pub files_written: u64,
    pub files_deleted: u64,
    pub bytes_deleted: u64,
    pub direct_files: u64,
    pub buffered_files: u64,
}

impl RecorderStats {
    pub fn write_mode(&self) -> WriteMode {
        match (self.direct_files, self.buffered_files) {
            (0, 0) => WriteMode::None,
            (_, 0) => WriteMode::Direct,
            (0, _) => WriteMode::Buffered,
            _ => WriteMode::Mixed,
        }
    }
}

/// The final account.
#[derive(Clone, Debug)]
pub struct RecorderSummary {
    pub stats: RecorderStats,
    /// This run's files that retention left, oldest first.
    pub files: Vec<PathBuf>,
}

/// Transparent huge pages are this large on x86-64 and arm64 (4 KiB base
/// pages).
enum Job {
    /// A new file, whose frames are of this link type.
    Open(PathBuf, LinkType),
    /// `len` is the whole buffer except in a file's last block. `entry`
    /// describes the records that start in the block; the last may end in
    /// the next one. The capture side fills in its place, times and count;
    /// the indexer its Bloom filter and flags.
    Data {
        buf: AlignedBuf,
        len: usize,
        entry: BlockEntry,
    },
    Close,
}

/// Counters the writer thread updates and the capture side reads.
#[derive(Default)]
struct Shared {
    written_bytes: AtomicU64,
    files_written: AtomicU64,
    files_deleted: AtomicU64,
    bytes_deleted: AtomicU64,
    direct_files: AtomicU64,
    buffered_files: AtomicU64,
}

/// Records packets into rotating pcap or pcapng files (nanosecond
/// timestamps) through an indexer thread (unless
/// [`RecorderConfig::index_thread`] is off) and a writer thread. Call
/// [`Recorder::push`] for each packet and [`Recorder::finish`] at the end;
/// dropping it instead loses the data not yet handed to the writer.
///
/// Decoding each frame for the index's Bloom filter costs more than
/// copying it, so the capture side only copies: the indexer finds the
/// records again in each filled block, decodes them, and passes the block
/// on to the writer. It holds a block until the next one arrives, since a
/// block's last record may end in the next.
pub struct Recorder {
    config: RecorderConfig,
    jobs: Option<SyncSender<Job>>,
    free: Receiver<AlignedBuf>,
    writer: Option<JoinHandle<io::Result<Vec<PathBuf>>>>,
    shared: Arc<Shared>,
    current: Option<AlignedBuf>,
    /// A free block taken ahead, by a lossy push that made sure of room.
    spare: Option<AlignedBuf>,
    /// Blocks of the pool not made yet (without `prefault`).
    unmade: usize,
    filled: usize,
    /// The records that started in `current` (without their flows).
    entry: BlockEntry,
    /// Bytes of the open file so far, or `None` between files.
    file_bytes: Option<u64>,
    file_first_ts: u64,
    /// The file header every file starts with.
    file_header: Vec<u8>,
    sequence: u64,
    stats: RecorderStats,
}

impl Recorder {
    pub fn start(config: RecorderConfig) -> io::Result<Recorder> {
        let invalid = |why: String| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
        if config.block_bytes < MIN_BLOCK_BYTES || !config.block_bytes.is_multiple_of(ALIGN) {
            return invalid(format!(
                "the block size ({}) must be a multiple of {ALIGN} bytes and at least {MIN_BLOCK_BYTES}",
                config.block_bytes
            ));
        }
        let file_header = config.format.file_header(config.link.to_linktype(), config.snaplen);
        if config.snaplen == 0
            || config.snaplen as usize + config.format.max_record_overhead() + file_header.len() > config.block_bytes
        {
            return invalid(format!(
                "the snap length ({}) must be at least 1 and fit in a block",
                config.snaplen
            ));
        }
        std::fs::create_dir_all(&config.dir)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", config.dir.display())))?;
        let retained = earlier_recordings(&config.dir)?;
        // Blocks beyond the queue: the one being filled, the one being
        // written, and the one the indexer holds.
        let pool = config.queue_blocks.max(1) + 2 + usize::from(config.index_thread);
        let (free_tx, free) = mpsc::channel();
        if config.prefault {
            for _ in 0..pool {
                free_tx
                    .send(AlignedBuf::faulted_in(config.block_bytes)?)
                    .expect("the receiver is here");
            }
        }
        let unmade = if config.prefault { 0 } else { pool };
        // Opens and closes travel with the blocks; the pool bounds the
        // blocks, so this bound is never what stops a send.
        let (jobs, job_rx) = mpsc::sync_channel(2 * pool + 4);
        let shared = Arc::new(Shared::default());
        let mut writer = Writer {
            direct: config.direct,
            keep_bytes: config.keep_bytes,
            free: free_tx,
            shared: Arc::clone(&shared),
            file: None,
            retained,
            ours: Vec::new(),
        };
        if !config.index_thread {
            let writer = std::thread::Builder::new()
                .name("sluice-writer".into())
                .spawn(move || writer.run(job_rx))?;
            return Ok(Recorder::new(config, jobs, free, unmade, writer, shared, file_header));
        }
        let (indexed, indexed_rx) = mpsc::sync_channel(2 * pool + 4);
        let writer = std::thread::Builder::new()
            .name("sluice-writer".into())
            .spawn(move || writer.run(indexed_rx))?;
        let mut indexer = Indexer {
            format: config.format,
            link: config.link,
            next_offset: 0,
            held: None,
            scratch: Vec::new(),
            out: indexed,
        };
        // The indexer owns the writer: it joins it when the capture side
        // hangs up, or when the writer stops taking blocks, and returns its
        // result.
        let writer = std::thread::Builder::new()
            .name("sluice-indexer".into())
            .spawn(move || {
                indexer.run(job_rx);
                drop(indexer);
                writer
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("the writer thread panicked")))
            })?;
        Ok(Recorder::new(config, jobs, free, unmade, writer, shared, file_header))
    }

    fn new(
        config: RecorderConfig,
        jobs: SyncSender<Job>,
        free: Receiver<AlignedBuf>,
        unmade: usize,
        writer: JoinHandle<io::Result<Vec<PathBuf>>>,
        shared: Arc<Shared>,
        file_header: Vec<u8>,
    ) -> Recorder {
        Recorder {
            config,
            jobs: Some(jobs),
            free,
            writer: Some(writer),
            shared,
            current: None,
            spare: None,
            unmade,
            filled: 0,
            entry: BlockEntry::empty(0),
            file_bytes: None,
            file_first_ts: 0,
            file_header,
            sequence: 0,
            stats: RecorderStats::default(),
        }
    }

    /// Records one packet, cut to the snap length. Blocks only when every
    /// buffer is waiting for the disk (counted as a writer wait), unless
    /// the recorder is lossy: then the packet is dropped and counted.
    pub fn push(&mut self, ts_ns: u64, wire_len: u32, frame: &[u8]) -> io::Result<()> {
        let flow = match self.config.index_thread {
            true => Flow::Later,
            false => Flow::Decode,
        };
        self.push_with(ts_ns, wire_len, frame, flow)
    }

    /// [`Recorder::push`] for a packet whose frame was decoded already:
    /// `flow_hash` is its symmetric flow hash, `None` for a frame that
    /// carries no IP. The index takes it as it is, decoding nothing.
    pub fn push_decoded(&mut self, ts_ns: u64, wire_len: u32, frame: &[u8], flow_hash: Option<u64>) -> io::Result<()> {
        self.push_with(ts_ns, wire_len, frame, Flow::Hash(flow_hash))
    }

    fn push_with(&mut self, ts_ns: u64, wire_len: u32, frame: &[u8], flow: Flow) -> io::Result<()> {
        let captured = &frame[..frame.len().min(self.config.snaplen as usize)];
        if !self.config.lossless && !self.room_for(captured.len())? {
            self.stats.dropped += 1;
            return Ok(());
        }
        let format = self.config.format;
        let record_len = format.record_len(captured.len()) as u64;
        if let Some(file_bytes) = self.file_bytes {
            let by_size = self
                .config
                .rotate_bytes
                .is_some_and(|max| file_bytes + record_len > max);
            let by_time = self
                .config
                .rotate_ns
                .is_some_and(|ns| ts_ns.saturating_sub(self.file_first_ts) >= ns);
            if (by_size || by_time) && file_bytes > self.file_header.len() as u64 {
                self.close_file()?;
            }
        }
        if self.file_bytes.is_none() {
            self.open_file(ts_ns)?;
        }
        let file_bytes = self.file_bytes.as_mut().expect("a file is open");
        if self.entry.packets == 0 {
            self.entry.offset = *file_bytes;
        }
        *file_bytes += record_len;
        match flow {
            Flow::Later => self.entry.add_record(ts_ns, record_len),
            Flow::Decode => self.entry.add(ts_ns, record_len, self.config.link, captured),
            Flow::Hash(hash) => self.entry.add_hashed(ts_ns, record_len, hash),
        }
        let mut head = [0u8; 28];
        let head_len = format.record_head(ts_ns, captured.len() as u32, wire_len, &mut head);
        let mut trailer = [0u8; 8];
        let trailer_len = format.record_trailer(captured.len() as u32, &mut trailer);
        self.copy(&head[..head_len])?;
        self.copy(captured)?;
        self.copy(&trailer[..trailer_len])?;
        self.stats.packets += 1;
        self.stats.bytes += captured.len() as u64;
        self.stats.wire_bytes += u64::from(wire_len.max(captured.len() as u32));
        Ok(())
    }

    /// Records the next packets as frames of `link`. A file's header names
    /// one link type, so a change closes the open file and the next packet
    /// starts a new one.
    pub fn set_link(&mut self, link: LinkType) -> io::Result<()> {
        if link == self.config.link {
            return Ok(());
        }
        if self.file_bytes.is_some() {
            self.close_file()?;
        }
        self.config.link = link;
        self.file_header = self.config.format.file_header(link.to_linktype(), self.config.snaplen);
        Ok(())
    }

    /// Closes the open file now, as a rotation would: once the writer has
    /// written it ([`Recorder::written_through`] the number returned), every
    /// packet recorded so far can be read back, index and all. The next
    /// packet starts a new file. Returns how many files have been begun.
    pub fn close_now(&mut self) -> io::Result<u64> {
        if self.file_bytes.is_some() {
            self.close_file()?;
        }
        Ok(self.sequence)
    }

    /// Whether the writer has finished the first `files` files begun (it
    /// writes them in order): with the count [`Recorder::close_now`]
    /// returned, everything recorded before it is on disk, whatever was
    /// recorded since.
    pub fn written_through(&self, files: u64) -> bool {
        self.shared.files_written.load(Ordering::Acquire) >= files
    }

    /// The link type of the packets being recorded.
    pub fn link(&self) -> LinkType {
        self.config.link
    }

    /// The counts so far; the writer's are as of its last block.
    pub fn stats(&self) -> RecorderStats {
        let s = &self.shared;
        RecorderStats {
            written_bytes: s.written_bytes.load(Ordering::Relaxed),
            files_written: s.files_written.load(Ordering::Relaxed),
            files_deleted: s.files_deleted.load(Ordering::Relaxed),
            bytes_deleted: s.bytes_deleted.load(Ordering::Relaxed),
            direct_files: s.direct_files.load(Ordering::Relaxed),
            buffered_files: s.buffered_files.load(Ordering::Relaxed),
            ..self.stats.clone()
        }
    }

    /// Writes out what is left, closes the open file and waits for the
    /// writer.
    pub fn finish(mut self) -> io::Result<RecorderSummary> {
        let closed = if self.file_bytes.is_some() {
            self.close_file()
        } else {
            Ok(())
        };
        let files = self.join_writer()?;
        closed?;
        Ok(RecorderSummary {
            stats: self.stats(),
            files,
        })
    }

    fn join_writer(&mut self) -> io::Result<Vec<PathBuf>> {
        self.jobs = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(io::Error::other("a recording thread panicked")),
            None => Err(io::Error::other("the writer already stopped")),
        }
    }

    /// The writer stopped early: its error says why.
    fn writer_failed(&mut self) -> io::Error {
        match self.join_writer() {
            Err(e) => e,
            Ok(_) => io::Error::other("the writer stopped"),
        }
    }

    fn send(&mut self, job: Job) -> io::Result<()> {
        let sent = self.jobs.as_ref().is_some_and(|jobs| jobs.send(job).is_ok());
        if sent { Ok(()) } else { Err(self.writer_failed()) }
    }

    fn open_file(&mut self, ts_ns: u64) -> io::Result<()> {
        self.sequence += 1;
        let path = self
            .config
            .dir
            .join(file_name(ts_ns, self.sequence, self.config.format));
        self.send(Job::Open(path, self.config.link))?;
        self.file_bytes = Some(0);
        self.file_first_ts = ts_ns;
        // The header goes at the start of the file's first block, and is
        // never rewritten (pcapng's section length is left unspecified).
        let header = std::mem::take(&mut self.file_header);
        let copied = self.copy(&header);
        self.file_bytes = Some(header.len() as u64);
        self.file_header = header;
        copied
    }

    fn close_file(&mut self) -> io::Result<()> {
        if self.current.is_some() {
            self.send_block()?;
        }
        self.file_bytes = None;
        self.send(Job::Close)
    }

    /// Appends to the current block, handing full blocks to the writer.
    fn copy(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            if self.current.is_none() {
                self.current = Some(self.take_buffer()?);
                self.filled = 0;
            }
            let buf = self.current.as_mut().expect("a block is being filled").bytes();
            let n = bytes.len().min(buf.len() - self.filled);
            buf[self.filled..self.filled + n].copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled == buf.len() {
                self.send_block()?;
            }
        }
        Ok(())
    }

    fn send_block(&mut self) -> io::Result<()> {
        let buf = self.current.take().expect("a block is being filled");
        let entry = std::mem::replace(&mut self.entry, BlockEntry::empty(0));
        let len = self.filled;
        self.send(Job::Data { buf, len, entry })
    }

    /// Whether a record of `captured` bytes can be copied without waiting
    /// for the writer: it fits in the block being filled, or a free block
    /// is taken ahead for it. A file's header may need room too, and a
    /// record is never larger than a block.
    fn room_for(&mut self, captured: usize) -> io::Result<bool> {
        let header = if self.file_bytes.is_none() {
            self.file_header.len()
        } else {
            0
        };
        let needed = self.config.format.record_len(captured) + header;
        let left = self
            .current
            .as_ref()
            .map_or(0, |_| self.config.block_bytes - self.filled);
        if needed <= left || self.spare.is_some() {
            return Ok(true);
        }
        match self.free.try_recv() {
            Ok(buf) => {
                self.spare = Some(buf);
                Ok(true)
            }
            Err(TryRecvError::Empty) => match self.make_block()? {
                Some(buf) => {
                    self.spare = Some(buf);
                    Ok(true)
                }
                None => Ok(false),
            },
            Err(TryRecvError::Disconnected) => Err(self.writer_failed()),
        }
    }

    /// A new block of the pool, while it has blocks not made yet.
    fn make_block(&mut self) -> io::Result<Option<AlignedBuf>> {
        if self.unmade == 0 {
            return Ok(None);
        }
        self.unmade -= 1;
        AlignedBuf::new(self.config.block_bytes).map(Some)
    }

    fn take_buffer(&mut self) -> io::Result<AlignedBuf> {
        if let Some(buf) = self.spare.take() {
            return Ok(buf);
        }
        match self.free.try_recv() {
            Ok(buf) => return Ok(buf),
            Err(TryRecvError::Disconnected) => return Err(self.writer_failed()),
            Err(TryRecvError::Empty) => {}
        }
        if let Some(buf) = self.make_block()? {
            return Ok(buf);
        }
        self.stats.writer_waits += 1;
        let waiting = Instant::now();
        let buf = self.free.recv();
        self.stats.writer_wait_ns += waiting.elapsed().as_nanos() as u64;
        buf.map_err(|_| self.writer_failed())
    }
}

/// How a record's flow reaches the block's index.
#[derive(Clone, Copy)]
enum Flow {
    /// The indexer thread decodes the block's frames.
    Later,
    /// Decoded here, as the packet is pushed.
    Decode,
    /// Given by the caller, who decoded the frame already.
    Hash(Option<u64>),
}

/// `sluice-YYYYMMDDTHHMMSS.nnnnnnnnnZ-SEQ.pcap` (or `.pcapng`), from the
/// first packet's time in UTC: names sort by time, and the sequence number
/// keeps names apart when two files start in the same nanosecond.
pub fn file_name(ts_ns: u64, sequence: u64, format: CaptureFormat) -> String {
    let secs = ts_ns / 1_000_000_000;
    let (year, month, day) = sluice_units::calendar::civil_from_days((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    format!(
        "sluice-{year:04}{month:02}{day:02}T{:02}{:02}{:02}.{:09}Z-{sequence:06}.{}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        ts_ns % 1_000_000_000,
        format.extension()
    )
}

/// Whether a file name is one of the recorder's capture files, of either
/// format.
pub fn is_recording(name: &str) -> bool {
    name.starts_with("sluice-") && (name.ends_with(".pcap") || name.ends_with(".pcapng"))
}

/// The recordings already in `dir`, oldest first, with their sizes (index
/// included): retention counts them as well as this run's.
fn earlier_recordings(dir: &Path) -> io::Result<VecDeque<(PathBuf, u64)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_str().is_some_and(is_recording) {
            let path = entry.path();
            let size = recording_size(&path);
            found.push((path, size));
        }
    }
    found.sort();
    Ok(found.into())
}

fn recording_size(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    size(path) + size(&index_path(path))
}

/// A filled block that waits for the next one before it is indexed.
struct Held {
    buf: AlignedBuf,
    len: usize,
    entry: BlockEntry,
    /// The file offset of the block's first byte.
    start: u64,
}

/// Between the capture side and the writer: fills in each block's Bloom
/// filter and flags from the records in it.
struct Indexer {
    format: CaptureFormat,
    link: LinkType,
    /// The file offset of the next block of the open file.
    next_offset: u64,
    held: Option<Held>,
    /// The record that runs on from one block into the next, put together.
    scratch: Vec<u8>,
    out: SyncSender<Job>,
}

impl Indexer {
    /// Returns when the capture side hangs up or the writer stops.
    fn run(&mut self, jobs: Receiver<Job>) {
        for job in jobs {
            let sent = match job {
                Job::Open(path, link) => {
                    self.link = link;
                    self.next_offset = 0;
                    self.out.send(Job::Open(path, link)).is_ok()
                }
                Job::Data { buf, len, entry } => {
                    let block = Held {
                        buf,
                        len,
                        entry,
                        start: self.next_offset,
                    };
                    self.next_offset += len as u64;
                    match self.held.replace(block) {
                        Some(previous) => {
                            let next = self.held.as_ref().map(|h| h.buf.filled(h.len));
                            let previous = index(self.format, self.link, previous, next, &mut self.scratch);
                            self.out.send(previous).is_ok()
                        }
                        None => true,
                    }
                }
                // A file's last block has no record that runs on.
                Job::Close => match self.held.take() {
                    Some(last) => {
                        let last = index(self.format, self.link, last, None, &mut self.scratch);
                        self.out.send(last).is_ok() && self.out.send(Job::Close).is_ok()
                    }
                    None => self.out.send(Job::Close).is_ok(),
                },
            };
            if !sent {
                return;
            }
        }
    }
}

/// Decodes the records that start in `block` for its Bloom filter; the
/// last may run on into `next`. Returns the block as the writer's job.
fn index(format: CaptureFormat, link: LinkType, block: Held, next: Option<&[u8]>, scratch: &mut Vec<u8>) -> Job {
    let Held {
        buf,
        len,
        mut entry,
        start,
    } = block;
    let bytes = buf.filled(len);
    let head_len = format.record_head_len();
    let mut at = entry.offset.saturating_sub(start) as usize;
    for n in 0..entry.packets {
        let whole = bytes
            .get(at..)
            .filter(|rest| rest.len() >= head_len)
            .map(|rest| (rest, format.captured_len(rest)))
            .filter(|(rest, captured)| format.record_len(*captured) <= rest.len());
        let frame = match whole {
            Some((rest, captured)) => {
                at += format.record_len(captured);
                &rest[head_len..head_len + captured]
            }
            None => {
                // The block's last record, which runs on into the next.
                let last = n + 1 == entry.packets;
                let tail = bytes.get(at..).unwrap_or_default();
                match next
                    .filter(|_| last)
                    .and_then(|next| straddling(format, tail, next, scratch))
                {
                    Some(frame) => frame,
                    None => {
                        // Not where it should be. A block that no flow
                        // lookup skips still makes a correct index.
                        entry.hold_every_flow();
                        break;
                    }
                }
            }
        };
        entry.add_flow(link, frame);
    }
    Job::Data { buf, len, entry }
}

/// The captured bytes of the record that starts with `tail` and goes on
/// at the start of `next`, put together in `scratch`.
fn straddling<'a>(format: CaptureFormat, tail: &[u8], next: &[u8], scratch: &'a mut Vec<u8>) -> Option<&'a [u8]> {
    let head_len = format.record_head_len();
    scratch.clear();
    scratch.extend_from_slice(tail);
    if scratch.len() < head_len {
        scratch.extend_from_slice(next.get(..head_len - scratch.len())?);
    }
    let wanted = head_len + format.captured_len(scratch);
    if scratch.len() < wanted {
        let taken = scratch.len() - tail.len();
        scratch.extend_from_slice(next.get(taken..taken + wanted - scratch.len())?);
    }
    scratch.get(head_len..wanted)
}

struct OpenFile {
    path: PathBuf,
    file: File,
    direct: bool,
    index: IndexWriter,
    written: u64,
    /// Entries whose last record is not on disk yet.
    pending: VecDeque<BlockEntry>,
}

struct Writer {
    direct: bool,
    keep_bytes: Option<u64>,
    free: Sender<AlignedBuf>,
    shared: Arc<Shared>,
    file: Option<OpenFile>,
    retained: VecDeque<(PathBuf, u64)>,
    ours: Vec<PathBuf>,
}

impl Writer {
    fn run(&mut self, jobs: Receiver<Job>) -> io::Result<Vec<PathBuf>> {
        for job in jobs {
            match job {
                Job::Open(path, _) => self.open(path)?,
                Job::Data { mut buf, len, entry } => {
                    let written = self.write(&mut buf, len, entry);
                    // The capture side has stopped if this fails, and then
                    // no longer needs buffers.
                    let _ = self.free.send(buf);
                    written?;
                }
                Job::Close => self.close()?,
            }
        }
        Ok(std::mem::take(&mut self.ours))
    }

    fn open(&mut self, path: PathBuf) -> io::Result<()> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("creating {}: {e}", path.display()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        let (file, direct) = match self.direct {
            true => open_direct(&path, &options).map_err(named)?,
            false => (options.open(&path).map_err(named)?, false),
        };
        let index = IndexWriter::create(&index_path(&path)).map_err(named)?;
        self.file = Some(OpenFile {
            path,
            file,
            direct,
            index,
            written: 0,
            pending: VecDeque::new(),
        });
        Ok(())
    }

    fn write(&mut self, buf: &mut AlignedBuf, len: usize, entry: BlockEntry) -> io::Result<()> {
        let open = self.file.as_mut().expect("blocks follow an open");
        let bytes = buf.bytes();
        let named = |e: io::Error| io::Error::new(e.kind(), format!("writing {}: {e}", open.path.display()));
        let result = if open.direct {
            // Only a file's last block is short: pad it to the alignment
            // and cut the file back when it is closed.
            let padded = len.next_multiple_of(ALIGN);
            bytes[len..padded].fill(0);
            match write_block(&mut open.file, &open.path, &bytes[..padded], open.written) {
                Ok(true) => Ok(()),
                Ok(false) => {
                    open.direct = false;
                    open.file.write_all_at(&bytes[..len], open.written)
                }
                Err(e) => Err(e),
            }
        } else {
            open.file.write_all_at(&bytes[..len], open.written)
        };
        result.map_err(named)?;
        open.written += len as u64;
        self.shared.written_bytes.fetch_add(len as u64, Ordering::Relaxed);
        if entry.packets > 0 {
            open.pending.push_back(entry);
        }
        while let Some(first) = open.pending.front()
            && first.offset + first.length <= open.written
        {
            open.index.append(first).map_err(named)?;
            open.pending.pop_front();
        }
        Ok(())
    }

    fn close(&mut self) -> io::Result<()> {
        let Some(mut open) = self.file.take() else {
            return Ok(());
        };
        let named = |e: io::Error| io::Error::new(e.kind(), format!("closing {}: {e}", open.path.display()));
        // Padding written with O_DIRECT goes; a crash before this leaves
        // zeros after the last record, which `repair` cuts.
        if open.direct {
            open.file.set_len(open.written).map_err(named)?;
        }
        for entry in open.pending.drain(..) {
            open.index.append(&entry).map_err(named)?;
        }
        open.file.sync_data().map_err(named)?;
        let counter = match open.direct {
            true => &self.shared.direct_files,
            false => &self.shared.buffered_files,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.shared.files_written.fetch_add(1, Ordering::Release);
        let size = recording_size(&open.path);
        self.ours.push(open.path.clone());
        self.retained.push_back((open.path, size));
        self.prune()
    }

    /// Deletes the oldest recordings, capture and index, until the rest fit.
    fn prune(&mut self) -> io::Result<()> {
        let Some(keep) = self.keep_bytes else {
            return Ok(());
        };
        let mut total: u64 = self.retained.iter().map(|(_, size)| size).sum();
        while total > keep
            && let Some((path, size)) = self.retained.pop_front()
        {
            std::fs::remove_file(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("deleting {}: {e}", path.display())))?;
            let _ = std::fs::remove_file(index_path(&path));
            total -= size;
            self.ours.retain(|p| *p != path);
            self.shared.files_deleted.fetch_add(1, Ordering::Relaxed);
            self.shared.bytes_deleted.fetch_add(size, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direct::testing::{Ramfs, takes_o_direct};
    use crate::index::Index;

    #[test]
    fn names_are_utc_times_that_sort() {
        let pcap = CaptureFormat::Pcap;
        assert_eq!(file_name(0, 1, pcap), "sluice-19700101T000000.000000000Z-000001.pcap");
        assert_eq!(
            file_name(1_764_062_363_123_456_789, 42, pcap),
            "sluice-20251125T091923.123456789Z-000042.pcap"
        );
        assert_eq!(
            file_name(951_782_400_000_000_000, 1, CaptureFormat::PcapNg),
            "sluice-20000229T000000.000000000Z-000001.pcapng"
        );
        assert!(is_recording("sluice-20000229T000000.000000000Z-000001.pcapng"));
        assert!(!is_recording("sluice-20000229T000000.000000000Z-000001.pcapng.idx"));
    }

    /// A lossy recorder with no free block (every one is taken, as when
    /// all wait for a slow disk) drops the packet and counts it rather than
    /// wait; a lossless one would wait for the writer.
    #[test]
    fn a_lossy_recorder_drops_and_counts_what_has_no_block() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RecorderConfig::new(dir.path(), LinkType::Ethernet, 2048);
        config.block_bytes = MIN_BLOCK_BYTES;
        config.queue_blocks = 1;
        config.index_thread = false;
        config.lossless = false;
        let mut recorder = Recorder::start(config).unwrap();
        // Every block of the pool, as the disk would hold them.
        let held: Vec<AlignedBuf> = std::iter::from_fn(|| recorder.free.try_recv().ok()).collect();
        assert_eq!(held.len(), 3);
        for i in 0..10 {
            let f = frame(i, 1000);
            recorder
                .push_decoded(1_000 + u64::from(i), 1000, &f, Some(u64::from(i)))
                .unwrap();
        }
        let stats = recorder.stats();
        assert_eq!((stats.packets, stats.dropped), (0, 10));
        let summary = recorder.finish().unwrap();
        assert_eq!(summary.stats.dropped, 10);
        assert!(summary.files.is_empty(), "no file for what was not recorded");
        drop(held);
    }

    fn frame(i: u32, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&(0x0a00_0000u32 + i % 7).to_be_bytes());
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
        f
    }

    fn record(dir: &Path, config: impl FnOnce(&mut RecorderConfig), packets: u32) -> RecorderSummary {
        let mut c = RecorderConfig::new(dir, LinkType::Ethernet, 2000);
        c.block_bytes = MIN_BLOCK_BYTES;
        c.queue_blocks = 2;
        config(&mut c);
        let mut r = Recorder::start(c).unwrap();
        for i in 0..packets {
            let f = frame(i, 60 + (i as usize * 37) % 1400);
            r.push(1_700_000_000_000_000_000 + u64::from(i) * 1000, f.len() as u32 + 4, &f)
                .unwrap();
        }
        r.finish().unwrap()
    }

    fn read_all(files: &[PathBuf]) -> Vec<(u64, Vec<u8>)> {
        files
            .iter()
            .flat_map(|p| {
                let file = sluice_capture::CaptureFile::open(p).unwrap();
                file.reader()
                    .unwrap()
                    .map(|p| (p.ts_ns, p.data.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn records_read_back_whole_across_blocks_and_the_index_covers_each_once() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            for index_thread in [true, false] {
                for prefault in [true, false] {
                    records_read_back_whole_in(format, index_thread, prefault);
                }
            }
        }
    }

    /// Without `prefault`, a recording makes only the blocks it fills: one
    /// for a few packets, more as they are needed (and never more than the
    /// pool: `unmade` cannot go below zero).
    #[test]
    fn blocks_made_on_demand_are_only_those_needed() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = RecorderConfig::new(dir.path(), LinkType::Ethernet, 2000);
        c.block_bytes = MIN_BLOCK_BYTES;
        c.queue_blocks = 2;
        c.prefault = false;
        let mut r = Recorder::start(c).unwrap();
        let pool = 2 + 2 + 1;
        assert_eq!(r.unmade, pool);
        for i in 0..10 {
            let f = frame(i, 100);
            r.push(1_000 + u64::from(i), f.len() as u32, &f).unwrap();
        }
        assert_eq!(r.unmade, pool - 1, "a few packets fill one block");
        for i in 10..20_000 {
            let f = frame(i, 1400);
            r.push(1_000 + u64::from(i), f.len() as u32, &f).unwrap();
        }
        // The first block went to the writer full, with no block back yet.
        assert!(r.unmade <= pool - 2, "27 MiB of records in one block");
        let summary = r.finish().unwrap();
        assert_eq!(summary.stats.packets, 20_000);
        assert_eq!(read_all(&summary.files).len(), 20_000);
    }

    fn records_read_back_whole_in(format: CaptureFormat, index_thread: bool, prefault: bool) {
        let dir = tempfile::tempdir().unwrap();
        let summary = record(
            dir.path(),
            |c| {
                c.format = format;
                c.index_thread = index_thread;
                c.prefault = prefault;
            },
            5000,
        );
        assert_eq!(summary.files.len(), 1);
        let name = summary.files[0].file_name().unwrap().to_str().unwrap();
        assert!(name.ends_with(&format!(".{}", format.extension())), "{name}");
        assert_eq!(summary.stats.packets, 5000);
        // /tmp on a disk takes O_DIRECT; on tmpfs the fallback is in use.
        let tmpfs = std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .lines()
            .any(|l| l.contains(" /tmp tmpfs "));
        let expected = if tmpfs { WriteMode::Buffered } else { WriteMode::Direct };
        assert_eq!(summary.stats.write_mode(), expected);
        let packets = read_all(&summary.files);
        assert_eq!(packets.len(), 5000);
        for (i, (ts, data)) in packets.iter().enumerate() {
            assert_eq!(*ts, 1_700_000_000_000_000_000 + i as u64 * 1000);
            assert_eq!(*data, frame(i as u32, 60 + (i * 37) % 1400));
        }
        let size = std::fs::metadata(&summary.files[0]).unwrap().len();
        assert_eq!(size, summary.stats.written_bytes);
        assert!(size > 2 * MIN_BLOCK_BYTES as u64, "spans blocks");
        let index = Index::read(index_path(&summary.files[0])).unwrap();
        assert_eq!(index.packets(), 5000);
        let mut next = format.file_header(1, 2000).len() as u64;
        for block in &index.blocks {
            assert_eq!(block.offset, next);
            next += block.length;
        }
        assert_eq!(next, size);
        // Each entry's offset is where a record starts, and its length ends
        // one: the records of a block parse back to its count and times.
        let bytes = std::fs::read(&summary.files[0]).unwrap();
        let header = crate::format::FileHeader::parse(&bytes).unwrap();
        for block in &index.blocks {
            let mut at = block.offset as usize;
            let end = (block.offset + block.length) as usize;
            let mut times = Vec::new();
            while at < end {
                let record = header.parse_record(&bytes[at..], 1 << 20).unwrap();
                assert!(header.record_complete(&bytes[at..at + record.len]));
                times.push(record.ts_ns);
                at += record.len;
            }
            assert_eq!(at, end);
            assert_eq!(times.len(), block.packets as usize);
            assert_eq!(
                (times[0], *times.last().unwrap()),
                (block.first_ts_ns, block.last_ts_ns)
            );
        }
        assert_eq!(
            index.blocks,
            rebuilt_index(&bytes, &index),
            "the indexer's Bloom filters and flags"
        );
        // capinfos, where installed, finds every packet.
        if let Ok(output) = std::process::Command::new("capinfos")
            .args(["-c", "-M"])
            .arg(&summary.files[0])
            .output()
        {
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(output.status.success(), "{text}");
            assert!(text.contains("5000"), "{text}");
        }
    }

    /// The entries `index` should hold, made again from the records in the
    /// file as the capture side made them before the indexer thread did.
    fn rebuilt_index(bytes: &[u8], index: &Index) -> Vec<BlockEntry> {
        let header = crate::format::FileHeader::parse(bytes).unwrap();
        index
            .blocks
            .iter()
            .map(|block| {
                let mut entry = BlockEntry::empty(block.offset);
                let mut at = block.offset as usize;
                while at < (block.offset + block.length) as usize {
                    let record = header.parse_record(&bytes[at..], 1 << 20).unwrap();
                    let data = at + header.record_head_len();
                    let frame = &bytes[data..data + record.captured as usize];
                    entry.add(record.ts_ns, record.len as u64, LinkType::Ethernet, frame);
                    at += record.len;
                }
                entry
            })
            .collect()
    }

    /// A record cut by a block boundary at every place: in its head, its
    /// data and (pcapng) its trailer. The indexer must find its frame in
    /// the two blocks, and the flow must be in the first block's filter.
    #[test]
    fn a_record_split_anywhere_between_blocks_is_indexed() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let header_len = format.file_header(1, 2000).len();
            let straddler = frame(999, 200);
            let straddler_len = format.record_len(straddler.len());
            // pcapng records are multiples of 4 bytes, and so are the
            // places where a block can cut them.
            let step = if format == CaptureFormat::Pcap { 1 } else { 4 };
            for cut in (step..straddler_len).step_by(step) {
                let dir = tempfile::tempdir().unwrap();
                let mut c = RecorderConfig::new(dir.path(), LinkType::Ethernet, 2000);
                c.block_bytes = MIN_BLOCK_BYTES;
                c.queue_blocks = 1;
                c.format = format;
                c.direct = false;
                let mut r = Recorder::start(c).unwrap();
                // Records up to `cut` bytes before the first block's end.
                let mut left = MIN_BLOCK_BYTES - header_len - cut;
                let mut i = 0;
                while left > 0 {
                    let len = if left <= format.record_len(1000) {
                        left - format.record_len(0)
                    } else if left - format.record_len(1000) < format.record_len(60) {
                        500
                    } else {
                        1000
                    };
                    let f = frame(i, len);
                    left -= format.record_len(len);
                    r.push(u64::from(i), len as u32, &f).unwrap();
                    i += 1;
                }
                r.push(u64::from(i), straddler.len() as u32, &straddler).unwrap();
                for j in 0..10 {
                    let f = frame(j, 100);
                    r.push(u64::from(i + 1 + j), 100, &f).unwrap();
                }
                let summary = r.finish().unwrap();
                let file = &summary.files[0];
                let bytes = std::fs::read(file).unwrap();
                let index = Index::read(index_path(file)).unwrap();
                assert_eq!(index.blocks.len(), 2, "{format:?} cut {cut}");
                assert_eq!(index.blocks, rebuilt_index(&bytes, &index), "{format:?} cut {cut}");
                let hash = sluice_wire::decode(LinkType::Ethernet, &straddler)
                    .unwrap()
                    .key
                    .symmetric_hash();
                assert!(index.blocks[0].may_hold_flow(hash), "{format:?} cut {cut}");
                assert_eq!(index.blocks[0].flags, 0);
            }
        }
    }

    #[test]
    fn size_rotation_and_retention() {
        let dir = tempfile::tempdir().unwrap();
        let summary = record(
            dir.path(),
            |c| {
                c.rotate_bytes = Some(300_000);
                c.keep_bytes = Some(1_000_000);
                c.direct = false;
            },
            5000,
        );
        assert!(summary.stats.files_written >= 10, "{:?}", summary.stats);
        assert!(summary.stats.files_deleted > 0);
        assert_eq!(summary.stats.write_mode(), WriteMode::Buffered);
        let left: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(left <= 1_000_000, "{left}");
        let mut names = summary.files.clone();
        names.sort();
        assert_eq!(names, summary.files, "names sort by time");
        for f in &summary.files {
            assert!(std::fs::metadata(f).unwrap().len() <= 300_000);
        }
    }

    #[test]
    fn pcapng_files_rotate_and_retention_counts_both_formats() {
        let dir = tempfile::tempdir().unwrap();
        // An earlier run's pcap files count towards --keep as much as
        // this run's pcapng ones.
        let earlier = record(dir.path(), |c| c.rotate_bytes = Some(300_000), 1000);
        assert!(earlier.files.len() >= 2);
        let summary = record(
            dir.path(),
            |c| {
                c.format = CaptureFormat::PcapNg;
                c.rotate_bytes = Some(300_000);
                c.keep_bytes = Some(1_000_000);
            },
            5000,
        );
        assert!(
            summary.stats.files_deleted > earlier.files.len() as u64,
            "{:?}",
            summary.stats
        );
        assert!(earlier.files.iter().all(|f| !f.exists()), "the oldest go first");
        for f in &summary.files {
            assert!(f.extension().is_some_and(|e| e == "pcapng"));
            assert!(std::fs::metadata(f).unwrap().len() <= 300_000);
        }
    }

    /// Where O_DIRECT is refused (`EINVAL`, which the kernel returns after
    /// creating the file), every file is written through the page cache:
    /// complete, valid, indexed, and counted as buffered. On ramfs, and on
    /// tmpfs (/dev/shm) as far as this kernel refuses O_DIRECT there; where
    /// tmpfs takes it, the files must be the same, written directly.
    #[test]
    fn o_direct_refused_falls_back_to_buffered_files_that_are_whole() {
        let ramfs = Ramfs::mount();
        let shm = match Path::new("/dev/shm").is_dir() {
            true => Some(tempfile::tempdir_in("/dev/shm").unwrap()),
            false => {
                eprintln!("skipping the tmpfs case: no /dev/shm");
                None
            }
        };
        if let Some(ramfs) = &ramfs {
            assert!(!takes_o_direct(ramfs.dir.path()), "ramfs refuses O_DIRECT");
        }
        let dirs = [ramfs.as_ref().map(|r| r.dir.path()), shm.as_ref().map(|d| d.path())];
        for dir in dirs.into_iter().flatten() {
            let direct = takes_o_direct(dir);
            eprintln!(
                "{}: O_DIRECT {}",
                dir.display(),
                if direct { "taken" } else { "refused" }
            );
            for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
                let out = dir.join(format.extension());
                let summary = record(
                    &out,
                    |c| {
                        c.format = format;
                        c.rotate_bytes = Some(400_000);
                    },
                    5000,
                );
                let stats = &summary.stats;
                assert!(stats.files_written >= 5, "{stats:?}");
                assert_eq!(summary.files.len() as u64, stats.files_written);
                let (want, direct_files, buffered_files) = match direct {
                    true => (WriteMode::Direct, stats.files_written, 0),
                    false => (WriteMode::Buffered, 0, stats.files_written),
                };
                assert_eq!(stats.write_mode(), want, "{}: {stats:?}", out.display());
                assert_eq!(
                    (stats.direct_files, stats.buffered_files),
                    (direct_files, buffered_files)
                );
                let packets = read_all(&summary.files);
                assert_eq!(packets.len(), 5000, "{}: every packet", out.display());
                for (i, (ts, data)) in packets.iter().enumerate() {
                    assert_eq!(*ts, 1_700_000_000_000_000_000 + i as u64 * 1000);
                    assert_eq!(*data, frame(i as u32, 60 + (i * 37) % 1400));
                }
                let mut sizes = 0;
                for file in &summary.files {
                    let size = std::fs::metadata(file).unwrap().len();
                    assert!(size <= 400_000);
                    sizes += size;
                    let index = Index::read(index_path(file)).unwrap();
                    let mut next = format.file_header(1, 2000).len() as u64;
                    for block in &index.blocks {
                        assert_eq!(block.offset, next, "{}: blocks tile the file", file.display());
                        next += block.length;
                    }
                    assert_eq!(next, size, "{}: no padding left, nothing unindexed", file.display());
                    if let Ok(output) = std::process::Command::new("capinfos")
                        .args(["-c", "-M"])
                        .arg(file)
                        .output()
                    {
                        let text = String::from_utf8_lossy(&output.stdout);
                        assert!(output.status.success(), "capinfos {}: {text}", file.display());
                        assert!(text.contains(&index.packets().to_string()), "{text}");
                    }
                }
                assert_eq!(sizes, stats.written_bytes, "the files hold exactly what was written");
            }
        }
    }

    #[test]
    fn a_new_link_type_starts_a_new_file_with_its_own_header() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let dir = tempfile::tempdir().unwrap();
            let mut c = RecorderConfig::new(dir.path(), LinkType::Ethernet, 2000);
            c.block_bytes = MIN_BLOCK_BYTES;
            c.format = format;
            let mut r = Recorder::start(c).unwrap();
            let ethernet = frame(1, 100);
            let raw = ethernet[14..].to_vec();
            for i in 0..10u64 {
                r.push(1_000 + i, 100, &ethernet).unwrap();
            }
            r.set_link(LinkType::Ethernet).unwrap();
            r.set_link(LinkType::RawIp).unwrap();
            for i in 10..15u64 {
                r.push(1_000 + i, 86, &raw).unwrap();
            }
            let summary = r.finish().unwrap();
            assert_eq!(
                summary.files.len(),
                2,
                "setting the same link type again changes nothing"
            );
            let links: Vec<_> = summary
                .files
                .iter()
                .map(|p| {
                    let file = sluice_capture::CaptureFile::open(p).unwrap();
                    let packets: Vec<_> = file.reader().unwrap().collect();
                    (packets[0].link, packets.len())
                })
                .collect();
            assert_eq!(links, [(LinkType::Ethernet, 10), (LinkType::RawIp, 5)]);
            for file in &summary.files {
                let index = Index::read(index_path(file)).unwrap();
                assert_eq!(
                    index.blocks[0].flags, 0,
                    "both decode as IP: the index uses each file's link type"
                );
            }
        }
    }

    #[test]
    fn time_rotation() {
        let dir = tempfile::tempdir().unwrap();
        // 1 µs apart: 5000 packets span 5 ms.
        let summary = record(dir.path(), |c| c.rotate_ns = Some(1_000_000), 5000);
        assert_eq!(summary.files.len(), 5);
        assert_eq!(read_all(&summary.files).len(), 5000);
    }
}
