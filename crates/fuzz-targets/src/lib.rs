//! Sluice's fuzz targets, as plain functions of the fuzzer's bytes.
//!
//! The fuzzer (`fuzz/`, built with cargo-afl; see `docs/testing.md`) calls
//! them through [`TARGETS`], and `tests/corpus.rs` replays every file of
//! the committed corpus (`fuzz/corpus/TARGET/`) and every finding kept as
//! a regression (`fuzz/regressions/TARGET/`) through the same functions, so
//! a normal `cargo test` runs what the fuzzer found.
//!
//! A target returns normally on any input, however hostile: a panic is a
//! finding. Besides "no panic, no hang", each checks what must hold of
//! what it read (lengths within the input, counters that add up, a
//! repaired file that reads back whole), with `assert!`, so that a wrong
//! result is a finding too.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_capture::CaptureFile;
use sluice_classify::dissectors::{MAX_LIST, MAX_TEXT, Metadata};
use sluice_classify::rules::parse_rules;
use sluice_classify::{
    AddressNames, Chain, ChainConfig, EndpointApps, Expectations, FlowClass, History, RuleSet, Transport,
};
use sluice_export::ipfix::{ELEMENTS, Encoding, IpfixEncoder, VARIABLE, Variant};
use sluice_export::ipfix_lines::{LineEncoding, LineKind, encode_line};
use sluice_export::schema::Record;
use sluice_export::{CsvEncoder, JsonlEncoder, field_names};
use sluice_flow::defrag::{Defrag, DefragConfig, Defragmenter};
use sluice_flow::reassembly::{ReassemblyConfig, StreamEvent, StreamMemory, StreamReassembler};
use sluice_flow::{EndReason, Flow, FlowConfig, FlowTable, PacketInfo};
use sluice_voip::calls::{CallTable, CallsConfig};
use sluice_voip::tracker::{Event, PacketView, Tracker, TrackerConfig};
use sluice_wire::{Decoded, LinkType, decode as decode_frame};

/// A target: a function of the fuzzer's bytes.
pub type Target = fn(&[u8]);

/// Every target, by the name its corpus directory and the fuzzer use.
pub const TARGETS: &[(&str, Target)] = &[
    ("capture", capture),
    ("decode", decode),
    ("chain", chain),
    ("records", records),
    ("voip", voip),
    ("reassembly", reassembly),
    ("defrag", defrag),
    ("rules", rules),
    ("extract", extract),
    ("repair", repair),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

const LINKS: [LinkType; 13] = [
    LinkType::Null,
    LinkType::Ethernet,
    LinkType::Ppp,
    LinkType::CiscoHdlc,
    LinkType::RawIp,
    LinkType::RawIpv4,
    LinkType::RawIpv6,
    LinkType::Loop,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Ieee80211,
    LinkType::Ppi,
    LinkType::Radiotap,
];

/// The capture readers (pcap, pcapng, told by the magic number): the file
/// is the input. Each packet read lies within the file, and is decoded.
pub fn capture(data: &[u8]) {
    let Ok(file) = CaptureFile::from_bytes("fuzz", data.to_vec()) else {
        return;
    };
    let mut reader = file.reader().expect("the header was checked at open");
    let len = data.len() as u64;
    // Every packet takes at least a 12-byte block or a 16-byte record.
    let limit = len / 12 + 1;
    let mut count = 0;
    let mut fatal = 0;
    for p in reader.by_ref() {
        count += 1;
        assert!(count <= limit, "more packets than the file can hold");
        assert!(p.offset < len && p.data.len() as u64 <= len);
        assert!(p.wire_len as usize >= p.data.len());
        assert!(
            p.wire_len <= 256 << 10 || p.wire_len as usize == p.data.len(),
            "a wire length beyond belief counts the captured bytes"
        );
        if let Ok(decoded) = decode_frame(p.link, p.data) {
            check_decoded(&decoded, p.data.len());
        }
    }
    for w in reader.warnings() {
        assert!(w.offset <= len, "a warning beyond the end: {w:?}");
        fatal += usize::from(w.fatal);
    }
    assert!(fatal <= 1 && reader.warning_count() >= reader.warnings().len() as u64);
    assert!(reader.position() <= len);
    assert!(reader.next().is_none(), "a finished reader stays finished");
}

/// What the decoder says of a frame stays inside the frame.
fn check_decoded(d: &Decoded, len: usize) {
    let payload_end = d.payload_offset as usize + d.payload_captured as usize;
    assert!(
        payload_end <= len,
        "payload {payload_end} past the frame's {len} bytes: {d:?}"
    );
    assert!(d.ip_offset as usize <= len && d.l4_offset as usize <= len, "{d:?}");
    let reversed = sluice_wire::FlowKey {
        src: d.key.dst,
        dst: d.key.src,
        src_port: d.key.dst_port,
        dst_port: d.key.src_port,
        ..d.key
    };
    assert_eq!(
        reversed.symmetric_hash(),
        d.key.symmetric_hash(),
        "both directions meet"
    );
}

/// The decoder: the first byte picks the link type, the rest is the frame.
pub fn decode(data: &[u8]) {
    let Some((&which, frame)) = data.split_first() else {
        return;
    };
    let link = LINKS[which as usize % LINKS.len()];
    if let Ok(decoded) = decode_frame(link, frame) {
        check_decoded(&decoded, frame.len());
    }
}

/// Server ports that send a flow to the dissectors that port tables and
/// port-keyed parsers know (0: the two next input bytes say).
const PORTS: [u16; 16] = [
    80, 443, 53, 22, 25, 5060, 554, 21, 3478, 123, 1194, 8080, 161, 5353, 1900, 0,
];

/// Every dissector through the classifier chain: one flow, TCP or UDP, to
/// a port the input picks, whose packets' payloads are the input's. Byte
/// 0: bit 0 UDP, bits 1-4 the port (`PORTS`); then records of a byte
/// (bit 0: from the server) and a length byte, and that many bytes of
/// payload. The metadata the dissectors keep stays within its caps.
pub fn chain(data: &[u8]) {
    chain_flows(data, &mut |_, _| {});
}

/// The flows of [`chain`]'s input, each shown to `settled` once the
/// chain has settled it at the input's end, metadata checked.
fn chain_flows(data: &[u8], settled: &mut dyn FnMut(&Flow<FlowClass>, EndReason)) {
    let Some((&head, mut rest)) = data.split_first() else {
        return;
    };
    let udp = head & 1 != 0;
    let mut server_port = PORTS[usize::from(head >> 1) % PORTS.len()];
    if server_port == 0 {
        let Some((port, tail)) = rest.split_first_chunk::<2>() else {
            return;
        };
        server_port = u16::from_be_bytes(*port);
        rest = tail;
    }
    // A chain of its own for each input, so that what one input taught the
    // tables the chain shares (announced ports, names from DNS answers)
    // cannot change how the next runs; small tables, so that making them
    // costs little.
    let chain = &mut Chain::new(ChainConfig {
        expectations: Arc::new(Expectations::new(64, History::Latest)),
        names: Arc::new(AddressNames::new(64, History::Latest)),
        endpoints: Arc::new(EndpointApps::new(64, History::Latest)),
        ..ChainConfig::default()
    });
    {
        let mut table = FlowTable::<FlowClass>::new(FlowConfig {
            capacity: 4,
            ..FlowConfig::default()
        });
        let mut seq = [1000u32, 5000u32];
        let mut order = 0u64;
        let mut frame = Vec::with_capacity(1600);
        let mut feed =
            |from_server: bool, flags: u8, payload: &[u8], chain: &mut Chain, table: &mut FlowTable<FlowClass>| {
                let side = usize::from(from_server);
                ip_packet(
                    &mut frame,
                    from_server,
                    udp,
                    (40000, server_port),
                    seq[side],
                    seq[1 - side],
                    flags,
                    payload,
                );
                seq[side] = seq[side].wrapping_add(payload.len() as u32 + u32::from(flags & 0x02 != 0));
                let Ok(decoded) = decode_frame(LinkType::RawIpv4, &frame) else {
                    return;
                };
                order += 1;
                let info = PacketInfo {
                    ts_ns: 1_700_000_000_000_000_000 + order * 1_000_000,
                    wire_len: frame.len() as u32,
                    decoded: &decoded,
                    order,
                };
                let (slot, dir) = table.process(
                    &info,
                    decoded.key.symmetric_hash(),
                    FlowClass::default,
                    &mut |flow, _| chain.release(&mut flow.ext),
                );
                let flow = table.flow_mut(slot);
                let start = decoded.payload_offset as usize;
                let payload = &frame[start..start + decoded.payload_captured as usize];
                chain.on_packet(flow, dir, &decoded, payload, order);
                if let Some(meta) = &flow.ext.meta {
                    check_metadata(meta);
                }
            };
        if !udp {
            feed(false, 0x02, b"", chain, &mut table);
            feed(true, 0x12, b"", chain, &mut table);
            feed(false, 0x10, b"", chain, &mut table);
        }
        while let [side, len, tail @ ..] = rest {
            let take = usize::from(*len).min(tail.len());
            let (payload, tail) = tail.split_at(take);
            feed(side & 1 != 0, 0x18, payload, chain, &mut table);
            rest = tail;
        }
        table.flush(&mut |flow, end| {
            chain.settle(flow);
            if let Some(meta) = &flow.ext.meta {
                check_metadata(meta);
            }
            settled(flow, end);
            chain.release(&mut flow.ext);
        });
    }
}

/// The record writers on what hostile payloads leave in a flow: each flow
/// of [`chain`]'s input (the same input) written as a JSON line, a CSV row
/// and an IPFIX data record. The JSON line is one line holding one object;
/// the CSV row reads back as one row of the header's fields; the IPFIX
/// record is as long as its template's elements say, its strings UTF-8
/// and its lists whole items. The metadata's texts and lists of texts
/// read back the same from all three.
pub fn records(data: &[u8]) {
    let (mut json, mut csv, mut ipfix) = (JsonlEncoder::default(), CsvEncoder::default(), IpfixEncoder::default());
    let mut out = Vec::new();
    let names = field_names();
    chain_flows(data, &mut |flow, end| {
        let record = Record {
            flow,
            end,
            stats: None,
            media: None,
        };
        let meta = flow.ext.meta.as_deref();
        let texts: Vec<(&str, Option<&str>)> = [
            ("host", meta.and_then(|m| m.host.as_deref())),
            ("http_uri", meta.and_then(|m| m.http_uri.as_deref())),
            ("http_user_agent", meta.and_then(|m| m.http_user_agent.as_deref())),
            ("client_banner", meta.and_then(|m| m.client_banner.as_deref())),
            ("server_banner", meta.and_then(|m| m.server_banner.as_deref())),
        ]
        .into();
        // The lists of texts: a JSON array (left out when empty); in CSV and
        // IPFIX the items joined by `;`, a `;` in one written as `,`.
        let lists: [(&str, &[sluice_classify::dissectors::Text]); 2] = [
            ("dns_answers", meta.map_or(&[], |m| &m.dns_answers[..])),
            ("commands", meta.map_or(&[], |m| &m.commands[..])),
        ];
        let joined = |items: &[sluice_classify::dissectors::Text]| {
            items.iter().map(|i| i.replace(';', ",")).collect::<Vec<_>>().join(";")
        };

        out.clear();
        json.encode(&record, &mut out);
        let line = out.strip_suffix(b"\n").expect("a JSON line ends its line");
        assert!(!line.contains(&b'\n'), "a JSON record across lines");
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(line).expect("a JSON line that parses into an object");
        for (name, text) in &texts {
            assert_eq!(object.get(*name).and_then(|v| v.as_str()), *text, "JSON's {name}");
        }
        for (name, items) in lists {
            let json_items: Vec<&str> = object.get(name).and_then(|v| v.as_array()).map_or(Vec::new(), |a| {
                a.iter().map(|i| i.as_str().expect("a text item")).collect()
            });
            assert_eq!(
                json_items,
                items.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
                "JSON's {name}"
            );
        }

        out.clear();
        csv.encode(&record, &mut out);
        let mut rows = ::csv::ReaderBuilder::new().has_headers(false).from_reader(&out[..]);
        let mut rows = rows.records();
        let row = rows.next().expect("a CSV row").expect("a CSV row that parses");
        assert!(rows.next().is_none(), "a CSV record across rows");
        assert_eq!(row.len(), names.len(), "CSV fields against the header's");
        for (name, text) in &texts {
            let at = names.iter().position(|n| n == name).expect("a field of the header");
            assert_eq!(&row[at], text.unwrap_or(""), "CSV's {name}");
        }
        for (name, items) in lists {
            let at = names.iter().position(|n| *n == name).expect("a field of the header");
            assert_eq!(row[at], joined(items), "CSV's {name}");
        }

        out.clear();
        let template = ipfix.encode(&record, &mut out);
        let (variant, v6) = Variant::of_template(template).expect("a flow template");
        let mut at = 0;
        for element in &ELEMENTS {
            let Some(length) = element.length_in(variant, v6) else {
                continue;
            };
            let length = if length == VARIABLE {
                let len = varlen(&out, &mut at);
                let value = &out[at..at + len];
                match element.encoding {
                    Encoding::Utf8 | Encoding::Utf8List => {
                        let value = std::str::from_utf8(value).expect("an IPFIX string in UTF-8");
                        if let Some((_, text)) = texts.iter().find(|(name, _)| *name == element.field) {
                            assert_eq!(value, text.unwrap_or(""), "IPFIX's {}", element.field);
                        }
                        if let Some((_, items)) = lists.iter().find(|(name, _)| *name == element.field) {
                            assert_eq!(value, joined(items), "IPFIX's {}", element.field);
                        }
                    }
                    _ => {
                        let item = element.item_len_in(variant).expect("a list's item length");
                        assert_eq!(len % usize::from(item), 0, "IPFIX's {}: part of an item", element.field);
                    }
                }
                len
            } else {
                usize::from(length)
            };
            at += length;
        }
        assert_eq!(at, out.len(), "an IPFIX record as long as its template says");
    });
}

/// The length of the variable-length IPFIX field at `at` (RFC 7011, 7),
/// whose prefix `at` is moved past.
fn varlen(record: &[u8], at: &mut usize) -> usize {
    let (prefix, len) = match record[*at] {
        255 => (3, usize::from(u16::from_be_bytes([record[*at + 1], record[*at + 2]]))),
        n => (1, usize::from(n)),
    };
    *at += prefix;
    len
}

/// The flows of [`voip`]: transport, client port, server port. SIP over
/// UDP and over TCP, then two media flows and their RTCP, on the ports a
/// session description of the input may name (`c=IN IP4 10.0.0.1`,
/// `m=audio 40000`).
const VOIP_FLOWS: [(bool, u16, u16); 6] = [
    (true, 5060, 5060),
    (false, 40000, 5060),
    (true, 40000, 40002),
    (true, 40001, 40003),
    (true, 40010, 40012),
    (true, 40011, 40013),
];

/// The VoIP tracker and the call table: SIP (UDP and TCP), SDP, RTP and
/// RTCP from packets of six flows (`VOIP_FLOWS`). Records of a byte (bits
/// 0-2: the flow, bit 3: from the server, bit 4: the flow ends after the
/// packet, bits 5-7: how far time steps, 1 ms to 16 s) and a length byte,
/// then that many bytes of payload. Every RTP packet the tracker counts
/// was sent on a media flow, the records written are JSON objects a
/// line, as many as the table counted, and each call record is an IPFIX
/// data record as long as its template says, its strings the record's.
pub fn voip(data: &[u8]) {
    let mut tracker = Tracker::new(0, TrackerConfig::default(), Vec::<Event>::new(), None);
    // Each flow's first packet's position and sender, packets so far, and
    // each direction's next TCP sequence number.
    let mut flows: [Option<(u64, bool, u64)>; 6] = [None; 6];
    let mut seq = [[1000u32, 5000u32]; 6];
    let (mut order, mut ts_ns) = (0u64, 1_700_000_000_000_000_000u64);
    let mut media_packets = 0u64;
    let mut frame = Vec::with_capacity(1600);
    let mut rest = data;
    while let [sel, len, tail @ ..] = rest {
        let take = usize::from(*len).min(tail.len());
        let (payload, tail) = tail.split_at(take);
        rest = tail;
        let which = usize::from(sel & 7) % VOIP_FLOWS.len();
        let (udp, client_port, server_port) = VOIP_FLOWS[which];
        let from_server = sel & 8 != 0;
        let side = usize::from(from_server);
        let flags = if udp { 0 } else { 0x18 };
        ip_packet(
            &mut frame,
            from_server,
            udp,
            (client_port, server_port),
            seq[which][side],
            seq[which][1 - side],
            flags,
            payload,
        );
        seq[which][side] = seq[which][side].wrapping_add(payload.len() as u32);
        let decoded = decode_frame(LinkType::RawIpv4, &frame).expect("a packet built whole");
        order += 1;
        ts_ns += 1_000_000 << (2 * (sel >> 5));
        let (first, first_from_server, packets) = flows[which].get_or_insert((order, from_server, 0));
        *packets += 1;
        let key = if *first_from_server == from_server {
            decoded.key
        } else {
            decoded.key.reversed()
        };
        let start = usize::from(decoded.payload_offset);
        tracker.packet(&PacketView {
            ts_ns,
            order,
            flow_order: *first,
            key: &key,
            dir: usize::from(*first_from_server != from_server),
            flow_packets: *packets,
            decoded: &decoded,
            frame: &frame,
            payload: &frame[start..start + usize::from(decoded.payload_captured)],
        });
        media_packets += u64::from(which >= 2);
        if sel & 0x10 != 0 {
            tracker.ended(*first, false);
            flows[which] = None;
        }
    }
    let counters = tracker.finish();
    assert!(counters.rtp_packets <= media_packets, "RTP counted on no media flow");
    let (calls, streams) = (Lines::default(), Lines::default());
    let mut table = CallTable::new(
        CallsConfig::default(),
        Box::new(calls.clone()),
        Box::new(streams.clone()),
    );
    for event in std::mem::take(tracker.sink()) {
        table.event(event).expect("writing into memory");
    }
    let counted = table.finish().expect("writing into memory");
    let calls = calls.objects();
    assert_eq!(calls.len() as u64, counted.calls, "call records against the count");
    assert_eq!(
        streams.objects().len() as u64,
        counted.streams,
        "stream records against the count"
    );
    assert!(counted.orphan_streams <= counted.streams);
    let mut out = Vec::new();
    for call in calls {
        out.clear();
        let call = serde_json::Value::Object(call);
        let template = encode_line(LineKind::Calls, &call, &mut out).expect("a call record that fits a message");
        let (_, v6) = LineKind::of_template(template).expect("a template of calls");
        let mut at = 0;
        for e in LineKind::Calls.elements() {
            let len = match e.length(v6) {
                VARIABLE => varlen(&out, &mut at),
                n => usize::from(n),
            };
            let value = &out[at..at + len];
            match e.encoding {
                LineEncoding::Utf8 => {
                    let text = call.get(e.key).and_then(|v| v.as_str()).unwrap_or("");
                    assert_eq!(std::str::from_utf8(value), Ok(text), "IPFIX's {}", e.key);
                }
                LineEncoding::Other if len > 0 => {
                    let _: serde_json::Map<String, serde_json::Value> =
                        serde_json::from_slice(value).expect("otherFields, a JSON object");
                }
                _ => {}
            }
            at += len;
        }
        assert_eq!(at, out.len(), "an IPFIX call record as long as its template says");
    }
}

/// Records written into memory that the target reads after the writer
/// is gone.
#[derive(Clone, Default)]
struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("one thread").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    /// The lines, each a JSON object.
    fn objects(&self) -> Vec<serde_json::Map<String, serde_json::Value>> {
        let bytes = self.0.lock().expect("one thread");
        bytes
            .split_inclusive(|&b| b == b'\n')
            .map(|line| {
                let line = line.strip_suffix(b"\n").expect("a record ends its line");
                serde_json::from_slice(line).expect("a record that parses into a JSON object")
            })
            .collect()
    }
}

fn check_metadata(meta: &Metadata) {
    let texts = [
        &meta.host,
        &meta.http_method,
        &meta.http_uri,
        &meta.http_user_agent,
        &meta.http_content_type,
        &meta.tls_version,
        &meta.tls_alpn,
        &meta.quic_version,
        &meta.client_banner,
        &meta.server_banner,
    ];
    for t in texts.into_iter().flatten() {
        assert!(t.len() <= MAX_TEXT, "a metadata text of {} bytes", t.len());
    }
    assert!(meta.dns_answers.len() <= MAX_LIST && meta.commands.len() <= MAX_LIST);
}

/// An IPv4 packet of the flow between 10.0.0.1:`client_port` (the client)
/// and 10.0.0.2:`server_port`, TCP or UDP, into `frame`.
#[allow(clippy::too_many_arguments)]
fn ip_packet(
    frame: &mut Vec<u8>,
    from_server: bool,
    udp: bool,
    (client_port, server_port): (u16, u16),
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
) {
    let (src, dst, sport, dport) = match from_server {
        false => ([10, 0, 0, 1], [10, 0, 0, 2], client_port, server_port),
        true => ([10, 0, 0, 2], [10, 0, 0, 1], server_port, client_port),
    };
    let l4 = if udp { 8 } else { 20 };
    let total = 20 + l4 + payload.len();
    frame.clear();
    frame.extend_from_slice(&[0x45, 0]);
    frame.extend_from_slice(&(total as u16).to_be_bytes());
    frame.extend_from_slice(&[0, 1, 0x40, 0, 64, if udp { 17 } else { 6 }, 0, 0]);
    frame.extend_from_slice(&src);
    frame.extend_from_slice(&dst);
    frame.extend_from_slice(&sport.to_be_bytes());
    frame.extend_from_slice(&dport.to_be_bytes());
    if udp {
        frame.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
    } else {
        frame.extend_from_slice(&seq.to_be_bytes());
        frame.extend_from_slice(&ack.to_be_bytes());
        frame.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    }
    frame.extend_from_slice(payload);
}

/// TCP reassembly: two directions of one connection under small memory
/// bounds (bytes 0 and 1 set them), then segments: a byte of flags (bit 7:
/// the other direction; the rest as TCP's, bit 6 standing for ACK), two of
/// sequence step, one of length, and that many bytes of payload. Each ACK
/// advertises the next two bytes as a window for the other direction.
/// Every offset a stream passes is accounted for by data or a gap, and
/// the bounds hold.
pub fn reassembly(data: &[u8]) {
    let Some(([per_stream, total], mut rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let (per_stream, total) = (usize::from(*per_stream) * 64, usize::from(*total) * 128);
    let mut memory = StreamMemory::new(ReassemblyConfig {
        max_buffered_per_stream: per_stream,
        max_buffered_total: total,
    });
    let mut streams = [StreamReassembler::new(), StreamReassembler::new()];
    let mut passed = [0u64; 2];
    let isn = 0xffff_f000u32;
    while let [flags, step_hi, step_lo, len, tail @ ..] = rest {
        let take = usize::from(*len).min(tail.len());
        let (payload, tail) = tail.split_at(take);
        rest = tail;
        let i = usize::from(flags >> 7);
        let tcp_flags = (flags & 0x3f) | if flags & 0x40 != 0 { 0x10 } else { 0 };
        let seq = isn.wrapping_add(u32::from(u16::from_be_bytes([*step_hi, *step_lo])) * 7);
        let p = &mut passed[i];
        streams[i].segment(seq, tcp_flags, payload, &mut memory, &mut |e| match e {
            StreamEvent::Data(bytes) => *p += bytes.len() as u64,
            StreamEvent::Gap(n) => *p += n,
        });
        if tcp_flags & 0x10 != 0 {
            streams[1 - i].receive_window(seq, u64::from(*step_lo) << (step_hi & 15));
        }
        assert!(memory.buffered() <= total, "the total bound");
        assert!(
            streams.iter().all(|s| s.buffered() <= per_stream),
            "the bound of a stream"
        );
        assert_eq!(memory.buffered(), streams[0].buffered() + streams[1].buffered());
    }
    for (stream, p) in streams.iter_mut().zip(&mut passed) {
        stream.finish(&mut memory, &mut |e| match e {
            StreamEvent::Data(bytes) => *p += bytes.len() as u64,
            StreamEvent::Gap(n) => *p += n,
        });
        assert_eq!(*p, stream.delivered(), "every offset passed is data or a gap");
    }
    assert_eq!(memory.buffered(), 0);
    let c = memory.counters();
    assert_eq!(c.delivered_bytes + c.gap_bytes, passed[0] + passed[1]);
}

/// IPv4 and IPv6 defragmentation under small bounds: fragments of four
/// datagrams built from the input (4 bytes each: the datagram and
/// version, the offset in 8-byte units, the length, the flags), at times
/// that step on. Bounds hold, reassembled datagrams decode whole, and at
/// the end every fragment is accounted for.
pub fn defrag(data: &[u8]) {
    let mut d = Defragmenter::new(DefragConfig {
        max_datagrams: 3,
        max_bytes: 6000,
        timeout_ns: 5_000_000_000,
    });
    let mut frame = Vec::new();
    let mut ts = 0u64;
    for op in data.chunks_exact(4) {
        let (which, offset8, len, flags) = (op[0] % 4, u16::from(op[1]) | u16::from(op[2] & 7) << 8, op[3], op[2]);
        let more = flags & 0x80 != 0;
        ts += u64::from(flags >> 3 & 7) * 1_000_000_000;
        if flags & 0x40 != 0 {
            d.expire(ts);
            continue;
        }
        fragment(
            &mut frame,
            which,
            offset8,
            usize::from(len) * 8 + usize::from(flags & 0x20 != 0),
            more,
        );
        let Ok(decoded) = decode_frame(LinkType::RawIp, &frame) else {
            continue;
        };
        if let Defrag::Complete(whole) = d.push(ts, &decoded, &frame) {
            let whole = whole.to_vec();
            let decoded = decode_frame(LinkType::RawIp, &whole).expect("a reassembled datagram decodes");
            assert_eq!(decoded.fragment, sluice_wire::Fragment::None);
        }
        assert!(d.held_bytes() <= 6000 && d.pending() <= 3);
    }
    d.finish();
    let c = *d.counters();
    assert_eq!((d.pending(), d.held_bytes()), (0, 0));
    assert!(c.duplicates + c.dropped_fragments <= c.fragments, "{c:?}");
    assert!(c.reassembled <= c.fragments);
}

/// A fragment of datagram `which` (even: IPv4, odd: IPv6) of protocol 253
/// carrying `len` bytes at `offset8` × 8.
fn fragment(frame: &mut Vec<u8>, which: u8, offset8: u16, len: usize, more: bool) {
    frame.clear();
    let data = (0..len).map(|i| (i * 7 + usize::from(offset8)) as u8);
    let field = offset8 << 3 | u16::from(more);
    if which.is_multiple_of(2) {
        frame.extend_from_slice(&[0x45, 0]);
        frame.extend_from_slice(&((20 + len) as u16).to_be_bytes());
        frame.extend_from_slice(&[0, which, 0, 0, 64, 253, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        frame[6..8].copy_from_slice(&(field >> 3 | u16::from(more) << 13).to_be_bytes());
    } else {
        frame.extend_from_slice(&[0x60, 0, 0, 0]);
        frame.extend_from_slice(&((8 + len) as u16).to_be_bytes());
        frame.extend_from_slice(&[44, 64]);
        frame.extend_from_slice(&[0xfd; 16]);
        frame.extend_from_slice(&[0xfe; 16]);
        frame.extend_from_slice(&[253, 0]);
        frame.extend_from_slice(&(field & !6).to_be_bytes());
        frame.extend_from_slice(&u32::from(which).to_be_bytes());
    }
    frame.extend(data);
}

/// The SF-TAP rule loader: the input is a configuration file. What loads
/// decides on payloads taken from the input.
pub fn rules(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = sluice_abstractor::Config::parse(&text, "fuzz");
    let Ok(parsed) = parse_rules(&text, "fuzz") else {
        return;
    };
    let Ok(set) = RuleSet::compile(parsed) else {
        return;
    };
    let (up, down) = data.split_at(data.len() / 2);
    for t in [Transport::Tcp, Transport::Udp] {
        let _ = set.decide(t, up, down, 40000, 80);
    }
}

/// A directory of this thread's own, emptied, `rec` in a folder of its
/// own that goes when the input is done (under the fuzzer every input is
/// a process of its own): the store works on files.
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(folder) = self.0.parent() {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

fn scratch() -> Scratch {
    let dir = std::env::temp_dir()
        .join(format!(
            "sluice-fuzz-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ))
        .join("rec");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    Scratch(dir)
}

/// A recording made of the input: byte 0 says its format (bit 0: pcapng)
/// and whether it has an index (bit 1); bytes 1-2, the index file's length;
/// then the index file, and the capture file. Its path.
fn recording(data: &[u8], dir: &Path) -> Option<PathBuf> {
    let (&flags, rest) = data.split_first()?;
    let (length, rest) = rest.split_first_chunk::<2>()?;
    let (index, capture) = rest.split_at(usize::from(u16::from_be_bytes(*length)).min(rest.len()));
    let extension = if flags & 1 != 0 { "pcapng" } else { "pcap" };
    let path = dir.join(format!("sluice-20240101T000000.000000000Z-000001.{extension}"));
    std::fs::write(&path, capture).expect("writing the scratch capture");
    if flags & 2 != 0 {
        std::fs::write(sluice_store::index_path(&path), index).expect("writing the scratch index");
    }
    Some(path)
}

/// The index reader and extract: a recording made of the input (see
/// `recording`), extracted whole, by a time range and by a flow that
/// the input's last bytes pick. The report adds up, and the output is a
/// capture that reads back whole with the packets it says it wrote.
pub fn extract(data: &[u8]) {
    let dir = scratch();
    let Some(path) = recording(data, &dir) else {
        return;
    };
    let _ = sluice_store::Index::read(sluice_store::index_path(&path));
    let tail = |i: usize| data.get(data.len().saturating_sub(8 * i + 8)..data.len().saturating_sub(8 * i));
    let word = |i: usize| tail(i).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
    let (from_ns, to_ns) = (word(1).min(word(2)), word(1).max(word(2)));
    let out = dir.with_file_name("out.pcap");
    for selection in [
        sluice_store::Selection {
            from_ns: 0,
            to_ns: u64::MAX,
            flow_hash: None,
        },
        sluice_store::Selection {
            from_ns,
            to_ns,
            flow_hash: None,
        },
        sluice_store::Selection {
            from_ns: 0,
            to_ns: u64::MAX,
            flow_hash: Some(word(0)),
        },
    ] {
        let Ok(report) = sluice_store::extract(&dir, &selection, |_| true, &out) else {
            continue;
        };
        assert_eq!(
            report.blocks_read + report.blocks_skipped_by_time + report.blocks_skipped_by_flow,
            report.blocks,
            "{report:?}"
        );
        assert!(report.packets_written <= report.packets_examined);
        assert!(report.warning_count >= report.warnings.len() as u64);
        let written = std::fs::read(&out).expect("the output exists");
        let file = CaptureFile::from_bytes(&out, written).expect("the output is a capture");
        let mut reader = file.reader().expect("checked at open");
        let packets = reader.by_ref().count() as u64;
        assert!(reader.warnings().is_empty(), "{:?}", reader.warnings());
        assert_eq!(packets, report.packets_written, "{report:?}");
    }
}

/// Repair: a recording made of the input (see `recording`) is repaired.
/// Then it reads back whole (no record the capture reader stops at), with
/// the packets repair kept, its index covers it, extract reads it without
/// a warning, and a second repair finds it whole and leaves it as it is.
pub fn repair(data: &[u8]) {
    let dir = scratch();
    let Some(path) = recording(data, &dir) else {
        return;
    };
    let Ok(report) = sluice_store::repair(&path) else {
        return;
    };
    if report.removed {
        assert!(!path.exists());
        return;
    }
    let bytes = std::fs::read(&path).expect("the repaired file");
    assert_eq!(bytes.len() as u64, report.bytes_kept, "{report:?}");
    let again = || {
        let again = sluice_store::repair(&path).expect("a repaired file repairs");
        assert!(
            again.whole() && !again.index_rebuilt && again.side_files.is_empty(),
            "{again:?}"
        );
    };
    let file = match CaptureFile::from_bytes(&path, bytes) {
        // Repair cuts any link type; the rest of Sluice reads only those it
        // decodes.
        Err(sluice_capture::OpenError::UnsupportedLinkType { .. }) => return again(),
        opened => opened.expect("a repaired file opens"),
    };
    let mut reader = file.reader().expect("checked at open");
    let packets = reader.by_ref().count() as u64;
    assert!(
        reader
            .warnings()
            .iter()
            .all(|w| !w.fatal && w.message.contains("-byte frame")),
        "{:?}",
        reader.warnings()
    );
    assert_eq!(packets, report.packets, "{report:?}");
    let index = sluice_store::Index::read(sluice_store::index_path(&path)).expect("a repaired file has an index");
    assert_eq!(index.packets(), report.packets);
    let out = dir.with_file_name("out.pcap");
    let extracted = sluice_store::extract(
        &dir,
        &sluice_store::Selection {
            from_ns: 0,
            to_ns: u64::MAX,
            flow_hash: None,
        },
        |_| true,
        &out,
    )
    .expect("a repaired recording extracts");
    assert!(!extracted.partial(), "{extracted:?}");
    assert_eq!(extracted.packets_written, report.packets);
    again();
}
