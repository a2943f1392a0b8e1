//! Cisco Meraki devices' cloud tunnel to the Meraki dashboard (UDP port 7351):
//! datagrams start with the magic 0xFEF72891, a 16-bit message type and a 16-bit
//! length equal to the datagram's.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MerakiCloud",
    wants: Wants::Udp,
    first_byte: FirstByte::is(ByteSet::of(&[MAGIC[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: &[u8] = &[0xfe, 0xf7, 0x28, 0x91];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.starts_with(MAGIC) && be16(data, 6).is_some_and(|len| usize::from(len) == data.len()) {
        Verdict::Yes(Found::new("MerakiCloud"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (47301, 7351), data)
    }

    #[test]
    fn tunnel_datagram() {
        let mut d = vec![0xfe, 0xf7, 0x28, 0x91, 0x0d, 0x01, 0x00, 0x2e, 0x06, 0x00];
        d.resize(0x2e, 0);
        assert_eq!(run(&d), Verdict::Yes(Found::new("MerakiCloud")));
        d.push(0);
        assert_eq!(run(&d), Verdict::No);
        assert_eq!(run(&[0xfe, 0xf7, 0x28, 0x91, 0, 1]), Verdict::No);
        assert_eq!(run(&[0u8; 46]), Verdict::No);
    }
}
