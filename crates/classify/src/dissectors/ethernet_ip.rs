//! EtherNet/IP's encapsulation (ODVA, The CIP Networks Library volume 2,
//! chapter 2; TCP and UDP port 44818): every message starts with a 24-byte
//! little-endian header: command, length of the data after the header,
//! session handle, status, 8 bytes of sender context and options (always 0).
//! A session opens with RegisterSession (4 bytes of data: protocol version 1,
//! option flags 0; the request's handle is 0, the reply's is the session's);
//! discovery uses ListIdentity, ListServices and ListInterfaces (no data in a
//! request, an item count in a reply); explicit messaging uses SendRRData and
//! SendUnitData inside a registered session (a non-zero handle, an interface
//! handle of 0, a timeout, then a Common Packet Format list of at least an
//! address and a data item). A ListIdentity reply names the device: its
//! product name goes into `server_banner`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "EthernetIP",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[
        LIST_SERVICES as u8,
        LIST_IDENTITY as u8,
        LIST_INTERFACES as u8,
        REGISTER_SESSION as u8,
        UNREGISTER_SESSION as u8,
        SEND_RR_DATA as u8,
        SEND_UNIT_DATA as u8,
    ])),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 24;
const LIST_SERVICES: u16 = 0x0004;
const LIST_IDENTITY: u16 = 0x0063;
const LIST_INTERFACES: u16 = 0x0064;
const REGISTER_SESSION: u16 = 0x0065;
const UNREGISTER_SESSION: u16 = 0x0066;
const SEND_RR_DATA: u16 = 0x006f;
const SEND_UNIT_DATA: u16 = 0x0070;
/// The encapsulation's status codes: success, invalid or unsupported
/// command, insufficient memory, incorrect data, invalid session handle,
/// invalid length, unsupported protocol revision.
const STATUSES: [u32; 7] = [0x00, 0x01, 0x02, 0x03, 0x64, 0x65, 0x69];
/// The CPF item types a SendRRData or SendUnitData list starts with: the
/// null address item (unconnected) and the connected address item.
const NULL_ADDRESS: u16 = 0x0000;
const CONNECTED_ADDRESS: u16 = 0x00a1;
/// ListIdentity's CIP identity item.
const IDENTITY_ITEM: u16 = 0x000c;

fn le16(data: &[u8], at: usize) -> Option<u16> {
    let b = data.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn le32(data: &[u8], at: usize) -> Option<u32> {
    let b = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(command) = le16(data, 0) else {
        return if DISSECTORS[0].first_byte.on(pkt.transport).contains(data[0]) {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    };
    if !matches!(
        command,
        LIST_SERVICES
            | LIST_IDENTITY
            | LIST_INTERFACES
            | REGISTER_SESSION
            | UNREGISTER_SESSION
            | SEND_RR_DATA
            | SEND_UNIT_DATA
    ) {
        return Verdict::No;
    }
    if data.len() < HEADER {
        return Verdict::Maybe;
    }
    let (Some(len), Some(handle), Some(status), Some(options)) =
        (le16(data, 2), le32(data, 4), le32(data, 8), le32(data, 20))
    else {
        return Verdict::No;
    };
    let len = usize::from(len);
    let status_ok = match pkt.side {
        Side::Up => status == 0,
        Side::Down => STATUSES.contains(&status),
    };
    if options != 0 || !status_ok {
        return Verdict::No;
    }
    let body = &data[HEADER..];
    // A datagram is one message; a stream's head may hold more than one,
    // or not all of the first yet.
    match pkt.transport {
        Transport::Udp if body.len() != len => return Verdict::No,
        _ if body.len() < len.min(MIN_BODY) => return Verdict::Maybe,
        _ => {}
    }
    let body = &body[..len.min(body.len())];
    let fits = match (command, pkt.side) {
        (LIST_SERVICES | LIST_IDENTITY | LIST_INTERFACES, Side::Up) => len == 0,
        (LIST_SERVICES | LIST_IDENTITY | LIST_INTERFACES, Side::Down) => {
            len >= 2 && (status != 0 || listing_ok(command, body, len))
        }
        (REGISTER_SESSION, side) => {
            let opened = side == Side::Up || status != 0 || handle != 0;
            len == 4
                && le16(body, 0) == Some(1)
                && le16(body, 2) == Some(0)
                && opened
                && (side == Side::Down || handle == 0)
        }
        (UNREGISTER_SESSION, side) => side == Side::Up && len == 0 && handle != 0,
        (_, _) => handle != 0 && len >= MIN_BODY && send_data_ok(command, body),
    };
    if !fits {
        return Verdict::No;
    }
    if command == LIST_IDENTITY
        && pkt.side == Side::Down
        && let Some(name) = product_name(body)
    {
        Metadata::set_once(&mut ctx.meta.server_banner, name);
    }
    Verdict::Yes(Found::new("EthernetIP"))
}

/// SendRRData and SendUnitData: interface handle, timeout, item count, and
/// the first item's type and length.
const MIN_BODY: usize = 12;

fn send_data_ok(command: u16, body: &[u8]) -> bool {
    let address_ok = matches!(
        (command, le16(body, 8), le16(body, 10)),
        (SEND_RR_DATA, Some(NULL_ADDRESS), Some(0)) | (SEND_UNIT_DATA, Some(CONNECTED_ADDRESS), Some(4))
    );
    le32(body, 0) == Some(0) && le16(body, 6).is_some_and(|items| (2..=8).contains(&items)) && address_ok
}

/// A reply to a listing: an item count, then as many items (type, length,
/// data) as the count says, ending where the message ends. Only what the
/// stream head holds is walked.
fn listing_ok(command: u16, body: &[u8], len: usize) -> bool {
    let Some(count) = le16(body, 0) else {
        return false;
    };
    if count > 8 || (count == 0 && len != 2) {
        return false;
    }
    let mut at = 2;
    for _ in 0..count {
        let (Some(kind), Some(item_len)) = (le16(body, at), le16(body, at + 2)) else {
            // The rest has not arrived: what was there was right.
            return at < len;
        };
        let kind_ok = match command {
            LIST_IDENTITY => kind == IDENTITY_ITEM,
            LIST_SERVICES => kind == 0x0100,
            _ => true,
        };
        if !kind_ok {
            return false;
        }
        at += 4 + usize::from(item_len);
    }
    at == len
}

/// The identity item's product name: after the item header (4 bytes), the
/// encapsulation version (2), the socket address (16), vendor id, device
/// type, product code (2 each), revision (2), status (2) and serial number
/// (4), a length-prefixed string.
fn product_name(body: &[u8]) -> Option<&[u8]> {
    const NAME: usize = 2 + 4 + 2 + 16 + 6 + 2 + 2 + 4;
    let len = usize::from(*body.get(NAME)?);
    body.get(NAME + 1..NAME + 1 + len)
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, inspect_fresh, verdict_of};
    use super::*;

    const CONTEXT: [u8; 8] = *b"\x01\x02\x03\x04\x05\x06\x07\x08";

    fn message(command: u16, handle: u32, status: u32, data: &[u8]) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&command.to_le_bytes());
        m.extend_from_slice(&(data.len() as u16).to_le_bytes());
        m.extend_from_slice(&handle.to_le_bytes());
        m.extend_from_slice(&status.to_le_bytes());
        m.extend_from_slice(&CONTEXT);
        m.extend_from_slice(&0u32.to_le_bytes());
        m.extend_from_slice(data);
        m
    }

    /// A ListIdentity reply's identity item, for a device named `name`.
    fn identity(name: &[u8]) -> Vec<u8> {
        let mut item = Vec::new();
        item.extend_from_slice(&1u16.to_le_bytes()); // encapsulation version
        item.extend_from_slice(&[0, 2, 0xaf, 0x12, 192, 168, 1, 10, 0, 0, 0, 0, 0, 0, 0, 0]);
        item.extend_from_slice(&[0x01, 0x00, 0x0e, 0x00, 0x36, 0x00]); // vendor, device type, product code
        item.extend_from_slice(&[20, 11, 0x60, 0x00, 0x78, 0x56, 0x34, 0x12]); // revision, status, serial
        item.push(name.len() as u8);
        item.extend_from_slice(name);
        item.push(3); // state
        let mut body = 1u16.to_le_bytes().to_vec();
        body.extend_from_slice(&IDENTITY_ITEM.to_le_bytes());
        body.extend_from_slice(&(item.len() as u16).to_le_bytes());
        body.extend_from_slice(&item);
        body
    }

    /// An unconnected Get_Attribute_All of the identity object, in a SendRRData.
    fn rr_data() -> Vec<u8> {
        let mut body = vec![0, 0, 0, 0, 10, 0, 2, 0, 0, 0, 0, 0, 0xb2, 0, 6, 0];
        body.extend_from_slice(&[0x01, 0x02, 0x20, 0x01, 0x24, 0x01]);
        body
    }

    fn run(transport: Transport, side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, side, (50000, 44818), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("EthernetIP"));

    #[test]
    fn a_session_registers_and_sends_requests() {
        let register = message(REGISTER_SESSION, 0, 0, &[1, 0, 0, 0]);
        assert_eq!(run(Transport::Tcp, Side::Up, &register), YES);
        let registered = message(REGISTER_SESSION, 0x1234_5678, 0, &[1, 0, 0, 0]);
        assert_eq!(run(Transport::Tcp, Side::Down, &registered), YES);
        let request = message(SEND_RR_DATA, 0x1234_5678, 0, &rr_data());
        assert_eq!(run(Transport::Tcp, Side::Up, &request), YES);
        let connected = vec![0, 0, 0, 0, 0, 0, 2, 0, 0xa1, 0, 4, 0, 1, 2, 3, 4, 0xb1, 0, 2, 0, 1, 0];
        assert_eq!(
            run(Transport::Tcp, Side::Up, &message(SEND_UNIT_DATA, 9, 0, &connected)),
            YES
        );
        let closing = message(UNREGISTER_SESSION, 0x1234_5678, 0, &[]);
        assert_eq!(run(Transport::Tcp, Side::Up, &closing), YES);
        // Two messages in one stream head, and the first one's start.
        let mut both = register.clone();
        both.extend_from_slice(&request);
        assert_eq!(run(Transport::Tcp, Side::Up, &both), YES);
        assert_eq!(run(Transport::Tcp, Side::Up, &register[..10]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, Side::Up, &register[..1]), Verdict::Maybe);
    }

    #[test]
    fn list_identity_names_the_device() {
        let request = message(LIST_IDENTITY, 0, 0, &[]);
        assert_eq!(run(Transport::Udp, Side::Up, &request), YES);
        let reply = message(LIST_IDENTITY, 0, 0, &identity(b"1756-EN2T/D"));
        let (verdict, tc) = inspect_fresh(inspect, Transport::Udp, Side::Down, (50000, 44818), &reply);
        assert_eq!(verdict, YES);
        assert_eq!(tc.meta.server_banner.as_deref(), Some("1756-EN2T/D"));
        let services = message(LIST_SERVICES, 0, 0, &[1, 0, 0, 1, 20, 0, 1, 0, 0x20, 0x01]);
        assert_eq!(run(Transport::Udp, Side::Down, &services), Verdict::No);
        let mut item = vec![1, 0, 0, 1, 20, 0, 1, 0, 0x20, 0x01];
        item.extend_from_slice(b"Communications\0\0");
        assert_eq!(
            run(Transport::Tcp, Side::Down, &message(LIST_SERVICES, 0, 0, &item)),
            YES
        );
    }

    #[test]
    fn near_misses_are_refused() {
        // A command the encapsulation does not define, and NOP.
        assert_eq!(
            run(Transport::Tcp, Side::Up, &message(0x0067, 0, 0, &[1, 0, 0, 0])),
            Verdict::No
        );
        assert_eq!(run(Transport::Tcp, Side::Up, &message(0, 0, 0, &[])), Verdict::No);
        assert_eq!(run(Transport::Tcp, Side::Up, &[0u8; 24]), Verdict::No);
        // Options not 0; a request with a status; an unknown status.
        let mut options = message(REGISTER_SESSION, 0, 0, &[1, 0, 0, 0]);
        options[20] = 1;
        assert_eq!(run(Transport::Tcp, Side::Up, &options), Verdict::No);
        assert_eq!(
            run(
                Transport::Tcp,
                Side::Up,
                &message(REGISTER_SESSION, 0, 1, &[1, 0, 0, 0])
            ),
            Verdict::No
        );
        assert_eq!(
            run(
                Transport::Tcp,
                Side::Down,
                &message(REGISTER_SESSION, 7, 0x50, &[1, 0, 0, 0])
            ),
            Verdict::No
        );
        // RegisterSession: another protocol version, a request with a handle,
        // a successful reply without one, the wrong length.
        assert_eq!(
            run(
                Transport::Tcp,
                Side::Up,
                &message(REGISTER_SESSION, 0, 0, &[2, 0, 0, 0])
            ),
            Verdict::No
        );
        assert_eq!(
            run(
                Transport::Tcp,
                Side::Up,
                &message(REGISTER_SESSION, 5, 0, &[1, 0, 0, 0])
            ),
            Verdict::No
        );
        assert_eq!(
            run(
                Transport::Tcp,
                Side::Down,
                &message(REGISTER_SESSION, 0, 0, &[1, 0, 0, 0])
            ),
            Verdict::No
        );
        assert_eq!(
            run(
                Transport::Tcp,
                Side::Up,
                &message(REGISTER_SESSION, 0, 0, &[1, 0, 0, 0, 0])
            ),
            Verdict::No
        );
        // SendRRData outside a session, or with a connected address item.
        assert_eq!(
            run(Transport::Tcp, Side::Up, &message(SEND_RR_DATA, 0, 0, &rr_data())),
            Verdict::No
        );
        let mut connected = rr_data();
        connected[8] = 0xa1;
        assert_eq!(
            run(Transport::Tcp, Side::Up, &message(SEND_RR_DATA, 3, 0, &connected)),
            Verdict::No
        );
        // A datagram whose length field is not its length; a listing request with data.
        let mut short = message(LIST_IDENTITY, 0, 0, &[]);
        short.push(0);
        assert_eq!(run(Transport::Udp, Side::Up, &short), Verdict::No);
        assert_eq!(
            run(Transport::Udp, Side::Up, &message(LIST_IDENTITY, 0, 0, &[0, 0])),
            Verdict::No
        );
        // A reply whose item is not an identity, or whose count overruns it.
        let mut other = identity(b"x");
        other[2] = 0x0d;
        assert_eq!(
            run(Transport::Udp, Side::Down, &message(LIST_IDENTITY, 0, 0, &other)),
            Verdict::No
        );
        let mut two = identity(b"x");
        two[0] = 2;
        assert_eq!(
            run(Transport::Udp, Side::Down, &message(LIST_IDENTITY, 0, 0, &two)),
            Verdict::No
        );
        assert_eq!(run(Transport::Tcp, Side::Up, b"GET / HTTP/1.1\r\n\r\n"), Verdict::No);
    }
}
