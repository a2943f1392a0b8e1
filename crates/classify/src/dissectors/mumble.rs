//! Mumble's UDP ping (port 64738), as the Mumble protocol documentation describes the
//! connectionless ping servers answer before any TLS connection: the request is 12
//! bytes, a 32-bit zero and an 8-byte identifier the client chooses; the reply is 24,
//! the server's version as four bytes (zero, major, minor, patch), the identifier
//! echoed, then the users connected, the users allowed and the bandwidth allowed per
//! user, each a 32-bit big-endian number. The reply decides: its version's first byte
//! zero and major non-zero, no more users than allowed, a bandwidth given. A request
//! alone could be any 12 bytes that open with four zeros, so it is only waited through.
//!
//! Mumble's voice datagrams are encrypted (OCB-AES128) from their first byte, and its
//! control channel, on TCP 64738 too, is TLS from the first byte: its Version message
//! travels inside the TLS records, where no dissector reads it (the TLS dissector names
//! the flow).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Mumble",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 64738;
const REQUEST: usize = 12;
const REPLY: usize = 24;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if pkt.server_port != PORT || data.first() != Some(&0) {
        return Verdict::No;
    }
    match pkt.side {
        Side::Up if data.len() == REQUEST && be32(data, 0) == Some(0) => Verdict::Maybe,
        Side::Down if data.len() == REPLY && is_reply(data) => Verdict::Yes(Found::new("Mumble")),
        _ => Verdict::No,
    }
}

fn is_reply(data: &[u8]) -> bool {
    let (Some(users), Some(allowed), Some(bandwidth)) = (be32(data, 12), be32(data, 16), be32(data, 20)) else {
        return false;
    };
    data[1] != 0 && users <= allowed && bandwidth != 0
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    const IDENT: [u8; 8] = [0, 0, 0x01, 0x8c, 0x3b, 0x2a, 0x19, 0x08];

    fn request() -> Vec<u8> {
        let mut d = vec![0; 4];
        d.extend_from_slice(&IDENT);
        d
    }

    /// A 1.4.287 server with 3 of 100 users and 558,000 bit/s each.
    fn reply() -> Vec<u8> {
        let mut d = vec![0, 1, 4, 0xff];
        d.extend_from_slice(&IDENT);
        d.extend_from_slice(&3u32.to_be_bytes());
        d.extend_from_slice(&100u32.to_be_bytes());
        d.extend_from_slice(&558_000u32.to_be_bytes());
        d
    }

    fn run(side: Side, server_port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (51000, server_port), data)
    }

    #[test]
    fn ping_and_reply() {
        assert_eq!(run(Side::Up, PORT, &request()), Verdict::Maybe);
        assert_eq!(run(Side::Down, PORT, &reply()), Verdict::Yes(Found::new("Mumble")));
    }

    #[test]
    fn near_misses() {
        // Off the port.
        assert_eq!(run(Side::Down, 64739, &reply()), Verdict::No);
        assert_eq!(run(Side::Up, 64739, &request()), Verdict::No);
        // A request of another length or type, a reply a byte off.
        assert_eq!(run(Side::Up, PORT, &request()[..11]), Verdict::No);
        let mut typed = request();
        typed[3] = 1;
        assert_eq!(run(Side::Up, PORT, &typed), Verdict::No);
        let mut longer = reply();
        longer.push(0);
        assert_eq!(run(Side::Down, PORT, &longer), Verdict::No);
        // A version whose first byte is set or whose major is zero.
        let mut version = reply();
        version[0] = 1;
        assert_eq!(run(Side::Down, PORT, &version), Verdict::No);
        let mut major = reply();
        major[1] = 0;
        assert_eq!(run(Side::Down, PORT, &major), Verdict::No);
        // More users than allowed, no bandwidth.
        let mut users = reply();
        users[12..16].copy_from_slice(&101u32.to_be_bytes());
        assert_eq!(run(Side::Down, PORT, &users), Verdict::No);
        let mut bandwidth = reply();
        bandwidth[20..24].copy_from_slice(&[0; 4]);
        assert_eq!(run(Side::Down, PORT, &bandwidth), Verdict::No);
        // The reply's shape sent by the client.
        assert_eq!(run(Side::Up, PORT, &reply()), Verdict::No);
    }
}
