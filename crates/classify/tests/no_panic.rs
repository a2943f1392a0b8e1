//! Every dissector, on hostile bytes: arbitrary data and mutated or cut
//! real messages, on either transport and side, at any packet index. None
//! may panic, and none may store more metadata than the documented caps.
//! Failing inputs are kept by proptest in `no_panic.proptest-regressions`
//! and replayed first on every run.

use std::net::IpAddr;

use proptest::prelude::*;
use sluice_classify::dissectors::{Context, MAX_LIST, MAX_TEXT, Metadata, Packet, Side, Transport, registry};

/// Starts of real messages, so that mutations reach deep into parsers
/// rather than failing at the first byte.
const SEEDS: &[&[u8]] = &[
    b"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello",
    // TLS ClientHello with SNI "a.io" and ALPN "h2".
    b"\x16\x03\x01\x00\x45\x01\x00\x00\x41\x03\x03AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\x00\x00\x02\x13\x01\x01\x00\x00\x16\x00\x00\x00\x09\x00\x07\x00\x00\x04a.io\x00\x10\x00\x05\x00\x03\x02h2",
    // DNS query for a.io with a compression pointer to itself.
    b"\x12\x34\x01\x00\x00\x01\x00\x01\x00\x00\x00\x00\x01a\x02io\x00\x00\x01\x00\x01\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x0a\x00\x00\x01\xc0\x22",
    // QUIC v1 long-header Initial.
    b"\xc3\x00\x00\x00\x01\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08\x00\x00\x44\x9e\x7b\x9a\xec\x34",
    // STUN binding request.
    b"\x00\x01\x00\x08\x21\x12\xa4\x42abcdefghijkl\x80\x22\x00\x04test",
    b"SSH-2.0-OpenSSH_9.6\r\n",
    b"220 mail.example.com ESMTP ready\r\n",
    b"INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP h\r\nContent-Length: 40\r\n\r\nv=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 4000 RTP/AVP 0\r\n",
    // RTP, version 2.
    b"\x80\x00\x00\x01\x00\x00\x00\xa0\x12\x34\x56\x78\xff\xfe\xfd\xfc",
    b"\x13BitTorrent protocol\x00\x00\x00\x00\x00\x00\x00\x00",
];

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        0..SEEDS.len(),
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(seed, flips, cut)| {
            let mut bytes = SEEDS[seed].to_vec();
            for (at, value) in flips {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let keep = cut.index(bytes.len() + 1);
            bytes.truncate(keep.max(1));
            bytes
        })
}

fn hostile() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![proptest::collection::vec(any::<u8>(), 1..1500), mutated()]
}

fn check_caps(meta: &Metadata) {
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_dissector_panics_on_hostile_bytes(
        data in hostile(),
        tcp in any::<bool>(),
        up in any::<bool>(),
        index in 0u32..20,
        ports in (any::<u16>(), prop::sample::select(vec![
            53u16, 80, 443, 5060, 3478, 1900, 5353, 137, 21, 25, 1194, 51820, 12345, 88, 123, 161, 445, 500, 502, 554,
            1433, 1812, 1883, 3306, 3389, 5432, 6379, 6881, 8080, 9092, 11211, 27017, 47808,
        ])),
    ) {
        let packet = Packet {
            transport: if tcp { Transport::Tcp } else { Transport::Udp },
            side: if up { Side::Up } else { Side::Down },
            client: IpAddr::from([10, 0, 0, 1]),
            client_port: ports.0,
            server: IpAddr::from([10, 0, 0, 2]),
            server_port: ports.1,
            data: &data,
            index,
            other_index: index / 2,
        };
        for dissector in registry() {
            if !dissector.wants.accepts(packet.transport) {
                continue;
            }
            let mut meta = Metadata::default();
            let mut expect = Vec::new();
            let mut resolved = Vec::new();
            let mut ctx = Context::new(&mut meta, &mut expect, &mut resolved);
            let _ = (dissector.inspect)(&packet, &mut ctx);
            check_caps(&meta);
            prop_assert!(expect.len() <= 64, "{} announced {} ports", dissector.name, expect.len());
            prop_assert!(resolved.len() <= MAX_LIST, "{} resolved {} addresses", dissector.name, resolved.len());
        }
    }
}
