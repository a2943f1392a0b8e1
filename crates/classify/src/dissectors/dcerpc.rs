//! DCE/RPC (The Open Group's C706, chapter 12; Microsoft's MS-RPCE), the
//! remote procedure calls of Windows services, on TCP port 135 and the
//! ports its endpoint mapper hands out, and over UDP.
//!
//! Connection-oriented (TCP): a PDU starts with version 5, minor version 0
//! or 1, the PDU type, flags, the data representation (integers little- or
//! big-endian, ASCII or EBCDIC, IEEE/VAX/Cray/IBM floats, two zero bytes)
//! and the fragment's length, in that byte order, 16 bytes of header
//! included. A client opens with a bind, an alter-context or a request, the
//! server answers with a bind-ack or -nak, an alter-context response, a
//! response or a fault. Connectionless (UDP): version 4, a PDU type up to
//! 10, the data representation, and an 80-byte header whose body length
//! reaches the datagram's end. A connectionless call whose object UUID is
//! PROFINET IO's (DEA00000-6C97-11D1-8271-..., the rest naming the device
//! instance, device and vendor) or whose interface is one of PROFINET IO's
//! (DEA00001 to DEA00004-6C97-11D1-8271-00A02442DF7D: device, controller,
//! supervisor, parameter server) is `DCERPC.PROFINET_IO` (IEC 61158-6-10).

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "DCERPC",
    wants: Wants::Both,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[5]),
        udp: ByteSet::of(&[4]),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const CO_HEADER: usize = 16;
const CL_HEADER: usize = 80;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let ok = match pkt.transport {
        super::Transport::Tcp => {
            if data.first() != Some(&5) {
                return Verdict::No;
            }
            if data.len() < CO_HEADER {
                return Verdict::Maybe;
            }
            connection_oriented(data, pkt.side)
        }
        super::Transport::Udp => {
            let ok = connectionless(data);
            if ok && profinet_io(data) {
                return Verdict::Yes(Found::new("DCERPC").app("PROFINET_IO"));
            }
            ok
        }
    };
    if ok {
        Verdict::Yes(Found::new("DCERPC"))
    } else {
        Verdict::No
    }
}

/// PROFINET IO's UUIDs: the first three fields (in the PDU's byte order)
/// of every object UUID, and the interfaces' common tail.
const PNIO_OBJECT: (u32, u16, u16) = (0xdea0_0000, 0x6c97, 0x11d1);
const PNIO_INTERFACE_TAIL: [u8; 8] = [0x82, 0x71, 0x00, 0xa0, 0x24, 0x42, 0xdf, 0x7d];

/// A connectionless header's object UUID (at 8) or interface UUID (at 24)
/// is PROFINET IO's.
fn profinet_io(data: &[u8]) -> bool {
    let little = data[4] >> 4 == 1;
    let fields = |at: usize| {
        let u32_at = |b: &[u8]| {
            let b = [b[0], b[1], b[2], b[3]];
            if little {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            }
        };
        let u16_at = |b: &[u8]| u16_in(b, little) as u16;
        (u32_at(&data[at..]), u16_at(&data[at + 4..]), u16_at(&data[at + 6..]))
    };
    let (low, mid, high) = fields(24);
    let interface = (0xdea0_0001..=0xdea0_0004).contains(&low)
        && (mid, high) == (PNIO_OBJECT.1, PNIO_OBJECT.2)
        && data[32..40] == PNIO_INTERFACE_TAIL;
    interface || fields(8) == PNIO_OBJECT
}

/// Integer byte order, characters and floats of a data representation.
fn drep(d: &[u8]) -> Option<bool> {
    let little = match d[0] >> 4 {
        0 => false,
        1 => true,
        _ => return None,
    };
    (d[0] & 0x0e == 0 && d[1] <= 3 && d[2] == 0 && d[3] == 0).then_some(little)
}

fn u16_in(d: &[u8], little: bool) -> usize {
    usize::from(if little {
        u16::from_le_bytes([d[0], d[1]])
    } else {
        u16::from_be_bytes([d[0], d[1]])
    })
}

fn connection_oriented(data: &[u8], side: Side) -> bool {
    let ptype = data[2];
    let first = match side {
        // Request, bind, alter context.
        Side::Up => matches!(ptype, 0 | 11 | 14),
        // Response, fault, bind ack, bind nak, alter context response.
        Side::Down => matches!(ptype, 2 | 3 | 12 | 13 | 15),
    };
    let Some(little) = drep(&data[4..8]) else {
        return false;
    };
    let frag = u16_in(&data[8..10], little);
    let auth = u16_in(&data[10..12], little);
    data[1] <= 1 && first && frag >= CO_HEADER && auth + CO_HEADER <= frag
}

fn connectionless(data: &[u8]) -> bool {
    if data.len() < CL_HEADER || data[0] != 4 || data[1] > 10 {
        return false;
    }
    // Three bytes of data representation here, then the serial number.
    let Some(little) = drep(&[data[4], data[5], data[6], 0]) else {
        return false;
    };
    u16_in(&data[74..76], little) + CL_HEADER == data.len()
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    /// A bind as C706 §12.6.4.3 lays it out, little-endian, 72 bytes.
    fn bind() -> Vec<u8> {
        let mut m = vec![5, 0, 11, 3, 0x10, 0, 0, 0, 72, 0, 0, 0, 1, 0, 0, 0];
        m.extend_from_slice(&[0xb8, 0x10, 0xb8, 0x10, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0]);
        m.resize(72, 0);
        m
    }

    fn run(transport: Transport, side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, side, (49152, 135), data)
    }

    #[test]
    fn bind_and_bind_ack_and_a_connectionless_request() {
        assert_eq!(
            run(Transport::Tcp, Side::Up, &bind()),
            Verdict::Yes(Found::new("DCERPC"))
        );
        let mut ack = bind();
        ack[2] = 12;
        assert_eq!(
            run(Transport::Tcp, Side::Down, &ack),
            Verdict::Yes(Found::new("DCERPC"))
        );
        assert_eq!(run(Transport::Tcp, Side::Up, &bind()[..10]), Verdict::Maybe);
        let mut request = vec![4, 0, 0x20, 0, 0x10, 0, 0];
        request.resize(CL_HEADER, 0);
        request[74] = 8;
        request.extend_from_slice(&[0; 8]);
        assert_eq!(
            run(Transport::Udp, Side::Up, &request),
            Verdict::Yes(Found::new("DCERPC"))
        );
        request.push(0);
        assert_eq!(run(Transport::Udp, Side::Up, &request), Verdict::No);
    }

    /// A PROFINET IO Connect request, big- or little-endian: its object
    /// UUID names instance 1 of device 0x0203 of vendor 0x002a, its
    /// interface is the device's (DEA00001-6C97-11D1-8271-00A02442DF7D).
    fn pnio_connect(little: bool, object: bool, interface: bool) -> Vec<u8> {
        let mut m = vec![4, 0, 0x20, 0, if little { 0x10 } else { 0 }, 0, 0, 0];
        let uuid = |m: &mut Vec<u8>, low: u32, tail: &[u8]| {
            if little {
                m.extend_from_slice(&low.to_le_bytes());
                m.extend_from_slice(&[0x97, 0x6c, 0xd1, 0x11]);
            } else {
                m.extend_from_slice(&low.to_be_bytes());
                m.extend_from_slice(&[0x6c, 0x97, 0x11, 0xd1]);
            }
            m.extend_from_slice(tail);
        };
        let (object_low, interface_low) = (
            if object { 0xdea0_0000 } else { 0x1234_5678 },
            if interface { 0xdea0_0001 } else { 0x1234_5678 },
        );
        uuid(&mut m, object_low, &[0x82, 0x71, 0x00, 0x01, 0x02, 0x03, 0x00, 0x2a]);
        uuid(&mut m, interface_low, &PNIO_INTERFACE_TAIL);
        m.resize(CL_HEADER, 0);
        let body = 40u16;
        if little {
            m[74..76].copy_from_slice(&body.to_le_bytes());
        } else {
            m[74..76].copy_from_slice(&body.to_be_bytes());
        }
        m.resize(CL_HEADER + usize::from(body), 0);
        m
    }

    #[test]
    fn profinet_io_by_its_object_or_its_interface() {
        let pnio = Verdict::Yes(Found::new("DCERPC").app("PROFINET_IO"));
        for little in [false, true] {
            assert_eq!(run(Transport::Udp, Side::Up, &pnio_connect(little, true, true)), pnio);
            assert_eq!(run(Transport::Udp, Side::Up, &pnio_connect(little, false, true)), pnio);
            assert_eq!(run(Transport::Udp, Side::Up, &pnio_connect(little, true, false)), pnio);
            assert_eq!(
                run(Transport::Udp, Side::Up, &pnio_connect(little, false, false)),
                Verdict::Yes(Found::new("DCERPC"))
            );
        }
        // An interface of PROFINET's family that it does not define, and one
        // whose tail differs.
        let mut other = pnio_connect(false, false, true);
        other[27] = 0x05;
        assert_eq!(
            run(Transport::Udp, Side::Up, &other),
            Verdict::Yes(Found::new("DCERPC"))
        );
        let mut tail = pnio_connect(false, false, true);
        tail[39] = 0x7e;
        assert_eq!(run(Transport::Udp, Side::Up, &tail), Verdict::Yes(Found::new("DCERPC")));
        // The byte order mistaken: the UUID's fields read the wrong way round.
        let mut order = pnio_connect(false, true, true);
        order[4] = 0x10;
        assert_ne!(run(Transport::Udp, Side::Up, &order), pnio);
    }

    #[test]
    fn near_misses_are_refused() {
        let mut ack_first = bind();
        ack_first[2] = 12;
        assert_eq!(run(Transport::Tcp, Side::Up, &ack_first), Verdict::No);
        let mut minor = bind();
        minor[1] = 2;
        assert_eq!(run(Transport::Tcp, Side::Up, &minor), Verdict::No);
        let mut order = bind();
        order[4] = 0x20;
        assert_eq!(run(Transport::Tcp, Side::Up, &order), Verdict::No);
        let mut reserved = bind();
        reserved[6] = 1;
        assert_eq!(run(Transport::Tcp, Side::Up, &reserved), Verdict::No);
        let mut short = bind();
        short[8] = 15;
        assert_eq!(run(Transport::Tcp, Side::Up, &short), Verdict::No);
        let mut auth = bind();
        auth[10] = 60;
        assert_eq!(run(Transport::Tcp, Side::Up, &auth), Verdict::No);
    }
}
