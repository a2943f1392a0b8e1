//! STUN (RFC 8489: a 20-byte header with the magic cookie 0x2112A442 and a length that counts
//! exactly the attributes after it, each padded to four bytes; classic RFC 3489 without the
//! cookie, UDP only) and TURN (RFC 8656), over UDP or TCP (raw, or RFC 4571 framed). Vendor attributes and
//! the REALM name the application. Later packets of the flow are demultiplexed as RFC 7983
//! says: STUN, TURN ChannelData, DTLS (the label becomes DTLS) or RTP (STUN.RTP, or SRTP when
//! the application is known); RTCP, which often comes first, is passed over for the RTP after it.

use std::net::IpAddr;

use super::{
    Context, Dissector, Field, FirstByte, Found, Metadata, Packet, Prefix, Side, Transport, Verdict, Wants, be16, be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "STUN",
    wants: Wants::Both,
    first_byte: FirstByte::ANY,
    // Over TCP the magic cookie fills bytes 4 to 7, or 6 to 9 behind an
    // RFC 4571 length: bytes 6 and 7 are 0xA442 or 0x2112.
    prefix: Prefix {
        tcp: &[Field::u16(6, 0x2112, 0xA442)],
        udp: &[],
    },
    inspect,
}];

const COOKIE: u32 = 0x2112_A442;
const HEADER: usize = 20;
/// Messages of a TCP stream head looked at; each is at least 20 bytes.
const MAX_TCP_MESSAGES: usize = 64;

const ATTR_REALM: u16 = 0x0014;
const ATTR_SOFTWARE: u16 = 0x8022;

/// Why bytes are not a STUN message.
#[derive(Debug, PartialEq, Eq)]
enum NotStun {
    /// They agree with a message so far, but end before it does.
    Short,
    Bad,
}

/// A well-formed STUN message at the start of some bytes.
struct Message<'a> {
    msg_type: u16,
    classic: bool,
    /// The attributes, padding included.
    attrs: &'a [u8],
}

impl Message<'_> {
    fn len(&self) -> usize {
        HEADER + self.attrs.len()
    }

    fn is_request(&self) -> bool {
        self.msg_type & 0x0110 == 0
    }

    /// Attribute types and values, in order; the walk in `parse` proved them well formed.
    fn attributes(&self) -> impl Iterator<Item = (u16, &[u8])> {
        let attrs = self.attrs;
        let mut off = 0usize;
        std::iter::from_fn(move || {
            let kind = be16(attrs, off)?;
            let len = usize::from(be16(attrs, off + 2)?);
            let value = attrs.get(off + 4..off + 4 + len)?;
            off += 4 + padded(len);
            Some((kind, value))
        })
    }
}

fn padded(len: usize) -> usize {
    (len + 3) & !3
}

/// Message types of RFC 8489 / RFC 8656 / RFC 6062 (methods 0x001..=0x00C in any class), and
/// the 0x080x types WhatsApp uses alongside them.
fn known_type(msg_type: u16) -> bool {
    let method = (msg_type & 0x000F) | ((msg_type & 0x00E0) >> 1) | ((msg_type & 0x3E00) >> 2);
    (1..=0x00C).contains(&method) || is_whatsapp_type(msg_type)
}

fn is_whatsapp_type(msg_type: u16) -> bool {
    matches!(msg_type, 0x0800 | 0x0801 | 0x0802 | 0x0804 | 0x0805)
}

/// RFC 3489 message types and those of early TURN drafts: binding, shared secret, allocate,
/// send, data indication and set-active-destination, with their responses.
const CLASSIC_TYPES: [u16; 16] = [
    0x0001, 0x0101, 0x0111, 0x0002, 0x0102, 0x0112, 0x0003, 0x0103, 0x0113, 0x0004, 0x0104, 0x0114, 0x0115, 0x0006,
    0x0106, 0x0116,
];

/// Parses the STUN message at the start of `data`. `exact`: `data` must hold nothing else
/// (a UDP datagram). Classic messages are only accepted when `exact`, as they have no cookie.
fn parse(data: &[u8], exact: bool) -> Result<Message<'_>, NotStun> {
    let short_or_bad = |plausible: bool| if plausible { NotStun::Short } else { NotStun::Bad };
    let Some(msg_type) = be16(data, 0) else {
        return Err(short_or_bad(data.first().is_some_and(|&b| b & 0xC0 == 0)));
    };
    if msg_type & 0xC000 != 0 {
        return Err(NotStun::Bad);
    }
    let Some(cookie) = be32(data, 4) else {
        return Err(short_or_bad(!exact));
    };
    let classic = cookie != COOKIE;
    let type_ok = if classic {
        exact && CLASSIC_TYPES.contains(&msg_type)
    } else {
        known_type(msg_type)
    };
    if !type_ok {
        return Err(NotStun::Bad);
    }
    let len = usize::from(be16(data, 2).ok_or(NotStun::Bad)?);
    let total = HEADER + len;
    if exact && data.len() != total {
        return Err(NotStun::Bad);
    }
    let attrs = data.get(HEADER..total).ok_or(NotStun::Short)?;
    // Each step moves on by at least 4 bytes, so the walk ends within len / 4 steps. The
    // padding of the last attribute may be missing: WhatsApp leaves it out.
    let mut off = 0usize;
    while off < attrs.len() {
        let value_len = usize::from(be16(attrs, off + 2).ok_or(NotStun::Bad)?);
        off += 4 + value_len;
        if off != attrs.len() {
            off += padded(value_len) - value_len;
        }
    }
    if off != attrs.len() {
        return Err(NotStun::Bad);
    }
    Ok(Message {
        msg_type,
        classic,
        attrs,
    })
}

/// The application a REALM names, by its domain.
fn realm_app(realm: &[u8]) -> Option<&'static str> {
    const APPS: &[(&[u8], &str)] = &[
        (b"google.com", "GoogleCall"),
        (b"signal.org", "SignalVoip"),
        (b"whispersystems.org", "SignalVoip"),
        (b"telegram.org", "TelegramVoip"),
        (b"viber.com", "ViberVoip"),
        (b"facebook.com", "FacebookVoip"),
    ];
    APPS.iter().find_map(|&(domain, app)| {
        let rest = realm.len().checked_sub(domain.len())?;
        let (head, tail) = realm.split_at(rest);
        let whole_label = head.is_empty() || head.ends_with(b".");
        (whole_label && tail.eq_ignore_ascii_case(domain)).then_some(app)
    })
}

fn is_domain(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
}

/// Notes the message's REALM and SOFTWARE and returns the application its attributes name.
fn inspect_attributes(msg: &Message, side: Side, ctx: &mut Context) -> Option<&'static str> {
    let mut app = is_whatsapp_type(msg.msg_type).then_some("WhatsAppCall");
    for (kind, value) in msg.attributes() {
        let named = match kind {
            // Not registered with IANA; Zoom's servers put them in classic messages.
            0x0101 | 0x0103 => Some("Zoom"),
            // Not registered either; seen only in WhatsApp calls.
            0x4000..=0x4004 | 0x4007 => Some("WhatsAppCall"),
            // [MS-ICE2] candidate identifier and implementation version, [MS-TURN] service
            // quality and multiplexed session id.
            0x8054 | 0x8055 | 0x8070 | 0x8095 => Some("Skype_TeamsCall"),
            ATTR_REALM if is_domain(value) => {
                Metadata::set_once(&mut ctx.meta.host, value);
                realm_app(value)
            }
            ATTR_SOFTWARE if !value.is_empty() => {
                let banner = match (msg.is_request(), side) {
                    (true, Side::Up) | (false, Side::Down) => &mut ctx.meta.client_banner,
                    _ => &mut ctx.meta.server_banner,
                };
                Metadata::set_once(banner, value.strip_suffix(b"\0").unwrap_or(value));
                None
            }
            _ => None,
        };
        app = app.or(named);
    }
    app
}

/// The application the REALM noted earlier in this flow names.
fn noted_app(ctx: &Context) -> Option<&'static str> {
    ctx.meta.host.as_deref().and_then(|host| realm_app(host.as_bytes()))
}

fn stun(app: Option<&'static str>) -> Verdict {
    match app {
        // Settled: later STUN could only name it again, and nDPI does not relabel such a flow
        // for the media that follows either.
        Some(app) => Verdict::Yes(Found::new("STUN").app(app)),
        None => Verdict::Yes(Found::new("STUN").more()),
    }
}

fn is_broadcast(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(a) => a.is_multicast() || a.is_broadcast(),
        IpAddr::V6(a) => a.is_multicast(),
    }
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if is_broadcast(pkt.server) {
        return Verdict::No;
    }
    match pkt.transport {
        Transport::Udp => inspect_datagram(pkt, pkt.data, ctx, true),
        Transport::Tcp => inspect_stream(pkt, ctx),
    }
}

/// One UDP datagram, or the payload of a ChannelData message (`outer` false).
fn inspect_datagram(pkt: &Packet, data: &[u8], ctx: &mut Context, outer: bool) -> Verdict {
    let first = pkt.index == 0 && pkt.other_index == 0;
    match parse(data, true) {
        // A classic binding request without attributes is twenty bytes with little to check.
        Ok(msg) if msg.classic && msg.attrs.is_empty() && first => return Verdict::Maybe,
        Ok(msg) => {
            let app = inspect_attributes(&msg, pkt.side, ctx);
            return stun(app.or_else(|| noted_app(ctx)));
        }
        Err(_) => {}
    }
    if let Some(inner) = channel_data(data, false) {
        // A flow seen from its middle may start with ChannelData: four bytes to go on.
        return match (first, outer) {
            (true, _) => Verdict::Maybe,
            (false, true) => match inspect_datagram(pkt, inner, ctx, false) {
                Verdict::No => stun(noted_app(ctx)),
                verdict => verdict,
            },
            (false, false) => Verdict::No,
        };
    }
    // What follows STUN in the same flow; a flow that starts with it is some other dissector's.
    if first {
        Verdict::No
    } else if is_dtls(data) {
        let found = Found::new("DTLS");
        Verdict::Yes(noted_app(ctx).map_or(found, |app| found.app(app)))
    } else if is_rtp(data) {
        Verdict::Yes(match noted_app(ctx) {
            Some(app) => Found::new("SRTP").app(app),
            None => Found::new("STUN").app("RTP"),
        })
    } else if is_rtcp(data) {
        // The label stands; the RTP that comes with it says what the media is.
        Verdict::Maybe
    } else {
        Verdict::No
    }
}

/// A TCP stream head: STUN messages (RFC 8489 §6.2.2) or RFC 4571 framed ones, and TURN
/// ChannelData.
fn inspect_stream(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let framed = match (be16(data, 0), be32(data, 6)) {
        (Some(len), Some(COOKIE)) => usize::from(len) >= HEADER && be32(data, 4) != Some(COOKIE),
        _ => false,
    };
    let mut rest = data;
    let mut seen = false;
    let mut app = None;
    for _ in 0..MAX_TCP_MESSAGES {
        if rest.is_empty() {
            break;
        }
        let message = if framed {
            match be16(rest, 0).map(usize::from) {
                Some(len) => match rest.get(2..2 + len).map(|m| parse(m, true)) {
                    Some(Ok(msg)) if msg.classic => Err(NotStun::Bad),
                    Some(parsed) => parsed,
                    None => Err(NotStun::Short),
                },
                None => Err(NotStun::Short),
            }
        } else {
            parse(rest, false)
        };
        let step = match message {
            Ok(msg) => {
                seen = true;
                app = app.or(inspect_attributes(&msg, pkt.side, ctx));
                msg.len() + if framed { 2 } else { 0 }
            }
            Err(NotStun::Short) if !seen => return Verdict::Maybe,
            Err(NotStun::Bad) if !seen => return Verdict::No,
            Err(_) => match channel_data(rest, true) {
                Some(payload) if seen && !framed => 4 + padded(payload.len()),
                _ => break,
            },
        };
        rest = rest.get(step..).unwrap_or_default();
    }
    stun(app.or_else(|| noted_app(ctx)))
}

/// The payload of the TURN ChannelData message (RFC 8656 §12.4) at the start of `data`:
/// channels 0x4000..=0x4FFF; over TCP the message is padded to four bytes, over UDP it may be.
fn channel_data(data: &[u8], stream: bool) -> Option<&[u8]> {
    let channel = be16(data, 0)?;
    let len = usize::from(be16(data, 2)?);
    let payload = data.get(4..4 + len)?;
    let fits = stream || data.len() <= 4 + padded(len);
    ((0x4000..=0x4FFF).contains(&channel) && len > 0 && fits).then_some(payload)
}

/// A DTLS 1.0/1.2/1.3 record header (RFC 6347 §4.1) whose record fits the datagram.
fn is_dtls(data: &[u8]) -> bool {
    let (Some(&kind), Some(version), Some(len)) = (data.first(), be16(data, 1), be16(data, 11)) else {
        return false;
    };
    (20..=25).contains(&kind) && matches!(version, 0xFEFF | 0xFEFD | 0xFEFC) && 13 + usize::from(len) <= data.len()
}

/// An RTP version 2 header (RFC 3550 §5.1) with a static or dynamic payload type, whose CSRC
/// list and extension fit the datagram.
fn is_rtp(data: &[u8]) -> bool {
    let (Some(&first), Some(&second)) = (data.first(), data.get(1)) else {
        return false;
    };
    let payload_type = second & 0x7F;
    let mut header = 12 + 4 * usize::from(first & 0x0F);
    if first & 0x10 != 0 {
        let Some(words) = be16(data, header + 2) else {
            return false;
        };
        header += 4 + 4 * usize::from(words);
    }
    first & 0xC0 == 0x80 && (payload_type <= 34 || payload_type >= 96) && header <= data.len()
}

/// An RTCP packet header (RFC 3550 §6.4.1: version 2, a packet type in the range RFC 5761 §4
/// keeps for RTCP, 192..=223) whose first packet fits the datagram.
fn is_rtcp(data: &[u8]) -> bool {
    let (Some(&first), Some(&kind), Some(words)) = (data.first(), data.get(1), be16(data, 2)) else {
        return false;
    };
    first & 0xC0 == 0x80 && (192..=223).contains(&kind) && 4 * (usize::from(words) + 1) <= data.len()
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{TestContext, test_packet};
    use super::*;

    fn run(transport: Transport, side: Side, index: u32, data: &[u8], t: &mut TestContext) -> Verdict {
        let mut pkt = test_packet(transport, side, 45400, 3478, data);
        pkt.index = index;
        inspect(&pkt, &mut t.ctx())
    }

    fn udp(data: &[u8], t: &mut TestContext) -> Verdict {
        run(Transport::Udp, Side::Up, 0, data, t)
    }

    /// What a STUN message yields: with an app the label is final, without one later packets
    /// are wanted.
    fn stun_found(app: Option<&'static str>) -> Verdict {
        match app {
            Some(app) => Verdict::Yes(Found::new("STUN").app(app)),
            None => Verdict::Yes(Found::new("STUN").more()),
        }
    }

    // stun_signal.pcapng: an ICE binding request (USERNAME, ICE-CONTROLLING, ...).
    const BINDING: &str = "0001004c2112a44272447772686b44722f2f396500060009574a73753a6d4e7771000000c0570004\
        0003000a802a00086d87203d9c20f140002400046e7f1eff000800147f6ff01ca0412a2e3c33c3749b9af5a89ed414df\
        802800044fb74491";

    #[test]
    fn binding_request() {
        let msg = hex(BINDING);
        let mut t = TestContext::new();
        assert_eq!(udp(&msg, &mut t), stun_found(None));
        assert!(t.meta.host.is_none());
    }

    #[test]
    fn realm_names_the_app() {
        // telegram_videocall.pcapng: an Allocate error response, 401 with REALM and NONCE.
        let msg = hex(
            "011300482112a442732f63644f7339774f4373300009001000000401556e617574686f72697a6564001500106134
             62363762643131663363626666320014000c74656c656772616d2e6f7267802200044e6f6e6580280004ee695e19",
        );
        let mut t = TestContext::new();
        assert_eq!(udp(&msg, &mut t), stun_found(Some("TelegramVoip")));
        assert_eq!(t.meta.host.as_deref(), Some("telegram.org"));
        assert_eq!(t.meta.server_banner.as_deref(), Some("None"));
        assert_eq!(realm_app(b"turn.l.google.com"), Some("GoogleCall"));
        assert_eq!(realm_app(b"signal.org"), Some("SignalVoip"));
        assert_eq!(realm_app(b"notsignal.org"), None);
        assert_eq!(realm_app(b"example.com"), None);
    }

    #[test]
    fn vendor_attributes_name_the_app() {
        // zoom_p2p.pcapng: classic binding request with Zoom's attribute 0x0101.
        let zoom = hex("00010018fca5c232b3da5b2065219f418e9b3e1a0101001431323334353637383930
             31323334353637383900");
        assert_eq!(udp(&zoom, &mut TestContext::new()), stun_found(Some("Zoom")));
        // stun_msteams_unidir.pcapng: binding success with MS implementation version.
        let teams = hex(
            "010100342112a442567009c2ae00e698d98f01908070000400000007002000080001e24473a09b3900080014081c
             187c4cf903476de30538dee3554682a1e5d080280004513d0c54",
        );
        assert_eq!(
            udp(&teams, &mut TestContext::new()),
            stun_found(Some("Skype_TeamsCall"))
        );
        // stun_wa_call.pcapng: WhatsApp's own message type 0x0802 with attributes 0x4002/0x4003.
        let wa = hex("080200142112a4423d4dfb65296240094ddef954400200080000018660b9966240030001ff000000");
        assert_eq!(udp(&wa, &mut TestContext::new()), stun_found(Some("WhatsAppCall")));
        // whatsapp_voice_and_message.pcapng: an Allocate whose only attribute, 0x4000, is not padded.
        let allocate = hex(
            "0003006a2112a4420000d160e0ec785eac996a6c400000660100b2f3a431734fd3adf65555afde4c4643a213e879
             12e8459735685561ac67357fc456daf3234f93fcac0b22c19fa9f4d9685c8b484f4c4f06ca62c415a187cdeb3a8e
             bbdc5a977ca86c9aa09b81c632b045f14b51b40509664cd6b0dc4cca87bc0545adcd",
        );
        assert_eq!(
            udp(&allocate, &mut TestContext::new()),
            stun_found(Some("WhatsAppCall"))
        );
        // Only the last attribute may go without its padding.
        let mut two = allocate[..20].to_vec();
        two.extend_from_slice(&[0x80, 0x22, 0, 3, b'a', b'b', b'c', 0x40, 0x00, 0, 4, 1, 2, 3, 4]);
        two[3] = 15;
        assert_eq!(udp(&two, &mut TestContext::new()), Verdict::No);
    }

    #[test]
    fn classic_binding() {
        // stun_classic.pcap: request with CHANGE-REQUEST, then the bare 20-byte form.
        let request = hex("000100089429ef88294dd52632c72931cb8dbb4c0003000400000000");
        assert_eq!(udp(&request, &mut TestContext::new()), stun_found(None));
        let bare = &request[..20];
        let mut bare = bare.to_vec();
        bare[3] = 0;
        assert_eq!(udp(&bare, &mut TestContext::new()), Verdict::Maybe);
        assert_eq!(
            run(Transport::Udp, Side::Down, 1, &bare, &mut TestContext::new()),
            stun_found(None)
        );
        // Classic messages are not taken from TCP, which has no datagram to bound them.
        assert_eq!(
            run(Transport::Tcp, Side::Up, 0, &request, &mut TestContext::new()),
            Verdict::No
        );
    }

    #[test]
    fn media_after_stun() {
        // stun_classic.pcap: RTP after the binding exchange.
        let rtp = hex("8012ae1604e9fa383aa6d922c4532097ca1bd297ab78d2acb2c3ebe25cc55cda");
        let mut t = TestContext::new();
        assert_eq!(udp(&rtp, &mut t), Verdict::No);
        let rtp_app = Verdict::Yes(Found::new("STUN").app("RTP"));
        assert_eq!(run(Transport::Udp, Side::Down, 2, &rtp, &mut t), rtp_app);
        // With a realm noted, the media is that application's SRTP.
        t.meta.host = Some("signal.org".into());
        let srtp = Verdict::Yes(Found::new("SRTP").app("SignalVoip"));
        assert_eq!(run(Transport::Udp, Side::Down, 2, &rtp, &mut t), srtp);
        // stun_google_meet.pcapng: a DTLS ClientHello record header.
        let mut dtls = hex("16feff00000000000000000090010000840000000000000084fefd53c42f");
        dtls.resize(13 + 0x90, 0);
        assert_eq!(
            run(Transport::Udp, Side::Up, 3, &dtls, &mut TestContext::new()),
            Verdict::Yes(Found::new("DTLS"))
        );
        assert_eq!(udp(&dtls, &mut TestContext::new()), Verdict::No);
        // ChannelData carrying RTP.
        let mut channel = vec![0x40, 0x00, 0x00, rtp.len() as u8];
        channel.extend_from_slice(&rtp);
        assert_eq!(udp(&channel, &mut TestContext::new()), Verdict::Maybe);
        assert_eq!(
            run(Transport::Udp, Side::Up, 4, &channel, &mut TestContext::new()),
            rtp_app
        );
        // RTCP (a sender report: version 2, one report block's worth of length words) is
        // passed over, for the RTP after it; one whose length runs past the datagram is not RTCP.
        let mut sr = vec![0x81, 200, 0, 12];
        sr.resize(52, 0x11);
        assert_eq!(run(Transport::Udp, Side::Down, 2, &sr, &mut t), Verdict::Maybe);
        assert_eq!(run(Transport::Udp, Side::Down, 2, &sr[..48], &mut t), Verdict::No);
        let mut below = sr.clone();
        below[1] = 191;
        assert_eq!(run(Transport::Udp, Side::Down, 2, &below, &mut t), Verdict::No);
        assert_eq!(
            udp(&sr, &mut TestContext::new()),
            Verdict::No,
            "a flow that starts with it"
        );
        // Random bytes after STUN end the flow's inspection.
        assert_eq!(
            run(Transport::Udp, Side::Up, 4, b"\x17\x03\x03\x00\x10garbage", &mut t),
            Verdict::No
        );
    }

    #[test]
    fn tcp_streams() {
        let msg = hex(BINDING);
        let mut t = TestContext::new();
        assert_eq!(run(Transport::Tcp, Side::Up, 0, &msg, &mut t), stun_found(None));
        assert_eq!(run(Transport::Tcp, Side::Up, 0, &msg[..30], &mut t), Verdict::Maybe);
        assert_eq!(run(Transport::Tcp, Side::Up, 0, &msg[..3], &mut t), Verdict::Maybe);
        // RFC 4571 framing, two messages, the second naming Google by its realm.
        let realm = hex("000300182112a442000102030405060708090a0b001400117475726e2e6c2e676f6f676c652e636f6d000000");
        let mut framed = vec![0, msg.len() as u8];
        framed.extend_from_slice(&msg);
        framed.extend_from_slice(&[0, realm.len() as u8]);
        framed.extend_from_slice(&realm);
        let mut t = TestContext::new();
        assert_eq!(
            run(Transport::Tcp, Side::Up, 1, &framed, &mut t),
            stun_found(Some("GoogleCall"))
        );
        assert_eq!(t.meta.host.as_deref(), Some("turn.l.google.com"));
        assert_eq!(
            run(Transport::Tcp, Side::Up, 0, &framed[..40], &mut TestContext::new()),
            Verdict::Maybe
        );
        // A framed classic message after it is not read: TCP has no classic STUN.
        let zoom = hex("00010018fca5c232b3da5b2065219f418e9b3e1a010100143132333435363738393031323334353637383900");
        let mut classic = vec![0, msg.len() as u8];
        classic.extend_from_slice(&msg);
        classic.extend_from_slice(&[0, zoom.len() as u8]);
        classic.extend_from_slice(&zoom);
        assert_eq!(
            run(Transport::Tcp, Side::Up, 1, &classic, &mut TestContext::new()),
            stun_found(None)
        );
        // Raw STUN, padded ChannelData, then something else: the STUN decides.
        let mut raw = msg.clone();
        raw.extend_from_slice(&[0x40, 0x01, 0x00, 0x03, 1, 2, 3, 0]);
        raw.extend_from_slice(b"\x16\xfe\xfd junk");
        assert_eq!(
            run(Transport::Tcp, Side::Up, 2, &raw, &mut TestContext::new()),
            stun_found(None)
        );
        // A first message that is no STUN, even with a cookie further on.
        let mut bad = msg.clone();
        bad[0] = 0x80;
        assert_eq!(
            run(Transport::Tcp, Side::Up, 0, &bad, &mut TestContext::new()),
            Verdict::No
        );
    }

    #[test]
    fn other_protocols_are_not_stun() {
        let mut t = TestContext::new();
        // A DNS query, a TLS ClientHello start, QUIC, WireGuard initiation.
        let dns = hex("12340100000100000000000003777777076578616d706c6503636f6d0000010001");
        assert_eq!(udp(&dns, &mut t), Verdict::No);
        assert_eq!(
            udp(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", &mut t),
            Verdict::No
        );
        assert_eq!(
            udp(&[0xc3, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0], &mut t),
            Verdict::No
        );
        let mut wg = vec![1, 0, 0, 0];
        wg.resize(148, 0x5a);
        assert_eq!(udp(&wg, &mut t), Verdict::No);
        let tcp = run(
            Transport::Tcp,
            Side::Up,
            0,
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            &mut t,
        );
        assert_eq!(tcp, Verdict::No);
        assert!(t.meta.host.is_none());
    }

    #[test]
    fn broadcast_is_not_stun() {
        let msg = hex(BINDING);
        let mut pkt = test_packet(Transport::Udp, Side::Up, 5000, 3478, &msg);
        pkt.server = IpAddr::from([239, 255, 255, 250]);
        assert_eq!(inspect(&pkt, &mut TestContext::new().ctx()), Verdict::No);
    }

    #[test]
    fn hostile_stun() {
        let msg = hex(BINDING);
        let mut t = TestContext::new();
        // Length one word too long or short, or not where the attributes end, an unknown method.
        for (at, value) in [(3usize, 0x50u8), (3, 0x48), (3, 0x4d), (1, 0x0f)] {
            let mut bad = msg.clone();
            bad[at] = value;
            assert_eq!(udp(&bad, &mut t), Verdict::No, "byte {at} = {value:#x}");
        }
        // An attribute whose length points past the message.
        let mut past = msg.clone();
        past[22] = 0xff;
        assert_eq!(udp(&past, &mut t), Verdict::No);
        // A huge declared length on TCP waits for more, a tiny one is refused.
        let mut huge = msg[..20].to_vec();
        huge[2] = 0xff;
        huge[3] = 0xfc;
        assert_eq!(run(Transport::Tcp, Side::Up, 0, &huge, &mut t), Verdict::Maybe);
        // The header alone, then a stream of zero-length attributes up to the limit.
        let mut zeros = msg[..20].to_vec();
        zeros[2] = 0x0f;
        zeros[3] = 0xfc;
        zeros.resize(20 + 0x0ffc, 0);
        assert_eq!(udp(&zeros, &mut t), stun_found(None));
        assert_eq!(channel_data(&[0x40, 0x01, 0xff, 0xff, 1, 2], false), None);
        assert!(!is_rtp(&[
            0x90, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xbe, 0xde, 0xff, 0xff
        ]));
        assert!(!is_dtls(&[0x16, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x00]));
        for len in 0..24 {
            assert_eq!(udp(&msg[..len], &mut t), Verdict::No);
        }
    }
}
