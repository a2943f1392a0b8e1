//! The block index written beside each capture file (`NAME.pcap.idx`, or
//! `NAME.pcapng.idx`).
//!
//! Layout, all integers little-endian:
//!
//! ```text
//! header (16 bytes): magic "SLUICEIX", version u32 (= 1), bloom bits u32 (= 1024)
//! entry (176 bytes), one per block, in file order:
//!   offset u64       file offset of the block's first record (pcapng: EPB)
//!   length u64       bytes from there to the end of its last record
//!   first_ts_ns u64  timestamp of its first packet
//!   last_ts_ns u64   timestamp of its last packet
//!   packets u32
//!   flags u32        bit 0: some packet did not decode as IP (not in the filter)
//!   reserved u64     zero
//!   bloom [u8; 128]  Bloom filter of the packets' symmetric flow-key hashes
//! ```
//!
//! Entries have a fixed size so that the file can be appended to as blocks
//! reach the disk: a crash leaves at most one torn entry at the end, which
//! [`Index::read`] ignores.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sluice_wire::LinkType;

pub const INDEX_MAGIC: &[u8; 8] = b"SLUICEIX";
pub const INDEX_VERSION: u32 = 1;
pub const BLOOM_BITS: usize = 1024;
const BLOOM_HASHES: u32 = 3;
pub(crate) const HEADER_BYTES: usize = 16;
pub const ENTRY_BYTES: usize = 48 + BLOOM_BITS / 8;

/// Set in [`BlockEntry::flags`] when a block holds packets that are not IP
/// and so are not in its Bloom filter.
pub const FLAG_NON_IP: u32 = 1;

/// The index file of a capture file.
pub fn index_path(capture: &Path) -> PathBuf {
    let mut name = capture.as_os_str().to_owned();
    name.push(".idx");
    PathBuf::from(name)
}

/// One block of records: enough to decide whether to read it at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockEntry {
    pub offset: u64,
    pub length: u64,
    pub first_ts_ns: u64,
    pub last_ts_ns: u64,
    pub packets: u32,
    pub flags: u32,
    pub bloom: [u64; BLOOM_BITS / 64],
}

impl BlockEntry {
    pub(crate) fn empty(offset: u64) -> BlockEntry {
        BlockEntry {
            offset,
            length: 0,
            first_ts_ns: 0,
            last_ts_ns: 0,
            packets: 0,
            flags: 0,
            bloom: [0; BLOOM_BITS / 64],
        }
    }

    /// Adds one record of `record_len` bytes (header included) that follows
    /// the block's previous ones.
    pub(crate) fn add(&mut self, ts_ns: u64, record_len: u64, link: LinkType, frame: &[u8]) {
        self.add_record(ts_ns, record_len);
        self.add_flow(link, frame);
    }

    /// The record's place and time, without its flow: cheap, for the
    /// capture side, which leaves [`BlockEntry::add_flow`] to another
    /// thread.
    pub(crate) fn add_record(&mut self, ts_ns: u64, record_len: u64) {
        if self.packets == 0 {
            self.first_ts_ns = ts_ns;
        }
        self.last_ts_ns = ts_ns;
        self.packets += 1;
        self.length += record_len;
    }

    /// Puts the frame's flow in the Bloom filter, or flags it as not IP.
    pub(crate) fn add_flow(&mut self, link: LinkType, frame: &[u8]) {
        self.add_hash(sluice_wire::decode(link, frame).ok().map(|d| d.key.symmetric_hash()));
    }

    /// The record's place and time, and its flow's hash as the caller's
    /// decoder found it (`None`: not IP).
    pub(crate) fn add_hashed(&mut self, ts_ns: u64, record_len: u64, flow_hash: Option<u64>) {
        self.add_record(ts_ns, record_len);
        self.add_hash(flow_hash);
    }

    fn add_hash(&mut self, flow_hash: Option<u64>) {
        match flow_hash {
            Some(hash) => {
                for bit in bloom_bits(hash) {
                    self.bloom[bit / 64] |= 1 << (bit % 64);
                }
            }
            None => self.flags |= FLAG_NON_IP,
        }
    }

    /// Makes the filter say that every flow may be in the block: for a
    /// block whose records could not all be found again, which must then
    /// be read for any flow rather than skipped.
    pub(crate) fn hold_every_flow(&mut self) {
        self.bloom = [u64::MAX; BLOOM_BITS / 64];
    }

    /// False only when no packet of the flow with this symmetric hash can
    /// be in the block.
    pub fn may_hold_flow(&self, flow_hash: u64) -> bool {
        bloom_bits(flow_hash)
            .into_iter()
            .all(|bit| self.bloom[bit / 64] & (1 << (bit % 64)) != 0)
    }

    pub(crate) fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        out[0..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..16].copy_from_slice(&self.length.to_le_bytes());
        out[16..24].copy_from_slice(&self.first_ts_ns.to_le_bytes());
        out[24..32].copy_from_slice(&self.last_ts_ns.to_le_bytes());
        out[32..36].copy_from_slice(&self.packets.to_le_bytes());
        out[36..40].copy_from_slice(&self.flags.to_le_bytes());
        for (i, word) in self.bloom.iter().enumerate() {
            out[48 + i * 8..56 + i * 8].copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> BlockEntry {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        BlockEntry {
            offset: u64_at(0),
            length: u64_at(8),
            first_ts_ns: u64_at(16),
            last_ts_ns: u64_at(24),
            packets: u32_at(32),
            flags: u32_at(36),
            bloom: std::array::from_fn(|i| u64_at(48 + i * 8)),
        }
    }
}

/// The bits a flow hash sets. The hash is remixed first (splitmix64's
/// finaliser) so that the three 10-bit slices are independent even if the
/// flow hash's bits are not.
fn bloom_bits(flow_hash: u64) -> [usize; BLOOM_HASHES as usize] {
    let mut h = flow_hash.wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    std::array::from_fn(|i| ((h >> (i * 20)) as usize) % BLOOM_BITS)
}

/// A capture file's index, as read back.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Index {
    pub blocks: Vec<BlockEntry>,
}

impl Index {
    /// Reads an index file; a torn last entry (a crash while appending) is
    /// left out.
    pub fn read(path: impl AsRef<Path>) -> io::Result<Index> {
        let path = path.as_ref();
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
        if bytes.len() < HEADER_BYTES || &bytes[..8] != INDEX_MAGIC {
            return Err(invalid("not a Sluice block index".into()));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let bits = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
        if version != INDEX_VERSION || bits as usize != BLOOM_BITS {
            return Err(invalid(format!(
                "index version {version} with {bits}-bit filters; this Sluice reads version {INDEX_VERSION} with {BLOOM_BITS}"
            )));
        }
        let blocks = bytes[HEADER_BYTES..]
            .chunks_exact(ENTRY_BYTES)
            .map(BlockEntry::decode)
            .collect();
        Ok(Index { blocks })
    }

    /// The blocks that may hold packets stamped from `from_ns` to `to_ns`
    /// (inclusive) and, given a symmetric flow-key hash, of that flow.
    pub fn blocks_for(&self, from_ns: u64, to_ns: u64, flow_hash: Option<u64>) -> impl Iterator<Item = &BlockEntry> {
        self.blocks.iter().filter(move |b| {
            b.packets > 0
                && b.first_ts_ns.min(b.last_ts_ns) <= to_ns
                && b.last_ts_ns.max(b.first_ts_ns) >= from_ns
                && flow_hash.is_none_or(|h| b.may_hold_flow(h))
        })
    }

    pub fn packets(&self) -> u64 {
        self.blocks.iter().map(|b| u64::from(b.packets)).sum()
    }
}

/// Appends entries to an index file.
pub(crate) struct IndexWriter {
    file: File,
}

impl IndexWriter {
    pub(crate) fn create(path: &Path) -> io::Result<IndexWriter> {
        let mut file = File::create(path)?;
        let mut header = [0u8; HEADER_BYTES];
        header[..8].copy_from_slice(INDEX_MAGIC);
        header[8..12].copy_from_slice(&INDEX_VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&(BLOOM_BITS as u32).to_le_bytes());
        file.write_all(&header)?;
        Ok(IndexWriter { file })
    }

    /// One write per entry: whole entries reach the file (and survive the
    /// process) as soon as their block is on disk.
    pub(crate) fn append(&mut self, entry: &BlockEntry) -> io::Result<()> {
        self.file.write_all(&entry.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_a_torn_tail_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pcap.idx");
        let mut w = IndexWriter::create(&path).unwrap();
        let mut a = BlockEntry::empty(24);
        a.add(10, 100, LinkType::Ethernet, &[0; 14]);
        a.add(20, 50, LinkType::Ethernet, &[0; 14]);
        let mut b = BlockEntry::empty(174);
        b.add(30, 60, LinkType::Ethernet, &[0; 14]);
        w.append(&a).unwrap();
        w.append(&b).unwrap();
        drop(w);
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        let index = Index::read(&path).unwrap();
        assert_eq!(index.blocks, vec![a.clone(), b]);
        assert_eq!((a.length, a.packets, a.flags), (150, 2, FLAG_NON_IP));
        assert_eq!(index.blocks_for(0, 15, None).count(), 1);
        assert_eq!(index.blocks_for(25, 40, None).count(), 1);
        assert_eq!(index.blocks_for(41, 99, None).count(), 0);
    }

    #[test]
    fn the_bloom_filter_finds_its_flows_and_skips_most_others() {
        let mut block = BlockEntry::empty(0);
        let hashes: Vec<u64> = (0..50u64).map(|i| i.wrapping_mul(0x1234_5678_9abc_def1)).collect();
        for &h in &hashes {
            for bit in bloom_bits(h) {
                block.bloom[bit / 64] |= 1 << (bit % 64);
            }
        }
        assert!(hashes.iter().all(|&h| block.may_hold_flow(h)));
        let false_positives = (1000..11_000u64).filter(|&h| block.may_hold_flow(h)).count();
        // 50 flows in 1024 bits with 3 hashes: about 0.2 % false positives.
        assert!(false_positives < 100, "{false_positives}");
    }

    /// The bytes of an entry and of the header where the layout above puts
    /// them, little-endian.
    #[test]
    fn an_entry_and_the_header_follow_the_documented_layout() {
        let mut entry = BlockEntry::empty(0x0102_0304_0506_0708);
        entry.add_record(0x1111, 0x2222);
        entry.add_record(0x3333, 0x0100);
        entry.flags = FLAG_NON_IP;
        entry.bloom[0] = 0x8000_0000_0000_0001;
        entry.bloom[15] = 0xff;
        let bytes = entry.encode();
        assert_eq!(bytes.len(), 176);
        assert_eq!(bytes[0..8], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(bytes[8..16], 0x2322u64.to_le_bytes());
        assert_eq!(bytes[16..24], 0x1111u64.to_le_bytes());
        assert_eq!(bytes[24..32], 0x3333u64.to_le_bytes());
        assert_eq!(bytes[32..36], 2u32.to_le_bytes());
        assert_eq!(bytes[36..40], [1, 0, 0, 0]);
        assert_eq!(bytes[40..48], [0; 8], "reserved");
        assert_eq!(bytes[48..56], [1, 0, 0, 0, 0, 0, 0, 0x80]);
        assert_eq!(bytes[168..176], [0xff, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(BlockEntry::decode(&bytes), entry);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.pcap.idx");
        drop(IndexWriter::create(&path).unwrap());
        let header = std::fs::read(&path).unwrap();
        assert_eq!(header, [&b"SLUICEIX"[..], &[1, 0, 0, 0], &[0, 4, 0, 0]].concat());
        assert_eq!(Index::read(&path).unwrap(), Index::default());
    }

    #[test]
    fn a_file_of_another_kind_or_version_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.idx");
        for (bytes, says) in [
            (b"SLUICEI".to_vec(), "not a Sluice block index"),
            (
                [&b"SLUICEIY"[..], &[1, 0, 0, 0, 0, 4, 0, 0]].concat(),
                "not a Sluice block index",
            ),
            (
                [&b"SLUICEIX"[..], &[2, 0, 0, 0, 0, 4, 0, 0]].concat(),
                "index version 2 with 1024-bit",
            ),
            (
                [&b"SLUICEIX"[..], &[1, 0, 0, 0, 0, 8, 0, 0]].concat(),
                "index version 1 with 2048-bit",
            ),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let e = Index::read(&path).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert!(e.to_string().contains(says) && e.to_string().contains("bad.idx"), "{e}");
        }
        let e = Index::read(dir.path().join("missing.idx")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("missing.idx"), "{e}");
        assert_eq!(index_path(Path::new("/d/x.pcapng")), PathBuf::from("/d/x.pcapng.idx"));
    }

    /// A block stamped from 10 to 20 is asked for by ranges that touch it
    /// at either end, and not by ranges that end just before or start just
    /// after; one whose packets came in reverse order likewise; an empty
    /// one never.
    #[test]
    fn blocks_are_found_by_inclusive_time_ranges_and_flows() {
        let mut forward = BlockEntry::empty(0);
        forward.add_record(10, 1);
        forward.add_record(20, 1);
        let mut backward = BlockEntry::empty(0);
        backward.add_record(20, 1);
        backward.add_record(10, 1);
        for block in [forward, backward] {
            let index = Index {
                blocks: vec![block.clone(), BlockEntry::empty(0)],
            };
            let found = |from, to| index.blocks_for(from, to, None).count();
            assert_eq!(
                [found(0, 9), found(0, 10), found(20, 30), found(21, 30), found(12, 13)],
                [0, 1, 1, 0, 1]
            );
            assert_eq!(index.packets(), 2);
            // The filter is empty: no flow is in the block, until it holds all.
            assert_eq!(index.blocks_for(0, 30, Some(7)).count(), 0);
            let mut all = block.clone();
            all.hold_every_flow();
            let index = Index { blocks: vec![all] };
            assert_eq!(index.blocks_for(0, 30, Some(7)).count(), 1);
        }
    }

    /// splitmix64's finaliser of the hash plus its increment, cut in three
    /// 20-bit slices, each reduced to the 1024 bits of the filter.
    #[test]
    fn bloom_bits_are_three_slices_of_the_remixed_hash() {
        let remix = |x: u64| {
            let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        // splitmix64 seeded with 0 first returns 0xe220a8397b1dcdaf.
        assert_eq!(remix(0), 0xe220_a839_7b1d_cdaf);
        for hash in [0u64, 1, 0xdead_beef, u64::MAX] {
            let h = remix(hash);
            let expected = [
                (h & 0x3ff) as usize,
                ((h >> 20) & 0x3ff) as usize,
                ((h >> 40) & 0x3ff) as usize,
            ];
            assert_eq!(bloom_bits(hash), expected, "{hash:#x}");
            let mut block = BlockEntry::empty(0);
            for bit in expected {
                block.bloom[bit / 64] |= 1 << (bit % 64);
            }
            assert!(block.may_hold_flow(hash));
            // Any one of the three bits missing: not in the block.
            for bit in expected {
                let mut less = block.clone();
                less.bloom[bit / 64] &= !(1 << (bit % 64));
                assert!(expected.iter().filter(|&&b| b == bit).count() > 1 || !less.may_hold_flow(hash));
            }
        }
    }

    /// An IP frame goes into the filter by its flow, and leaves the flags
    /// alone; the first timestamp is the first record's.
    #[test]
    fn adding_a_frame_sets_its_flow_and_keeps_the_first_time() {
        let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
        frame.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        frame.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
        let hash = sluice_wire::decode(LinkType::Ethernet, &frame)
            .unwrap()
            .key
            .symmetric_hash();
        let mut block = BlockEntry::empty(24);
        block.add(5, 58, LinkType::Ethernet, &frame);
        block.add(9, 58, LinkType::Ethernet, &frame);
        assert!(block.may_hold_flow(hash));
        assert_eq!(block.bloom.iter().map(|w| w.count_ones()).sum::<u32>(), 3 - dup(hash));
        assert_eq!(
            (block.flags, block.first_ts_ns, block.last_ts_ns, block.length),
            (0, 5, 9, 116)
        );
    }

    /// How many of a hash's three bits coincide with another of them.
    fn dup(hash: u64) -> u32 {
        let b = bloom_bits(hash);
        u32::from(b[0] == b[1] || b[0] == b[2]) + u32::from(b[1] == b[2])
    }
}
