//! MNDP, MikroTik's neighbour discovery (UDP port 5678, broadcast), in the
//! form Wireshark's MNDP dissector documents: 2 bytes of header, 2 of
//! sequence number, then type-length-value fields (16-bit type and length,
//! big-endian) that end exactly at the end of the datagram: MAC address (1,
//! 6 bytes), identity (5), version (7), platform (8), uptime (10, 4 bytes),
//! software id (11), board (12), unpack (14, 1 byte), IPv6 address (15, 16
//! bytes), interface name (16), IPv4 address (17, 4 bytes). The router's
//! software version goes into `client_banner`.

use super::{Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Mikrotik",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 5678;
const HEADER: usize = 4;
const VERSION: u16 = 7;
const MAX_FIELDS: usize = 32;

/// A field's type is known and its length is the one its type has.
fn field_ok(kind: u16, len: usize) -> bool {
    match kind {
        1 => len == 6,
        10 | 17 => len == 4,
        14 => len == 1 || len == 4,
        15 => len == 16,
        5 | 7 | 8 | 11 | 12 | 16 => len <= 255,
        _ => false,
    }
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if pkt.dst_port() != PORT || data.len() <= HEADER {
        return Verdict::No;
    }
    let mut at = HEADER;
    let mut version = None;
    let mut fields = 0;
    while at < data.len() && fields < MAX_FIELDS {
        let (Some(kind), Some(len)) = (be16(data, at), be16(data, at + 2)) else {
            return Verdict::No;
        };
        let len = usize::from(len);
        let end = at + 4 + len;
        if !field_ok(kind, len) || end > data.len() {
            return Verdict::No;
        }
        if kind == VERSION {
            version = Some(&data[at + 4..end]);
        }
        at = end;
        fields += 1;
    }
    // A MAC address and one more field at least, and nothing left over.
    if at != data.len() || fields < 2 || be16(data, HEADER) != Some(1) {
        return Verdict::No;
    }
    if let Some(version) = version {
        Metadata::set_once(&mut ctx.meta.client_banner, version);
    }
    Verdict::Yes(Found::new("Mikrotik"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, inspect_fresh, verdict_of};
    use super::*;

    fn field(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut f = kind.to_be_bytes().to_vec();
        f.extend_from_slice(&(value.len() as u16).to_be_bytes());
        f.extend_from_slice(value);
        f
    }

    fn announcement() -> Vec<u8> {
        let mut m = vec![0, 0, 0, 7];
        m.extend(field(1, &[0x4c, 0x5e, 0x0c, 0x11, 0x22, 0x33]));
        m.extend(field(5, b"MikroTik"));
        m.extend(field(7, b"6.49.7 (stable)"));
        m.extend(field(8, b"MikroTik"));
        m.extend(field(10, &[0, 1, 0x51, 0x80]));
        m.extend(field(11, b"ABCD-1234"));
        m.extend(field(12, b"RB750Gr3"));
        m.extend(field(14, &[1]));
        m.extend(field(16, b"ether1"));
        m.extend(field(17, &[192, 168, 88, 1]));
        m
    }

    fn run(ports: (u16, u16), data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, ports, data)
    }

    #[test]
    fn an_announcement_names_its_version() {
        let (verdict, tc) = inspect_fresh(inspect, Transport::Udp, Side::Up, (5678, 5678), &announcement());
        assert_eq!(verdict, Verdict::Yes(Found::new("Mikrotik")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("6.49.7 (stable)"));
    }

    #[test]
    fn near_misses_are_refused() {
        // Another port; the request, with no fields; a byte left over; a
        // field running past the end; an unknown type; a MAC of 5 bytes;
        // a first field other than the MAC.
        assert_eq!(run((5678, 5679), &announcement()), Verdict::No);
        assert_eq!(run((5678, 5678), &[0, 0, 0, 0]), Verdict::No);
        let mut extra = announcement();
        extra.push(0);
        assert_eq!(run((5678, 5678), &extra), Verdict::No);
        let mut overrun = announcement();
        overrun.truncate(overrun.len() - 1);
        assert_eq!(run((5678, 5678), &overrun), Verdict::No);
        let mut unknown = vec![0, 0, 0, 1];
        unknown.extend(field(1, &[1, 2, 3, 4, 5, 6]));
        unknown.extend(field(3, b"x"));
        assert_eq!(run((5678, 5678), &unknown), Verdict::No);
        let mut mac = vec![0, 0, 0, 1];
        mac.extend(field(1, &[1, 2, 3, 4, 5]));
        mac.extend(field(5, b"x"));
        assert_eq!(run((5678, 5678), &mac), Verdict::No);
        let mut first = vec![0, 0, 0, 1];
        first.extend(field(5, b"x"));
        first.extend(field(1, &[1, 2, 3, 4, 5, 6]));
        assert_eq!(run((5678, 5678), &first), Verdict::No);
    }
}
