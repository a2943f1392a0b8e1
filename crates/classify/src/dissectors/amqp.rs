//! AMQP 0-9-1 frames (the AMQP 0-9-1 specification, section 4.2.3, "General
//! Frame Format"), for connections whose start was not seen: the protocol
//! header `AMQP\0\0\x09\x01` that opens a connection is the built-in
//! rule's. A frame is its type (1 method, 2 content header, 3 content body,
//! 8 heartbeat), the channel (2 bytes), the payload's size (4 bytes,
//! big-endian), the payload and the frame-end octet 0xCE. A method's
//! payload opens with its class and method ids, a content header's with
//! its class (basic, the one class with content) and a weight of 0, and a
//! heartbeat is empty, on channel 0.
//!
//! The direction's head is read frame by frame: every whole frame must be
//! one, and a method of the specification's classes, a content header or
//! a heartbeat decides; body frames alone prove little and wait for one.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "AMQP",
    wants: Wants::Tcp,
    first_byte: FirstByte {
        tcp: ByteSet::of(&[METHOD, HEADER, BODY, HEARTBEAT]),
        udp: ByteSet::NONE,
    },
    prefix: Prefix::ANY,
    inspect,
}];

const METHOD: u8 = 1;
const HEADER: u8 = 2;
const BODY: u8 = 3;
const HEARTBEAT: u8 = 8;
const FRAME_END: u8 = 0xce;
const FRAME_HEADER: usize = 7;
/// The class with content: basic.
const BASIC: u16 = 60;
/// Frames larger than this are not waited for: the chain's head would not
/// hold their end.
const MAX_WAIT: usize = 4096;

/// Whether `method` is one of `class`'s methods in AMQP 0-9-1.
fn known_method(class: u16, method: u16) -> bool {
    let methods: &[u16] = match class {
        // connection
        10 => &[10, 11, 20, 21, 30, 31, 40, 41, 50, 51],
        // channel
        20 => &[10, 11, 20, 21, 40, 41],
        // exchange
        40 => &[10, 11, 20, 21],
        // queue
        50 => &[10, 11, 20, 21, 30, 31, 40, 41, 50, 51],
        // basic
        60 => &[
            10, 11, 20, 21, 30, 31, 40, 50, 60, 70, 71, 72, 80, 90, 100, 110, 111, 120,
        ],
        // tx
        90 => &[10, 11, 20, 21, 30, 31],
        _ => &[],
    };
    methods.contains(&method)
}

enum Frame {
    /// A method, content header or heartbeat: AMQP's own.
    Telling,
    /// A body frame: any bytes between the header and the frame end.
    Body,
}

/// The frame that `payload` (between a frame's header and its end) makes
/// with `kind` and `channel`.
fn frame(kind: u8, channel: u16, payload: &[u8]) -> Option<Frame> {
    let u16_at = |at: usize| Some(u16::from_be_bytes([*payload.get(at)?, *payload.get(at + 1)?]));
    match kind {
        METHOD => known_method(u16_at(0)?, u16_at(2)?).then_some(Frame::Telling),
        HEADER => (u16_at(0)? == BASIC && u16_at(2)? == 0 && payload.len() >= 14).then_some(Frame::Telling),
        BODY => Some(Frame::Body),
        HEARTBEAT => (channel == 0 && payload.is_empty()).then_some(Frame::Telling),
        _ => None,
    }
}

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let mut at = 0;
    loop {
        let Some(header) = data.get(at..at + FRAME_HEADER) else {
            // The rest is part of a frame header: wait for it, unless its
            // type is already wrong.
            return match data.get(at) {
                Some(&(METHOD | HEADER | BODY | HEARTBEAT)) | None if at < MAX_WAIT => Verdict::Maybe,
                _ => Verdict::No,
            };
        };
        let kind = header[0];
        if !matches!(kind, METHOD | HEADER | BODY | HEARTBEAT) {
            return Verdict::No;
        }
        let channel = u16::from_be_bytes([header[1], header[2]]);
        let size = u32::from_be_bytes([header[3], header[4], header[5], header[6]]) as usize;
        let end = at + FRAME_HEADER + size;
        let Some(&last) = data.get(end) else {
            return if end < MAX_WAIT { Verdict::Maybe } else { Verdict::No };
        };
        if last != FRAME_END {
            return Verdict::No;
        }
        match frame(kind, channel, &data[at + FRAME_HEADER..end]) {
            Some(Frame::Telling) => return Verdict::Yes(Found::new("AMQP")),
            Some(Frame::Body) => at = end + 1,
            None => return Verdict::No,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn frame(kind: u8, channel: u16, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![kind];
        out.extend_from_slice(&channel.to_be_bytes());
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
        out.push(FRAME_END);
        out
    }

    /// basic.publish (60, 40) on channel 1: reserved, exchange "", routing
    /// key "celery", flags.
    fn publish() -> Vec<u8> {
        let mut payload = vec![0, 60, 0, 40, 0, 0, 0, 6];
        payload.extend_from_slice(b"celery");
        payload.push(0);
        frame(METHOD, 1, &payload)
    }

    /// Its content header: class basic, weight 0, a body of 5 bytes, no
    /// properties.
    fn content_header() -> Vec<u8> {
        let mut payload = vec![0, 60, 0, 0];
        payload.extend_from_slice(&5u64.to_be_bytes());
        payload.extend_from_slice(&[0, 0]);
        frame(HEADER, 1, &payload)
    }

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, Side::Up, (44205, 5672), data)
    }

    const YES: Verdict = Verdict::Yes(Found::new("AMQP"));

    #[test]
    fn frames_of_a_connection_in_progress() {
        assert_eq!(run(&publish()), YES);
        assert_eq!(run(&content_header()), YES);
        assert_eq!(run(&frame(HEARTBEAT, 0, &[])), YES);
        // A body frame, then the next publish.
        let mut data = frame(BODY, 1, b"hello");
        data.extend(publish());
        assert_eq!(run(&data), YES);
        // connection.close-ok (10, 51) on channel 0.
        assert_eq!(run(&frame(METHOD, 0, &[0, 10, 0, 51])), YES);
    }

    #[test]
    fn a_frame_still_arriving_is_awaited() {
        let data = publish();
        assert_eq!(run(&data[..1]), Verdict::Maybe);
        assert_eq!(run(&data[..5]), Verdict::Maybe);
        assert_eq!(run(&data[..data.len() - 1]), Verdict::Maybe);
        // Body frames alone wait for a frame that tells.
        let body = frame(BODY, 1, b"hello");
        assert_eq!(run(&body), Verdict::Maybe);
        let mut two = body.clone();
        two.extend_from_slice(&publish()[..4]);
        assert_eq!(run(&two), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        // Another frame type, a missing frame end, a size one off.
        let mut data = publish();
        data[0] = 4;
        assert_eq!(run(&data), Verdict::No);
        let mut data = publish();
        let last = data.len() - 1;
        data[last] = 0xcf;
        assert_eq!(run(&data), Verdict::No);
        let mut data = publish();
        data[6] -= 1;
        assert_eq!(run(&data), Verdict::No);
        // Unknown classes and methods.
        for (class, method) in [(0u16, 10u16), (30, 10), (60, 41), (10, 12), (85, 10)] {
            let mut payload = class.to_be_bytes().to_vec();
            payload.extend_from_slice(&method.to_be_bytes());
            assert_eq!(run(&frame(METHOD, 1, &payload)), Verdict::No, "{class}.{method}");
        }
        // A content header of another class or weight, a heartbeat on a
        // channel or with a payload.
        let mut data = content_header();
        data[8] = 50;
        assert_eq!(run(&data), Verdict::No);
        let mut data = content_header();
        data[10] = 1;
        assert_eq!(run(&data), Verdict::No);
        assert_eq!(run(&frame(HEARTBEAT, 1, &[])), Verdict::No);
        assert_eq!(run(&frame(HEARTBEAT, 0, &[0])), Verdict::No);
        // A body frame followed by something else; a frame too large to
        // wait for.
        let mut data = frame(BODY, 1, b"hello");
        data.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(run(&data), Verdict::No);
        let mut big = vec![BODY, 0, 1];
        big.extend_from_slice(&100_000u32.to_be_bytes());
        big.extend_from_slice(&[0; 100]);
        assert_eq!(run(&big), Verdict::No);
        // TPKT (RDP) and the protocol header, which is the rule's.
        assert_eq!(run(&[3, 0, 0, 19, 14, 0xe0, 0, 0, 0, 0, 0]), Verdict::No);
        assert_eq!(run(b"AMQP\x00\x00\x09\x01"), Verdict::No);
    }
}
