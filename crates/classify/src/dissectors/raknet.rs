//! RakNet (the UDP game transport of Minecraft Bedrock, Roblox and others; wiki.vg
//! "Raknet Protocol"). Offline messages carry the 16-byte OFFLINE_MESSAGE_DATA_ID
//! magic at a place fixed by their id (pings, pongs, open-connection requests and
//! replies); connected traffic is a frame set (0x84..=0x8d) whose frames must
//! tile the datagram, or an ACK/NACK (0xc0/0xa0) whose records must. Frame sets
//! and NACKs are believed from the second datagram of a flow on.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RakNet",
    wants: Wants::Udp,
    // The message id.
    first_byte: FirstByte::is(
        ByteSet::of(&[0x01, 0x02, 0x05, 0x06, 0x07, 0x08, 0x19, 0x1c, 0xa0, 0xc0]).union(ByteSet::range(0x84, 0x8d)),
    ),
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: &[u8] = &[
    0x00, 0xff, 0xff, 0x00, 0xfe, 0xfe, 0xfe, 0xfe, 0xfd, 0xfd, 0xfd, 0xfd, 0x12, 0x34, 0x56, 0x78,
];
const MAX_FRAMES: usize = 64;
const MAX_RECORDS: u16 = 256;
/// RakNet never negotiates an MTU above Ethernet's.
const MAX_MTU: u16 = 1500;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(&id) = data.first() else {
        return Verdict::No;
    };
    let magic_at = |at: usize| data.get(at..at + MAGIC.len()) == Some(MAGIC);
    let found = match id {
        // Unconnected ping (and open-connections-only ping): id, time, magic, guid.
        0x01 | 0x02 => data.len() == 33 && magic_at(9),
        // Unconnected pong: id, time, guid, magic, then a length-prefixed MOTD.
        0x1c => magic_at(17) && be16(data, 33).is_some_and(|n| usize::from(n) + 35 == data.len()),
        // Open connection request 1: id, magic, protocol version, MTU padding.
        0x05 => magic_at(1) && data.get(17).is_some_and(|&v| v <= 20),
        // Open connection reply 1: id, magic, server guid, security flag, MTU.
        0x06 => magic_at(1) && data.len() == 28 && data[25] <= 1 && be16(data, 26).is_some_and(|m| m <= MAX_MTU),
        // Open connection request 2 and reply 2 carry an address (v4 or v6).
        0x07 => magic_at(1) && address_len(data, 17).is_some_and(|a| data.len() == 17 + a + 2 + 8),
        0x08 => magic_at(1) && address_len(data, 25).is_some_and(|a| data.len() == 25 + a + 2 + 1),
        // Incompatible protocol version: id, version, magic, guid.
        0x19 => data.len() == 26 && magic_at(2),
        // 0x80..=0x83 are left out: RTP version 2 starts the same way, and RakNet
        // peers set the needs-B-and-AS flag (0x04) on their frame sets.
        0x84..=0x8d if frames_tile(data) => return connected(pkt),
        // A NACK could be padded RTP; an ACK (version bits 3) could not.
        0xa0 if records_tile(data) => return connected(pkt),
        0xc0 => records_tile(data),
        _ => false,
    };
    if found {
        Verdict::Yes(Found::new("RakNet"))
    } else {
        Verdict::No
    }
}

/// A well-formed connected datagram decides only once the flow has history.
fn connected(pkt: &Packet) -> Verdict {
    if pkt.index + pkt.other_index > 0 {
        Verdict::Yes(Found::new("RakNet"))
    } else {
        Verdict::Maybe
    }
}

/// Bytes of a RakNet system address at `at`: version byte, address, port (v6 adds
/// family, flow info and scope id).
fn address_len(data: &[u8], at: usize) -> Option<usize> {
    match data.get(at)? {
        4 => Some(1 + 4 + 2),
        6 => Some(1 + 2 + 2 + 4 + 16 + 4),
        _ => None,
    }
}

/// Frame set: id, 24-bit sequence number, then frames (flags, bit length,
/// reliability fields, optional fragment header, body) that end exactly at the end.
fn frames_tile(data: &[u8]) -> bool {
    let mut at = 4;
    for _ in 0..MAX_FRAMES {
        let (Some(&flags), Some(bits)) = (data.get(at), be16(data, at + 1)) else {
            return false;
        };
        let size = usize::from(bits).div_ceil(8);
        if flags & 0x0f != 0 || size == 0 {
            return false;
        }
        let reliability = flags >> 5;
        let mut header = 3;
        if matches!(reliability, 2 | 3 | 4 | 6 | 7) {
            header += 3;
        }
        if matches!(reliability, 1 | 4) {
            header += 3;
        }
        if matches!(reliability, 1 | 3 | 4 | 7) {
            header += 4;
        }
        if flags & 0x10 != 0 {
            header += 10;
        }
        at += header + size;
        if at >= data.len() {
            return at == data.len();
        }
    }
    false
}

/// ACK/NACK: id, record count, then ranges (0x00, two 24-bit numbers) or singles
/// (0x01, one 24-bit number) that end exactly at the end.
fn records_tile(data: &[u8]) -> bool {
    let Some(count) = be16(data, 1) else {
        return false;
    };
    if count == 0 || count > MAX_RECORDS {
        return false;
    }
    let mut at = 3;
    for _ in 0..count {
        at += match data.get(at) {
            Some(0x00) => 7,
            Some(0x01) => 4,
            _ => return false,
        };
    }
    at == data.len()
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn run(data: &[u8], index: u32) -> Verdict {
        let mut tc = TestContext::new();
        let mut pkt = test_packet(Transport::Udp, Side::Up, 60689, 19132, data);
        pkt.index = index;
        inspect(&pkt, &mut tc.ctx())
    }

    fn with_magic(id: u8, before: usize, after: &[u8]) -> Vec<u8> {
        let mut d = vec![id];
        d.resize(1 + before, 0x11);
        d.extend_from_slice(MAGIC);
        d.extend_from_slice(after);
        d
    }

    #[test]
    fn open_connection_exchange_from_raknet_pcap() {
        let mut request = with_magic(0x05, 0, &[0x06]);
        request.resize(1464, 0);
        assert_eq!(run(&request, 0), Verdict::Yes(Found::new("RakNet")));
        let reply = with_magic(
            0x06,
            0,
            &[0, 0x05, 0x91, 0xa5, 0x36, 0x05, 0x1d, 0xf6, 0x00, 0x05, 0xd4],
        );
        assert_eq!(run(&reply, 0), Verdict::Yes(Found::new("RakNet")));
        let request2 = with_magic(
            0x07,
            0,
            &[
                4, 0x6b, 0x66, 0xdc, 0x32, 0xea, 0x7c, 0x02, 0x40, 0, 0, 0, 0, 0, 0x49, 0x0f, 0x02,
            ],
        );
        assert_eq!(request2.len(), 34);
        assert_eq!(run(&request2, 0), Verdict::Yes(Found::new("RakNet")));
    }

    #[test]
    fn unconnected_ping_and_pong() {
        let ping = with_magic(0x01, 8, &[0; 8]);
        assert_eq!(run(&ping, 0), Verdict::Yes(Found::new("RakNet")));
        let mut pong = with_magic(0x1c, 16, &[0x00, 0x03]);
        pong.extend_from_slice(b"MCP");
        assert_eq!(run(&pong, 0), Verdict::Yes(Found::new("RakNet")));
        pong.push(0);
        assert_eq!(run(&pong, 0), Verdict::No);
    }

    #[test]
    fn frame_set_needs_history() {
        // From raknet.pcap: a frame set holding one unreliable 17-byte frame.
        let frame = [
            0x84, 0x02, 0x00, 0x00, 0x00, 0x00, 0x88, 0x03, 0, 0, 0, 0, 0, 0x15, 0xe9, 0x5e, 0, 0, 0, 0x13, 0x0c, 0x20,
            0x15, 0x46,
        ];
        assert_eq!(run(&frame, 0), Verdict::Maybe);
        assert_eq!(run(&frame, 3), Verdict::Yes(Found::new("RakNet")));
        assert_eq!(run(&frame[..20], 3), Verdict::No);
        let mut longer = frame.to_vec();
        longer.push(0);
        assert_eq!(run(&longer, 3), Verdict::No);
    }

    #[test]
    fn ack_records() {
        let ack = [0xc0, 0x00, 0x01, 0x01, 0x05, 0x00, 0x00];
        assert_eq!(run(&ack, 0), Verdict::Yes(Found::new("RakNet")));
        let nack = [0xa0, 0x00, 0x01, 0x01, 0x05, 0x00, 0x00];
        assert_eq!(run(&nack, 0), Verdict::Maybe);
        assert_eq!(run(&nack, 1), Verdict::Yes(Found::new("RakNet")));
        let range = [0xc0, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x00];
        assert_eq!(run(&range, 1), Verdict::Yes(Found::new("RakNet")));
        assert_eq!(run(&[0xc0, 0xff, 0xff, 0x01, 0x05, 0x00, 0x00], 1), Verdict::No);
        assert_eq!(run(&[0xc0, 0x00, 0x02, 0x01, 0x05, 0x00, 0x00], 1), Verdict::No);
    }

    #[test]
    fn not_raknet() {
        assert_eq!(run(&[0x05; 40], 0), Verdict::No);
        assert_eq!(run(&with_magic(0x06, 0, &[0; 3]), 0), Verdict::No);
        assert_eq!(run(&[0x84], 2), Verdict::No);
        // RTP version 2 that happens to tile as a frame set.
        let mut rtp = vec![0x80, 0x66, 0x55, 0xc2, 0x00, 0x00, 0x10];
        rtp.resize(4 + 3 + 2, 0);
        assert_eq!(run(&rtp, 2), Verdict::No);
        assert_eq!(run(&[0x84, 0, 0, 0, 0x00, 0x00, 0x00], 2), Verdict::No);
        assert_eq!(run(&[0x16, 0x03, 0x01, 0x00], 0), Verdict::No);
        assert_eq!(run(&[], 0), Verdict::No);
    }
}
