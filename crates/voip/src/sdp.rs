//! Session descriptions (SDP, RFC 8866) in SIP bodies: where each party
//! receives its media, with which payload types and codecs.
//!
//! Read are `c=` (session and media level), `m=` (media, port, transport,
//! payload types), `a=rtpmap`, `a=rtcp` (RFC 3605), `a=rtcp-mux` (RFC
//! 5761), `a=crypto` (RFC 4568) and the direction attributes. A profile
//! with `SAVP` (RTP/SAVP, RTP/SAVPF, UDP/TLS/RTP/SAVPF) or an `a=crypto`
//! marks the media as SRTP. Static payload types name their codec from RFC
//! 3551's table when no `a=rtpmap` does.

use std::net::IpAddr;

/// Why a body is not a session description call tracking can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, thiserror::Error)]
pub enum SdpError {
    #[error("not text")]
    NotText,
    /// A `c=` line whose address is not an IPv4 or IPv6 address.
    #[error("bad c= line")]
    BadConnection,
    #[error("bad m= line")]
    BadMedia,
    #[error("bad a=rtpmap line")]
    BadRtpmap,
    /// More `m=` lines than [`MAX_MEDIA`].
    #[error("too many m= lines")]
    TooManyMedia,
}

impl SdpError {
    pub const ALL: [SdpError; 5] = [
        SdpError::NotText,
        SdpError::BadConnection,
        SdpError::BadMedia,
        SdpError::BadRtpmap,
        SdpError::TooManyMedia,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SdpError::NotText => "sdp_not_text",
            SdpError::BadConnection => "sdp_bad_connection",
            SdpError::BadMedia => "sdp_bad_media",
            SdpError::BadRtpmap => "sdp_bad_rtpmap",
            SdpError::TooManyMedia => "sdp_too_many_media",
        }
    }

    pub fn index(self) -> usize {
        SdpError::ALL.iter().position(|&e| e == self).expect("listed")
    }
}

/// Media descriptions kept per body; a body with more is refused.
pub const MAX_MEDIA: usize = 16;
/// Payload types kept per media description.
pub const MAX_FORMATS: usize = 32;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sdp {
    pub media: Vec<MediaDesc>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    #[default]
    Sendrecv,
    Sendonly,
    Recvonly,
    Inactive,
}

/// One `m=` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaDesc {
    /// `audio`, `video`, `image` (T.38 fax), ...
    pub kind: String,
    /// Where the party receives it: the media-level `c=`, else the
    /// session-level one. `None` when neither names an address.
    pub addr: Option<IpAddr>,
    /// 0 when the stream is refused or held.
    pub port: u16,
    /// `RTP/AVP`, `RTP/SAVP`, `udptl`, ...
    pub proto: String,
    pub srtp: bool,
    /// Payload types offered, in order of preference.
    pub formats: Vec<u8>,
    pub rtpmap: Vec<RtpMap>,
    /// `a=rtcp:PORT [IN IP4 ADDR]`; RTCP is on `port + 1` otherwise.
    pub rtcp: Option<(u16, Option<IpAddr>)>,
    pub rtcp_mux: bool,
    pub direction: Direction,
}

impl MediaDesc {
    /// Whether the description carries RTP (not T.38's UDPTL, not MSRP).
    pub fn is_rtp(&self) -> bool {
        self.proto.to_ascii_uppercase().contains("RTP")
    }

    /// The codec of payload type `pt`: `a=rtpmap`'s encoding name, or RFC
    /// 3551's for a static type.
    pub fn codec(&self, pt: u8) -> Option<(&str, u32)> {
        self.rtpmap
            .iter()
            .find(|m| m.pt == pt)
            .map(|m| (m.encoding.as_str(), m.clock))
            .or_else(|| static_payload(pt))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtpMap {
    pub pt: u8,
    pub encoding: String,
    pub clock: u32,
}

/// RFC 3551's static payload types: encoding name and RTP clock rate.
pub fn static_payload(pt: u8) -> Option<(&'static str, u32)> {
    Some(match pt {
        0 => ("PCMU", 8000),
        3 => ("GSM", 8000),
        4 => ("G723", 8000),
        5 => ("DVI4", 8000),
        6 => ("DVI4", 16000),
        7 => ("LPC", 8000),
        8 => ("PCMA", 8000),
        9 => ("G722", 8000),
        10 => ("L16", 44100),
        11 => ("L16", 44100),
        12 => ("QCELP", 8000),
        13 => ("CN", 8000),
        14 => ("MPA", 90000),
        15 => ("G728", 8000),
        16 => ("DVI4", 11025),
        17 => ("DVI4", 22050),
        18 => ("G729", 8000),
        19 => ("CN", 8000),
        25 => ("CelB", 90000),
        26 => ("JPEG", 90000),
        28 => ("nv", 90000),
        31 => ("H261", 90000),
        32 => ("MPV", 90000),
        33 => ("MP2T", 90000),
        34 => ("H263", 90000),
        _ => return None,
    })
}

/// Reads a session description.
pub fn parse(body: &[u8]) -> Result<Sdp, SdpError> {
    let text = std::str::from_utf8(body).map_err(|_| SdpError::NotText)?;
    let mut session_addr = None;
    let mut session_direction = Direction::Sendrecv;
    let mut session_crypto = false;
    let mut media: Vec<MediaDesc> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        let Some((kind, value)) = line.split_once('=') else {
            continue;
        };
        match kind {
            "c" => {
                let addr = connection(value)?;
                match media.last_mut() {
                    Some(m) => m.addr = addr,
                    None => session_addr = addr,
                }
            }
            "m" => {
                if media.len() == MAX_MEDIA {
                    return Err(SdpError::TooManyMedia);
                }
                let mut parts = value.split_ascii_whitespace();
                let kind = parts.next().ok_or(SdpError::BadMedia)?;
                let port = parts.next().ok_or(SdpError::BadMedia)?;
                // `PORT/COUNT` (RFC 8866 §5.14): the first port is the one.
                let port: u16 = port
                    .split('/')
                    .next()
                    .and_then(|p| p.parse().ok())
                    .ok_or(SdpError::BadMedia)?;
                let proto = parts.next().ok_or(SdpError::BadMedia)?;
                let rtp = proto.to_ascii_uppercase().contains("RTP");
                let formats = if rtp {
                    parts
                        .take(MAX_FORMATS)
                        .map(|f| f.parse::<u8>().ok().filter(|&pt| pt < 128))
                        .collect::<Option<Vec<u8>>>()
                        .ok_or(SdpError::BadMedia)?
                } else {
                    Vec::new()
                };
                media.push(MediaDesc {
                    kind: kind.to_string(),
                    addr: session_addr,
                    port,
                    srtp: proto.to_ascii_uppercase().contains("SAVP") || session_crypto,
                    proto: proto.to_string(),
                    formats,
                    rtpmap: Vec::new(),
                    rtcp: None,
                    rtcp_mux: false,
                    direction: session_direction,
                });
            }
            "a" => {
                let (name, arg) = value.split_once(':').unwrap_or((value, ""));
                let direction = match name {
                    "sendrecv" => Some(Direction::Sendrecv),
                    "sendonly" => Some(Direction::Sendonly),
                    "recvonly" => Some(Direction::Recvonly),
                    "inactive" => Some(Direction::Inactive),
                    _ => None,
                };
                match (media.last_mut(), name) {
                    (None, "crypto") => session_crypto = true,
                    (None, _) => {
                        if let Some(d) = direction {
                            session_direction = d;
                        }
                    }
                    (Some(m), "rtpmap") => {
                        if m.rtpmap.len() < MAX_FORMATS {
                            m.rtpmap.push(rtpmap(arg)?);
                        }
                    }
                    (Some(m), "rtcp") => {
                        let mut parts = arg.split_ascii_whitespace();
                        let port = parts.next().and_then(|p| p.parse().ok());
                        let addr = parts.collect::<Vec<_>>().join(" ");
                        let addr = if addr.is_empty() { None } else { connection(&addr)? };
                        if let Some(port) = port {
                            m.rtcp = Some((port, addr));
                        }
                    }
                    (Some(m), "rtcp-mux") => m.rtcp_mux = true,
                    (Some(m), "crypto") => m.srtp = true,
                    (Some(m), _) => {
                        if let Some(d) = direction {
                            m.direction = d;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(Sdp { media })
}

/// `IN IP4 192.0.2.1`, `IN IP6 2001:db8::1`, `IN IP4 224.2.1.1/127`:
/// `None` for a host name, which names no address to match packets by.
fn connection(value: &str) -> Result<Option<IpAddr>, SdpError> {
    let mut parts = value.split_ascii_whitespace();
    let (Some(net), Some(kind), Some(addr)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(SdpError::BadConnection);
    };
    if net != "IN" || !(kind == "IP4" || kind == "IP6") {
        return Err(SdpError::BadConnection);
    }
    let addr = addr.split('/').next().unwrap_or(addr);
    match addr.parse::<IpAddr>() {
        Ok(a) if (kind == "IP4") == a.is_ipv4() => Ok(Some(a)),
        Ok(_) => Err(SdpError::BadConnection),
        // A fully qualified domain name is allowed (RFC 8866 §5.7); one
        // of digits and dots only is a broken IPv4 address.
        Err(_)
            if addr.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                && !addr.chars().all(|c| c.is_ascii_digit() || c == '.') =>
        {
            Ok(None)
        }
        Err(_) => Err(SdpError::BadConnection),
    }
}

/// `96 opus/48000/2`.
fn rtpmap(arg: &str) -> Result<RtpMap, SdpError> {
    let (pt, rest) = arg.trim().split_once(' ').ok_or(SdpError::BadRtpmap)?;
    let pt: u8 = pt.parse().ok().filter(|&p| p < 128).ok_or(SdpError::BadRtpmap)?;
    let mut parts = rest.trim().split('/');
    let encoding = parts.next().filter(|e| !e.is_empty()).ok_or(SdpError::BadRtpmap)?;
    let clock = parts
        .next()
        .and_then(|c| c.trim().parse::<u32>().ok())
        .filter(|&c| c > 0)
        .ok_or(SdpError::BadRtpmap)?;
    Ok(RtpMap {
        pt,
        encoding: encoding.to_string(),
        clock,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audio_and_video_offer() {
        let body = b"v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n\
m=audio 16384 RTP/AVP 0 8 101\r\na=rtpmap:101 telephone-event/8000\r\na=ptime:20\r\n\
m=video 16386 RTP/SAVP 96\r\nc=IN IP6 2001:db8::5\r\na=rtpmap:96 H264/90000\r\na=rtcp:17000\r\na=sendonly\r\n";
        let sdp = parse(body).unwrap();
        assert_eq!(sdp.media.len(), 2);
        let audio = &sdp.media[0];
        assert_eq!(audio.addr, Some("10.0.0.1".parse().unwrap()));
        assert_eq!((audio.port, audio.formats.as_slice()), (16384, &[0, 8, 101][..]));
        assert_eq!(audio.codec(0), Some(("PCMU", 8000)));
        assert_eq!(audio.codec(101), Some(("telephone-event", 8000)));
        assert!(!audio.srtp && audio.is_rtp());
        let video = &sdp.media[1];
        assert_eq!(video.addr, Some("2001:db8::5".parse().unwrap()));
        assert!(video.srtp);
        assert_eq!(video.rtcp, Some((17000, None)));
        assert_eq!(video.direction, Direction::Sendonly);
        assert_eq!(video.codec(96), Some(("H264", 90000)));
    }

    #[test]
    fn t38_and_refused_streams() {
        let sdp = parse(b"c=IN IP4 1.2.3.4\nm=image 4000 udptl t38\nm=audio 0 RTP/AVP 0\n").unwrap();
        assert!(!sdp.media[0].is_rtp());
        assert!(sdp.media[0].formats.is_empty());
        assert_eq!(sdp.media[1].port, 0);
    }

    #[test]
    fn bad_lines_are_named() {
        assert_eq!(parse(b"c=IN IP4 300.1.1.1\n"), Err(SdpError::BadConnection));
        assert_eq!(parse(b"c=IN IP6 1.1.1.1\n"), Err(SdpError::BadConnection));
        assert_eq!(parse(b"m=audio x RTP/AVP 0\n"), Err(SdpError::BadMedia));
        assert_eq!(parse(b"m=audio 1 RTP/AVP 200\n"), Err(SdpError::BadMedia));
        assert_eq!(
            parse(b"m=audio 1 RTP/AVP 96\na=rtpmap:96 opus\n"),
            Err(SdpError::BadRtpmap)
        );
        assert_eq!(parse(b"\xff\xfe"), Err(SdpError::NotText));
        assert_eq!(parse(b"c=IN IP4 host.example.com\n"), Ok(Sdp::default()));
    }
}
