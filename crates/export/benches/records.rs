//! Flow records encoded per second, as JSON lines, as CSV and as IPFIX
//! data records, on flows
//! shaped like the realistic mix's: a few packets each, a third of them
//! UDP, two thirds with no packet from the server, a fifth with protocol
//! metadata.
//!
//! `cargo bench -p sluice-export --bench records`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_classify::{Classifier, Fingerprint, FlowClass, Label, Metadata};
use sluice_export::ipfix::IpfixEncoder;
use sluice_export::schema::Record;
use sluice_export::{Encoder, Format};
use sluice_flow::{EndReason, Flow, FlowConfig, FlowTable, PacketInfo};
use sluice_wire::{Decoded, FlowKey, tcp_flags};

const FLOWS: usize = 4096;

fn flows() -> Vec<Flow<FlowClass>> {
    let mut table = FlowTable::new(FlowConfig {
        capacity: FLOWS,
        ..FlowConfig::default()
    });
    let mut ts = 1_704_067_200_000_000_000u64;
    let mut slots = Vec::with_capacity(FLOWS);
    for i in 0..FLOWS {
        let udp = i % 3 == 0;
        let answered = i % 3 == 2;
        let mut key = FlowKey {
            proto: if udp { 17 } else { 6 },
            src_port: 40_000 + (i % 20_000) as u16,
            dst_port: [53, 443, 80][i % 3],
            ..FlowKey::default()
        };
        key.src[..4].copy_from_slice(&[10, (i >> 16) as u8, (i >> 8) as u8, i as u8]);
        key.dst[..4].copy_from_slice(&[192, 0, 2, (i % 250) as u8]);
        let mut slot = 0;
        for p in 0..1 + i % 12 {
            let from_client = !answered || p % 2 == 0;
            let mut d = Decoded {
                key: if from_client { key } else { key.reversed() },
                payload_len: (p * 397 % 1400) as u16,
                ttl: 64 - (p % 3) as u8,
                ..Decoded::default()
            };
            if !udp {
                d.tcp.flags = if p == 0 {
                    tcp_flags::SYN
                } else {
                    tcp_flags::ACK | tcp_flags::PSH
                };
            }
            ts += 1_000 + p as u64 * 7_919;
            let info = PacketInfo {
                ts_ns: ts,
                wire_len: 60 + d.payload_len as u32,
                decoded: &d,
                order: 0,
            };
            slot = table
                .process(&info, d.key.symmetric_hash(), FlowClass::default, &mut |_, _| {})
                .0;
        }
        slots.push(slot);
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, slot)| {
            let mut flow = table.flow_mut(slot).clone();
            flow.ext.label = [
                Label::UNKNOWN,
                Label {
                    master: "TLS",
                    app: Some("YouTube"),
                },
                Label {
                    master: "HTTP",
                    app: None,
                },
            ][i % 3];
            flow.ext.classifier = Classifier::Dissector;
            flow.ext.confidence = 0.9;
            if i % 5 == 0 {
                flow.ext.meta = Some(Box::new(Metadata {
                    host: Some(format!("video-{i}.example.com").into()),
                    tls_version: Some("1.3".into()),
                    tls_alpn: Some("h2".into()),
                    ja4: Fingerprint::new("t13d1516h2_8daaf6152771_02713d6af862"),
                    ..Metadata::default()
                }));
            }
            flow
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let flows = flows();
    let mut group = c.benchmark_group("records");
    group.throughput(Throughput::Elements(FLOWS as u64));
    for (name, format) in [("jsonl", Format::Jsonl), ("csv", Format::Csv)] {
        let mut encoder = Encoder::new(format).expect("a format with records");
        let mut out = Vec::with_capacity(4 << 20);
        group.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                for flow in &flows {
                    let record = Record {
                        flow,
                        end: EndReason::Idle,
                        stats: None,
                        media: None,
                    };
                    encoder.encode(&record, &mut out);
                }
                black_box(out.len())
            })
        });
    }
    let mut ipfix = IpfixEncoder::default();
    let mut out = Vec::with_capacity(4 << 20);
    group.bench_function("ipfix", |b| {
        b.iter(|| {
            out.clear();
            for flow in &flows {
                let record = Record {
                    flow,
                    end: EndReason::Idle,
                    stats: None,
                    media: None,
                };
                black_box(ipfix.encode(&record, &mut out));
            }
            black_box(out.len())
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
