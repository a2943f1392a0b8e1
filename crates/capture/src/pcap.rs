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
    /// Nanoseconds in a unit of the timestamps' fraction: 1 or 1,000.
    fraction_ns: u64,
    big_endian: bool,
    link: LinkType,
    done: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], nanos: bool, big_endian: bool) -> Result<Self, HeaderError> {
        let Some(header) = bytes.first_chunk::<24>() else {
            return Err(HeaderError::Bad {
                offset: bytes.len() as u64,
                reason: "file ends inside the 24-byte pcap header".into(),
            });
        };
        let linktype = word(header[20..].first_chunk().expect("four bytes"), big_endian);
        Ok(Reader {
            bytes,
            pos: 24,
            prefetcher: Prefetcher::default(),
            fraction_ns: if nanos { 1 } else { 1000 },
            big_endian,
            link: LinkType::from_linktype(linktype).ok_or(HeaderError::LinkType(linktype))?,
            done: false,
        })
    }

    pub(crate) fn position(&self) -> u64 {
        self.pos as u64
    }

    /// Inlined into the one caller, the files' reader, whose loop it is;
    /// what the usual record does not need is out of line.
    #[inline(always)]
    pub(crate) fn next(&mut self, warnings: &mut Warnings) -> Option<RawPacket<'a>> {
        let at = self.pos;
        let record = self.bytes.get(at..).unwrap_or_default();
        let (header, rest) = match record.split_first_chunk::<16>() {
            Some(split) if !self.done => split,
            _ => return self.no_header(record.len(), warnings),
        };
        let seconds = word(header[..4].first_chunk().expect("four bytes"), self.big_endian);
        let fraction = word(header[4..8].first_chunk().expect("four bytes"), self.big_endian);
        let captured = word(header[8..12].first_chunk().expect("four bytes"), self.big_endian);
        let original = word(header[12..].first_chunk().expect("four bytes"), self.big_endian);
        let (captured, wire_len) = if captured <= MAX_RECORD
            && captured as usize <= rest.len()
            && captured <= original
            && original <= MAX_WIRE_LEN
        {
            (captured, original)
        } else {
            self.odd_lengths(captured, original, rest.len(), warnings)?
        };
        let data = &rest[..captured as usize];
        self.pos = at + 16 + captured as usize;
        self.prefetcher.ahead(self.bytes, self.pos);
        // Neither overflows: seconds and fraction are below 2^32.
        let ts_ns = seconds as u64 * 1_000_000_000 + fraction as u64 * self.fraction_ns;
        Some(RawPacket {
            ts_ns,
            wire_len,
            data,
            link: self.link,
            offset: at as u64,
        })
    }

    /// The captured and wire lengths of a record whose lengths do not add
    /// up (`remaining` bytes follow its header), said in warnings; none if
    /// the record header is garbage, which ends the read.
    #[cold]
    fn odd_lengths(
        &mut self,
        mut captured: u32,
        original: u32,
        remaining: usize,
        warnings: &mut Warnings,
    ) -> Option<(u32, u32)> {
        let at = self.pos as u64;
        if captured > MAX_RECORD || captured as usize > remaining {
            // A captured length beyond the wire length is impossible. When the
            // wire length fits, trust it as libpcap does and keep going;
            // otherwise the record header is garbage and so is the rest.
            if original < captured && original as usize <= remaining {
                warnings.push(
                    at,
                    format!(
                        "record claims {captured} captured bytes of a {original}-byte frame; read {original} bytes"
                    ),
                    false,
                );
                captured = original;
            } else {
                warnings.push(
                    at,
                    format!(
                        "record claims {captured} captured bytes but only {remaining} remain: the file is truncated or corrupt from here on"
                    ),
                    true,
                );
                self.done = true;
                return None;
            }
        }
        let wire_len = if original > MAX_WIRE_LEN || original < captured {
            warnings.push(at, untrusted_wire_len(original, captured), false);
            captured
        } else {
            original
        };
        Some((captured, wire_len))
    }

    /// No whole record header at the reader's position: the end of the
    /// file, a stop, or a header cut short by the file's end (`remaining`
    /// stray bytes).
    #[cold]
    fn no_header(&mut self, remaining: usize, warnings: &mut Warnings) -> Option<RawPacket<'a>> {
        if !self.done && remaining > 0 {
            warnings.push(
                self.pos as u64,
                format!("file ends inside a record header ({remaining} stray bytes after the last complete record)"),
                true,
            );
            self.done = true;
        }
        None
    }
}

/// A header word in the file's byte order.
#[inline(always)]
fn word(bytes: &[u8; 4], big_endian: bool) -> u32 {
    if big_endian {
        u32::from_be_bytes(*bytes)
    } else {
        u32::from_le_bytes(*bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pcap file (the libpcap format: a 24-byte header, then records of
    /// seconds, fraction, captured and original lengths and the bytes) in
    /// either byte order.
    fn file(big_endian: bool, linktype: u32, records: &[(u32, u32, u32, u32, &[u8])]) -> Vec<u8> {
        let word = |w: u32| if big_endian { w.to_be_bytes() } else { w.to_le_bytes() };
        let mut f = word(0xa1b2_c3d4).to_vec();
        f.extend_from_slice(&if big_endian { [0, 2, 0, 4] } else { [2, 0, 4, 0] });
        for w in [0, 0, 65_535, linktype] {
            f.extend_from_slice(&word(w));
        }
        for &(seconds, fraction, captured, original, data) in records {
            for w in [seconds, fraction, captured, original] {
                f.extend_from_slice(&word(w));
            }
            f.extend_from_slice(data);
        }
        f
    }

    type Read = (Vec<(u64, u32, usize, u64)>, Vec<(u64, bool)>, u64);

    /// Time, wire length, captured length and offset of each packet; each
    /// warning's offset and whether it stopped the read; where the reader
    /// stopped.
    fn read(bytes: &[u8], nanos: bool, big_endian: bool) -> Read {
        let mut reader = Reader::new(bytes, nanos, big_endian).map_err(|_| "header").unwrap();
        let mut warnings = Warnings::default();
        let mut packets = Vec::new();
        while let Some(p) = reader.next(&mut warnings) {
            assert_eq!(p.link, LinkType::Ethernet);
            packets.push((p.ts_ns, p.wire_len, p.data.len(), p.offset));
        }
        let said = warnings.kept.iter().map(|w| (w.offset, w.fatal)).collect();
        (packets, said, reader.position())
    }

    #[test]
    fn records_in_both_byte_orders_and_resolutions() {
        for big_endian in [false, true] {
            let f = file(
                big_endian,
                1,
                &[(7, 250_000, 4, 60, &[1, 2, 3, 4]), (8, 1, 2, 2, &[5, 6])],
            );
            let (packets, warnings, at) = read(&f, false, big_endian);
            assert_eq!(packets, [(7_250_000_000, 60, 4, 24), (8_000_001_000, 2, 2, 44)]);
            assert!(warnings.is_empty());
            assert_eq!(at, f.len() as u64);
            let (packets, _, _) = read(&f, true, big_endian);
            assert_eq!(packets[0].0, 7_000_250_000, "the fraction in nanoseconds");
        }
    }

    #[test]
    fn headers_too_short_or_of_an_unknown_link_type() {
        let f = file(false, 1, &[]);
        assert!(matches!(
            Reader::new(&f[..23], false, false),
            Err(HeaderError::Bad { offset: 23, .. })
        ));
        assert!(Reader::new(&f, false, false).is_ok());
        let usb = file(false, 189, &[]);
        assert!(matches!(
            Reader::new(&usb, false, false),
            Err(HeaderError::LinkType(189))
        ));
    }

    /// A wire length below the captured one is a writer's bug: the larger
    /// counts. A captured length past the file is recovered from the wire
    /// length when that one fits (and is smaller), and stops the read
    /// otherwise; 15 bytes after the last record stop it too.
    #[test]
    fn lengths_that_do_not_add_up() {
        let f = file(false, 1, &[(1, 0, 4, 2, &[1, 2, 3, 4])]);
        assert_eq!(read(&f, false, false).0, [(1_000_000_000, 4, 4, 24)]);
        // Claims 100 captured bytes of a 4-byte frame: 4 are read, and the
        // next record follows them.
        let f = file(false, 1, &[(1, 0, 100, 4, &[1, 2, 3, 4]), (2, 0, 1, 1, &[9])]);
        let (packets, warnings, _) = read(&f, false, false);
        assert_eq!(packets, [(1_000_000_000, 4, 4, 24), (2_000_000_000, 1, 1, 44)]);
        assert_eq!(warnings, [(24, false)]);
        // The wire length fits exactly.
        let f = file(false, 1, &[(1, 0, 100, 2, &[1, 2])]);
        assert_eq!(read(&f, false, false).0, [(1_000_000_000, 2, 2, 24)]);
        // Neither length fits: the rest is garbage.
        for (captured, original) in [(100, 200), (100, 3), (3, 3)] {
            let f = file(false, 1, &[(1, 0, captured, original, &[1, 2])]);
            let (packets, warnings, _) = read(&f, false, false);
            assert!(packets.is_empty(), "{captured} {original}");
            assert_eq!(warnings, [(24, true)]);
        }
        // Exactly the bytes left, then a header cut short.
        let mut f = file(false, 1, &[(1, 0, 2, 2, &[1, 2])]);
        assert_eq!(read(&f, false, false).1, []);
        f.extend_from_slice(&[0; 15]);
        let (packets, warnings, _) = read(&f, false, false);
        assert_eq!((packets.len(), warnings), (1, vec![(42, true)]));
        f.push(0);
        let (packets, warnings, _) = read(&f, false, false);
        assert_eq!((packets.len(), warnings), (2, vec![]));
    }

    /// No real frame is 64 MiB: a larger captured length is garbage even
    /// when the file is long enough to hold it.
    #[test]
    fn records_up_to_64_mib() {
        let big = vec![0u8; (MAX_RECORD + 1) as usize];
        let f = file(false, 1, &[(1, 0, MAX_RECORD + 1, 60, &big)]);
        let (packets, warnings, _) = read(&f, false, false);
        assert_eq!((packets[0].1, packets[0].2), (60, 60));
        assert_eq!(warnings[0], (24, false));
        // The same length on the wire: nothing to recover it from.
        let f = file(false, 1, &[(1, 0, MAX_RECORD + 1, MAX_RECORD + 1, &big)]);
        let (packets, warnings, _) = read(&f, false, false);
        assert_eq!((packets.len(), warnings), (0, vec![(24, true)]));
        // 64 MiB itself is read, with a warning that its wire length is
        // over 256 KiB, which no link carries.
        let f = file(false, 1, &[(1, 0, MAX_RECORD, MAX_RECORD, &big[1..])]);
        let (packets, warnings, _) = read(&f, false, false);
        assert_eq!((packets[0].2, warnings), (MAX_RECORD as usize, vec![(24, false)]));
    }
}
