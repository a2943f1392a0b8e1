//! Making a recording whose writer was killed, or whose file was damaged,
//! readable again, without losing a packet that can still be read.
//!
//! After `kill -9` (or a crash) the open file ends wherever its last block
//! did: usually inside a record (a pcap record, or a pcapng Enhanced Packet
//! Block), and, if the kill came while the file was being closed, in the
//! zero padding of its last `O_DIRECT` write. That is cut. Bytes that are
//! not records anywhere else (a damaged record, a stretch written over, or
//! an end that is neither of the above) cannot stay in a capture file
//! either, but they may be evidence: they are moved to a side file, and the
//! records after them are kept ([`crate::scan`] finds them again). A file
//! that had bytes moved out is gone through again, until a pass finds
//! nothing more: rarely, a record taken before damage reads otherwise once
//! the damage is gone (its last bytes and the records after the damage
//! then make a chain of their own), and a repaired file must read whole,
//! so that a second repair leaves it as it is. The index is then written
//! again from the records kept, with the recording's block size. A file
//! that is whole, with an index that matches it, is left as it is.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sluice_wire::LinkType;

use crate::format::{FileHeader, HeaderProblem};
use crate::index::{BlockEntry, Index, IndexWriter, index_path};
use crate::recorder::{DEFAULT_BLOCK_BYTES, MIN_BLOCK_BYTES};
use crate::scan::{Scanner, Step, Unreadable, Window};

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
    /// Bytes cut from the end: what a crash leaves there (a torn last
    /// record, zero padding).
    pub cut_bytes: u64,
    /// Stretches of the file that were not records, moved to
    /// [`RepairReport::side_files`]: the pass that moved them (1, or more
    /// when a pass left what a further one found), their offset in the
    /// file as that pass found it, and their length. The first
    /// [`RepairReport::KEPT_STRETCHES`]...
    pub moved: Vec<Moved>,
    /// ...of this many, holding this many bytes.
    pub moved_stretches: u64,
    pub moved_bytes: u64,
    /// Where the moved stretches went, a file for each pass that moved
    /// any (see [`SIDE_MAGIC`] for their layout).
    pub side_files: Vec<PathBuf>,
    /// The index was written again: the file changed, or its index was
    /// missing or did not match it.
    pub index_rebuilt: bool,
    /// Passes through the file: 1, and one more after each that moved
    /// bytes out, up to [`RepairReport::MAX_PASSES`].
    pub passes: u32,
    /// The last pass allowed still moved bytes out: a further repair may
    /// move more.
    pub unsettled: bool,
}

/// A stretch of bytes that were not records, moved out of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moved {
    /// The pass that moved it, from 1.
    pub pass: u32,
    /// Its offset in the file as that pass found it.
    pub offset: u64,
    pub len: u64,
}

impl RepairReport {
    /// Stretches listed one by one: a hostile file can hold millions.
    pub const KEPT_STRETCHES: usize = 100;
    /// Passes at most: each that moves bytes out shortens the file, so the
    /// passes end; this bounds the time a crafted file can take.
    pub const MAX_PASSES: u32 = 16;

    /// Whether the file was whole and is left as it was.
    pub fn whole(&self) -> bool {
        !self.removed && self.bytes_kept == self.bytes_before
    }
}

/// The first bytes of a side file. Then, for each stretch moved out of the
/// capture file, in file order: its offset in the file as it was (u64),
/// its length (u64), both little-endian, and its bytes.
pub const SIDE_MAGIC: &[u8; 16] = b"SLUICE-UNREAD-1\n";

/// Makes `path` (a pcap or pcapng recording) readable to its last
/// complete record, keeping every record that can be read: see the module
/// documentation. A file that is whole, with an index that matches it, is
/// not touched.
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
                removed: true,
                ..RepairReport::new(bytes_before)
            });
        }
        Err(HeaderProblem::Invalid(why)) => return Err(named(io::Error::new(io::ErrorKind::InvalidData, why))),
    };
    drop(head);
    let index_file = index_path(path);
    let old_index = Index::read(&index_file).ok();
    let block_bytes = block_size(old_index.as_ref(), bytes_before);

    let mut report = RepairReport::new(bytes_before);
    let mut length = bytes_before;
    let entries = loop {
        let pass = report.passes + 1;
        let stretches = report.moved_stretches;
        let (entries, kept) = one_pass(path, &header, length, block_bytes, pass, &mut report).map_err(named)?;
        report.passes = pass;
        length = kept;
        // A pass that moved bytes out is followed by one over what it left.
        if report.moved_stretches == stretches {
            break entries;
        }
        if pass == RepairReport::MAX_PASSES {
            report.unsettled = true;
            break entries;
        }
    };
    report.bytes_kept = length;
    if report.whole() && old_index.as_ref().is_some_and(|index| index.blocks == entries) {
        return Ok(report);
    }
    let mut temp_name = index_file.as_os_str().to_owned();
    temp_name.push(".tmp");
    let temp = PathBuf::from(temp_name);
    let mut index = IndexWriter::create(&temp).map_err(named)?;
    for entry in &entries {
        index.append(entry).map_err(named)?;
    }
    drop(index);
    std::fs::rename(&temp, &index_file).map_err(named)?;
    report.index_rebuilt = true;
    Ok(report)
}

/// One pass through the file's first `length` bytes: the records it holds
/// and the index of them; what a crash left at the end is cut, other bytes
/// that are not records are moved to a side file of the pass. Returns the
/// index's entries and the file's length after.
fn one_pass(
    path: &Path,
    header: &FileHeader,
    length: u64,
    block_bytes: u64,
    pass: u32,
    report: &mut RepairReport,
) -> io::Result<(Vec<BlockEntry>, u64)> {
    let mut entries = Vec::new();
    let mut rewrite = false;
    let (mut cut, mut moved_bytes, mut stretches) = (0, 0, 0);
    report.packets = 0;
    {
        let mut window = Window::new(File::open(path)?, length);
        let mut scanner = Scanner::new(header.clone(), header.len, length);
        let mut blocks = Blocks::new(header, block_bytes);
        let mut removed_before = 0;
        loop {
            match scanner.next(&mut window)? {
                Step::Record { at, record } => {
                    let frame = window.slice(at + header.record_head_len() as u64, record.captured as usize);
                    blocks.add(
                        at - removed_before,
                        record.ts_ns,
                        record.len as u64,
                        frame,
                        &mut entries,
                    );
                    report.packets += 1;
                }
                Step::Unreadable {
                    len,
                    kind: Unreadable::Zeros | Unreadable::Torn,
                    ..
                } => {
                    cut += len;
                }
                Step::Unreadable { at, len, .. } => {
                    stretches += 1;
                    moved_bytes += len;
                    if report.moved.len() < RepairReport::KEPT_STRETCHES {
                        report.moved.push(Moved { pass, offset: at, len });
                    }
                    removed_before += len;
                    // Records after it move down in the file.
                    rewrite |= at + len < length;
                }
                Step::End => break,
            }
        }
        blocks.finish(&mut entries);
    }
    report.cut_bytes += cut;
    report.moved_stretches += stretches;
    report.moved_bytes += moved_bytes;
    let kept = length - cut - moved_bytes;
    if stretches > 0 {
        let side = side_file(path);
        move_out(path, header, length, &side, rewrite)?;
        report.side_files.push(side);
    }
    if !rewrite && kept < length {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(kept)?;
        file.sync_all()?;
    }
    Ok((entries, kept))
}

impl RepairReport {
    fn new(bytes_before: u64) -> RepairReport {
        RepairReport {
            packets: 0,
            bytes_before,
            bytes_kept: 0,
            removed: false,
            cut_bytes: 0,
            moved: Vec::new(),
            moved_stretches: 0,
            moved_bytes: 0,
            side_files: Vec::new(),
            passes: 0,
            unsettled: false,
            index_rebuilt: false,
        }
    }
}

/// The recording's block size, as its index shows it: the first block
/// holds the records that start before it, so it ends less than a record
/// past it; the recorder's blocks are whole MiB. The default when the
/// index cannot tell.
fn block_size(index: Option<&Index>, file_length: u64) -> u64 {
    let mib = MIN_BLOCK_BYTES as u64;
    let fallback = DEFAULT_BLOCK_BYTES as u64;
    let Some(blocks) = index.map(|i| &i.blocks[..]) else {
        return fallback;
    };
    let Some(first) = blocks.first() else {
        return fallback;
    };
    let end = first.offset.saturating_add(first.length);
    if end >= file_length {
        return fallback;
    }
    let size = end / mib * mib;
    let agrees = size >= mib
        && blocks
            .iter()
            .enumerate()
            .skip(1)
            .all(|(k, b)| b.offset / size == k as u64);
    if agrees { size } else { fallback }
}

/// Index entries as the recorder makes them: the records that start in
/// each `block_bytes` stretch of the file.
struct Blocks {
    link: Option<LinkType>,
    block_bytes: u64,
    entry: BlockEntry,
}

impl Blocks {
    fn new(header: &FileHeader, block_bytes: u64) -> Blocks {
        Blocks {
            link: LinkType::from_linktype(header.linktype),
            block_bytes,
            entry: BlockEntry::empty(0),
        }
    }

    fn add(&mut self, offset: u64, ts_ns: u64, record_len: u64, frame: &[u8], entries: &mut Vec<BlockEntry>) {
        if self.entry.packets > 0 && self.entry.offset / self.block_bytes != offset / self.block_bytes {
            entries.push(std::mem::replace(&mut self.entry, BlockEntry::empty(0)));
        }
        if self.entry.packets == 0 {
            self.entry.offset = offset;
        }
        match self.link {
            Some(link) => self.entry.add(ts_ns, record_len, link, frame),
            // Unknown link types still get time ranges; no flow is
            // findable in them.
            None => self.entry.add(ts_ns, record_len, LinkType::Ethernet, &[]),
        }
    }

    fn finish(self, entries: &mut Vec<BlockEntry>) {
        if self.entry.packets > 0 {
            entries.push(self.entry);
        }
    }
}

/// `NAME.unreadable` beside the file, or `NAME.unreadable-2`, `-3`, ...
/// when an earlier repair left one: nothing moved out is overwritten.
fn side_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".unreadable");
    let first = PathBuf::from(&name);
    if !first.exists() {
        return first;
    }
    (2..)
        .map(|n| {
            let mut numbered = name.clone();
            numbered.push(format!("-{n}"));
            PathBuf::from(numbered)
        })
        .find(|p| !p.exists())
        .expect("a free name")
}

/// Second pass: the stretches that are not records (other than what a
/// crash leaves at the end) go to the side file, and with `rewrite`, the
/// records are written again without them, to a temporary file that then
/// replaces the capture file. Both are on disk before the capture file
/// changes.
fn move_out(path: &Path, header: &FileHeader, length: u64, side: &Path, rewrite: bool) -> io::Result<()> {
    let mut window = Window::new(File::open(path)?, length);
    let mut scanner = Scanner::new(header.clone(), header.len, length);
    let mut side_out = BufWriter::with_capacity(1 << 20, File::create_new(side)?);
    side_out.write_all(SIDE_MAGIC)?;
    let mut temp_name = path.as_os_str().to_owned();
    temp_name.push(".repair-tmp");
    let temp = PathBuf::from(temp_name);
    let mut out = match rewrite {
        true => {
            let mut out = BufWriter::with_capacity(4 << 20, File::create(&temp)?);
            out.write_all(window.get(0, header.len as usize, header.len)?)?;
            Some(out)
        }
        false => None,
    };
    loop {
        match scanner.next(&mut window)? {
            Step::Record { at, record } => {
                if let Some(out) = &mut out {
                    out.write_all(window.slice(at, record.len))?;
                }
            }
            Step::Unreadable {
                kind: Unreadable::Zeros | Unreadable::Torn,
                ..
            } => {}
            Step::Unreadable { at, len, .. } => {
                side_out.write_all(&at.to_le_bytes())?;
                side_out.write_all(&len.to_le_bytes())?;
                let mut offset = at;
                while offset < at + len {
                    let chunk = window.get(offset, ((at + len - offset) as usize).min(1 << 20), at + len)?;
                    side_out.write_all(chunk)?;
                    offset += chunk.len() as u64;
                }
            }
            Step::End => break,
        }
    }
    side_out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    if let Some(out) = out {
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&temp, path)?;
    }
    Ok(())
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

    /// A recording of `packets` frames of 300 to 1500 bytes in 1 MiB
    /// blocks, one file; its path and what was sent.
    fn record_1mib(dir: &Path, format: CaptureFormat, packets: u64) -> (PathBuf, Vec<(u64, Vec<u8>)>) {
        let _ = std::fs::remove_dir_all(dir);
        let mut c = RecorderConfig::new(dir, LinkType::Ethernet, 2000);
        c.format = format;
        c.block_bytes = MIN_BLOCK_BYTES;
        c.direct = false;
        let mut r = Recorder::start(c).unwrap();
        let mut sent = Vec::new();
        for i in 0..packets {
            let mut frame = vec![(i % 251) as u8; 300 + (i as usize * 53) % 1200];
            frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ts = 1_700_000_000_000_000_000 + i * 1000;
            r.push(ts, frame.len() as u32, &frame).unwrap();
            sent.push((ts, frame));
        }
        let files = r.finish().unwrap().files;
        assert_eq!(files.len(), 1);
        (files[0].clone(), sent)
    }

    fn frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
        let file = sluice_capture::CaptureFile::open(path).unwrap();
        let mut reader = file.reader().unwrap();
        let frames = reader.by_ref().map(|p| (p.ts_ns, p.data.to_vec())).collect();
        assert!(reader.warnings().is_empty(), "{:?}", reader.warnings());
        frames
    }

    /// A whole file and its index are left exactly as they are, whatever
    /// the recording's block size.
    #[test]
    fn a_whole_file_and_its_index_are_left_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let (path, _) = record_1mib(&dir.path().join("rec"), format, 6000);
            let index = std::fs::read(index_path(&path)).unwrap();
            assert!(index.len() > 16 + 3 * crate::ENTRY_BYTES, "several 1 MiB blocks");
            let before = (
                std::fs::read(&path).unwrap(),
                std::fs::metadata(index_path(&path)).unwrap().modified().unwrap(),
            );
            let report = repair(&path).unwrap();
            assert!(report.whole() && !report.index_rebuilt, "{report:?}");
            assert_eq!(std::fs::read(&path).unwrap(), before.0);
            assert_eq!(std::fs::read(index_path(&path)).unwrap(), index);
            assert_eq!(
                std::fs::metadata(index_path(&path)).unwrap().modified().unwrap(),
                before.1
            );
            // Without its index, the same index comes back.
            std::fs::remove_file(index_path(&path)).unwrap();
            let report = repair(&path).unwrap();
            assert!(report.whole() && report.index_rebuilt, "{report:?}");
            let rebuilt = Index::read(index_path(&path)).unwrap();
            let recorded = (index.len() - 16) / crate::ENTRY_BYTES;
            assert!(
                rebuilt.blocks.len() < recorded,
                "without an index, the default block size"
            );
            assert_eq!(rebuilt.packets(), 6000);
        }
    }

    /// A damaged record in the middle: the records after it are kept, the
    /// damaged bytes moved to a side file, the index rebuilt at the
    /// recording's block size.
    #[test]
    fn records_after_a_damaged_one_are_kept_and_the_damage_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let (path, sent) = record_1mib(&dir.path().join("rec"), format, 6000);
            let offsets: Vec<u64> = sluice_capture::CaptureFile::open(&path)
                .unwrap()
                .reader()
                .unwrap()
                .map(|p| p.offset)
                .collect();
            let original = Index::read(index_path(&path)).unwrap();
            let mut bytes = std::fs::read(&path).unwrap();
            let length = bytes.len() as u64;
            // Bit 24 of record 3000's captured length.
            let victim = offsets[3000] as usize;
            let captured_at = victim + if format == CaptureFormat::Pcap { 8 } else { 20 };
            bytes[captured_at + 3] ^= 1;
            let damaged = bytes[victim..offsets[3001] as usize].to_vec();
            std::fs::write(&path, &bytes).unwrap();
            let report = repair(&path).unwrap();
            assert_eq!(report.packets, 5999, "{report:?}");
            let moved = Moved {
                pass: 1,
                offset: offsets[3000],
                len: damaged.len() as u64,
            };
            assert_eq!((&report.moved[..], report.passes), (&[moved][..], 2), "{report:?}");
            assert_eq!(
                (report.cut_bytes, report.bytes_kept),
                (0, length - damaged.len() as u64)
            );
            let mut expected = sent.clone();
            expected.remove(3000);
            assert!(frames(&path) == expected, "{format:?}: every other packet, in order");
            let [side] = &report.side_files[..] else {
                panic!("one side file: {report:?}")
            };
            let side = std::fs::read(side).unwrap();
            let mut moved = SIDE_MAGIC.to_vec();
            moved.extend(offsets[3000].to_le_bytes());
            moved.extend((damaged.len() as u64).to_le_bytes());
            moved.extend(&damaged);
            assert!(side == moved, "the damaged record, whole, in the side file");
            let index = Index::read(index_path(&path)).unwrap();
            assert_eq!(index.packets(), 5999);
            assert_eq!(index.blocks.len(), original.blocks.len(), "1 MiB blocks, as recorded");
            assert_eq!(
                index.blocks[0], original.blocks[0],
                "blocks before the damage are as recorded"
            );
            // Repairing again finds it whole, and moves nothing more.
            let again = repair(&path).unwrap();
            assert!(
                again.whole() && !again.index_rebuilt && again.side_files.is_empty(),
                "{again:?}"
            );
        }
    }

    /// Bytes at the end that are neither zeros nor a torn record are moved
    /// aside too; a second repair's side file gets a name of its own.
    #[test]
    fn an_end_that_a_crash_does_not_leave_is_moved_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        for round in 0..2 {
            write_100(&path);
            OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap()
                .write_all(&[0x77; 100])
                .unwrap();
            let report = repair(&path).unwrap();
            assert_eq!((report.packets, report.moved_bytes, report.cut_bytes), (100, 100, 0));
            let [side] = &report.side_files[..] else {
                panic!("one side file: {report:?}")
            };
            let expected = if round == 0 {
                "t.pcap.unreadable"
            } else {
                "t.pcap.unreadable-2"
            };
            assert_eq!(side.file_name().unwrap(), expected);
            assert_eq!(std::fs::metadata(side).unwrap().len(), 16 + 16 + 100);
        }
    }

    /// A record taken before damage can read otherwise once the damage is
    /// gone: here the first pass moves one byte out after a record whose
    /// last bytes read as a record of their own, which then chains with
    /// the records after the byte, and the second pass moves the rest of
    /// the first record out (a file the fuzzer made). The file is repaired
    /// whole in one call: a second repair leaves it as it is.
    #[test]
    fn a_file_is_gone_through_again_until_it_reads_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcap");
        std::fs::copy(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/testdata/chain-inside-a-record-before-damage.pcap"
            ),
            &path,
        )
        .unwrap();
        let report = repair(&path).unwrap();
        let moved = [
            Moved {
                pass: 1,
                offset: 278,
                len: 1,
            },
            Moved {
                pass: 2,
                offset: 200,
                len: 60,
            },
        ];
        assert_eq!(
            (
                &report.moved[..],
                report.passes,
                report.side_files.len(),
                report.bytes_kept
            ),
            (&moved[..], 3, 2, 296),
            "{report:?}"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), report.bytes_kept);
        let again = repair(&path).unwrap();
        assert!(
            again.whole() && !again.index_rebuilt && again.side_files.is_empty(),
            "{again:?}"
        );
        assert_eq!(again.packets, report.packets);
    }
}
