//! RTP and RTCP (RFC 3550) over UDP, and over TCP with RFC 4571 framing. RTP: version 2, an
//! assigned static or a dynamic payload type, non-zero CSRCs, the CSRC list and header
//! extension inside the packet. RTCP: version 2, a first packet of type 200-207 whose length
//! fits its report count and the datagram (the rest of a compound may be SRTCP-encrypted).
//! One packet proves little: over UDP the dissectors wait for the third valid packet of a
//! direction; over TCP for two framed RTP packets of one SSRC with advancing sequence numbers
//! (or two RTCP packets).

use super::{
    ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be16, be32,
};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "RTP",
        wants: Wants::Both,
        first_byte: FirstByte {
            tcp: ByteSet::ANY,
            udp: RTP_VERSION_2,
        },
        prefix: TCP_FRAME,
        inspect: inspect_rtp,
    },
    Dissector {
        name: "RTCP",
        wants: Wants::Both,
        first_byte: FirstByte {
            tcp: ByteSet::ANY,
            udp: RTP_VERSION_2,
        },
        prefix: TCP_FRAME,
        inspect: inspect_rtcp,
    },
];

/// Packets a UDP direction must have had before its current one for a `Yes`.
const UDP_EVIDENCE: u32 = 2;
/// RFC 4571 frames of a TCP stream head looked at.
const MAX_FRAMES: usize = 16;
/// How far the sequence number may move between two framed packets of one stream.
const MAX_SEQ_STEP: u16 = 64;

/// Over TCP, an RFC 4571 frame long enough for RTP or RTCP, of version 2.
const TCP_FRAME: Prefix = Prefix {
    tcp: &[Field::u16(0, 8, u16::MAX), Field::masked(2, 1, 0xc0, 0x80, 0x80)],
    udp: &[],
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Rtp { ssrc: u32, seq: u16 },
    Rtcp,
    Other,
}

/// IANA's static payload types (RFC 3551 and later) and the dynamic range.
fn known_payload_type(pt: u8) -> bool {
    matches!(pt, 0 | 2..=18 | 25 | 26 | 28 | 31..=34 | 96..=127)
}

/// The first bytes `classify` reads as RTP or RTCP: version 2.
const RTP_VERSION_2: ByteSet = ByteSet::range(0x80, 0xbf);

fn classify(p: &[u8]) -> Kind {
    let (Some(&first), Some(&second)) = (p.first(), p.get(1)) else {
        return Kind::Other;
    };
    if first & 0xC0 != 0x80 {
        return Kind::Other;
    }
    if is_rtcp(p) {
        return Kind::Rtcp;
    }
    let csrcs = usize::from(first & 0x0F);
    // A CSRC names a contributing source by its SSRC, a random number: zero means padding or
    // counters of some other protocol.
    let named = (0..csrcs).all(|i| be32(p, 12 + 4 * i).is_some_and(|csrc| csrc != 0));
    let mut header = 12 + 4 * csrcs;
    if first & 0x10 != 0 {
        header = match be16(p, header + 2) {
            Some(words) => header + 4 + 4 * usize::from(words),
            None => return Kind::Other,
        };
    }
    match (known_payload_type(second & 0x7F), be16(p, 2), be32(p, 8)) {
        (true, Some(seq), Some(ssrc)) if named && header <= p.len() => Kind::Rtp { ssrc, seq },
        _ => Kind::Other,
    }
}

/// An RTP packet by the checks `classify` makes (for the RTP a tunnel or an encapsulation
/// carries).
pub(super) fn is_rtp_packet(p: &[u8]) -> bool {
    matches!(classify(p), Kind::Rtp { .. })
}

/// The first RTCP packet must be a report or one of the RFC 5506 reduced-size types, long
/// enough for its count. What follows it is not checked: SRTCP encrypts it.
pub(super) fn is_rtcp(p: &[u8]) -> bool {
    let (Some(&first), Some(&kind), Some(words)) = (p.first(), p.get(1), be16(p, 2)) else {
        return false;
    };
    let count = usize::from(first & 0x1F);
    let words = usize::from(words);
    let long_enough = match kind {
        200 => words >= 6 + 6 * count,
        201 => words > 6 * count,
        202 => count > 0 && words >= 2 * count,
        203 => words >= count,
        204..=206 => words >= 2,
        207 => words >= 1,
        _ => false,
    };
    let len = 4 * (words + 1);
    long_enough && len <= p.len()
}

/// Ports RTP does not use: the well-known range, and mDNS, LLMNR, OMRON FINS and Ethereum,
/// whose packets can look alike.
fn unlikely_ports(pkt: &Packet) -> bool {
    let odd = |port: u16| port < 1024 || matches!(port, 5353 | 5355 | 9600 | 30303);
    odd(pkt.client_port) || odd(pkt.server_port)
}

/// The complete RFC 4571 frames at the start of a TCP stream head; `Err` when a frame is too
/// short to be RTP or RTCP, or one cut short already shows it is not version 2.
fn frames(data: &[u8]) -> Result<impl Iterator<Item = &[u8]>, ()> {
    let mut rest = data;
    let mut out = [&data[..0]; MAX_FRAMES];
    let mut n = 0;
    while n < MAX_FRAMES {
        let Some(len) = be16(rest, 0).map(usize::from) else {
            break;
        };
        if len < 8 {
            return Err(());
        }
        let Some(frame) = rest.get(2..2 + len) else {
            if rest.get(2).is_some_and(|&first| first & 0xC0 != 0x80) {
                return Err(());
            }
            break;
        };
        out[n] = frame;
        n += 1;
        rest = &rest[2 + len..];
    }
    Ok(out.into_iter().take(n))
}

/// What the framed packets of a TCP stream head show: whether all are RTP or RTCP, how many
/// RTCP, and whether two RTP packets in a row belong to one stream.
struct Stream {
    valid: bool,
    rtcp: usize,
    rtp_pair: bool,
}

fn stream(data: &[u8]) -> Stream {
    let mut s = Stream {
        valid: true,
        rtcp: 0,
        rtp_pair: false,
    };
    let Ok(frames) = frames(data) else {
        s.valid = false;
        return s;
    };
    let mut last = None;
    for frame in frames {
        match classify(frame) {
            Kind::Rtp { ssrc, seq } => {
                if let Some((last_ssrc, last_seq)) = last {
                    let step = seq.wrapping_sub(last_seq);
                    s.rtp_pair |= last_ssrc == ssrc && (1..=MAX_SEQ_STEP).contains(&step);
                }
                last = Some((ssrc, seq));
            }
            Kind::Rtcp => s.rtcp += 1,
            Kind::Other => {
                s.valid = false;
                break;
            }
        }
    }
    s
}

fn inspect_rtp(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if unlikely_ports(pkt) {
        return Verdict::No;
    }
    match pkt.transport {
        Transport::Udp => match classify(pkt.data) {
            Kind::Rtp { .. } if pkt.index >= UDP_EVIDENCE => Verdict::Yes(Found::new("RTP")),
            Kind::Rtp { .. } | Kind::Rtcp => Verdict::Maybe,
            Kind::Other => Verdict::No,
        },
        Transport::Tcp => match stream(pkt.data) {
            Stream { valid: false, .. } => Verdict::No,
            Stream { rtp_pair: true, .. } => Verdict::Yes(Found::new("RTP")),
            Stream { .. } => Verdict::Maybe,
        },
    }
}

/// Claims flows whose first packets are all RTCP; RTP arriving later relabels the flow, as the
/// two are often multiplexed on one port (RFC 5761).
fn inspect_rtcp(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if unlikely_ports(pkt) {
        return Verdict::No;
    }
    match pkt.transport {
        Transport::Udp => match classify(pkt.data) {
            Kind::Rtcp if pkt.index >= UDP_EVIDENCE => Verdict::Yes(Found::new("RTCP").more()),
            Kind::Rtp { .. } if pkt.index >= UDP_EVIDENCE => Verdict::Yes(Found::new("RTP")),
            Kind::Rtcp | Kind::Rtp { .. } => Verdict::Maybe,
            Kind::Other => Verdict::No,
        },
        Transport::Tcp => match stream(pkt.data) {
            Stream { valid: false, .. } => Verdict::No,
            Stream { rtp_pair: true, .. } => Verdict::Yes(Found::new("RTP")),
            Stream { rtcp: 2.., .. } => Verdict::Yes(Found::new("RTCP").more()),
            Stream { .. } => Verdict::Maybe,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(d: usize, transport: Transport, index: u32, data: &[u8]) -> Verdict {
        let mut pkt = test_packet(transport, Side::Up, 30000, 40392, data);
        pkt.index = index;
        (DISSECTORS[d].inspect)(&pkt, &mut TestContext::new().ctx())
    }

    // sip.pcap: G.711 A-law (PT 8) from 192.168.1.2:30000, header and a few payload bytes.
    const PCMA: &str = "80086fae000004d83796cb71d5d5d5d5d5d5d5d5";
    // wa_voice.pcap: an RTCP sender report whose later packets are SRTCP-encrypted.
    const SR: &str = "81c8001287fab2d7dce32d6e6fae8f09c523d77e362f6cd859b50503cb5cd20af6518777a8c381d4
        770a691fb2a07097e5dc970e74755bff9aaee28ed717dbbeb64a8648ea2615b2532f6d38c21d3eef";

    #[test]
    fn rtp_needs_three_packets() {
        let p = hex(PCMA);
        assert_eq!(run(0, Transport::Udp, 0, &p), Verdict::Maybe);
        assert_eq!(run(0, Transport::Udp, 1, &p), Verdict::Maybe);
        assert_eq!(run(0, Transport::Udp, 2, &p), Verdict::Yes(Found::new("RTP")));
        // rtp.pcapng: Opus (PT 111) with one CSRC; discord.pcap: a one-byte-header extension
        // (0xBEDE) is walked.
        let csrc = hex("816fcdd21e5131ffb80974d80000011c480be455bf14987c");
        assert_eq!(run(0, Transport::Udp, 5, &csrc), Verdict::Yes(Found::new("RTP")));
        let ext = hex("9078301138e2c8e30000ace3bede0001d8e3207b3e32276c");
        assert_eq!(run(0, Transport::Udp, 5, &ext), Verdict::Yes(Found::new("RTP")));
    }

    #[test]
    fn rtcp_compound() {
        let sr = hex(SR);
        assert_eq!(classify(&sr), Kind::Rtcp);
        assert_eq!(run(1, Transport::Udp, 0, &sr), Verdict::Maybe);
        assert_eq!(run(1, Transport::Udp, 2, &sr), Verdict::Yes(Found::new("RTCP").more()));
        // The RTP dissector keeps waiting through RTCP; RTCP hands over to RTP.
        assert_eq!(run(0, Transport::Udp, 4, &sr), Verdict::Maybe);
        assert_eq!(run(1, Transport::Udp, 4, &hex(PCMA)), Verdict::Yes(Found::new("RTP")));
        // sip.pcap: a plain sender report, SDES and BYE compound.
        let compound = hex(
            "80c800063796cb7142c907ca5efac603000024c3000000090000060c81ca000b3796cb71011d3131383934323937
             2d3434333261396638403139322e3136382e312e3206055349505053000081cb00063796cb711073657373696f
             6e2073687574646f776e000000",
        );
        assert_eq!(classify(&compound), Kind::Rtcp);
        // The same sender report claiming one report block it has no room for.
        let mut short = compound.clone();
        short[0] = 0x81;
        assert_eq!(classify(&short), Kind::Other);
        // Its length pointing past the datagram.
        assert_eq!(classify(&compound[..24]), Kind::Other);
    }

    #[test]
    fn tcp_framing() {
        // rtp.pcapng: RFC 4571 framed A-law packets of one SSRC, trimmed to 16-byte frames.
        let mut head = Vec::new();
        for seq in [0xc623u16, 0xc624] {
            head.extend_from_slice(&[0x00, 0x10, 0x80, 0x08]);
            head.extend_from_slice(&seq.to_be_bytes());
            head.extend_from_slice(&hex("6448eca900000000d5d5d5d5"));
        }
        assert_eq!(run(0, Transport::Tcp, 0, &head[..20]), Verdict::Maybe);
        assert_eq!(run(0, Transport::Tcp, 0, &head), Verdict::Yes(Found::new("RTP")));
        assert_eq!(run(1, Transport::Tcp, 0, &head), Verdict::Yes(Found::new("RTP")));
        // Another SSRC in the second frame, or the same sequence number, prove nothing.
        let mut other = head.clone();
        other[18 + 10] ^= 1;
        assert_eq!(run(0, Transport::Tcp, 0, &other), Verdict::Maybe);
        let mut same = head.clone();
        same[18 + 5] = 0x23;
        assert_eq!(run(0, Transport::Tcp, 0, &same), Verdict::Maybe);
        // A frame too short for any RTP or RTCP packet; the start of an HTTP request.
        assert_eq!(run(0, Transport::Tcp, 0, &[0, 3, 0x80, 0, 0]), Verdict::No);
        assert_eq!(run(0, Transport::Tcp, 0, b"GET / HTTP/1.1\r\n"), Verdict::No);
        assert_eq!(run(1, Transport::Tcp, 0, b"GET / HTTP/1.1\r\n"), Verdict::No);
    }

    #[test]
    fn other_protocols_are_not_rtp() {
        let dns = hex("12340100000100000000000003777777076578616d706c6503636f6d0000010001");
        let stun = hex("000100002112a4425343644b3631746a5657366b");
        let quic = hex("c30000000108010203040506070800004420");
        for data in [&dns[..], &stun, &quic, b"\x80", b"GET / HTTP/1.1\r\n\r\n"] {
            for d in 0..2 {
                assert_eq!(run(d, Transport::Udp, 5, data), Verdict::No);
            }
        }
        // Version 2 with an unassigned payload type (20) or a reserved RTCP type (199).
        assert_eq!(
            run(0, Transport::Udp, 5, &hex("80146fae000004d83796cb71d5d5")),
            Verdict::No
        );
        assert_eq!(run(1, Transport::Udp, 5, &hex("80c70001000000000000")), Verdict::No);
        // Valid RTP on a well-known port.
        let mut pkt = test_packet(Transport::Udp, Side::Up, 40000, 53, &dns);
        let p = hex(PCMA);
        pkt.data = &p;
        pkt.index = 5;
        assert_eq!(inspect_rtp(&pkt, &mut TestContext::new().ctx()), Verdict::No);
    }

    #[test]
    fn hostile_rtp() {
        // raknet.pcap: four "CSRCs", two of them zero.
        assert_eq!(
            classify(&hex("840000004000900000000900000000490f027c000000000015e93b00")),
            Kind::Other
        );
        // Fifteen CSRCs or an extension longer than the packet.
        assert_eq!(classify(&hex("8f086fae000004d83796cb71d5d5d5d5")), Kind::Other);
        assert_eq!(classify(&hex("90086fae000004d83796cb71bedeffff00")), Kind::Other);
        assert_eq!(classify(&hex("90086fae000004d83796cb71bede")), Kind::Other);
        // RTCP lengths past the end.
        assert_eq!(classify(&hex("80c8ffff1111111122222222")), Kind::Other);
        assert_eq!(classify(&hex("80c9")), Kind::Other);
        // A TCP head of frames whose length field claims the maximum.
        let mut head = vec![0xff, 0xff];
        head.extend_from_slice(&hex(PCMA));
        assert_eq!(run(0, Transport::Tcp, 0, &head), Verdict::Maybe);
        // Many tiny RTCP BYE frames: only MAX_FRAMES are looked at.
        let tiny: Vec<u8> = std::iter::repeat_n(hex("000881cb000111111111"), 100)
            .flatten()
            .collect();
        assert_eq!(run(0, Transport::Tcp, 0, &tiny), Verdict::Maybe);
        assert_eq!(
            run(1, Transport::Tcp, 0, &tiny),
            Verdict::Yes(Found::new("RTCP").more())
        );
        for len in 0..12 {
            assert_eq!(run(0, Transport::Udp, 5, &hex(PCMA)[..len]), Verdict::No);
        }
    }
}
