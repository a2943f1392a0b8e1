//! Numbers read out of packet and file bytes: the one reader of byte orders
//! for the decoder, the tunnels, the capture file readers and the
//! dissectors. Every read is bounds-checked (offsets near `usize::MAX`
//! included) and gives `None` past the end of the bytes.

/// A big-endian (network order) u16 at `at`.
#[inline]
pub fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(array(b, at)?))
}

/// A big-endian u24 at `at`, as TLS handshake lengths are.
#[inline]
pub fn be24(b: &[u8], at: usize) -> Option<u32> {
    let [x, y, z] = array(b, at)?;
    Some(u32::from_be_bytes([0, x, y, z]))
}

/// A big-endian u32 at `at`.
#[inline]
pub fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(array(b, at)?))
}

/// A big-endian u64 at `at`.
#[inline]
pub fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(array(b, at)?))
}

/// The byte order of a file whose header says which it is (pcap, pcapng).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    Big,
    Little,
}

impl ByteOrder {
    #[inline]
    pub fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let bytes = array(b, at)?;
        Some(match self {
            ByteOrder::Big => u16::from_be_bytes(bytes),
            ByteOrder::Little => u16::from_le_bytes(bytes),
        })
    }

    #[inline]
    pub fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let bytes = array(b, at)?;
        Some(match self {
            ByteOrder::Big => u32::from_be_bytes(bytes),
            ByteOrder::Little => u32::from_le_bytes(bytes),
        })
    }
}

/// The Internet checksum (RFC 1071) of `b`: the ones' complement of the
/// ones' complement sum of its big-endian 16-bit words, an odd last byte
/// padded with zero. Over an IPv4 header with its checksum field filled
/// in, 0 when the checksum is right.
pub fn internet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[inline]
fn array<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_order_is_most_significant_byte_first() {
        let b = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01];
        assert_eq!(be16(&b, 0), Some(0x1234));
        assert_eq!(be16(&b, 7), Some(0xf001));
        assert_eq!(be24(&b, 1), Some(0x34_5678));
        assert_eq!(be32(&b, 2), Some(0x5678_9abc));
        assert_eq!(be64(&b, 1), Some(0x3456_789a_bcde_f001));
        assert_eq!(ByteOrder::Big.u16(&b, 0), Some(0x1234));
        assert_eq!(ByteOrder::Little.u16(&b, 0), Some(0x3412));
        assert_eq!(ByteOrder::Big.u32(&b, 0), Some(0x1234_5678));
        assert_eq!(ByteOrder::Little.u32(&b, 0), Some(0x7856_3412));
    }

    #[test]
    fn the_internet_checksum_is_rfc_1071s() {
        // RFC 1071 §3's example: the words sum to 0xddf2.
        assert_eq!(
            internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        // An IPv4 header (RFC 791) with its checksum 0xb861 filled in.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&header), 0);
        let mut zeroed = header;
        zeroed[10..12].fill(0);
        assert_eq!(internet_checksum(&zeroed), 0xb861);
        // An odd length is padded with a zero byte.
        assert_eq!(internet_checksum(&[0x01]), !0x0100);
    }

    #[test]
    fn a_read_past_the_end_is_none() {
        let b = [1, 2, 3, 4];
        assert_eq!(be16(&b, 3), None);
        assert_eq!(be24(&b, 2), None);
        assert_eq!(be32(&b, 1), None);
        assert_eq!(be64(&b, 0), None);
        assert_eq!(be32(&b, usize::MAX - 1), None);
        assert_eq!(ByteOrder::Little.u32(&b, 1), None);
        assert_eq!(ByteOrder::Big.u16(&[], 0), None);
    }
}
