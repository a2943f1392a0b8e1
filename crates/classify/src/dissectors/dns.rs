//! DNS (RFC 1035) over UDP and over TCP (RFC 7766: 2-byte length prefix), and the same
//! wire format as multicast DNS (RFC 6762, port 5353) and LLMNR (RFC 4795, port 5355).
//! The header's opcode, rcode and section counts must be sane and every question must
//! parse; away from port 53 the whole message must parse to its last byte and question
//! names must look like host names. Compression pointers may only point backwards and
//! are followed a bounded number of times, so hostile names cannot loop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use sluice_wire::IpText;

use super::{
    Context, Dissector, Field, FirstByte, Found, MAX_LIST, Metadata, Packet, Prefix, Transport, Verdict, Wants, be16,
};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "MDNS",
        wants: Wants::Udp,
        first_byte: FirstByte::ANY,
        prefix: Prefix::ANY,
        inspect: inspect_mdns,
    },
    Dissector {
        name: "LLMNR",
        wants: Wants::Both,
        first_byte: FirstByte::ANY,
        // A TCP message's length counts its header at least.
        prefix: TCP_LENGTH,
        inspect: inspect_llmnr,
    },
    Dissector {
        name: "DNS",
        wants: Wants::Both,
        first_byte: FirstByte::ANY,
        prefix: TCP_LENGTH,
        inspect: inspect_dns,
    },
];

const MDNS_PORT: u16 = 5353;
const LLMNR_PORT: u16 = 5355;
const DNS_PORT: u16 = 53;
const HEADER: usize = 12;
/// Longest name on the wire, length bytes included (RFC 1035 §3.1).
const MAX_NAME: usize = 255;
/// Compression pointers followed within one name; real names need one or two.
const MAX_HOPS: usize = 16;
/// Smallest question (root name, type, class) and resource record on the wire.
const MIN_QUESTION: usize = 5;
const MIN_RECORD: usize = 11;

/// A TCP message's length counts its header at least.
const TCP_LENGTH: Prefix = Prefix {
    tcp: &[Field::u16(0, HEADER as u16, u16::MAX)],
    udp: &[],
};

const TYPE_A: u16 = 1;
const TYPE_NS: u16 = 2;
const TYPE_CNAME: u16 = 5;
const TYPE_PTR: u16 = 12;
const TYPE_OPT: u16 = 41;
const TYPE_AAAA: u16 = 28;

fn inspect_mdns(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if !pkt.has_port(MDNS_PORT) {
        return Verdict::No;
    }
    inspect_as(pkt, ctx, Flavour::Mdns, "MDNS")
}

fn inspect_llmnr(pkt: &Packet, ctx: &mut Context) -> Verdict {
    if !pkt.has_port(LLMNR_PORT) {
        return Verdict::No;
    }
    inspect_as(pkt, ctx, Flavour::Llmnr, "LLMNR")
}

fn inspect_dns(pkt: &Packet, ctx: &mut Context) -> Verdict {
    // Those ports carry the same wire format under other names; NetBIOS name service
    // (137) is DNS-shaped too.
    if [MDNS_PORT, LLMNR_PORT, 137, 138].iter().any(|&p| pkt.has_port(p)) {
        return Verdict::No;
    }
    let flavour = Flavour::Dns {
        strict: !pkt.has_port(DNS_PORT),
    };
    inspect_as(pkt, ctx, flavour, "DNS")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    /// `strict` off port 53: the message must parse completely and look ordinary.
    Dns {
        strict: bool,
    },
    Mdns,
    Llmnr,
}

impl Flavour {
    fn strict(self) -> bool {
        matches!(self, Flavour::Dns { strict: true })
    }
}

/// Why a parse stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fail {
    /// The bytes ran out: a TCP message may still complete.
    Short,
    /// The bytes cannot be this protocol.
    Bad,
}

fn inspect_as(pkt: &Packet, ctx: &mut Context, flavour: Flavour, label: &'static str) -> Verdict {
    let (msg, complete) = match pkt.transport {
        Transport::Udp => (pkt.data, true),
        Transport::Tcp => {
            let Some(len) = be16(pkt.data, 0) else {
                return Verdict::Maybe;
            };
            let len = usize::from(len);
            if len < HEADER {
                return Verdict::No;
            }
            let body = pkt.data.get(2..).unwrap_or_default();
            match body.get(..len) {
                Some(msg) => (msg, true),
                None => (body, false),
            }
        }
    };
    match parse(msg, complete, flavour) {
        Ok(summary) => {
            summary.record(msg, &mut ctx.meta, ctx.resolved);
            let found = Found::new(label);
            // A query's answer comes next, and a TCP answer may still grow: show them to us.
            Verdict::Yes(if summary.response && complete {
                found
            } else {
                found.more()
            })
        }
        Err(Fail::Short) if !complete => Verdict::Maybe,
        Err(_) => Verdict::No,
    }
}

/// What a valid message holds that the metadata wants.
#[derive(Debug)]
struct Summary {
    response: bool,
    rcode: u8,
    /// Offset of the name to report as the host, and its query type.
    host: Option<(usize, u16)>,
    /// Answer records worth reporting: type and rdata offset and length.
    answers: [(u16, usize, usize); MAX_LIST],
    n_answers: usize,
}

impl Summary {
    fn record(&self, msg: &[u8], meta: &mut Metadata, resolved: &mut Vec<IpAddr>) {
        if let Some((at, qtype)) = self.host {
            if meta.host.is_none()
                && let Ok((name, _)) = read_name(msg, at)
            {
                Metadata::set_once(&mut meta.host, name.as_bytes());
            }
            meta.dns_qtype.get_or_insert(qtype);
        }
        if !self.response {
            return;
        }
        // Only a TCP answer is shown to us twice, the second time longer: the latest
        // reading wins.
        meta.dns_rcode = Some(self.rcode);
        meta.dns_answers.clear();
        resolved.clear();
        for &(rtype, at, len) in self.answers.iter().take(self.n_answers) {
            let rdata = msg.get(at..at + len).unwrap_or_default();
            match (rtype, rdata.len()) {
                (TYPE_A, 4) => {
                    let addr = Ipv4Addr::new(rdata[0], rdata[1], rdata[2], rdata[3]).into();
                    Metadata::push(&mut meta.dns_answers, IpText::of(addr).as_bytes());
                    resolved.push(addr);
                }
                (TYPE_AAAA, 16) => {
                    let mut octets = [0u8; 16];
                    octets.copy_from_slice(rdata);
                    let addr = Ipv6Addr::from(octets).into();
                    Metadata::push(&mut meta.dns_answers, IpText::of(addr).as_bytes());
                    resolved.push(addr);
                }
                _ => {
                    if let Ok((name, _)) = read_name(msg, at) {
                        Metadata::push(&mut meta.dns_answers, name.as_bytes());
                    }
                }
            }
        }
    }
}

/// Checks a whole message (or the head of a TCP one when `complete` is false).
fn parse(msg: &[u8], complete: bool, flavour: Flavour) -> Result<Summary, Fail> {
    let field = |at: usize| be16(msg, at).ok_or(Fail::Short);
    let flags = field(2)?;
    let (qd, an, ns, ar) = (field(4)?, field(6)?, field(8)?, field(10)?);
    let response = flags & 0x8000 != 0;
    let opcode = (flags >> 11) & 0xF;
    let rcode = (flags & 0xF) as u8;
    let records = usize::from(an) + usize::from(ns) + usize::from(ar);

    let opcode_ok = match flavour {
        // Query, inverse query, status, notify, update.
        Flavour::Dns { strict } => matches!(opcode, 0 | 1 | 2 | 4 | 5) && !(strict && flags & 0x0040 != 0),
        Flavour::Mdns | Flavour::Llmnr => opcode == 0,
    };
    if !opcode_ok || (!response && rcode != 0) || rcode > 10 || (flavour == Flavour::Mdns && rcode != 0) {
        return Err(Fail::Bad);
    }
    let counts_ok = match flavour {
        Flavour::Mdns => qd > 0 || (response && records > 0),
        Flavour::Llmnr => qd == 1 && (response || (an == 0 && ns == 0)),
        Flavour::Dns { strict } => {
            // A refusal may echo nothing, and an inverse query carries its question as
            // an answer record.
            let bare_error = !strict && response && rcode != 0 && qd == 0 && records == 0;
            let inverse = !strict && opcode == 1 && qd == 0 && an > 0;
            let questions = if strict { qd == 1 } else { (1..=16).contains(&qd) };
            bare_error || inverse || (questions && (response || opcode == 5 || (an == 0 && ns == 0)))
        }
    };
    if !counts_ok {
        return Err(Fail::Bad);
    }
    // The counts must fit in the message, whose full length a TCP prefix gives us.
    let least = usize::from(qd) * MIN_QUESTION + records * MIN_RECORD;
    if complete && HEADER + least > msg.len() {
        return Err(Fail::Bad);
    }

    let mut summary = Summary {
        response,
        rcode,
        host: None,
        answers: [(0, 0, 0); MAX_LIST],
        n_answers: 0,
    };
    let mut at = HEADER;
    for _ in 0..qd {
        let (name, end) = read_name(msg, at)?;
        let qtype = be16(msg, end).ok_or(Fail::Short)?;
        let class = be16(msg, end + 2).ok_or(Fail::Short)?;
        // mDNS borrows the class's top bit for "unicast response please".
        let class = if flavour == Flavour::Mdns {
            class & 0x7FFF
        } else {
            class
        };
        if qtype == 0 || !matches!(class, 1 | 3 | 4 | 254 | 255) {
            return Err(Fail::Bad);
        }
        if summary.host.is_none() {
            if is_dnscrypt_cert(&name) {
                return Err(Fail::Bad);
            }
            if flavour.strict() && (name.len == 0 || !name.host_like || !known_qtype(qtype)) {
                return Err(Fail::Bad);
            }
            summary.host = Some((at, qtype));
        }
        at = end + 4;
    }

    for i in 0..records {
        let rr = match read_record(msg, at, flavour) {
            Ok(rr) => rr,
            // Unless nothing vouches for the message yet, the questions told us enough:
            // a truncated TCP head or a sloppy server on a well-known port still counts.
            Err(fail) if flavour.strict() || (i == 0 && qd == 0) => return Err(fail),
            Err(_) => return Ok(summary),
        };
        if summary.host.is_none() {
            summary.host = Some((at, rr.rtype));
        }
        if i < usize::from(an)
            && summary.n_answers < MAX_LIST
            && matches!(rr.rtype, TYPE_A | TYPE_AAAA | TYPE_CNAME | TYPE_PTR | TYPE_NS)
        {
            summary.answers[summary.n_answers] = (rr.rtype, rr.rdata, rr.rdlen);
            summary.n_answers += 1;
        }
        at = rr.rdata + rr.rdlen;
    }
    if flavour.strict() {
        if !complete {
            return Err(Fail::Short);
        }
        if at != msg.len() {
            return Err(Fail::Bad);
        }
    }
    Ok(summary)
}

struct Record {
    rtype: u16,
    rdata: usize,
    rdlen: usize,
}

fn read_record(msg: &[u8], at: usize, flavour: Flavour) -> Result<Record, Fail> {
    // The owner name is checked as strictly as a name that is read, but
    // not spelled out: most records' owner is a pointer to the question.
    let end = walk_name(msg, at, |_| {})?;
    let rtype = be16(msg, end).ok_or(Fail::Short)?;
    let class = be16(msg, end + 2).ok_or(Fail::Short)?;
    let rdlen = usize::from(be16(msg, end + 8).ok_or(Fail::Short)?);
    let rdata = end + 10;
    if msg.len() < rdata + rdlen {
        return Err(Fail::Short);
    }
    // OPT abuses the class as a UDP payload size; mDNS uses its top bit as "cache flush".
    let class = if flavour == Flavour::Mdns {
        class & 0x7FFF
    } else {
        class
    };
    if rtype == 0 || (rtype != TYPE_OPT && !matches!(class, 1 | 3 | 4 | 254 | 255)) {
        return Err(Fail::Bad);
    }
    Ok(Record { rtype, rdata, rdlen })
}

/// Query types in use (RFC 6895 registry), for guessing DNS off its port.
fn known_qtype(qtype: u16) -> bool {
    matches!(qtype, 1..=65 | 99..=109 | 249..=260 | 32768 | 32769)
}

/// DNSCrypt resolver certificate queries ("2.dnscrypt-cert.<provider>") are the
/// DNScrypt dissector's.
fn is_dnscrypt_cert(name: &Name) -> bool {
    const PREFIX: &[u8] = b"2.dnscrypt-cert";
    let bytes = name.as_bytes();
    bytes.len() >= PREFIX.len()
        && bytes[..PREFIX.len()].eq_ignore_ascii_case(PREFIX)
        && matches!(bytes.get(PREFIX.len()), None | Some(b'.'))
}

/// A decoded name: labels joined by dots, raw bytes.
#[derive(Debug)]
struct Name {
    bytes: [u8; MAX_NAME],
    len: usize,
    /// Every label is letters, digits, '-' or '_'.
    host_like: bool,
}

impl Name {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// `walk_name` keeps a name's labels and dots within `MAX_NAME` bytes;
    /// a longer one is cut rather than trusted.
    fn push_label(&mut self, label: &[u8]) {
        if self.len > 0 && self.len < MAX_NAME {
            self.bytes[self.len] = b'.';
            self.len += 1;
        }
        let take = label.len().min(MAX_NAME - self.len);
        self.bytes[self.len..self.len + take].copy_from_slice(&label[..take]);
        self.len += take;
        self.host_like &= label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_');
    }
}

/// Decodes the name at `start`; returns it and the offset just after it in place.
/// Pointers must go strictly backwards and past the header, labels are at most 63
/// bytes (the two top bits are the pointer flag), and a name is at most 255 bytes.
fn read_name(msg: &[u8], start: usize) -> Result<(Name, usize), Fail> {
    let mut name = Name {
        bytes: [0; MAX_NAME],
        len: 0,
        host_like: true,
    };
    let end = walk_name(msg, start, |label| name.push_label(label))?;
    Ok((name, end))
}

/// Checks the name at `start` as `read_name` describes, handing each label
/// to `label` in order; returns the offset just after the name in place.
fn walk_name(msg: &[u8], start: usize, mut label: impl FnMut(&[u8])) -> Result<usize, Fail> {
    let mut pos = start;
    let mut end = None;
    let mut wire = 0usize;
    let mut hops = 0usize;
    // Every turn either consumes at least one byte of the 255 allowed or one hop.
    for _ in 0..MAX_NAME + MAX_HOPS {
        let len = usize::from(*msg.get(pos).ok_or(Fail::Short)?);
        match len & 0xC0 {
            0x00 => {
                wire += len + 1;
                if wire > MAX_NAME {
                    return Err(Fail::Bad);
                }
                if len == 0 {
                    return Ok(end.unwrap_or(pos + 1));
                }
                label(msg.get(pos + 1..pos + 1 + len).ok_or(Fail::Short)?);
                pos += 1 + len;
            }
            0xC0 => {
                let target = usize::from(be16(msg, pos).ok_or(Fail::Short)? & 0x3FFF);
                hops += 1;
                if target < HEADER || target >= pos || hops > MAX_HOPS {
                    return Err(Fail::Bad);
                }
                end.get_or_insert(pos + 2);
                pos = target;
            }
            // 0x40 and 0x80: extended and reserved label types, dead since RFC 6891.
            _ => return Err(Fail::Bad),
        }
    }
    Err(Fail::Bad)
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, test_packet};
    use super::*;

    fn run(
        d: &str,
        transport: Transport,
        side: Side,
        cport: u16,
        sport: u16,
        data: &[u8],
        t: &mut TestContext,
    ) -> Verdict {
        let pkt = test_packet(transport, side, cport, sport, data);
        let dissector = DISSECTORS.iter().find(|x| x.name == d).unwrap();
        (dissector.inspect)(&pkt, &mut t.ctx())
    }

    fn udp(d: &str, cport: u16, sport: u16, data: &[u8]) -> Verdict {
        run(d, Transport::Udp, Side::Up, cport, sport, data, &mut TestContext::new())
    }

    // android.pcap: captive.apple.com A, and its answer (CNAME chain then two A).
    const QUERY: &str = "fba6010000010000000000000763617074697665056170706c6503636f6d0000010001";
    const RESPONSE: &str = "fba6818000010005000000000763617074697665056170706c6503636f6d0000010001\
        c00c000500010000108a002a0c636170746976652d636964720c6f726967696e2d6170706c6503636f6d06616b61646e73036e657400\
        c02f0005000100000082000e0b636170746976652d63646ec03c\
        c0650005000100000154001407636170746976650167076161706c696d67c01a\
        c07f0001000100000013000411fd35c9c07f0001000100000013000411fd35d0";

    #[test]
    fn dns_query_then_response() {
        let mut t = TestContext::new();
        let v = run("DNS", Transport::Udp, Side::Up, 52953, 53, &hex(QUERY), &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNS").more()));
        assert_eq!(t.meta.host.as_deref(), Some("captive.apple.com"));
        assert_eq!(t.meta.dns_qtype, Some(1));
        let v = run("DNS", Transport::Udp, Side::Down, 52953, 53, &hex(RESPONSE), &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNS")));
        assert_eq!(t.meta.dns_rcode, Some(0));
        assert_eq!(
            t.meta.dns_answers,
            [
                "captive-cidr.origin-apple.com.akadns.net",
                "captive-cdn.origin-apple.com.akadns.net",
                "captive.g.aaplimg.com",
                "17.253.53.201",
                "17.253.53.208"
            ]
        );
        assert_eq!(
            t.resolved,
            [IpAddr::from([17, 253, 53, 201]), IpAddr::from([17, 253, 53, 208])],
            "the addresses the name resolved to"
        );
    }

    #[test]
    fn dns_off_port_needs_a_complete_ordinary_message() {
        assert!(matches!(udp("DNS", 40000, 5000, &hex(QUERY)), Verdict::Yes(_)));
        assert!(matches!(udp("DNS", 40000, 5000, &hex(RESPONSE)), Verdict::Yes(_)));
        let mut trailing = hex(QUERY);
        trailing.push(0);
        assert_eq!(udp("DNS", 40000, 5000, &trailing), Verdict::No);
        assert!(matches!(udp("DNS", 40000, 53, &trailing), Verdict::Yes(_)));
        // Two questions, or a name with a space, are fine on 53 only.
        let spaced = hex("fba601000001000000000000036120620000010001");
        assert_eq!(udp("DNS", 40000, 5000, &spaced), Verdict::No);
        assert!(matches!(udp("DNS", 40000, 53, &spaced), Verdict::Yes(_)));
    }

    #[test]
    fn dns_over_tcp_waits_for_the_question() {
        // dns_fragmented.pcap: weberlab.de DNSKEY with EDNS, over TCP.
        let q = hex("003480e4012000010000000000010877656265726c61620264650000300001\
             000029100000008000000c000a00081b9af622ab2c9740");
        let mut t = TestContext::new();
        for cut in [1, 2, 10, 20] {
            assert_eq!(
                run("DNS", Transport::Tcp, Side::Up, 57089, 53, &q[..cut], &mut t),
                Verdict::Maybe
            );
        }
        let v = run("DNS", Transport::Tcp, Side::Up, 57089, 53, &q, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNS").more()));
        assert_eq!(t.meta.host.as_deref(), Some("weberlab.de"));
        assert_eq!(t.meta.dns_qtype, Some(48));
        // A length prefix shorter than a header.
        assert_eq!(
            run("DNS", Transport::Tcp, Side::Up, 1, 53, &hex("000b0000"), &mut t),
            Verdict::No
        );
    }

    #[test]
    fn tcp_answer_read_again_when_complete() {
        let resp = hex(RESPONSE);
        let mut framed = vec![0, resp.len() as u8];
        framed.extend_from_slice(&resp);
        let mut t = TestContext::new();
        // Cut inside the fourth answer: the first three are already known.
        let v = run(
            "DNS",
            Transport::Tcp,
            Side::Down,
            40000,
            53,
            &framed[..framed.len() - 20],
            &mut t,
        );
        assert_eq!(v, Verdict::Yes(Found::new("DNS").more()));
        assert_eq!(t.meta.dns_answers.len(), 3);
        let v = run("DNS", Transport::Tcp, Side::Down, 40000, 53, &framed, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNS")));
        assert_eq!(t.meta.dns_answers.len(), 5);
        assert_eq!(t.meta.host.as_deref(), Some("captive.apple.com"));
    }

    #[test]
    fn inverse_query() {
        // dns_invert_query.pcapng: no question, the address as an answer record.
        let q = hex("77fc09000000000100000000033231360235380332303201340000010001000000000000");
        let mut t = TestContext::new();
        let v = run("DNS", Transport::Udp, Side::Up, 18427, 53, &q, &mut t);
        assert!(matches!(v, Verdict::Yes(_)));
        assert_eq!(t.meta.host.as_deref(), Some("216.58.202.4"));
        let r = hex("77fc89840000000000000000");
        let v = run("DNS", Transport::Udp, Side::Down, 18427, 53, &r, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("DNS")));
        assert_eq!(t.meta.dns_rcode, Some(4));
    }

    #[test]
    fn mdns_response_without_question() {
        // whatsapp_login_call.pcap: Lucas-iMac.local AAAA, answered with AAAA and A.
        let r = hex(
            "0000840000000001000000020a4c756361732d694d6163056c6f63616c00001c8001000000780010\
             fe80000000000000da3062fffe56001cc00c00018001000000780004a9fea6cf\
             c00c001c8001000000780010fe80000000000000da3062fffe56001c",
        );
        let mut t = TestContext::new();
        let v = run("MDNS", Transport::Udp, Side::Up, 5353, 5353, &r, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("MDNS")));
        assert_eq!(t.meta.host.as_deref(), Some("Lucas-iMac.local"));
        assert_eq!(t.meta.dns_qtype, Some(28));
        assert_eq!(t.meta.dns_answers, ["fe80::da30:62ff:fe56:1c"]);
        assert_eq!(udp("DNS", 5353, 5353, &r), Verdict::No);
        assert_eq!(udp("MDNS", 5000, 53, &r), Verdict::No);
    }

    #[test]
    fn llmnr_query_with_utf8_name() {
        // 1kxun.pcap: a UTF-8 host name, type ANY.
        let q = hex("f604000000010000000000000ce5b08fe4bd9be5b088e6a99f0000ff0001");
        let mut t = TestContext::new();
        let v = run("LLMNR", Transport::Udp, Side::Up, 58779, 5355, &q, &mut t);
        assert_eq!(v, Verdict::Yes(Found::new("LLMNR").more()));
        assert_eq!(t.meta.dns_qtype, Some(255));
        assert_eq!(t.meta.host.as_deref(), Some("............"));
        assert_eq!(udp("DNS", 58779, 5355, &q), Verdict::No);
    }

    #[test]
    fn other_protocols_are_not_dns() {
        // NetBIOS name query (1kxun.pcap) on 137, a TLS ClientHello head, SSDP text,
        // a DNSCrypt certificate query, and a DNSCrypt-encrypted query on 5353.
        let nbns =
            hex("b1e6011000010000000000002046484641454245454341434143414341434143414341434143414341434141410000200001");
        assert_eq!(udp("DNS", 137, 137, &nbns), Verdict::No);
        let tls = hex("16030100f8010000f40303a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6");
        assert_eq!(udp("DNS", 40000, 53, &tls), Verdict::No);
        assert_eq!(
            udp(
                "DNS",
                40000,
                5000,
                b"M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\n"
            ),
            Verdict::No
        );
        let cert =
            hex("7f470100000100000000000101320d646e7363727970742d6365727408646e7363727970740463612d320000100001");
        assert_eq!(udp("DNS", 38388, 53, &cert), Verdict::No);
        let crypt = hex("e3c3eac4701b47d5dec5672004a90bde439e38f593136bcabfb1b76fe34e5bceb606fc1bd6b85e45");
        assert_eq!(udp("MDNS", 38650, 5353, &crypt), Verdict::No);
        let noise: Vec<u8> = (0u32..200).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        assert_eq!(udp("DNS", 40000, 53, &noise), Verdict::No);
    }

    #[test]
    fn hostile_names() {
        let head = "abcd01000001000000000000";
        // A pointer to itself, a forward pointer, a pointer into the header, a pointer past the end.
        for name in ["c00c", "c00e00", "c002", "c0ff"] {
            assert_eq!(
                udp("DNS", 1, 53, &hex(&format!("{head}{name}00010001"))),
                Verdict::No,
                "{name}"
            );
        }
        // Two labels pointing at each other through a label that spans the pointer.
        let looped = hex("abcd8180000100010000000003616263000001000103787878c01500010001000000000000");
        assert!(read_name(&looped, 21).is_err());
        // Label type 0x40 and a label longer than the data.
        assert_eq!(udp("DNS", 1, 53, &hex(&format!("{head}4161000001000100"))), Verdict::No);
        assert_eq!(udp("DNS", 1, 53, &hex(&format!("{head}3f6161"))), Verdict::No);
        // A name over 255 bytes: five labels of 63.
        let label = format!("3f{}", "61".repeat(63));
        let long = format!("{head}{}0000010001", label.repeat(5));
        assert_eq!(udp("DNS", 1, 53, &hex(&long)), Verdict::No);
        // Just under the limit is fine.
        let ok = format!("{head}{}3d{}0000010001", label.repeat(3), "61".repeat(61));
        assert!(matches!(udp("DNS", 1, 53, &hex(&ok)), Verdict::Yes(_)));
    }

    #[test]
    fn backward_pointer_chain_is_followed() {
        // "b" at 12, then "a" + pointer to 12 at 15, then a pointer to 15 at 19.
        let msg = hex("abcd010000010000000000000162000161c00cc00f00010001");
        let (name, end) = read_name(&msg, 19).unwrap();
        assert_eq!(name.as_bytes(), b"a.b");
        assert_eq!(end, 21);
    }

    #[test]
    fn absurd_counts_and_truncation() {
        // 65535 answers in a 40-byte response; a query with answers; a header alone.
        let r = hex("fba68180ffffffff000000000474696d650000010001");
        assert_eq!(udp("DNS", 1, 53, &r), Verdict::No);
        let q = hex("fba60100000100010000000004746d650000010001");
        assert_eq!(udp("DNS", 1, 53, &q), Verdict::No);
        assert_eq!(udp("DNS", 1, 53, &hex("fba601000001000000000000")), Verdict::No);
        let full = hex(QUERY);
        for cut in 0..full.len() {
            assert_eq!(udp("DNS", 1, 53, &full[..cut]), Verdict::No, "cut at {cut}");
        }
        // A response whose record data runs past the end is still DNS on port 53, not elsewhere.
        let resp = hex(RESPONSE);
        let cut = &resp[..resp.len() - 3];
        assert!(matches!(udp("DNS", 1, 53, cut), Verdict::Yes(_)));
        assert_eq!(udp("DNS", 1, 5000, cut), Verdict::No);
    }
}
