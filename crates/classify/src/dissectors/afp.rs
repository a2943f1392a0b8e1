//! AFP, the Apple Filing Protocol, over its DSI session layer (TCP port 548): a
//! 16-byte DSI header of flags (0 request, 1 reply), a command 1..=8, request id,
//! error code or data offset, a total data length and a reserved zero word; the
//! header and its data must end on the stream head or be followed by another.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "AFP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[0, 1]),
        udp: ByteSet::NONE,
    },
    // DSI's flags (request or reply) and command.
    prefix: Prefix::is(&[Field::u8(1, 1, 8)]),
    inspect,
}];

const HEADER: usize = 16;
const MAX_DATA: u32 = 1 << 20;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let head_ok = |h: &[u8]| h.first().is_none_or(|&f| f <= 1) && h.get(1).is_none_or(|c| (1..=8).contains(c));
    if !head_ok(data) {
        return Verdict::No;
    }
    let (Some(len), Some(reserved)) = (be32(data, 8), be32(data, 12)) else {
        return Verdict::Maybe;
    };
    if reserved != 0 || len > MAX_DATA {
        return Verdict::No;
    }
    let end = HEADER + len as usize;
    match data.get(end..) {
        None => Verdict::Maybe,
        Some([]) => Verdict::Yes(Found::new("AFP")),
        Some(next) if head_ok(&next[..next.len().min(2)]) => Verdict::Yes(Found::new("AFP")),
        Some(_) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// DSICommand carrying a 6-byte AFP call, from afp.pcap.
    const COMMAND: &[u8] = &[
        0x00, 0x02, 0x22, 0xc6, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0x11, 0x00, 0x00, 0x02, 0x0e, 0x1c,
    ];

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (64987, 548), data)
    }

    #[test]
    fn dsi_command() {
        assert_eq!(run(COMMAND), Verdict::Yes(Found::new("AFP")));
        let mut two = COMMAND.to_vec();
        two.extend_from_slice(COMMAND);
        assert_eq!(run(&two), Verdict::Yes(Found::new("AFP")));
        assert_eq!(run(&COMMAND[..10]), Verdict::Maybe);
        assert_eq!(run(&COMMAND[..20]), Verdict::Maybe);
    }

    #[test]
    fn malformed() {
        let mut d = COMMAND.to_vec();
        d[0] = 2;
        assert_eq!(run(&d), Verdict::No);
        let mut d = COMMAND.to_vec();
        d[1] = 9;
        assert_eq!(run(&d), Verdict::No);
        let mut d = COMMAND.to_vec();
        d[15] = 1;
        assert_eq!(run(&d), Verdict::No);
        let mut d = COMMAND.to_vec();
        d.extend_from_slice(b"GET");
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1\r\n"), Verdict::No);
    }
}
