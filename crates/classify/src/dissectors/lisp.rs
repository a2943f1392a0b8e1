//! LISP, the Locator/ID Separation Protocol, on its two UDP ports.
//!
//! The control plane (RFC 9301, port 4342): the message type is the first byte's high
//! nibble. Map-Request (1) holds a nonce, the source EID, IRC + 1 ITR-RLOCs and its
//! EID records; Map-Reply (2) a nonce and its mapping records; Map-Register (3),
//! Map-Notify (4) and Map-Notify-Ack (5) a nonce, a key id, an algorithm id and the
//! authentication data's length, that data, their records and, when their I bit is
//! set, the 24-byte xTR-ID and site-ID. Every address is preceded by its AFI, which
//! fixes its length (LCAF's by its own length field). A message is taken when every
//! count and length accounts for the datagram exactly. The Encapsulated Control
//! Message (8) carries an IP packet whose UDP datagram, to or from port 4342, holds one
//! of the others; its lengths must agree too.
//!
//! The data plane (RFC 9300 §5, port 4341): an 8-byte header whose flags have the
//! reserved R bit clear and the N and V bits not both set, then the endpoint's own IP
//! packet, whose header must give the rest of the datagram as its length (and, for
//! IPv4, check out). Packets with the K bits set (RFC 8061) are encrypted and refused.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};
use sluice_wire::bytes::internet_checksum;

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "LISP",
    wants: Wants::Udp,
    first_byte: FirstByte {
        tcp: ByteSet::NONE,
        udp: first_bytes(),
    },
    prefix: Prefix::ANY,
    inspect,
}];

const CONTROL_PORT: u16 = 4342;
const DATA_PORT: u16 = 4341;

const MAP_REQUEST: u8 = 1;
const MAP_REPLY: u8 = 2;
const MAP_REGISTER: u8 = 3;
const MAP_NOTIFY: u8 = 4;
const MAP_NOTIFY_ACK: u8 = 5;
const ENCAPSULATED: u8 = 8;

const NONCE_END: usize = 12;
const XTR_SITE_IDS: usize = 24;
const DATA_HEADER: usize = 8;
const FLAG_N: u8 = 0x80;
const FLAG_V: u8 = 0x10;
/// The reserved R bit and the two K bits.
const FLAGS_REFUSED: u8 = 0x07;

/// Control types 1 to 5 and 8, and the data header's allowed flag bytes.
const fn first_bytes() -> ByteSet {
    let mut set = ByteSet::range(MAP_REQUEST << 4, (MAP_NOTIFY_ACK << 4) | 0x0f)
        .union(ByteSet::range(ENCAPSULATED << 4, (ENCAPSULATED << 4) | 0x0f));
    let mut b: u16 = 0;
    while b < 256 {
        if data_flags(b as u8) {
            set = set.with(b as u8);
        }
        b += 1;
    }
    set
}

const fn data_flags(flags: u8) -> bool {
    flags & FLAGS_REFUSED == 0 && !(flags & FLAG_N != 0 && flags & FLAG_V != 0)
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let on = |port| pkt.server_port == port || pkt.client_port == port;
    let valid = if on(CONTROL_PORT) {
        is_control(pkt.data, true)
    } else if on(DATA_PORT) {
        is_data(pkt.data)
    } else {
        false
    };
    if valid {
        Verdict::Yes(Found::new("LISP"))
    } else {
        Verdict::No
    }
}

/// The length of the address after an AFI at `at`, and where it ends.
fn address(data: &[u8], at: usize) -> Option<usize> {
    let afi = be16(data, at)?;
    let start = at + 2;
    let len = match afi {
        0 => 0,
        1 => 4,
        2 => 16,
        // An IEEE 802 MAC address.
        6 => 6,
        // LCAF (RFC 8060): reserved, flags, type, reserved, then its length.
        16387 => 6 + usize::from(be16(data, start + 4)?),
        _ => return None,
    };
    (start + len <= data.len()).then_some(start + len)
}

/// An EID prefix after its mask length at `at - 1`: the AFI must be an address family
/// whose mask the length fits.
fn prefix(data: &[u8], mask_at: usize, afi_at: usize) -> Option<usize> {
    let mask = *data.get(mask_at)?;
    let max = match be16(data, afi_at)? {
        1 => 32,
        2 => 128,
        6 => 48,
        16387 => u8::MAX,
        _ => return None,
    };
    if mask > max {
        return None;
    }
    address(data, afi_at)
}

/// A mapping record (RFC 9301 §5.4) at `at`: TTL, locator count, mask length, action
/// and flags, map version, the EID prefix, then its locators.
fn record(data: &[u8], at: usize) -> Option<usize> {
    let locators = *data.get(at + 4)?;
    let mut at = prefix(data, at + 5, at + 10)?;
    for _ in 0..locators {
        // Priority, weight, multicast priority and weight, flags, then the locator.
        at = address(data, at + 6)?;
    }
    Some(at)
}

fn records(data: &[u8], mut at: usize, count: u8) -> Option<usize> {
    for _ in 0..count {
        at = record(data, at)?;
    }
    Some(at)
}

fn is_control(data: &[u8], outer: bool) -> bool {
    let Some(&first) = data.first() else {
        return false;
    };
    let count = data.get(3).copied().unwrap_or(0);
    let end = match first >> 4 {
        MAP_REQUEST => map_request(data),
        MAP_REPLY if count > 0 => records(data, NONCE_END, count),
        kind @ (MAP_REGISTER | MAP_NOTIFY | MAP_NOTIFY_ACK) if count > 0 => {
            let auth = usize::from(be16(data, NONCE_END + 2).unwrap_or(u16::MAX));
            let end = records(data, NONCE_END + 4 + auth, count);
            let ids = match kind {
                MAP_REGISTER => first & 0x02 != 0,
                _ => first & 0x08 != 0,
            };
            end.map(|end| {
                if ids && data.len() == end + XTR_SITE_IDS {
                    data.len()
                } else {
                    end
                }
            })
        }
        ENCAPSULATED if outer => return encapsulated(data),
        _ => None,
    };
    end == Some(data.len())
}

/// A Map-Request (RFC 9301 §5.2), where it ends.
fn map_request(data: &[u8]) -> Option<usize> {
    let itr_rlocs = (data.get(2)? & 0x1f) + 1;
    let count = *data.get(3)?;
    if count == 0 {
        return None;
    }
    let mut at = address(data, NONCE_END)?;
    for _ in 0..itr_rlocs {
        at = address(data, at)?;
    }
    for _ in 0..count {
        // Reserved, mask length, then the prefix.
        at = prefix(data, at + 1, at + 2)?;
    }
    // With the M bit a Map-Reply record follows.
    if data[0] & 0x04 != 0 {
        at = record(data, at)?;
    }
    Some(at)
}

/// An Encapsulated Control Message (RFC 9301 §5.8): 4 bytes, then an IP packet with a
/// UDP datagram to or from the control port holding a control message.
fn encapsulated(data: &[u8]) -> bool {
    let Some(ip) = data.get(4..) else {
        return false;
    };
    let Some(udp) = ip_payload(ip, Some(17)) else {
        return false;
    };
    let (Some(src), Some(dst), Some(len)) = (be16(udp, 0), be16(udp, 2), be16(udp, 4)) else {
        return false;
    };
    (src == CONTROL_PORT || dst == CONTROL_PORT)
        && usize::from(len) == udp.len()
        && udp.len() > 8
        && is_control(&udp[8..], false)
}

/// The payload of the IP packet `ip` when its header's length is the packet's and, for
/// IPv4, its checksum holds; of protocol `proto` when one is asked for.
fn ip_payload(ip: &[u8], proto: Option<u8>) -> Option<&[u8]> {
    let first = *ip.first()?;
    let (header, total, next) = match first >> 4 {
        4 => {
            let header = usize::from(first & 0x0f) * 4;
            if header < 20 || ip.len() < header || internet_checksum(&ip[..header]) != 0 {
                return None;
            }
            (header, usize::from(be16(ip, 2)?), ip[9])
        }
        6 => (40, 40 + usize::from(be16(ip, 4)?), *ip.get(6)?),
        _ => return None,
    };
    if total != ip.len() || total < header || proto.is_some_and(|p| p != next) {
        return None;
    }
    Some(&ip[header..])
}

fn is_data(data: &[u8]) -> bool {
    match data.first() {
        Some(&flags) if data_flags(flags) => data.get(DATA_HEADER..).is_some_and(|ip| ip_payload(ip, None).is_some()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    const YES: Verdict = Verdict::Yes(Found::new("LISP"));

    fn run(ports: (u16, u16), data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, ports, data)
    }

    fn control(data: &[u8]) -> Verdict {
        run((50000, CONTROL_PORT), data)
    }

    const NONCE: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    /// A Map-Request: source EID 10.0.0.1, one ITR-RLOC 192.0.2.1, one record for
    /// 10.1.0.0/16.
    fn map_request() -> Vec<u8> {
        let mut d = vec![MAP_REQUEST << 4, 0, 0, 1];
        d.extend_from_slice(&NONCE);
        d.extend_from_slice(&[0, 1, 10, 0, 0, 1]);
        d.extend_from_slice(&[0, 1, 192, 0, 2, 1]);
        d.extend_from_slice(&[0, 16, 0, 1, 10, 1, 0, 0]);
        d
    }

    /// A mapping record for 2001:db8::/32 with `locators` IPv4 locators.
    fn mapping(locators: u8) -> Vec<u8> {
        let mut r = vec![0, 0, 0x05, 0xa0, locators, 32, 0x20, 0, 0, 0, 0, 2];
        r.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        r.extend_from_slice(&[0; 12]);
        for i in 0..locators {
            r.extend_from_slice(&[1, 100, 255, 0, 0, 0x05, 0, 1, 198, 51, 100, i]);
        }
        r
    }

    fn map_reply() -> Vec<u8> {
        let mut d = vec![MAP_REPLY << 4, 0, 0, 1];
        d.extend_from_slice(&NONCE);
        d.extend_from_slice(&mapping(2));
        d
    }

    /// A Map-Register with a 20-byte HMAC-SHA-1 and one record; `ids` sets the I bit and
    /// appends the xTR-ID and site-ID.
    fn map_register(ids: bool) -> Vec<u8> {
        let mut d = vec![(MAP_REGISTER << 4) | if ids { 0x02 } else { 0 }, 0, 1, 1];
        d.extend_from_slice(&NONCE);
        d.extend_from_slice(&[0, 1, 0, 20]);
        d.extend_from_slice(&[0x77; 20]);
        d.extend_from_slice(&mapping(1));
        if ids {
            d.extend_from_slice(&[0x42; XTR_SITE_IDS]);
        }
        d
    }

    fn ipv4_checksum(header: &mut [u8]) {
        header[10..12].fill(0);
        let sum = internet_checksum(header);
        header[10..12].copy_from_slice(&sum.to_be_bytes());
    }

    /// An IPv4 packet of protocol `proto` around `payload`.
    fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
        let total = (20 + payload.len()) as u16;
        let mut p = vec![
            0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 1, 0, 5,
        ];
        p[2..4].copy_from_slice(&total.to_be_bytes());
        ipv4_checksum(&mut p);
        p.extend_from_slice(payload);
        p
    }

    fn udp(src: u16, dst: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = Vec::new();
        u.extend_from_slice(&src.to_be_bytes());
        u.extend_from_slice(&dst.to_be_bytes());
        u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(payload);
        u
    }

    fn ecm(inner: &[u8]) -> Vec<u8> {
        let mut d = vec![ENCAPSULATED << 4, 0, 0, 0];
        d.extend_from_slice(&ipv4(17, &udp(61000, CONTROL_PORT, inner)));
        d
    }

    /// A data packet: N and I set, nonce, instance id, then an inner ICMP echo.
    fn data_packet() -> Vec<u8> {
        let mut d = vec![0x88, 0xaa, 0xbb, 0xcc, 0, 0, 0x10, 0];
        d.extend_from_slice(&ipv4(1, &[8, 0, 0xf7, 0xff, 0, 0, 0, 0]));
        d
    }

    #[test]
    fn control_messages() {
        assert_eq!(control(&map_request()), YES);
        assert_eq!(control(&map_reply()), YES);
        assert_eq!(control(&map_register(false)), YES);
        assert_eq!(control(&map_register(true)), YES);
        let mut notify = map_register(false);
        notify[0] = MAP_NOTIFY << 4;
        assert_eq!(control(&notify), YES);
        assert_eq!(control(&ecm(&map_request())), YES);
        // The reply comes back from the control port.
        assert_eq!(run((CONTROL_PORT, 50000), &map_reply()), YES);
    }

    #[test]
    fn data_packets() {
        assert_eq!(run((61000, DATA_PORT), &data_packet()), YES);
        let mut v6 = vec![0x08, 0, 0, 0, 0, 0, 0x10, 0];
        let mut inner = vec![0x60, 0, 0, 0, 0, 8, 58, 64];
        inner.extend_from_slice(&[0; 32]);
        inner.extend_from_slice(&[128, 0, 0, 0, 0, 1, 0, 1]);
        v6.extend_from_slice(&inner);
        assert_eq!(run((61000, DATA_PORT), &v6), YES);
    }

    #[test]
    fn near_misses() {
        // Off the ports.
        assert_eq!(run((50000, 4343), &map_request()), Verdict::No);
        assert_eq!(run((50000, 4342), &data_packet()), Verdict::No);
        // A byte too many or too few.
        for good in [map_request(), map_reply(), map_register(false)] {
            let mut longer = good.clone();
            longer.push(0);
            assert_eq!(control(&longer), Verdict::No);
            assert_eq!(control(&good[..good.len() - 1]), Verdict::No);
        }
        // No records, an unknown AFI, a mask longer than the family's.
        let mut none = map_reply();
        none[3] = 0;
        assert_eq!(control(&none), Verdict::No);
        let mut afi = map_request();
        afi[13] = 9;
        assert_eq!(control(&afi), Verdict::No);
        let mut mask = map_request();
        let at = mask.len() - 7;
        mask[at] = 33;
        assert_eq!(control(&mask), Verdict::No);
        // A second ITR-RLOC claimed and not there.
        let mut irc = map_request();
        irc[2] = 1;
        assert_eq!(control(&irc), Verdict::No);
        // Authentication data longer than the message.
        let mut auth = map_register(false);
        auth[15] = 200;
        assert_eq!(control(&auth), Verdict::No);
        // xTR-ID and site-ID without the I bit.
        let mut ids = map_register(true);
        ids[0] = MAP_REGISTER << 4;
        assert_eq!(control(&ids), Verdict::No);
        // Unassigned and unsupported types.
        let mut kind = map_reply();
        kind[0] = 7 << 4;
        assert_eq!(control(&kind), Verdict::No);
        // An ECM whose inner datagram is not to the control port, whose checksum fails,
        // or which nests another ECM.
        let mut wrong = vec![ENCAPSULATED << 4, 0, 0, 0];
        wrong.extend_from_slice(&ipv4(17, &udp(61000, 53, &map_request())));
        assert_eq!(control(&wrong), Verdict::No);
        let mut sum = ecm(&map_request());
        sum[4 + 11] ^= 1;
        assert_eq!(control(&sum), Verdict::No);
        assert_eq!(control(&ecm(&ecm(&map_request()))), Verdict::No);
        // Data: R or K bits set, N with V, an inner length that is not the datagram's, or
        // a bad checksum.
        for flags in [0x8c, 0x89, 0x8a, 0x90] {
            let mut d = data_packet();
            d[0] = flags;
            assert_eq!(run((61000, DATA_PORT), &d), Verdict::No, "flags {flags:#x}");
        }
        let mut longer = data_packet();
        longer.push(0);
        assert_eq!(run((61000, DATA_PORT), &longer), Verdict::No);
        let mut sum = data_packet();
        sum[DATA_HEADER + 8] ^= 1;
        assert_eq!(run((61000, DATA_PORT), &sum), Verdict::No);
        assert_eq!(run((61000, DATA_PORT), &data_packet()[..DATA_HEADER]), Verdict::No);
    }
}
