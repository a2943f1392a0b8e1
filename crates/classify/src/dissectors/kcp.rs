//! KCP, the ARQ protocol of skywind3000/kcp, from its segment header: conversation
//! id, command (PUSH 81, ACK 82, WASK 83, WINS 84), fragment count, window,
//! timestamp, sequence and una numbers and a 32-bit little-endian data length, all
//! little-endian. A datagram may pack several segments of one conversation; they
//! must tile it exactly. Over TCP the stream head must be such segments too.

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "KCP",
    wants: Wants::Both,
    first_byte: FirstByte::ANY,
    // The first segment's command.
    prefix: Prefix::is(&[Field::u8(4, 81, 84)]),
    inspect,
}];

const HEADER: usize = 24;
const MAX_SEGMENTS: usize = 32;
/// Larger than any MTU-bound segment, also when carried over TCP.
const MAX_DATA: u32 = 1 << 16;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(conv) = data.get(..4) else {
        return short(pkt);
    };
    let mut at = 0;
    for _ in 0..MAX_SEGMENTS {
        let Some(header) = data.get(at..at + HEADER) else {
            // A cut header is judged on what it shows: a TCP stream head
            // that already breaks the format will not mend with more bytes.
            let partial = &data[at..];
            let breaks = partial.iter().zip(conv).any(|(a, b)| a != b)
                || partial.get(4).is_some_and(|cmd| !(81..=84).contains(cmd));
            return if at == data.len() || pkt.transport == Transport::Udp {
                done(pkt, at)
            } else if breaks {
                Verdict::No
            } else {
                Verdict::Maybe
            };
        };
        if &header[..4] != conv || !(81..=84).contains(&header[4]) {
            return Verdict::No;
        }
        let len = u32::from_le_bytes([header[20], header[21], header[22], header[23]]);
        if len > MAX_DATA || (header[4] != 81 && len != 0) {
            return Verdict::No;
        }
        at += HEADER + len as usize;
        if at >= data.len() {
            return done(pkt, at);
        }
    }
    Verdict::No
}

fn done(pkt: &Packet, end: usize) -> Verdict {
    match (end == pkt.data.len(), pkt.transport) {
        (true, _) => Verdict::Yes(Found::new("KCP")),
        (false, Transport::Tcp) if end > pkt.data.len() => Verdict::Maybe,
        _ => Verdict::No,
    }
}

fn short(pkt: &Packet) -> Verdict {
    if pkt.transport == Transport::Tcp {
        Verdict::Maybe
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    fn segment(cmd: u8, data_len: u32) -> Vec<u8> {
        let mut d = vec![0x0a, 0x00, 0x00, 0x00, cmd, 0x02, 0x80, 0x00];
        d.extend_from_slice(&[0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        d.extend_from_slice(&data_len.to_le_bytes());
        d.resize(HEADER + data_len as usize, 0x5a);
        d
    }

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (47356, 8000), data)
    }

    #[test]
    fn a_cut_header_that_already_breaks_the_format_is_refused() {
        assert_eq!(run(Transport::Tcp, &[0; 10]), Verdict::No);
        // An ACK, then the start of a segment of another conversation.
        let mut packed = segment(82, 0);
        packed.extend_from_slice(&segment(81, 10)[..8]);
        assert_eq!(run(Transport::Tcp, &packed), Verdict::Maybe);
        packed[24] ^= 1;
        assert_eq!(run(Transport::Tcp, &packed), Verdict::No);
    }

    #[test]
    fn push_and_ack() {
        assert_eq!(run(Transport::Udp, &segment(81, 1448)), Verdict::Yes(Found::new("KCP")));
        assert_eq!(run(Transport::Udp, &segment(82, 0)), Verdict::Yes(Found::new("KCP")));
        let mut packed = segment(82, 0);
        packed.extend_from_slice(&segment(81, 10));
        assert_eq!(run(Transport::Udp, &packed), Verdict::Yes(Found::new("KCP")));
    }

    #[test]
    fn lengths_must_tile() {
        let d = segment(81, 100);
        assert_eq!(run(Transport::Udp, &d[..d.len() - 1]), Verdict::No);
        let mut longer = d.clone();
        longer.push(0);
        assert_eq!(run(Transport::Udp, &longer), Verdict::No);
        assert_eq!(run(Transport::Tcp, &d[..50]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &d[..10]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &d), Verdict::Yes(Found::new("KCP")));
    }

    #[test]
    fn not_kcp() {
        let mut other_conv = segment(82, 0);
        let mut second = segment(82, 0);
        second[0] = 0x0b;
        other_conv.extend_from_slice(&second);
        assert_eq!(run(Transport::Udp, &other_conv), Verdict::No);
        assert_eq!(run(Transport::Udp, &segment(85, 0)), Verdict::No);
        let mut ack_with_data = segment(82, 4);
        ack_with_data[4] = 82;
        assert_eq!(run(Transport::Udp, &ack_with_data), Verdict::No);
        let mut huge = segment(81, 0);
        huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(run(Transport::Tcp, &huge), Verdict::No);
        assert_eq!(run(Transport::Udp, &[0u8; 24]), Verdict::No);
        assert_eq!(run(Transport::Udp, b"GET / HTTP/1.1\r\n\r\n"), Verdict::No);
    }
}
