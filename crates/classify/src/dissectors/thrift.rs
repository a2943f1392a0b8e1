//! Apache Thrift RPC messages over TCP (the Thrift specification's
//! "thrift-binary-protocol.md", "thrift-compact-protocol.md" and
//! "thrift-rpc.md"), unframed or framed (a 4-byte big-endian frame length
//! before each message, at most the libraries' 16,384,000-byte default).
//! A strict binary message starts with 0x80 0x01 0x00 and its type (1
//! call, 2 reply, 3 exception, 4 oneway), then the method name as a 4-byte
//! length and its bytes, then a 4-byte sequence id; a compact one starts
//! with 0x82, the type in the top three bits of the next byte and version 1
//! in its low five, then the sequence id and the name's length as varints,
//! and the name. The client sends calls and oneways, the server replies and
//! exceptions. A method name is an identifier (with `:` for the
//! multiplexed protocol's `Service:method` and `.`); the first field
//! header after the message header, when there, must name a defined type.

use super::{ByteSet, Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Thrift",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        // Strict binary, compact, or a frame length's top byte.
        tcp: ByteSet::of(&[BINARY, COMPACT, 0x00]),
        udp: ByteSet::NONE,
    },
    // A frame is never empty.
    prefix: Prefix::is(&[Field::u32(0, 1, u32::MAX)]),
    inspect,
}];

const BINARY: u8 = 0x80;
const COMPACT: u8 = 0x82;
const MAX_FRAME: u32 = 16_384_000;
/// Longer method names than this are not names.
const MAX_NAME: usize = 255;

/// What the bytes so far say.
enum Read {
    /// A whole message header of this many bytes.
    Header(usize),
    /// A valid start.
    Partial,
    No,
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (message, frame) = match data[0] {
        BINARY | COMPACT => (data, None),
        0 => {
            let Some(frame) = be32(data, 0) else {
                return Verdict::Maybe;
            };
            if !(1..=MAX_FRAME).contains(&frame) {
                return Verdict::No;
            }
            match data.get(4) {
                Some(&(BINARY | COMPACT)) => (&data[4..], Some(frame)),
                Some(_) => return Verdict::No,
                None => return Verdict::Maybe,
            }
        }
        _ => return Verdict::No,
    };
    let read = match message[0] {
        BINARY => binary(message, pkt.side),
        _ => compact(message, pkt.side),
    };
    match read {
        Read::Header(len) if frame.is_none_or(|f| f as usize >= len) => Verdict::Yes(Found::new("Thrift")),
        Read::Partial => Verdict::Maybe,
        _ => Verdict::No,
    }
}

fn type_ok(kind: u8, side: Side) -> bool {
    match side {
        Side::Up => kind == 1 || kind == 4,
        Side::Down => kind == 2 || kind == 3,
    }
}

fn name_ok(name: &[u8]) -> bool {
    name.iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':'))
}

/// Whether `data` at `at` is as far as `len` bytes are, `Partial` when not.
fn name_at(data: &[u8], at: usize, len: usize) -> Result<usize, Read> {
    if !(1..=MAX_NAME).contains(&len) {
        return Err(Read::No);
    }
    let name = &data[at.min(data.len())..data.len().min(at + len)];
    if !name_ok(name) {
        return Err(Read::No);
    }
    if name.len() < len {
        return Err(Read::Partial);
    }
    Ok(at + len)
}

fn binary(data: &[u8], side: Side) -> Read {
    let head = &data[..data.len().min(4)];
    let kind_ok = head.get(3).is_none_or(|&k| type_ok(k, side));
    if ![BINARY, 0x01, 0x00].starts_with(&head[..head.len().min(3)]) || !kind_ok {
        return Read::No;
    }
    let Some(len) = be32(data, 4) else {
        return Read::Partial;
    };
    let Ok(len) = usize::try_from(len) else {
        return Read::No;
    };
    let end = match name_at(data, 8, len) {
        Ok(end) => end,
        Err(read) => return read,
    };
    // The sequence id, then the first field's type.
    let header = end + 4;
    match data.get(header) {
        Some(0 | 2 | 3 | 4 | 6 | 8 | 10..=16) => Read::Header(header),
        Some(_) => Read::No,
        None if data.len() >= header => Read::Header(header),
        None => Read::Partial,
    }
}

/// A ULEB128 varint of at most `max` bytes at `at`: its value and end.
fn varint(data: &[u8], at: usize, max: usize) -> Result<(u64, usize), Read> {
    let mut value = 0u64;
    for i in 0..max {
        let Some(&b) = data.get(at + i) else {
            return Err(Read::Partial);
        };
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, at + i + 1));
        }
    }
    Err(Read::No)
}

fn compact(data: &[u8], side: Side) -> Read {
    let Some(&type_version) = data.get(1) else {
        return Read::Partial;
    };
    if type_version & 0x1f != 1 || !type_ok(type_version >> 5, side) {
        return Read::No;
    }
    // A 32-bit sequence id takes at most five bytes.
    let after_seq = match varint(data, 2, 5) {
        Ok((seq, end)) if seq <= u64::from(u32::MAX) => end,
        Ok(_) => return Read::No,
        Err(read) => return read,
    };
    let (len, at) = match varint(data, after_seq, 2) {
        Ok((len, at)) => (len as usize, at),
        Err(read) => return read,
    };
    let end = match name_at(data, at, len) {
        Ok(end) => end,
        Err(read) => return read,
    };
    // The first field header: STOP, or a delta and a type from 1 to 13.
    match data.get(end) {
        Some(&0) => Read::Header(end),
        Some(&b) if (1..=13).contains(&(b & 0x0f)) => Read::Header(end),
        Some(_) => Read::No,
        None => Read::Header(end),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 9090), data)
    }

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("Thrift"))
    }

    /// A strict binary message: `kind`, the method `name`, sequence id 1,
    /// then field 1 as an i32 (type 8) of value 42, and STOP.
    fn binary_message(kind: u8, name: &[u8]) -> Vec<u8> {
        let mut out = vec![BINARY, 0x01, 0x00, kind];
        out.extend_from_slice(&(name.len() as u32).to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&1u32.to_be_bytes());
        out.extend_from_slice(&[8, 0, 1, 0, 0, 0, 42, 0]);
        out
    }

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut out = (message.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(message);
        out
    }

    /// A compact message: `kind`, sequence id 300 (two varint bytes), the
    /// method `name`, then field 1 (delta 1) as an i32 (type 5), zigzag 84,
    /// and STOP.
    fn compact_message(kind: u8, name: &[u8]) -> Vec<u8> {
        let mut out = vec![COMPACT, (kind << 5) | 1, 0xac, 0x02, name.len() as u8];
        out.extend_from_slice(name);
        out.extend_from_slice(&[0x15, 84, 0]);
        out
    }

    #[test]
    fn binary_and_compact_messages_framed_or_not() {
        assert_eq!(run(Side::Up, &binary_message(1, b"getUser")), yes());
        assert_eq!(run(Side::Up, &binary_message(4, b"Calculator:zip")), yes());
        assert_eq!(run(Side::Down, &binary_message(2, b"getUser")), yes());
        assert_eq!(run(Side::Down, &binary_message(3, b"get_user")), yes());
        assert_eq!(run(Side::Up, &framed(&binary_message(1, b"ping"))), yes());
        assert_eq!(run(Side::Up, &compact_message(1, b"getUser")), yes());
        assert_eq!(run(Side::Down, &compact_message(2, b"getUser")), yes());
        assert_eq!(run(Side::Up, &framed(&compact_message(1, b"add"))), yes());
        // Split over segments: wait for the name.
        assert_eq!(run(Side::Up, &binary_message(1, b"getUser")[..10]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &framed(&binary_message(1, b"ping"))[..3]), Verdict::Maybe);
        assert_eq!(run(Side::Up, &compact_message(1, b"getUser")[..4]), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        let good = binary_message(1, b"getUser");
        // Version 0x8002, a non-zero byte before the type, type 5.
        for (at, byte) in [(1, 2), (2, 1), (3, 5)] {
            let mut data = good.clone();
            data[at] = byte;
            assert_eq!(run(Side::Up, &data), Verdict::No, "byte {at} = {byte}");
        }
        // A reply from the client, a call from the server.
        assert_eq!(run(Side::Up, &binary_message(2, b"getUser")), Verdict::No);
        assert_eq!(run(Side::Down, &binary_message(1, b"getUser")), Verdict::No);
        // An empty name, one that is not an identifier, one too long.
        assert_eq!(run(Side::Up, &binary_message(1, b"")), Verdict::No);
        assert_eq!(run(Side::Up, &binary_message(1, b"get user")), Verdict::No);
        assert_eq!(run(Side::Up, &binary_message(1, &[b'a'; 300])), Verdict::No);
        // A field of undefined type 9 after the header.
        let mut field = good.clone();
        field[19] = 9;
        assert_eq!(run(Side::Up, &field), Verdict::No);
        // A frame shorter than its message, a frame past the limit.
        let mut short = framed(&good);
        short[3] = 8;
        assert_eq!(run(Side::Up, &short), Verdict::No);
        let mut huge = framed(&good);
        huge[..4].copy_from_slice(&(MAX_FRAME + 1).to_be_bytes());
        assert_eq!(run(Side::Up, &huge), Verdict::No);
        // Compact version 2, compact type 5, compact field type 14.
        let compact = compact_message(1, b"getUser");
        for (at, byte) in [(1, 0x22), (1, 0xa1), (12, 0x1e)] {
            let mut data = compact.clone();
            data[at] = byte;
            assert_eq!(run(Side::Up, &data), Verdict::No, "byte {at} = {byte:#x}");
        }
        // A frame length before something else.
        assert_eq!(run(Side::Up, b"\x00\x00\x00\x10GET / HTTP/1.1\r\n"), Verdict::No);
    }
}
