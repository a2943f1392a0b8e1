use super::media_watch::IPV4_UDP_HEADERS;
use super::*;

#[test]
fn a_stream_that_arrives_whole_is_labelled_by_the_dissectors() {
    let mut chain = Chain::new(ChainConfig::default());
    let client = (IpAddr::from([10, 0, 0, 1]), 40000);
    let server = (IpAddr::from([10, 0, 0, 2]), 8080);
    let request = b"GET /watch HTTP/1.1\r\nHost: www.youtube.com\r\nUser-Agent: t\r\n\r\n";
    let response = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let label = chain
        .classify_stream(Transport::Tcp, client, server, [request, response])
        .unwrap();
    assert_eq!((label.master, label.app), ("HTTP", Some("YouTube")));
    let banner = b"SSH-2.0-OpenSSH_9.2\r\n";
    let label = chain.classify_stream(Transport::Tcp, client, server, [b"", banner]);
    assert_eq!(label.map(|l| l.master), Some("SSH"));
    let noise = [0x5a_u8; 64];
    assert_eq!(
        chain.classify_stream(Transport::Tcp, client, server, [&noise, b""]),
        None
    );
}

fn notes_and_passes(_: &Packet, ctx: &mut Context) -> Verdict {
    ctx.meta.host = Some("noted by a dissector that passed".into());
    Verdict::No
}

fn notes_and_waits(_: &Packet, ctx: &mut Context) -> Verdict {
    Metadata::push(&mut ctx.meta.commands, b"noted by a dissector that waits");
    Verdict::Maybe
}

fn reads_and_decides(_: &Packet, ctx: &mut Context) -> Verdict {
    if ctx.meta.host.is_none() && ctx.meta.commands.is_empty() {
        ctx.meta.server_banner = Some("noted by the deciding dissector".into());
    }
    Verdict::Yes(Found::new("Telnet"))
}

const fn test_dissector(name: &'static str, inspect: fn(&Packet, &mut Context) -> Verdict) -> Dissector {
    Dissector {
        name,
        wants: dissectors::Wants::Both,
        first_byte: dissectors::FirstByte::ANY,
        prefix: dissectors::Prefix::ANY,
        inspect,
    }
}

static NOTE_THEN_DECIDE: [Dissector; 3] = [
    test_dissector("passes", notes_and_passes),
    test_dissector("waits", notes_and_waits),
    test_dissector("decides", reads_and_decides),
];

/// The class `chain` gives a flow after its first packet, a UDP
/// datagram from port `client` to port `server`.
fn after_one_datagram(chain: &mut Chain, client: u16, server: u16, payload: &[u8]) -> FlowClass {
    use etherparse::PacketBuilder;
    use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
    use sluice_wire::{LinkType, decode};

    let mut table: FlowTable<FlowClass> = FlowTable::new(FlowConfig::default());
    let mut frame = Vec::new();
    PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(client, server)
        .write(&mut frame, payload)
        .unwrap();
    let decoded = decode(LinkType::RawIp, &frame).unwrap();
    let info = PacketInfo {
        ts_ns: 1_000,
        wire_len: frame.len() as u32,
        decoded: &decoded,
        order: 1,
    };
    let (slot, dir) = table.process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut |_, _| {});
    let flow = table.flow_mut(slot);
    let start = decoded.payload_offset as usize;
    let payload = &frame[start..start + decoded.payload_captured as usize];
    chain.on_packet(flow, dir, &decoded, payload, 1);
    flow.ext.clone()
}

fn test_config() -> ChainConfig {
    ChainConfig {
        rules: Arc::new(RuleSet::compile(Vec::new()).unwrap()),
        media: None,
        ..ChainConfig::default()
    }
}

/// On a live link (the latest history) an announcement is for the first
/// flow to its endpoint, decided at its first packet; the next flow to the
/// endpoint is not told it.
#[test]
fn on_a_live_link_the_first_flow_to_an_announced_endpoint_uses_it_up() {
    let mut chain = Chain::new(test_config());
    let announced = Expectation {
        addr: IpAddr::from([10, 0, 0, 2]),
        port: 30000,
        transport: Transport::Udp,
        master: "RTP",
        app: None,
    };
    chain.config().expectations.announce(&announced, 0, 0);
    let first = after_one_datagram(&mut chain, 40000, 30000, b"hello");
    assert_eq!(first.classifier, Classifier::DynamicPort);
    assert_eq!(first.label.master, "RTP");
    let second = after_one_datagram(&mut chain, 40002, 30000, b"hello");
    assert_ne!(second.classifier, Classifier::DynamicPort);
    assert_eq!(chain.config().expectations.used(), 1);
}

/// The dissectors are tried in turn on one scratch metadata: what an
/// undecided one wrote must be gone before the next one runs, and what
/// the deciding one wrote must reach the flow.
#[test]
fn a_deciding_dissector_sees_and_keeps_only_its_own_metadata() {
    let mut chain = Chain::with_dissectors(test_config(), &NOTE_THEN_DECIDE);
    let class = after_one_datagram(&mut chain, 40001, 40002, b"\x00\x01 an unknown protocol");
    assert_eq!(class.label.master, "Telnet");
    let meta = class.meta.expect("the deciding dissector's metadata");
    assert_eq!(meta.server_banner.as_deref(), Some("noted by the deciding dissector"));
    assert_eq!((meta.host, meta.commands.len()), (None, 0));
}

static ASKED_ANYTHING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn takes_anything(_: &Packet, _: &mut Context) -> Verdict {
    ASKED_ANYTHING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Verdict::Yes(Found::new("Anything"))
}

fn takes_anything_as_dns(_: &Packet, _: &mut Context) -> Verdict {
    Verdict::Yes(Found::new("DNS"))
}

static BOTH_SAY_YES: [Dissector; 2] = [
    test_dissector("Anything", takes_anything),
    test_dissector("DNS", takes_anything_as_dns),
];

/// As in nDPI, the dissector of the protocol the port names is asked
/// first; the others, in the registry's order, only when it says no.
#[test]
fn the_dissector_the_port_names_is_asked_first() {
    let mut chain = Chain::with_dissectors(test_config(), &BOTH_SAY_YES);
    let asked = || ASKED_ANYTHING.load(std::sync::atomic::Ordering::Relaxed);
    let before = asked();
    let class = after_one_datagram(&mut chain, 40001, 53, b"\x12\x34 a query");
    assert_eq!((class.label.master, class.classifier), ("DNS", Classifier::Dissector));
    assert_eq!(asked(), before, "the registry's first dissector was not asked");
    let class = after_one_datagram(&mut chain, 40001, 40002, b"\x12\x34 a query");
    assert_eq!(class.label.master, "Anything");
    assert_eq!(asked(), before + 1);
    // A stream injected whole is asked in the same order.
    let client = (IpAddr::from([10, 0, 0, 1]), 40001);
    let stream = |chain: &mut Chain, port| {
        let server = (IpAddr::from([10, 0, 0, 2]), port);
        chain.classify_stream(Transport::Udp, client, server, [b"\x12\x34", b""])
    };
    assert_eq!(stream(&mut chain, 53).map(|l| l.master), Some("DNS"));
    assert_eq!(asked(), before + 1);
    assert_eq!(stream(&mut chain, 40002).map(|l| l.master), Some("Anything"));
    assert_eq!(asked(), before + 2);
}

fn says_dns(_: &Packet, _: &mut Context) -> Verdict {
    Verdict::Yes(Found::new("DNS"))
}

fn says_stun(_: &Packet, _: &mut Context) -> Verdict {
    Verdict::Yes(Found::new("STUN"))
}

static NAMES_DNS: [Dissector; 1] = [test_dissector("DNS", says_dns)];
static NAMES_STUN: [Dissector; 1] = [test_dissector("STUN", says_stun)];

/// A UDP flow's datagrams (direction from the first sender, payload
/// length, time step in ns, which may go back) through a flow table and
/// a chain; the flow's class and the directions the table gave.
fn udp_flow(chain: &mut Chain, metrics: bool, datagrams: &[(bool, u16, i64)]) -> (FlowClass, Vec<(usize, u32, u64)>) {
    use etherparse::PacketBuilder;
    use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
    use sluice_wire::{LinkType, decode};

    let config = FlowConfig {
        metrics,
        ..FlowConfig::default()
    };
    let mut table: FlowTable<FlowClass> = FlowTable::new(config);
    let (a, b) = (([10, 0, 0, 1], 40001), ([10, 0, 0, 2], 40002));
    let mut ts: u64 = 1_000_000_000;
    let mut fed = Vec::new();
    let mut slot = 0;
    for (order, &(from_first, len, step)) in datagrams.iter().enumerate() {
        ts = ts.saturating_add_signed(step);
        let (src, dst) = if from_first { (a, b) } else { (b, a) };
        let mut frame = Vec::new();
        PacketBuilder::ipv4(src.0, dst.0, 64)
            .udp(src.1, dst.1)
            .write(&mut frame, &vec![0; usize::from(len)])
            .unwrap();
        let decoded = decode(LinkType::RawIp, &frame).unwrap();
        let info = PacketInfo {
            ts_ns: ts,
            wire_len: frame.len() as u32,
            decoded: &decoded,
            order: order as u64,
        };
        let (s, dir) = table.process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut |_, _| {});
        slot = s;
        let flow = table.flow_mut(slot);
        let start = decoded.payload_offset as usize;
        let payload = &frame[start..start + decoded.payload_captured as usize];
        chain.on_packet(flow, dir, &decoded, payload, order as u64);
        fed.push((dir as usize, u32::from(len) + IPV4_UDP_HEADERS, flow.last_ns));
    }
    (table.flow_mut(slot).ext.clone(), fed)
}

proptest::proptest! {
    /// The windows of a flow are allocated late (`media_from_packet`),
    /// or never when a payload stage names a protocol without media:
    /// the verdict must be the one windows fed from the first packet
    /// give, whatever the pace, the directions, the clock going back,
    /// the window and the packets required.
    #[test]
    fn media_windows_started_late_judge_as_if_fed_from_the_first_packet(
        datagrams in proptest::collection::vec((proptest::bool::weighted(0.6), 0u16..400, -3_000_000i64..30_000_000), 1..70),
        window in 2u16..14,
        min_packets in 0u16..40,
        metrics: bool,
        dissectors in 0usize..3,
    ) {
        let media = MediaConfig { window, min_packets, ..MediaConfig::default() };
        let config = ChainConfig { media: Some(Arc::new(media.clone())), ..test_config() };
        let registry: &'static [Dissector] = [&[][..], &NAMES_DNS, &NAMES_STUN][dissectors];
        let mut chain = Chain::with_dissectors(config, registry);
        let mut first = datagrams.clone();
        first[0].0 = true;
        let (class, fed) = udp_flow(&mut chain, metrics, &first);

        let media = MediaConfig { iat_scale: 1.0, ..media };
        let mut windows = [MediaWindows::default(); 2];
        let mut verdict = None;
        for &(d, size, ts) in &fed {
            if let media::Verdict::Judged(kind) = windows[d].on_packet(&media, size, ts) {
                let other = windows[1 - d].verdict(&media);
                verdict = match (kind, other) {
                    (Some(a), Some(b)) => Some(if (a as u8) <= (b as u8) { a } else { b }),
                    (a, b) => a.or(b),
                };
            }
        }
        if named_without_media(&class) {
            proptest::prop_assert!(class.media_off && class.media_windows.is_none());
            proptest::prop_assert_eq!(class.media, None);
        } else {
            proptest::prop_assert_eq!(class.media, verdict);
            match &class.media_windows {
                Some(kept) => proptest::prop_assert_eq!(format!("{kept:?}"), format!("{windows:?}")),
                None => proptest::prop_assert!((fed.len() as u64) < media_from_packet(&media)),
            }
        }
    }
}

/// Recycled boxes come back empty: a flow never shows what an earlier
/// one noted or timed.
#[test]
fn boxes_handed_back_come_back_empty() {
    let mut spares = Spares::default();
    let mut meta = spares.metadata();
    meta.host = Some("example.org".into());
    meta.commands.push("EHLO x".into());
    let mut windows = spares.media_windows();
    windows[0] = MediaWindows::default();
    let _ = windows[0].on_packet(&MediaConfig::default(), 200, 1);
    let mut class = FlowClass {
        meta: Some(meta),
        media_windows: Some(windows),
        ..FlowClass::default()
    };
    let mut chain = Chain::with_dissectors(test_config(), &[]);
    chain.release(&mut class);
    assert!(class.meta.is_none() && class.media_windows.is_none());
    let meta = chain.spares.metadata();
    assert!(meta.is_empty() && meta.commands.capacity() > 0);
    assert_eq!(
        format!("{:?}", *chain.spares.media_windows()),
        format!("{:?}", [MediaWindows::default(); 2])
    );
}

/// ICE (RFC 8445) as a capture shows it: a host candidate's STUN exchange
/// with the application's server names the application, then the same
/// address and port run the connectivity checks and the media with a peer.
mod ice {
    use super::*;
    use std::collections::BTreeMap;

    use etherparse::PacketBuilder;
    use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
    use sluice_wire::{LinkType, decode};

    type End = ([u8; 4], u16);

    const HOST: [u8; 4] = [192, 168, 12, 156];
    const CANDIDATE: End = (HOST, 49526);
    const SERVER: End = ([157, 240, 1, 62], 3478);
    const PEER: End = ([93, 33, 118, 87], 41107);
    const COOKIE: u32 = 0x2112_A442;

    /// An RFC 5389 message: header with the magic cookie, then the
    /// attributes, each padded to four bytes.
    fn stun(msg_type: u16, tx: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, value) in attrs {
            body.extend_from_slice(&kind.to_be_bytes());
            body.extend_from_slice(&(value.len() as u16).to_be_bytes());
            body.extend_from_slice(value);
            body.resize(body.len().next_multiple_of(4), 0);
        }
        let mut m = Vec::new();
        m.extend_from_slice(&msg_type.to_be_bytes());
        m.extend_from_slice(&(body.len() as u16).to_be_bytes());
        m.extend_from_slice(&COOKIE.to_be_bytes());
        m.extend_from_slice(&[tx; 12]);
        m.extend_from_slice(&body);
        m
    }

    /// A connectivity check (RFC 8445 §7.1.1: USERNAME, PRIORITY,
    /// ICE-CONTROLLING), which names no application.
    fn check(tx: u8) -> Vec<u8> {
        stun(
            0x0001,
            tx,
            &[
                (0x0006, b"a1b2:c3d4"),
                (0x0024, &[0x6e, 0x7f, 0x1e, 0xff]),
                (0x802a, &[1, 2, 3, 4, 5, 6, 7, 8]),
            ],
        )
    }

    /// Its success response, with the XOR-MAPPED-ADDRESS of `to`.
    fn checked(tx: u8, to: End) -> Vec<u8> {
        let port = (to.1 ^ (COOKIE >> 16) as u16).to_be_bytes();
        let addr = (u32::from_be_bytes(to.0) ^ COOKIE).to_be_bytes();
        let value = [0, 1, port[0], port[1], addr[0], addr[1], addr[2], addr[3]];
        stun(0x0101, tx, &[(0x0020, &value)])
    }

    /// An RFC 3550 RTP packet: version 2, dynamic payload type 111, then 160
    /// bytes of media.
    fn rtp(seq: u16) -> Vec<u8> {
        let mut p = vec![0x80, 111];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&(u32::from(seq) * 960).to_be_bytes());
        p.extend_from_slice(&0x1234_5678u32.to_be_bytes());
        p.extend((0..160u32).map(|i| (i * 37 + u32::from(seq)) as u8));
        p
    }

    /// The capture, in input order; `server` false leaves out the
    /// candidate's exchange with the application's server.
    fn capture(server: bool) -> Vec<(End, End, Vec<u8>)> {
        let late_peer = ([93, 33, 118, 90], 41200);
        let other_peer = ([93, 33, 118, 91], 41300);
        let other_port = (HOST, 49527);
        let mut packets = vec![
            // A check that began before the server named the application.
            (CANDIDATE, late_peer, check(1)),
        ];
        if server {
            // Allocate (RFC 8656 §7.1), refused with the server's REALM.
            packets.push((CANDIDATE, SERVER, stun(0x0003, 2, &[(0x0019, &[17, 0, 0, 0])])));
            let refused = stun(
                0x0113,
                2,
                &[
                    (0x0009, b"\x00\x00\x04\x01Unauthorized"),
                    (0x0015, b"a62b67bd11f3cbff"),
                    (0x0014, b"signal.org"),
                ],
            );
            packets.push((SERVER, CANDIDATE, refused));
        }
        packets.push((late_peer, CANDIDATE, checked(1, CANDIDATE)));
        packets.push((CANDIDATE, PEER, check(3)));
        packets.push((PEER, CANDIDATE, checked(3, CANDIDATE)));
        // A sender report (RFC 3550 §6.4.1) before the first RTP.
        let mut report = vec![0x80, 200, 0, 6];
        report.resize(28, 0x22);
        packets.push((PEER, CANDIDATE, report));
        for seq in 0..4 {
            let (from, to) = if seq % 2 == 0 {
                (CANDIDATE, PEER)
            } else {
                (PEER, CANDIDATE)
            };
            packets.push((from, to, rtp(seq)));
        }
        // The same address on another port, and the candidate's DNS query.
        packets.push((other_port, (PEER.0, 41108), check(4)));
        packets.push(((PEER.0, 41108), other_port, checked(4, other_port)));
        packets.push((other_port, (PEER.0, 41108), rtp(10)));
        let query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
        packets.push((CANDIDATE, ([8, 8, 8, 8], 53), query.to_vec()));
        // Checks with another peer, and no media.
        packets.push((CANDIDATE, other_peer, check(5)));
        packets.push((other_peer, CANDIDATE, checked(5, CANDIDATE)));
        packets
    }

    /// Each flow's label, by its first packet's endpoints, when `workers`
    /// chains sharing the tables read the capture, each its own flows, in
    /// the turns `turns` gives (worker by worker).
    fn labels(
        packets: &[(End, End, Vec<u8>)],
        history: History,
        workers: usize,
        turns: &[usize],
    ) -> BTreeMap<String, String> {
        let config = ChainConfig {
            media: None,
            expectations: Arc::new(Expectations::new(64, history)),
            names: Arc::new(AddressNames::new(64, history)),
            endpoints: Arc::new(EndpointApps::new(64, history)),
            ..ChainConfig::default()
        };
        let mut chains: Vec<Chain> = (0..workers).map(|_| Chain::new(config.clone())).collect();
        let mut tables: Vec<FlowTable<FlowClass>> =
            (0..workers).map(|_| FlowTable::new(FlowConfig::default())).collect();
        let mut flows: BTreeMap<String, (usize, u32)> = BTreeMap::new();
        let mut owner: Vec<(String, usize)> = Vec::new();
        for &(from, to, _) in packets {
            let name = |a: End, b: End| format!("{:?}:{}-{:?}:{}", a.0, a.1, b.0, b.1);
            let key = if owner.iter().any(|(k, _)| *k == name(to, from)) {
                name(to, from)
            } else {
                name(from, to)
            };
            if !owner.iter().any(|(k, _)| *k == key) {
                let n = owner.len();
                owner.push((key, n % workers));
            }
        }
        let worker_of = |from: End, to: End| {
            let name = |a: End, b: End| format!("{:?}:{}-{:?}:{}", a.0, a.1, b.0, b.1);
            owner
                .iter()
                .find(|(k, _)| *k == name(from, to) || *k == name(to, from))
                .map(|(k, w)| (k.clone(), *w))
                .unwrap()
        };
        for &turn in turns {
            for (order, (from, to, payload)) in packets.iter().enumerate() {
                let (key, worker) = worker_of(*from, *to);
                if worker != turn {
                    continue;
                }
                let frame = udp_frame(*from, *to, payload);
                let decoded = decode(LinkType::RawIp, &frame).unwrap();
                let info = PacketInfo {
                    ts_ns: 1_000_000 * (order as u64 + 1),
                    wire_len: frame.len() as u32,
                    decoded: &decoded,
                    order: order as u64,
                };
                let table = &mut tables[worker];
                let (slot, dir) =
                    table.process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut |_, _| {});
                flows.entry(key).or_insert((worker, slot));
                let start = decoded.payload_offset as usize;
                let data = &frame[start..start + decoded.payload_captured as usize];
                chains[worker].on_packet(table.flow_mut(slot), dir, &decoded, data, order as u64);
            }
        }
        flows
            .into_iter()
            .map(|(key, (worker, slot))| {
                let flow = tables[worker].flow_mut(slot);
                let order = match history {
                    History::InputOrder => flow.order,
                    History::Latest => u64::MAX,
                };
                let told = prior(flow, order, &config.expectations, &config.names, &config.endpoints);
                finish_flow(flow, told.as_ref());
                let label = flow.ext.label;
                (key, format!("{}.{}", label.master, label.app.unwrap_or("-")))
            })
            .collect()
    }

    fn flow(a: End, b: End) -> String {
        format!("{:?}:{}-{:?}:{}", a.0, a.1, b.0, b.1)
    }

    #[test]
    fn media_of_an_endpoint_stun_named_is_that_application_s() {
        let with = capture(true);
        let without = capture(false);
        for history in [History::InputOrder, History::Latest] {
            let named = labels(&with, history, 1, &[0]);
            let bare = labels(&without, history, 1, &[0]);
            let label = |labels: &BTreeMap<String, String>, a, b| labels[&flow(a, b)].clone();
            assert_eq!(label(&named, CANDIDATE, SERVER), "STUN.SignalVoip", "{history:?}");
            assert_eq!(label(&named, CANDIDATE, PEER), "SRTP.SignalVoip", "{history:?}");
            assert_eq!(label(&bare, CANDIDATE, PEER), "STUN.RTP", "{history:?}");
            let other_peer = ([93, 33, 118, 91], 41300);
            assert_eq!(label(&named, CANDIDATE, other_peer), "STUN.SignalVoip", "{history:?}");
            assert_eq!(label(&bare, CANDIDATE, other_peer), "STUN.-", "{history:?}");
            // Near misses: a flow that began before the server named the
            // application, another port of the same address, a DNS query
            // from the candidate.
            let late_peer = ([93, 33, 118, 90], 41200);
            assert_eq!(label(&named, CANDIDATE, late_peer), "STUN.-", "{history:?}");
            let other_port = ((HOST, 49527), (PEER.0, 41108));
            assert_eq!(label(&named, other_port.0, other_port.1), "STUN.RTP", "{history:?}");
            let dns = (CANDIDATE, ([8, 8, 8, 8], 53));
            assert_eq!(label(&named, dns.0, dns.1), label(&bare, dns.0, dns.1), "{history:?}");
            assert!(label(&named, dns.0, dns.1).starts_with("DNS."), "{named:?}");
            assert_eq!(config_endpoints_learned(&with, history), 1);
        }
    }

    /// An IPv4 UDP frame from `from` to `to` carrying `payload`.
    fn udp_frame(from: End, to: End, payload: &[u8]) -> Vec<u8> {
        let mut frame = Vec::new();
        PacketBuilder::ipv4(from.0, to.0, 64)
            .udp(from.1, to.1)
            .write(&mut frame, payload)
            .unwrap();
        frame
    }

    /// The server side of the exchange is not remembered, nor anything
    /// without an application.
    fn config_endpoints_learned(packets: &[(End, End, Vec<u8>)], history: History) -> u64 {
        let endpoints = Arc::new(EndpointApps::new(64, history));
        let config = ChainConfig {
            media: None,
            endpoints: endpoints.clone(),
            ..ChainConfig::default()
        };
        let mut chain = Chain::new(config);
        let mut table: FlowTable<FlowClass> = FlowTable::new(FlowConfig::default());
        for (order, (from, to, payload)) in packets.iter().enumerate() {
            let frame = udp_frame(*from, *to, payload);
            let decoded = decode(LinkType::RawIp, &frame).unwrap();
            let info = PacketInfo {
                ts_ns: 1_000_000 * (order as u64 + 1),
                wire_len: frame.len() as u32,
                decoded: &decoded,
                order: order as u64,
            };
            let (slot, dir) = table.process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut |_, _| {});
            let start = decoded.payload_offset as usize;
            let data = &frame[start..start + decoded.payload_captured as usize];
            chain.on_packet(table.flow_mut(slot), dir, &decoded, data, order as u64);
        }
        let at = |end: End| endpoints.lookup((IpAddr::from(end.0), end.1), u64::MAX, 20_000_000);
        assert_eq!(at(CANDIDATE), Some("SignalVoip"));
        assert_eq!(at(SERVER), None, "the server's side");
        endpoints.learned()
    }

    #[test]
    fn the_labels_do_not_depend_on_which_worker_reads_first() {
        let with = capture(true);
        let one = labels(&with, History::InputOrder, 1, &[0]);
        assert_eq!(one[&flow(CANDIDATE, PEER)], "SRTP.SignalVoip");
        for turns in [[0, 1], [1, 0]] {
            assert_eq!(labels(&with, History::InputOrder, 2, &turns), one, "{turns:?}");
        }
        for turns in [[0, 1, 2], [2, 1, 0], [1, 2, 0]] {
            assert_eq!(labels(&with, History::InputOrder, 3, &turns), one, "{turns:?}");
        }
    }
}
