//! The signalling of one generated call: SIP (RFC 3261) over UDP or TCP
//! between two phones, with the SDP offer in the INVITE and the answer in
//! the 200 OK (RFC 3264) announcing where each phone receives its RTP; on
//! some calls a re-INVITE mid-call moves one phone's audio to another port.

use std::fmt;
use std::io::{self, Write};
use std::net::IpAddr;

pub(crate) const PORT: u16 = 5060;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Codec {
    /// G.711 µ-law: 8,000 one-byte samples a second.
    Pcmu,
    /// G.711 A-law: the same, A-law coded.
    Pcma,
    /// G.729: 8 kbit/s, ten bytes per 10 ms.
    G729,
    /// G.722: 16,000 samples a second in 64 kbit/s of sub-band ADPCM, its
    /// RTP clock at 8 kHz all the same (RFC 3551 §4.5.2).
    G722,
}

impl Codec {
    pub(crate) fn payload_type(self) -> u8 {
        match self {
            Codec::Pcmu => 0,
            Codec::Pcma => 8,
            Codec::G729 => 18,
            Codec::G722 => 9,
        }
    }

    /// Bytes of 20 ms of audio.
    pub(crate) fn payload_len(self) -> usize {
        match self {
            Codec::Pcmu | Codec::Pcma | Codec::G722 => 160,
            Codec::G729 => 20,
        }
    }

    fn rtpmap(self) -> &'static str {
        match self {
            Codec::Pcmu => "PCMU/8000",
            Codec::Pcma => "PCMA/8000",
            Codec::G729 => "G729/8000",
            Codec::G722 => "G722/8000",
        }
    }
}

/// What both phones know of one call. Index 0 is the caller, 1 the callee.
pub(crate) struct Call {
    pub(crate) addr: [IpAddr; 2],
    pub(crate) user: [u32; 2],
    pub(crate) tag: [u32; 2],
    pub(crate) call_id: u64,
    pub(crate) branch: u64,
    pub(crate) codec: Codec,
    /// Silence suppression; G.729 says so with Annex B.
    pub(crate) vad: bool,
    pub(crate) audio_port: [u16; 2],
    pub(crate) video_port: Option<[u16; 2]>,
    pub(crate) callee_hangs_up: bool,
    /// SIP over one TCP connection from the caller (else UDP).
    pub(crate) tcp: bool,
    /// The INVITE's description carries this many more attribute lines,
    /// as phones offering many options send: enough to pass the MTU.
    pub(crate) padding: u16,
    /// The party that sends a re-INVITE mid-call and the audio port it moves to.
    pub(crate) moved: Option<(usize, u16)>,
}

impl Call {
    /// The Call-ID as its header gives it.
    pub(crate) fn call_id_text(&self) -> String {
        format!("{:016x}@{}", self.call_id, Host(self.addr[0]))
    }

    /// The URI of `side` in From and To.
    pub(crate) fn uri(&self, side: usize) -> String {
        format!("sip:{}@{}", self.user[side], Host(self.addr[side]))
    }
}

/// The messages of a call, in the order they are sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Message {
    Invite,
    Trying,
    Ringing,
    Answer,
    Ack,
    Bye,
    ByeOk,
    /// The re-INVITE of the party that moves its audio, the other's 200 OK
    /// and the ACK to it.
    ReInvite,
    ReInviteOk,
    ReAck,
}

impl Message {
    pub(crate) const CALL: [Message; 7] = [
        Message::Invite,
        Message::Trying,
        Message::Ringing,
        Message::Answer,
        Message::Ack,
        Message::Bye,
        Message::ByeOk,
    ];

    /// 0 if the caller sends it, 1 if the callee does.
    pub(crate) fn sender(self, call: &Call) -> usize {
        match self {
            Message::Invite | Message::Ack => 0,
            Message::Trying | Message::Ringing | Message::Answer => 1,
            Message::Bye => usize::from(call.callee_hangs_up),
            Message::ByeOk => usize::from(!call.callee_hangs_up),
            Message::ReInvite | Message::ReAck => call.mover(),
            Message::ReInviteOk => 1 - call.mover(),
        }
    }
}

impl Call {
    /// The party that sends the re-INVITE (the caller when there is none).
    fn mover(&self) -> usize {
        self.moved.map_or(0, |(side, _)| side)
    }

    /// Requests `side` sent before its BYE: the caller's INVITE, and a
    /// re-INVITE of its own. Each side numbers its requests from 1.
    fn requests_before_bye(&self, side: usize) -> u32 {
        u32::from(side == 0) + u32::from(self.moved.is_some_and(|(s, _)| s == side))
    }
}

/// An address as the host part of a SIP URI: IPv6 goes in brackets.
struct Host(IpAddr);

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            IpAddr::V4(a) => write!(f, "{a}"),
            IpAddr::V6(a) => write!(f, "[{a}]"),
        }
    }
}

fn ip_version(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 4 } else { 6 }
}

/// Writes `msg` into `out`; `body` is scratch space for its SDP.
pub(crate) fn write(call: &Call, msg: Message, body: &mut Vec<u8>, out: &mut Vec<u8>) -> io::Result<()> {
    out.clear();
    body.clear();
    let host = |side: usize| Host(call.addr[side]);
    let user = |side: usize| call.user[side];
    match msg {
        Message::Invite => write!(out, "INVITE sip:{}@{} SIP/2.0\r\n", user(1), host(1))?,
        Message::Ack => write!(out, "ACK sip:{}@{}:{PORT} SIP/2.0\r\n", user(1), host(1))?,
        Message::Bye => {
            let to = 1 - msg.sender(call);
            write!(out, "BYE sip:{}@{}:{PORT} SIP/2.0\r\n", user(to), host(to))?
        }
        Message::ReInvite | Message::ReAck => {
            let to = 1 - msg.sender(call);
            let method = if msg == Message::ReInvite { "INVITE" } else { "ACK" };
            write!(out, "{method} sip:{}@{}:{PORT} SIP/2.0\r\n", user(to), host(to))?
        }
        Message::Trying => out.extend_from_slice(b"SIP/2.0 100 Trying\r\n"),
        Message::Ringing => out.extend_from_slice(b"SIP/2.0 180 Ringing\r\n"),
        Message::Answer | Message::ByeOk | Message::ReInviteOk => out.extend_from_slice(b"SIP/2.0 200 OK\r\n"),
    }
    // A response repeats the Via, From, To, Call-ID and CSeq of its request;
    // the dialog's requester is whoever sent that request.
    let (requester, branch, cseq, method) = match msg {
        Message::Invite | Message::Trying | Message::Ringing | Message::Answer => (0, call.branch, 1, "INVITE"),
        Message::Ack => (0, call.branch.wrapping_add(1), 1, "ACK"),
        Message::Bye | Message::ByeOk => {
            let by = Message::Bye.sender(call);
            (by, call.branch.wrapping_add(2), 1 + call.requests_before_bye(by), "BYE")
        }
        Message::ReInvite | Message::ReInviteOk => {
            let by = call.mover();
            (by, call.branch.wrapping_add(3), 1 + u32::from(by == 0), "INVITE")
        }
        Message::ReAck => {
            let by = call.mover();
            (by, call.branch.wrapping_add(4), 1 + u32::from(by == 0), "ACK")
        }
    };
    let other = 1 - requester;
    let transport = if call.tcp { "TCP" } else { "UDP" };
    write!(
        out,
        "Via: SIP/2.0/{transport} {}:{PORT};branch=z9hG4bK{branch:016x}\r\n",
        host(requester)
    )?;
    if matches!(
        msg,
        Message::Invite | Message::Ack | Message::Bye | Message::ReInvite | Message::ReAck
    ) {
        out.extend_from_slice(b"Max-Forwards: 70\r\n");
    }
    write!(
        out,
        "From: <sip:{}@{}>;tag={:08x}\r\n",
        user(requester),
        host(requester),
        call.tag[requester]
    )?;
    write!(out, "To: <sip:{}@{}>", user(other), host(other))?;
    // The callee's tag makes the dialog: every message from the 180 on carries it.
    if !matches!(msg, Message::Invite | Message::Trying) {
        write!(out, ";tag={:08x}", call.tag[other])?;
    }
    write!(out, "\r\nCall-ID: {:016x}@{}\r\n", call.call_id, host(0))?;
    write!(out, "CSeq: {cseq} {method}\r\n")?;
    let sender = msg.sender(call);
    if matches!(
        msg,
        Message::Invite | Message::Answer | Message::ReInvite | Message::ReInviteOk
    ) {
        let param = if call.tcp { ";transport=tcp" } else { "" };
        write!(
            out,
            "Contact: <sip:{}@{}:{PORT}{param}>\r\n",
            user(sender),
            host(sender)
        )?;
        sdp(call, msg, sender, body)?;
    }
    if sender == requester {
        out.extend_from_slice(b"User-Agent: sluice-gen/0.1\r\n");
    } else {
        out.extend_from_slice(b"Server: sluice-gen/0.1\r\n");
    }
    if matches!(msg, Message::Invite | Message::ReInvite) {
        out.extend_from_slice(b"Allow: INVITE, ACK, CANCEL, BYE, OPTIONS\r\n");
    }
    if !body.is_empty() {
        out.extend_from_slice(b"Content-Type: application/sdp\r\n");
    }
    write!(out, "Content-Length: {}\r\n\r\n", body.len())?;
    out.extend_from_slice(body);
    Ok(())
}

/// The session description `side` sends in `msg`: where it receives audio
/// (and video). The re-INVITE's offer names the mover's new audio port, in
/// a new version of its session (RFC 3264 §8).
fn sdp(call: &Call, msg: Message, side: usize, out: &mut Vec<u8>) -> io::Result<()> {
    let addr = call.addr[side];
    let v = ip_version(addr);
    let session = (call.call_id as u32) ^ side as u32;
    let again = matches!(msg, Message::ReInvite | Message::ReInviteOk);
    let version = session.wrapping_add(u32::from(again));
    write!(
        out,
        "v=0\r\no={} {session} {version} IN IP{v} {addr}\r\n",
        call.user[side]
    )?;
    write!(out, "s=call\r\nc=IN IP{v} {addr}\r\nt=0 0\r\n")?;
    let pt = call.codec.payload_type();
    let port = match call.moved {
        Some((mover, port)) if again && mover == side => port,
        _ => call.audio_port[side],
    };
    write!(out, "m=audio {port} RTP/AVP {pt}\r\n")?;
    write!(out, "a=rtpmap:{pt} {}\r\n", call.codec.rtpmap())?;
    if call.codec == Codec::G729 {
        let annex_b = if call.vad { "yes" } else { "no" };
        write!(out, "a=fmtp:{pt} annexb={annex_b}\r\n")?;
    }
    out.extend_from_slice(b"a=ptime:20\r\na=sendrecv\r\n");
    if msg == Message::Invite {
        // Header extensions and source descriptions, as a softphone offers
        // them: attributes a monitor reads past.
        for i in 0..call.padding {
            match i % 3 {
                0 => write!(
                    out,
                    "a=extmap:{} urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id\r\n",
                    1 + i / 3 % 14
                )?,
                1 => write!(out, "a=ssrc:{} cname:{:016x}-{i:04}\r\n", session, call.call_id)?,
                _ => write!(
                    out,
                    "a=ssrc:{} msid:stream-{:016x} track-{i:04}\r\n",
                    session, call.call_id
                )?,
            }
        }
    }
    if let Some(ports) = call.video_port {
        write!(out, "m=video {} RTP/AVP 96\r\n", ports[side])?;
        out.extend_from_slice(b"a=rtpmap:96 H264/90000\r\na=fmtp:96 profile-level-id=42e01f\r\na=sendrecv\r\n");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Call {
        Call {
            addr: ["10.0.0.1".parse().unwrap(), "2001:db8::2".parse().unwrap()],
            user: [1001, 2002],
            tag: [0xaabb, 0xccdd],
            call_id: 0x1234,
            branch: 0x10,
            codec: Codec::G729,
            vad: true,
            audio_port: [16384, 20000],
            video_port: Some([16386, 20002]),
            callee_hangs_up: true,
            tcp: false,
            padding: 0,
            moved: None,
        }
    }

    fn text(msg: Message) -> String {
        text_of(&call(), msg)
    }

    fn text_of(call: &Call, msg: Message) -> String {
        let (mut body, mut out) = (Vec::new(), Vec::new());
        write(call, msg, &mut body, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_re_invite_moves_its_senders_audio_in_the_same_dialog() {
        for mover in [0, 1] {
            let call = Call {
                moved: Some((mover, 30000)),
                tcp: true,
                ..call()
            };
            let reinvite = text_of(&call, Message::ReInvite);
            let (head, body) = reinvite.split_once("\r\n\r\n").unwrap();
            assert!(head.starts_with("INVITE sip:"), "{head}");
            assert!(head.contains("Via: SIP/2.0/TCP "), "{head}");
            assert!(head.contains(&format!("Content-Length: {}", body.len())));
            // The dialog's tags, the mover's in From; its CSeq counts its own requests.
            let (from_tag, to_tag) = if mover == 0 {
                ("0000aabb", "0000ccdd")
            } else {
                ("0000ccdd", "0000aabb")
            };
            assert!(head.contains(&format!(">;tag={from_tag}\r\nTo: ")), "{head}");
            assert!(
                head.contains(&format!(">;tag={to_tag}\r\nCall-ID: 0000000000001234@10.0.0.1\r\n")),
                "{head}"
            );
            let cseq = if mover == 0 { 2 } else { 1 };
            assert!(head.contains(&format!("CSeq: {cseq} INVITE\r\n")), "{head}");
            assert!(body.contains("m=audio 30000 RTP/AVP 18\r\n"), "{body}");
            // The other side answers with its port unchanged.
            let ok = text_of(&call, Message::ReInviteOk);
            let other_port = call.audio_port[1 - mover];
            assert!(ok.contains(&format!("m=audio {other_port} RTP/AVP 18\r\n")), "{ok}");
            assert!(ok.contains(&format!("CSeq: {cseq} INVITE\r\n")));
            assert!(text_of(&call, Message::ReAck).contains(&format!("CSeq: {cseq} ACK\r\n")));
            // The BYE of the mover comes after its re-INVITE.
            let bye = text_of(&call, Message::Bye);
            let by = usize::from(call.callee_hangs_up);
            let bye_cseq = if by == 0 { 2 } else { 1 } + u32::from(by == mover);
            assert!(bye.contains(&format!("CSeq: {bye_cseq} BYE\r\n")), "{bye}");
        }
    }

    #[test]
    fn a_padded_offer_passes_the_mtu_with_its_length_right() {
        let call = Call { padding: 40, ..call() };
        let invite = text_of(&call, Message::Invite);
        let (head, body) = invite.split_once("\r\n\r\n").unwrap();
        assert!(invite.len() > 1500 + 500, "{}", invite.len());
        assert!(head.ends_with(&format!("\r\nContent-Length: {}", body.len())));
        assert_eq!(body.matches("\r\na=ssrc:").count(), 26);
        assert!(!text_of(&call, Message::Answer).contains("a=ssrc:"));
    }

    #[test]
    fn the_invite_offers_the_callers_ports_with_an_exact_length() {
        let invite = text(Message::Invite);
        assert!(
            invite.starts_with("INVITE sip:2002@[2001:db8::2] SIP/2.0\r\n"),
            "{invite}"
        );
        let (head, body) = invite.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        assert!(body.contains("c=IN IP4 10.0.0.1\r\n"));
        assert!(body.contains("m=audio 16384 RTP/AVP 18\r\n"));
        assert!(body.contains("a=fmtp:18 annexb=yes\r\n"));
        assert!(body.contains("m=video 16386 RTP/AVP 96\r\n"));
    }

    #[test]
    fn the_answer_carries_the_callees_ports_and_tag() {
        let answer = text(Message::Answer);
        assert!(answer.starts_with("SIP/2.0 200 OK\r\n"));
        assert!(answer.contains("To: <sip:2002@[2001:db8::2]>;tag=0000ccdd\r\n"));
        assert!(answer.contains("CSeq: 1 INVITE\r\n"));
        assert!(answer.contains("c=IN IP6 2001:db8::2\r\n"));
        assert!(answer.contains("m=audio 20000 RTP/AVP 18\r\n"));
    }

    #[test]
    fn a_bye_from_the_callee_goes_to_the_caller() {
        let bye = text(Message::Bye);
        assert!(bye.starts_with("BYE sip:1001@10.0.0.1:5060 SIP/2.0\r\n"), "{bye}");
        assert!(bye.contains("From: <sip:2002@[2001:db8::2]>;tag=0000ccdd\r\n"));
        assert!(bye.contains("CSeq: 1 BYE\r\n"));
        let ok = text(Message::ByeOk);
        assert!(ok.contains("CSeq: 1 BYE\r\n") && ok.contains("Content-Length: 0\r\n\r\n"));
        assert_eq!(Message::ByeOk.sender(&call()), 0);
    }
}
