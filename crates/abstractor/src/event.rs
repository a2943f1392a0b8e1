//! The header lines of SF-TAP's stream interfaces (seed 004, Figure 5),
//! with Sluice's additions: a `ts` field on every event, `GAP` events for
//! bytes the capture lost, and the end `reason` on `DESTROYED`.
//! `docs/abstractor.md` is the reference; consumers ignore keys they do
//! not know.

use std::net::IpAddr;

/// Longest prefix: two IPv6 addresses of 39 characters, five-digit ports,
/// a three-digit hop, with room to spare.
const PREFIX_CAPACITY: usize = 160;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    Tcp,
    Udp,
}

impl L4 {
    pub fn name(self) -> &'static str {
        match self {
            L4::Tcp => "tcp",
            L4::Udp => "udp",
        }
    }
}

/// Which end sent a DATA or GAP event's bytes: `from=1` is the client
/// (`ip1`), `from=2` the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    Client,
    Server,
}

impl From {
    fn fields(self) -> &'static [u8] {
        match self {
            From::Client => b",from=1,match=up",
            From::Server => b",from=2,match=down",
        }
    }

    fn number(self) -> &'static [u8] {
        match self {
            From::Client => b",from=1",
            From::Server => b",from=2",
        }
    }
}

/// The part of every header line that names the flow
/// (`ip1=...,ip2=...,port1=...,port2=...,hop=...,l3=...,l4=...`), formatted
/// once when the flow is created so that each event only appends its own
/// fields. Inline, so that flows need no allocation for it.
#[derive(Clone, Copy)]
pub struct FlowPrefix {
    bytes: [u8; PREFIX_CAPACITY],
    len: u8,
}

impl Default for FlowPrefix {
    fn default() -> Self {
        FlowPrefix {
            bytes: [0; PREFIX_CAPACITY],
            len: 0,
        }
    }
}

impl std::fmt::Debug for FlowPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

impl FlowPrefix {
    pub fn new(client: (IpAddr, u16), server: (IpAddr, u16), hop: u8, l4: L4) -> FlowPrefix {
        let mut prefix = FlowPrefix::default();
        prefix.set(client, server, hop, l4);
        prefix
    }

    /// [`FlowPrefix::new`] in place: a flow's prefix is written into its
    /// slot, not built apart and moved there.
    pub fn set(&mut self, client: (IpAddr, u16), server: (IpAddr, u16), hop: u8, l4: L4) {
        self.len = 0;
        let l3: &[u8] = if client.0.is_ipv4() { b"ipv4" } else { b"ipv6" };
        self.push(b"ip1=");
        self.ip(client.0);
        self.push(b",ip2=");
        self.ip(server.0);
        self.push(b",port1=");
        self.push(itoa::Buffer::new().format(client.1).as_bytes());
        self.push(b",port2=");
        self.push(itoa::Buffer::new().format(server.1).as_bytes());
        self.push(b",hop=");
        self.push(itoa::Buffer::new().format(hop).as_bytes());
        self.push(b",l3=");
        self.push(l3);
        self.push(b",l4=");
        self.push(l4.name().as_bytes());
    }

    fn push(&mut self, bytes: &[u8]) {
        let at = self.len as usize;
        self.bytes[at..at + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len() as u8;
    }

    fn ip(&mut self, ip: IpAddr) {
        self.push(sluice_wire::IpText::of(ip).as_bytes());
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// What one event is, beyond the flow and the time.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    Created,
    /// `len` bytes of `from`'s stream follow the header.
    Data {
        from: From,
        len: usize,
    },
    /// `len` bytes of `from`'s stream were lost.
    Gap {
        from: From,
        len: u64,
    },
    Destroyed {
        reason: &'a str,
    },
}

/// Writes event header lines straight into the buffer they are sent from
/// (a consumer's queue, or a flow's held events): a line built apart and
/// then copied cost a copy per event.
#[derive(Default)]
pub struct Header {
    /// The whole seconds of the last `ts` written, and their digits:
    /// consecutive events nearly always share them, and a 19-digit number
    /// was the dearest part of a header.
    secs: u64,
    secs_digits: [u8; 20],
    secs_len: u8,
}

impl Header {
    /// Appends the header line of `event` (with its `\n`) to `out`.
    pub fn write(&mut self, out: &mut Vec<u8>, prefix: &FlowPrefix, ts_ns: u64, event: Event) {
        out.extend_from_slice(prefix.as_bytes());
        let name: &[u8] = match event {
            Event::Created => b",event=CREATED,ts=",
            Event::Data { .. } => b",event=DATA,ts=",
            Event::Gap { .. } => b",event=GAP,ts=",
            Event::Destroyed { .. } => b",event=DESTROYED,ts=",
        };
        out.extend_from_slice(name);
        self.push_time(out, ts_ns);
        match event {
            Event::Created => {}
            Event::Data { from, len } => {
                out.extend_from_slice(from.fields());
                out.extend_from_slice(b",len=");
                push_number(out, len as u64);
            }
            Event::Gap { from, len } => {
                out.extend_from_slice(from.number());
                out.extend_from_slice(b",len=");
                push_number(out, len);
            }
            Event::Destroyed { reason } => {
                out.extend_from_slice(b",reason=");
                out.extend_from_slice(reason.as_bytes());
            }
        }
        out.push(b'\n');
    }

    /// `ts_ns` in decimal, as [`push_number`] writes it.
    fn push_time(&mut self, out: &mut Vec<u8>, ts_ns: u64) {
        const NS: u64 = 1_000_000_000;
        let secs = ts_ns / NS;
        if secs == 0 {
            push_number(out, ts_ns);
            return;
        }
        if secs != self.secs || self.secs_len == 0 {
            let mut digits = itoa::Buffer::new();
            let digits = digits.format(secs).as_bytes();
            self.secs_digits[..digits.len()].copy_from_slice(digits);
            self.secs_len = digits.len() as u8;
            self.secs = secs;
        }
        out.extend_from_slice(&self.secs_digits[..self.secs_len as usize]);
        out.extend_from_slice(&nine_digits((ts_ns % NS) as u32));
    }
}

/// "00" to "99".
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// `n` (below 10⁹) as nine digits with leading zeros.
fn nine_digits(n: u32) -> [u8; 9] {
    let mut out = [0u8; 9];
    out[0] = b'0' + (n / 100_000_000) as u8;
    let rest = n % 100_000_000;
    let (high, low) = (rest / 10_000, rest % 10_000);
    for (i, pair) in [high / 100, high % 100, low / 100, low % 100].into_iter().enumerate() {
        let pair = pair as usize * 2;
        out[1 + 2 * i..3 + 2 * i].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    out
}

/// Decimal digits two at a time (itoa), without the formatting machinery:
/// every event has two or three numbers, and there are millions of events
/// per second.
fn push_number(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// One parsed header line, as analyzers write them into the L7 loopback
/// interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedHeader {
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    pub hop: u8,
    pub l4: L4,
    pub event: ParsedEvent,
    pub ts_ns: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParsedEvent {
    Created,
    Data {
        from: From,
        len: usize,
    },
    Destroyed,
    /// An event this version does not act on, without a body.
    Other,
}

/// Parses one header line (without its `\n`). The error says which field
/// is wrong.
pub fn parse_header(line: &[u8]) -> Result<ParsedHeader, String> {
    let text = std::str::from_utf8(line).map_err(|_| "the header is not ASCII".to_owned())?;
    let mut fields = std::collections::HashMap::new();
    for pair in text.split(',') {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("`{pair}` is not key=value"))?;
        fields.insert(key, value);
    }
    let get = |key: &str| fields.get(key).copied().ok_or_else(|| format!("`{key}` is missing"));
    let number =
        |key: &str| -> Result<u64, String> { get(key)?.parse::<u64>().map_err(|_| format!("`{key}` is not a number")) };
    let addr = |key: &str| -> Result<IpAddr, String> {
        get(key)?
            .parse::<IpAddr>()
            .map_err(|_| format!("`{key}` is not an IP address"))
    };
    let port = |key: &str| -> Result<u16, String> {
        u16::try_from(number(key)?).map_err(|_| format!("`{key}` is not a port number"))
    };
    let client = (addr("ip1")?, port("port1")?);
    let server = (addr("ip2")?, port("port2")?);
    let hop = u8::try_from(number("hop")?).map_err(|_| "`hop` is over 255".to_owned())?;
    let l4 = match get("l4")? {
        "tcp" => L4::Tcp,
        "udp" => L4::Udp,
        other => return Err(format!("`l4={other}` is not tcp or udp")),
    };
    let event = match get("event")? {
        "CREATED" => ParsedEvent::Created,
        "DESTROYED" => ParsedEvent::Destroyed,
        "DATA" => {
            let from = match get("from")? {
                "1" => From::Client,
                "2" => From::Server,
                other => return Err(format!("`from={other}` is not 1 or 2")),
            };
            let len = number("len")?;
            ParsedEvent::Data {
                from,
                len: usize::try_from(len).map_err(|_| "`len` is too large".to_owned())?,
            }
        }
        _ => ParsedEvent::Other,
    };
    Ok(ParsedHeader {
        client,
        server,
        hop,
        l4,
        event,
        ts_ns: fields.contains_key("ts").then(|| number("ts")).transpose()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix() -> FlowPrefix {
        FlowPrefix::new(
            ("192.168.0.1".parse().unwrap(), 62918),
            ("192.168.0.2".parse().unwrap(), 80),
            0,
            L4::Tcp,
        )
    }

    fn line(h: &mut Header, ts_ns: u64, event: Event) -> Vec<u8> {
        let mut out = Vec::new();
        h.write(&mut out, &prefix(), ts_ns, event);
        out
    }

    #[test]
    fn headers_have_sf_tap_figure_5_form_plus_ts() {
        let mut h = Header::default();
        assert_eq!(
            line(&mut h, 7, Event::Created),
            b"ip1=192.168.0.1,ip2=192.168.0.2,port1=62918,port2=80,hop=0,l3=ipv4,l4=tcp,event=CREATED,ts=7\n"
        );
        assert_eq!(
            line(
                &mut h,
                1_416_138_000_123_456_789,
                Event::Data {
                    from: From::Server,
                    len: 1398
                }
            ),
            &b"ip1=192.168.0.1,ip2=192.168.0.2,port1=62918,port2=80,hop=0,l3=ipv4,l4=tcp,event=DATA,\
ts=1416138000123456789,from=2,match=down,len=1398\n"[..]
        );
        assert_eq!(
            line(&mut h, 0, Event::Destroyed { reason: "fin" }),
            b"ip1=192.168.0.1,ip2=192.168.0.2,port1=62918,port2=80,hop=0,l3=ipv4,l4=tcp,event=DESTROYED,ts=0,reason=fin\n"
        );
        assert!(
            line(
                &mut h,
                1,
                Event::Gap {
                    from: From::Client,
                    len: 10
                }
            )
            .ends_with(b"event=GAP,ts=1,from=1,len=10\n")
        );
    }

    /// The remembered seconds are never written with another time's
    /// nanoseconds, and the nanoseconds keep their leading zeros.
    #[test]
    fn times_are_written_as_plain_decimal_numbers() {
        let mut h = Header::default();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut times = vec![0, 1, 999_999_999, 1_000_000_000, 1_000_000_001, 1_000_000_010, u64::MAX];
        for _ in 0..10_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Runs of times within one second, and jumps between seconds.
            let base = if state.is_multiple_of(7) {
                state >> 1
            } else {
                times[times.len() - 1]
            };
            times.push(base.wrapping_add(state % 3_000_000_000) >> (state % 3));
        }
        for ts in times {
            let mut out = Vec::new();
            h.push_time(&mut out, ts);
            assert_eq!(String::from_utf8(out).unwrap(), ts.to_string());
        }
    }

    #[test]
    fn addresses_are_written_as_the_standard_library_displays_them() {
        for (a, b) in [
            ("0.0.0.0", "255.255.255.255"),
            ("10.0.20.3", "::1"),
            ("2001:db8::ff00:42:8329", "::ffff:1.2.3.4"),
        ] {
            let (a, b): (IpAddr, IpAddr) = (a.parse().unwrap(), b.parse().unwrap());
            let p = FlowPrefix::new((a, 0), (b, 9), 3, L4::Tcp);
            let l3 = if a.is_ipv4() { "ipv4" } else { "ipv6" };
            assert_eq!(
                String::from_utf8_lossy(p.as_bytes()),
                format!("ip1={a},ip2={b},port1=0,port2=9,hop=3,l3={l3},l4=tcp")
            );
        }
    }

    #[test]
    fn the_longest_ipv6_prefix_fits() {
        let a: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".parse().unwrap();
        let p = FlowPrefix::new((a, 65535), (a, 65535), 255, L4::Udp);
        assert!(p.as_bytes().ends_with(b"port2=65535,hop=255,l3=ipv6,l4=udp"));
    }

    #[test]
    fn written_headers_parse_back() {
        let mut h = Header::default();
        let line = line(
            &mut h,
            5,
            Event::Data {
                from: From::Client,
                len: 12,
            },
        );
        let parsed = parse_header(&line[..line.len() - 1]).unwrap();
        assert_eq!(parsed.client.1, 62918);
        assert_eq!(parsed.server.1, 80);
        assert_eq!(parsed.ts_ns, Some(5));
        assert_eq!(
            parsed.event,
            ParsedEvent::Data {
                from: From::Client,
                len: 12
            }
        );
    }

    #[test]
    fn bad_headers_name_the_field() {
        assert!(parse_header(b"ip1=1.2.3.4").unwrap_err().contains("`port1` is missing"));
        let e = parse_header(b"ip1=1.2.3.4,ip2=x,port1=1,port2=2,hop=0,l3=ipv4,l4=tcp,event=CREATED").unwrap_err();
        assert!(e.contains("ip2"), "{e}");
        let e =
            parse_header(b"ip1=1.2.3.4,ip2=1.2.3.5,port1=1,port2=2,hop=0,l3=ipv4,l4=sctp,event=CREATED").unwrap_err();
        assert!(e.contains("l4"), "{e}");
    }
}
