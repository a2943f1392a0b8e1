//! Valve's Steam client traffic on UDP. Steam (in-home streaming and LAN
//! discovery, port 27036): a datagram that starts with 0xFFFFFFFF and the
//! discovery magic 0x214C5FA0. SteamDatagramRelay (Steam Datagram Relay pings to
//! Valve's relays): message byte 0x01, a flags byte, then the tag `sdping`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "Steam",
        wants: Wants::Udp,
        first_byte: FirstByte::is(ByteSet::of(&[DISCOVERY[0]])),
        prefix: Prefix::ANY,
        inspect: inspect_discovery,
    },
    Dissector {
        name: "SteamDatagramRelay",
        wants: Wants::Udp,
        first_byte: FirstByte::is(ByteSet::of(&[RELAY_MESSAGE])),
        prefix: Prefix::ANY,
        inspect: inspect_relay,
    },
];

const DISCOVERY: &[u8] = &[0xff, 0xff, 0xff, 0xff, 0x21, 0x4c, 0x5f, 0xa0];
const RELAY_PING: &[u8] = b"sdping";
const RELAY_MESSAGE: u8 = 0x01;

fn inspect_discovery(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() > DISCOVERY.len() && data.starts_with(DISCOVERY) {
        Verdict::Yes(Found::new("Steam"))
    } else {
        Verdict::No
    }
}

fn inspect_relay(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.first() == Some(&RELAY_MESSAGE) && data.get(2..2 + RELAY_PING.len()) == Some(RELAY_PING) {
        Verdict::Yes(Found::new("SteamDatagramRelay"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn run(inspect: fn(&Packet, &mut Context) -> Verdict, data: &[u8]) -> Verdict {
        let mut tc = TestContext::new();
        inspect(
            &test_packet(Transport::Udp, Side::Up, 27036, 27036, data),
            &mut tc.ctx(),
        )
    }

    #[test]
    fn discovery() {
        let mut d = DISCOVERY.to_vec();
        d.extend_from_slice(&[0x16, 0, 0, 0, 0x08, 0xfc]);
        assert_eq!(run(inspect_discovery, &d), Verdict::Yes(Found::new("Steam")));
        assert_eq!(run(inspect_discovery, DISCOVERY), Verdict::No);
        assert_eq!(
            run(inspect_discovery, b"\xff\xff\xff\xffTSource Engine Query\0"),
            Verdict::No
        );
        assert_eq!(run(inspect_relay, &d), Verdict::No);
    }

    #[test]
    fn relay_ping() {
        let mut d = b"\x01\x81sdping".to_vec();
        d.resize(100, 0);
        assert_eq!(run(inspect_relay, &d), Verdict::Yes(Found::new("SteamDatagramRelay")));
        assert_eq!(run(inspect_relay, &d[..7]), Verdict::No);
        d[0] = 0x02;
        assert_eq!(run(inspect_relay, &d), Verdict::No);
        assert_eq!(run(inspect_discovery, &d), Verdict::No);
    }
}
