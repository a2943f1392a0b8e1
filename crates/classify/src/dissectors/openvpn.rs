//! OpenVPN over UDP, and over TCP with its 2-byte packet length: the hard reset that opens a
//! session (opcode 7, 10 or legacy 1 from the client; 8 or legacy 2 from the server, key id 0),
//! read in each of its layouts — bare, after a tls-auth HMAC (MD5 to SHA-512), or tls-crypt's
//! packet id and time before the tag. A plain server reset acknowledges packet 0 and echoes
//! the client's session id before its own packet id 0. Over TCP, the client's next packet
//! repeating its session id also counts.

use super::{
    ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Transport, Verdict, Wants, be16, be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "OpenVPN",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::ANY,
        udp: OPCODES,
    },
    // Over TCP, a packet length that holds a reset or a control packet at
    // least, before an opcode this dissector reads, key id 0.
    prefix: Prefix {
        tcp: &[
            Field::u16(0, CLIENT_BARE as u16, u16::MAX),
            Field::masked(2, 1, 0x07, 0, 0),
            Field::u8(2, CLIENT_RESETS[0] << 3, CLIENT_RESETS[2] << 3),
        ],
        udp: &[],
    },
    inspect,
}];

const CLIENT_RESETS: [u8; 3] = [1, 7, 10];
const SERVER_RESETS: [u8; 2] = [2, 8];
const P_CONTROL: u8 = 4;
const P_ACK: u8 = 5;
/// tls-auth HMAC sizes: MD5, SHA-1, SHA-224, SHA-256, SHA-384, SHA-512.
const HMACS: [usize; 6] = [16, 20, 28, 32, 48, 64];
/// Opcode and session id.
const HEADER: usize = 9;
/// Packet id and time of the replay protection, and tls-crypt's tag.
const REPLAY: usize = 8;
const TLS_CRYPT_TAG: usize = 32;
/// A bare client reset: header, an empty ack array, message packet id 0.
const CLIENT_BARE: usize = HEADER + 1 + 4;
/// A bare server reset: header, an ack of packet 0 for the client's session, packet id 0.
const SERVER_BARE: usize = HEADER + 1 + 4 + 8 + 4;

/// The first bytes of the packets `judge` reads: those opcodes, key id 0.
const OPCODES: ByteSet = ByteSet::of(&[
    CLIENT_RESETS[0] << 3,
    CLIENT_RESETS[1] << 3,
    CLIENT_RESETS[2] << 3,
    SERVER_RESETS[0] << 3,
    SERVER_RESETS[1] << 3,
    P_CONTROL << 3,
    P_ACK << 3,
]);

fn opcode(packet: &[u8]) -> Option<u8> {
    let first = *packet.first()?;
    (first & 0x07 == 0).then_some(first >> 3)
}

/// Replay protection at `at`: a packet id that has barely started counting and a time from
/// 2010 to 2100.
fn replay_at(packet: &[u8], at: usize) -> bool {
    let (Some(id), Some(time)) = (be32(packet, at), be32(packet, at + 4)) else {
        return false;
    };
    (1..=0xFFFF).contains(&id) && (0x4B3D_3B00..0xF486_5700).contains(&time)
}

/// Whether `packet` is a reset in the bare layout or a tls-auth one (any HMAC size, then the
/// replay protection): `tail` bytes after all that, which `check_tail` accepts.
fn tls_auth(packet: &[u8], tail: usize, check_tail: impl Fn(&[u8]) -> bool) -> bool {
    let tail_ok = packet.len() >= tail && check_tail(&packet[packet.len() - tail..]);
    let bare = packet.len() == HEADER + tail;
    let hmac = HMACS
        .iter()
        .any(|&h| packet.len() == HEADER + h + REPLAY + tail && replay_at(packet, HEADER + h));
    tail_ok && (bare || hmac)
}

fn tls_crypt(packet: &[u8]) -> bool {
    packet.len() > HEADER + REPLAY + TLS_CRYPT_TAG && replay_at(packet, HEADER)
}

fn client_reset(packet: &[u8]) -> bool {
    let empty_ack = |tail: &[u8]| tail.iter().all(|&b| b == 0);
    tls_auth(packet, CLIENT_BARE - HEADER, empty_ack) || tls_crypt(packet)
}

fn server_reset(packet: &[u8]) -> bool {
    // One ack, of packet id 0, for a session id; then the server's own packet id 0.
    let ack = |tail: &[u8]| tail[..5] == [1, 0, 0, 0, 0] && tail[13..] == [0, 0, 0, 0];
    tls_auth(packet, SERVER_BARE - HEADER, ack) || tls_crypt(packet)
}

/// One packet, the first of its direction (`first`) or a later one in this flow. Resets only
/// count from their own side, but a flow may be seen from the server's reset on when the
/// client's packets went by another path.
fn judge(packet: &[u8], side: Side, first: bool, flow_first: bool) -> Verdict {
    let found = Verdict::Yes(Found::new("OpenVPN"));
    let client = side == Side::Up;
    match opcode(packet) {
        Some(op) if client && CLIENT_RESETS.contains(&op) && client_reset(packet) => found,
        Some(op) if (!client || flow_first) && SERVER_RESETS.contains(&op) && server_reset(packet) => found,
        // A reset in a layout not read here (tls-crypt-v2 wraps a key into it): the answer
        // may tell.
        Some(op) if client && first && flow_first && CLIENT_RESETS.contains(&op) && packet.len() > CLIENT_BARE => {
            Verdict::Maybe
        }
        Some(P_CONTROL | P_ACK) if !flow_first && packet.len() >= HEADER + 5 => Verdict::Maybe,
        _ => Verdict::No,
    }
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let flow_first = pkt.index == 0 && pkt.other_index == 0;
    match pkt.transport {
        Transport::Udp => judge(pkt.data, pkt.side, pkt.index == 0, flow_first),
        Transport::Tcp => inspect_stream(pkt.data, pkt.side, pkt.other_index == 0),
    }
}

/// A TCP stream head: the first framed packet, and the one after it.
fn inspect_stream(data: &[u8], side: Side, flow_first: bool) -> Verdict {
    let frame = |at: usize| {
        let len = usize::from(be16(data, at)?);
        data.get(at + 2..at + 2 + len).map(|p| (p, at + 2 + len))
    };
    let Some((first, next)) = frame(0) else {
        // Cut short: a reset's frame is at least 16 bytes, and its opcode is known early.
        let len_ok = be16(data, 0).is_none_or(|len| usize::from(len) >= CLIENT_BARE);
        let reset = |op: u8| CLIENT_RESETS.contains(&op) || SERVER_RESETS.contains(&op);
        let op_ok = data.get(2..3).is_none_or(|first| opcode(first).is_some_and(reset));
        return if len_ok && op_ok { Verdict::Maybe } else { Verdict::No };
    };
    match judge(first, side, true, flow_first) {
        Verdict::Maybe => match frame(next) {
            // The client's next packet carries its session id again.
            Some((second, _)) => match opcode(second) {
                Some(P_CONTROL | P_ACK) if second.get(1..HEADER) == first.get(1..HEADER) => {
                    Verdict::Yes(Found::new("OpenVPN"))
                }
                _ => Verdict::No,
            },
            None => Verdict::Maybe,
        },
        verdict => verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(transport: Transport, side: Side, index: u32, other_index: u32, data: &[u8]) -> Verdict {
        let mut pkt = test_packet(transport, side, 60201, 1194, data);
        pkt.index = index;
        pkt.other_index = other_index;
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    fn udp(index: u32, other_index: u32, data: &[u8]) -> Verdict {
        run(Transport::Udp, Side::Up, index, other_index, data)
    }

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("OpenVPN"))
    }

    // openvpn.pcap: bare resets, and tls-auth (SHA-1 HMAC) ones.
    const CLIENT: &str = "38334857703d96db390000000000";
    const SERVER: &str = "40d31c3a6964602fa00100000000334857703d96db3900000000";
    const CLIENT_AUTH: &str = "38b02ccff1b5f0174fc091666e3b124bada39173317b939722d1fe63be0000000157a1c15f0000000000";
    const SERVER_AUTH: &str = "40f77fc2efdbe23f57dec4c8d5654d0723bf8c0be54138563270cfae130000000157a1c15f01
        00000000b02ccff1b5f0174f00000000";

    #[test]
    fn resets() {
        for (side, reset) in [
            (Side::Up, CLIENT),
            (Side::Down, SERVER),
            (Side::Up, CLIENT_AUTH),
            (Side::Down, SERVER_AUTH),
        ] {
            assert_eq!(run(Transport::Udp, side, 0, 0, &hex(reset)), yes(), "{reset}");
        }
        // Each reset from the wrong side.
        assert_eq!(run(Transport::Udp, Side::Down, 0, 1, &hex(CLIENT_AUTH)), Verdict::No);
        assert_eq!(udp(0, 1, &hex(SERVER_AUTH)), Verdict::No);
        // openvpn.pcap: the client's side went unseen, the flow starts with the server's reset.
        assert_eq!(udp(0, 0, &hex(SERVER)), yes());
        // iphone.pcap: a DNS answer from port 53 whose ID, counts and "play" read like a
        // tls-crypt client reset.
        let dns = hex("080b8180000100050000000004706c6179066974756e6573056170706c6503636f6d0000010001c00c");
        let mut answer = dns.clone();
        answer.resize(199, 0);
        assert_eq!(run(Transport::Udp, Side::Down, 0, 1, &answer), Verdict::No);
        // openvpn.pcap over TCP 443: tls-crypt, packet id 1 and time right after the session id.
        let crypt = hex(
            "382a56d979d99eccf40000000163cf4ff5b89824b0aa4e93c089c1e24af5443766b5cab18c23c17d51081eb196a2
             29085eec179d0d88",
        );
        assert_eq!(udp(0, 0, &crypt), yes());
    }

    #[test]
    fn tls_crypt_v2_waits_for_the_server() {
        // openvpn-tlscrypt.pcap: the client's V3 reset is not read; the server's tls-crypt reply is.
        let mut v3 = hex("50aae06512392a3d710a010001625a9e9785ead7700d5d18dac8f1eb9b317b46a2fc3519cab585d134");
        v3.resize(353, 0x5a);
        assert_eq!(udp(0, 0, &v3), Verdict::Maybe);
        let mut reply = hex("4053c96dd083724fd200000001625a9e9721ea783a859f9c2d8edd04f1e1c9f78f4493a69dfacd5c");
        reply.resize(72, 0x5a);
        assert_eq!(run(Transport::Udp, Side::Down, 0, 1, &reply), yes());
        // A later V3 packet from the client is no reset of a new flow.
        assert_eq!(udp(1, 1, &v3), Verdict::No);
    }

    #[test]
    fn tcp_frames() {
        // openvpn_nohmac_tcp.pcapng: the bare reset framed; cut short it waits.
        let framed = hex("000e38507a28a78275788d0000000000");
        assert_eq!(run(Transport::Tcp, Side::Up, 0, 0, &framed), yes());
        assert_eq!(run(Transport::Tcp, Side::Up, 0, 0, &framed[..7]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, Side::Up, 0, 0, &framed[..1]), Verdict::Maybe);
        // An unread reset followed by an ACK with the same session id.
        let mut head = vec![0, 20];
        head.extend_from_slice(&hex("50507a28a78275788d0a0100015a5a5a5a5a5a5a"));
        let ack = hex("28507a28a78275788d01000000009ad747beb24d8a1b");
        head.extend_from_slice(&[0, ack.len() as u8]);
        assert_eq!(run(Transport::Tcp, Side::Up, 0, 0, &head), Verdict::Maybe);
        head.extend_from_slice(&ack);
        assert_eq!(run(Transport::Tcp, Side::Up, 1, 0, &head), yes());
        let last = head.len() - ack.len() + 3;
        head[last] ^= 0xff;
        assert_eq!(run(Transport::Tcp, Side::Up, 1, 0, &head), Verdict::No);
    }

    #[test]
    fn broken_resets() {
        // The client's ack array not empty, the server acking packet 1, data opcodes, key id 1,
        // a replay time in 1970.
        let mut ack = hex(CLIENT);
        ack[9] = 1;
        let mut acked = hex(SERVER_AUTH);
        acked[41] = 1;
        let mut data = hex(CLIENT);
        data[0] = 0x48;
        let mut key = hex(CLIENT);
        key[0] = 0x39;
        let mut old = hex(CLIENT_AUTH);
        old[33] = 0;
        for (i, p) in [ack, data, key].iter().enumerate() {
            assert_eq!(udp(0, 0, p), Verdict::No, "case {i}");
        }
        assert_eq!(run(Transport::Udp, Side::Down, 0, 1, &acked), Verdict::No);
        assert_eq!(run(Transport::Udp, Side::Down, 0, 1, &hex(SERVER_AUTH)), yes());
        // The 1970 one is a reset in an unknown layout at best.
        assert_eq!(udp(0, 0, &old), Verdict::Maybe);
        assert_eq!(udp(1, 0, &old), Verdict::No);
    }

    #[test]
    fn other_protocols_are_not_openvpn() {
        let stun = hex("000100002112a4425343644b3631746a5657366b");
        let tls = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
        let http = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        for data in [&stun[..], tls, http, &[0x38][..], &[]] {
            assert_eq!(udp(0, 0, data), Verdict::No);
            assert_eq!(
                run(Transport::Tcp, Side::Up, 0, 0, data),
                if data.len() < 2 { Verdict::Maybe } else { Verdict::No }
            );
        }
        // A wireguard initiation's first bytes.
        assert_eq!(udp(0, 0, &hex("01000000d837d0305fcec7c8e5c8e2e3f7989eef")), Verdict::No);
    }

    #[test]
    fn hostile_openvpn() {
        // Frame lengths past the head, a zero-length frame, a huge reset.
        assert_eq!(
            run(Transport::Tcp, Side::Up, 0, 0, &[0xff, 0xff, 0x38, 0, 0]),
            Verdict::Maybe
        );
        assert_eq!(run(Transport::Tcp, Side::Up, 0, 0, &[0, 0, 0x38]), Verdict::No);
        let mut huge = hex(CLIENT);
        huge.resize(4000, 0);
        assert_eq!(udp(0, 0, &huge), Verdict::Maybe);
        for len in 0..14 {
            assert_eq!(udp(2, 2, &hex(CLIENT)[..len]), Verdict::No);
        }
    }
}
