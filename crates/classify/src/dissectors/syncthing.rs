//! Syncthing's local discovery (its "Local Discovery Protocol v4"
//! specification, UDP port 21027, broadcast and multicast): a datagram is
//! the magic 0x2EA7D90B followed by an Announce message in Protocol
//! Buffers encoding, whose first field is the device id (field 1, 32
//! bytes: tag 0x0a, length 0x20), then its addresses (field 2, strings)
//! and its instance id (field 3, a varint). Syncthing's own connections
//! are TLS and are named by their host names.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Syncthing",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[MAGIC[0]]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: [u8; 4] = 0x2ea7_d90b_u32.to_be_bytes();
/// Field 1 (length-delimited), 32 bytes.
const DEVICE_ID: [u8; 2] = [0x0a, 0x20];
const ID_END: usize = 4 + 2 + 32;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    // After the device id, the next field is an address (field 2) or the
    // instance id (field 3), or the message ends.
    let next_ok = matches!(data.get(ID_END), None | Some(0x12 | 0x18));
    if data.starts_with(&MAGIC) && data[4..].starts_with(&DEVICE_ID) && data.len() >= ID_END && next_ok {
        Verdict::Yes(Found::new("Syncthing"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn announce() -> Vec<u8> {
        let mut m = MAGIC.to_vec();
        m.extend_from_slice(&DEVICE_ID);
        m.extend((0..32).map(|i| i as u8 * 7));
        let address = b"tcp://0.0.0.0:22000";
        m.push(0x12);
        m.push(address.len() as u8);
        m.extend_from_slice(address);
        m.extend_from_slice(&[0x18, 0xd2, 0x85, 0xd8, 0xcc, 0x04]);
        m
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (21027, 21027), data)
    }

    #[test]
    fn an_announcement() {
        assert_eq!(run(&announce()), Verdict::Yes(Found::new("Syncthing")));
        assert_eq!(run(&announce()[..ID_END]), Verdict::Yes(Found::new("Syncthing")));
    }

    #[test]
    fn near_misses_are_refused() {
        // The magic, the device id's tag or length, the field after it.
        for (at, value) in [(0, 0x2f), (3, 0x0c), (4, 0x12), (5, 0x10), (ID_END, 0x20)] {
            let mut bad = announce();
            bad[at] = value;
            assert_eq!(run(&bad), Verdict::No, "byte {at} = {value:#x}");
        }
        assert_eq!(run(&announce()[..ID_END - 1]), Verdict::No);
        assert_eq!(run(&MAGIC), Verdict::No);
    }
}
