//! The two file formats the recorder writes, and reading their headers and
//! records back.
//!
//! pcap: the 24-byte file header (magic `a1b23c4d`, nanosecond
//! timestamps), then records of a 16-byte header and the captured bytes.
//!
//! pcapng: a Section Header Block (section length -1, "not given", so that
//! it never has to be rewritten; option `shb_userappl`), one Interface
//! Description Block (the link type, the snap length, `if_tsresol` = 9:
//! nanoseconds), then one Enhanced Packet Block per packet: a 28-byte head
//! (type, length, interface 0, the timestamp's high and low 32 bits, the
//! captured and the original length), the captured bytes, zero padding to
//! four bytes and the length again. No options, so an EPB's length follows
//! from its captured length, which lets repair tell one from garbage. Both
//! little-endian.
//!
//! In both, the file header is written once, at the start of the file's
//! first block, and nothing is ever rewritten: a file cut at any block
//! boundary is a valid capture up to its last complete record.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// The format of a recording's files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// pcap with nanosecond timestamps.
    #[default]
    Pcap,
    /// pcapng: one interface with nanosecond timestamps, one EPB a packet.
    PcapNg,
}

const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
const PCAP_HEADER: usize = 24;
const PCAP_RECORD_HEADER: usize = 16;

const SHB_TYPE: u32 = 0x0a0d_0d0a;
const IDB_TYPE: u32 = 1;
const EPB_TYPE: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
pub(crate) const EPB_HEAD: usize = 28;
/// An EPB without options: head, data, padding and the trailing length.
const EPB_OVERHEAD: usize = EPB_HEAD + 4;
const OPT_END: u16 = 0;
const OPT_SHB_USERAPPL: u16 = 4;
const OPT_IF_TSRESOL: u16 = 9;
/// Longest header read to find the first record.
const MAX_HEADER: usize = 64 << 10;
/// Largest wire length believed: GRO aggregates reach 64 KiB, jumbo GSO
/// frames a little more. The bound `sluice_capture`'s readers believe too,
/// so that what extract writes, the analysis reads as it is.
pub(crate) const MAX_WIRE_LEN: u32 = 256 << 10;
/// Longest step back in time a record may take and still count as
/// plausible: clocks are stepped, and packets of different queues arrive
/// slightly out of order, but garbage read as a timestamp is almost never
/// this close to its predecessor.
pub(crate) const MAX_STEP_BACK_NS: u64 = 60 * 1_000_000_000;

impl CaptureFormat {
    /// The file name extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::PcapNg => "pcapng",
        }
    }

    /// The file header, up to the first record.
    pub(crate) fn file_header(self, linktype: u32, snaplen: u32) -> Vec<u8> {
        match self {
            CaptureFormat::Pcap => {
                let mut header = vec![0u8; PCAP_HEADER];
                header[..4].copy_from_slice(&PCAP_MAGIC_NS.to_le_bytes());
                header[4..6].copy_from_slice(&2u16.to_le_bytes());
                header[6..8].copy_from_slice(&4u16.to_le_bytes());
                header[16..20].copy_from_slice(&snaplen.to_le_bytes());
                header[20..24].copy_from_slice(&linktype.to_le_bytes());
                header
            }
            CaptureFormat::PcapNg => {
                let mut shb = Vec::new();
                shb.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
                shb.extend_from_slice(&1u16.to_le_bytes());
                shb.extend_from_slice(&0u16.to_le_bytes());
                shb.extend_from_slice(&u64::MAX.to_le_bytes());
                let application = concat!("Sluice ", env!("CARGO_PKG_VERSION"));
                push_option(&mut shb, OPT_SHB_USERAPPL, application.as_bytes());
                push_option(&mut shb, OPT_END, &[]);
                let mut idb = Vec::new();
                // The link type is 16 bits in pcapng, followed by 16 reserved.
                idb.extend_from_slice(&(linktype as u16).to_le_bytes());
                idb.extend_from_slice(&0u16.to_le_bytes());
                idb.extend_from_slice(&snaplen.to_le_bytes());
                push_option(&mut idb, OPT_IF_TSRESOL, &[9]);
                push_option(&mut idb, OPT_END, &[]);
                let mut header = block(SHB_TYPE, &shb);
                header.extend_from_slice(&block(IDB_TYPE, &idb));
                header
            }
        }
    }

    /// The bytes a record of `captured` bytes takes, headers included.
    pub(crate) fn record_len(self, captured: usize) -> usize {
        match self {
            CaptureFormat::Pcap => PCAP_RECORD_HEADER + captured,
            CaptureFormat::PcapNg => EPB_OVERHEAD + captured.next_multiple_of(4),
        }
    }

    /// The most a record takes beyond its captured bytes.
    pub(crate) fn max_record_overhead(self) -> usize {
        match self {
            CaptureFormat::Pcap => PCAP_RECORD_HEADER,
            CaptureFormat::PcapNg => EPB_OVERHEAD + 3,
        }
    }

    /// How many bytes of a record come before its captured bytes.
    pub(crate) fn record_head_len(self) -> usize {
        match self {
            CaptureFormat::Pcap => PCAP_RECORD_HEADER,
            CaptureFormat::PcapNg => EPB_HEAD,
        }
    }

    /// The captured length in the head of a record this crate wrote
    /// (`head` holds at least [`CaptureFormat::record_head_len`] bytes).
    pub(crate) fn captured_len(self, head: &[u8]) -> usize {
        let at = match self {
            CaptureFormat::Pcap => 8,
            CaptureFormat::PcapNg => 20,
        };
        u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes")) as usize
    }

    /// What goes before a record's captured bytes; `captured` bytes follow,
    /// then [`CaptureFormat::record_trailer`].
    pub(crate) fn record_head(self, ts_ns: u64, captured: u32, wire_len: u32, out: &mut [u8; EPB_HEAD]) -> usize {
        let wire_len = wire_len.max(captured);
        match self {
            CaptureFormat::Pcap => {
                out[..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
                out[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
                out[8..12].copy_from_slice(&captured.to_le_bytes());
                out[12..16].copy_from_slice(&wire_len.to_le_bytes());
                PCAP_RECORD_HEADER
            }
            CaptureFormat::PcapNg => {
                let length = self.record_len(captured as usize) as u32;
                out[..4].copy_from_slice(&EPB_TYPE.to_le_bytes());
                out[4..8].copy_from_slice(&length.to_le_bytes());
                out[8..12].copy_from_slice(&0u32.to_le_bytes());
                out[12..16].copy_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
                out[16..20].copy_from_slice(&(ts_ns as u32).to_le_bytes());
                out[20..24].copy_from_slice(&captured.to_le_bytes());
                out[24..28].copy_from_slice(&wire_len.to_le_bytes());
                EPB_HEAD
            }
        }
    }

    /// What follows a record's captured bytes: nothing in pcap; the padding
    /// and the block length in pcapng.
    pub(crate) fn record_trailer(self, captured: u32, out: &mut [u8; 8]) -> usize {
        match self {
            CaptureFormat::Pcap => 0,
            CaptureFormat::PcapNg => {
                let padding = (captured as usize).next_multiple_of(4) - captured as usize;
                out[..padding].fill(0);
                let length = self.record_len(captured as usize) as u32;
                out[padding..padding + 4].copy_from_slice(&length.to_le_bytes());
                padding + 4
            }
        }
    }
}

fn push_option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    body.resize(body.len().next_multiple_of(4), 0);
}

/// A pcapng block around `body` (a multiple of four bytes long).
fn block(block_type: u32, body: &[u8]) -> Vec<u8> {
    let length = (12 + body.len()) as u32;
    let mut out = Vec::with_capacity(length as usize);
    out.extend_from_slice(&block_type.to_le_bytes());
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&length.to_le_bytes());
    out
}

/// Why a file's header could not be read.
#[derive(Debug)]
pub(crate) enum HeaderProblem {
    /// The file ends before its header does, or the header is zeros: the
    /// recorder was killed before its first block reached the disk.
    Incomplete,
    /// Not a file the recorder writes.
    Invalid(String),
}

/// A recording's file header, as read back: what is needed to read its
/// records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub format: CaptureFormat,
    /// pcap only: false for microsecond timestamps (which repair reads,
    /// though the recorder writes nanoseconds).
    pub nanos: bool,
    pub linktype: u32,
    pub snaplen: u32,
    /// Bytes before the first record.
    pub len: u64,
}

/// A record's header, as read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub ts_ns: u64,
    pub captured: u32,
    pub wire_len: u32,
    /// Bytes of the whole record, headers (and pcapng's trailer) included.
    pub len: usize,
}

impl FileHeader {
    /// Reads the header at the start of the file at `path`.
    pub(crate) fn read(path: &Path) -> io::Result<FileHeader> {
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let file = File::open(path).map_err(named)?;
        let mut head = Vec::new();
        file.take(MAX_HEADER as u64).read_to_end(&mut head).map_err(named)?;
        FileHeader::parse(&head).map_err(|problem| {
            let why = match problem {
                HeaderProblem::Incomplete => "the file ends inside its header".to_string(),
                HeaderProblem::Invalid(why) => why,
            };
            io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()))
        })
    }

    /// Parses the header at the start of `bytes` (the file's first bytes).
    pub(crate) fn parse(bytes: &[u8]) -> Result<FileHeader, HeaderProblem> {
        if bytes.len() < 4 || bytes.iter().take(MAX_HEADER).all(|&b| b == 0) {
            return Err(HeaderProblem::Incomplete);
        }
        let u32_at = |at: usize| -> Result<u32, HeaderProblem> {
            bytes
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
                .ok_or(HeaderProblem::Incomplete)
        };
        let u16_at = |at: usize| -> Result<u16, HeaderProblem> {
            bytes
                .get(at..at + 2)
                .map(|b| u16::from_le_bytes(b.try_into().expect("2 bytes")))
                .ok_or(HeaderProblem::Incomplete)
        };
        let invalid = |why: &str| HeaderProblem::Invalid(why.to_string());
        match u32_at(0)? {
            magic @ (PCAP_MAGIC_NS | PCAP_MAGIC_US) => Ok(FileHeader {
                format: CaptureFormat::Pcap,
                nanos: magic == PCAP_MAGIC_NS,
                snaplen: u32_at(16)?,
                linktype: u32_at(20)?,
                len: PCAP_HEADER as u64,
            }),
            SHB_TYPE => {
                if u32_at(8)? != BYTE_ORDER_MAGIC {
                    return Err(invalid(
                        "a big-endian pcapng file; the recorder writes little-endian ones",
                    ));
                }
                let shb_len = u32_at(4)? as usize;
                if shb_len < 28 || !shb_len.is_multiple_of(4) || shb_len > MAX_HEADER {
                    return Err(invalid("a pcapng section header block of impossible length"));
                }
                let idb = shb_len;
                if u32_at(idb)? != IDB_TYPE {
                    return Err(invalid(
                        "no interface description block right after the pcapng section header, as the recorder writes it",
                    ));
                }
                let idb_len = u32_at(idb + 4)? as usize;
                if idb_len < 20 || !idb_len.is_multiple_of(4) || idb + idb_len > MAX_HEADER {
                    return Err(invalid("a pcapng interface description block of impossible length"));
                }
                if u32_at(idb + idb_len - 4)? != idb_len as u32 {
                    return Err(invalid("a torn pcapng interface description block"));
                }
                let linktype = u32::from(u16_at(idb + 8)?);
                let snaplen = u32_at(idb + 12)?;
                // Microseconds unless an option says otherwise.
                let mut resolution = 6;
                let mut option = idb + 16;
                let end = idb + idb_len - 4;
                while option + 4 <= end {
                    let (code, len) = (u16_at(option)?, u16_at(option + 2)? as usize);
                    if code == OPT_END || option + 4 + len > end {
                        break;
                    }
                    if code == OPT_IF_TSRESOL && len == 1 {
                        resolution = bytes[option + 4];
                    }
                    option += 4 + len.next_multiple_of(4);
                }
                if resolution != 9 {
                    return Err(invalid(
                        "a pcapng interface whose timestamps are not in nanoseconds (if_tsresol 9), as the recorder writes them",
                    ));
                }
                Ok(FileHeader {
                    format: CaptureFormat::PcapNg,
                    nanos: true,
                    linktype,
                    snaplen,
                    len: (idb + idb_len) as u64,
                })
            }
            _ => Err(invalid(
                "not a little-endian pcap or pcapng file, as the recorder writes (big-endian pcap is not read)",
            )),
        }
    }

    /// Bytes of a record before its captured bytes: what
    /// [`FileHeader::parse_record`] needs.
    pub(crate) fn record_head_len(&self) -> usize {
        match self.format {
            CaptureFormat::Pcap => PCAP_RECORD_HEADER,
            CaptureFormat::PcapNg => EPB_HEAD,
        }
    }

    /// The record header at the start of `bytes`, if it is plausible: for
    /// pcap, nanoseconds below 10⁹ and a captured length of at most
    /// `max_frame`; for pcapng, in addition, an EPB of interface 0 whose
    /// length is that of its captured bytes without options.
    pub(crate) fn parse_record(&self, bytes: &[u8], max_frame: u32) -> Option<RecordHeader> {
        let head = bytes.get(..self.record_head_len())?;
        let u32_at = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
        match self.format {
            CaptureFormat::Pcap => {
                let (seconds, fraction, captured, wire_len) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12));
                let scale = if self.nanos { 1 } else { 1000 };
                (u64::from(fraction) * scale < 1_000_000_000 && captured <= max_frame).then(|| RecordHeader {
                    ts_ns: u64::from(seconds) * 1_000_000_000 + u64::from(fraction) * scale,
                    captured,
                    wire_len,
                    len: PCAP_RECORD_HEADER + captured as usize,
                })
            }
            CaptureFormat::PcapNg => {
                let (block_type, length, interface) = (u32_at(0), u32_at(4), u32_at(8));
                let (captured, wire_len) = (u32_at(20), u32_at(24));
                let plausible = block_type == EPB_TYPE
                    && interface == 0
                    && captured <= max_frame
                    && length as usize == CaptureFormat::PcapNg.record_len(captured as usize);
                plausible.then(|| RecordHeader {
                    ts_ns: (u64::from(u32_at(12)) << 32) | u64::from(u32_at(16)),
                    captured,
                    wire_len,
                    len: length as usize,
                })
            }
        }
    }

    /// The captured length a record of this file can have at most: the
    /// snap length (the recorder cuts frames to it), or [`MAX_WIRE_LEN`]
    /// when the header gives none.
    pub(crate) fn max_captured(&self) -> u32 {
        match self.snaplen {
            0 => MAX_WIRE_LEN,
            snaplen => snaplen.min(MAX_WIRE_LEN),
        }
    }

    /// The record header at the start of `bytes` if the recorder could have
    /// written it after a packet stamped `previous_ts`: [`parse_record`]'s
    /// checks with the snap length, a captured length of at most the wire
    /// length, a wire length from 1 to [`MAX_WIRE_LEN`], and a timestamp at
    /// most [`MAX_STEP_BACK_NS`] before the previous one. Zero padding
    /// fails these.
    ///
    /// [`parse_record`]: FileHeader::parse_record
    pub(crate) fn plausible_record(&self, bytes: &[u8], previous_ts: Option<u64>) -> Option<RecordHeader> {
        let record = self.parse_record(bytes, self.max_captured())?;
        let plausible = record.captured <= record.wire_len
            && record.wire_len > 0
            && record.wire_len <= MAX_WIRE_LEN
            && previous_ts.is_none_or(|previous| record.ts_ns.saturating_add(MAX_STEP_BACK_NS) >= previous);
        plausible.then_some(record)
    }

    /// Whether a whole record (its [`RecordHeader::len`] bytes) ends as it
    /// should: always in pcap; in pcapng, with the block's length again.
    pub(crate) fn record_complete(&self, record: &[u8]) -> bool {
        match self.format {
            CaptureFormat::Pcap => true,
            CaptureFormat::PcapNg => {
                record.len() >= EPB_OVERHEAD
                    && record[record.len() - 4..] == (record.len() as u32).to_le_bytes()
                    && record[4..8] == (record.len() as u32).to_le_bytes()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(format: CaptureFormat, ts_ns: u64, data: &[u8], wire_len: u32) -> Vec<u8> {
        let mut head = [0u8; EPB_HEAD];
        let mut trailer = [0u8; 8];
        let n = format.record_head(ts_ns, data.len() as u32, wire_len, &mut head);
        let m = format.record_trailer(data.len() as u32, &mut trailer);
        [&head[..n], data, &trailer[..m]].concat()
    }

    #[test]
    fn headers_and_records_read_back_in_both_formats() {
        for format in [CaptureFormat::Pcap, CaptureFormat::PcapNg] {
            let header_bytes = format.file_header(1, 2000);
            let header = FileHeader::parse(&header_bytes).unwrap();
            assert_eq!(
                (header.format, header.linktype, header.snaplen, header.len),
                (format, 1, 2000, header_bytes.len() as u64)
            );
            assert!(header.len.is_multiple_of(4));
            for len in [0usize, 1, 2, 3, 4, 5, 60, 1514] {
                let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
                let ts = 1_764_062_363_123_456_789 + len as u64;
                let bytes = record(format, ts, &data, 1600);
                assert_eq!(bytes.len(), format.record_len(len));
                assert!(bytes.len() - len <= format.max_record_overhead());
                let parsed = header.parse_record(&bytes, 1 << 20).unwrap();
                assert_eq!(
                    parsed,
                    RecordHeader {
                        ts_ns: ts,
                        captured: len as u32,
                        wire_len: 1600,
                        len: bytes.len()
                    }
                );
                assert!(header.record_complete(&bytes));
                let start = header.record_head_len();
                assert_eq!(&bytes[start..start + len], &data[..]);
            }
        }
        // A torn pcapng block and zero padding are not records.
        let header = FileHeader::parse(&CaptureFormat::PcapNg.file_header(1, 2000)).unwrap();
        let mut bytes = record(CaptureFormat::PcapNg, 5, &[1; 10], 10);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(!header.record_complete(&bytes));
        assert!(header.parse_record(&[0; 64], 1 << 20).is_none());
        assert!(matches!(FileHeader::parse(&[0; 100]), Err(HeaderProblem::Incomplete)));
        assert!(matches!(FileHeader::parse(&[]), Err(HeaderProblem::Incomplete)));
        let pcapng = CaptureFormat::PcapNg.file_header(1, 2000);
        assert!(matches!(
            FileHeader::parse(&pcapng[..pcapng.len() - 2]),
            Err(HeaderProblem::Incomplete)
        ));
        assert!(matches!(
            FileHeader::parse(b"hello world"),
            Err(HeaderProblem::Invalid(_))
        ));
    }
}
