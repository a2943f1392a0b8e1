//! A segment of only whitespace never decides a label, in any dissector.
//!
//! Blank lines, stray spaces and keep-alives (`\r\n\r\n` in SIP over TCP,
//! RFC 5626) carry no protocol: a flow picked up mid-stream, or a client
//! that sends an empty line before its request, must not be named from
//! them. Checked on every registered dissector on its own, and on the whole
//! chain (rules, dissectors and what comes after them) fed such a first
//! segment on many ports, over TCP and UDP. The cleartext HTTP/2 preface,
//! which the same blank-line handling of HTTP meets, is checked here too.

use std::net::{IpAddr, Ipv4Addr};

use etherparse::PacketBuilder;
use sluice_classify::dissectors::{Context, Metadata, Packet, Side, Transport, Verdict, registry};
use sluice_classify::{Chain, ChainConfig, Classifier, FlowClass};
use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
use sluice_wire::{LinkType, decode};

/// Ports the dissectors look at (each one's well-known port, so that a
/// port-gated path is reached), and a few no dissector knows.
const PORTS: &[u16] = &[
    7, 21, 22, 23, 25, 53, 67, 68, 69, 80, 88, 110, 111, 119, 123, 137, 138, 139, 143, 161, 162, 177, 179, 194, 389,
    427, 443, 445, 464, 500, 502, 514, 515, 520, 546, 547, 554, 563, 587, 631, 636, 853, 873, 993, 995, 1080, 1194,
    1433, 1434, 1701, 1723, 1812, 1813, 1883, 1900, 2000, 2049, 2123, 2152, 2427, 2727, 2944, 3074, 3306, 3389, 3478,
    3544, 4222, 4500, 4730, 5004, 5005, 5060, 5061, 5222, 5353, 5355, 5432, 5683, 5938, 6379, 6666, 6667, 6881, 6969,
    7000, 8080, 8883, 9042, 9092, 9200, 9300, 11211, 17500, 27015, 27017, 41641, 51820, 61613, 1, 4242, 40000,
];

/// Runs of the characters `u8::is_ascii_whitespace` and C's `isspace`
/// know (space, HT, LF, VT, FF, CR).
fn blanks() -> Vec<Vec<u8>> {
    let mut all: Vec<Vec<u8>> = [
        &b" "[..],
        b"\r\n",
        b"\n",
        b"\r",
        b"\t",
        b"\x0b",
        b"\x0c",
        b"\r\n\r\n",
        b"  \t \r\n",
        b"\n\n\n\n",
    ]
    .iter()
    .map(|b| b.to_vec())
    .collect();
    all.push(vec![b' '; 64]);
    all.push(b"\r\n".repeat(300));
    all
}

fn ask(
    inspect: fn(&Packet, &mut Context) -> Verdict,
    transport: Transport,
    side: Side,
    ports: (u16, u16),
    data: &[u8],
) -> Verdict {
    let packet = Packet {
        transport,
        side,
        client: IpAddr::from([10, 0, 0, 1]),
        client_port: ports.0,
        server: IpAddr::from([10, 0, 0, 2]),
        server_port: ports.1,
        data,
        index: 0,
        other_index: 0,
    };
    let mut meta = Metadata::default();
    let (mut expect, mut resolved) = (Vec::new(), Vec::new());
    let mut ctx = Context::new(&mut meta, &mut expect, &mut resolved);
    inspect(&packet, &mut ctx)
}

#[test]
fn no_dissector_says_yes_to_a_first_segment_of_whitespace() {
    let mut failures = Vec::new();
    let mut asked = 0u64;
    for d in registry() {
        for transport in [Transport::Tcp, Transport::Udp] {
            if !d.wants.accepts(transport) {
                continue;
            }
            for data in blanks() {
                for &port in PORTS {
                    for (side, ports) in [
                        (Side::Up, (40000, port)),
                        (Side::Down, (40000, port)),
                        (Side::Up, (port, port)),
                    ] {
                        asked += 1;
                        if let Verdict::Yes(found) = ask(d.inspect, transport, side, ports, &data) {
                            failures.push(format!(
                                "{} said {} to {transport:?} {side:?} {ports:?} {:?}",
                                d.name,
                                found.master,
                                &data[..data.len().min(8)]
                            ));
                            break;
                        }
                    }
                }
            }
        }
    }
    failures.dedup_by(|a, b| a.split(' ').next() == b.split(' ').next());
    assert!(asked > 10_000, "only {asked} questions asked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// One flow, client 10.0.0.1:40000 to 10.0.0.2:`port`, through a flow
/// table and the default chain (built-in rules and every dissector).
struct Flow {
    table: FlowTable<FlowClass>,
    chain: Chain,
    transport: Transport,
    port: u16,
    /// Next sequence number of the client and of the server.
    seq: [u32; 2],
    order: u64,
}

impl Flow {
    /// A UDP flow, or a TCP connection after its handshake.
    fn open(transport: Transport, port: u16) -> Flow {
        let mut flow = Flow {
            table: FlowTable::new(FlowConfig::default()),
            chain: Chain::new(ChainConfig::default()),
            transport,
            port,
            seq: [1000, 5000],
            order: 0,
        };
        if transport == Transport::Tcp {
            flow.send(true, "S", b"");
            flow.send(false, "SA", b"");
            flow.send(true, "A", b"");
        }
        flow
    }

    /// Sends `payload` with TCP `flags` (`S`, `A`) or as a UDP datagram;
    /// the flow's classification afterwards.
    fn send(&mut self, from_client: bool, flags: &str, payload: &[u8]) -> FlowClass {
        let (client, server) = (Ipv4Addr::new(10, 0, 0, 1).octets(), Ipv4Addr::new(10, 0, 0, 2).octets());
        let (src, dst, sport, dport) = if from_client {
            (client, server, 40000, self.port)
        } else {
            (server, client, self.port, 40000)
        };
        let ip = PacketBuilder::ipv4(src, dst, 64);
        let mut frame = Vec::new();
        if self.transport == Transport::Udp {
            ip.udp(sport, dport).write(&mut frame, payload).unwrap();
        } else {
            let i = usize::from(!from_client);
            let mut tcp = ip.tcp(sport, dport, self.seq[i], 65535);
            for flag in flags.chars() {
                tcp = match flag {
                    'S' => tcp.syn(),
                    'A' => tcp.ack(self.seq[1 - i]),
                    _ => unreachable!("flag {flag}"),
                };
            }
            self.seq[i] = self.seq[i].wrapping_add(payload.len() as u32 + u32::from(flags.contains('S')));
            tcp.write(&mut frame, payload).unwrap();
        }
        let decoded = decode(LinkType::RawIp, &frame).unwrap();
        self.order += 1;
        let info = PacketInfo {
            ts_ns: self.order * 1000,
            wire_len: frame.len() as u32,
            decoded: &decoded,
            order: self.order,
        };
        let (slot, dir) = self
            .table
            .process(&info, decoded.key.symmetric_hash(), FlowClass::default, &mut |_, _| {});
        let flow = self.table.flow_mut(slot);
        let start = decoded.payload_offset as usize;
        let payload = &frame[start..start + decoded.payload_captured as usize];
        self.chain.on_packet(flow, dir, &decoded, payload, self.order);
        flow.ext.clone()
    }
}

fn decided_by_payload(class: &FlowClass) -> bool {
    matches!(class.classifier, Classifier::Dissector | Classifier::Rule)
}

#[test]
fn the_chain_never_labels_a_flow_from_a_first_segment_of_whitespace() {
    let mut failures = Vec::new();
    for transport in [Transport::Tcp, Transport::Udp] {
        for data in blanks() {
            for &port in PORTS {
                let class = Flow::open(transport, port).send(true, "A", &data);
                if decided_by_payload(&class) {
                    failures.push(format!(
                        "{transport:?} to port {port}, {:?}: {} by {}",
                        &data[..data.len().min(8)],
                        class.label.master,
                        class.classifier.name()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The flows of the issue: an empty line before an HTTP request, and an
/// MQTT connection picked up after a segment of one space, are named by
/// what follows.
#[test]
fn what_follows_the_whitespace_names_the_flow() {
    let mut http = Flow::open(Transport::Tcp, 80);
    assert!(!decided_by_payload(&http.send(true, "A", b"\r\n")));
    let class = http.send(true, "A", b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n");
    assert_eq!((class.label.master, class.classifier), ("HTTP", Classifier::Dissector));

    // MQTT 3.1.1 CONNECT (OASIS MQTT 3.1.1 section 3.1): fixed header 0x10,
    // remaining length, protocol name "MQTT", level 4, flags, keep-alive,
    // client id "c".
    let mut mqtt = Flow::open(Transport::Tcp, 1883);
    assert!(!decided_by_payload(&mqtt.send(true, "A", b" ")));
    let class = mqtt.send(true, "A", b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01c");
    assert_ne!(class.label.master, "SIP");
}

/// The cleartext HTTP/2 connection preface (RFC 9113 section 3.4) names
/// HTTP2 whatever the port, the ports of other protocols included.
#[test]
fn the_http2_preface_is_http2_on_any_port() {
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // The client's SETTINGS frame: length 0, type 4, flags 0, stream 0.
    preface.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    for &port in PORTS {
        let class = Flow::open(Transport::Tcp, port).send(true, "A", &preface);
        assert_eq!(
            (class.label.master, class.classifier),
            ("HTTP2", Classifier::Dissector),
            "port {port}"
        );
    }
}
