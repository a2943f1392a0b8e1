//! Making a recording whose writer was killed readable again.
//!
//! After `kill -9` (or a crash) the open file ends wherever its last block
//! did: usually inside a record (a pcap record, or a pcapng Enhanced Packet
//! Block), and, if the kill came while the file was being closed, in the
//! zero padding of its last `O_DIRECT` write. Repair keeps every complete
//! record up to the first that is not plausible, cuts the rest, and writes
//! the index again from the records kept.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::Path;

use sluice_wire::LinkType;

use crate::format::{FileHeader, HeaderProblem};
use crate::index::{BlockEntry, IndexWriter, index_path};
use crate::recorder::DEFAULT_BLOCK_BYTES;

/// What repair found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairReport {
    pub packets: u64,
    /// The file's length before and after.
    pub bytes_before: u64,
    pub bytes_kept: u64,
    /// The file held no file header (the recorder was killed before its
    /// first block reached the disk) and was deleted.
    pub removed: bool,
}

/// Longest step back in time a record may take and still count as
/// plausible: clocks are stepped, and packets of different queues arrive
/// slightly out of order, but garbage read as a timestamp is almost never
/// this close to its predecessor.
const MAX_STEP_BACK_NS: u64 = 60 * 1_000_000_000;
/// Largest wire length believed: GRO aggregates reach 64 KiB, jumbo
/// GSO frames a little more.
const MAX_WIRE_LEN: u32 = 1 << 20;

/// Cuts a pcap or pcapng file to its last complete, plausible record and
/// rebuilds its index. A file that is already whole is left as it is (its
/// index is still rebuilt).
pub fn repair(path: &Path) -> io::Result<RepairReport> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let bytes_before = std::fs::metadata(path).map_err(named)?.len();
    let mut head = Vec::new();
    File::open(path)
        .and_then(|f| f.take(64 << 10).read_to_end(&mut head))
        .map_err(named)?;
    let header = match FileHeader::parse(&head) {
        Ok(header) => header,
        Err(HeaderProblem::Incomplete) => {
            std::fs::remove_file(path).map_err(named)?;
            let _ = std::fs::remove_file(index_path(path));
            return Ok(RepairReport {
                packets: 0,
                bytes_before,
                bytes_kept: 0,
                removed: true,
            });
        }
        Err(HeaderProblem::Invalid(why)) => return Err(named(io::Error::new(io::ErrorKind::InvalidData, why))),
    };
    drop(head);
    let link = LinkType::from_linktype(header.linktype);
    let snaplen = header.snaplen;
    let mut input = BufReader::with_capacity(1 << 20, File::open(path).map_err(named)?);
    input.seek_relative(header.len as i64).map_err(named)?;

    let index_file = index_path(path);
    let mut temp_name = index_file.as_os_str().to_owned();
    temp_name.push(".tmp");
    let temp = std::path::PathBuf::from(temp_name);
    let mut index = IndexWriter::create(&temp).map_err(named)?;
    let mut entry = BlockEntry::empty(0);
    let mut kept = header.len;
    let mut packets = 0;
    let mut previous_ts = 0u64;
    let head_len = header.record_head_len();
    let mut record = vec![0u8; head_len + snaplen.clamp(1, MAX_WIRE_LEN) as usize + 8];
    loop {
        if read_up_to(&mut input, &mut record[..head_len]).map_err(named)? < head_len {
            break;
        }
        let Some(parsed) = header.parse_record(&record, snaplen) else {
            break;
        };
        let plausible = parsed.captured <= parsed.wire_len
            && parsed.wire_len > 0
            && parsed.wire_len <= MAX_WIRE_LEN
            && parsed.ts_ns + MAX_STEP_BACK_NS >= previous_ts;
        if !plausible {
            break;
        }
        let whole = &mut record[..parsed.len];
        if read_up_to(&mut input, &mut whole[head_len..]).map_err(named)? < parsed.len - head_len
            || !header.record_complete(whole)
        {
            break;
        }
        let frame = &whole[head_len..head_len + parsed.captured as usize];
        // Blocks as the recorder wrote them: the records that start in
        // each aligned stretch of the file.
        let block = kept / DEFAULT_BLOCK_BYTES as u64;
        if entry.packets > 0 && entry.offset / DEFAULT_BLOCK_BYTES as u64 != block {
            index.append(&entry).map_err(named)?;
            entry = BlockEntry::empty(0);
        }
        if entry.packets == 0 {
            entry.offset = kept;
        }
        let record_len = parsed.len as u64;
        match link {
            Some(link) => entry.add(parsed.ts_ns, record_len, link, frame),
            // Unknown link types still get time ranges; no flow is
            // findable in them.
            None => entry.add(parsed.ts_ns, record_len, LinkType::Ethernet, &[]),
        }
        kept += record_len;
        packets += 1;
        previous_ts = parsed.ts_ns;
    }
    if entry.packets > 0 {
        index.append(&entry).map_err(named)?;
    }
    drop(index);
    drop(input);
    if kept < bytes_before {
        let file = OpenOptions::new().write(true).open(path).map_err(named)?;
        file.set_len(kept).map_err(named)?;
        file.sync_all().map_err(named)?;
    }
    std::fs::rename(&temp, &index_file).map_err(named)?;
    Ok(RepairReport {
        packets,
        bytes_before,
        bytes_kept: kept,
        removed: false,
    })
}

/// Reads until `buf` is full or the input ends; returns how much was read.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Index;
    use crate::{CaptureFormat, MIN_BLOCK_BYTES, PcapWriter, Recorder, RecorderConfig};
    use std::io::Write;

    fn write_100(path: &Path) {
        let mut w = PcapWriter::create(path, 1, 1500).unwrap();
        for i in 0..100u64 {
            w.write(1_700_000_000_000_000_000 + i, 100, &[0xab; 100]).unwrap();
        }
        w.finish().unwrap();
    }

    fn cut_and_pad(path: &Path, cut: u64, zeros: usize) {
        OpenOptions::new().write(true).open(path).unwrap().set_len(cut).unwrap();
        OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(&vec![0; zeros])
            .unwrap();
    }

    #[test]
    fn a_torn_record_or_zero_padding_is_cut_and_complete_records_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        // Killed mid-stream: the file ends inside the 51st record.
        write_100(&path);
        cut_and_pad(&path, 24 + 50 * 116 + 70, 0);
        let report = repair(&path).unwrap();
        assert_eq!((report.packets, report.bytes_kept), (50, 24 + 50 * 116));
        let read = sluice_capture::CaptureFile::open(&path).unwrap();
        assert_eq!(read.reader().unwrap().count(), 50);
        assert_eq!(Index::read(index_path(&path)).unwrap().packets(), 50);
        // Killed while closing: the last write's zero padding is still there.
        write_100(&path);
        cut_and_pad(&path, 24 + 80 * 116, 4000);
        let report = repair(&path).unwrap();
        assert_eq!((report.packets, report.bytes_kept), (80, 24 + 80 * 116));
        // Repairing a whole file changes nothing.
        write_100(&path);
        let whole = 24 + 100 * 116;
        let report = repair(&path).unwrap();
        assert_eq!(
            (report.packets, report.bytes_kept, report.bytes_before),
            (100, whole, whole)
        );
        // Killed before the first block reached the disk.
        std::fs::write(&path, []).unwrap();
        assert!(repair(&path).unwrap().removed);
        assert!(!path.exists());
    }

    /// 100 packets of 101 bytes (so each EPB has three bytes of padding)
    /// in a pcapng recording; its path and the bytes before the first EPB.
    fn record_100_pcapng(dir: &Path) -> (std::path::PathBuf, u64) {
        let _ = std::fs::remove_dir_all(dir);
        let mut c = RecorderConfig::new(dir, LinkType::Ethernet, 1500);
        c.format = CaptureFormat::PcapNg;
        c.block_bytes = MIN_BLOCK_BYTES;
        c.direct = false;
        let mut r = Recorder::start(c).unwrap();
        for i in 0..100u64 {
            r.push(1_700_000_000_000_000_000 + i, 101, &[0xab; 101]).unwrap();
        }
        let files = r.finish().unwrap().files;
        let header = CaptureFormat::PcapNg.file_header(1, 1500).len() as u64;
        (files[0].clone(), header)
    }

    #[test]
    fn pcapng_is_cut_after_its_last_complete_enhanced_packet_block() {
        const EPB: u64 = 32 + 104;
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("rec");
        let read = |path: &Path| {
            let file = sluice_capture::CaptureFile::open(path).unwrap();
            file.reader().unwrap().map(|p| p.ts_ns).collect::<Vec<_>>()
        };
        // Killed mid-stream: inside the 51st EPB's data, then inside its
        // trailing length.
        for torn in [70, EPB - 2] {
            let (path, header) = record_100_pcapng(&rec);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), header + 100 * EPB);
            cut_and_pad(&path, header + 50 * EPB + torn, 0);
            let report = repair(&path).unwrap();
            assert_eq!((report.packets, report.bytes_kept), (50, header + 50 * EPB));
            assert_eq!(
                read(&path),
                (0..50).map(|i| 1_700_000_000_000_000_000 + i).collect::<Vec<_>>()
            );
            let index = Index::read(index_path(&path)).unwrap();
            assert_eq!(index.packets(), 50);
            assert_eq!((index.blocks[0].offset, index.blocks[0].length), (header, 50 * EPB));
        }
        // Killed while closing: zero padding after the last EPB.
        let (path, header) = record_100_pcapng(&rec);
        cut_and_pad(&path, header + 80 * EPB, 4000);
        let report = repair(&path).unwrap();
        assert_eq!((report.packets, report.bytes_kept), (80, header + 80 * EPB));
        // A whole file is left as it is.
        let (path, header) = record_100_pcapng(&rec);
        let report = repair(&path).unwrap();
        assert_eq!((report.packets, report.bytes_kept), (100, header + 100 * EPB));
        assert_eq!(report.bytes_before, report.bytes_kept);
        // A file cut inside its header holds nothing, and goes.
        cut_and_pad(&path, header - 10, 0);
        assert!(repair(&path).unwrap().removed);
        assert!(!path.exists());
        // A big-endian pcapng file is not the recorder's: refused.
        let mut other = CaptureFormat::PcapNg.file_header(1, 1500);
        other[8..12].copy_from_slice(&0x1a2b_3c4du32.to_be_bytes());
        let alien = dir.path().join("alien.pcapng");
        std::fs::write(&alien, &other).unwrap();
        let error = repair(&alien).unwrap_err().to_string();
        assert!(error.contains("big-endian"), "{error}");
    }
}
