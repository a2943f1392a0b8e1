//! Oracle's TNS (Transparent Network Substrate, the transport of Oracle Net),
//! TCP port 1521 by default: every packet starts with an 8-byte header, the
//! packet's length (16 bits, header included), a packet checksum (0 unless
//! checksums are on, which no release turns on), the packet type, flags
//! and a header checksum (0). A client opens with Connect (type 1): its
//! version and the oldest version it is compatible with (300 and up), the
//! session and transport data unit sizes, the "value of 1 in hardware" that
//! tells the byte order (0x0001 or 0x0100), then the length and offset of
//! its connect descriptor, an Oracle Net parameter list
//! `(DESCRIPTION=...)`, either at the end of the packet or, when long, in
//! the data packet that follows. The listener answers Accept (type 2, the
//! same version and byte-order fields), Refuse (4) or Redirect (5) with a
//! parameter list of its own, or Resend (11, the bare header).

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Oracle",
    wants: Wants::Tcp,
    // The opening packets are shorter than 2 KiB.
    first_byte: FirstByte {
        tcp: ByteSet::range(0, (MAX_OPENING >> 8) as u8),
        udp: ByteSet::NONE,
    },
    // The TNS header: length, zero checksums, a packet type this dissector reads.
    prefix: Prefix::is(&[
        Field::u8(4, CONNECT, RESEND),
        Field::u16(0, HEADER as u16, MAX_OPENING as u16).once(HEADER as u8),
        Field::byte(2, 0),
        Field::byte(3, 0),
        Field::u16(6, 0, 0),
    ]),
    inspect,
}];

const HEADER: usize = 8;
const MAX_OPENING: usize = 2047;
const CONNECT: u8 = 1;
const ACCEPT: u8 = 2;
const REFUSE: u8 = 4;
const REDIRECT: u8 = 5;
const RESEND: u8 = 11;
/// TNS versions: 300 onwards (Oracle 7's 300 to the 31x of 11g, 12c and later).
const VERSIONS: std::ops::RangeInclusive<u16> = 300..=399;
/// A Connect's fixed part, up to the connect flags.
const CONNECT_FIXED: usize = 34;

fn byte_order_ok(value: Option<u16>) -> bool {
    matches!(value, Some(0x0001 | 0x0100))
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.len() < HEADER {
        // Only the length so far: it must be one an opening packet has.
        let checksum_ok = data.iter().skip(2).take(2).all(|&b| b == 0);
        let kind_ok = data
            .get(4)
            .is_none_or(|k| [CONNECT, ACCEPT, REFUSE, REDIRECT, RESEND].contains(k));
        return if data[0] <= (MAX_OPENING >> 8) as u8 && checksum_ok && kind_ok {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let len = usize::from(be16(data, 0).unwrap_or(0));
    if be16(data, 2) != Some(0) || be16(data, 6) != Some(0) || !(HEADER..=MAX_OPENING).contains(&len) {
        return Verdict::No;
    }
    let found = match (pkt.side, data[4]) {
        (Side::Up, CONNECT) => connect(data, len),
        (Side::Down, ACCEPT) => accept(data, len),
        (Side::Down, REFUSE) => parameters(data, len, 4),
        (Side::Down, REDIRECT) => parameters(data, len, 2),
        (Side::Down, RESEND) => Some(len == HEADER),
        _ => Some(false),
    };
    match found {
        Some(true) => Verdict::Yes(Found::new("Oracle")),
        Some(false) => Verdict::No,
        None => Verdict::Maybe,
    }
}

/// A Connect packet; `None` while the part that decides has not arrived.
fn connect(data: &[u8], len: usize) -> Option<bool> {
    if len < CONNECT_FIXED {
        return Some(false);
    }
    let version = be16(data, 8)?;
    let compatible = be16(data, 10)?;
    let byte_order = be16(data, 22)?;
    if !VERSIONS.contains(&version) || !(300..=version).contains(&compatible) || !byte_order_ok(Some(byte_order)) {
        return Some(false);
    }
    let descriptor_len = usize::from(be16(data, 24)?);
    let offset = usize::from(be16(data, 26)?);
    if descriptor_len == 0 || !(CONNECT_FIXED..=len).contains(&offset) {
        return Some(false);
    }
    if offset == len {
        // The descriptor follows in a data packet.
        return Some(true);
    }
    if offset + descriptor_len != len {
        return Some(false);
    }
    Some(*data.get(offset)? == b'(')
}

/// An Accept: version, service options, SDU and TDU sizes, byte order.
fn accept(data: &[u8], len: usize) -> Option<bool> {
    if len < 24 {
        return Some(false);
    }
    Some(VERSIONS.contains(&be16(data, 8)?) && byte_order_ok(be16(data, 16)))
}

/// Refuse and Redirect: after `skip` bytes (the refusal's reasons and the
/// data's length, or the data's length), a parameter list ending the packet.
fn parameters(data: &[u8], len: usize, skip: usize) -> Option<bool> {
    let data_len = usize::from(be16(data, HEADER + skip - 2)?);
    if data_len == 0 || HEADER + skip + data_len != len {
        return Some(false);
    }
    Some(*data.get(HEADER + skip)? == b'(')
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    const DESCRIPTOR: &[u8] = b"(DESCRIPTION=(CONNECT_DATA=(SERVICE_NAME=orcl)(CID=(PROGRAM=sqlplus)(HOST=client)(USER=scott)))(ADDRESS=(PROTOCOL=TCP)(HOST=10.0.0.2)(PORT=1521)))";

    /// A Connect of TNS version 314 with the descriptor at offset 58.
    fn connect_packet(descriptor: &[u8], inline: bool) -> Vec<u8> {
        let mut m = vec![0, 0, 0, 0, CONNECT, 0, 0, 0];
        m.extend_from_slice(&314u16.to_be_bytes());
        m.extend_from_slice(&300u16.to_be_bytes());
        m.extend_from_slice(&[0x0c, 0x41, 0x20, 0x00, 0xff, 0xff, 0x7f, 0x08, 0x00, 0x00, 0x01, 0x00]);
        m.extend_from_slice(&(descriptor.len() as u16).to_be_bytes());
        m.extend_from_slice(&58u16.to_be_bytes());
        m.extend_from_slice(&[0, 0, 0x08, 0x00, 0x41, 0x41]);
        m.resize(58, 0);
        if inline {
            m.extend_from_slice(descriptor);
        }
        let len = m.len() as u16;
        m[..2].copy_from_slice(&len.to_be_bytes());
        m
    }

    fn accept_packet() -> Vec<u8> {
        let mut m = vec![0, 32, 0, 0, ACCEPT, 0, 0, 0];
        m.extend_from_slice(&314u16.to_be_bytes());
        m.extend_from_slice(&[0x08, 0x01, 0x20, 0x00, 0x7f, 0xff, 0x01, 0x00, 0, 0, 0, 32, 0x01, 0x01]);
        m.resize(32, 0);
        m
    }

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 1521), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("Oracle"));

    #[test]
    fn connect_and_the_listeners_answers() {
        assert_eq!(run(Side::Up, &connect_packet(DESCRIPTOR, true)), YES);
        assert_eq!(run(Side::Up, &connect_packet(DESCRIPTOR, false)), YES);
        assert_eq!(run(Side::Up, &connect_packet(DESCRIPTOR, true)[..5]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &connect_packet(DESCRIPTOR, true)[..20]), Verdict::Maybe);
        assert_eq!(run(Side::Down, &accept_packet()), YES);
        assert_eq!(run(Side::Down, &[0, 8, 0, 0, RESEND, 0, 0, 0]), YES);
        let refusal = b"(DESCRIPTION=(ERR=12514)(VSNNUM=0)(ERROR_STACK=(ERROR=(CODE=12514)(EMFI=4))))";
        let mut refuse = vec![0, 0, 0, 0, REFUSE, 0, 0, 0, 0x22, 0x00];
        refuse.extend_from_slice(&(refusal.len() as u16).to_be_bytes());
        refuse.extend_from_slice(refusal);
        let len = refuse.len() as u16;
        refuse[..2].copy_from_slice(&len.to_be_bytes());
        assert_eq!(run(Side::Down, &refuse), YES);
    }

    #[test]
    fn near_misses_are_refused() {
        let good = connect_packet(DESCRIPTOR, true);
        // A checksum; a type other than Connect; a Connect from the server.
        for (at, value) in [(2, 1), (7, 1), (4, 6), (4, 2)] {
            let mut bad = good.clone();
            bad[at] = value;
            assert_eq!(run(Side::Up, &bad), Verdict::No, "byte {at} = {value}");
        }
        assert_eq!(run(Side::Down, &good), Verdict::No);
        // A version before 300, compatibility newer than the version, the
        // byte-order value neither way round.
        for (at, value) in [(8, 0), (10, 2), (22, 2)] {
            let mut bad = good.clone();
            bad[at] = value;
            assert_eq!(run(Side::Up, &bad), Verdict::No, "byte {at} = {value}");
        }
        // A descriptor that does not end the packet, or is no parameter list.
        let mut long = good.clone();
        long.push(b')');
        long[1] += 1;
        assert_eq!(run(Side::Up, &long), Verdict::No);
        let not_a_list = connect_packet(b"DESCRIPTION=(CONNECT_DATA=)", true);
        assert_eq!(run(Side::Up, &not_a_list), Verdict::No);
        // A length the packet cannot have.
        let mut short = good.clone();
        short[..2].copy_from_slice(&[0, 4]);
        assert_eq!(run(Side::Up, &short), Verdict::No);
        assert_eq!(run(Side::Down, &[0, 9, 0, 0, RESEND, 0, 0, 0, 0]), Verdict::No);
        assert_eq!(run(Side::Up, &[0u8; 64]), Verdict::No);
        assert_eq!(
            run(Side::Up, b"\x00\x00\x00\x0c\x00\x00\x00\x00\x00\x00\x00\x00"),
            Verdict::No
        );
    }
}
