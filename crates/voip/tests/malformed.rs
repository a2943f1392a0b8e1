//! Malformed SIP, SDP, RTP and RTCP never panic: each is refused with a
//! named reason, which the tracker counts.

mod common;

use proptest::prelude::*;
use sluice_voip::{rtp, sdp, sip};

const INVITE: &[u8] = b"INVITE sip:bob@example.com SIP/2.0\r\n\
Call-ID: a84b4c76e66710@pc33\r\n\
From: \"Alice\" <sip:alice@example.com>;tag=1928301774\r\n\
To: <sip:bob@example.com>\r\n\
CSeq: 314159 INVITE\r\n\
Content-Type: application/sdp\r\n\
Content-Length: 89\r\n\
\r\n\
v=0\r\n\
c=IN IP4 192.0.2.1\r\n\
m=audio 49170 RTP/AVP 0 101\r\n\
a=rtpmap:101 telephone-event/8000\r\n";

fn check_sip(bytes: &[u8]) {
    if let Ok(m) = sip::parse(bytes) {
        assert!(m.len <= bytes.len());
        if m.has_sdp() {
            let _ = sdp::parse(m.body);
        }
    }
    if let Ok(Some(len)) = sip::message_len(bytes) {
        assert!(len <= bytes.len());
    }
    let _ = sip::looks_like_sip(bytes);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        check_sip(&bytes);
        let _ = sdp::parse(&bytes);
        if let Ok(h) = rtp::parse_rtp(&bytes) {
            prop_assert!(h.payload_offset + h.payload_len <= bytes.len());
        }
        for p in rtp::rtcp_packets(&bytes) {
            if let Ok(rtp::RtcpPacket::Sender { blocks, .. } | rtp::RtcpPacket::Receiver { blocks, .. }) = p {
                let _ = rtp::report_blocks(blocks).count();
            }
        }
    }

    #[test]
    fn a_mutated_invite_never_panics(
        edits in proptest::collection::vec((0..INVITE.len(), any::<u8>()), 1..8),
        cut in 0..=INVITE.len(),
    ) {
        let mut bytes = INVITE.to_vec();
        for (at, b) in edits {
            bytes[at] = b;
        }
        bytes.truncate(cut.max(1));
        check_sip(&bytes);
    }
}

#[test]
fn the_unmutated_invite_reads() {
    let m = sip::parse(INVITE).unwrap();
    let d = sdp::parse(m.body).unwrap();
    assert_eq!(d.media[0].port, 49170);
    assert_eq!(d.media[0].codec(101), Some(("telephone-event", 8000)));
    // Truncating the body is refused by name, not read short.
    assert_eq!(
        sip::parse(&INVITE[..INVITE.len() - 5]).unwrap_err(),
        sip::SipError::ShortBody
    );
}

/// An IPv4 UDP datagram from 192.0.2.1:5060 to 192.0.2.2:5060.
fn udp_frame(payload: &[u8]) -> Vec<u8> {
    common::udp_frame(([192, 0, 2, 1], 5060), ([192, 0, 2, 2], 5060), payload)
}

/// Runs datagrams through a tracker as one SIP flow; its counters.
fn track(datagrams: &[Vec<u8>]) -> sluice_voip::tracker::TrackerCounters {
    use sluice_voip::tracker::{Event, PacketView, Tracker, TrackerConfig};
    use sluice_wire::{LinkType, decode};
    let mut tracker = Tracker::new(0, TrackerConfig::default(), Vec::<Event>::new(), None);
    for (i, payload) in datagrams.iter().enumerate() {
        let frame = udp_frame(payload);
        let decoded = decode(LinkType::RawIp, &frame).unwrap();
        let start = usize::from(decoded.payload_offset);
        tracker.packet(&PacketView {
            ts_ns: i as u64 * 1_000_000,
            order: i as u64,
            flow_order: 0,
            key: &decoded.key,
            dir: 0,
            flow_packets: i as u64 + 1,
            decoded: &decoded,
            frame: &frame,
            payload: &frame[start..],
        });
    }
    tracker.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Every datagram of a SIP flow is a message, a keep-alive or a
    /// warning counted under its reason: nothing is dropped unaccounted.
    #[test]
    fn every_sip_datagram_is_a_message_or_a_counted_warning(
        mutations in proptest::collection::vec(
            (proptest::collection::vec((0..INVITE.len(), any::<u8>()), 0..6), 1..=INVITE.len()),
            1..6,
        ),
    ) {
        let datagrams: Vec<Vec<u8>> = mutations
            .into_iter()
            .map(|(edits, cut)| {
                let mut bytes = INVITE.to_vec();
                for (at, b) in edits {
                    bytes[at] = b;
                }
                bytes.truncate(cut);
                bytes
            })
            .collect();
        let c = track(&datagrams);
        let sip_errors: u64 = c.sip_errors.values().sum();
        prop_assert_eq!(c.sip_messages + c.sip_keepalives + sip_errors, datagrams.len() as u64, "{:?}", c);
    }
}

#[test]
fn a_truncated_invite_is_a_named_warning() {
    let c = track(&[INVITE.to_vec(), INVITE[..INVITE.len() - 5].to_vec()]);
    assert_eq!(c.sip_messages, 1);
    assert_eq!(c.sip_errors.get("short_body"), Some(&1));
    assert_eq!(c.warnings(), 1);
}
