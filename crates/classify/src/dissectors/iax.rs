//! IAX2, the Inter-Asterisk eXchange protocol (RFC 5456 §8), over UDP port
//! 4569. Calls and registrations open with full frames: the F bit and a
//! source call number, the R bit and a destination call number, a
//! timestamp, outbound and inbound sequence numbers, a frame type (1 to 10)
//! and a subclass. A call begins with IAX control (type 6) subclass NEW
//! (1), a registration with REGREQ (13), a qualify with POKE (30), all with
//! destination call number 0 and both sequence numbers 0.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "IAX",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: ByteSet::range(0x80, 0xff),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 4569;
const FULL_FRAME: usize = 12;
const IAX_CONTROL: u8 = 6;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !pkt.has_port(PORT) || data.len() < FULL_FRAME {
        return Verdict::No;
    }
    let source = be16(data, 0).unwrap_or(0);
    let destination = be16(data, 2).unwrap_or(0) & 0x7fff;
    let (oseq, iseq, kind, subclass) = (data[8], data[9], data[10], data[11]);
    let ok = source & 0x8000 != 0
        && source & 0x7fff != 0
        && (1..=10).contains(&kind)
        && match pkt.other_index {
            // What opens a dialog: NEW, REGREQ, REGREL, POKE, FWDOWNL.
            0 if pkt.side == super::Side::Up => {
                kind == IAX_CONTROL
                    && matches!(subclass, 1 | 13 | 17 | 30 | 36)
                    && destination == 0
                    && oseq == 0
                    && iseq == 0
            }
            _ => destination != 0 || kind == IAX_CONTROL,
        };
    if ok {
        Verdict::Yes(Found::new("IAX"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    /// A NEW from source call 0x1234 with a VERSION (11) element of 2.
    const NEW: &[u8] = &[0x92, 0x34, 0, 0, 0, 0, 0, 3, 0, 0, 6, 1, 11, 2, 0, 2];

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (PORT, port), data)
    }

    #[test]
    fn a_new_call() {
        assert_eq!(run(PORT, NEW), Verdict::Yes(Found::new("IAX")));
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(
            verdict_of(inspect, Transport::Udp, Side::Up, (40000, 40001), NEW),
            Verdict::No
        );
        let mut mini = NEW.to_vec();
        mini[0] = 0x12;
        assert_eq!(run(PORT, &mini), Verdict::No);
        let mut kind = NEW.to_vec();
        kind[10] = 11;
        assert_eq!(run(PORT, &kind), Verdict::No);
        let mut answered = NEW.to_vec();
        answered[3] = 5;
        assert_eq!(run(PORT, &answered), Verdict::No);
        let mut voice = NEW.to_vec();
        voice[10] = 2;
        assert_eq!(run(PORT, &voice), Verdict::No);
        assert_eq!(run(PORT, &NEW[..11]), Verdict::No);
    }
}
