//! A tracker shown packets with their flow table slots
//! (`Tracker::packet_in_slot`, as the engine does) tells the call table
//! exactly what one shown them without (`Tracker::packet`), also when a
//! slot is reused: by a flow after the one before it ended, and by a flow
//! whose predecessor's end has not been told yet.

mod common;

use common::udp_frame;

use sluice_voip::tracker::{Event, PacketView, Tracker, TrackerConfig};
use sluice_wire::{LinkType, decode};

/// RTP (RFC 3550 §5.1): PCMU, 20 ms of payload.
fn rtp(seq: u16, ssrc: u32) -> Vec<u8> {
    common::rtp_pcmu(seq, ssrc, 0xff)
}

/// A media flow: its first sender, receiver, SSRC, first packet's input
/// position and flow table slot.
struct MediaFlow {
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    ssrc: u32,
    first: u64,
    slot: u32,
}

enum Step<'a> {
    /// The flow's packet at this input position, with this RTP sequence
    /// number (the first of a flow is at its `first`).
    Packet(&'a MediaFlow, u64, u16),
    Ended(&'a MediaFlow),
}

/// The events a tracker sends for `steps`, shown with slots or without.
fn events(steps: &[Step<'_>], slots: bool) -> Vec<String> {
    let mut tracker = Tracker::new(0, TrackerConfig::default(), Vec::<Event>::new(), None);
    let mut packets = std::collections::HashMap::new();
    for step in steps {
        match *step {
            Step::Packet(flow, order, seq) => {
                let frame = udp_frame(flow.src, flow.dst, &rtp(seq, flow.ssrc));
                let decoded = decode(LinkType::RawIp, &frame).unwrap();
                let n = packets.entry(flow.first).or_insert(0u64);
                *n += 1;
                let view = PacketView {
                    ts_ns: 1_000_000_000 + order * 20_000_000,
                    order,
                    flow_order: flow.first,
                    key: &decoded.key,
                    dir: 0,
                    flow_packets: *n,
                    decoded: &decoded,
                    frame: &frame,
                    payload: &frame[usize::from(decoded.payload_offset)..],
                };
                if slots {
                    tracker.packet_in_slot(flow.slot, &view);
                } else {
                    tracker.packet(&view);
                }
            }
            Step::Ended(flow) => tracker.ended(flow.first, false),
        }
    }
    let counters = tracker.finish();
    assert_eq!(
        counters.rtp_packets,
        steps.iter().filter(|s| matches!(s, Step::Packet(..))).count() as u64
    );
    tracker.sink().iter().map(|e| format!("{e:?}")).collect()
}

#[test]
fn flows_found_by_slot_tell_what_flows_found_by_position_tell() {
    let a = MediaFlow {
        src: ([192, 0, 2, 1], 40000),
        dst: ([192, 0, 2, 2], 40002),
        ssrc: 0xa,
        first: 1,
        slot: 0,
    };
    let b = MediaFlow {
        src: ([192, 0, 2, 3], 40010),
        dst: ([192, 0, 2, 4], 40012),
        ssrc: 0xb,
        first: 2,
        slot: 1,
    };
    // In A's slot once A has ended.
    let c = MediaFlow {
        src: ([192, 0, 2, 5], 40020),
        dst: ([192, 0, 2, 6], 40022),
        ssrc: 0xc,
        first: 20,
        slot: 0,
    };
    // In B's slot while B's end has not been told.
    let d = MediaFlow {
        src: ([192, 0, 2, 7], 40030),
        dst: ([192, 0, 2, 8], 40032),
        ssrc: 0xd,
        first: 30,
        slot: 1,
    };
    let mut steps = Vec::new();
    for i in 0..8u16 {
        let at = 1 + 2 * u64::from(i);
        steps.push(Step::Packet(&a, at, 100 + i));
        steps.push(Step::Packet(&b, at + 1, 200 + i));
    }
    steps.push(Step::Ended(&a));
    for i in 0..5u16 {
        steps.push(Step::Packet(&c, 20 + u64::from(i), 300 + i));
    }
    for i in 0..5u16 {
        steps.push(Step::Packet(&d, 30 + u64::from(i), 400 + i));
    }
    steps.push(Step::Ended(&b));
    steps.push(Step::Ended(&d));
    let by_position = events(&steps, false);
    // Every flow started, and A, B and D ended with their own packets.
    assert_eq!(by_position.iter().filter(|e| e.starts_with("MediaStart")).count(), 4);
    assert_eq!(by_position.iter().filter(|e| e.starts_with("MediaEnd")).count(), 4);
    for ssrc in [0xa, 0xb, 0xc, 0xd] {
        assert!(
            by_position
                .iter()
                .any(|e| e.contains(&format!("ssrc: {ssrc}, ")) && e.contains("packets: ")),
            "{by_position:#?}"
        );
    }
    assert_eq!(events(&steps, true), by_position);
}
