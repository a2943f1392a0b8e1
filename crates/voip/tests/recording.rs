//! Recording from a stream's first packet: a tracker holds the payloads of
//! a media flow not chosen yet until every worker has read past them, then
//! writes those after the description that chose the flow and counts the
//! ones before it in `record_missed_payloads`, whichever worker read the
//! description and whenever it did.

mod common;

use common::udp_frame;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use sluice_voip::media::MediaTap;
use sluice_voip::record::{MediaWriter, PublishingSink, RecordCounters, Selected, Selection, read_recording};
use sluice_voip::tracker::{Event, PacketView, Tracker, TrackerConfig};
use sluice_wire::{LinkType, decode};

/// An INVITE from 192.0.2.1:5060 whose offer names 192.0.2.1:49170.
const INVITE: &[u8] = b"INVITE sip:bob@example.com SIP/2.0\r\n\
Call-ID: a84b4c76e66710@pc33\r\n\
From: \"Alice\" <sip:alice@example.com>;tag=1928301774\r\n\
To: <sip:bob@example.com>\r\n\
CSeq: 314159 INVITE\r\n\
Content-Type: application/sdp\r\n\
Content-Length: 50\r\n\
\r\n\
v=0\r\n\
c=IN IP4 192.0.2.1\r\n\
m=audio 49170 RTP/AVP 0\r\n";

/// RTP (RFC 3550 §5.1): PCMU, 20 ms, SSRC 0x1234, the payload's bytes the
/// sequence number's low byte.
fn rtp(seq: u16) -> Vec<u8> {
    common::rtp_pcmu(seq, 0x1234, seq as u8)
}

type Worker = Tracker<PublishingSink<Vec<Event>>>;

/// A worker recording every call into `dir`.
fn worker(n: usize, dir: &std::path::Path, selected: &Arc<Selected>, total: &Arc<Mutex<RecordCounters>>) -> Worker {
    let tap = MediaWriter::new(dir, n, selected.clone(), total.clone(), true);
    Tracker::new(
        n,
        TrackerConfig::default(),
        PublishingSink::new(Vec::new(), Selection::All, Some(selected.clone())),
        Some(Box::new(tap) as Box<dyn MediaTap>),
    )
}

/// Shows `tracker` one datagram at input position `order`, of the flow
/// whose first packet was at `flow_order`.
fn feed(tracker: &mut Worker, order: u64, flow_order: u64, packets: u64, frame: &[u8]) {
    let decoded = decode(LinkType::RawIp, frame).unwrap();
    let start = usize::from(decoded.payload_offset);
    tracker.packet(&PacketView {
        ts_ns: 1_000_000_000 + order * 20_000_000,
        order,
        flow_order,
        key: &decoded.key,
        dir: 0,
        flow_packets: packets,
        decoded: &decoded,
        frame,
        payload: &frame[start..],
    });
}

const CALLEE: ([u8; 4], u16) = ([192, 0, 2, 2], 30000);
const CALLER_MEDIA: ([u8; 4], u16) = ([192, 0, 2, 1], 49170);

/// The sequence numbers recorded in `dir`'s worker files.
fn recorded(dir: &std::path::Path) -> BTreeSet<u16> {
    let mut seqs = BTreeSet::new();
    for entry in std::fs::read_dir(dir.join("media")).unwrap() {
        let records: BTreeSet<u64> = (0..4).map(|w| w << 48).collect();
        for r in read_recording(&entry.unwrap().path(), &records).unwrap() {
            assert_eq!(r.payload, vec![r.seq as u8; 160]);
            seqs.insert(r.seq);
        }
    }
    seqs
}

#[test]
fn a_flow_whose_description_another_worker_reads_late_is_recorded_from_its_first_packet() {
    let tmp = tempfile::tempdir().unwrap();
    let selected = Arc::new(Selected::default());
    let total = Arc::new(Mutex::new(RecordCounters::default()));
    let mut a = worker(0, tmp.path(), &selected, &total);
    let mut b = worker(1, tmp.path(), &selected, &total);
    // Input: the INVITE at position 0 (worker A's), the callee's RTP to
    // the caller at 1..=10 (worker B's). Worker B runs ahead: it reads
    // all its RTP before worker A reads the INVITE.
    for seq in 1..=10u16 {
        feed(
            &mut b,
            u64::from(seq),
            1,
            u64::from(seq),
            &udp_frame(CALLEE, CALLER_MEDIA, &rtp(seq)),
        );
    }
    feed(
        &mut a,
        0,
        0,
        1,
        &udp_frame(([192, 0, 2, 1], 5060), ([192, 0, 2, 2], 5060), INVITE),
    );
    // Then both have read everything.
    a.reached(11);
    b.reached(11);
    a.finish();
    b.finish();
    assert_eq!(recorded(tmp.path()), (1..=10).collect());
    let t = total.lock().unwrap();
    assert_eq!((t.recorded_payloads, t.record_missed_payloads), (10, 0), "{t:?}");
}

#[test]
fn rtp_before_the_description_that_names_it_is_counted_not_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let selected = Arc::new(Selected::default());
    let total = Arc::new(Mutex::new(RecordCounters::default()));
    let mut one = worker(0, tmp.path(), &selected, &total);
    // The callee's RTP at 0..=3, the INVITE naming its destination at 4,
    // more RTP at 5..=9, all read by one worker in order.
    for order in 0..10u64 {
        if order == 4 {
            feed(
                &mut one,
                4,
                4,
                1,
                &udp_frame(([192, 0, 2, 1], 5060), ([192, 0, 2, 2], 5060), INVITE),
            );
        } else {
            let seq = order as u16 + 1;
            feed(
                &mut one,
                order,
                0,
                order + 1,
                &udp_frame(CALLEE, CALLER_MEDIA, &rtp(seq)),
            );
        }
        one.reached(order + 1);
    }
    one.finish();
    assert_eq!(recorded(tmp.path()), (6..=10).collect());
    let t = total.lock().unwrap();
    assert_eq!((t.recorded_payloads, t.record_missed_payloads), (5, 4), "{t:?}");
}
