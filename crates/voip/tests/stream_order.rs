//! A media flow's streams are reported in the order they came, whichever
//! direction each goes and however many share a direction: the tracker
//! keeps each direction's first stream apart from the others (where its
//! packets find it without reading another's), and the flow's end puts
//! them back in order.

mod common;

use common::udp_frame;

use sluice_voip::tracker::{Event, PacketView, Tracker, TrackerConfig};
use sluice_wire::{LinkType, decode};

/// RTP (RFC 3550 §5.1): PCMU, 20 ms of payload.
fn rtp(seq: u16, ssrc: u32) -> Vec<u8> {
    common::rtp_pcmu(seq, ssrc, 0xff)
}

#[test]
fn streams_end_in_the_order_they_came() {
    let (a, b) = (([192, 0, 2, 1], 40000), ([192, 0, 2, 2], 40002));
    // (direction, SSRC) in order of their first packets: two directions'
    // first streams among later ones of both.
    let streams: [(u8, u32); 6] = [(0, 0xa), (0, 0xb), (1, 0xc), (0, 0xd), (1, 0xe), (1, 0xf)];
    let flow_key = decode(LinkType::RawIp, &udp_frame(a, b, &rtp(0, 0))).unwrap().key;
    for slots in [true, false] {
        let mut tracker = Tracker::new(0, TrackerConfig::default(), Vec::<Event>::new(), None);
        let mut order = 1u64;
        let mut expected = vec![0u64; streams.len()];
        // Stream i starts in round i and sends one packet a round after.
        for round in 0..10u16 {
            for (i, &(dir, ssrc)) in streams.iter().enumerate().take(usize::from(round) + 1) {
                let seq = 1000 * (i as u16 + 1) + round;
                let (src, dst) = if dir == 0 { (a, b) } else { (b, a) };
                let frame = udp_frame(src, dst, &rtp(seq, ssrc));
                let decoded = decode(LinkType::RawIp, &frame).unwrap();
                let view = PacketView {
                    ts_ns: 1_000_000_000 + order * 10_000_000,
                    order,
                    flow_order: 1,
                    key: &flow_key,
                    dir: usize::from(dir),
                    flow_packets: order,
                    decoded: &decoded,
                    frame: &frame,
                    payload: &frame[usize::from(decoded.payload_offset)..],
                };
                if slots {
                    tracker.packet_in_slot(3, &view);
                } else {
                    tracker.packet(&view);
                }
                expected[i] += 1;
                order += 1;
            }
        }
        tracker.ended(1, false);
        tracker.finish();
        let ends: Vec<_> = tracker
            .sink()
            .iter()
            .filter_map(|e| match e {
                Event::MediaEnd(end) => Some(end),
                _ => None,
            })
            .collect();
        assert_eq!(ends.len(), 1, "slots: {slots}");
        let got: Vec<(u8, u32, u64)> = ends[0]
            .streams
            .iter()
            .map(|s| (s.dir, s.stats.ssrc, s.stats.packets))
            .collect();
        let want: Vec<(u8, u32, u64)> = streams.iter().zip(&expected).map(|(&(d, s), &n)| (d, s, n)).collect();
        assert_eq!(got, want, "slots: {slots}");
    }
}
