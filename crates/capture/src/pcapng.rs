//! pcapng: sections of blocks, several interfaces each with its own link
//! type and timestamp resolution.

use sluice_wire::LinkType;

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

    fn u16(&self, at: usize) -> u16 {
        let b = [self.bytes[at], self.bytes[at + 1]];
        if self.big_endian {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }

    #[inline]
    fn u32(&self, at: usize) -> u32 {
        let b: [u8; 4] = self.bytes[at..at + 4].try_into().expect("4 bytes");
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
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
