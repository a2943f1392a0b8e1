//! sFlow version 5 (the sFlow.org specification), exported over UDP port
//! 6343: a datagram is the version (5), the agent's address type (1, IPv4,
//! or 2, IPv6) and address, a sub-agent id, a sequence number, the agent's
//! uptime and the number of samples that follow, each a format and a length
//! that must tile the rest of the datagram.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "sFlow",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::of(&[0]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const MAX_SAMPLES: u32 = 64;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if datagram_ok(pkt.data) {
        Verdict::Yes(Found::new("sFlow"))
    } else {
        Verdict::No
    }
}

fn datagram_ok(data: &[u8]) -> bool {
    let address = match be32(data, 4) {
        Some(1) => 4,
        Some(2) => 16,
        _ => return false,
    };
    let header = 8 + address + 16;
    let Some(samples) = be32(data, header - 4) else {
        return false;
    };
    if be32(data, 0) != Some(5) || samples == 0 || samples > MAX_SAMPLES {
        return false;
    }
    // Each sample: data format, then its length in bytes.
    let mut at = header;
    for _ in 0..samples {
        let Some(len) = be32(data, at + 4) else {
            return false;
        };
        at = match at.checked_add(8).and_then(|a| a.checked_add(len as usize)) {
            Some(next) if next <= data.len() => next,
            _ => return false,
        };
    }
    at == data.len()
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// Version 5 from agent 10.0.0.1, one counter sample (format 2) of 8
    /// bytes.
    fn datagram() -> Vec<u8> {
        let mut m = vec![0, 0, 0, 5, 0, 0, 0, 1, 10, 0, 0, 1];
        m.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0x27, 0x10, 0, 0, 0, 1]);
        m.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0]);
        m
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (40000, 6343), data)
    }

    #[test]
    fn a_datagram_with_one_sample() {
        assert_eq!(run(&datagram()), Verdict::Yes(Found::new("sFlow")));
    }

    #[test]
    fn near_misses_are_refused() {
        let mut version = datagram();
        version[3] = 4;
        assert_eq!(run(&version), Verdict::No);
        let mut family = datagram();
        family[7] = 3;
        assert_eq!(run(&family), Verdict::No);
        let mut long = datagram();
        long.push(0);
        assert_eq!(run(&long), Verdict::No);
        let mut none = datagram();
        none[27] = 0;
        assert_eq!(run(&none[..28]), Verdict::No);
        assert_eq!(run(&datagram()[..30]), Verdict::No);
    }
}
