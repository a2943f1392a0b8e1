//! ANSI C12.22 (IEEE Std 1703), the utility meters' application protocol,
//! over TCP and UDP (RFC 6142; port 1153). Every message is one ACSE
//! association request (ITU-T X.227's AARQ-apdu, `[APPLICATION 0]`, BER):
//! tag 0x60 and a length that covers the message exactly, then
//! context-specific elements in the order of their tags: the called
//! AP-title `[2]` (C12.22 requires it: an absolute or relative object
//! identifier), optional AE qualifiers, invocation ids, the calling
//! AP-title and the authentication, and last the user information `[30]`
//! that carries the EPSEM. A TCP stream's first message is checked once
//! it has arrived whole; a UDP datagram must be one message.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Transport, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "ANSI_C1222",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(&[AARQ])),
    prefix: Prefix::ANY,
    inspect,
}];

/// `[APPLICATION 0]`, constructed.
const AARQ: u8 = 0x60;
/// The called AP-title, `[2]`, constructed.
const CALLED_AP_TITLE: u8 = 0xa2;
/// The user information, `[30]`, constructed.
const USER_INFORMATION: u8 = 0xbe;
/// An AP-title's forms: a universal OBJECT IDENTIFIER, a universal
/// RELATIVE-OID, or C12.22's `[0]` relative object identifier.
const AP_TITLE_FORMS: [u8; 3] = [0x06, 0x0d, 0x80];
/// The smallest message: a one-byte-long AP-title and empty user
/// information, each with its tag and length.
const MIN_BODY: usize = 4 + 2;

/// A BER length at the start of `data`: (its value, the bytes it took).
/// Definite forms only, up to two bytes of length.
fn ber_length(data: &[u8]) -> Option<(usize, usize)> {
    match *data.first()? {
        n @ 0..=0x7f => Some((usize::from(n), 1)),
        0x81 => {
            let n = usize::from(*data.get(1)?);
            (n >= 0x80).then_some((n, 2))
        }
        0x82 => {
            let n = usize::from(u16::from_be_bytes([*data.get(1)?, *data.get(2)?]));
            (n >= 0x100).then_some((n, 3))
        }
        _ => None,
    }
}

/// Whether `body` is the elements of an AARQ as C12.22 sends it.
fn elements_fit(body: &[u8]) -> bool {
    let mut at = 0;
    let mut last_tag = 0u8;
    let mut called = false;
    while at < body.len() {
        let tag = body[at];
        // Context-specific tags, in increasing order: [1] to [12] and [30].
        let number = tag & 0x1f;
        if tag & 0xc0 != 0x80 || number == 0x1f || !(1..=12).contains(&number) && number != 30 {
            return false;
        }
        if last_tag != 0 && number <= last_tag & 0x1f {
            return false;
        }
        let Some((len, took)) = ber_length(&body[at + 1..]) else {
            return false;
        };
        let start = at + 1 + took;
        let Some(value) = body.get(start..start + len) else {
            return false;
        };
        if tag == CALLED_AP_TITLE {
            // One AP-title inside, filling the element.
            let fits = value.len() >= 3
                && AP_TITLE_FORMS.contains(&value[0])
                && ber_length(&value[1..]).is_some_and(|(n, took)| n > 0 && 1 + took + n == value.len());
            if !fits {
                return false;
            }
            called = true;
        }
        last_tag = tag;
        at = start + len;
    }
    called && last_tag == USER_INFORMATION
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data.first() != Some(&AARQ) {
        return Verdict::No;
    }
    let Some((len, took)) = ber_length(&data[1..]) else {
        return match pkt.transport {
            // The length's second and third bytes may be on their way.
            Transport::Tcp if data.len() < 4 && data.get(1).is_none_or(|&b| b == 0x81 || b == 0x82) => Verdict::Maybe,
            _ => Verdict::No,
        };
    };
    let start = 1 + took;
    if len < MIN_BODY {
        return Verdict::No;
    }
    let body = match pkt.transport {
        Transport::Udp if data.len() != start + len => return Verdict::No,
        Transport::Tcp if data.len() < start + len => return Verdict::Maybe,
        _ => &data[start..start + len],
    };
    if elements_fit(body) {
        Verdict::Yes(Found::new("ANSI_C1222"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, verdict_of};
    use super::*;

    /// A BER element: tag, definite length, value.
    fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        match value.len() {
            n @ 0..=0x7f => out.push(n as u8),
            n @ 0x80..=0xff => out.extend_from_slice(&[0x81, n as u8]),
            n => {
                out.push(0x82);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        out.extend_from_slice(value);
        out
    }

    /// A read request to a meter: the called AP-title (a relative OID
    /// under the network's root), the calling AP-title, the calling
    /// AP-invocation-id, and the EPSEM in the user information (a
    /// full-table read, `0x30`, of table 1).
    fn request(epsem_len: usize) -> Vec<u8> {
        let mut body = tlv(CALLED_AP_TITLE, &tlv(0x80, &[0x7b, 0x01, 0x02]));
        body.extend(tlv(0xa6, &tlv(0x80, &[0x7b, 0x05])));
        body.extend(tlv(0xa8, &tlv(0x02, &[0x2a])));
        let mut epsem = vec![0x80, 0x03, 0x30, 0x00, 0x01];
        epsem.resize(epsem_len.max(5), 0x00);
        let external = tlv(0x28, &tlv(0x81, &epsem));
        body.extend(tlv(USER_INFORMATION, &external));
        tlv(AARQ, &body)
    }

    fn run(transport: Transport, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, Side::Up, (40000, 1153), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("ANSI_C1222"));

    #[test]
    fn a_request_over_udp_and_tcp() {
        for epsem in [5, 200, 400] {
            let data = request(epsem);
            assert_eq!(run(Transport::Udp, &data), YES, "{epsem}");
            assert_eq!(run(Transport::Tcp, &data), YES, "{epsem}");
        }
        // An absolute OID as the called AP-title.
        let mut body = tlv(CALLED_AP_TITLE, &tlv(0x06, &[0x2b, 0x06, 0x01, 0x04, 0x01]));
        body.extend(tlv(USER_INFORMATION, &tlv(0x28, &tlv(0x81, &[0x80, 0x01, 0x00]))));
        assert_eq!(run(Transport::Udp, &tlv(AARQ, &body)), YES);
    }

    #[test]
    fn a_tcp_message_still_arriving_is_awaited() {
        let data = request(300);
        assert_eq!(run(Transport::Tcp, &data[..1]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &data[..2]), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, &data[..40]), Verdict::Maybe);
        // A datagram is whole or it is not C12.22.
        assert_eq!(run(Transport::Udp, &data[..40]), Verdict::No);
        // The next message behind the first one does not matter on TCP.
        let mut two = data.clone();
        two.extend(request(5));
        assert_eq!(run(Transport::Tcp, &two), YES);
        assert_eq!(run(Transport::Udp, &two), Verdict::No);
    }

    #[test]
    fn near_misses_are_refused() {
        let data = request(5);
        let udp = |d: &[u8]| run(Transport::Udp, d);
        // Another application tag, a length one off either way.
        let mut other = data.clone();
        other[0] = 0x61;
        assert_eq!(udp(&other), Verdict::No);
        for delta in [1u8, 0xff] {
            let mut d = data.clone();
            d[1] = d[1].wrapping_add(delta);
            assert_eq!(udp(&d), Verdict::No, "length {:#x}", d[1]);
        }
        // A long-form length that should have been short.
        let mut padded = vec![AARQ, 0x81];
        padded.extend_from_slice(&data[1..]);
        assert_eq!(udp(&padded), Verdict::No);
        // Without the called AP-title, or with an AP-title of another form.
        let mut body = tlv(0xa6, &tlv(0x80, &[0x7b, 0x05]));
        body.extend(tlv(USER_INFORMATION, &tlv(0x28, &[])));
        assert_eq!(udp(&tlv(AARQ, &body)), Verdict::No);
        let mut body = tlv(CALLED_AP_TITLE, &tlv(0x04, &[0x7b, 0x01]));
        body.extend(tlv(USER_INFORMATION, &tlv(0x28, &[])));
        assert_eq!(udp(&tlv(AARQ, &body)), Verdict::No);
        // Without the user information, or with elements out of order.
        let body = tlv(CALLED_AP_TITLE, &tlv(0x80, &[0x7b, 0x01]));
        let mut longer = body.clone();
        longer.extend(tlv(0xa8, &tlv(0x02, &[0x2a])));
        assert_eq!(udp(&tlv(AARQ, &longer)), Verdict::No);
        let mut swapped = tlv(0xa6, &tlv(0x80, &[0x7b, 0x05]));
        swapped.extend(body.clone());
        swapped.extend(tlv(USER_INFORMATION, &tlv(0x28, &[])));
        assert_eq!(udp(&tlv(AARQ, &swapped)), Verdict::No);
        // A universal element among the context-specific ones.
        let mut universal = body.clone();
        universal.extend(tlv(0x30, &[0x02, 0x01, 0x00]));
        universal.extend(tlv(USER_INFORMATION, &tlv(0x28, &[])));
        assert_eq!(udp(&tlv(AARQ, &universal)), Verdict::No);
        // An element's length past the message.
        let mut d = data.clone();
        d[3] += 1;
        assert_eq!(udp(&d), Verdict::No);
        // The bare tag and a ZIP's or a BER sequence's first bytes.
        assert_eq!(udp(&[AARQ]), Verdict::No);
        assert_eq!(udp(&[AARQ, 0x00]), Verdict::No);
        assert_eq!(run(Transport::Tcp, &[AARQ, 0x03, 0xa2, 0x01, 0x80]), Verdict::No);
        assert_eq!(udp(b"PK\x03\x04"), Verdict::No);
    }
}
