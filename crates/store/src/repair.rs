//! Making a recording whose writer was killed readable again.
//!
//! After `kill -9` (or a crash) the open file ends wherever its last block
//! did: usually inside a record, and, if the kill came while the file was
//! being closed, in the zero padding of its last `O_DIRECT` write. Repair
//! keeps every complete record up to the first that is not plausible,
//! cuts the rest, and writes the index again from the records kept.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::path::Path;

use sluice_wire::LinkType;

use crate::index::{BlockEntry, IndexWriter, index_path};
use crate::recorder::DEFAULT_BLOCK_BYTES;

/// What repair found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairReport {
    pub packets: u64,
    /// The file's length before and after.
    pub bytes_before: u64,
    pub bytes_kept: u64,
    /// The file held no pcap header (the recorder was killed before its
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

/// Cuts a pcap file to its last complete, plausible record and rebuilds
/// its index. A file that is already whole is left as it is (its index is
/// still rebuilt).
pub fn repair(path: &Path) -> io::Result<RepairReport> {
    let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    let bytes_before = std::fs::metadata(path).map_err(named)?.len();
    let mut input = BufReader::with_capacity(1 << 20, File::open(path).map_err(named)?);
    let mut header = [0u8; 24];
    let got = read_up_to(&mut input, &mut header).map_err(named)?;
    if got < header.len() || header.iter().all(|&b| b == 0) {
        std::fs::remove_file(path).map_err(named)?;
        let _ = std::fs::remove_file(index_path(path));
        return Ok(RepairReport {
            packets: 0,
            bytes_before,
            bytes_kept: 0,
            removed: true,
        });
    }
    let nanos = match u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) {
        0xa1b2_3c4d => true,
        0xa1b2_c3d4 => false,
        _ => {
            return Err(named(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a little-endian pcap file (pcapng and big-endian files are not written by the recorder)",
            )));
        }
    };
    let snaplen = u32::from_le_bytes(header[16..20].try_into().expect("4 bytes"));
    let linktype = u32::from_le_bytes(header[20..24].try_into().expect("4 bytes"));
    let link = LinkType::from_linktype(linktype);
    let scale = if nanos { 1 } else { 1000 };

    let index_file = index_path(path);
    let mut temp_name = index_file.as_os_str().to_owned();
    temp_name.push(".tmp");
    let temp = std::path::PathBuf::from(temp_name);
    let mut index = IndexWriter::create(&temp).map_err(named)?;
    let mut entry = BlockEntry::empty(0);
    let mut kept = header.len() as u64;
    let mut packets = 0;
    let mut previous_ts = 0u64;
    let mut record = [0u8; 16];
    let mut data = vec![0u8; snaplen.clamp(1, MAX_WIRE_LEN) as usize];
    loop {
        if read_up_to(&mut input, &mut record).map_err(named)? < record.len() {
            break;
        }
        let field = |at: usize| u32::from_le_bytes(record[at..at + 4].try_into().expect("4 bytes"));
        let (secs, frac, caplen, wire_len) = (field(0), field(4), field(8), field(12));
        let ts_ns = u64::from(secs) * 1_000_000_000 + u64::from(frac) * scale;
        let plausible = caplen <= snaplen
            && caplen <= wire_len
            && wire_len > 0
            && wire_len <= MAX_WIRE_LEN
            && u64::from(frac) * scale < 1_000_000_000
            && ts_ns + MAX_STEP_BACK_NS >= previous_ts;
        if !plausible {
            break;
        }
        let frame = &mut data[..caplen as usize];
        if read_up_to(&mut input, frame).map_err(named)? < frame.len() {
            break;
        }
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
        let record_len = 16 + u64::from(caplen);
        match link {
            Some(link) => entry.add(ts_ns, record_len, link, frame),
            // Unknown link types still get time ranges; no flow is
            // findable in them.
            None => entry.add(ts_ns, record_len, LinkType::Ethernet, &[]),
        }
        kept += record_len;
        packets += 1;
        previous_ts = ts_ns;
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
    use crate::PcapWriter;
    use crate::index::Index;
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
}
