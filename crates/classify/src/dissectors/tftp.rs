//! TFTP (RFC 1350, options RFC 2347..2349, 7440) over UDP. A read or write request
//! (file name, transfer mode netascii/octet/mail, options) or an option ack decides
//! at once. DATA, ACK and ERROR packets, which go to the transfer's own ports,
//! decide once both directions have spoken in TFTP's shapes.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TFTP",
    wants: Wants::Udp,
    // A 16-bit opcode from 1 to 6.
    first_byte: FirstByte::is(ByteSet::of(&[0])),
    prefix: Prefix::ANY,
    inspect,
}];

const RRQ: u16 = 1;
const WRQ: u16 = 2;
const DATA: u16 = 3;
const ACK: u16 = 4;
const ERROR: u16 = 5;
const OACK: u16 = 6;
const MODES: &[&[u8]] = &[b"netascii", b"octet", b"mail"];
const OPTIONS: &[&[u8]] = &[
    b"blksize",
    b"tsize",
    b"timeout",
    b"windowsize",
    b"multicast",
    b"rollover",
];
/// The largest block size RFC 2348 allows, plus the 4-byte header.
const MAX_DATA: usize = 65468;
const MAX_STRING: usize = 512;
const MAX_OPTIONS: usize = 16;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(opcode) = be16(data, 0) else {
        return Verdict::No;
    };
    let body = &data[2..];
    match opcode {
        RRQ | WRQ => match request(body) {
            Some(file) => {
                let verb: &[u8] = if opcode == RRQ { b"RRQ " } else { b"WRQ " };
                let mut command = verb.to_vec();
                command.extend_from_slice(file);
                Metadata::push(&mut ctx.meta.commands, &command);
                Verdict::Yes(Found::new("TFTP"))
            }
            None => Verdict::No,
        },
        OACK if options(body, true) => Verdict::Yes(Found::new("TFTP")),
        DATA if data.len() <= MAX_DATA && data.len() >= 4 => exchange(pkt),
        ACK if data.len() == 4 => exchange(pkt),
        ERROR if be16(data, 2).is_some_and(|code| code <= 8) && error_message(&data[4..]) => exchange(pkt),
        _ => Verdict::No,
    }
}

/// A transfer packet: believed when the other side has spoken TFTP too (it would
/// have been refused otherwise).
fn exchange(pkt: &Packet) -> Verdict {
    if pkt.other_index > 0 {
        Verdict::Yes(Found::new("TFTP"))
    } else {
        Verdict::Maybe
    }
}

/// Splits a NUL-terminated printable string off the front of `data`.
fn string(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = data.iter().take(MAX_STRING + 1).position(|&b| b == 0)?;
    let s = &data[..end];
    if s.is_empty() || !s.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        return None;
    }
    Some((s, &data[end + 1..]))
}

/// File name, mode and options of a request; returns the file name.
fn request(body: &[u8]) -> Option<&[u8]> {
    let (file, rest) = string(body)?;
    let (mode, rest) = string(rest)?;
    if !MODES.iter().any(|m| m.eq_ignore_ascii_case(mode)) {
        return None;
    }
    (rest.is_empty() || options(rest, false)).then_some(file)
}

/// Option name/value pairs filling `data` exactly; `known` requires the names
/// TFTP defines (an option ack may only echo those).
fn options(mut data: &[u8], known: bool) -> bool {
    for _ in 0..MAX_OPTIONS {
        let Some((name, rest)) = string(data) else {
            return false;
        };
        let Some((_, rest)) = string(rest) else {
            return false;
        };
        if known && !OPTIONS.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            return false;
        }
        if rest.is_empty() {
            return true;
        }
        data = rest;
    }
    false
}

/// An error message is printable text closed by NUL, which ends the packet.
fn error_message(data: &[u8]) -> bool {
    match data.split_last() {
        Some((0, text)) => text.iter().all(|b| b.is_ascii_graphic() || *b == b' '),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    const READ: &[u8] = b"\x00\x02empty100KB\x00octet\x00blksize\x001468\x00tsize\x00100000\x00";
    const OPTION_ACK: &[u8] = b"\x00\x06blksize\x001468\x00tsize\x00100000\x00";

    fn run(data: &[u8], other_index: u32) -> (Verdict, TestContext) {
        let mut tc = TestContext::new();
        let mut pkt = test_packet(Transport::Udp, Side::Up, 35840, 69, data);
        pkt.other_index = other_index;
        let v = inspect(&pkt, &mut tc.ctx());
        (v, tc)
    }

    #[test]
    fn write_request_with_options() {
        let (v, tc) = run(READ, 0);
        assert_eq!(v, Verdict::Yes(Found::new("TFTP")));
        assert_eq!(tc.meta.commands, vec!["WRQ empty100KB".to_string()]);
        assert_eq!(
            run(b"\x00\x01boot.img\x00NETASCII\x00", 0).0,
            Verdict::Yes(Found::new("TFTP"))
        );
    }

    #[test]
    fn option_ack() {
        assert_eq!(run(OPTION_ACK, 0).0, Verdict::Yes(Found::new("TFTP")));
        assert_eq!(run(b"\x00\x06colour\x00red\x00", 0).0, Verdict::No);
    }

    #[test]
    fn data_then_ack() {
        let mut block = b"\x00\x03\x00\x01".to_vec();
        block.extend_from_slice(&[0x0a; 512]);
        assert_eq!(run(&block, 0).0, Verdict::Maybe);
        assert_eq!(run(b"\x00\x04\x00\x01", 1).0, Verdict::Yes(Found::new("TFTP")));
        assert_eq!(
            run(b"\x00\x05\x00\x01File not found\x00", 1).0,
            Verdict::Yes(Found::new("TFTP"))
        );
    }

    #[test]
    fn malformed() {
        assert_eq!(run(b"\x00\x01boot.img\x00binary\x00", 0).0, Verdict::No);
        assert_eq!(run(b"\x00\x01boot.img\x00octet", 0).0, Verdict::No);
        assert_eq!(run(b"\x00\x01\x00octet\x00", 0).0, Verdict::No);
        assert_eq!(run(b"\x00\x01boot.img\x00octet\x00blksize\x00", 0).0, Verdict::No);
        assert_eq!(run(b"\x00\x04\x00\x01\x00", 1).0, Verdict::No);
        assert_eq!(run(b"\x00\x05\x00\x09oops\x00", 1).0, Verdict::No);
        assert_eq!(run(b"\x00\x05\x00\x01oops", 1).0, Verdict::No);
        assert_eq!(run(b"\x00\x07abc", 1).0, Verdict::No);
        assert_eq!(run(b"\x00", 0).0, Verdict::No);
        assert_eq!(run(&b"\x00\x06a\x00b\x00".repeat(20), 0).0, Verdict::No);
        assert_eq!(run(b"GET / HTTP/1.1\r\n", 0).0, Verdict::No);
    }
}
