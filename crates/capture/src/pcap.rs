//! The classic libpcap format: a 24-byte file header, then records of a
//! 16-byte header and the captured bytes.

use sluice_wire::LinkType;

use crate::file::{HeaderError, MAX_WIRE_LEN, Prefetcher, RawPacket, Warnings, untrusted_wire_len};

/// No real capture has frames this large; a bigger length means the record
/// header is garbage, and everything after it is unreliable.
const MAX_RECORD: u32 = 64 << 20;

pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    prefetcher: Prefetcher,
    nanos: bool,
    big_endian: bool,
    link: LinkType,
    done: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], nanos: bool, big_endian: bool) -> Result<Self, HeaderError> {
        if bytes.len() < 24 {
            return Err(HeaderError::Bad {
                offset: bytes.len() as u64,
                reason: "file ends inside the 24-byte pcap header".into(),
            });
        }
        let mut reader = Reader {
            bytes,
            pos: 24,
            prefetcher: Prefetcher::default(),
            nanos,
            big_endian,
            link: LinkType::Ethernet,
            done: false,
        };
        let linktype = reader.u32(20);
        reader.link = LinkType::from_linktype(linktype).ok_or(HeaderError::LinkType(linktype))?;
        Ok(reader)
    }

    pub(crate) fn position(&self) -> u64 {
        self.pos as u64
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

    #[inline]
    pub(crate) fn next(&mut self, warnings: &mut Warnings) -> Option<RawPacket<'a>> {
        if self.done || self.pos >= self.bytes.len() {
            return None;
        }
        let at = self.pos;
        let remaining = self.bytes.len() - at;
        if remaining < 16 {
            warnings.push(
                at as u64,
                format!("file ends inside a record header ({remaining} stray bytes after the last complete record)"),
                true,
            );
            self.done = true;
            return None;
        }
        let seconds = self.u32(at) as u64;
        let fraction = self.u32(at + 4) as u64;
        let captured = self.u32(at + 8);
        let original = self.u32(at + 12);
        let mut captured = captured;
        if captured > MAX_RECORD || captured as usize > remaining - 16 {
            // A captured length beyond the wire length is impossible. When the
            // wire length fits, trust it as libpcap does and keep going;
            // otherwise the record header is garbage and so is the rest.
            if original < captured && original as usize <= remaining - 16 {
                warnings.push(
                    at as u64,
                    format!(
                        "record claims {captured} captured bytes of a {original}-byte frame; read {original} bytes"
                    ),
                    false,
                );
                captured = original;
            } else {
                warnings.push(
                    at as u64,
                    format!(
                        "record claims {captured} captured bytes but only {} remain: the file is truncated or corrupt from here on",
                        remaining - 16
                    ),
                    true,
                );
                self.done = true;
                return None;
            }
        }
        let wire_len = if original > MAX_WIRE_LEN || original < captured {
            warnings.push(at as u64, untrusted_wire_len(original, captured), false);
            captured
        } else {
            original
        };
        let data = &self.bytes[at + 16..at + 16 + captured as usize];
        self.pos = at + 16 + captured as usize;
        self.prefetcher.ahead(self.bytes, self.pos);
        let ts_ns = seconds.saturating_mul(1_000_000_000).saturating_add(if self.nanos {
            fraction
        } else {
            fraction.saturating_mul(1000)
        });
        Some(RawPacket {
            ts_ns,
            wire_len,
            data,
            link: self.link,
            offset: at as u64,
        })
    }
}
