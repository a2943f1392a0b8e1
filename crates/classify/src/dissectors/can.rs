//! CAN-ETH, Controller Area Network frames carried over UDP (proconX's
//! CAN frame format, `canframe.pdf`; Wireshark's `caneth`; UDP 11898 by
//! default). A datagram opens with the magic `ISO11898`, the version (1)
//! and the number of CAN frames that follow (1 to 16 in version 1), each
//! 15 bytes: the identifier (4 bytes), the data length (0 to 8), 8 bytes
//! of data, the extended-identifier flag and the remote-request flag (0
//! or 1 each). Reserved options may follow the frames.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Controller_Area_Network",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[MAGIC[0]]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const MAGIC: &[u8; 8] = b"ISO11898";
const VERSION: u8 = 1;
const MAX_FRAMES: usize = 16;
const HEADER: usize = 10;
const FRAME: usize = 15;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() < HEADER + FRAME || data[..8] != MAGIC[..] || data[8] != VERSION {
        return Verdict::No;
    }
    let frames = usize::from(data[9]);
    if !(1..=MAX_FRAMES).contains(&frames) || data.len() < HEADER + frames * FRAME {
        return Verdict::No;
    }
    let valid = data[HEADER..HEADER + frames * FRAME]
        .chunks_exact(FRAME)
        .all(|frame| frame[4] <= 8 && frame[13] <= 1 && frame[14] <= 1);
    if valid {
        Verdict::Yes(Found::new("Controller_Area_Network"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A datagram of `frames` (identifier, data, extended) frames.
    fn datagram(frames: &[(u32, &[u8], bool)]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.push(VERSION);
        out.push(frames.len() as u8);
        for (id, payload, extended) in frames {
            out.extend_from_slice(&id.to_le_bytes());
            out.push(payload.len() as u8);
            let mut bytes = [0u8; 8];
            bytes[..payload.len()].copy_from_slice(payload);
            out.extend_from_slice(&bytes);
            out.push(u8::from(*extended));
            out.push(0);
        }
        out
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, 11898), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("Controller_Area_Network"));

    #[test]
    fn frames_of_a_bus() {
        let one = datagram(&[(0x123, &[1, 2, 3], false)]);
        assert_eq!(one.len(), 25);
        assert_eq!(run(&one), YES);
        let two = datagram(&[(0x18ff_5001, &[0; 8], true), (0x7ff, &[], false)]);
        assert_eq!(run(&two), YES);
        // Reserved options after the frames.
        let mut options = one.clone();
        options.extend_from_slice(&[0, 0]);
        assert_eq!(run(&options), YES);
        let sixteen: Vec<(u32, &[u8], bool)> = (0..16).map(|i| (i, &[0xaa][..], false)).collect();
        assert_eq!(run(&datagram(&sixteen)), YES);
    }

    #[test]
    fn near_misses_are_refused() {
        let one = datagram(&[(0x123, &[1, 2, 3], false)]);
        // Another magic, another version, no frames, more than 16.
        for (at, byte) in [(0, b'I' + 1), (7, b'9'), (8, 2), (9, 0), (9, 17)] {
            let mut data = one.clone();
            data[at] = byte;
            assert_eq!(run(&data), Verdict::No, "byte {at} = {byte}");
        }
        // Two frames announced, one sent; a frame cut short.
        let mut data = one.clone();
        data[9] = 2;
        assert_eq!(run(&data), Verdict::No);
        assert_eq!(run(&one[..24]), Verdict::No);
        // A data length past 8, flags other than 0 and 1.
        for (at, byte) in [(14, 9), (23, 2), (24, 0xff)] {
            let mut data = one.clone();
            data[at] = byte;
            assert_eq!(run(&data), Verdict::No, "byte {at} = {byte}");
        }
        // Only the header.
        assert_eq!(run(&one[..10]), Verdict::No);
    }
}
