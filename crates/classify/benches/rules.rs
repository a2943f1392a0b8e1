//! The rule engine alone: flows decided per second and compiled size, for
//! the shipped rules and for a set of 1,000 rules.
//!
//! `cargo bench -p sluice-classify --bench rules`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_classify::rules::{DEFAULT_RULES, Rule, parse_rules};
use sluice_classify::{RuleSet, Transport};

/// First bytes of real protocols, and bytes no rule knows.
fn samples() -> Vec<(&'static [u8], &'static [u8])> {
    vec![
        (
            b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
        ),
        (
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
            b"\x16\x03\x03\x00\x7a\x02\x00\x00\x76\x03\x03",
        ),
        (b"SSH-2.0-OpenSSH_9.6\r\n", b"SSH-2.0-OpenSSH_8.9p1 Ubuntu\r\n"),
        (b"RFB 003.008\n", b"RFB 003.008\n"),
        (b"AMQP\x00\x00\x09\x01", b"\x01\x00\x00\x00\x00\x01\x00\x00\x0a"),
        (b"ZBXD\x01\x10\x00\x00\x00\x00\x00\x00\x00", b"ZBXD\x01\x02\x00"),
        (&[0x5a; 64], &[0xa5; 64]),
    ]
}

/// 1,000 rules in the style of a real rule file: a literal command or
/// magic, then classes and repetition, some with both directions.
fn thousand_rules() -> Vec<Rule> {
    let mut text = String::new();
    for i in 0..1000 {
        let name = format!("proto{i:04}");
        match i % 4 {
            0 => text.push_str(&format!(
                "{name}:\n  up: '^CMD{i:04} [a-z]+ v[0-9]+\\r?\\n'\n  down: '^OK{i:04} [0-9]{{3}} '\n  proto: TCP\n"
            )),
            1 => text.push_str(&format!(
                "{name}:\n  up: '^\\x{:02x}\\x{:02x}{i:04}[\\x00-\\x10]{{2}}'\n",
                i % 256,
                (i / 256) + 1
            )),
            2 => text.push_str(&format!(
                "{name}:\n  down: '^HELLO-{i} [A-Za-z0-9._-]+\\r\\n'\n  nice: {}\n",
                50 + i % 100
            )),
            _ => text.push_str(&format!(
                "{name}:\n  up: '^(GET|POST) /api{i}/[^ ]* HTTP/1\\.[01]\\r\\n'\n  proto: TCP\n  nice: 90\n"
            )),
        }
    }
    parse_rules(&text, "generated").expect("generated rules parse")
}

fn bench(c: &mut Criterion) {
    let samples = samples();
    let sets = [
        ("default", parse_rules(DEFAULT_RULES, "default").unwrap()),
        ("1000 rules", thousand_rules()),
    ];
    let mut group = c.benchmark_group("rules");
    group.throughput(Throughput::Elements(samples.len() as u64));
    for (name, rules) in sets {
        let count = rules.len();
        let set = RuleSet::compile(rules).expect("rules compile");
        eprintln!(
            "{name}: {count} rules, {} KiB compiled ({} bytes per rule)",
            set.memory_usage() / 1024,
            set.memory_usage() / count
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                for (up, down) in &samples {
                    black_box(set.decide(Transport::Tcp, black_box(up), black_box(down), 40000, 8000));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
