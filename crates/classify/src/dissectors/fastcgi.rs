//! FastCGI (the FastCGI Specification, Open Market, 1996, §3.3 and §8),
//! between a web server and an application over TCP. Each record starts
//! with an 8-byte header: version 1, a type from 1 to 11, a request id (0
//! for the management records, types 9 to 11), the content's length, the
//! padding's length and a reserved byte of 0; the content and the padding
//! follow. The web server opens with FCGI_BEGIN_REQUEST (8 bytes: a role
//! of 1 to 3, flags of which only FCGI_KEEP_CONN is defined, 5 reserved
//! bytes) or FCGI_GET_VALUES; the application answers with FCGI_STDOUT,
//! FCGI_STDERR, FCGI_END_REQUEST (8 bytes: the application's status, a
//! protocol status of 0 to 3, 3 reserved bytes), FCGI_GET_VALUES_RESULT
//! or FCGI_UNKNOWN_TYPE. Every record in the stream's head must parse.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "FastCGI",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[VERSION]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const VERSION: u8 = 1;
const HEADER: usize = 8;

const BEGIN_REQUEST: u8 = 1;
const END_REQUEST: u8 = 3;
const STDOUT: u8 = 6;
const STDERR: u8 = 7;
const GET_VALUES: u8 = 9;
const GET_VALUES_RESULT: u8 = 10;
const UNKNOWN_TYPE: u8 = 11;
/// Records looked at in a stream's head; the head is short anyway.
const MAX_RECORDS: usize = 16;

struct Record {
    kind: u8,
}

/// The record at `at`: `Err(true)` when its header is valid but its body is
/// not all there yet, `Err(false)` when it is not a record.
fn record(data: &[u8], at: usize) -> Result<(Record, usize), bool> {
    let header = data.get(at..).unwrap_or_default();
    if header.len() < HEADER {
        // What is there of the header must be able to start one.
        let ok = header.first().is_none_or(|&v| v == VERSION) && header.get(1).is_none_or(|t| (1..=11).contains(t));
        return Err(ok);
    }
    let (kind, request) = (header[1], be16(header, 2).unwrap_or_default());
    let (length, padding) = (usize::from(be16(header, 4).unwrap_or_default()), usize::from(header[6]));
    let management = matches!(kind, GET_VALUES | GET_VALUES_RESULT | UNKNOWN_TYPE);
    if header[0] != VERSION || !(1..=11).contains(&kind) || header[7] != 0 || management != (request == 0) {
        return Err(false);
    }
    let fixed_ok = match kind {
        BEGIN_REQUEST | END_REQUEST | UNKNOWN_TYPE => length == 8,
        _ => true,
    };
    if !fixed_ok {
        return Err(false);
    }
    let end = at + HEADER + length + padding;
    if data.len() < at + HEADER + length {
        return Err(true);
    }
    let content = &data[at + HEADER..at + HEADER + length];
    let body_ok = match kind {
        // A role of RESPONDER, AUTHORIZER or FILTER, only FCGI_KEEP_CONN.
        BEGIN_REQUEST => matches!(be16(content, 0), Some(1..=3)) && content[2] & !1 == 0 && content[3..] == [0; 5],
        // FCGI_REQUEST_COMPLETE .. FCGI_UNKNOWN_ROLE.
        END_REQUEST => content[4] <= 3 && content[5..] == [0; 3],
        UNKNOWN_TYPE => content[1..] == [0; 7],
        _ => true,
    };
    if !body_ok {
        return Err(false);
    }
    Ok((Record { kind }, end))
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let mut at = 0;
    for i in 0..MAX_RECORDS {
        match record(data, at) {
            Ok((rec, end)) => {
                let opening_ok = match pkt.side {
                    Side::Up => rec.kind == BEGIN_REQUEST || rec.kind == GET_VALUES,
                    Side::Down => matches!(
                        rec.kind,
                        STDOUT | STDERR | END_REQUEST | GET_VALUES_RESULT | UNKNOWN_TYPE
                    ),
                };
                if i == 0 && !opening_ok {
                    return Verdict::No;
                }
                if end >= data.len() {
                    break;
                }
                at = end;
            }
            // The first record's body still coming: wait for it; a later
            // one's: decide on the whole records before it.
            Err(true) if i == 0 => return Verdict::Maybe,
            Err(true) => break,
            Err(false) => return Verdict::No,
        }
    }
    Verdict::Yes(Found::new("FastCGI"))
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (40000, 9000), data)
    }

    const PARAMS: u8 = 4;

    fn yes() -> Verdict {
        Verdict::Yes(Found::new("FastCGI"))
    }

    fn record(kind: u8, request: u16, content: &[u8], padding: u8) -> Vec<u8> {
        let mut out = vec![VERSION, kind];
        out.extend_from_slice(&request.to_be_bytes());
        out.extend_from_slice(&(content.len() as u16).to_be_bytes());
        out.extend_from_slice(&[padding, 0]);
        out.extend_from_slice(content);
        out.extend(std::iter::repeat_n(0, usize::from(padding)));
        out
    }

    /// FCGI_BEGIN_REQUEST, role RESPONDER, FCGI_KEEP_CONN, then the
    /// request's first parameter, SCRIPT_FILENAME, as a name-value pair.
    fn request() -> Vec<u8> {
        let mut data = record(BEGIN_REQUEST, 1, &[0, 1, 1, 0, 0, 0, 0, 0], 0);
        let mut pair = vec![15, 14];
        pair.extend_from_slice(b"SCRIPT_FILENAME/srv/index.php");
        data.extend(record(PARAMS, 1, &pair, 3));
        data
    }

    #[test]
    fn a_request_and_its_response() {
        assert_eq!(run(Side::Up, &request()), yes());
        assert_eq!(run(Side::Up, &request()[..16]), yes());
        // The parameters' record cut short: the begin record is whole.
        assert_eq!(run(Side::Up, &request()[..20]), yes());
        assert_eq!(run(Side::Up, &request()[..5]), Verdict::Maybe);
        let mut response = record(STDOUT, 1, b"Content-type: text/html\r\n\r\n<p>hi</p>", 3);
        response.extend(record(STDOUT, 1, b"", 0));
        response.extend(record(END_REQUEST, 1, &[0, 0, 0, 0, 0, 0, 0, 0], 0));
        assert_eq!(run(Side::Down, &response), yes());
        // Management records carry request id 0.
        let mut pairs = vec![14, 0];
        pairs.extend_from_slice(b"FCGI_MAX_CONNS");
        assert_eq!(run(Side::Up, &record(GET_VALUES, 0, &pairs, 0)), yes());
        assert_eq!(
            run(Side::Down, &record(UNKNOWN_TYPE, 0, &[12, 0, 0, 0, 0, 0, 0, 0], 0)),
            yes()
        );
    }

    #[test]
    fn near_misses_are_refused() {
        let mut version = request();
        version[0] = 2;
        assert_eq!(run(Side::Up, &version), Verdict::No);
        let mut reserved = request();
        reserved[7] = 1;
        assert_eq!(run(Side::Up, &reserved), Verdict::No);
        let mut role = request();
        role[9] = 4;
        assert_eq!(run(Side::Up, &role), Verdict::No);
        let mut flags = request();
        flags[10] = 2;
        assert_eq!(run(Side::Up, &flags), Verdict::No);
        // A begin record of 9 bytes, one with request id 0.
        assert_eq!(
            run(Side::Up, &record(BEGIN_REQUEST, 1, &[0, 1, 0, 0, 0, 0, 0, 0, 0], 0)),
            Verdict::No
        );
        assert_eq!(
            run(Side::Up, &record(BEGIN_REQUEST, 0, &[0, 1, 0, 0, 0, 0, 0, 0], 0)),
            Verdict::No
        );
        // A type past 11, and a following record that does not parse.
        assert_eq!(run(Side::Up, &record(12, 1, &[0; 8], 0)), Verdict::No);
        let mut tail = request();
        tail.extend_from_slice(&[VERSION, 0, 0, 1]);
        assert_eq!(run(Side::Up, &tail), Verdict::No);
        // A server does not begin requests; a web server does not send output.
        assert_eq!(run(Side::Down, &request()), Verdict::No);
        assert_eq!(run(Side::Up, &record(STDOUT, 1, b"x", 0)), Verdict::No);
        // A protocol status past FCGI_UNKNOWN_ROLE.
        assert_eq!(
            run(Side::Down, &record(END_REQUEST, 1, &[0, 0, 0, 0, 4, 0, 0, 0], 0)),
            Verdict::No
        );
    }
}
