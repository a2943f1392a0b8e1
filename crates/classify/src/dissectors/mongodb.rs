//! MongoDB wire protocol: the 16-byte little-endian message header (length, request
//! id, response-to, opcode) with a sane length, followed by a body that parses for
//! its opcode: OP_QUERY (2004) and the legacy OP_INSERT/UPDATE/DELETE/GET_MORE with a
//! "db.collection" name, OP_MSG (2013) with valid flag bits and a BSON section,
//! OP_COMPRESSED (2012), or the server's OP_REPLY (1). The command name (the first
//! BSON key) goes into `commands`. See MongoDB's "Legacy Opcodes" and "OP_MSG" docs.

use super::{Context, Dissector, Field, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MongoDB",
    wants: Wants::Tcp,
    first_byte: FirstByte::ANY,
    // The message length (little-endian).
    prefix: Prefix::is(&[Field::le32(0, HEADER as u32 + 4, MAX_MESSAGE as u32)]),
    inspect,
}];

const HEADER: usize = 16;
/// The server's own limit on a message (maxMessageSizeBytes).
const MAX_MESSAGE: usize = 48_000_000;
const MAX_NAME: usize = 256;
const OP_REPLY: u32 = 1;
const OP_UPDATE: u32 = 2001;
const OP_INSERT: u32 = 2002;
const OP_QUERY: u32 = 2004;
const OP_GET_MORE: u32 = 2005;
const OP_DELETE: u32 = 2006;
const OP_COMPRESSED: u32 = 2012;
const OP_MSG: u32 = 2013;
/// OP_MSG flag bits: checksumPresent, moreToCome, exhaustAllowed.
const MSG_FLAGS: u32 = 0x0001_0003;

fn le32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

enum Check<'a> {
    Bad,
    /// Consistent so far but cut short.
    Short,
    /// Valid; the command name, when the opcode carries one.
    Good(Option<&'a [u8]>),
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(len) = le32(data, 0) else {
        return Verdict::Maybe;
    };
    let len = len as usize;
    if !(HEADER + 4..=MAX_MESSAGE).contains(&len) {
        return Verdict::No;
    }
    let Some(opcode) = le32(data, 12) else {
        return Verdict::Maybe;
    };
    // Parse within this message only.
    let message = &data[..data.len().min(len)];
    let body = &message[HEADER..];
    let room = len - HEADER;
    let check = match (pkt.side, opcode) {
        (Side::Up, OP_QUERY) => query(body, room),
        (Side::Up, OP_INSERT) => legacy(body, false),
        (Side::Up, OP_UPDATE | OP_GET_MORE | OP_DELETE) => legacy(body, true),
        (_, OP_MSG) => msg(body, room),
        (_, OP_COMPRESSED) => compressed(body),
        (Side::Down, OP_REPLY) => reply(body, room),
        _ => Check::Bad,
    };
    match check {
        Check::Bad => Verdict::No,
        Check::Short if message.len() == len => Verdict::No,
        Check::Short => Verdict::Maybe,
        Check::Good(command) => {
            if let Some(command) = command {
                Metadata::push(&mut ctx.meta.commands, command);
            }
            Verdict::Yes(Found::new("MongoDB"))
        }
    }
}

/// A "db.collection" C string; returns what follows it.
fn collection(data: &[u8]) -> Result<&[u8], bool> {
    let Some(nul) = data.iter().take(MAX_NAME + 1).position(|&b| b == 0) else {
        let printable = data.iter().all(|&b| b.is_ascii_graphic());
        return Err(data.len() <= MAX_NAME && printable);
    };
    let name = &data[..nul];
    let dot = name.iter().position(|&b| b == b'.');
    if !name.iter().all(|&b| b.is_ascii_graphic()) || !dot.is_some_and(|d| d > 0 && d + 1 < name.len()) {
        return Err(false);
    }
    Ok(&data[nul + 1..])
}

/// The start of a BSON document: its length and its first element's name. `room`
/// is what the message's length leaves for it.
fn document(data: &[u8], room: usize) -> Check<'_> {
    let Some(len) = le32(data, 0) else {
        return Check::Short;
    };
    let len = len as usize;
    if len < 5 || len > room {
        return Check::Bad;
    }
    match data.get(4) {
        None => Check::Short,
        // An empty document.
        Some(0) if len == 5 => Check::Good(None),
        // Element types 0x01..=0x13, min key and max key.
        Some(&t) if (0x01..=0x13).contains(&t) || t == 0x7f || t == 0xff => {
            let name = &data[5..];
            match name.iter().take(MAX_NAME + 1).position(|&b| b == 0) {
                Some(n) if n > 0 && name[..n].iter().all(|&b| (0x20..0x7f).contains(&b)) => {
                    Check::Good(Some(&name[..n]))
                }
                Some(_) => Check::Bad,
                None if name.len() <= MAX_NAME => Check::Short,
                None => Check::Bad,
            }
        }
        Some(_) => Check::Bad,
    }
}

fn query(body: &[u8], room: usize) -> Check<'_> {
    let Some(flags) = le32(body, 0) else {
        return Check::Short;
    };
    // Bit 0 is reserved; only bits 1..=7 are defined.
    if flags & !0xfe != 0 {
        return Check::Bad;
    }
    match collection(&body[4..]) {
        Ok(rest) => match rest.get(8..) {
            Some(doc) => document(doc, room.saturating_sub(body.len() - doc.len())),
            None => Check::Short,
        },
        Err(true) => Check::Short,
        Err(false) => Check::Bad,
    }
}

/// OP_INSERT (flags, collection, documents) and OP_UPDATE/GET_MORE/DELETE (a zero
/// word, then the collection).
fn legacy(body: &[u8], zero_first: bool) -> Check<'_> {
    let Some(first) = le32(body, 0) else {
        return Check::Short;
    };
    if (zero_first && first != 0) || (!zero_first && first & !1 != 0) {
        return Check::Bad;
    }
    match collection(&body[4..]) {
        Ok(_) => Check::Good(None),
        Err(true) => Check::Short,
        Err(false) => Check::Bad,
    }
}

fn msg(body: &[u8], room: usize) -> Check<'_> {
    let Some(flags) = le32(body, 0) else {
        return Check::Short;
    };
    if flags & !MSG_FLAGS != 0 {
        return Check::Bad;
    }
    match body.get(4) {
        None => Check::Short,
        Some(0) => document(&body[5..], room.saturating_sub(5)),
        // A document sequence: its size, then a C-string identifier.
        Some(1) => match le32(body, 5) {
            None => Check::Short,
            Some(size) if size >= 5 => match body[9..].iter().take(MAX_NAME + 1).position(|&b| b == 0) {
                Some(n) if n > 0 && body[9..9 + n].iter().all(u8::is_ascii_graphic) => Check::Good(None),
                None if body.len() - 9 <= MAX_NAME => Check::Short,
                _ => Check::Bad,
            },
            Some(_) => Check::Bad,
        },
        Some(_) => Check::Bad,
    }
}

fn compressed(body: &[u8]) -> Check<'_> {
    let (Some(original), Some(size), Some(&compressor)) = (le32(body, 0), le32(body, 4), body.get(8)) else {
        return Check::Short;
    };
    // noop, snappy, zlib, zstd.
    if matches!(original, OP_QUERY | OP_MSG | OP_REPLY) && size > 0 && (size as usize) <= MAX_MESSAGE && compressor <= 3
    {
        Check::Good(None)
    } else {
        Check::Bad
    }
}

fn reply(body: &[u8], room: usize) -> Check<'_> {
    // responseFlags (4 defined bits), cursor id, starting from, number returned.
    let Some(flags) = le32(body, 0) else {
        return Check::Short;
    };
    if flags & !0x0f != 0 {
        return Check::Bad;
    }
    let Some(returned) = le32(body, 16) else {
        return Check::Short;
    };
    if returned > 0x00ff_ffff {
        return Check::Bad;
    }
    match body.get(20..) {
        Some(doc) if returned > 0 => match document(doc, room.saturating_sub(20)) {
            Check::Good(_) => Check::Good(None),
            other => other,
        },
        _ => Check::Good(None),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    /// An isMaster OP_QUERY from mongodb.pcap.
    const IS_MASTER: &[u8] = b"\x3a\x00\x00\x00\x4c\x04\x00\x00\x00\x00\x00\x00\xd4\x07\x00\x00\
        \x00\x00\x00\x00admin.$cmd\x00\x00\x00\x00\x00\x01\x00\x00\x00\
        \x13\x00\x00\x00\x10isMaster\x00\x01\x00\x00\x00\x00";
    /// A getnonce OP_QUERY from mongodb.pcap, whose responseTo is not zero.
    const GETNONCE: &[u8] = b"\x49\x00\x00\x00\x87\x91\x00\x00\xff\xff\xff\xff\xd4\x07\x00\x00\
        \x00\x00\x00\x00InactiveUserIdentity.$cmd\x00\x00\x00\x00\x00\x01\x00\x00\x00\
        \x13\x00\x00\x00\x10getnonce\x00\x01\x00\x00\x00\x00";
    /// A `hello` OP_MSG as a 6.0 driver sends it.
    const HELLO: &[u8] = b"\x2c\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xdd\x07\x00\x00\
        \x00\x00\x00\x00\x00\x17\x00\x00\x00\x10hello\x00\x01\x00\x00\x00\x02$db\x00\x01\x00\x00\x00\x00\x00";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (51822, 27017), data)
    }

    #[test]
    fn op_query() {
        for (data, command) in [(IS_MASTER, "isMaster"), (GETNONCE, "getnonce")] {
            let (v, tc) = run(Side::Up, data);
            assert_eq!(v, Verdict::Yes(Found::new("MongoDB")));
            assert_eq!(tc.meta.commands, [command]);
        }
    }

    #[test]
    fn op_msg() {
        let (v, tc) = run(Side::Up, HELLO);
        assert_eq!(v, Verdict::Yes(Found::new("MongoDB")));
        assert_eq!(tc.meta.commands, ["hello"]);
    }

    #[test]
    fn op_reply() {
        let mut data = b"\x29\x00\x00\x00\x10\x00\x00\x00\x4c\x04\x00\x00\x01\x00\x00\x00\x08\x00\x00\x00".to_vec();
        data.extend_from_slice(&[0; 12]);
        data.extend_from_slice(b"\x01\x00\x00\x00\x05\x00\x00\x00\x00");
        assert_eq!(run(Side::Down, &data).0, Verdict::Yes(Found::new("MongoDB")));
        // A reply from the client is not one.
        assert_eq!(run(Side::Up, &data).0, Verdict::No);
    }

    #[test]
    fn truncated_waits() {
        for cut in [2, 15, 18, 25, 40, 50] {
            assert_eq!(run(Side::Up, &IS_MASTER[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn other_protocols() {
        // The TLS-like record of mongo_false_positive.pcapng: an OP_REPLY with
        // undefined flags, sent by the client.
        let key_exchange =
            b"\x4b\x45\x00\x00\x02\x06\x01\x55\x00\x00\x03\x9e\x01\x00\x00\x00\x8f\xe0\xa8\xcf\x6b\x86\x21\x01";
        for side in [Side::Up, Side::Down] {
            assert_eq!(run(side, key_exchange).0, Verdict::No);
        }
        for data in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00\x00\x00\x00\x00\x00",
        ] {
            assert_eq!(run(Side::Up, data).0, Verdict::No);
        }
    }

    #[test]
    fn hostile_inputs() {
        let patch = |at: usize, value: u8| {
            let mut d = IS_MASTER.to_vec();
            d[at] = value;
            d
        };
        for data in [
            patch(3, 0x7f),  // length past any message
            patch(0, 0x05),  // length shorter than a header
            patch(12, 0xd3), // unknown opcode
            patch(16, 0x01), // reserved flag
            patch(25, b'x'), // collection without a dot
            patch(22, 0x01), // control byte in the name
            patch(39, 0xff), // document longer than the message
            patch(43, 0x42), // unknown element type
            patch(0, 0x30),  // message ends inside the document header
        ] {
            assert_eq!(run(Side::Up, &data).0, Verdict::No, "{data:?}");
        }
    }
}
