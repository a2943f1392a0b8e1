//! pcapng: sections of blocks, several interfaces each with its own link
//! type and timestamp resolution.

use sluice_wire::LinkType;
use sluice_wire::bytes::ByteOrder;

use crate::file::{HeaderError, MAX_WIRE_LEN, Prefetcher, RawPacket, Warnings, untrusted_wire_len};

const SECTION_HEADER: u32 = 0x0a0d_0d0a;
const INTERFACE_DESCRIPTION: u32 = 1;
const OBSOLETE_PACKET: u32 = 2;
const SIMPLE_PACKET: u32 = 3;
const ENHANCED_PACKET: u32 = 6;

const OPT_END: u16 = 0;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

#[derive(Clone, Copy)]
struct Interface {
    link: Option<LinkType>,
    snaplen: u32,
    /// Timestamp units per second are 10^n (`decimal`) or 2^n.
    resolution: u8,
    decimal: bool,
    offset_seconds: i64,
}

impl Interface {
    fn to_ns(self, units: u64) -> u64 {
        let ns = if self.decimal {
            match self.resolution {
                9 => units,
                n if n < 9 => units.saturating_mul(10u64.pow((9 - n) as u32)),
                n => units / 10u64.saturating_pow((n - 9) as u32),
            }
        } else {
            let shift = self.resolution.min(127);
            ((units as u128 * 1_000_000_000u128) >> shift).min(u64::MAX as u128) as u64
        };
        ns.saturating_add_signed(self.offset_seconds.saturating_mul(1_000_000_000))
    }
}

pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    prefetcher: Prefetcher,
    big_endian: bool,
    interfaces: Vec<Interface>,
    skipped: u64,
    last_ts: u64,
    done: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Result<Self, HeaderError> {
        if bytes.len() < 28 {
            return Err(HeaderError::Bad {
                offset: 0,
                reason: "file ends inside the pcapng section header block".into(),
            });
        }
        let big_endian = match bytes[8..12] {
            [0x1a, 0x2b, 0x3c, 0x4d] => true,
            [0x4d, 0x3c, 0x2b, 0x1a] => false,
            _ => {
                return Err(HeaderError::Bad {
                    offset: 8,
                    reason: "pcapng byte-order magic is neither 1a2b3c4d nor 4d3c2b1a".into(),
                });
            }
        };
        let reader = Reader {
            bytes,
            pos: 0,
            prefetcher: Prefetcher::default(),
            big_endian,
            interfaces: Vec::new(),
            skipped: 0,
            last_ts: 0,
            done: false,
        };
        // A file whose only interfaces use link types we cannot decode is
        // refused up front, like a pcap file would be.
        if let Some(linktype) = reader.undecodable_linktype() {
            return Err(HeaderError::LinkType(linktype as u32));
        }
        Ok(reader)
    }

    pub(crate) fn position(&self) -> u64 {
        self.pos as u64
    }

    pub(crate) fn skipped_blocks(&self) -> u64 {
        self.skipped
    }

    /// The link type of the first interface, when no interface described
    /// before the first section's first packet has one Sluice decodes.
    fn undecodable_linktype(&self) -> Option<u16> {
        let mut first = None;
        let mut at = self.u32(4) as usize;
        while self.bytes.len() >= at + 12 {
            let length = self.u32(at + 4) as usize;
            match self.u32(at) {
                INTERFACE_DESCRIPTION => {
                    let linktype = self.u16(at + 8);
                    if LinkType::from_linktype(linktype as u32).is_some() {
                        return None;
                    }
                    first.get_or_insert(linktype);
                }
                ENHANCED_PACKET | OBSOLETE_PACKET | SIMPLE_PACKET | SECTION_HEADER => break,
                _ => {}
            }
            if length < 12 {
                break;
            }
            at += length.next_multiple_of(4);
        }
        first
    }

    fn order(&self) -> ByteOrder {
        if self.big_endian {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }

    /// Numbers of a block or option whose length the caller has checked.
    fn u16(&self, at: usize) -> u16 {
        self.order().u16(self.bytes, at).expect("a checked length")
    }

    #[inline]
    fn u32(&self, at: usize) -> u32 {
        self.order().u32(self.bytes, at).expect("a checked length")
    }

    pub(crate) fn next(&mut self, warnings: &mut Warnings) -> Option<RawPacket<'a>> {
        while !self.done && self.pos < self.bytes.len() {
            let at = self.pos;
            let remaining = self.bytes.len() - at;
            if remaining < 12 {
                warnings.push(
                    at as u64,
                    format!("{remaining} stray bytes after the last complete block"),
                    true,
                );
                self.done = true;
                return None;
            }
            let block_type = self.u32(at);
            if block_type == SECTION_HEADER {
                match self.bytes[at + 8..at + 12] {
                    [0x1a, 0x2b, 0x3c, 0x4d] => self.big_endian = true,
                    [0x4d, 0x3c, 0x2b, 0x1a] => self.big_endian = false,
                    _ => {
                        warnings.push(at as u64 + 8, "section header with a bad byte-order magic".into(), true);
                        self.done = true;
                        return None;
                    }
                }
            }
            let length = self.u32(at + 4) as usize;
            if length < 12 || length > remaining {
                warnings.push(
                    at as u64,
                    format!(
                        "block of type 0x{block_type:x} claims {length} bytes but {remaining} remain: the file is {}",
                        if length > remaining {
                            "truncated"
                        } else {
                            "corrupt from here on"
                        }
                    ),
                    true,
                );
                self.done = true;
                return None;
            }
            self.pos = at + length.next_multiple_of(4).min(remaining);
            self.prefetcher.ahead(self.bytes, self.pos);
            let body = &self.bytes[at + 8..at + length - 4];
            match block_type {
                SECTION_HEADER => self.interfaces.clear(),
                INTERFACE_DESCRIPTION => self.interface(at, body, warnings),
                ENHANCED_PACKET | OBSOLETE_PACKET => {
                    if let Some(packet) = self.packet(at, block_type, body, warnings) {
                        return Some(packet);
                    }
                }
                SIMPLE_PACKET => {
                    if let Some(packet) = self.simple_packet(at, body, warnings) {
                        return Some(packet);
                    }
                }
                _ => self.skipped += 1,
            }
        }
        None
    }

    fn interface(&mut self, at: usize, body: &[u8], warnings: &mut Warnings) {
        if body.len() < 8 {
            warnings.push(at as u64, "interface description block too short".into(), false);
            self.skipped += 1;
            return;
        }
        let body_at = at + 8;
        let linktype = self.u16(body_at);
        let link = LinkType::from_linktype(linktype as u32);
        if link.is_none() {
            warnings.push(
                at as u64,
                format!(
                    "interface {} has link type {linktype}, which Sluice cannot decode; its packets are skipped",
                    self.interfaces.len()
                ),
                false,
            );
        }
        let mut interface = Interface {
            link,
            snaplen: self.u32(body_at + 4),
            resolution: 6,
            decimal: true,
            offset_seconds: 0,
        };
        let mut option = body_at + 8;
        let end = body_at + body.len();
        while option + 4 <= end {
            let code = self.u16(option);
            let len = self.u16(option + 2) as usize;
            let value = option + 4;
            if code == OPT_END || value + len > end {
                break;
            }
            match (code, len) {
                (OPT_IF_TSRESOL, 1) => {
                    let v = self.bytes[value];
                    interface.decimal = v & 0x80 == 0;
                    interface.resolution = v & 0x7f;
                }
                (OPT_IF_TSOFFSET, 8) => {
                    let hi = self.u32(value) as u64;
                    let lo = self.u32(value + 4) as u64;
                    // Stored as a 64-bit value in the section's byte order.
                    let v = if self.big_endian {
                        (hi << 32) | lo
                    } else {
                        (lo << 32) | hi
                    };
                    interface.offset_seconds = v as i64;
                }
                _ => {}
            }
            option = value + len.next_multiple_of(4);
        }
        self.interfaces.push(interface);
    }

    fn packet(&mut self, at: usize, block_type: u32, body: &'a [u8], warnings: &mut Warnings) -> Option<RawPacket<'a>> {
        if body.len() < 20 {
            warnings.push(at as u64, "packet block too short for its fixed fields".into(), false);
            return None;
        }
        let body_at = at + 8;
        let interface_id = if block_type == ENHANCED_PACKET {
            self.u32(body_at) as usize
        } else {
            self.u16(body_at) as usize
        };
        let units = ((self.u32(body_at + 4) as u64) << 32) | self.u32(body_at + 8) as u64;
        let captured = self.u32(body_at + 12) as usize;
        let original = self.u32(body_at + 16);
        let Some(interface) = self.interfaces.get(interface_id).copied() else {
            warnings.push(
                at as u64,
                format!("packet refers to interface {interface_id}, which was never described; skipped"),
                false,
            );
            return None;
        };
        if captured > body.len() - 20 {
            warnings.push(
                at as u64,
                format!(
                    "packet claims {captured} captured bytes but its block holds {}; skipped",
                    body.len() - 20
                ),
                false,
            );
            return None;
        }
        let Some(link) = interface.link else {
            self.skipped += 1;
            return None;
        };
        let ts_ns = interface.to_ns(units);
        self.last_ts = ts_ns;
        Some(RawPacket {
            ts_ns,
            wire_len: checked_wire_len(at, original, captured as u32, warnings),
            data: &body[20..20 + captured],
            link,
            offset: at as u64,
        })
    }

    fn simple_packet(&mut self, at: usize, body: &'a [u8], warnings: &mut Warnings) -> Option<RawPacket<'a>> {
        let Some(interface) = self.interfaces.first().copied() else {
            warnings.push(
                at as u64,
                "simple packet block before any interface description; skipped".into(),
                false,
            );
            return None;
        };
        if body.len() < 4 {
            warnings.push(at as u64, "simple packet block too short".into(), false);
            return None;
        }
        let original = self.u32(at + 8);
        let mut captured = (original as usize).min(body.len() - 4);
        if interface.snaplen != 0 {
            captured = captured.min(interface.snaplen as usize);
        }
        let Some(link) = interface.link else {
            self.skipped += 1;
            return None;
        };
        // Simple packets carry no timestamp: the last one seen stands in.
        Some(RawPacket {
            ts_ns: self.last_ts,
            wire_len: checked_wire_len(at, original, captured as u32, warnings),
            data: &body[4..4 + captured],
            link,
            offset: at as u64,
        })
    }
}

/// The frame's wire length: `original` when it is believable, else (with a
/// warning) its captured length.
#[inline]
fn checked_wire_len(at: usize, original: u32, captured: u32, warnings: &mut Warnings) -> u32 {
    if original > MAX_WIRE_LEN || original < captured {
        warnings.push(at as u64, untrusted_wire_len(original, captured), false);
        captured
    } else {
        original
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interface(if_tsresol: u8, offset_seconds: i64) -> Interface {
        Interface {
            link: Some(LinkType::Ethernet),
            snaplen: 0,
            resolution: if_tsresol & 0x7f,
            decimal: if_tsresol & 0x80 == 0,
            offset_seconds,
        }
    }

    /// The pcapng specification's if_tsresol: with the top bit clear a unit
    /// is 10^-n s, with it set 2^-n s; if_tsoffset adds whole seconds.
    #[test]
    fn timestamp_units_by_resolution() {
        let ns = |resol: u8, units: u64| interface(resol, 0).to_ns(units);
        assert_eq!(ns(0, 3), 3_000_000_000, "seconds");
        assert_eq!(ns(3, 1_500), 1_500_000_000, "milliseconds");
        assert_eq!(ns(6, 1_500_000), 1_500_000_000, "microseconds, the default");
        assert_eq!(ns(9, 1_500_000_007), 1_500_000_007, "nanoseconds");
        assert_eq!(ns(12, 1_500_000_007_999), 1_500_000_007, "picoseconds, cut");
        assert_eq!(ns(19, 30_000_000_000), 3, "10^-19 s");
        assert_eq!(ns(127, u64::MAX / 2), 0, "beyond any clock");
        assert_eq!(ns(0x80, 2), 2_000_000_000, "2^0");
        assert_eq!(ns(0x8a, 1024 * 3 + 512), 3_500_000_000, "2^-10");
        assert_eq!(ns(0x9e, 1 << 30), 1_000_000_000, "2^-30");
        assert_eq!(ns(0xa0, 3 << 31), 1_500_000_000, "2^-32");
        assert_eq!(ns(0xff, u64::MAX), 0, "2^-127");
        // Saturating rather than wrapping, both ways.
        assert_eq!(ns(0, u64::MAX), u64::MAX);
        assert_eq!(ns(0x80, u64::MAX), u64::MAX);
        assert_eq!(interface(6, 100).to_ns(1_000_000), 101_000_000_000);
        assert_eq!(interface(6, -100).to_ns(101_000_000), 1_000_000_000);
        assert_eq!(interface(6, -100).to_ns(1_000_000), 0);
    }

    /// A packet's time, wire length and bytes.
    type Packet = (u64, u32, Vec<u8>);
    /// A warning's offset, message and whether it stopped the read.
    type Said = (u64, String, bool);

    /// A little-endian section: its header, and blocks of a type and a
    /// body, padded to 4 bytes, the total length at both ends.
    struct File(Vec<u8>);

    impl File {
        fn new() -> File {
            let mut f = File(Vec::new());
            f.block(
                SECTION_HEADER,
                &[
                    0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                ],
            );
            f
        }

        fn block(&mut self, kind: u32, body: &[u8]) -> &mut File {
            let len = (12 + body.len().next_multiple_of(4)) as u32;
            self.0.extend_from_slice(&kind.to_le_bytes());
            self.0.extend_from_slice(&len.to_le_bytes());
            self.0.extend_from_slice(body);
            self.0
                .resize(self.0.len() + body.len().next_multiple_of(4) - body.len(), 0);
            self.0.extend_from_slice(&len.to_le_bytes());
            self
        }

        /// An interface of `linktype` and `snaplen`, with `options`.
        fn idb(&mut self, linktype: u16, snaplen: u32, options: &[u8]) -> &mut File {
            let body = [&linktype.to_le_bytes()[..], &[0, 0], &snaplen.to_le_bytes(), options].concat();
            self.block(INTERFACE_DESCRIPTION, &body)
        }

        fn epb(&mut self, interface: u32, units: u64, data: &[u8]) -> &mut File {
            let mut body = interface.to_le_bytes().to_vec();
            body.extend_from_slice(&((units >> 32) as u32).to_le_bytes());
            body.extend_from_slice(&(units as u32).to_le_bytes());
            body.extend_from_slice(&(data.len() as u32).to_le_bytes());
            body.extend_from_slice(&(data.len() as u32 + 4).to_le_bytes());
            body.extend_from_slice(data);
            self.block(ENHANCED_PACKET, &body)
        }

        /// Every packet: time, wire length, bytes; and the warnings.
        fn read(&self) -> (Vec<Packet>, Vec<Said>) {
            let mut reader = Reader::new(&self.0).map_err(|_| "header").unwrap();
            let mut warnings = Warnings::default();
            let mut packets = Vec::new();
            while let Some(p) = reader.next(&mut warnings) {
                packets.push((p.ts_ns, p.wire_len, p.data.to_vec()));
            }
            let warnings = warnings
                .kept
                .iter()
                .map(|w| (w.offset, w.message.clone(), w.fatal))
                .collect();
            (packets, warnings)
        }
    }

    fn option(code: u16, value: &[u8]) -> Vec<u8> {
        let mut o = code.to_le_bytes().to_vec();
        o.extend_from_slice(&(value.len() as u16).to_le_bytes());
        o.extend_from_slice(value);
        o.resize(4 + value.len().next_multiple_of(4), 0);
        o
    }

    /// Options are read up to opt_endofopt or the end of the block, each
    /// padded to 4 bytes; one whose value would run past the block ends the
    /// list; if_tsresol takes one byte and if_tsoffset eight, other lengths
    /// are ignored.
    #[test]
    fn interface_options() {
        let comment = option(1, b"three");
        let resol = option(OPT_IF_TSRESOL, &[9]);
        let offset = option(OPT_IF_TSOFFSET, &10i64.to_le_bytes());
        let end = option(OPT_END, &[]);
        let cases: [(Vec<u8>, u64); 6] = [
            ([&comment[..], &resol, &offset, &end].concat(), 10_000_000_007),
            ([&comment[..], &end, &resol].concat(), 7_000),
            ([&resol[..], &option(OPT_IF_TSOFFSET, &[1, 0, 0, 0])].concat(), 7),
            (option(OPT_IF_TSRESOL, &[9, 0]), 7_000),
            // A length past the block: the list ends there.
            ([&resol[..], &[1, 0, 0xff, 0]].concat(), 7),
            ([&[1, 0, 0x40, 0][..], &resol].concat(), 7_000),
        ];
        for (options, ts) in cases {
            let mut f = File::new();
            f.idb(1, 0, &options).epb(0, 7, &[0xab; 14]);
            let (packets, warnings) = f.read();
            assert!(warnings.is_empty(), "{warnings:?}");
            assert_eq!(packets[0].0, ts, "{options:?}");
        }
    }

    /// Obsolete packet blocks (type 2) hold a 2-byte interface id and a
    /// 2-byte drop count where enhanced ones hold a 4-byte id; simple
    /// packet blocks (type 3) belong to the first interface, have no time
    /// (the last packet's stands in) and are cut to its snap length.
    #[test]
    fn obsolete_and_simple_packet_blocks() {
        let mut f = File::new();
        f.idb(1, 16, &[]).idb(1, 0, &option(OPT_IF_TSRESOL, &[3]));
        // Obsolete: interface 1 (milliseconds), 5 drops, time 2500 ms.
        let mut obsolete = vec![1, 0, 5, 0];
        obsolete.extend_from_slice(&0u32.to_le_bytes());
        obsolete.extend_from_slice(&2_500u32.to_le_bytes());
        obsolete.extend_from_slice(&14u32.to_le_bytes());
        obsolete.extend_from_slice(&60u32.to_le_bytes());
        obsolete.extend_from_slice(&[0xcd; 14]);
        f.block(OBSOLETE_PACKET, &obsolete);
        // Simple: 20 bytes of a 20-byte frame, cut to 16.
        let mut simple = 20u32.to_le_bytes().to_vec();
        simple.extend_from_slice(&[0xef; 20]);
        f.block(SIMPLE_PACKET, &simple);
        // Simple with fewer bytes in the block than the frame had.
        let mut short = 100u32.to_le_bytes().to_vec();
        short.extend_from_slice(&[0x11; 8]);
        f.block(SIMPLE_PACKET, &short);
        let (packets, warnings) = f.read();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            packets,
            [
                (2_500_000_000, 60, vec![0xcd; 14]),
                (2_500_000_000, 20, vec![0xef; 16]),
                (2_500_000_000, 100, vec![0x11; 8]),
            ]
        );
    }

    /// Blocks that cannot be read: each says where, and only what makes the
    /// rest unreadable stops the read.
    #[test]
    fn blocks_that_cannot_be_read() {
        // A simple packet before any interface; an interface block of 4
        // bytes; a packet block of 16 bytes of fixed fields; a packet whose
        // data would run past its block.
        let mut f = File::new();
        let shb = f.0.len() as u64;
        f.block(SIMPLE_PACKET, &[4, 0, 0, 0, 1, 2, 3, 4]);
        f.block(INTERFACE_DESCRIPTION, &[1, 0, 0, 0]);
        f.idb(1, 0, &[]);
        let short = f.0.len() as u64;
        f.block(ENHANCED_PACKET, &[0; 16]);
        let overrun = f.0.len() as u64;
        f.block(
            ENHANCED_PACKET,
            &[&[0; 12][..], &[20, 0, 0, 0], &[20, 0, 0, 0], &[0; 8]].concat(),
        );
        f.block(SIMPLE_PACKET, &[]);
        f.epb(0, 1, &[1; 14]);
        let (packets, warnings) = f.read();
        assert_eq!(packets.len(), 1);
        let said: Vec<(u64, bool)> = warnings.iter().map(|w| (w.0, w.2)).collect();
        assert_eq!(said[..2], [(shb, false), (shb + 20, false)]);
        assert_eq!(said[2..4], [(short, false), (overrun, false)]);
        assert!(warnings[0].1.contains("before any interface"), "{warnings:?}");
        assert!(warnings[1].1.contains("too short"), "{warnings:?}");
        assert!(warnings[2].1.contains("fixed fields"), "{warnings:?}");
        assert!(
            warnings[3].1.contains("claims 20 captured bytes but its block holds 8"),
            "{warnings:?}"
        );
        assert!(warnings[4].1.contains("simple packet block too short"), "{warnings:?}");
        // Stray bytes after the last block, and a block whose length runs
        // past the file or is below the 12-byte minimum.
        for (tail, says) in [
            (vec![1, 2, 3], "3 stray bytes"),
            (
                [&6u32.to_le_bytes()[..], &100u32.to_le_bytes(), &[0; 8]].concat(),
                "the file is truncated",
            ),
            (
                [&6u32.to_le_bytes()[..], &8u32.to_le_bytes(), &[0; 8]].concat(),
                "corrupt from here on",
            ),
        ] {
            let mut f = File::new();
            f.idb(1, 0, &[]).epb(0, 1, &[1; 14]);
            let at = f.0.len() as u64;
            f.0.extend_from_slice(&tail);
            let (packets, warnings) = f.read();
            assert_eq!(packets.len(), 1);
            assert_eq!(warnings.len(), 1);
            assert_eq!((warnings[0].0, warnings[0].2), (at, true), "{says}");
            assert!(warnings[0].1.contains(says), "{warnings:?}");
        }
    }

    /// A file is refused for its link type only if no interface described
    /// before its first packet has one Sluice decodes; other blocks before
    /// them are passed over.
    #[test]
    fn the_first_decodable_interface_decides() {
        let refused = |f: &File| match Reader::new(&f.0) {
            Err(HeaderError::LinkType(n)) => Some(n),
            _ => None,
        };
        let mut usb = File::new();
        usb.block(0x0bad, &[0; 8])
            .idb(189, 0, &[])
            .idb(220, 0, &[])
            .epb(0, 1, &[0; 8]);
        assert_eq!(refused(&usb), Some(189));
        let mut mixed = File::new();
        mixed.idb(189, 0, &[]).idb(1, 0, &[]).epb(1, 1, &[0; 14]);
        assert_eq!(refused(&mixed), None);
        let (packets, warnings) = mixed.read();
        assert_eq!(packets.len(), 1);
        assert!(warnings[0].1.contains("link type 189"), "{warnings:?}");
        // An Ethernet interface described only after the first packet does
        // not make the file readable.
        let mut late = File::new();
        late.idb(189, 0, &[]).epb(0, 1, &[0; 8]).idb(1, 0, &[]);
        assert_eq!(refused(&late), Some(189));
        // No interface at all: nothing to refuse.
        assert_eq!(refused(&File::new()), None);
    }

    /// Blocks passed over are counted: of a type Sluice does not read, an
    /// interface description too short to be one, packets of an interface
    /// whose link type it cannot decode. The reader ends at the file's end.
    #[test]
    fn skipped_blocks_are_counted() {
        let read = |f: &File| {
            let mut reader = Reader::new(&f.0).map_err(|_| "header").unwrap();
            let mut warnings = Warnings::default();
            let mut packets = 0;
            while reader.next(&mut warnings).is_some() {
                packets += 1;
            }
            (packets, reader.skipped_blocks(), reader.position())
        };
        let mut plain = File::new();
        plain.idb(1, 0, &[]).epb(0, 1, &[0; 14]);
        assert_eq!(read(&plain), (1, 0, plain.0.len() as u64));
        let mut f = File::new();
        f.block(0x0bad, &[]).block(INTERFACE_DESCRIPTION, &[1, 0, 0, 0]);
        f.idb(1, 0, &[]).idb(189, 0, &[]);
        f.epb(1, 1, &[0; 8]).epb(0, 2, &[0; 14]).block(0x0000_0bad, &[1, 2, 3]);
        let mut usb_simple = File::new();
        usb_simple
            .idb(189, 0, &[])
            .idb(1, 0, &[])
            .block(SIMPLE_PACKET, &[8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(read(&f), (1, 4, f.0.len() as u64));
        assert_eq!(read(&usb_simple), (0, 1, usb_simple.0.len() as u64));
    }

    /// The scan for a decodable interface goes past blocks of any length
    /// down to the 12-byte minimum (an empty body).
    #[test]
    fn the_scan_for_interfaces_passes_empty_blocks() {
        let mut f = File::new();
        f.block(0x0bad, &[]).idb(189, 0, &[]).epb(0, 1, &[0; 8]);
        assert!(matches!(Reader::new(&f.0), Err(HeaderError::LinkType(189))));
    }

    /// A second section whose byte-order magic is neither order stops the
    /// read, the warning pointing at the magic (8 bytes into the block).
    #[test]
    fn a_second_section_with_a_bad_magic() {
        let mut f = File::new();
        f.idb(1, 0, &[]).epb(0, 1, &[0; 14]);
        let at = f.0.len() as u64;
        f.block(
            SECTION_HEADER,
            &[1, 2, 3, 4, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        );
        let (packets, warnings) = f.read();
        assert_eq!(packets.len(), 1);
        assert_eq!((warnings[0].0, warnings[0].2), (at + 8, true));
    }

    /// Packet blocks exactly as long as their fixed fields and data: an
    /// enhanced packet of 16 bytes (no padding) and one of none, a simple
    /// packet of no data. A negative if_tsoffset moves the time back.
    #[test]
    fn blocks_with_nothing_to_spare() {
        let mut f = File::new();
        f.idb(1, 0, &option(OPT_IF_TSOFFSET, &(-100i64).to_le_bytes()));
        f.epb(0, 1_000_000_000, &[7; 16]).epb(0, 1_000_000_000, &[]);
        f.block(SIMPLE_PACKET, &60u32.to_le_bytes());
        let (packets, warnings) = f.read();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            packets,
            [
                (900_000_000_000, 20, vec![7; 16]),
                (900_000_000_000, 4, vec![]),
                (900_000_000_000, 60, vec![]),
            ]
        );
    }
}
