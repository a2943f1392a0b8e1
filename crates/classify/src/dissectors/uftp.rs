//! UFTP, the encrypted multicast file transfer protocol (UDP port 1044), as its
//! own header file (`uftp.h` of the 4.x and 5.x releases) defines its messages. Every
//! datagram opens with a 16-byte header: the version (0x40 for 4.x, 0x50 for 5.x),
//! the message's function (1 ANNOUNCE to 21 CC_ACK), a sequence number, the sender's
//! and the group's ids, the group instance, GRTT, group size and a reserved byte,
//! zero. The message follows: its first byte repeats the function and its second is
//! the message header's length in 32-bit words, which the datagram must hold. An
//! ENCRYPTED message (function 18) instead carries two counters, then the
//! signature's and the ciphertext's lengths, which with its 12 bytes of header
//! account for the rest of the datagram exactly.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "UFTP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[VERSION_4, VERSION_5]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const VERSION_4: u8 = 0x40;
const VERSION_5: u8 = 0x50;
const HEADER: usize = 16;
const RESERVED: usize = 15;
const FUNCTIONS: std::ops::RangeInclusive<u8> = 1..=21;
const ENCRYPTED: u8 = 18;
/// The ENCRYPTED message's own header: two 32-bit counters and two 16-bit lengths.
const ENCRYPTED_HEADER: usize = 12;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !matches!(data.first(), Some(&(VERSION_4 | VERSION_5))) {
        return Verdict::No;
    }
    let Some(&func) = data.get(1) else {
        return Verdict::No;
    };
    if !FUNCTIONS.contains(&func) || data.get(RESERVED) != Some(&0) {
        return Verdict::No;
    }
    let message = &data[HEADER.min(data.len())..];
    let valid = if func == ENCRYPTED {
        match (be16(message, 8), be16(message, 10)) {
            (Some(sig), Some(payload)) => {
                ENCRYPTED_HEADER + usize::from(sig) + usize::from(payload) == message.len() && payload > 0
            }
            _ => false,
        }
    } else {
        match message {
            [echo, words, ..] => *echo == func && *words > 0 && usize::from(*words) * 4 <= message.len(),
            _ => false,
        }
    };
    if valid {
        Verdict::Yes(Found::new("UFTP"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const YES: Verdict = Verdict::Yes(Found::new("UFTP"));

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, 1044), data)
    }

    /// The common header: version, function, sequence 7, sender 0x0a000001, group
    /// 0x12345678, instance 0, GRTT, group size, reserved.
    fn header(version: u8, func: u8) -> Vec<u8> {
        let h = vec![
            version, func, 0, 7, 0x0a, 0, 0, 1, 0x12, 0x34, 0x56, 0x78, 0, 0x40, 0x10, 0,
        ];
        assert_eq!(h.len(), HEADER);
        h
    }

    /// A REG_CONF (function 4): func, hlen 1 word, reserved, then one client id.
    fn reg_conf(version: u8) -> Vec<u8> {
        let mut d = header(version, 4);
        d.extend_from_slice(&[4, 1, 0, 0, 0x0a, 0, 0, 2]);
        d
    }

    /// A FILESEG (function 9): func, hlen 2 words, file id, section, block, then data.
    fn fileseg() -> Vec<u8> {
        let mut d = header(VERSION_5, 9);
        d.extend_from_slice(&[9, 2, 0, 1, 0, 0, 0, 3]);
        d.extend_from_slice(&[0xaa; 1200]);
        d
    }

    fn encrypted(sig: u16, payload: u16, extra: usize) -> Vec<u8> {
        let mut d = header(VERSION_5, ENCRYPTED);
        d.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        d.extend_from_slice(&sig.to_be_bytes());
        d.extend_from_slice(&payload.to_be_bytes());
        d.resize(d.len() + usize::from(sig) + usize::from(payload) + extra, 0x5c);
        d
    }

    #[test]
    fn messages_of_both_versions() {
        assert_eq!(run(&reg_conf(VERSION_4)), YES);
        assert_eq!(run(&reg_conf(VERSION_5)), YES);
        assert_eq!(run(&fileseg()), YES);
        assert_eq!(run(&encrypted(0, 64, 0)), YES);
        assert_eq!(run(&encrypted(32, 200, 0)), YES);
        assert_eq!(
            verdict_of(inspect, Transport::Udp, Side::Down, (1044, 40000), &reg_conf(VERSION_4)),
            YES
        );
    }

    #[test]
    fn near_misses() {
        // Versions 3 and 6, and a function out of range.
        assert_eq!(run(&reg_conf(0x30)), Verdict::No);
        assert_eq!(run(&reg_conf(0x60)), Verdict::No);
        for func in [0, 22, 99] {
            let mut d = reg_conf(VERSION_5);
            d[1] = func;
            d[HEADER] = func;
            assert_eq!(run(&d), Verdict::No, "function {func}");
        }
        // The reserved byte set.
        let mut reserved = reg_conf(VERSION_5);
        reserved[RESERVED] = 1;
        assert_eq!(run(&reserved), Verdict::No);
        // The message's function differs from the header's.
        let mut echo = reg_conf(VERSION_5);
        echo[HEADER] = 5;
        assert_eq!(run(&echo), Verdict::No);
        // A message header longer than the datagram, or of no length.
        let mut long = reg_conf(VERSION_5);
        long[HEADER + 1] = 3;
        assert_eq!(run(&long), Verdict::No);
        let mut empty = reg_conf(VERSION_5);
        empty[HEADER + 1] = 0;
        assert_eq!(run(&empty), Verdict::No);
        // The header alone, or cut short.
        assert_eq!(run(&header(VERSION_5, 4)), Verdict::No);
        assert_eq!(run(&reg_conf(VERSION_5)[..10]), Verdict::No);
        // Encrypted lengths that miss the datagram's by a byte either way, no ciphertext.
        assert_eq!(run(&encrypted(32, 200, 1)), Verdict::No);
        let short = encrypted(32, 200, 0);
        assert_eq!(run(&short[..short.len() - 1]), Verdict::No);
        assert_eq!(run(&encrypted(32, 0, 0)), Verdict::No);
    }
}
