//! CORBA's GIOP (OMG's CORBA specification, part 2 §15.4), over IIOP (TCP
//! port 683, and whatever an IOR names): every message starts with "GIOP",
//! the version (1.0 to 1.3), flags (byte order in the lowest bit; in 1.0 a
//! byte order boolean), a message type (Request 0 to Fragment 7) and the
//! message's size as a 32-bit number in that byte order.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Corba",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(b"G"),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 12;
const MAX_SIZE: u32 = 1 << 24;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !b"GIOP".starts_with(&data[..data.len().min(4)]) {
        return Verdict::No;
    }
    if data.len() < HEADER {
        return Verdict::Maybe;
    }
    let (major, minor, flags, kind) = (data[4], data[5], data[6], data[7]);
    let size = if flags & 1 == 1 {
        u32::from_le_bytes([data[8], data[9], data[10], data[11]])
    } else {
        u32::from_be_bytes([data[8], data[9], data[10], data[11]])
    };
    // Flags beyond byte order and fragments are reserved; 1.0 knows no Fragment.
    let ok =
        major == 1 && minor <= 3 && flags & !0x03 == 0 && kind <= if minor == 0 { 6 } else { 7 } && size <= MAX_SIZE;
    if ok {
        Verdict::Yes(Found::new("Corba"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (40000, 683), data)
    }

    #[test]
    fn a_request() {
        assert_eq!(
            run(b"GIOP\x01\x02\x01\x00\x40\x00\x00\x00"),
            Verdict::Yes(Found::new("Corba"))
        );
        assert_eq!(
            run(b"GIOP\x01\x00\x00\x00\x00\x00\x00\x40"),
            Verdict::Yes(Found::new("Corba"))
        );
        assert_eq!(run(b"GIO"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(b"GIOP\x02\x00\x00\x00\x00\x00\x00\x40"), Verdict::No);
        assert_eq!(run(b"GIOP\x01\x00\x00\x07\x00\x00\x00\x40"), Verdict::No);
        assert_eq!(run(b"GIOP\x01\x02\x04\x00\x40\x00\x00\x00"), Verdict::No);
        assert_eq!(
            run(b"GIOP\x01\x02\x00\x00\x40\x00\x00\x00"),
            Verdict::No,
            "size past 16 MiB"
        );
        assert_eq!(run(b"GET / HTTP/1.1\r\n"), Verdict::No);
    }
}
