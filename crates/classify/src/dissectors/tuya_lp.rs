//! Tuya's local protocol (LAN control and discovery of Tuya smart devices, the
//! "55AA" framing of Tuya's embedded SDK `lan_protocol.h`): prefix 0x000055AA,
//! sequence number, command, and a 32-bit length counting the rest of the frame,
//! which ends with the suffix 0x0000AA55. Seen as UDP broadcasts (6666/6667) and
//! as TCP control sessions (6668); over TCP a frame cut short waits for more.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TuyaLP",
    wants: Wants::Both,
    // The prefix 0x000055aa.
    first_byte: FirstByte::is(ByteSet::of(&[0])),
    // The frame's prefix, 0x000055aa.
    prefix: Prefix::is(&[Field::byte(2, 0x55), Field::byte(3, 0xaa), Field::byte(1, 0)]),
    inspect,
}];

const PREFIX: u32 = 0x0000_55aa;
const SUFFIX: &[u8] = &[0x00, 0x00, 0xaa, 0x55];
const HEADER: usize = 16;
/// Return code or CRC plus the suffix at least.
const MIN_BODY: u32 = 8;
/// Tuya devices refuse frames larger than this.
const MAX_BODY: u32 = 0x1_0000;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.get(..4) != Some(&PREFIX.to_be_bytes()[..]) {
        // Over TCP a first segment shorter than the prefix may still grow into one.
        return match (pkt.transport, data.len() < 4 && PREFIX.to_be_bytes().starts_with(data)) {
            (Transport::Tcp, true) => Verdict::Maybe,
            _ => Verdict::No,
        };
    }
    let Some(body) = be32(data, 12) else {
        return short(pkt);
    };
    if !(MIN_BODY..=MAX_BODY).contains(&body) {
        return Verdict::No;
    }
    let end = HEADER + body as usize;
    match data.get(end - SUFFIX.len()..end) {
        Some(suffix) if suffix == SUFFIX && (pkt.transport == Transport::Tcp || end == data.len()) => {
            Verdict::Yes(Found::new("TuyaLP"))
        }
        Some(_) => Verdict::No,
        None => short(pkt),
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

    /// A discovery broadcast (command 0x13) with its encrypted body zeroed.
    fn discovery() -> Vec<u8> {
        let mut d = vec![0, 0, 0x55, 0xaa, 0, 0, 0, 0, 0, 0, 0, 0x13, 0, 0, 0, 0xac];
        d.resize(16 + 0xac - 4, 0x5a);
        d.extend_from_slice(SUFFIX);
        d
    }

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (49154, 6667), data)
    }

    #[test]
    fn udp_discovery() {
        assert_eq!(discovery().len(), 188);
        assert_eq!(run(Transport::Udp, &discovery()), Verdict::Yes(Found::new("TuyaLP")));
    }

    #[test]
    fn tcp_frame_grows() {
        let d = discovery();
        assert_eq!(run(Transport::Tcp, &d[..2]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &d[..100]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &d), Verdict::Yes(Found::new("TuyaLP")));
        assert_eq!(run(Transport::Udp, &d[..100]), Verdict::No);
    }

    #[test]
    fn wrong_suffix_or_length() {
        let mut d = discovery();
        let n = d.len();
        d[n - 1] = 0xaa;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
        let mut d = discovery();
        d[12] = 0x7f;
        assert_eq!(run(Transport::Tcp, &d), Verdict::No);
        let mut d = discovery();
        d[15] = 0;
        assert_eq!(run(Transport::Udp, &d), Verdict::No);
    }

    #[test]
    fn other_protocols() {
        assert_eq!(run(Transport::Tcp, b"GET / HTTP/1.1\r\n"), Verdict::No);
        assert_eq!(run(Transport::Udp, &[0u8; 32]), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[0x00, 0x01]), Verdict::No);
    }
}
