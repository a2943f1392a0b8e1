//! Live capture on real interfaces: each test builds two network
//! namespaces joined by a veth pair, captures on one end and injects
//! hand-made frames on either end with a raw packet socket, so no frame
//! can leave the namespaces. Needs root (or CAP_NET_ADMIN and CAP_NET_RAW)
//! and `ip`; without them each test says why it skips and passes.
#![cfg(target_os = "linux")]

mod common;

use common::{Injector, VethLab, ip, is_root};

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_capture::RawPacket;
use sluice_capture::live::{LiveConfig, LiveError, LiveSocket, LiveStats};
use sluice_wire::LinkType;
use sluice_wire::bytes::internet_checksum;

/// Every injected frame comes from a MAC address with this prefix, so
/// that a stray frame the kernel sends on its own is never mistaken for
/// one of ours.
const OUR_MAC: [u8; 3] = [0x02, 0x53, 0x4c];
const CAPTURE_IF: &str = "cap0";
const PEER_IF: &str = "peer0";

/// The two namespaces of [`VethLab`]: `a` holds `cap0`, `b` holds `peer0`.
struct Lab(VethLab);

impl std::ops::Deref for Lab {
    type Target = VethLab;

    fn deref(&self) -> &VethLab {
        &self.0
    }
}

impl Lab {
    fn new() -> Option<Lab> {
        VethLab::new("live", CAPTURE_IF, PEER_IF).map(Lab)
    }

    fn open(&self, config: &LiveConfig) -> LiveSocket {
        self.in_a(|| LiveSocket::open(config)).expect("open the capture socket")
    }

    /// Injects on the peer: the frames arrive at `cap0` from outside.
    fn inbound(&self) -> Injector {
        self.in_b(|| Injector::open(PEER_IF))
    }

    /// Injects on `cap0` itself: the frames leave through the capture
    /// interface, as a host's own replies do.
    fn outbound(&self) -> Injector {
        self.in_a(|| Injector::open(CAPTURE_IF))
    }
}

// ---- frames ------------------------------------------------------------

const TO_CAPTURE_SIDE: [u8; 6] = [0x02, 0x53, 0x4c, 0xff, 0x00, 0x01];

/// An Ethernet frame from one of our MAC addresses, to one that is
/// nobody's: the far end's stack ignores it.
fn frame(ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + l3.len());
    f.extend_from_slice(&TO_CAPTURE_SIDE);
    f.extend_from_slice(&[OUR_MAC[0], OUR_MAC[1], OUR_MAC[2], 0x00, 0x00, 0x02]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

/// A payload ending in `tag`, so that whoever receives the frame can tell
/// which one it is whatever the headers in front.
fn tagged_payload(tag: u64, len: usize) -> Vec<u8> {
    let mut p = vec![0x5a; len.max(8)];
    let n = p.len();
    p[n - 8..].copy_from_slice(&tag.to_be_bytes());
    p
}

fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, id: u16, fragment: u16, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0];
    h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h[6..8].copy_from_slice(&fragment.to_be_bytes());
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let sum = internet_checksum(&h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    h.extend_from_slice(l4);
    h
}

fn ipv6(src: [u8; 16], dst: [u8; 16], proto: u8, flow_label: u32, l4: &[u8]) -> Vec<u8> {
    let mut h = (0x6000_0000u32 | (flow_label & 0xf_ffff)).to_be_bytes().to_vec();
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[proto, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(l4);
    h
}

const TCP: u8 = 6;
const UDP: u8 = 17;

fn l4(proto: u8, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    if proto == TCP {
        // seq, ack, offset 5 words, ACK, window, checksum, urgent
        h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        h.extend_from_slice(&[0, 0]);
    }
    h.extend_from_slice(payload);
    h
}

/// `count` UDP frames of assorted lengths (60 to 1514 bytes), tagged with
/// their index.
fn udp_frames(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let payload = tagged_payload(i as u64, 18 + (i * 37) % 1455);
            frame(
                0x0800,
                &ipv4(
                    [10, 99, 0, 1],
                    [10, 99, 0, 2],
                    UDP,
                    i as u16,
                    0,
                    &l4(UDP, 40000, 9, &payload),
                ),
            )
        })
        .collect()
}

fn tag_of(data: &[u8]) -> Option<u64> {
    if data.len() < 22 || data[6..9] != OUR_MAC {
        return None;
    }
    Some(u64::from_be_bytes(data[data.len() - 8..].try_into().unwrap()))
}

// ---- reading -----------------------------------------------------------

#[derive(Debug)]
struct Seen {
    ts_ns: u64,
    wire_len: u32,
    data: Vec<u8>,
    link: LinkType,
}

/// Everything one socket delivers until `done` says enough, or `limit`
/// passes: the packets (copied, for the assertions) and whether any block
/// said the kernel was losing packets.
fn read_until(socket: &mut LiveSocket, limit: Duration, mut done: impl FnMut(&[Seen]) -> bool) -> (Vec<Seen>, bool) {
    let start = Instant::now();
    let mut seen = Vec::new();
    let mut losing = false;
    while !done(&seen) && start.elapsed() < limit {
        if let Some(mut block) = socket.next_block(Duration::from_millis(50)).expect("next_block") {
            losing |= block.losing();
            let expected = block.len();
            let before = seen.len();
            seen.extend(block.packets().map(|p: RawPacket<'_>| Seen {
                ts_ns: p.ts_ns,
                wire_len: p.wire_len,
                data: p.data.to_vec(),
                link: p.link,
            }));
            assert_eq!(
                seen.len() - before,
                expected,
                "a block yields as many packets as it says it holds"
            );
        }
    }
    (seen, losing)
}

fn ours(seen: &[Seen]) -> usize {
    seen.iter().filter(|s| tag_of(&s.data).is_some()).count()
}

fn small_config() -> LiveConfig {
    LiveConfig {
        ring_bytes: 4 << 20,
        block_bytes: 64 << 10,
        snaplen: 2048,
        ..LiveConfig::new(CAPTURE_IF)
    }
}

// ---- tests -------------------------------------------------------------

#[test]
fn every_injected_frame_arrives_once_intact_and_in_order() {
    let Some(lab) = Lab::new() else { return };
    let mut socket = lab.open(&small_config());
    assert_eq!(socket.link_type(), LinkType::Ethernet);
    assert_eq!(socket.interface(), CAPTURE_IF);
    let frames = udp_frames(5000);
    let peer = lab.inbound();
    let (seen, losing) = thread::scope(|s| {
        s.spawn(|| peer.send_all(&frames));
        read_until(&mut socket, Duration::from_secs(20), |seen| ours(seen) >= frames.len())
    });
    let tags: Vec<u64> = seen.iter().filter_map(|s| tag_of(&s.data)).collect();
    assert_eq!(tags.len(), frames.len(), "received == sent");
    assert!(
        tags.iter().copied().eq(0..frames.len() as u64),
        "each frame once, in order"
    );
    for s in seen.iter().filter(|s| tag_of(&s.data).is_some()) {
        let sent = &frames[tag_of(&s.data).unwrap() as usize];
        assert_eq!(&s.data, sent, "captured bytes are the frame's");
        assert_eq!(s.wire_len as usize, sent.len());
        assert_eq!(s.link, LinkType::Ethernet);
    }
    assert!(!losing);
    let stats = socket.stats().unwrap();
    assert_eq!(
        stats,
        LiveStats {
            packets: seen.len() as u64,
            drops: 0,
            queue_freezes: 0
        }
    );
}

#[test]
fn timestamps_are_kernel_nanoseconds_that_never_decrease() {
    let Some(lab) = Lab::new() else { return };
    let mut socket = lab.open(&small_config());
    let frames = udp_frames(2000);
    let peer = lab.inbound();
    let now_ns = || SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let before = now_ns();
    let (seen, _) = thread::scope(|s| {
        s.spawn(|| peer.send_all(&frames));
        read_until(&mut socket, Duration::from_secs(20), |seen| ours(seen) >= frames.len())
    });
    let after = now_ns();
    assert_eq!(ours(&seen), frames.len());
    let ts: Vec<u64> = seen.iter().map(|s| s.ts_ns).collect();
    assert!(
        ts.iter().all(|&t| (before..=after).contains(&t)),
        "stamped while the test ran"
    );
    assert!(ts.windows(2).all(|w| w[0] <= w[1]), "timestamps never go back");
    assert!(
        ts.iter().any(|t| t % 1000 != 0),
        "nanosecond resolution, not microseconds"
    );
    assert!(
        ts.windows(2).filter(|w| w[0] < w[1]).count() > ts.len() / 2,
        "a stamp per packet, not per block"
    );
}

#[test]
fn snaplen_truncates_the_bytes_but_not_the_wire_length() {
    let Some(lab) = Lab::new() else { return };
    let snaplen = 96;
    let mut socket = lab.open(&LiveConfig {
        snaplen,
        ..small_config()
    });
    let frames = udp_frames(300);
    let peer = lab.inbound();
    peer.send_all(&frames);
    let (seen, _) = read_until(&mut socket, Duration::from_secs(10), |seen| {
        seen.iter().filter(|s| s.data[6..9] == OUR_MAC).count() >= frames.len()
    });
    let ours: Vec<&Seen> = seen.iter().filter(|s| s.data[6..9] == OUR_MAC).collect();
    assert_eq!(ours.len(), frames.len());
    for (s, sent) in ours.iter().zip(&frames) {
        assert_eq!(s.wire_len as usize, sent.len(), "wire length is the frame's");
        assert_eq!(
            s.data.len(),
            sent.len().min(snaplen as usize),
            "captured length is the snap length"
        );
        assert_eq!(s.data, sent[..s.data.len()]);
    }
    assert!(
        ours.iter()
            .any(|s| s.data.len() == snaplen as usize && s.wire_len > snaplen)
    );
}

#[test]
fn vlan_tags_that_linux_strips_are_put_back() {
    let Some(lab) = Lab::new() else { return };
    let mut socket = lab.open(&small_config());
    // 802.1Q, then QinQ (802.1ad outside, 802.1Q inside), tagged 0 and 1.
    let tags: [&[u8]; 2] = [
        &[0x81, 0x00, 0x20, 0x05],
        &[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0xc8],
    ];
    let frames: Vec<Vec<u8>> = tags
        .iter()
        .enumerate()
        .map(|(i, tags)| {
            let udp = l4(UDP, 1, 2, &tagged_payload(i as u64, 40));
            let mut f = frame(0x0800, &ipv4([10, 99, 0, 1], [10, 99, 0, 2], UDP, 7, 0, &udp));
            f.splice(12..12, tags.iter().copied());
            f
        })
        .collect();
    lab.inbound().send_all(&frames);
    lab.outbound().send_all(&frames);
    let (seen, _) = read_until(&mut socket, Duration::from_secs(10), |seen| ours(seen) >= 4);
    let got: Vec<&Seen> = seen.iter().filter(|s| tag_of(&s.data).is_some()).collect();
    assert_eq!(got.len(), 4, "both frames, received and sent");
    for s in got {
        let sent = &frames[tag_of(&s.data).unwrap() as usize];
        assert_eq!(&s.data, sent, "the frame as it was on the wire, tags included");
        assert_eq!(s.wire_len as usize, sent.len());
    }
}

/// Frames of many flows cross the veth both ways; two sockets share the
/// interface in one fanout group. Every flow's packets, both directions,
/// must land on one socket.
#[test]
fn fanout_keeps_both_directions_of_every_flow_on_one_socket() {
    let Some(lab) = Lab::new() else { return };
    let config = LiveConfig {
        fanout_group: None,
        ..small_config()
    };
    let mut group = lab.in_a(|| LiveSocket::open_group(&config, 2)).expect("open the group");
    assert_eq!(group.len(), 2);
    let id = group[0].fanout_group().expect("a group id");
    assert!(group.iter().all(|s| s.fanout_group() == Some(id)));

    // (forward frame, reverse frame) per flow; the flow's number is the tag.
    let mut flows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let add = |flows: &mut Vec<(Vec<u8>, Vec<u8>)>, make: &dyn Fn(bool, &[u8]) -> Vec<u8>| {
        let tag = tagged_payload(flows.len() as u64, 24);
        flows.push((make(false, &tag), make(true, &tag)));
    };
    for i in 0..160 {
        let (a, b) = (next().to_be_bytes(), next().to_be_bytes());
        let (c, s) = ([a[0], a[1], a[2], a[3]], [b[0], b[1], b[2], b[3]]);
        let (cp, sp) = (next() as u16 | 1024, [80, 443, 53, 5060][i % 4]);
        let proto = if i % 2 == 0 { TCP } else { UDP };
        add(&mut flows, &|reverse, tag| {
            let l3 = if reverse {
                ipv4(s, c, proto, 1, 0, &l4(proto, sp, cp, tag))
            } else {
                ipv4(c, s, proto, 1, 0, &l4(proto, cp, sp, tag))
            };
            frame(0x0800, &l3)
        });
    }
    // Addresses 2^31 apart as the kernel reads them (the last byte's top
    // bit): Linux before 6.0 hashed these two directions apart.
    for port in 0..16u16 {
        let (c, s) = ([192, 168, 37, 50], [192, 168, 37, 178]);
        add(&mut flows, &|reverse, tag| {
            let l3 = if reverse {
                ipv4(s, c, UDP, 1, 0, &l4(UDP, 53, 30000 + port, tag))
            } else {
                ipv4(c, s, UDP, 1, 0, &l4(UDP, 30000 + port, 53, tag))
            };
            frame(0x0800, &l3)
        });
    }
    for i in 0..80 {
        let (mut c, mut s) = ([0u8; 16], [0u8; 16]);
        c[..8].copy_from_slice(&next().to_be_bytes());
        c[8..].copy_from_slice(&next().to_be_bytes());
        s[..8].copy_from_slice(&next().to_be_bytes());
        s[8..].copy_from_slice(&next().to_be_bytes());
        let (cp, sp) = (next() as u16 | 1024, [80, 443, 53, 5060][i % 4]);
        let proto = if i % 2 == 0 { TCP } else { UDP };
        // Half with flow labels, as Linux sets them: one per direction.
        let (fl, rl) = if i % 4 < 2 {
            (0, 0)
        } else {
            (next() as u32, next() as u32)
        };
        add(&mut flows, &|reverse, tag| {
            let l3 = if reverse {
                ipv6(s, c, proto, rl, &l4(proto, sp, cp, tag))
            } else {
                ipv6(c, s, proto, fl, &l4(proto, cp, sp, tag))
            };
            frame(0x86dd, &l3)
        });
    }

    // Many flows between one pair of IPv6 hosts, with flow labels.
    let (c, s) = (
        [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    );
    for port in 0..16u16 {
        let (fl, rl) = (next() as u32, next() as u32);
        add(&mut flows, &|reverse, tag| {
            let l3 = if reverse {
                ipv6(s, c, TCP, rl, &l4(TCP, 443, 40000 + port, tag))
            } else {
                ipv6(c, s, TCP, fl, &l4(TCP, 40000 + port, 443, tag))
            };
            frame(0x86dd, &l3)
        });
    }

    let (inbound, outbound) = (lab.inbound(), lab.outbound());
    let forward: Vec<Vec<u8>> = flows.iter().flat_map(|(f, _)| [f.clone(), f.clone()]).collect();
    let reverse: Vec<Vec<u8>> = flows.iter().flat_map(|(_, r)| [r.clone(), r.clone()]).collect();
    let expected = forward.len() + reverse.len();
    let mut landed: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    let mut per_socket = [0usize; 2];
    thread::scope(|s| {
        s.spawn(|| inbound.send_all(&forward));
        s.spawn(|| outbound.send_all(&reverse));
        let start = Instant::now();
        while per_socket.iter().sum::<usize>() < expected && start.elapsed() < Duration::from_secs(20) {
            for (i, socket) in group.iter_mut().enumerate() {
                if let Some(mut block) = socket.next_block(Duration::from_millis(5)).unwrap() {
                    for p in block.packets() {
                        if let Some(flow) = tag_of(p.data) {
                            landed.entry(flow).or_default().insert(i);
                            per_socket[i] += 1;
                        }
                    }
                }
            }
        }
    });
    assert_eq!(
        per_socket.iter().sum::<usize>(),
        expected,
        "every frame on exactly one socket"
    );
    assert_eq!(landed.len(), flows.len());
    let split: Vec<u64> = landed.iter().filter(|(_, s)| s.len() > 1).map(|(f, _)| *f).collect();
    assert!(split.is_empty(), "flows split between sockets by direction: {split:?}");
    let flows_on = |i| landed.values().filter(|s| s.contains(&i)).count();
    assert!(
        flows_on(0) > flows.len() / 5 && flows_on(1) > flows.len() / 5,
        "the hash spreads flows over both sockets: {} and {}",
        flows_on(0),
        flows_on(1)
    );
    for socket in &group {
        assert_eq!(socket.stats().unwrap().drops, 0);
    }
}

/// `PACKET_FANOUT_FLAG_DEFRAG` hands the group a fragmented IPv4 datagram
/// as one reassembled frame.
#[test]
fn fanout_reassembles_ipv4_fragments_into_one_frame() {
    let Some(lab) = Lab::new() else { return };
    let mut group = lab
        .in_a(|| LiveSocket::open_group(&small_config(), 2))
        .expect("open the group");
    let datagram = l4(UDP, 4000, 5000, &tagged_payload(77, 1200));
    let (first, second) = datagram.split_at(600);
    let fragments = [
        frame(
            0x0800,
            &ipv4([10, 99, 0, 1], [10, 99, 0, 2], UDP, 0x1234, 0x2000, first),
        ),
        frame(
            0x0800,
            &ipv4([10, 99, 0, 1], [10, 99, 0, 2], UDP, 0x1234, 600 / 8, second),
        ),
    ];
    lab.inbound().send_all(&fragments);
    let whole = frame(0x0800, &ipv4([10, 99, 0, 1], [10, 99, 0, 2], UDP, 0x1234, 0, &datagram));
    let mut seen = Vec::new();
    let start = Instant::now();
    while seen.is_empty() && start.elapsed() < Duration::from_secs(5) {
        for socket in group.iter_mut() {
            seen.extend(read_until(socket, Duration::from_millis(100), |_| false).0);
        }
    }
    let ours: Vec<&Seen> = seen.iter().filter(|s| s.data[6..9] == OUR_MAC).collect();
    assert_eq!(ours.len(), 1, "one frame for two fragments: {ours:?}");
    assert_eq!(ours[0].wire_len as usize, whole.len());
    assert_eq!(tag_of(&ours[0].data), Some(77));
    // The reassembled header is the first fragment's, with the offset and
    // flags cleared and the total length and checksum rewritten.
    assert_eq!(ours[0].data[14 + 20..], whole[14 + 20..]);
}

#[test]
fn stats_count_drops_and_freezes_when_the_reader_stalls() {
    let Some(lab) = Lab::new() else { return };
    let mut socket = lab.open(&LiveConfig {
        ring_bytes: 128 << 10,
        block_bytes: 64 << 10,
        ..small_config()
    });
    let peer = lab.inbound();
    let frames = udp_frames(1000);
    // Nobody reads: two blocks hold ~1/8 of this.
    peer.send_all(&frames);
    thread::sleep(Duration::from_millis(50));
    let (first, losing) = read_until(&mut socket, Duration::from_millis(200), |_| false);
    assert!(!first.is_empty() && first.len() < frames.len());
    assert!(!losing, "the blocks filled before the first drop");
    // Blocks closed while drops are unread say so.
    peer.send_all(&frames[..10]);
    let (second, losing) = read_until(&mut socket, Duration::from_secs(5), |seen| seen.len() >= 10);
    assert_eq!(second.len(), 10);
    assert!(losing, "a block closed after drops is flagged");
    let stats = socket.stats().unwrap();
    let received = (first.len() + second.len()) as u64;
    assert_eq!(stats.drops, frames.len() as u64 + 10 - received);
    assert_eq!(
        stats.packets,
        received + stats.drops,
        "packets count the dropped ones too"
    );
    assert!(stats.queue_freezes >= 1);
    // Reading reset the kernel's counters and the flag; totals go on.
    peer.send_all(&frames[..10]);
    let (third, losing) = read_until(&mut socket, Duration::from_secs(5), |seen| seen.len() >= 10);
    assert_eq!(third.len(), 10);
    assert!(!losing);
    let later = socket.stats().unwrap();
    assert_eq!(later.drops, stats.drops);
    assert_eq!(later.queue_freezes, stats.queue_freezes);
    assert_eq!(later.packets, stats.packets + 10);
}

#[test]
fn a_quiet_link_still_delivers_after_the_block_timeout() {
    let Some(lab) = Lab::new() else { return };
    let mut socket = lab.open(&LiveConfig {
        block_timeout_ms: 20,
        ..small_config()
    });
    assert!(socket.next_block(Duration::ZERO).unwrap().is_none(), "nothing yet");
    let start = Instant::now();
    assert!(socket.next_block(Duration::from_millis(100)).unwrap().is_none());
    assert!(start.elapsed() >= Duration::from_millis(100), "waits the whole timeout");
    lab.inbound().send_all(&udp_frames(1));
    let start = Instant::now();
    let mut block = socket
        .next_block(Duration::from_secs(2))
        .unwrap()
        .expect("a block once the timeout passed");
    assert!(start.elapsed() < Duration::from_secs(1));
    assert!(block.timed_out());
    assert_eq!(block.len(), 1);
    assert_eq!(block.packets().count(), 1);
    // A second pass sees the same packets.
    assert_eq!(block.packets().count(), 1);
}

/// What `drain_block` yields: each block's tags and whether the kernel
/// closed it on its timer.
fn drain(socket: &mut LiveSocket) -> Vec<(Vec<u64>, bool)> {
    let mut blocks = Vec::new();
    while let Some(mut block) = socket.drain_block().expect("drain_block") {
        let timed_out = block.timed_out();
        blocks.push((block.packets().filter_map(|p| tag_of(p.data)).collect(), timed_out));
    }
    blocks
}

/// A stop keeps what the kernel took: the blocks it handed over and the
/// one it was still filling (closed by its timer, which the drain waits
/// for) are all read, the kernel's count is exactly what was read, and
/// frames sent after the stop are neither delivered nor counted.
#[test]
fn stop_drains_every_frame_the_kernel_took_and_takes_no_more() {
    let Some(lab) = Lab::new() else { return };
    // A long block timeout, so that the last block is still being filled
    // at the stop.
    let timeout = Duration::from_millis(400);
    let mut socket = lab.open(&LiveConfig {
        block_timeout_ms: timeout.as_millis() as u32,
        ..small_config()
    });
    let peer = lab.inbound();
    // About 225 kB: three full 64 KiB blocks and a partial one.
    let frames = udp_frames(300);
    peer.send_all(&frames);
    // The frames reach the ring from the peer's backlog, not within the
    // send: give them a moment, far less than the block timeout.
    thread::sleep(Duration::from_millis(30));
    socket.stop().unwrap();
    let stopped = Instant::now();
    peer.send_all(&frames[..50]);
    let blocks = drain(&mut socket);
    let waited = stopped.elapsed();
    let tags: Vec<u64> = blocks.iter().flat_map(|b| b.0.iter().copied()).collect();
    assert_eq!(
        tags,
        (0..300).collect::<Vec<_>>(),
        "every frame before the stop, once, in order"
    );
    assert!(blocks.len() >= 4, "{} blocks", blocks.len());
    assert!(
        blocks.last().unwrap().1,
        "the last block was the partial one, closed by the kernel's timer"
    );
    assert!(waited < 2 * timeout + Duration::from_millis(300), "{waited:?}");
    assert_eq!(socket.unread().unwrap(), 0);
    assert_eq!(socket.delivered(), 300);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(
        socket.stats().unwrap(),
        LiveStats {
            packets: 300,
            drops: 0,
            queue_freezes: 0
        },
        "frames sent after the stop are not counted"
    );
    assert!(socket.drain_block().unwrap().is_none(), "nothing more to drain");
}

/// With a full ring at the stop, what was read and what was dropped add
/// up to the kernel's count, and the drain does not wait for anything.
#[test]
fn stop_with_a_full_ring_accounts_for_every_frame() {
    let Some(lab) = Lab::new() else { return };
    let mut socket = lab.open(&LiveConfig {
        ring_bytes: 128 << 10,
        block_bytes: 64 << 10,
        ..small_config()
    });
    lab.inbound().send_all(&udp_frames(1000));
    thread::sleep(Duration::from_millis(50));
    socket.stop().unwrap();
    let stopped = Instant::now();
    let read: usize = drain(&mut socket).iter().map(|b| b.0.len()).sum();
    assert!(
        stopped.elapsed() < Duration::from_millis(50),
        "no partial block to wait for"
    );
    let stats = socket.stats().unwrap();
    assert!(read > 0 && stats.drops > 0, "{read} read, {stats:?}");
    assert_eq!(read as u64 + stats.drops, 1000);
    assert_eq!(stats.packets, 1000);
    assert_eq!(socket.unread().unwrap(), 0);
}

#[test]
fn promiscuous_mode_lasts_as_long_as_the_socket() {
    let Some(lab) = Lab::new() else { return };
    let promiscuity = || {
        let link = ip(&["-d", "-n", &lab.a, "link", "show", CAPTURE_IF]).unwrap();
        let after = link.split("promiscuity ").nth(1).expect("promiscuity in `ip -d link`");
        after.split_whitespace().next().unwrap().parse::<u32>().unwrap()
    };
    assert_eq!(promiscuity(), 0);
    let socket = lab.open(&small_config());
    assert_eq!(promiscuity(), 1);
    drop(socket);
    assert_eq!(promiscuity(), 0);
    let _quiet = lab.open(&LiveConfig {
        promiscuous: false,
        ..small_config()
    });
    assert_eq!(promiscuity(), 0);
}

#[test]
fn errors_name_the_interface_the_step_and_the_remedy() {
    let message = |config: &LiveConfig| LiveSocket::open(config).err().expect("an error").to_string();
    let bad_block = message(&LiveConfig {
        block_bytes: 5000,
        ..LiveConfig::new("eth9")
    });
    assert!(bad_block.starts_with("eth9: block_bytes (5000) must be"), "{bad_block}");
    let one_block = message(&LiveConfig {
        ring_bytes: 1 << 20,
        ..LiveConfig::new("eth9")
    });
    assert!(one_block.contains("at least two blocks"), "{one_block}");
    let big_snap = message(&LiveConfig {
        snaplen: 1 << 20,
        ..LiveConfig::new("eth9")
    });
    assert!(big_snap.contains("raise block_bytes to at least"), "{big_snap}");
    let missing = message(&LiveConfig::new("no-such-if0"));
    assert!(missing.contains("no-such-if0: no such network interface"), "{missing}");
    let group = LiveSocket::open_group(&LiveConfig::new("eth9"), 0)
        .err()
        .unwrap()
        .to_string();
    assert!(group.contains("at least one socket"), "{group}");

    if !is_root()
        && let Err(e) = LiveSocket::open(&LiveConfig::new("lo"))
    {
        assert!(
            e.to_string().contains("needs root or the CAP_NET_RAW capability"),
            "{e}"
        );
    }

    let Some(lab) = Lab::new() else { return };
    ip(&["-n", &lab.a, "link", "set", CAPTURE_IF, "down"]).unwrap();
    let down = lab.in_a(|| LiveSocket::open(&small_config())).err().unwrap();
    assert!(matches!(down, LiveError::InterfaceDown { .. }), "{down}");
    assert!(down.to_string().contains("ip link set cap0 up"), "{down}");
    ip(&["-n", &lab.a, "link", "set", CAPTURE_IF, "up"]).unwrap();
    // A group id taken on another interface (by "another program").
    ip(&["-n", &lab.a, "link", "set", "lo", "up"]).unwrap();
    let config = LiveConfig {
        fanout_group: Some(4242),
        ..small_config()
    };
    let _holder = lab.open(&config);
    let taken = lab
        .in_a(|| {
            LiveSocket::open(&LiveConfig {
                interface: "lo".into(),
                ..config.clone()
            })
        })
        .err()
        .unwrap()
        .to_string();
    assert!(
        taken.contains("fanout group 4242 exists") && taken.contains("choose another fanout_group"),
        "{taken}"
    );
}

// ---- filters -----------------------------------------------------------

/// A mix around `udp and port 53`: UDP to and from port 53 over IPv4 and
/// IPv6 match; UDP on port 54, TCP on port 53 and ARP do not. Returns the
/// frames and, for each, whether it should pass.
fn dns_mix() -> Vec<(Vec<u8>, bool)> {
    let (c, s) = ([10, 99, 0, 1], [10, 99, 0, 2]);
    let (c6, s6) = (
        [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    );
    (0..400u64)
        .map(|i| {
            let tag = tagged_payload(i, 30 + (i as usize * 13) % 300);
            match i % 6 {
                0 => (frame(0x0800, &ipv4(c, s, UDP, 1, 0, &l4(UDP, 40000, 53, &tag))), true),
                1 => (frame(0x0800, &ipv4(s, c, UDP, 1, 0, &l4(UDP, 53, 40000, &tag))), true),
                2 => (frame(0x86dd, &ipv6(c6, s6, UDP, 0, &l4(UDP, 40001, 53, &tag))), true),
                3 => (frame(0x0800, &ipv4(c, s, UDP, 1, 0, &l4(UDP, 40000, 54, &tag))), false),
                4 => (frame(0x0800, &ipv4(c, s, TCP, 1, 0, &l4(TCP, 40000, 53, &tag))), false),
                _ => {
                    // An ARP request, with the tag after it as padding.
                    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
                    arp.extend_from_slice(&[OUR_MAC[0], OUR_MAC[1], OUR_MAC[2], 0, 0, 2, 10, 99, 0, 1]);
                    arp.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 99, 0, 2]);
                    arp.extend_from_slice(&tag);
                    (frame(0x0806, &arp), false)
                }
            }
        })
        .collect()
}

#[test]
fn a_filter_passes_only_the_matching_frames_and_counts_exactly_those() {
    let Some(lab) = Lab::new() else { return };
    let mut socket = lab.open(&LiveConfig {
        filter: Some("udp and port 53".into()),
        ..small_config()
    });
    let mix = dns_mix();
    let expected: BTreeSet<u64> = (0..mix.len() as u64).filter(|&i| mix[i as usize].1).collect();
    let frames: Vec<Vec<u8>> = mix.iter().map(|(f, _)| f.clone()).collect();
    let (inbound, outbound) = (lab.inbound(), lab.outbound());
    // Both directions: the kernel filters sent frames as well.
    let (early, late) = frames.split_at(frames.len() / 2);
    let (early, late) = (early.to_vec(), late.to_vec());
    inbound.send_all(&early);
    outbound.send_all(&late);
    let (mut seen, _) = read_until(&mut socket, Duration::from_secs(10), |seen| {
        seen.len() >= expected.len()
    });
    // Anything that slipped through would have arrived by now.
    seen.extend(read_until(&mut socket, Duration::from_millis(300), |_| false).0);
    let tags: Vec<u64> = seen.iter().filter_map(|s| tag_of(&s.data)).collect();
    assert_eq!(tags.len(), seen.len(), "only our frames: {seen:?}");
    assert_eq!(tags.len(), expected.len(), "each matching frame once");
    assert_eq!(tags.iter().copied().collect::<BTreeSet<u64>>(), expected);
    for s in &seen {
        assert_eq!(&s.data, &frames[tag_of(&s.data).unwrap() as usize], "whole frames");
    }
    assert_eq!(
        socket.stats().unwrap(),
        LiveStats {
            packets: expected.len() as u64,
            drops: 0,
            queue_freezes: 0
        },
        "the kernel counts the frames the filter accepted, no others"
    );
}

#[test]
fn a_filter_with_a_snaplen_cuts_the_frames_it_accepts() {
    let Some(lab) = Lab::new() else { return };
    let snaplen = 96;
    let mut socket = lab.open(&LiveConfig {
        snaplen,
        filter: Some("udp".into()),
        ..small_config()
    });
    let udp = udp_frames(200);
    let tcp: Vec<Vec<u8>> = (0..100u64)
        .map(|i| {
            let payload = tagged_payload(1000 + i, 500);
            frame(
                0x0800,
                &ipv4([10, 99, 0, 1], [10, 99, 0, 2], TCP, 1, 0, &l4(TCP, 1, 2, &payload)),
            )
        })
        .collect();
    let peer = lab.inbound();
    for (u, t) in udp.chunks(2).zip(&tcp) {
        peer.send_all(u);
        peer.send(t);
    }
    let (mut seen, _) = read_until(&mut socket, Duration::from_secs(10), |seen| seen.len() >= udp.len());
    seen.extend(read_until(&mut socket, Duration::from_millis(300), |_| false).0);
    assert_eq!(seen.len(), udp.len(), "the UDP frames and nothing else");
    for (s, sent) in seen.iter().zip(&udp) {
        assert_eq!(s.wire_len as usize, sent.len(), "wire length is the frame's");
        assert_eq!(s.data.len(), sent.len().min(snaplen as usize), "cut at the snap length");
        assert_eq!(s.data, sent[..s.data.len()]);
    }
    assert!(
        seen.iter()
            .any(|s| s.data.len() == snaplen as usize && s.wire_len > snaplen)
    );
}

#[test]
fn a_bad_filter_expression_names_the_interface_and_libpcaps_message() {
    let Some(lab) = Lab::new() else { return };
    let config = LiveConfig {
        filter: Some("udp and prot 53".into()),
        ..small_config()
    };
    let error = lab.in_a(|| LiveSocket::open(&config)).err().expect("an error");
    assert!(matches!(error, LiveError::Filter { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.starts_with("cap0: the filter `udp and prot 53` does not compile") && message.contains("syntax error"),
        "{message}"
    );
    let group = lab.in_a(|| LiveSocket::open_group(&config, 2)).err().expect("an error");
    assert!(matches!(group, LiveError::Filter { .. }), "{group}");
}
