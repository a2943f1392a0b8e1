//! Heroes of the Storm, Blizzard's game, on its UDP ports (1119, 1120,
//! 3724, 6113): datagrams of 20 to 122 bytes with `40 00` at offset 14,
//! and either a message type `03 00` or `34 00` at offset 2, or 14 zero
//! bytes (the keep-alive). The same test nDPI makes; the ports keep it from
//! matching the many binary protocols that share such bytes by chance.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Heroes_of_the_Storm",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const PORTS: [u16; 4] = [1119, 1120, 3724, 6113];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !PORTS.iter().any(|&p| pkt.has_port(p)) || !(20..=122).contains(&data.len()) {
        return Verdict::No;
    }
    let kind = &data[2..4];
    if data[14..16] == [0x40, 0x00] && (kind == [0x03, 0x00] || kind == [0x34, 0x00] || data[..14] == [0; 14]) {
        Verdict::Yes(Found::new("Heroes_of_the_Storm"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(server_port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (54598, server_port), data)
    }

    /// The client's first datagram in hots.pcapng.
    const FIRST: &str = "e65d3400972714f73f95aae03e3640001abc63b32ac9fda5";

    #[test]
    fn game_datagrams_on_its_ports() {
        assert_eq!(run(3724, &hex(FIRST)), Verdict::Yes(Found::new("Heroes_of_the_Storm")));
        let mut keep_alive = vec![0u8; 24];
        keep_alive[14] = 0x40;
        assert_eq!(run(1119, &keep_alive), Verdict::Yes(Found::new("Heroes_of_the_Storm")));
    }

    #[test]
    fn the_same_bytes_elsewhere_or_cut_are_not_it() {
        assert_eq!(run(4000, &hex(FIRST)), Verdict::No);
        assert_eq!(run(3724, &hex(FIRST)[..19]), Verdict::No);
        let mut other = hex(FIRST);
        other[2] = 0x35;
        assert_eq!(run(3724, &other), Verdict::No);
        let mut no_marker = hex(FIRST);
        no_marker[14] = 0x41;
        assert_eq!(run(3724, &no_marker), Verdict::No);
        assert_eq!(run(3724, &[0u8; 123]), Verdict::No);
    }
}
