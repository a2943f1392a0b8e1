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
