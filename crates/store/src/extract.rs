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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::net::IpAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sluice_wire::{FlowKey, IpVersion, LinkType};

use crate::format::{CaptureFormat, FileHeader, RecordHeader};
use crate::{Index, PcapWriter, index_path, is_recording};

/// No recorded frame is longer (the recorder's largest snap length is
/// 256 KiB); a longer one means the bytes are not a record header.
const MAX_FRAME: u32 = 1 << 20;

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
    /// Files read whole because no index covers them.
    pub unindexed: Vec<PathBuf>,
    /// Of those, files that end inside a record (a crash), read up to it.
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
    /// Packets handed to the predicate (those in the time range).
    pub packets_examined: u64,
    pub packets_written: u64,
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
/// pcapng recordings may be mixed.
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
    plan: Plan,
}

enum Plan {
    /// Offsets and lengths of the blocks to read, in file order.
    Blocks(VecDeque<(u64, u64)>),
    Whole,
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
    let index = Index::read(index_path(&path)).ok().filter(|index| tiles(index, length));
    let Some(index) = index else {
        return whole(path, report).map(Some);
    };
    let last_ns = selection.to_ns - 1;
    let in_time = index.blocks_for(selection.from_ns, last_ns, None).count() as u64;
    let blocks: VecDeque<(u64, u64)> = index
        .blocks_for(selection.from_ns, last_ns, selection.flow_hash)
        .map(|b| (b.offset, b.length))
        .collect();
    if !blocks.is_empty() {
        // The index is trusted only if its first block starts where the
        // header ends: checked once the file is opened anyway.
        let header = read_header(&path, report)?;
        if header.len != index.blocks[0].offset {
            report.unindexed.push(path.clone());
            return Ok(Some(Planned {
                path,
                header,
                plan: Plan::Whole,
            }));
        }
        count_blocks(report, &index, in_time, blocks.len() as u64);
        return Ok(Some(Planned {
            path,
            header,
            plan: Plan::Blocks(blocks),
        }));
    }
    count_blocks(report, &index, in_time, 0);
    report.files_skipped += 1;
    Ok(None)
}

fn count_blocks(report: &mut ExtractReport, index: &Index, in_time: u64, selected: u64) {
    report.blocks += index.blocks.len() as u64;
    report.blocks_skipped_by_time += index.blocks.len() as u64 - in_time;
    report.blocks_skipped_by_flow += in_time - selected;
}

fn whole(path: PathBuf, report: &mut ExtractReport) -> io::Result<Planned> {
    let header = read_header(&path, report)?;
    report.unindexed.push(path.clone());
    Ok(Planned {
        path,
        header,
        plan: Plan::Whole,
    })
}

fn read_header(path: &Path, report: &mut ExtractReport) -> io::Result<FileHeader> {
    let header = FileHeader::read(path)?;
    if header.format == CaptureFormat::Pcap && !header.nanos {
        return Err(invalid(
            path,
            "a microsecond pcap file; the recorder writes nanosecond ones".into(),
        ));
    }
    report.bytes_read += header.len;
    Ok(header)
}

/// Whether the index's blocks tile the file from its first block (where
/// the header ends) to its end, so that every record is in a block it
/// describes.
fn tiles(index: &Index, file_length: u64) -> bool {
    let Some(first) = index.blocks.first() else {
        return false;
    };
    let mut at = first.offset;
    for block in &index.blocks {
        if block.offset != at {
            return false;
        }
        at = at.saturating_add(block.length);
    }
    first.offset > 0 && at == file_length
}

/// One directory's recordings, read packet by packet in recorded order.
struct Stream {
    files: VecDeque<Planned>,
    /// The file being read.
    reading: Option<Reading>,
    /// The block being read, or in a file read whole the current record.
    buffer: Vec<u8>,
    /// The current packet's header and where its bytes start in `buffer`.
    current: Option<(RecordHeader, usize)>,
}

struct Reading {
    path: PathBuf,
    header: FileHeader,
    source: Source,
}

enum Source {
    /// Read by blocks: `at` is the next record's place in the buffer, which
    /// holds the block read from `offset`; `blocks` are those still to read.
    Blocks {
        file: File,
        blocks: VecDeque<(u64, u64)>,
        offset: u64,
        at: usize,
    },
    Whole(BufReader<File>),
}

impl Stream {
    fn new(files: VecDeque<Planned>) -> Stream {
        Stream {
            files,
            reading: None,
            buffer: Vec::new(),
            current: None,
        }
    }

    /// Moves to the next packet in the time range; its timestamp, or
    /// `None` at the end of the stream.
    fn advance(&mut self, selection: &Selection, report: &mut ExtractReport) -> io::Result<Option<u64>> {
        loop {
            if self.reading.is_none() {
                let Some(Planned { path, header, plan }) = self.files.pop_front() else {
                    self.current = None;
                    return Ok(None);
                };
                let file =
                    File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
                let source = match plan {
                    Plan::Blocks(blocks) => Source::Blocks {
                        file,
                        blocks,
                        offset: 0,
                        at: 0,
                    },
                    Plan::Whole => {
                        let mut reader = BufReader::with_capacity(1 << 20, file);
                        reader.seek_relative(header.len as i64)?;
                        Source::Whole(reader)
                    }
                };
                self.buffer.clear();
                self.reading = Some(Reading { path, header, source });
            }
            let reading = self.reading.as_mut().expect("a file is being read");
            match reading.next_record(&mut self.buffer, report)? {
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
        Packet {
            ts_ns: record.ts_ns,
            wire_len: record.wire_len.max(record.captured),
            data: &self.buffer[at..at + record.captured as usize],
            link,
        }
    }
}

impl Reading {
    /// The next record of the file, and where its captured bytes start in
    /// `buffer`; `None` at the end of the file (or where a file read whole
    /// stops being a capture, which is reported).
    fn next_record(
        &mut self,
        buffer: &mut Vec<u8>,
        report: &mut ExtractReport,
    ) -> io::Result<Option<(RecordHeader, usize)>> {
        let (path, header) = (&self.path, &self.header);
        let head_len = header.record_head_len();
        match &mut self.source {
            Source::Blocks {
                file,
                blocks,
                offset,
                at,
            } => {
                if *at >= buffer.len() {
                    let Some((block_offset, length)) = blocks.pop_front() else {
                        return Ok(None);
                    };
                    let length = usize::try_from(length).map_err(|_| invalid(path, "index block too long".into()))?;
                    buffer.resize(length, 0);
                    file.read_exact_at(buffer, block_offset)
                        .map_err(|e| invalid(path, format!("reading the block at offset {block_offset}: {e}")))?;
                    report.bytes_read += length as u64;
                    report.blocks_read += 1;
                    (*offset, *at) = (block_offset, 0);
                }
                let rest = &buffer[*at..];
                let record = header
                    .parse_record(rest, MAX_FRAME)
                    .filter(|r| r.len <= rest.len() && header.record_complete(&rest[..r.len]))
                    .ok_or_else(|| {
                        invalid(
                            path,
                            format!(
                                "no whole record at offset {} inside the block the index puts at {offset}",
                                *offset + *at as u64
                            ),
                        )
                    })?;
                let data_at = *at + head_len;
                *at += record.len;
                Ok(Some((record, data_at)))
            }
            Source::Whole(reader) => {
                buffer.resize(head_len, 0);
                let got = read_full(reader, buffer)?;
                report.bytes_read += got as u64;
                if got == 0 {
                    return Ok(None);
                }
                let Some(record) = header.parse_record(buffer, MAX_FRAME).filter(|_| got == head_len) else {
                    report.truncated.push(path.clone());
                    return Ok(None);
                };
                buffer.resize(record.len, 0);
                let got = read_full(reader, &mut buffer[head_len..])?;
                report.bytes_read += got as u64;
                if head_len + got < record.len || !header.record_complete(buffer) {
                    report.truncated.push(path.clone());
                    return Ok(None);
                }
                Ok(Some((record, head_len)))
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

/// Reads until `buffer` is full or the input ends; returns the bytes read.
fn read_full(reader: &mut impl Read, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match reader.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
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
}
