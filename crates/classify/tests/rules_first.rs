//! `ChainConfig::rules_first`: the dissectors wait while a rule has matched
//! one direction and may match the other, and end up with the label they
//! would have given when the rule does not decide.

use std::net::Ipv4Addr;
use std::sync::Arc;

use etherparse::PacketBuilder;
use sluice_classify::rules::parse_rules;
use sluice_classify::{Chain, ChainConfig, Classifier, FlowClass, RuleSet};
use sluice_flow::{FlowConfig, FlowTable, PacketInfo};
use sluice_wire::{LinkType, decode};

const RULES: &str = r#"
http:
  up: '^[-a-zA-Z]+ .+ HTTP/1\.(0\r?\n|1\r?\n([-a-zA-Z]+:.+\r?\n)+)'
  down: '^HTTP/1\.[01] [1-9][0-9]{2} .+\r?\n'
  proto: TCP
  if: http
  nice: 100
banner:
  down: '^ZZBANNER '
  proto: TCP
  nice: 100
"#;

const REQUEST: &[u8] = b"GET /watch HTTP/1.1\r\nHost: www.youtube.com\r\nUser-Agent: t\r\n\r\n";
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
/// Answers the request without HTTP's status line: the rule cannot decide.
const NOT_HTTP: &[u8] = b"\x00\x01binary reply";

/// One TCP connection's segments (client, then as the script says) through
/// a flow table and a chain; the flow's classification at its end.
struct Connection {
    table: FlowTable<FlowClass>,
    chain: Chain,
    seq: [u32; 2],
    order: u64,
    slot: u32,
}

impl Connection {
    fn new(rules_first: bool) -> Connection {
        let rules = RuleSet::compile(parse_rules(RULES, "test").unwrap()).unwrap();
        let config = ChainConfig {
            rules: Arc::new(rules),
            media: None,
            rules_first,
            ..ChainConfig::default()
        };
        let mut connection = Connection {
            table: FlowTable::new(FlowConfig::default()),
            chain: Chain::new(config),
            seq: [1000, 5000],
            order: 0,
            slot: 0,
        };
        connection.segment(true, "S", b"");
        connection.segment(false, "SA", b"");
        connection.segment(true, "A", b"");
        connection
    }

    fn segment(&mut self, from_client: bool, flags: &str, payload: &[u8]) -> FlowClass {
        let (client, server) = (Ipv4Addr::new(10, 0, 0, 1).octets(), Ipv4Addr::new(10, 0, 0, 2).octets());
        let (src, dst, sport, dport) = if from_client {
            (client, server, 40000, 8080)
        } else {
            (server, client, 8080, 40000)
        };
        let i = usize::from(!from_client);
        let mut tcp = PacketBuilder::ipv4(src, dst, 64).tcp(sport, dport, self.seq[i], 65535);
        for flag in flags.chars() {
            tcp = match flag {
                'S' => tcp.syn(),
                'A' => tcp.ack(self.seq[1 - i]),
                _ => unreachable!("flag {flag}"),
            };
        }
        self.seq[i] = self.seq[i].wrapping_add(payload.len() as u32 + u32::from(flags.contains('S')));
        let mut frame = Vec::new();
        tcp.write(&mut frame, payload).unwrap();
        let decoded = decode(LinkType::RawIp, &frame).unwrap();
        self.order += 1;
        let info = PacketInfo {
            ts_ns: self.order * 1000,
            wire_len: frame.len() as u32,
            decoded: &decoded,
            order: self.order,
        };
        let hash = decoded.key.symmetric_hash();
        let (slot, dir) = self.table.process(&info, hash, FlowClass::default, &mut |_, _| {});
        self.slot = slot;
        let flow = self.table.flow_mut(slot);
        let start = decoded.payload_offset as usize;
        let payload = &frame[start..start + decoded.payload_captured as usize];
        self.chain.on_packet(flow, dir, &decoded, payload, self.order);
        flow.ext.clone()
    }

    /// What the flow's label is when it ends now.
    fn end(mut self) -> FlowClass {
        let flow = self.table.flow_mut(self.slot);
        self.chain.settle(flow);
        flow.ext.clone()
    }
}

fn host(class: &FlowClass) -> Option<&str> {
    class.meta.as_deref().and_then(|m| m.host.as_deref())
}

#[test]
fn a_rule_that_decides_leaves_the_dissectors_unasked() {
    for rules_first in [false, true] {
        let mut c = Connection::new(rules_first);
        let after_request = c.segment(true, "A", REQUEST);
        let after_response = c.segment(false, "A", RESPONSE);
        assert_eq!(after_response.classifier, Classifier::Rule);
        assert_eq!(after_response.label.master, "http");
        assert!(after_response.settled());
        if rules_first {
            assert_ne!(
                after_request.classifier,
                Classifier::Dissector,
                "the request was withheld"
            );
            assert_eq!(host(&after_response), None, "no dissector ran");
        } else {
            assert_eq!(after_request.classifier, Classifier::Dissector);
            assert_eq!(host(&after_response), Some("www.youtube.com"));
        }
    }
}

#[test]
fn when_the_rule_cannot_decide_the_dissectors_see_what_was_withheld() {
    let labels = [false, true].map(|rules_first| {
        let mut c = Connection::new(rules_first);
        c.segment(true, "A", REQUEST);
        let class = c.segment(false, "A", NOT_HTTP);
        (class.label, class.classifier, host(&class).map(str::to_owned))
    });
    assert_eq!(labels[0], labels[1]);
    assert_eq!(labels[1].1, Classifier::Dissector);
    assert_eq!(labels[1].2.as_deref(), Some("www.youtube.com"));
}

#[test]
fn a_flow_that_ends_before_its_answer_is_labelled_by_the_dissectors() {
    let mut c = Connection::new(true);
    let withheld = c.segment(true, "A", REQUEST);
    assert_ne!(withheld.classifier, Classifier::Dissector);
    let ended = c.end();
    assert_eq!(ended.classifier, Classifier::Dissector);
    assert_eq!((ended.label.master, ended.label.app), ("HTTP", Some("YouTube")));
    assert_eq!(host(&ended), Some("www.youtube.com"));
}

#[test]
fn a_request_in_two_segments_is_shown_whole() {
    let labels = [false, true].map(|rules_first| {
        let mut c = Connection::new(rules_first);
        let (first, second) = REQUEST.split_at(25);
        c.segment(true, "A", first);
        c.segment(true, "A", second);
        let class = c.segment(false, "A", NOT_HTTP);
        (class.label, class.classifier, host(&class).map(str::to_owned))
    });
    assert_eq!(labels[0], labels[1]);
    assert_eq!(labels[1].2.as_deref(), Some("www.youtube.com"));
}

/// A client's first bytes that every dissector refuses leave the flow to
/// its rules: its next bytes are not shown to the dissectors, and the
/// server's answer is still fed to the rules.
#[test]
fn a_flow_no_dissector_is_left_for_is_still_decided_by_its_rules() {
    let mut c = Connection::new(false);
    for _ in 0..2 {
        let refused = c.segment(true, "A", &[0; 10]);
        assert!(!refused.settled());
    }
    let class = c.segment(false, "A", b"ZZBANNER v1\r\n");
    assert_eq!(class.classifier, Classifier::Rule);
    assert_eq!(class.label.master, "banner");
    assert!(class.settled());
}
