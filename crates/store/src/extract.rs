//! Pulling the packets of a time range (and of a filter or a flow) out of a
//! directory of recordings, reading only the blocks their indexes point
//! at.
//!
//! The recordings of a directory are its own `sluice-*.pcap` and
//! `sluice-*.pcapng` files and those of its immediate subdirectories
//! (`sluice live --record DIR` gives each worker one: `DIR/w0/`,
//! `DIR/w1/`, ...). Each directory is one recorder's stream: its files in
//! name order, which is time order (a name is its first packet's
//! timestamp), and each file's records in file order. One stream comes out
//! in the order it was recorded; several are merged by timestamp, a k-way
//! merge that holds one packet of each stream (ties go to the stream whose
//! directory sorts first), so the output is in time order when each stream
//! is.
//!
//! A file whose index covers it (its blocks tile the file from the end of
//! its header to its end) is skipped whole when its blocks' times miss the
//! range, and otherwise read block by block: one positioned read per block
//! the index selects. A file without such an index (none, an unreadable
//! one, or one that lacks the last blocks after a crash or while
//! recording) is read whole, and reported.
//!
//! The index is a hint, never the last word on what a file holds. An
//! entry that contradicts itself or its neighbours (no packets in a
//! block of bytes, more packets than its bytes can hold, times that run
//! backwards or into the next block's, unknown flags, an empty flow
//! filter for IP packets) is not used to skip its block: the block is
//! read, and a warning says why. A block is skipped by time only when the
//! range also misses the gaps that separate it from its neighbours, whose
//! times bound its packets' even if its own entry is wrong. Each block
//! read is compared with its entry (packets, first and last times), and a
//! disagreement is a warning. Inside a block or a file, bytes that are not
//! records are skipped with a warning that gives their offset, and reading
//! goes on at the next records ([`crate::scan`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use sluice_wire::{FlowKey, IpVersion, LinkType};

use crate::format::{CaptureFormat, FileHeader, MAX_STEP_BACK_NS, RecordHeader};
use crate::index::{BlockEntry, ENTRY_BYTES, FLAG_NON_IP, HEADER_BYTES};
use crate::scan::{Scanner, Step, Unreadable, Window};
use crate::{Index, PcapWriter, index_path, is_recording};

/// Which packets to extract.
#[derive(Clone, Copy, Debug)]
pub struct Selection {
    /// Packets stamped at or after this time (ns since the epoch)...
    pub from_ns: u64,
    /// ...and before this one.
    pub to_ns: u64,
    /// The symmetric flow-key hash of the only flow the predicate can
    /// accept, if there is one: blocks whose Bloom filter lacks it are not
    /// read.
    pub flow_hash: Option<u64>,
}

/// One recorded packet, as handed to the predicate.
pub struct Packet<'a> {
    pub ts_ns: u64,
    pub wire_len: u32,
    pub data: &'a [u8],
    pub link: LinkType,
}

/// Something in the recordings that is not as the recorder writes it:
/// what was read around it is in the output, what it hid is not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtractWarning {
    /// The capture file, or for a problem of an index, the index file.
    pub path: PathBuf,
    /// Where in that file, when the problem has a place.
    pub offset: Option<u64>,
    pub message: String,
}

/// What an extraction read, skipped and wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtractReport {
    /// The directories that hold recordings (the one given, its
    /// subdirectories, or both), in the order their streams are merged.
    pub directories: Vec<PathBuf>,
    /// Recordings in them.
    pub files: u64,
    /// Files left unread because their index says no packet is in range.
    pub files_skipped: u64,
    /// Files that could not be read at all (their header is not a
    /// recording's); each has a warning.
    pub files_unreadable: u64,
    /// Files read whole because no index covers them.
    pub unindexed: Vec<PathBuf>,
    /// Files that end inside a record (a crash), read up to it.
    pub truncated: Vec<PathBuf>,
    /// Blocks in the indexes of the files that were read or skipped by index.
    pub blocks: u64,
    pub blocks_read: u64,
    /// Blocks left unread because their times miss the range...
    pub blocks_skipped_by_time: u64,
    /// ...or because their Bloom filter lacks the flow.
    pub blocks_skipped_by_flow: u64,
    /// Bytes read from capture files (headers and records).
    pub bytes_read: u64,
    /// Bytes inside the stretches read that are not records, skipped.
    pub bytes_unreadable: u64,
    /// Packets handed to the predicate (those in the time range).
    pub packets_examined: u64,
    pub packets_written: u64,
    /// The first [`ExtractReport::KEPT_WARNINGS`] warnings...
    pub warnings: Vec<ExtractWarning>,
    /// ...of this many. Any makes the result partial.
    pub warning_count: u64,
}

impl ExtractReport {
    /// Warnings kept verbatim: a hostile file can make millions.
    pub const KEPT_WARNINGS: usize = 100;

    /// Whether something in the recordings was not as the recorder writes
    /// it, so that the output may lack packets they held.
    pub fn partial(&self) -> bool {
        self.warning_count > 0
    }

    fn warn(&mut self, path: &Path, offset: Option<u64>, message: String) {
        self.warning_count += 1;
        if self.warnings.len() < Self::KEPT_WARNINGS {
            self.warnings.push(ExtractWarning {
                path: path.to_path_buf(),
                offset,
                message,
            });
        }
    }
}

/// The recordings of one directory, in name order: one recorder's
/// time-ordered stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordingSet {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
}

/// The recordings (`sluice-*.pcap`, `sluice-*.pcapng`) of `dir` and of each
/// of its immediate subdirectories that holds some: `dir`'s own first, then
/// the subdirectories in natural name order (`w2` before `w10`). Each set's
/// files are in name order, which is time order.
pub fn recording_sets(dir: &Path) -> io::Result<Vec<RecordingSet>> {
    let mut subdirectories = Vec::new();
    let own = files_in(dir, Some(&mut subdirectories))?;
    let mut sets = Vec::new();
    if !own.is_empty() {
        sets.push(RecordingSet {
            dir: dir.to_path_buf(),
            files: own,
        });
    }
    subdirectories.sort_by_cached_key(|d| natural_key(d));
    for sub in subdirectories {
        let files = files_in(&sub, None)?;
        if !files.is_empty() {
            sets.push(RecordingSet { dir: sub, files });
        }
    }
    Ok(sets)
}

/// Every recording of [`recording_sets`], set after set.
pub fn recordings(dir: &Path) -> io::Result<Vec<PathBuf>> {
    Ok(recording_sets(dir)?.into_iter().flat_map(|s| s.files).collect())
}

/// The recordings in `dir`, in name order; its subdirectories go to
/// `subdirectories` if given.
fn files_in(dir: &Path, mut subdirectories: Option<&mut Vec<PathBuf>>) -> io::Result<Vec<PathBuf>> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", dir.display()));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(named)? {
        let entry = entry.map_err(named)?;
        let path = entry.path();
        if entry.file_name().to_str().is_some_and(is_recording) {
            files.push(path);
        } else if let Some(subdirectories) = subdirectories.as_mut()
            && path.is_dir()
        {
            subdirectories.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Sorts `w2` before `w10`: a name's text before its trailing digits, then
/// their value, then the name.
fn natural_key(path: &Path) -> (String, u128, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let number = name[stem.len()..].parse().unwrap_or(0);
    (stem.to_string(), number, name)
}

/// Writes the packets of the recordings under `dir` (see
/// [`recording_sets`]) that are in the time range of `selection` and that
/// `matches` accepts to a nanosecond pcap file at `out`: one directory's
/// in recorded order, several merged by timestamp.
///
/// The output's link type is the recordings' (they must agree) and its
/// snap length the largest of theirs, so frames are copied whole. pcap and
/// pcapng recordings may be mixed. What is not as the recorder writes it
/// (a file that is not a recording, an index that disagrees with its file,
/// bytes that are not records) is read around and reported in
/// [`ExtractReport::warnings`]; it is an error only when no recording
/// could be read at all.
pub fn extract(
    dir: &Path,
    selection: &Selection,
    mut matches: impl FnMut(&Packet<'_>) -> bool,
    out: &Path,
) -> io::Result<ExtractReport> {
    let sets = recording_sets(dir)?;
    if sets.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{}: no recordings (sluice-*.pcap or sluice-*.pcapng, in it or in its subdirectories)",
                dir.display()
            ),
        ));
    }
    let mut report = ExtractReport {
        directories: sets.iter().map(|s| s.dir.clone()).collect(),
        files: sets.iter().map(|s| s.files.len() as u64).sum(),
        ..ExtractReport::default()
    };
    // The output's header needs the link type and snap length of the files
    // that will be read, so all are planned before any is read; when none
    // is, the output is still a valid (empty) capture.
    let mut streams = Vec::with_capacity(sets.len());
    for set in sets {
        let mut files = VecDeque::with_capacity(set.files.len());
        for path in set.files {
            if let Some(planned) = plan(path, selection, &mut report)? {
                files.push_back(planned);
            }
        }
        if !files.is_empty() {
            streams.push(Stream::new(files));
        }
    }
    if report.files_unreadable == report.files {
        let first = report.warnings.first().map_or(String::new(), |w| {
            format!(" (the first: {}: {})", w.path.display(), w.message)
        });
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: none of the recordings could be read{first}", dir.display()),
        ));
    }
    let planned = || streams.iter().flat_map(|s| &s.files);
    let first = planned().next();
    let link = first.map_or(1, |p| p.header.linktype);
    if let Some(other) = planned().find(|p| p.header.linktype != link) {
        return Err(invalid(
            &other.path,
            format!(
                "link type {} differs from {}'s {link}; extract from one kind of link at a time",
                other.header.linktype,
                first.expect("one was planned").path.display()
            ),
        ));
    }
    let snaplen = planned().map(|p| p.header.snaplen).max().unwrap_or(262_144);
    let link_type = match first {
        Some(first) => {
            LinkType::from_linktype(link).ok_or_else(|| invalid(&first.path, format!("unknown link type {link}")))?
        }
        None => LinkType::Ethernet,
    };
    let mut writer = PcapWriter::create(out, link, snaplen)?;
    // One packet of each stream waits in the heap, keyed by its time.
    let mut heap = BinaryHeap::with_capacity(streams.len());
    for (i, stream) in streams.iter_mut().enumerate() {
        if let Some(ts_ns) = stream.advance(selection, &mut report)? {
            heap.push(Reverse((ts_ns, i)));
        }
    }
    while let Some(Reverse((_, i))) = heap.pop() {
        let stream = &mut streams[i];
        let packet = stream.packet(link_type);
        if matches(&packet) {
            writer.write(packet.ts_ns, packet.wire_len, packet.data)?;
        }
        if let Some(ts_ns) = stream.advance(selection, &mut report)? {
            heap.push(Reverse((ts_ns, i)));
        }
    }
    report.packets_written = writer.packets();
    writer.finish()?;
    Ok(report)
}

/// A file to read, with its header and what to read of it.
struct Planned {
    path: PathBuf,
    header: FileHeader,
    /// The file's length when it was planned.
    length: u64,
    stretches: VecDeque<Stretch>,
}

/// Part of a file to read: a block of its index, or all its records.
struct Stretch {
    start: u64,
    end: u64,
    /// A block of the index (else the whole file).
    block: bool,
    /// The index entry that describes it, to compare with what it holds;
    /// `None` for a file read whole.
    entry: Option<Entry>,
}

/// An index entry whose block is read.
struct Entry {
    number: usize,
    entry: BlockEntry,
    /// Why the entry was not believed before the block was read, when
    /// reading it shows whether it is right.
    suspect: Option<String>,
}

/// Decides from a file's index what to read of it; `None` skips it. The
/// header of a file that is read is read here, and counted.
fn plan(path: PathBuf, selection: &Selection, report: &mut ExtractReport) -> io::Result<Option<Planned>> {
    if selection.from_ns >= selection.to_ns {
        report.files_skipped += 1;
        return Ok(None);
    }
    let length = std::fs::metadata(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?
        .len();
    let index_file = index_path(&path);
    let index = match Index::read(&index_file) {
        Ok(index) => Some(index),
        // No index is no damage: the file is read whole, and said to be.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            report.warn(
                &index_file,
                None,
                format!("{}; the file is read whole", error_text(&e, &index_file)),
            );
            None
        }
    };
    let index = index.filter(|index| match coverage(index, length) {
        Coverage::Tiles => true,
        // What a crash or a recording still going on leaves.
        Coverage::Prefix => false,
        Coverage::Disagrees(why) => {
            report.warn(&index_file, None, format!("{why}; the file is read whole"));
            false
        }
    });
    let Some(index) = index else {
        return whole(path, length, report);
    };
    let format = if path.extension().is_some_and(|e| e == "pcapng") {
        CaptureFormat::PcapNg
    } else {
        CaptureFormat::Pcap
    };
    let min_record = format.record_len(0) as u64;
    let last_ns = selection.to_ns - 1;
    let (mut in_time, mut stretches) = (0, VecDeque::new());
    for (k, block) in index.blocks.iter().enumerate() {
        let problem = entry_problem(&index.blocks, k, min_record);
        // What reading the block can check is told once it is read, and
        // only if the block does not bear the entry out.
        if let Some(Problem { why, checkable: false }) = &problem {
            report.warn(
                &index_file,
                Some((HEADER_BYTES + k * ENTRY_BYTES) as u64),
                format!(
                    "entry {k} (the block at byte offset {} of the capture, {} bytes) {why}; \
                     the block is read whatever the time range and flow",
                    block.offset, block.length
                ),
            );
        }
        let (low, high) = time_bounds(&index.blocks, k);
        let time = problem.is_some() || (low <= last_ns && high >= selection.from_ns);
        let flow = problem.is_some() || selection.flow_hash.is_none_or(|h| block.may_hold_flow(h));
        in_time += u64::from(time);
        if time && flow {
            stretches.push_back(Stretch {
                start: block.offset,
                end: block.offset + block.length,
                block: true,
                entry: Some(Entry {
                    number: k,
                    entry: block.clone(),
                    suspect: problem.filter(|p| p.checkable).map(|p| p.why),
                }),
            });
        }
    }
    let selected = stretches.len() as u64;
    if selected == 0 {
        count_blocks(report, &index, in_time, 0);
        report.files_skipped += 1;
        return Ok(None);
    }
    let Some(header) = read_header(&path, report) else {
        return Ok(None);
    };
    // The index is trusted only if its first block starts where the
    // header ends: checked once the file is opened anyway.
    if header.len != index.blocks[0].offset {
        report.warn(
            &index_file,
            None,
            format!(
                "its first block starts at byte offset {}, where the {} file's header ends at {}; \
                 the file is read whole",
                index.blocks[0].offset,
                header.format.extension(),
                header.len
            ),
        );
        report.unindexed.push(path.clone());
        return Ok(Some(Planned {
            stretches: VecDeque::from([Stretch {
                start: header.len,
                end: length,
                block: false,
                entry: None,
            }]),
            path,
            header,
            length,
        }));
    }
    count_blocks(report, &index, in_time, selected);
    Ok(Some(Planned {
        path,
        header,
        length,
        stretches,
    }))
}

fn count_blocks(report: &mut ExtractReport, index: &Index, in_time: u64, selected: u64) {
    report.blocks += index.blocks.len() as u64;
    report.blocks_skipped_by_time += index.blocks.len() as u64 - in_time;
    report.blocks_skipped_by_flow += in_time - selected;
}

fn whole(path: PathBuf, length: u64, report: &mut ExtractReport) -> io::Result<Option<Planned>> {
    let Some(header) = read_header(&path, report) else {
        return Ok(None);
    };
    report.unindexed.push(path.clone());
    Ok(Some(Planned {
        stretches: VecDeque::from([Stretch {
            start: header.len,
            end: length,
            block: false,
            entry: None,
        }]),
        path,
        header,
        length,
    }))
}

/// The file's header, or `None` (with a warning) when it is not a
/// recording's.
fn read_header(path: &Path, report: &mut ExtractReport) -> Option<FileHeader> {
    let why = match FileHeader::read(path) {
        Ok(header) if header.format == CaptureFormat::Pcap && !header.nanos => {
            "a microsecond pcap file; the recorder writes nanosecond ones".to_string()
        }
        Ok(header) => {
            report.bytes_read += header.len;
            return Some(header);
        }
        Err(e) => error_text(&e, path),
    };
    report.files_unreadable += 1;
    report.warn(path, Some(0), format!("{why}; the file is skipped"));
    None
}

/// An error's text without the path it starts with (the warning names it).
fn error_text(e: &io::Error, path: &Path) -> String {
    let text = e.to_string();
    let prefix = format!("{}: ", path.display());
    text.strip_prefix(&prefix).map_or(text.clone(), str::to_string)
}

/// How an index's blocks cover its file.
enum Coverage {
    /// From their first offset to the file's end, each block starting
    /// where the one before it ends: every record is in a block it
    /// describes.
    Tiles,
    /// Contiguous, but ending before the file does: the last entries are
    /// missing, as after a crash or while the file is being recorded.
    Prefix,
    /// Anything else.
    Disagrees(String),
}

fn coverage(index: &Index, file_length: u64) -> Coverage {
    let Some(first) = index.blocks.first() else {
        return Coverage::Prefix;
    };
    if first.offset == 0 {
        return Coverage::Disagrees("its first block starts at byte offset 0, inside the file's header".into());
    }
    let mut at = first.offset;
    for (k, block) in index.blocks.iter().enumerate() {
        if block.offset != at {
            return Coverage::Disagrees(format!(
                "entry {k} puts a block at byte offset {} where the one before it ends at {at}",
                block.offset
            ));
        }
        at = at.saturating_add(block.length);
    }
    match at.cmp(&file_length) {
        std::cmp::Ordering::Equal => Coverage::Tiles,
        std::cmp::Ordering::Less => Coverage::Prefix,
        std::cmp::Ordering::Greater => Coverage::Disagrees(format!(
            "its blocks end at byte offset {at}, past the file's end at {file_length}"
        )),
    }
}

/// Why an index entry cannot be believed.
struct Problem {
    why: String,
    /// Reading the block shows whether the entry is right after all (its
    /// packets and times; not its flags or flow filter).
    checkable: bool,
}

/// Why entry `k` cannot be believed, if it contradicts itself or its
/// neighbours. `min_record` is the fewest bytes a record takes.
fn entry_problem(blocks: &[BlockEntry], k: usize, min_record: u64) -> Option<Problem> {
    match entry_flags_problem(&blocks[k]) {
        Some(why) => Some(Problem { why, checkable: false }),
        None => entry_count_or_time_problem(blocks, k, min_record).map(|why| Problem { why, checkable: true }),
    }
}

fn entry_flags_problem(b: &BlockEntry) -> Option<String> {
    if b.flags & !FLAG_NON_IP != 0 {
        return Some(format!("has flags {:#x}, which no recorder sets", b.flags));
    }
    if b.packets > 0 && b.flags & FLAG_NON_IP == 0 && b.bloom.iter().all(|&w| w == 0) {
        return Some("has an empty flow filter, although all its packets are IP".into());
    }
    None
}

fn entry_count_or_time_problem(blocks: &[BlockEntry], k: usize, min_record: u64) -> Option<String> {
    let b = &blocks[k];
    if b.length == 0 {
        return (b.packets > 0).then(|| format!("says it holds {} packets in no bytes", b.packets));
    }
    if b.packets == 0 {
        return Some("says it holds no packet".into());
    }
    if u64::from(b.packets) > b.length / min_record {
        return Some(format!("says it holds {} packets, more than its bytes can", b.packets));
    }
    // Packets of different queues come slightly out of order, so the last
    // may be stamped a little before the first.
    if b.first_ts_ns > b.last_ts_ns.saturating_add(MAX_STEP_BACK_NS) {
        return Some(format!(
            "says its first packet ({} ns) came long after its last ({} ns)",
            b.first_ts_ns, b.last_ts_ns
        ));
    }
    if let Some(previous) = k.checked_sub(1).map(|p| &blocks[p])
        && b.first_ts_ns.saturating_add(MAX_STEP_BACK_NS) < previous.last_ts_ns
    {
        return Some(format!(
            "says its first packet ({} ns) came long before the last of the block before it ({} ns)",
            b.first_ts_ns, previous.last_ts_ns
        ));
    }
    if let Some(next) = blocks.get(k + 1)
        && next.first_ts_ns.saturating_add(MAX_STEP_BACK_NS) < b.last_ts_ns
    {
        return Some(format!(
            "says its last packet ({} ns) came long after the first of the block after it ({} ns)",
            b.last_ts_ns, next.first_ts_ns
        ));
    }
    None
}

/// The times block `k`'s packets can have: its own range, widened to the
/// last packet of the block before it and the first of the block after.
/// Recorded packets follow each other in time, so even an entry whose own
/// times are wrong cannot hide packets outside these.
fn time_bounds(blocks: &[BlockEntry], k: usize) -> (u64, u64) {
    let b = &blocks[k];
    let mut low = b.first_ts_ns.min(b.last_ts_ns);
    let mut high = b.last_ts_ns.max(b.first_ts_ns);
    if let Some(previous) = k.checked_sub(1).map(|p| &blocks[p]) {
        low = low.min(previous.last_ts_ns);
    }
    if let Some(next) = blocks.get(k + 1) {
        high = high.max(next.first_ts_ns);
    }
    (low, high)
}

/// One directory's recordings, read packet by packet in recorded order.
struct Stream {
    files: VecDeque<Planned>,
    /// The file being read.
    reading: Option<Reading>,
    /// The current packet's header and where its bytes start in the file.
    current: Option<(RecordHeader, u64)>,
}

struct Reading {
    path: PathBuf,
    header: FileHeader,
    window: Window,
    /// Bytes of `window` already counted in the report.
    counted: u64,
    stretches: VecDeque<Stretch>,
    /// The stretch being read, and what it held so far.
    scanning: Option<Scanning>,
    /// The end of the last stretch read, and where its records reached.
    read_to: Option<(u64, u64)>,
}

/// A stretch being read: where in it, the index entry to compare it with,
/// and what it held so far.
type Scanning = (Scanner, Option<Entry>, Tally);

/// What a block held: to compare with its index entry.
#[derive(Default)]
struct Tally {
    packets: u64,
    first_ts_ns: u64,
    last_ts_ns: u64,
    /// It held bytes that are not records, already reported: its entry
    /// cannot agree with what was read.
    damaged: bool,
}

impl Stream {
    fn new(files: VecDeque<Planned>) -> Stream {
        Stream {
            files,
            reading: None,
            current: None,
        }
    }

    /// Moves to the next packet in the time range; its timestamp, or
    /// `None` at the end of the stream.
    fn advance(&mut self, selection: &Selection, report: &mut ExtractReport) -> io::Result<Option<u64>> {
        loop {
            if self.reading.is_none() {
                let Some(Planned {
                    path,
                    header,
                    length,
                    stretches,
                }) = self.files.pop_front()
                else {
                    self.current = None;
                    return Ok(None);
                };
                let file =
                    File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                self.reading = Some(Reading {
                    path,
                    header,
                    window: Window::new(file, length),
                    counted: 0,
                    stretches,
                    scanning: None,
                    read_to: None,
                });
            }
            let reading = self.reading.as_mut().expect("a file is being read");
            let next = reading.next_record(report);
            report.bytes_read += reading.window.bytes_read() - reading.counted;
            reading.counted = reading.window.bytes_read();
            match next? {
                Some((record, data_at)) => {
                    if record.ts_ns >= selection.from_ns && record.ts_ns < selection.to_ns {
                        report.packets_examined += 1;
                        self.current = Some((record, data_at));
                        return Ok(Some(record.ts_ns));
                    }
                }
                None => self.reading = None,
            }
        }
    }

    /// The current packet.
    fn packet(&self, link: LinkType) -> Packet<'_> {
        let (record, at) = self.current.expect("advance found a packet");
        let reading = self.reading.as_ref().expect("the packet's file is being read");
        Packet {
            ts_ns: record.ts_ns,
            wire_len: record.wire_len.max(record.captured),
            data: reading.window.slice(at, record.captured as usize),
            link,
        }
    }
}

impl Reading {
    /// The next record of the file, and the file offset of its captured
    /// bytes (which are in the window); `None` at the end of what is read
    /// of the file. What is not a record on the way is skipped and
    /// reported.
    fn next_record(&mut self, report: &mut ExtractReport) -> io::Result<Option<(RecordHeader, u64)>> {
        loop {
            let Some((scanner, entry, tally)) = &mut self.scanning else {
                let Some(stretch) = self.stretches.pop_front() else {
                    return Ok(None);
                };
                report.blocks_read += u64::from(stretch.block);
                let mut start = stretch.start;
                // The block before, read just now, ended where this one
                // starts, but its last record ran on past that: records go
                // on where it ends, not where the index says.
                if let Some((end, at)) = self.read_to
                    && end == start
                    && at > start
                {
                    report.warn(
                        &index_path(&self.path),
                        stretch
                            .entry
                            .as_ref()
                            .map(|e| (HEADER_BYTES + e.number * ENTRY_BYTES) as u64),
                        format!(
                            "a block starts at byte offset {start}, inside the record that ends at {at}; \
                             reading goes on at {at}"
                        ),
                    );
                    start = at.min(stretch.end);
                }
                let scanner = Scanner::new(self.header.clone(), start, stretch.end);
                let entry = stretch.entry.filter(|_| start == stretch.start);
                self.scanning = Some((scanner, entry, Tally::default()));
                self.read_to = Some((stretch.end, start));
                continue;
            };
            let step = scanner.next(&mut self.window).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "{}: reading at byte offset {}: {e}",
                        self.path.display(),
                        scanner.position()
                    ),
                )
            })?;
            match step {
                Step::Record { at, record } => {
                    if tally.packets == 0 {
                        tally.first_ts_ns = record.ts_ns;
                    }
                    tally.packets += 1;
                    tally.last_ts_ns = record.ts_ns;
                    return Ok(Some((record, at + self.header.record_head_len() as u64)));
                }
                Step::Unreadable { at, len, kind } => {
                    report.bytes_unreadable += len;
                    tally.damaged = true;
                    let what = match kind {
                        Unreadable::Middle => format!(
                            "{len} bytes that are not records (a damaged record); skipped, reading goes on at byte offset {}",
                            at + len
                        ),
                        Unreadable::Zeros => {
                            format!(
                                "the file ends with {len} zero bytes (a recorder killed while closing it); `sluice repair` cuts them"
                            )
                        }
                        Unreadable::Torn => {
                            report.truncated.push(self.path.clone());
                            format!(
                                "the file ends inside a record ({len} bytes of it; a recorder killed while writing); `sluice repair` cuts it"
                            )
                        }
                        Unreadable::Garbage => format!("the last {len} bytes of the file are not records; skipped"),
                    };
                    report.warn(&self.path, Some(at), what);
                }
                Step::End => {
                    if let Some((_, to)) = &mut self.read_to {
                        *to = scanner.position();
                    }
                    if let Some(Entry {
                        number: k,
                        entry,
                        suspect,
                    }) = entry
                    {
                        let agrees = tally.packets == u64::from(entry.packets)
                            && tally.first_ts_ns == entry.first_ts_ns
                            && tally.last_ts_ns == entry.last_ts_ns;
                        let why = match suspect {
                            Some(why) if !agrees || tally.damaged => Some(format!(
                                "{why}; the block was read whatever the time range and flow, and"
                            )),
                            // Damage already told explains a disagreement.
                            None if !agrees && !tally.damaged => Some(format!(
                                "says the block holds {} packets stamped {} to {} ns, but",
                                entry.packets, entry.first_ts_ns, entry.last_ts_ns
                            )),
                            _ => None,
                        };
                        if let Some(why) = why {
                            let index_file = index_path(&self.path);
                            report.warn(
                                &index_file,
                                Some((HEADER_BYTES + *k * ENTRY_BYTES) as u64),
                                format!(
                                    "entry {k} (the block at byte offset {} of the capture) {why} it holds {} \
                                     stamped {} to {} ns (what it holds was extracted; `sluice repair {}` \
                                     rebuilds the index)",
                                    entry.offset,
                                    tally.packets,
                                    tally.first_ts_ns,
                                    tally.last_ts_ns,
                                    self.path.display()
                                ),
                            );
                        }
                    }
                    self.scanning = None;
                }
            }
        }
    }
}

/// The link type of a recording, from its file header.
pub fn link_type(path: &Path) -> io::Result<LinkType> {
    let linktype = FileHeader::read(path)?.linktype;
    LinkType::from_linktype(linktype).ok_or_else(|| invalid(path, format!("unknown link type {linktype}")))
}

/// One flow of a `flows.jsonl`: the packets whose key is its key, in
/// either direction, stamped from its first to its last packet.
///
/// Flow ids cannot be turned back into keys, so the record is looked up;
/// the time span tells apart flows of one 5-tuple that followed each other
/// (a flow table ends a flow at a timeout or a TCP close).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpan {
    /// Canonical (direction-independent) form.
    key: FlowKey,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
}

impl FlowSpan {
    /// Finds flow `id` (16 hex digits) in a `flows.jsonl` file.
    pub fn find(flows: &Path, id: &str) -> io::Result<FlowSpan> {
        let file = File::open(flows).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", flows.display())))?;
        for (number, line) in BufReader::new(file).lines().enumerate() {
            let line = line?;
            // Parsing every record of a large file would cost more than
            // the extraction; only lines holding the id's text are parsed.
            if !line.contains(id) {
                continue;
            }
            let record: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| invalid(flows, format!("line {}: {e}", number + 1)))?;
            if record["flow_id"].as_str() != Some(id) {
                continue;
            }
            return FlowSpan::from_record(&record)
                .map_err(|why| invalid(flows, format!("line {}: flow {id}: {why}", number + 1)));
        }
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: no flow with id {id}", flows.display()),
        ))
    }

    fn from_record(record: &serde_json::Value) -> Result<FlowSpan, String> {
        let text = |field: &str| record[field].as_str().ok_or(format!("no string field {field}"));
        let number = |field: &str| record[field].as_u64().ok_or(format!("no integer field {field}"));
        let small = |field: &str| -> Result<u16, String> {
            number(field).and_then(|n| u16::try_from(n).map_err(|_| format!("{field} {n} is too large")))
        };
        let ip = |field: &str| -> Result<IpAddr, String> { text(field)?.parse().map_err(|e| format!("{field}: {e}")) };
        let l4 = text("l4")?;
        let proto = (0..=u8::MAX)
            .find(|&p| sluice_wire::l4_name(p) == Some(l4))
            .or_else(|| l4.parse().ok())
            .ok_or(format!("unknown l4 {l4}"))?;
        let (src, dst) = (ip("src_ip")?, ip("dst_ip")?);
        let bytes = |addr: IpAddr| match addr {
            IpAddr::V4(v4) => {
                let mut b = [0; 16];
                b[..4].copy_from_slice(&v4.octets());
                b
            }
            IpAddr::V6(v6) => v6.octets(),
        };
        let key = FlowKey {
            src: bytes(src),
            dst: bytes(dst),
            src_port: small("src_port")?,
            dst_port: small("dst_port")?,
            vlan: small("vlan")?,
            proto,
            version: if src.is_ipv4() { IpVersion::V4 } else { IpVersion::V6 },
            tunnel_id: u32::try_from(number("tunnel_id")?).map_err(|_| "tunnel_id is too large")?,
        };
        Ok(FlowSpan {
            key: key.canonical().0,
            first_ts_ns: number("first_ts_ns")?,
            last_ts_ns: number("last_ts_ns")?,
        })
    }

    /// The hash the block indexes' Bloom filters hold for this flow.
    pub fn hash(&self) -> u64 {
        self.key.symmetric_hash()
    }

    /// Whether `packet` is one of this flow's.
    pub fn matches(&self, packet: &Packet<'_>) -> bool {
        (self.first_ts_ns..=self.last_ts_ns).contains(&packet.ts_ns)
            && sluice_wire::decode(packet.link, packet.data).is_ok_and(|d| d.key.canonical().0 == self.key)
    }
}

fn invalid(path: &Path, why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ENTRY_BYTES, MIN_BLOCK_BYTES, Recorder, RecorderConfig};

    const T0: u64 = 1_700_000_000_000_000_000;
    const PACKETS: u32 = 20_000;

    /// UDP from 10.0.0.1:1000 to 10.0.0.2, to port 2000 + i / 500: forty
    /// flows, each in its own stretch of time.
    fn frame(i: u32) -> Vec<u8> {
        let len = 60 + (i as usize * 37) % 1400;
        let mut f = vec![0u8; len];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1000u16.to_be_bytes());
        f[36..38].copy_from_slice(&(2000 + (i / 500) as u16).to_be_bytes());
        f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
        f
    }

    fn record_as(dir: &Path, format: CaptureFormat) -> Vec<(u64, Vec<u8>)> {
        let mut c = RecorderConfig::new(dir, LinkType::Ethernet, 2000);
        c.format = format;
        c.block_bytes = MIN_BLOCK_BYTES;
        c.queue_blocks = 2;
        c.rotate_bytes = Some(3 << 20);
        let mut r = Recorder::start(c).unwrap();
        let mut sent = Vec::new();
        for i in 0..PACKETS {
            let f = frame(i);
            let ts = T0 + u64::from(i) * 1000;
            r.push(ts, f.len() as u32, &f).unwrap();
            sent.push((ts, f));
        }
        r.finish().unwrap();
        sent
    }

    fn read(path: &Path) -> Vec<(u64, Vec<u8>)> {
        let file = sluice_capture::CaptureFile::open(path).unwrap();
        file.reader().unwrap().map(|p| (p.ts_ns, p.data.to_vec())).collect()
    }

    fn all(from_ns: u64, to_ns: u64) -> Selection {
        Selection {
            from_ns,
            to_ns,
            flow_hash: None,
        }
    }

    #[test]
    fn only_the_blocks_of_the_range_and_the_flow_are_read() {
        let pcap = blocks_of_the_range_and_the_flow(CaptureFormat::Pcap);
        let pcapng = blocks_of_the_range_and_the_flow(CaptureFormat::PcapNg);
        assert!(pcap == pcapng, "the same pcap files from either format's recordings");
    }

    /// The extracted files, as bytes.
    fn blocks_of_the_range_and_the_flow(format: CaptureFormat) -> [Vec<u8>; 2] {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let sent = record_as(&rec, format);
        assert!(recordings(&rec).unwrap().len() >= 3);
        let out = dir.path().join("out.pcap");

        let (from, to) = (sent[5000].0, sent[9000].0);
        let report = extract(&rec, &all(from, to), |_| true, &out).unwrap();
        assert_eq!(read(&out), sent[5000..9000]);
        let by_time = std::fs::read(&out).unwrap();
        assert_eq!(report.packets_written, 4000);
        assert!(
            report.files_skipped > 0 && report.blocks_skipped_by_time > 0,
            "{report:?}"
        );
        assert_eq!(
            report.blocks_read + report.blocks_skipped_by_time + report.blocks_skipped_by_flow,
            report.blocks
        );
        assert!(report.unindexed.is_empty());

        let record = serde_json::json!({
            "flow_id": "0123456789abcdef", "src_ip": "10.0.0.2", "src_port": 2017, "dst_ip": "10.0.0.1",
            "dst_port": 1000, "l4": "UDP", "ip_version": 4, "vlan": 0, "tunnel": "", "tunnel_id": 0,
            "first_ts_ns": T0, "last_ts_ns": T0 + 1_000_000_000,
        });
        let flows = dir.path().join("flows.jsonl");
        std::fs::write(&flows, format!("{{\"flow_id\":\"ffffffffffffffff\"}}\n{record}\n")).unwrap();
        let flow = FlowSpan::find(&flows, "0123456789abcdef").unwrap();
        assert!(FlowSpan::find(&flows, "0000000000000000").is_err());
        let selection = Selection {
            flow_hash: Some(flow.hash()),
            ..all(0, u64::MAX)
        };
        let report = extract(&rec, &selection, |p| flow.matches(p), &out).unwrap();
        assert_eq!(read(&out), sent[17 * 500..18 * 500]);
        assert_eq!(report.blocks_skipped_by_time, 0);
        assert!(
            report.blocks_read < 4 && report.blocks_skipped_by_flow > 0,
            "{report:?}"
        );
        [by_time, std::fs::read(&out).unwrap()]
    }

    #[test]
    fn files_without_an_index_that_covers_them_are_read_whole() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            read_whole_without_an_index(format);
        }
    }

    fn read_whole_without_an_index(format: CaptureFormat) {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let sent = record_as(&rec, format);
        let files = recordings(&rec).unwrap();
        // An index that lacks its last entry, as a crash leaves it...
        let index = index_path(&files[0]);
        let length = std::fs::metadata(&index).unwrap().len();
        File::options()
            .write(true)
            .open(&index)
            .unwrap()
            .set_len(length - ENTRY_BYTES as u64)
            .unwrap();
        // ...and a file cut inside a record, with no index.
        let last = files.last().unwrap();
        std::fs::remove_file(index_path(last)).unwrap();
        let length = std::fs::metadata(last).unwrap().len();
        File::options()
            .write(true)
            .open(last)
            .unwrap()
            .set_len(length - 10)
            .unwrap();

        let out = dir.path().join("out.pcap");
        let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
        assert_eq!(report.unindexed, [files[0].clone(), last.clone()]);
        assert_eq!(report.truncated, std::slice::from_ref(last));
        assert_eq!(read(&out), sent[..sent.len() - 1]);
    }

    /// Worker `w`'s packets: every packet `i` with `i % workers == w`, all
    /// stamped `T0 + i * 1000`, except that pairs of workers share some
    /// timestamps (ties).
    fn worker_packets(w: u32, workers: u32) -> Vec<(u64, Vec<u8>)> {
        (0..PACKETS)
            .filter(|i| i % workers == w)
            .map(|i| {
                let tied = i / 2 * 2;
                let ts = if i % 1000 < 10 { tied } else { i };
                (T0 + u64::from(ts) * 1000, frame(i))
            })
            .collect()
    }

    #[test]
    fn worker_subdirectories_are_merged_by_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        // Two workers' directories, as `live --record` writes them (one in
        // each format), and a stray directory without recordings.
        let mut sent = Vec::new();
        for (w, format) in [(1, CaptureFormat::PcapNg), (0, CaptureFormat::Pcap)] {
            let mut c = RecorderConfig::new(rec.join(format!("w{w}")), LinkType::Ethernet, 2000);
            c.format = format;
            c.block_bytes = MIN_BLOCK_BYTES;
            c.queue_blocks = 2;
            c.rotate_bytes = Some(3 << 20);
            let mut r = Recorder::start(c).unwrap();
            for (ts, f) in worker_packets(w, 2) {
                r.push(ts, f.len() as u32, &f).unwrap();
                sent.push((ts, w, f));
            }
            r.finish().unwrap();
        }
        std::fs::create_dir(rec.join("notes")).unwrap();
        let sets = recording_sets(&rec).unwrap();
        assert_eq!(
            sets.iter().map(|s| s.dir.clone()).collect::<Vec<_>>(),
            [rec.join("w0"), rec.join("w1")]
        );
        assert!(sets.iter().all(|s| s.files.len() >= 2), "rotated: {sets:?}");
        // In time order, ties by directory.
        sent.sort_by_key(|(ts, w, _)| (*ts, *w));
        let sent: Vec<(u64, Vec<u8>)> = sent.into_iter().map(|(ts, _, f)| (ts, f)).collect();

        let out = dir.path().join("out.pcap");
        let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
        assert_eq!(report.directories, [rec.join("w0"), rec.join("w1")]);
        assert_eq!(report.packets_written, u64::from(PACKETS));
        assert!(read(&out) == sent, "every packet, in time order");

        // A time range reads only the blocks that hold it, in both.
        let (from, to) = (sent[5000].0, sent[9000].0);
        let report = extract(&rec, &all(from, to), |_| true, &out).unwrap();
        let expected: Vec<_> = sent.iter().filter(|p| p.0 >= from && p.0 < to).cloned().collect();
        assert!(read(&out) == expected);
        assert!(
            report.blocks_read < report.blocks && report.files_skipped > 0,
            "{report:?}"
        );
        // A filter sees the merged stream.
        let report = extract(&rec, &all(0, u64::MAX), |p| p.data.len() % 2 == 0, &out).unwrap();
        let even: Vec<_> = sent.iter().filter(|p| p.1.len() % 2 == 0).cloned().collect();
        assert!(read(&out) == even);
        assert_eq!(report.packets_examined, u64::from(PACKETS));

        // More workers' directories: w2 sorts before w10.
        for (name, w) in [("w10", 2), ("w2", 3)] {
            let mut c = RecorderConfig::new(rec.join(name), LinkType::Ethernet, 2000);
            c.block_bytes = MIN_BLOCK_BYTES;
            let mut r = Recorder::start(c).unwrap();
            for (ts, f) in worker_packets(w, 4) {
                r.push(ts, f.len() as u32, &f).unwrap();
            }
            r.finish().unwrap();
        }
        let names: Vec<_> = recording_sets(&rec)
            .unwrap()
            .iter()
            .map(|s| s.dir.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["w0", "w1", "w2", "w10"]);
        let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
        let merged = read(&out);
        assert_eq!(merged.len() as u64, u64::from(PACKETS) * 3 / 2);
        assert!(merged.windows(2).all(|p| p[0].0 <= p[1].0), "in time order");
        assert_eq!(report.directories.len(), 4);
    }

    /// Overwrites bytes of a file in place.
    fn poke(path: &Path, at: u64, bytes: &[u8]) {
        use std::os::unix::fs::FileExt;
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .write_all_at(bytes, at)
            .unwrap();
    }

    fn entry_at(k: usize) -> u64 {
        (HEADER_BYTES + k * ENTRY_BYTES) as u64
    }

    /// An index entry that says its block holds no packet, or whose times
    /// were changed, hides nothing: its block is read and the run warned.
    #[test]
    fn an_index_entry_that_disagrees_hides_no_packet() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let dir = tempfile::tempdir().unwrap();
            let rec = dir.path().join("rec");
            let sent = record_as(&rec, format);
            let files = recordings(&rec).unwrap();
            let index_file = index_path(&files[0]);
            let index = Index::read(&index_file).unwrap();
            assert!(index.blocks.len() >= 3);
            let out = dir.path().join("out.pcap");

            // No packets in block 1.
            poke(&index_file, entry_at(1) + 32, &0u32.to_le_bytes());
            let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
            assert!(read(&out) == sent, "{format:?}: every packet, {report:?}");
            assert_eq!(report.blocks_skipped_by_time, 0, "{report:?}");
            assert!(report.partial() && report.warnings[0].path == index_file, "{report:?}");
            assert_eq!(report.warnings[0].offset, Some(entry_at(1)));
            assert!(report.warnings[0].message.contains("holds no packet"), "{report:?}");

            // Block 1's times narrowed to its first packet's: a time range
            // inside what it really holds still finds its packets (the
            // neighbours bound them), and the entry is caught on reading.
            let original = &index.blocks[1];
            let mut narrowed = original.clone();
            narrowed.last_ts_ns = narrowed.first_ts_ns;
            poke(&index_file, entry_at(1), &narrowed.encode());
            let middle = (original.first_ts_ns + original.last_ts_ns) / 2;
            let (from, to) = (middle, original.last_ts_ns);
            let report = extract(&rec, &all(from, to), |_| true, &out).unwrap();
            let expected: Vec<_> = sent.iter().filter(|p| p.0 >= from && p.0 < to).cloned().collect();
            assert!(!expected.is_empty() && read(&out) == expected, "{format:?}: {report:?}");
            assert!(report.partial(), "{report:?}");
            assert!(report.warnings[0].message.contains("it holds"), "{report:?}");

            // Times moved far into the future contradict the next block.
            let mut later = original.clone();
            later.first_ts_ns += 3_600_000_000_000;
            later.last_ts_ns += 3_600_000_000_000;
            poke(&index_file, entry_at(1), &later.encode());
            let report = extract(&rec, &all(from, to), |_| true, &out).unwrap();
            assert!(read(&out) == expected, "{format:?}: {report:?}");
            assert!(report.partial(), "{report:?}");

            // The original entry back: a clean run.
            poke(&index_file, entry_at(1), &original.encode());
            let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
            assert!(!report.partial() && read(&out) == sent, "{report:?}");
        }
    }

    /// Two entries whose boundary was moved into a record (both changed so
    /// that they still tile the file): the record is read once, from the
    /// first block, and the second goes on where it ends.
    #[test]
    fn a_block_boundary_inside_a_record_reads_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let sent = record_as(&rec, CaptureFormat::Pcap);
        let files = recordings(&rec).unwrap();
        let index_file = index_path(&files[0]);
        let index = Index::read(&index_file).unwrap();
        let (mut first, mut second) = (index.blocks[0].clone(), index.blocks[1].clone());
        first.length -= 10;
        second.offset -= 10;
        second.length += 10;
        poke(&index_file, entry_at(0), &first.encode());
        poke(&index_file, entry_at(1), &second.encode());
        let out = dir.path().join("out.pcap");
        let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
        assert!(read(&out) == sent, "{report:?}");
        assert_eq!(report.bytes_unreadable, 0, "{report:?}");
        assert!(
            report.partial() && report.warnings[0].message.contains("inside the record"),
            "{report:?}"
        );
    }

    /// A damaged record header inside an indexed block: extraction reads on
    /// past it, loses that one packet only, and says where.
    #[test]
    fn a_damaged_record_in_a_block_is_skipped_with_its_offset() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let dir = tempfile::tempdir().unwrap();
            let rec = dir.path().join("rec");
            let sent = record_as(&rec, format);
            let files = recordings(&rec).unwrap();
            let in_file: Vec<u64> = sluice_capture::CaptureFile::open(&files[0])
                .unwrap()
                .reader()
                .unwrap()
                .map(|p| p.offset)
                .collect();
            let victim = in_file.len() / 2;
            let at = in_file[victim];
            // Bit 24 of the captured length.
            let captured_at = match format {
                CaptureFormat::Pcap => 8,
                CaptureFormat::PcapNg => 20,
            };
            let mut byte = [0u8];
            {
                use std::os::unix::fs::FileExt;
                File::open(&files[0])
                    .unwrap()
                    .read_exact_at(&mut byte, at + captured_at + 3)
                    .unwrap();
            }
            poke(&files[0], at + captured_at + 3, &[byte[0] ^ 1]);
            let out = dir.path().join("out.pcap");
            let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
            let mut expected = sent.clone();
            expected.remove(victim);
            assert!(read(&out) == expected, "{format:?}: {report:?}");
            assert!(report.partial(), "{report:?}");
            let warning = report.warnings.iter().find(|w| w.path == files[0]).unwrap();
            assert_eq!(warning.offset, Some(at), "{report:?}");
            assert_eq!(report.bytes_unreadable, in_file[victim + 1] - at);
        }
    }

    /// What is not a recording, or is cut short, makes the result partial.
    #[test]
    fn torn_and_foreign_files_make_a_partial_result() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let sent = record_as(&rec, CaptureFormat::Pcap);
        let files = recordings(&rec).unwrap();
        let last = files.last().unwrap();
        let length = std::fs::metadata(last).unwrap().len();
        File::options()
            .write(true)
            .open(last)
            .unwrap()
            .set_len(length - 10)
            .unwrap();
        std::fs::write(rec.join("sluice-junk.pcap"), b"this is no capture at all").unwrap();
        let out = dir.path().join("out.pcap");
        let report = extract(&rec, &all(0, u64::MAX), |_| true, &out).unwrap();
        assert!(read(&out) == sent[..sent.len() - 1]);
        assert_eq!(report.files_unreadable, 1);
        assert_eq!(report.truncated, std::slice::from_ref(last));
        assert!(
            report.warning_count >= 3,
            "the junk, the last index, the torn record: {report:?}"
        );
        // Nothing readable at all is an error.
        let junk = dir.path().join("junk");
        std::fs::create_dir(&junk).unwrap();
        std::fs::write(junk.join("sluice-junk.pcap"), b"this is no capture at all").unwrap();
        let error = extract(&junk, &all(0, u64::MAX), |_| true, &out).unwrap_err();
        assert!(
            error.to_string().contains("none of the recordings could be read"),
            "{error}"
        );
    }
}
