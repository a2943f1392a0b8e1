//! pcap and pcapng files built byte by byte, read back through
//! `CaptureFile`: every variant of the formats Sluice claims to read, and
//! every way a file can be broken, each with the exact byte offset the
//! warning must carry.

use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_capture::{CaptureFile, FileFormat, FilePackets, OpenError, ReadWarning};
use sluice_wire::LinkType;

// ---------------------------------------------------------------------------
// Helpers: files and what was read from them.

/// Everything read from a capture, owned so the file can go away.
#[derive(Debug)]
struct Read {
    format: FileFormat,
    packets: Vec<Packet>,
    warnings: Vec<ReadWarning>,
    warning_count: u64,
    stopped_early: bool,
    skipped_blocks: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Packet {
    ts_ns: u64,
    wire_len: u32,
    data: Vec<u8>,
    link: LinkType,
    offset: u64,
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn open(bytes: &[u8]) -> Result<Read, OpenError> {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), "capture", bytes);
    open_path(&path)
}

fn open_path(path: &Path) -> Result<Read, OpenError> {
    let file = CaptureFile::open(path)?;
    let mut reader = file.reader().expect("a file that opened has a reader");
    let packets = reader
        .by_ref()
        .map(|p| Packet {
            ts_ns: p.ts_ns,
            wire_len: p.wire_len,
            data: p.data.to_vec(),
            link: p.link,
            offset: p.offset,
        })
        .collect();
    Ok(Read {
        format: file.format(),
        packets,
        warnings: reader.warnings().to_vec(),
        warning_count: reader.warning_count(),
        stopped_early: reader.stopped_early(),
        skipped_blocks: reader.skipped_blocks(),
    })
}

fn read(bytes: &[u8]) -> Read {
    match open(bytes) {
        Ok(read) => read,
        Err(e) => panic!("the file does not open: {e}"),
    }
}

/// The one warning of a read, which must be at `offset`.
#[track_caller]
fn only_warning(read: &Read, offset: u64, fatal: bool) -> &ReadWarning {
    assert_eq!(read.warnings.len(), 1, "warnings: {:#?}", read.warnings);
    assert_eq!(read.warning_count, 1);
    let w = &read.warnings[0];
    assert_eq!(w.offset, offset, "warning at the wrong offset: {w:?}");
    assert_eq!(w.fatal, fatal, "{w:?}");
    assert_eq!(read.stopped_early, fatal);
    w
}

/// Two frames used throughout: distinct contents, odd lengths (so pcapng
/// padding matters), one of them cut by a snap length.
const SECONDS: [u64; 2] = [1_700_000_000, 1_700_000_001];
const MICROS: [u64; 2] = [123_456, 999_999];

fn frame(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| {
            (j as u8)
                .wrapping_mul(7)
                .wrapping_add((i as u8).wrapping_mul(50))
                .wrapping_add(1)
        })
        .collect()
}

fn ts_ns(i: usize) -> u64 {
    SECONDS[i] * 1_000_000_000 + MICROS[i] * 1000
}

// ---------------------------------------------------------------------------
// pcap writer.

#[derive(Clone, Copy)]
struct Pcap {
    nanos: bool,
    big_endian: bool,
}

impl Pcap {
    const LE_US: Pcap = Pcap {
        nanos: false,
        big_endian: false,
    };

    fn u32(&self, out: &mut Vec<u8>, v: u32) {
        if self.big_endian {
            out.extend_from_slice(&v.to_be_bytes());
        } else {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn u16(&self, out: &mut Vec<u8>, v: u16) {
        if self.big_endian {
            out.extend_from_slice(&v.to_be_bytes());
        } else {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn header(&self, linktype: u32) -> Vec<u8> {
        let mut out = Vec::new();
        self.u32(&mut out, if self.nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
        self.u16(&mut out, 2);
        self.u16(&mut out, 4);
        self.u32(&mut out, 0); // thiszone
        self.u32(&mut out, 0); // sigfigs
        self.u32(&mut out, 65_535);
        self.u32(&mut out, linktype);
        assert_eq!(out.len(), 24);
        out
    }

    /// A record header with explicit lengths, then `data` (whatever its size).
    fn raw_record(&self, out: &mut Vec<u8>, ts_ns: u64, captured: u32, original: u32, data: &[u8]) {
        let fraction = ts_ns % 1_000_000_000;
        self.u32(out, (ts_ns / 1_000_000_000) as u32);
        self.u32(out, if self.nanos { fraction } else { fraction / 1000 } as u32);
        self.u32(out, captured);
        self.u32(out, original);
        out.extend_from_slice(data);
    }

    fn record(&self, out: &mut Vec<u8>, ts_ns: u64, original: u32, data: &[u8]) {
        self.raw_record(out, ts_ns, data.len() as u32, original, data);
    }

    /// Header and the two standard frames (the second cut from 200 to 90
    /// bytes by the snap length).
    fn two_packets(&self) -> Vec<u8> {
        let mut out = self.header(1);
        self.record(&mut out, ts_ns(0), 60, &frame(0, 60));
        self.record(&mut out, ts_ns(1), 200, &frame(1, 90));
        out
    }
}

const PCAP_RECORD_1: u64 = 24;
const PCAP_RECORD_2: u64 = 24 + 16 + 60;
const PCAP_END: u64 = PCAP_RECORD_2 + 16 + 90;

#[track_caller]
fn assert_two_standard_packets(packets: &[Packet]) {
    assert_eq!(packets.len(), 2, "{packets:#?}");
    assert_eq!(
        packets[0],
        Packet {
            ts_ns: ts_ns(0),
            wire_len: 60,
            data: frame(0, 60),
            link: LinkType::Ethernet,
            offset: PCAP_RECORD_1,
        }
    );
    assert_eq!(
        packets[1],
        Packet {
            ts_ns: ts_ns(1),
            wire_len: 200,
            data: frame(1, 90),
            link: LinkType::Ethernet,
            offset: PCAP_RECORD_2,
        }
    );
}

// ---------------------------------------------------------------------------
// pcapng writer.

#[derive(Clone, Copy)]
struct Ng {
    big_endian: bool,
}

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const SPB: u32 = 3;
const EPB: u32 = 6;
/// A block type no specification assigns.
const UNKNOWN_BLOCK: u32 = 0x0000_0bad;

enum Resolution {
    /// No `if_tsresol` option: microseconds.
    Default,
    /// 10^-n seconds.
    Decimal(u8),
    /// 2^-n seconds.
    Binary(u8),
}

impl Ng {
    fn u32(&self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn u16(&self, v: u16) -> [u8; 2] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    /// A whole block: type, length, body padded to 4 bytes, length again.
    fn block(&self, out: &mut Vec<u8>, block_type: u32, body: &[u8]) -> u64 {
        let at = out.len() as u64;
        let padded = body.len().next_multiple_of(4);
        let total = (12 + padded) as u32;
        out.extend_from_slice(&self.u32(block_type));
        out.extend_from_slice(&self.u32(total));
        out.extend_from_slice(body);
        out.resize(out.len() + padded - body.len(), 0);
        out.extend_from_slice(&self.u32(total));
        at
    }

    fn shb(&self, out: &mut Vec<u8>) -> u64 {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(0x1a2b_3c4d));
        body.extend_from_slice(&self.u16(1));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&[0xff; 8]); // section length: unknown
        self.block(out, SHB, &body)
    }

    fn option(&self, body: &mut Vec<u8>, code: u16, value: &[u8]) {
        body.extend_from_slice(&self.u16(code));
        body.extend_from_slice(&self.u16(value.len() as u16));
        body.extend_from_slice(value);
        body.resize(body.len().next_multiple_of(4), 0);
    }

    fn idb(&self, out: &mut Vec<u8>, linktype: u16, snaplen: u32, resolution: Resolution) -> u64 {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u16(linktype));
        body.extend_from_slice(&self.u16(0));
        body.extend_from_slice(&self.u32(snaplen));
        // if_name first, so that if_tsresol is not the only option.
        self.option(&mut body, 2, b"eth0");
        match resolution {
            Resolution::Default => {}
            Resolution::Decimal(n) => self.option(&mut body, 9, &[n]),
            Resolution::Binary(n) => self.option(&mut body, 9, &[0x80 | n]),
        }
        self.option(&mut body, 0, &[]);
        self.block(out, IDB, &body)
    }

    fn epb(&self, out: &mut Vec<u8>, interface: u32, units: u64, original: u32, data: &[u8]) -> u64 {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(interface));
        body.extend_from_slice(&self.u32((units >> 32) as u32));
        body.extend_from_slice(&self.u32(units as u32));
        body.extend_from_slice(&self.u32(data.len() as u32));
        body.extend_from_slice(&self.u32(original));
        body.extend_from_slice(data);
        body.resize(body.len().next_multiple_of(4), 0);
        // An opt_comment, which must not be taken for packet data.
        self.option(&mut body, 1, b"a comment");
        self.option(&mut body, 0, &[]);
        self.block(out, EPB, &body)
    }

    fn spb(&self, out: &mut Vec<u8>, original: u32, data: &[u8]) -> u64 {
        let mut body = Vec::new();
        body.extend_from_slice(&self.u32(original));
        body.extend_from_slice(data);
        self.block(out, SPB, &body)
    }
}

/// A small valid pcapng file (one section, one Ethernet interface, two
/// packets), the seed of the mutation test.
fn small_pcapng(big_endian: bool) -> Vec<u8> {
    let ng = Ng { big_endian };
    let mut out = Vec::new();
    ng.shb(&mut out);
    ng.idb(&mut out, 1, 65_535, Resolution::Decimal(9));
    ng.epb(&mut out, 0, ts_ns(0), 60, &frame(0, 60));
    ng.epb(&mut out, 0, ts_ns(1), 200, &frame(1, 90));
    out
}

// ---------------------------------------------------------------------------
// pcap variants.

#[test]
fn pcap_microseconds_little_endian() {
    let read = read(&Pcap::LE_US.two_packets());
    assert_eq!(
        read.format,
        FileFormat::Pcap {
            nanos: false,
            big_endian: false
        }
    );
    assert!(read.warnings.is_empty(), "{:?}", read.warnings);
    assert_two_standard_packets(&read.packets);
}

#[test]
fn pcap_microseconds_big_endian() {
    let bytes = Pcap {
        nanos: false,
        big_endian: true,
    }
    .two_packets();
    assert_eq!(bytes[..4], [0xa1, 0xb2, 0xc3, 0xd4]);
    let read = read(&bytes);
    assert_eq!(
        read.format,
        FileFormat::Pcap {
            nanos: false,
            big_endian: true
        }
    );
    assert!(read.warnings.is_empty(), "{:?}", read.warnings);
    assert_two_standard_packets(&read.packets);
}

#[test]
fn pcap_nanoseconds_both_byte_orders() {
    for big_endian in [false, true] {
        let read = read(
            &Pcap {
                nanos: true,
                big_endian,
            }
            .two_packets(),
        );
        assert_eq!(
            read.format,
            FileFormat::Pcap {
                nanos: true,
                big_endian
            }
        );
        assert!(read.warnings.is_empty(), "{:?}", read.warnings);
        assert_two_standard_packets(&read.packets);
    }
}

#[test]
fn pcap_nanosecond_timestamps_keep_every_digit() {
    let pcap = Pcap {
        nanos: true,
        big_endian: false,
    };
    let mut bytes = pcap.header(228);
    pcap.record(&mut bytes, 1_700_000_000_123_456_789, 20, &[0x45; 20]);
    let read = read(&bytes);
    assert_eq!(read.packets.len(), 1);
    assert_eq!(read.packets[0].ts_ns, 1_700_000_000_123_456_789);
    assert_eq!(read.packets[0].link, LinkType::RawIpv4);
}

#[test]
fn pcap_header_only_is_an_empty_capture() {
    let read = read(&Pcap::LE_US.header(1));
    assert!(read.packets.is_empty());
    assert!(read.warnings.is_empty());
}

// ---------------------------------------------------------------------------
// pcapng variants.

/// What `pcapng_interfaces_file` wrote and where.
struct NgLayout {
    bytes: Vec<u8>,
    expected: Vec<Packet>,
}

const BASE_S: u64 = 1_700_000_000;

/// One section; three interfaces: Ethernet in µs (no option), raw IPv4 in
/// ns, raw IPv4 in 2^-20 s. An EPB on each, an unknown block, an SPB.
fn pcapng_interfaces_file(big_endian: bool) -> NgLayout {
    let ng = Ng { big_endian };
    let mut out = Vec::new();
    let mut expected = Vec::new();
    ng.shb(&mut out);
    ng.idb(&mut out, 1, 1514, Resolution::Default);
    ng.idb(&mut out, 228, 0, Resolution::Decimal(9));
    ng.idb(&mut out, 228, 0, Resolution::Binary(20));

    let us = BASE_S * 1_000_000 + 250_001;
    let at = ng.epb(&mut out, 0, us, 61, &frame(0, 61));
    expected.push(Packet {
        ts_ns: us * 1000,
        wire_len: 61,
        data: frame(0, 61),
        link: LinkType::Ethernet,
        offset: at,
    });

    let ns = BASE_S * 1_000_000_000 + 123_456_789;
    let at = ng.epb(&mut out, 1, ns, 1500, &frame(1, 42));
    expected.push(Packet {
        ts_ns: ns,
        wire_len: 1500,
        data: frame(1, 42),
        link: LinkType::RawIpv4,
        offset: at,
    });

    ng.block(&mut out, UNKNOWN_BLOCK, b"nothing Sluice knows about");

    // Half a second and one unit of 2^-20 s (953.67 ns, truncated).
    let units = (BASE_S << 20) + (1 << 19) + 1;
    let at = ng.epb(&mut out, 2, units, 33, &frame(2, 33));
    expected.push(Packet {
        ts_ns: BASE_S * 1_000_000_000 + 500_000_953,
        wire_len: 33,
        data: frame(2, 33),
        link: LinkType::RawIpv4,
        offset: at,
    });

    // Simple packets belong to interface 0 and carry no timestamp.
    let at = ng.spb(&mut out, 77, &frame(3, 77));
    expected.push(Packet {
        ts_ns: BASE_S * 1_000_000_000 + 500_000_953,
        wire_len: 77,
        data: frame(3, 77),
        link: LinkType::Ethernet,
        offset: at,
    });
    // ... and are cut to its snap length.
    let at = ng.spb(&mut out, 2000, &frame(4, 2000));
    expected.push(Packet {
        ts_ns: BASE_S * 1_000_000_000 + 500_000_953,
        wire_len: 2000,
        data: frame(4, 1514),
        link: LinkType::Ethernet,
        offset: at,
    });

    let at = ng.epb(&mut out, 1, ns + 1, 20, &frame(5, 20));
    expected.push(Packet {
        ts_ns: ns + 1,
        wire_len: 20,
        data: frame(5, 20),
        link: LinkType::RawIpv4,
        offset: at,
    });
    NgLayout { bytes: out, expected }
}

#[test]
fn pcapng_interfaces_with_their_own_link_types_and_resolutions() {
    for big_endian in [false, true] {
        let layout = pcapng_interfaces_file(big_endian);
        let read = read(&layout.bytes);
        assert_eq!(read.format, FileFormat::PcapNg);
        assert!(read.warnings.is_empty(), "big endian {big_endian}: {:?}", read.warnings);
        assert_eq!(read.packets, layout.expected, "big endian {big_endian}");
        assert_eq!(read.skipped_blocks, 1, "the unknown block is skipped and counted");
    }
}

#[test]
fn pcapng_byte_orders_read_alike() {
    let le = read(&pcapng_interfaces_file(false).bytes);
    let be = read(&pcapng_interfaces_file(true).bytes);
    assert_eq!(le.packets, be.packets);
}

#[test]
fn pcapng_second_section_switches_byte_order_and_forgets_interfaces() {
    let le = Ng { big_endian: false };
    let be = Ng { big_endian: true };
    let mut out = Vec::new();
    le.shb(&mut out);
    le.idb(&mut out, 1, 0, Resolution::Default);
    le.idb(&mut out, 1, 0, Resolution::Default);
    let first = le.epb(&mut out, 1, 1_000_000, 60, &frame(0, 60));

    let second_section = be.shb(&mut out);
    be.idb(&mut out, 228, 0, Resolution::Decimal(9));
    let second = be.epb(&mut out, 0, 5_000_000_007, 20, &frame(1, 20));
    // Interface 1 existed in the first section only.
    let stale = be.epb(&mut out, 1, 6_000_000_000, 20, &frame(2, 20));
    let third = be.epb(&mut out, 0, 7_000_000_000, 21, &frame(3, 21));

    let read = read(&out);
    assert!(second_section > 0);
    let got: Vec<_> = read
        .packets
        .iter()
        .map(|p| (p.offset, p.ts_ns, p.link, p.data.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (first, 1_000_000_000, LinkType::Ethernet, frame(0, 60)),
            (second, 5_000_000_007, LinkType::RawIpv4, frame(1, 20)),
            (third, 7_000_000_000, LinkType::RawIpv4, frame(3, 21)),
        ]
    );
    let w = only_warning(&read, stale, false);
    assert!(w.message.contains("interface 1"), "{w:?}");
}

#[test]
fn pcapng_if_tsoffset_is_added_in_seconds() {
    // A signed 64-bit count of seconds: a negative one has both halves set.
    for (offset, expected) in [(1_600_000_000i64, 1_600_001_000u64), (-100, 900)] {
        for big_endian in [false, true] {
            let ng = Ng { big_endian };
            let mut out = Vec::new();
            ng.shb(&mut out);
            let mut body = Vec::new();
            body.extend_from_slice(&ng.u16(1));
            body.extend_from_slice(&ng.u16(0));
            body.extend_from_slice(&ng.u32(0));
            body.extend_from_slice(&ng.u16(14));
            body.extend_from_slice(&ng.u16(8));
            body.extend_from_slice(&if big_endian {
                offset.to_be_bytes()
            } else {
                offset.to_le_bytes()
            });
            ng.block(&mut out, IDB, &body);
            ng.epb(&mut out, 0, 1_000_000_000, 60, &frame(0, 60));
            let read = read(&out);
            assert_eq!(read.packets.len(), 1);
            assert_eq!(
                read.packets[0].ts_ns,
                expected * 1_000_000_000,
                "offset {offset}, big endian {big_endian}"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Malformed pcap.

#[test]
fn pcap_ending_inside_a_record_header() {
    for cut in [1, 7, 15] {
        let mut bytes = Pcap::LE_US.two_packets();
        Pcap::LE_US.record(&mut bytes, ts_ns(1), 60, &frame(2, 60));
        bytes.truncate(PCAP_END as usize + cut);
        let read = read(&bytes);
        assert_two_standard_packets(&read.packets);
        let w = only_warning(&read, PCAP_END, true);
        assert!(w.message.contains("record header"), "{w:?}");
    }
}

#[test]
fn pcap_record_longer_than_the_rest_of_the_file() {
    for cut in [16, 17, 16 + 59] {
        let mut bytes = Pcap::LE_US.two_packets();
        Pcap::LE_US.record(&mut bytes, ts_ns(1), 60, &frame(2, 60));
        bytes.truncate(PCAP_END as usize + cut);
        let read = read(&bytes);
        assert_two_standard_packets(&read.packets);
        let w = only_warning(&read, PCAP_END, true);
        assert!(w.message.contains("60 captured bytes"), "{w:?}");
    }
}

const ABSURD_CAPLEN: u32 = 4_093_509_168;

#[test]
fn pcap_absurd_captured_length_with_a_sane_wire_length_is_recovered() {
    let pcap = Pcap::LE_US;
    let mut bytes = pcap.two_packets();
    pcap.raw_record(&mut bytes, ts_ns(1), ABSURD_CAPLEN, 64, &frame(2, 64));
    let after = bytes.len() as u64;
    pcap.record(&mut bytes, ts_ns(1), 70, &frame(3, 70));
    let read = read(&bytes);
    assert_eq!(read.packets.len(), 4);
    assert_two_standard_packets(&read.packets[..2]);
    assert_eq!(read.packets[2].data, frame(2, 64));
    assert_eq!(read.packets[2].wire_len, 64);
    assert_eq!(read.packets[2].offset, PCAP_END);
    assert_eq!(read.packets[3].data, frame(3, 70));
    assert_eq!(read.packets[3].offset, after);
    let w = only_warning(&read, PCAP_END, false);
    assert!(w.message.contains(&ABSURD_CAPLEN.to_string()), "{w:?}");
}

#[test]
fn pcap_absurd_captured_length_with_an_absurd_wire_length_stops_the_read() {
    for original in [ABSURD_CAPLEN, u32::MAX, ABSURD_CAPLEN - 1, 1 << 30] {
        let pcap = Pcap::LE_US;
        let mut bytes = pcap.two_packets();
        pcap.raw_record(&mut bytes, ts_ns(1), ABSURD_CAPLEN, original, &frame(2, 64));
        pcap.record(&mut bytes, ts_ns(1), 70, &frame(3, 70));
        let read = read(&bytes);
        assert_two_standard_packets(&read.packets);
        only_warning(&read, PCAP_END, true);
    }
}

#[test]
fn pcap_absurd_captured_length_with_a_wire_length_beyond_the_file_stops_the_read() {
    let pcap = Pcap::LE_US;
    let mut bytes = pcap.two_packets();
    pcap.raw_record(&mut bytes, ts_ns(1), ABSURD_CAPLEN, 64, &frame(2, 30));
    let read = read(&bytes);
    assert_two_standard_packets(&read.packets);
    only_warning(&read, PCAP_END, true);
}

/// A wire length from the file over 256 KiB, or under the captured
/// length, is not believed: a located warning, and the frame counts its
/// captured bytes. Reading goes on.
#[test]
fn pcap_wire_lengths_beyond_belief_count_the_captured_bytes() {
    for pcap in [
        Pcap::LE_US,
        Pcap {
            nanos: true,
            big_endian: true,
        },
    ] {
        for original in [ABSURD_CAPLEN, (256 << 10) + 1, 63, 0] {
            let mut bytes = pcap.two_packets();
            pcap.record(&mut bytes, ts_ns(1), original, &frame(2, 64));
            let after = bytes.len() as u64;
            pcap.record(&mut bytes, ts_ns(1), 256 << 10, &frame(3, 70));
            let read = read(&bytes);
            assert_two_standard_packets(&read.packets[..2]);
            assert_eq!(read.packets.len(), 4);
            assert_eq!((read.packets[2].wire_len, read.packets[2].data.len()), (64, 64));
            assert_eq!((read.packets[3].wire_len, read.packets[3].offset), (256 << 10, after));
            let w = only_warning(&read, PCAP_END, false);
            assert!(
                w.message.contains(&format!("claims a {original}-byte frame")) && w.message.contains("64 captured"),
                "{w:?}"
            );
        }
    }
}

#[test]
fn pcapng_wire_lengths_beyond_belief_count_the_captured_bytes() {
    for big_endian in [false, true] {
        let ng = Ng { big_endian };
        for original in [ABSURD_CAPLEN, (256 << 10) + 1, 99] {
            let mut bytes = small_pcapng(big_endian);
            let epb = ng.epb(&mut bytes, 0, ts_ns(1), original, &frame(2, 100));
            let spb = ng.spb(&mut bytes, original.max(101), &frame(3, 101));
            let read = read(&bytes);
            assert_eq!(read.packets.len(), 4);
            assert_two_standard_packets_ng(&read.packets[..2]);
            assert_eq!(read.packets[2].wire_len, 100);
            // A simple packet's captured length follows from its original
            // one; without that, from its block, padding included.
            let expected_spb = if original > 256 << 10 { 104 } else { 101.max(original) };
            assert_eq!(read.packets[3].wire_len, expected_spb);
            assert_eq!(read.warnings[0].offset, epb);
            assert!(!read.warnings[0].fatal);
            assert!(read.warnings[0].message.contains("100 captured"), "{:?}", read.warnings);
            if original > 256 << 10 {
                assert_eq!(read.warnings.len(), 2);
                assert_eq!(read.warnings[1].offset, spb);
            } else {
                assert_eq!(read.warnings.len(), 1);
            }
        }
    }
}

#[test]
fn pcap_garbage_after_the_last_record() {
    for garbage in [
        vec![0xab; 5],
        vec![0xab; 16],
        vec![0xff; 64],
        b"this is not a record, but trailing text".to_vec(),
    ] {
        let mut bytes = Pcap::LE_US.two_packets();
        bytes.extend_from_slice(&garbage);
        let read = read(&bytes);
        assert_two_standard_packets(&read.packets);
        only_warning(&read, PCAP_END, true);
    }
}

// ---------------------------------------------------------------------------
// Malformed pcapng.

#[test]
fn pcapng_block_longer_than_the_rest_of_the_file() {
    for big_endian in [false, true] {
        let ng = Ng { big_endian };
        let mut bytes = small_pcapng(big_endian);
        let third = ng.epb(&mut bytes, 0, ts_ns(1), 100, &frame(2, 100));
        for cut in [12, 40, bytes.len() - third as usize - 1] {
            let read = read(&bytes[..third as usize + cut]);
            assert_two_standard_packets_ng(&read.packets);
            let w = only_warning(&read, third, true);
            assert!(w.message.contains("truncated"), "{w:?}");
        }
    }
}

#[track_caller]
fn assert_two_standard_packets_ng(packets: &[Packet]) {
    let got: Vec<_> = packets.iter().map(|p| (p.ts_ns, p.wire_len, p.data.clone())).collect();
    assert_eq!(got, vec![(ts_ns(0), 60, frame(0, 60)), (ts_ns(1), 200, frame(1, 90))]);
}

#[test]
fn pcapng_block_header_cut_short() {
    let bytes = small_pcapng(false);
    let end = bytes.len() as u64;
    for stray in [1usize, 8, 11] {
        let mut cut = bytes.clone();
        cut.extend_from_slice(&Ng { big_endian: false }.u32(EPB));
        cut.extend_from_slice(&Ng { big_endian: false }.u32(64));
        cut.extend_from_slice(&[0x11; 4]);
        cut.truncate(end as usize + stray);
        let read = read(&cut);
        assert_two_standard_packets_ng(&read.packets);
        only_warning(&read, end, true);
    }
}

#[test]
fn pcapng_block_length_below_the_minimum() {
    let ng = Ng { big_endian: false };
    let mut bytes = small_pcapng(false);
    let end = bytes.len() as u64;
    bytes.extend_from_slice(&ng.u32(EPB));
    bytes.extend_from_slice(&ng.u32(8));
    bytes.extend_from_slice(&[0; 32]);
    let read = read(&bytes);
    assert_two_standard_packets_ng(&read.packets);
    only_warning(&read, end, true);
}

#[test]
fn pcapng_packet_on_an_undefined_interface_is_skipped() {
    for big_endian in [false, true] {
        let ng = Ng { big_endian };
        let mut bytes = Vec::new();
        ng.shb(&mut bytes);
        ng.idb(&mut bytes, 1, 0, Resolution::Decimal(9));
        ng.epb(&mut bytes, 0, ts_ns(0), 60, &frame(0, 60));
        let bad = ng.epb(&mut bytes, 3, ts_ns(0), 60, &frame(7, 60));
        ng.epb(&mut bytes, 0, ts_ns(1), 200, &frame(1, 90));
        let read = read(&bytes);
        assert_two_standard_packets_ng(&read.packets);
        let w = only_warning(&read, bad, false);
        assert!(w.message.contains("interface 3"), "{w:?}");
    }
}

#[test]
fn pcapng_packet_before_any_interface_is_skipped() {
    let ng = Ng { big_endian: false };
    let mut bytes = Vec::new();
    ng.shb(&mut bytes);
    let bad = ng.epb(&mut bytes, 0, ts_ns(0), 60, &frame(7, 60));
    ng.idb(&mut bytes, 1, 0, Resolution::Decimal(9));
    ng.epb(&mut bytes, 0, ts_ns(0), 60, &frame(0, 60));
    ng.epb(&mut bytes, 0, ts_ns(1), 200, &frame(1, 90));
    let read = read(&bytes);
    assert_two_standard_packets_ng(&read.packets);
    only_warning(&read, bad, false);
}

#[test]
fn pcapng_packet_claiming_more_than_its_block_is_skipped() {
    let ng = Ng { big_endian: false };
    let mut bytes = Vec::new();
    ng.shb(&mut bytes);
    ng.idb(&mut bytes, 1, 0, Resolution::Decimal(9));
    ng.epb(&mut bytes, 0, ts_ns(0), 60, &frame(0, 60));
    let bad = ng.epb(&mut bytes, 0, ts_ns(0), 60, &frame(7, 60));
    // Captured length: 60 -> 4000.
    let field = bad as usize + 8 + 12;
    bytes[field..field + 4].copy_from_slice(&ng.u32(4000));
    ng.epb(&mut bytes, 0, ts_ns(1), 200, &frame(1, 90));
    let read = read(&bytes);
    assert_two_standard_packets_ng(&read.packets);
    only_warning(&read, bad, false);
}

#[test]
fn pcapng_garbage_after_the_last_block() {
    for garbage in [
        vec![0xab; 5],
        vec![0xab; 12],
        vec![0xff; 64],
        b"this is not a block, but trailing text".to_vec(),
    ] {
        let mut bytes = small_pcapng(false);
        let end = bytes.len() as u64;
        bytes.extend_from_slice(&garbage);
        let read = read(&bytes);
        assert_two_standard_packets_ng(&read.packets);
        only_warning(&read, end, true);
    }
}

#[test]
fn pcapng_interface_of_an_unsupported_link_type_skips_its_packets() {
    let ng = Ng { big_endian: false };
    let mut bytes = Vec::new();
    ng.shb(&mut bytes);
    ng.idb(&mut bytes, 1, 0, Resolution::Decimal(9));
    let unsupported = ng.idb(&mut bytes, 147, 0, Resolution::Decimal(9));
    ng.epb(&mut bytes, 0, ts_ns(0), 60, &frame(0, 60));
    ng.epb(&mut bytes, 1, ts_ns(0), 60, &frame(7, 60));
    ng.epb(&mut bytes, 0, ts_ns(1), 200, &frame(1, 90));
    let read = read(&bytes);
    assert_two_standard_packets_ng(&read.packets);
    let w = only_warning(&read, unsupported, false);
    assert!(w.message.contains("147"), "{w:?}");
}

// ---------------------------------------------------------------------------
// Files that are not captures, or not ones Sluice can read.

#[track_caller]
fn open_error(name: &str, bytes: &[u8]) -> (OpenError, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(dir.path(), name, bytes);
    let error = match open_path(&path) {
        Ok(read) => panic!("{name} opened: {read:?}"),
        Err(e) => e,
    };
    let message = error.to_string();
    let shown = path.display().to_string();
    assert!(
        message.contains(&shown),
        "the message does not name the file: {message}"
    );
    (error, message, shown)
}

#[test]
fn a_text_file_is_not_a_capture() {
    let (error, message, _) = open_error("notes.txt", b"Hello, these are my notes about the network.\n");
    assert!(matches!(error, OpenError::NotACapture { .. }), "{error:?}");
    assert!(message.contains("not a pcap or pcapng file"), "{message}");
    // The first bytes, in hex, tell what the file is instead.
    assert!(message.contains("48 65 6c 6c"), "{message}");
}

#[test]
fn unsupported_pcap_link_type_is_named() {
    let mut bytes = Pcap::LE_US.header(147);
    Pcap::LE_US.record(&mut bytes, ts_ns(0), 60, &frame(0, 60));
    let (error, message, _) = open_error("user0.pcap", &bytes);
    assert!(
        matches!(error, OpenError::UnsupportedLinkType { linktype: 147, .. }),
        "{error:?}"
    );
    assert!(message.contains("147"), "{message}");
}

#[test]
fn unsupported_pcapng_link_type_is_named() {
    let ng = Ng { big_endian: true };
    let mut bytes = Vec::new();
    ng.shb(&mut bytes);
    ng.idb(&mut bytes, 147, 0, Resolution::Default);
    ng.epb(&mut bytes, 0, 1, 60, &frame(0, 60));
    let (error, message, _) = open_error("user0.pcapng", &bytes);
    assert!(
        matches!(error, OpenError::UnsupportedLinkType { linktype: 147, .. }),
        "{error:?}"
    );
    assert!(message.contains("147"), "{message}");
}

#[test]
fn an_empty_file_is_refused_clearly() {
    let (error, message, shown) = open_error("zero.pcap", b"");
    assert!(matches!(error, OpenError::NotACapture { .. }), "{error:?}");
    let rest = message.replace(&shown, "");
    assert!(
        rest.contains("file is empty"),
        "the message should say the file is empty: {message}"
    );
}

#[test]
fn ten_byte_files_are_refused_clearly() {
    // Ten bytes of text.
    let (error, message, _) = open_error("ten.txt", b"0123456789");
    assert!(matches!(error, OpenError::NotACapture { .. }), "{error:?}");
    assert!(message.contains("not a pcap or pcapng file"), "{message}");

    // Ten bytes of a pcap header.
    let (error, message, _) = open_error("ten.pcap", &Pcap::LE_US.header(1)[..10]);
    assert!(matches!(error, OpenError::BadHeader { offset: 10, .. }), "{error:?}");
    assert!(message.contains("pcap header"), "{message}");

    // Ten bytes of a pcapng section header.
    let (error, message, _) = open_error("ten.pcapng", &small_pcapng(false)[..10]);
    assert!(matches!(error, OpenError::BadHeader { .. }), "{error:?}");
    assert!(message.contains("section header"), "{message}");
}

#[test]
fn pcapng_with_a_bad_byte_order_magic_is_refused() {
    let mut bytes = small_pcapng(false);
    bytes[8..12].copy_from_slice(b"XXXX");
    let (error, _, _) = open_error("bom.pcapng", &bytes);
    assert!(matches!(error, OpenError::BadHeader { offset: 8, .. }), "{error:?}");
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("does-not-exist.pcap");
    let error = open_path(&path).unwrap_err();
    assert!(matches!(error, OpenError::Io { .. }), "{error:?}");
    assert!(error.to_string().contains(&path.display().to_string()));
}

// ---------------------------------------------------------------------------
// Small files are read whole, large ones mapped; either way, and through a
// reader that owns the file, the same packets.

/// The packets of `path` as `CaptureFile::into_packets` reads them, with
/// the warnings' offsets.
fn read_owned(path: &Path) -> (Vec<Packet>, Vec<u64>) {
    read_all(CaptureFile::open(path).unwrap().into_packets().unwrap())
}

fn read_all(mut packets: FilePackets) -> (Vec<Packet>, Vec<u64>) {
    let mut read = Vec::new();
    while let Some(p) = packets.next_packet() {
        read.push(Packet {
            ts_ns: p.ts_ns,
            wire_len: p.wire_len,
            data: p.data.to_vec(),
            link: p.link,
            offset: p.offset,
        });
    }
    let warnings = packets.reader().warnings().iter().map(|w| w.offset).collect();
    (read, warnings)
}

/// The standard two frames, repeated until the file is `at_least` bytes
/// long, and a stray byte after the last record.
fn long_capture(at_least: usize) -> Vec<u8> {
    let mut out = Pcap::LE_US.header(1);
    let mut i = 0;
    while out.len() < at_least {
        Pcap::LE_US.record(
            &mut out,
            ts_ns(i % 2) + i as u64 * 1000,
            60 + i as u32 % 2,
            &frame(i, 60),
        );
        i += 1;
    }
    out.push(0xee);
    out
}

#[test]
fn small_and_large_files_read_the_same_through_either_reader() {
    let dir = tempfile::tempdir().unwrap();
    // Either side of the size from which files are mapped (1 MiB).
    for (name, size) in [("small.pcap", 300_000), ("large.pcap", 3 << 20)] {
        let bytes = long_capture(size);
        let path = write_file(dir.path(), name, &bytes);
        let borrowed = open_path(&path).unwrap();
        let (owned, warnings) = read_owned(&path);
        assert_eq!(owned, borrowed.packets, "{name}");
        assert_eq!(owned.len(), (bytes.len() - 24) / 76, "{name}");
        assert_eq!(
            warnings,
            vec![bytes.len() as u64 - 1],
            "{name}: the stray byte, where it is"
        );
        assert_eq!(borrowed.warnings.len(), 1, "{name}");
    }
}

/// A rotated capture deleted (by a retention policy, say) while it is
/// being read is read to its end.
#[test]
fn a_file_deleted_while_it_is_read_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    for (name, size) in [("small.pcap", 4_000), ("large.pcap", 2 << 20)] {
        let path = write_file(dir.path(), name, &long_capture(size));
        let expected = open_path(&path).unwrap().packets;
        let packets = CaptureFile::open(&path).unwrap().into_packets().unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read_all(packets).0, expected, "{name}");
    }
}

#[test]
fn a_directory_is_refused_with_what_to_pass_instead() {
    let dir = tempfile::tempdir().unwrap();
    let error = open_path(dir.path()).unwrap_err();
    assert!(matches!(error, OpenError::Directory { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&dir.path().display().to_string()), "{message}");
    assert!(message.contains("*.pcap"), "{message}");
}

#[test]
fn an_endless_device_is_refused_by_its_first_bytes() {
    let error = open_path(Path::new("/dev/zero")).unwrap_err();
    assert!(matches!(error, OpenError::NotACapture { .. }), "{error:?}");
    assert!(error.to_string().contains("00 00 00 00"), "{error}");
}

#[test]
fn a_capture_from_a_pipe_is_read_whole() {
    let bytes = Pcap::LE_US.two_packets();
    let (reader, mut writer) = std::io::pipe().unwrap();
    let feeding = std::thread::spawn(move || writer.write_all(&bytes));
    // The pipe's own path, as a shell's `<(...)` would give it.
    let path = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&reader)));
    let read = open_path(&path).expect("a pipe cannot be mapped, but it can be read");
    feeding.join().unwrap().unwrap();
    assert_two_standard_packets(&read.packets);
    drop(reader);
}

// ---------------------------------------------------------------------------
// Arbitrary input never panics and always ends.

/// Reads a file of arbitrary content and checks what every read must
/// satisfy, whatever the bytes.
fn read_anything(file: &mut tempfile::NamedTempFile, bytes: &[u8]) -> Result<(), TestCaseError> {
    file.as_file_mut().set_len(0).unwrap();
    file.as_file_mut().write_all(bytes).unwrap();
    file.as_file_mut().flush().unwrap();
    let len = bytes.len() as u64;
    let Ok(capture) = CaptureFile::open(file.path()) else {
        return Ok(());
    };
    let mut reader = capture.reader().expect("a file that opened has a reader");
    // Every packet consumes at least a 12-byte block or a 16-byte record,
    // so a reader that yields more than this is going round in circles.
    let limit = len / 12 + 1;
    let mut count = 0;
    for p in reader.by_ref() {
        count += 1;
        prop_assert!(count <= limit, "more packets than the file can hold");
        prop_assert!(p.offset < len);
        prop_assert!(p.data.len() as u64 <= len);
        prop_assert!(p.wire_len as usize >= p.data.len());
    }
    prop_assert!(reader.position() <= len);
    let warnings = reader.warnings();
    prop_assert!(reader.warning_count() >= warnings.len() as u64);
    for (i, w) in warnings.iter().enumerate() {
        prop_assert!(w.offset <= len, "warning beyond the end: {w:?}");
        prop_assert!(
            !w.fatal || i == warnings.len() - 1,
            "a fatal warning that did not stop the read"
        );
    }
    // A finished reader stays finished.
    prop_assert!(reader.next().is_none());
    Ok(())
}

/// Interesting values for 32-bit length fields.
const WORDS: [u32; 10] = [0, 1, 4, 8, 12, 13, 0x7fff_ffff, 0xffff_ffff, ABSURD_CAPLEN, 0x0a0d_0d0a];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_records_after_a_pcap_header(
        nanos in any::<bool>(),
        big_endian in any::<bool>(),
        tail in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        let mut bytes = Pcap { nanos, big_endian }.header(1);
        bytes.extend_from_slice(&tail);
        read_anything(&mut file, &bytes)?;
    }

    #[test]
    fn plausible_records_after_a_pcap_header(
        records in proptest::collection::vec((any::<u32>(), 0u32..200, 0u32..300, any::<bool>()), 0..12),
        stray in proptest::collection::vec(any::<u8>(), 0..20),
    ) {
        // Record headers with small, often lying lengths: the bodies are
        // random in size too, so lengths and contents disagree.
        let pcap = Pcap::LE_US;
        let mut bytes = pcap.header(1);
        for (ts, captured, original, absurd) in records {
            let captured_field = if absurd { ABSURD_CAPLEN } else { captured };
            pcap.raw_record(&mut bytes, ts as u64 * 1000, captured_field, original, &vec![0x5a; captured as usize]);
        }
        bytes.extend_from_slice(&stray);
        let mut file = tempfile::NamedTempFile::new().unwrap();
        read_anything(&mut file, &bytes)?;
    }

    #[test]
    fn mutated_pcapng(
        big_endian in any::<bool>(),
        bytes_changed in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 0..8),
        words_changed in proptest::collection::vec((any::<proptest::sample::Index>(), proptest::sample::select(WORDS.to_vec())), 0..4),
        cut in any::<proptest::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let mut bytes = pcapng_interfaces_file(big_endian).bytes;
        // A second section too, so that section switches get mutated.
        let other = Ng { big_endian: !big_endian };
        other.shb(&mut bytes);
        other.idb(&mut bytes, 1, 0, Resolution::Binary(30));
        other.epb(&mut bytes, 0, 1 << 40, 60, &frame(0, 60));
        for (at, value) in bytes_changed {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        for (at, value) in words_changed {
            // Length fields sit at multiples of 4.
            let i = at.index(bytes.len() / 4) * 4;
            let word = if big_endian { value.to_be_bytes() } else { value.to_le_bytes() };
            bytes[i..i + 4].copy_from_slice(&word);
        }
        if do_cut {
            let keep = cut.index(bytes.len() + 1);
            bytes.truncate(keep);
        }
        let mut file = tempfile::NamedTempFile::new().unwrap();
        read_anything(&mut file, &bytes)?;
    }

    #[test]
    fn mutated_small_pcapng_with_a_simple_packet(
        bytes_changed in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>()), 1..6),
    ) {
        let ng = Ng { big_endian: false };
        let mut bytes = small_pcapng(false);
        ng.spb(&mut bytes, 50, &frame(9, 50));
        for (at, value) in bytes_changed {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let mut file = tempfile::NamedTempFile::new().unwrap();
        read_anything(&mut file, &bytes)?;
    }
}

#[test]
fn pcapng_first_interface_unsupported_but_a_later_one_supported() {
    let ng = Ng { big_endian: false };
    let mut bytes = Vec::new();
    ng.shb(&mut bytes);
    let unsupported = ng.idb(&mut bytes, 147, 0, Resolution::Decimal(9));
    ng.idb(&mut bytes, 1, 0, Resolution::Decimal(9));
    ng.epb(&mut bytes, 1, ts_ns(0), 60, &frame(0, 60));
    ng.epb(&mut bytes, 0, ts_ns(0), 60, &frame(7, 60));
    ng.epb(&mut bytes, 1, ts_ns(1), 200, &frame(1, 90));
    let read = read(&bytes);
    assert_two_standard_packets_ng(&read.packets);
    only_warning(&read, unsupported, false);
}
