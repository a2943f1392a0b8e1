//! Microsoft SQL Server's TDS (MS-TDS 2.2.3 and 2.2.6): the 8-byte packet header
//! (type, status, big-endian length, SPID, packet id, window 0) carrying either a
//! PRELOGIN (type 0x12, or 0x04 for the server's answer) whose option table starts
//! with a 6-byte VERSION and ends with 0xFF inside the packet, or a LOGIN7 (type
//! 0x10) with a matching length and a TDS 7.x version. The server's version from
//! its PRELOGIN answer goes into `server_banner`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "MsSQL-TDS",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[PRELOGIN, LOGIN7, RESPONSE])),
    prefix: Prefix::ANY,
    inspect,
}];

const PRELOGIN: u8 = 0x12;
const LOGIN7: u8 = 0x10;
const RESPONSE: u8 = 0x04;
const STATUS_EOM: u8 = 0x01;
const HEADER: usize = 8;
/// The packet size clients negotiate from; PRELOGIN and LOGIN7 always fit.
const MAX_PACKET: usize = 4096;
const MAX_OPTIONS: usize = 16;
const VERSION: u8 = 0x00;
const TERMINATOR: u8 = 0xff;

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let expected = match pkt.side {
        Side::Up => [PRELOGIN, LOGIN7],
        Side::Down => [RESPONSE, RESPONSE],
    };
    match data.first() {
        Some(t) if expected.contains(t) => {}
        _ => return Verdict::No,
    }
    match data.get(1) {
        None => return Verdict::Maybe,
        Some(&STATUS_EOM) => {}
        Some(_) => return Verdict::No,
    }
    let Some(len) = be16(data, 2).map(usize::from) else {
        return Verdict::Maybe;
    };
    if !(HEADER + 5..=MAX_PACKET).contains(&len) {
        return Verdict::No;
    }
    match data.get(7) {
        None => return Verdict::Maybe,
        Some(0) => {}
        Some(_) => return Verdict::No,
    }
    let Some(body) = data.get(HEADER..len) else {
        return Verdict::Maybe;
    };
    let found = Found::new("MsSQL-TDS");
    if data[0] == LOGIN7 {
        return if login7(body) { Verdict::Yes(found) } else { Verdict::No };
    }
    let Some(version) = prelogin_version(body) else {
        return Verdict::No;
    };
    if pkt.side == Side::Up {
        // The answer carries the server's version.
        return Verdict::Yes(found.more());
    }
    if ctx.meta.server_banner.is_none() {
        let build = u16::from_be_bytes([version[2], version[3]]);
        ctx.meta.server_banner = Some(compact_str::format_compact!("{}.{}.{}", version[0], version[1], build));
    }
    Verdict::Yes(found)
}

/// Walks the PRELOGIN option table; returns the VERSION option's 6 bytes.
fn prelogin_version(body: &[u8]) -> Option<&[u8]> {
    let mut version = None;
    for i in 0..MAX_OPTIONS {
        let at = i * 5;
        let token = *body.get(at)?;
        if token == TERMINATOR {
            // The table must be followed by the data it points into.
            return version.filter(|_| at < body.len());
        }
        let offset = usize::from(be16(body, at + 1)?);
        let len = usize::from(be16(body, at + 3)?);
        let option = body.get(offset..offset + len)?;
        // Option data lies after the table, which is at least this long.
        if offset < at + 6 {
            return None;
        }
        match (i, token) {
            (0, VERSION) if len == 6 => version = Some(option),
            (0, _) => return None,
            (_, VERSION) => return None,
            _ => {}
        }
    }
    None
}

/// LOGIN7's own length equals the packet's body and the version is TDS 7.x.
fn login7(body: &[u8]) -> bool {
    let Some(fixed) = body.get(..12) else {
        return false;
    };
    let length = u32::from_le_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]);
    let version = u32::from_le_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let packet_size = u32::from_le_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]);
    length as usize == body.len()
        && (0x7000_0000..=0x7400_0004).contains(&version)
        && (512..=32_767).contains(&packet_size)
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    /// The PRELOGIN example of MS-TDS 4.1, as SSMS sends it.
    const PRELOGIN_REQ: &[u8] = b"\x12\x01\x00\x2f\x00\x00\x01\x00\
        \x00\x00\x1a\x00\x06\x01\x00\x20\x00\x01\x02\x00\x21\x00\x01\x03\x00\x22\x00\x04\x04\x00\x26\x00\x01\xff\
        \x09\x00\x00\x00\x00\x00\x01\x00\xb8\x0d\x00\x00\x01";
    /// A SQL Server 2019 (15.0.2000) answer.
    const PRELOGIN_RSP: &[u8] = b"\x04\x01\x00\x25\x00\x00\x01\x00\
        \x00\x00\x15\x00\x06\x01\x00\x1b\x00\x01\x02\x00\x1c\x00\x01\x03\x00\x1d\x00\x00\xff\
        \x0f\x00\x07\xd0\x00\x00\x00\x00";

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (50000, 1433), data)
    }

    #[test]
    fn prelogin_request_and_answer() {
        assert_eq!(
            run(Side::Up, PRELOGIN_REQ).0,
            Verdict::Yes(Found::new("MsSQL-TDS").more())
        );
        let (v, tc) = run(Side::Down, PRELOGIN_RSP);
        assert_eq!(v, Verdict::Yes(Found::new("MsSQL-TDS")));
        assert_eq!(tc.meta.server_banner.as_deref(), Some("15.0.2000"));
    }

    #[test]
    fn login7() {
        let mut body = vec![0u8; 94];
        body[..4].copy_from_slice(&94u32.to_le_bytes());
        body[4..8].copy_from_slice(&0x7400_0004u32.to_le_bytes());
        body[8..12].copy_from_slice(&4096u32.to_le_bytes());
        let mut data = vec![0x10, 0x01, 0x00, 102, 0x00, 0x00, 0x01, 0x00];
        data.extend_from_slice(&body);
        assert_eq!(run(Side::Up, &data).0, Verdict::Yes(Found::new("MsSQL-TDS")));
        data[12] = 0x05;
        assert_eq!(run(Side::Up, &data).0, Verdict::No);
    }

    #[test]
    fn truncated_waits() {
        for cut in [1, 3, 7, 8, 20, PRELOGIN_REQ.len() - 1] {
            assert_eq!(run(Side::Up, &PRELOGIN_REQ[..cut]).0, Verdict::Maybe, "cut at {cut}");
        }
    }

    #[test]
    fn wrong_direction_and_others() {
        assert_eq!(run(Side::Down, PRELOGIN_REQ).0, Verdict::No);
        assert_eq!(run(Side::Up, PRELOGIN_RSP).0, Verdict::No);
        for data in [
            &b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"[..],
            b"\x03\x00\x00\x13\x0e\xe0\x00\x00\x00\x00\x00\x01\x00\x08\x00\x0b\x00\x00\x00",
            b"GET / HTTP/1.1\r\n",
        ] {
            assert_eq!(run(Side::Up, data).0, Verdict::No);
        }
    }

    #[test]
    fn hostile_inputs() {
        let patch = |at: usize, value: u8| {
            let mut d = PRELOGIN_REQ.to_vec();
            d[at] = value;
            d
        };
        for data in [
            patch(3, 0x05),                                  // length shorter than a header
            patch(2, 0x20),                                  // length past any packet size
            patch(7, 1),                                     // window not zero
            patch(8, 0x01),                                  // first option is not VERSION
            patch(12, 0x05),                                 // VERSION of the wrong size
            patch(10, 0x2e),                                 // option data past the end
            patch(10, 0x03),                                 // option data inside the table
            patch(33, 0x05),                                 // no terminator
            [&PRELOGIN_REQ[..13], &[0x00; 34][..]].concat(), // VERSION twice
        ] {
            assert_eq!(run(Side::Up, &data).0, Verdict::No, "{data:?}");
        }
    }
}
