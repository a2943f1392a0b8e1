//! RTP and RTCP headers (RFC 3550 §5.1 and §6.4), read in place.

/// Why a UDP payload is not an RTP or RTCP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum RtpError {
    /// Fewer than the 12 bytes of a fixed header.
    #[error("shorter than an RTP header")]
    Short,
    /// The version bits are not 2.
    #[error("RTP version not 2")]
    Version,
    /// The CSRC list or the header extension runs past the packet.
    #[error("CSRC list or header extension past the end")]
    Header,
    /// The padding count is 0 or longer than the payload.
    #[error("bad padding")]
    Padding,
    /// An RTCP packet whose length field runs past the datagram, or whose
    /// report blocks do not fit it.
    #[error("bad RTCP length")]
    RtcpLength,
}

impl RtpError {
    pub const ALL: [RtpError; 5] = [
        RtpError::Short,
        RtpError::Version,
        RtpError::Header,
        RtpError::Padding,
        RtpError::RtcpLength,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RtpError::Short => "rtp_short",
            RtpError::Version => "rtp_version",
            RtpError::Header => "rtp_header",
            RtpError::Padding => "rtp_padding",
            RtpError::RtcpLength => "rtcp_length",
        }
    }

    pub fn index(self) -> usize {
        RtpError::ALL.iter().position(|&e| e == self).expect("listed")
    }
}

/// The fixed header of an RTP packet and where its payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpHeader {
    pub marker: bool,
    pub payload_type: u8,
    pub seq: u16,
    pub timestamp: u32,
    pub ssrc: u32,
    /// Offset of the payload in the packet (after CSRCs and extension).
    pub payload_offset: usize,
    /// Payload bytes, padding excluded.
    pub payload_len: usize,
}

/// Whether a UDP payload sharing a port with RTP is RTCP (RFC 5761 §4): the
/// second byte, read as a marker and a payload type, is 192 to 223.
pub fn is_rtcp(packet: &[u8]) -> bool {
    packet.len() >= 8 && packet[0] >> 6 == 2 && (192..=223).contains(&packet[1])
}

/// Reads the RTP header at the start of a UDP payload. `captured` bytes of
/// the packet are present; padding is read only when the whole packet is.
pub fn parse_rtp(packet: &[u8]) -> Result<RtpHeader, RtpError> {
    if packet.len() < 12 {
        return Err(RtpError::Short);
    }
    let b0 = packet[0];
    if b0 >> 6 != 2 {
        return Err(RtpError::Version);
    }
    let csrc = usize::from(b0 & 0x0f);
    let mut offset = 12 + 4 * csrc;
    if b0 & 0x10 != 0 {
        let ext = packet.get(offset..offset + 4).ok_or(RtpError::Header)?;
        offset += 4 + 4 * usize::from(u16::from_be_bytes([ext[2], ext[3]]));
    }
    if offset > packet.len() {
        return Err(RtpError::Header);
    }
    let mut payload_len = packet.len() - offset;
    if b0 & 0x20 != 0 {
        let padding = usize::from(packet[packet.len() - 1]);
        if padding == 0 || padding > payload_len {
            return Err(RtpError::Padding);
        }
        payload_len -= padding;
    }
    Ok(RtpHeader {
        marker: packet[1] & 0x80 != 0,
        payload_type: packet[1] & 0x7f,
        seq: u16::from_be_bytes([packet[2], packet[3]]),
        timestamp: u32::from_be_bytes([packet[4], packet[5], packet[6], packet[7]]),
        ssrc: u32::from_be_bytes([packet[8], packet[9], packet[10], packet[11]]),
        payload_offset: offset,
        payload_len,
    })
}

/// One reception report block of an SR or RR (RFC 3550 §6.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportBlock {
    /// The source reported on.
    pub ssrc: u32,
    /// Lost since the previous report, in 1/256ths.
    pub fraction_lost: u8,
    /// Cumulative packets lost (signed, 24 bits).
    pub cumulative_lost: i32,
    pub highest_seq: u32,
    /// Interarrival jitter, in timestamp units.
    pub jitter: u32,
    /// Middle 32 bits of the NTP timestamp of the last SR received.
    pub lsr: u32,
    /// Delay since that SR, in 1/65536 s.
    pub dlsr: u32,
}

/// What one RTCP packet of a compound datagram says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtcpPacket<'a> {
    /// A sender report: the sender, the middle 32 bits of its NTP
    /// timestamp, and report blocks.
    Sender {
        ssrc: u32,
        ntp_middle: u32,
        blocks: &'a [u8],
    },
    Receiver {
        ssrc: u32,
        blocks: &'a [u8],
    },
    /// SDES, BYE, APP, feedback, XR: not read.
    Other {
        packet_type: u8,
    },
}

/// The report blocks of an SR or RR, 24 bytes each.
pub fn report_blocks(blocks: &[u8]) -> impl Iterator<Item = ReportBlock> + '_ {
    blocks.chunks_exact(24).map(|b| {
        let word = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        // Sign-extend the 24-bit count.
        let lost = ((word(4) << 8) as i32) >> 8;
        ReportBlock {
            ssrc: word(0),
            fraction_lost: b[4],
            cumulative_lost: lost,
            highest_seq: word(8),
            jitter: word(12),
            lsr: word(16),
            dlsr: word(20),
        }
    })
}

/// The packets of a compound RTCP datagram, each checked against its
/// length field; an error ends the walk.
pub fn rtcp_packets(datagram: &[u8]) -> impl Iterator<Item = Result<RtcpPacket<'_>, RtpError>> {
    let mut rest = datagram;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || rest.len() < 4 {
            return None;
        }
        let one = (|| {
            if rest[0] >> 6 != 2 {
                return Err(RtpError::Version);
            }
            let count = usize::from(rest[0] & 0x1f);
            let packet_type = rest[1];
            let len = 4 * (usize::from(u16::from_be_bytes([rest[2], rest[3]])) + 1);
            let packet = rest.get(..len).ok_or(RtpError::RtcpLength)?;
            rest = &rest[len..];
            let word = |i: usize| u32::from_be_bytes([packet[i], packet[i + 1], packet[i + 2], packet[i + 3]]);
            Ok(match packet_type {
                200 => {
                    let blocks = packet.get(28..28 + 24 * count).ok_or(RtpError::RtcpLength)?;
                    RtcpPacket::Sender {
                        ssrc: word(4),
                        ntp_middle: word(10),
                        blocks,
                    }
                }
                201 => {
                    let blocks = packet.get(8..8 + 24 * count).ok_or(RtpError::RtcpLength)?;
                    RtcpPacket::Receiver { ssrc: word(4), blocks }
                }
                _ => RtcpPacket::Other { packet_type },
            })
        })();
        failed = one.is_err();
        Some(one)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_with_csrcs_an_extension_and_padding() {
        let mut p = vec![0xb1, 0x80 | 8, 0x12, 0x34, 0, 0, 0x01, 0x40, 0xde, 0xad, 0xbe, 0xef];
        p.extend_from_slice(&[0, 0, 0, 1]); // one CSRC
        p.extend_from_slice(&[0xbe, 0xde, 0, 1, 1, 2, 3, 4]); // a one-word extension
        p.extend_from_slice(&[9; 160]);
        p.extend_from_slice(&[0, 0, 3]); // three bytes of padding
        let h = parse_rtp(&p).unwrap();
        assert!(h.marker);
        assert_eq!(
            (h.payload_type, h.seq, h.timestamp, h.ssrc),
            (8, 0x1234, 320, 0xdeadbeef)
        );
        assert_eq!((h.payload_offset, h.payload_len), (24, 160));
        assert!(!is_rtcp(&p));
    }

    #[test]
    fn broken_headers_are_named() {
        assert_eq!(parse_rtp(&[0x80; 11]), Err(RtpError::Short));
        assert_eq!(parse_rtp(&[0x40; 12]), Err(RtpError::Version));
        assert_eq!(
            parse_rtp(&[0x8f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(RtpError::Header)
        );
        let mut padded = vec![0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 9];
        assert_eq!(parse_rtp(&padded), Err(RtpError::Padding));
        padded[13] = 0;
        assert_eq!(parse_rtp(&padded), Err(RtpError::Padding));
    }

    #[test]
    fn a_compound_sender_report() {
        let mut sr = vec![0x81, 200, 0, 12];
        sr.extend_from_slice(&0x1111_1111u32.to_be_bytes());
        sr.extend_from_slice(&[0, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0]); // NTP
        sr.extend_from_slice(&[0; 12]); // RTP ts, packets, octets
        sr.extend_from_slice(&0x2222_2222u32.to_be_bytes());
        sr.extend_from_slice(&[5, 0xff, 0xff, 0xfe]); // fraction 5, cumulative -2
        sr.extend_from_slice(&100u32.to_be_bytes());
        sr.extend_from_slice(&40u32.to_be_bytes());
        sr.extend_from_slice(&7u32.to_be_bytes());
        sr.extend_from_slice(&65536u32.to_be_bytes());
        sr.extend_from_slice(&[0x81, 202, 0, 1, 0, 0, 0, 0]); // SDES, not read
        assert!(is_rtcp(&sr));
        let packets: Vec<_> = rtcp_packets(&sr).collect();
        assert_eq!(packets.len(), 2);
        let Ok(RtcpPacket::Sender {
            ssrc,
            ntp_middle,
            blocks,
        }) = packets[0]
        else {
            panic!("{packets:?}");
        };
        assert_eq!((ssrc, ntp_middle), (0x1111_1111, 0xaabb_ccdd));
        let block: Vec<_> = report_blocks(blocks).collect();
        assert_eq!(block[0].ssrc, 0x2222_2222);
        assert_eq!((block[0].fraction_lost, block[0].cumulative_lost), (5, -2));
        assert_eq!((block[0].jitter, block[0].lsr, block[0].dlsr), (40, 7, 65536));
        assert_eq!(packets[1], Ok(RtcpPacket::Other { packet_type: 202 }));
        assert_eq!(
            rtcp_packets(&[0x81, 201, 0, 9, 0, 0, 0, 0]).next(),
            Some(Err(RtpError::RtcpLength))
        );
    }
}
