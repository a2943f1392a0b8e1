//! Pulling the packets of a time range (and of a filter or a flow) out of a
//! directory of recordings, reading only the blocks their indexes point
//! at.
//!
//! Files are taken in name order, which is time order (a name is its
//! first packet's timestamp), and each file's records in file order, so
//! the output keeps the order in which packets were recorded. A file whose
//! index covers it (its blocks tile the file from the header to its end)
//! is skipped whole when its blocks' times miss the range, and otherwise
//! read block by block: one positioned read per block the index selects.
//! A file without such an index (none, an unreadable one, or one that
//! lacks the last blocks after a crash or while recording) is read whole,
//! and reported.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::net::IpAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sluice_wire::{FlowKey, IpVersion, LinkType};

use crate::{Index, PcapWriter, index_path, is_recording};

const FILE_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;
/// Little-endian nanosecond pcap, what the recorder writes.
const MAGIC_NS: u32 = 0xa1b2_3c4d;
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
    /// Recordings in the directory.
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

/// The recordings in `dir` (`sluice-*.pcap`), in name order: time order.
pub fn recordings(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))? {
        let entry = entry?;
        if entry.file_name().to_str().is_some_and(is_recording) {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Writes the packets of the recordings in `dir` that are in the time
/// range of `selection` and that `matches` accepts to a nanosecond pcap
/// file at `out`, in recorded order.
///
/// The output's link type is the recordings' (they must agree) and its
/// snap length the largest of theirs, so frames are copied whole.
pub fn extract(
    dir: &Path,
    selection: &Selection,
    mut matches: impl FnMut(&Packet<'_>) -> bool,
    out: &Path,
) -> io::Result<ExtractReport> {
    let files = recordings(dir)?;
    if files.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: no recordings (sluice-*.pcap)", dir.display()),
        ));
    }
    let mut report = ExtractReport {
        files: files.len() as u64,
        ..ExtractReport::default()
    };
    // The output's header needs the link type and snap length of the files
    // that will be read, so all are planned before any is read; when none
    // is, the output is still a valid (empty) capture.
    let mut plans = Vec::with_capacity(files.len());
    for path in files {
        let plan = plan(&path, selection, &mut report)?;
        if let Some(plan) = plan {
            plans.push((path, plan));
        }
    }
    let mut headers = Vec::with_capacity(plans.len());
    for (path, _) in &plans {
        headers.push(FileHeader::read(path)?);
        report.bytes_read += FILE_HEADER as u64;
    }
    let link = headers.first().map_or(1, |h| h.linktype);
    if let Some(((path, _), other)) = plans.iter().zip(&headers).find(|(_, h)| h.linktype != link) {
        return Err(invalid(
            path,
            format!(
                "link type {} differs from {}'s {link}; extract from one kind of link at a time",
                other.linktype,
                plans[0].0.display()
            ),
        ));
    }
    let snaplen = headers.iter().map(|h| h.snaplen).max().unwrap_or(262_144);
    let mut writer = PcapWriter::create(out, link, snaplen)?;
    let link =
        LinkType::from_linktype(link).ok_or_else(|| invalid(&plans[0].0, format!("unknown link type {link}")))?;
    let mut buffer = Vec::new();
    let mut examined = 0;
    for (path, plan) in &plans {
        let mut emit = |packet: &Packet<'_>| -> io::Result<()> {
            if packet.ts_ns >= selection.from_ns && packet.ts_ns < selection.to_ns {
                examined += 1;
                if matches(packet) {
                    writer.write(packet.ts_ns, packet.wire_len, packet.data)?;
                }
            }
            Ok(())
        };
        let file = File::open(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        match plan {
            Plan::Blocks(blocks) => {
                for &(offset, length) in blocks {
                    let length = usize::try_from(length).map_err(|_| invalid(path, "index block too long".into()))?;
                    buffer.resize(length, 0);
                    file.read_exact_at(&mut buffer, offset)
                        .map_err(|e| invalid(path, format!("reading the block at offset {offset}: {e}")))?;
                    report.bytes_read += length as u64;
                    report.blocks_read += 1;
                    let mut at = 0;
                    while at < buffer.len() {
                        let header = RecordHeader::parse(&buffer[at..])
                            .filter(|h| RECORD_HEADER + h.captured as usize <= buffer.len() - at)
                            .ok_or_else(|| {
                                invalid(
                                    path,
                                    format!(
                                        "no whole record at offset {} inside the block the index puts at {offset}",
                                        offset + at as u64
                                    ),
                                )
                            })?;
                        let data = &buffer[at + RECORD_HEADER..at + RECORD_HEADER + header.captured as usize];
                        emit(&header.packet(data, link))?;
                        at += RECORD_HEADER + header.captured as usize;
                    }
                }
            }
            Plan::Whole => {
                let mut reader = BufReader::with_capacity(1 << 20, file);
                reader.seek_relative(FILE_HEADER as i64)?;
                let mut header = [0u8; RECORD_HEADER];
                loop {
                    match read_full(&mut reader, &mut header)? {
                        0 => break,
                        RECORD_HEADER => {}
                        _ => {
                            report.truncated.push(path.clone());
                            break;
                        }
                    }
                    report.bytes_read += RECORD_HEADER as u64;
                    let Some(record) = RecordHeader::parse(&header) else {
                        report.truncated.push(path.clone());
                        break;
                    };
                    buffer.resize(record.captured as usize, 0);
                    let got = read_full(&mut reader, &mut buffer)?;
                    report.bytes_read += got as u64;
                    if got < buffer.len() {
                        report.truncated.push(path.clone());
                        break;
                    }
                    emit(&record.packet(&buffer, link))?;
                }
            }
        }
    }
    report.packets_examined = examined;
    report.packets_written = writer.packets();
    writer.finish()?;
    Ok(report)
}

enum Plan {
    /// Offsets and lengths of the blocks to read, in file order.
    Blocks(Vec<(u64, u64)>),
    Whole,
}

/// Decides from a file's index what to read of it; `None` skips it.
fn plan(path: &Path, selection: &Selection, report: &mut ExtractReport) -> io::Result<Option<Plan>> {
    if selection.from_ns >= selection.to_ns {
        report.files_skipped += 1;
        return Ok(None);
    }
    let length = std::fs::metadata(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?
        .len();
    let index = match Index::read(index_path(path)) {
        Ok(index) if covers(&index, length) => index,
        _ => {
            report.unindexed.push(path.to_path_buf());
            return Ok(Some(Plan::Whole));
        }
    };
    let last_ns = selection.to_ns - 1;
    report.blocks += index.blocks.len() as u64;
    let in_time = index.blocks_for(selection.from_ns, last_ns, None).count() as u64;
    let blocks: Vec<(u64, u64)> = index
        .blocks_for(selection.from_ns, last_ns, selection.flow_hash)
        .map(|b| (b.offset, b.length))
        .collect();
    report.blocks_skipped_by_time += index.blocks.len() as u64 - in_time;
    report.blocks_skipped_by_flow += in_time - blocks.len() as u64;
    if blocks.is_empty() {
        report.files_skipped += 1;
        return Ok(None);
    }
    Ok(Some(Plan::Blocks(blocks)))
}

/// Whether the index's blocks tile the file from its header to its end, so
/// that every record is in a block it describes.
fn covers(index: &Index, file_length: u64) -> bool {
    let mut at = FILE_HEADER as u64;
    for block in &index.blocks {
        if block.offset != at {
            return false;
        }
        at = at.saturating_add(block.length);
    }
    at == file_length
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

#[derive(Debug, PartialEq, Eq)]
struct FileHeader {
    linktype: u32,
    snaplen: u32,
}

impl FileHeader {
    fn read(path: &Path) -> io::Result<FileHeader> {
        let mut header = [0u8; FILE_HEADER];
        File::open(path)
            .and_then(|f| f.read_exact_at(&mut header, 0))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        if u32_at(0) != MAGIC_NS {
            return Err(invalid(
                path,
                "not a little-endian nanosecond pcap file, as the recorder writes".into(),
            ));
        }
        Ok(FileHeader {
            snaplen: u32_at(16),
            linktype: u32_at(20),
        })
    }
}

struct RecordHeader {
    ts_ns: u64,
    captured: u32,
    wire_len: u32,
}

impl RecordHeader {
    /// The record header at the start of `bytes`, if it is plausible.
    fn parse(bytes: &[u8]) -> Option<RecordHeader> {
        let header: &[u8; RECORD_HEADER] = bytes.get(..RECORD_HEADER)?.try_into().ok()?;
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        let (seconds, nanos, captured, wire_len) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12));
        (nanos < 1_000_000_000 && captured <= MAX_FRAME).then(|| RecordHeader {
            ts_ns: u64::from(seconds) * 1_000_000_000 + u64::from(nanos),
            captured,
            wire_len,
        })
    }

    fn packet<'a>(&self, data: &'a [u8], link: LinkType) -> Packet<'a> {
        Packet {
            ts_ns: self.ts_ns,
            wire_len: self.wire_len.max(self.captured),
            data,
            link,
        }
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

    fn record(dir: &Path) -> Vec<(u64, Vec<u8>)> {
        let mut c = RecorderConfig::new(dir, LinkType::Ethernet, 2000);
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
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let sent = record(&rec);
        assert!(recordings(&rec).unwrap().len() >= 3);
        let out = dir.path().join("out.pcap");

        let (from, to) = (sent[5000].0, sent[9000].0);
        let report = extract(&rec, &all(from, to), |_| true, &out).unwrap();
        assert_eq!(read(&out), sent[5000..9000]);
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
    }

    #[test]
    fn files_without_an_index_that_covers_them_are_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let sent = record(&rec);
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
}
