//! Each dissector's `first_byte` set is a promise: for a first byte outside
//! it, `inspect` answers `No`, whatever follows, on either side, at any
//! packet index, on any ports. So are the fields of its `prefix`: for data
//! that holds one with a value out of its range, `inspect` answers `No` and
//! notes nothing. The chain relies on both to skip the call. Checked here
//! on random bytes and mutated real messages, and on every payload of
//! nDPI's reference captures (`../shared/data/ndpi-dev`, or
//! `$NDPI_DEV_DIR`) seen as the first bytes of a direction.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_capture::CaptureFile;
use sluice_classify::dissectors::{
    Context, Dissector, FirstByte, Metadata, Packet, Side, Transport, Verdict, registry,
};

/// Ports the dissectors test for, so that port-gated paths are reached.
const PORTS: &[u16] = &[
    7, 21, 22, 23, 25, 53, 67, 68, 69, 80, 88, 110, 111, 119, 123, 137, 138, 139, 143, 161, 162, 177, 179, 194, 389,
    427, 443, 445, 464, 500, 502, 514, 515, 520, 546, 547, 554, 563, 587, 631, 636, 853, 873, 993, 995, 1080, 1194,
    1433, 1434, 1701, 1723, 1812, 1813, 1883, 1900, 2000, 2049, 2123, 2152, 2427, 2727, 2944, 3074, 3306, 3389, 3478,
    3544, 4222, 4500, 4730, 5004, 5005, 5060, 5061, 5222, 5353, 5355, 5432, 5683, 5938, 6379, 6666, 6667, 6881, 6969,
    7000, 8080, 8883, 9042, 9092, 9200, 9300, 11211, 17500, 27015, 27017, 41641, 51820, 61613,
    // Those of the dissectors for BGP, PPTP, GTP, VXLAN, CAPWAP, DNP3, S7comm,
    // sFlow, BFD, NAT-PMP, OpenFlow, XDMCP, DCE/RPC, AJP, SMPP, H.323, RTMP
    // and IAX.
    102, 135, 1720, 1935, 2775, 3386, 3784, 4569, 4784, 4789, 5246, 5247, 5351, 6343, 6633, 6653, 8009, 20000,
    // Those of UFTP, LISP, Ethereum, Mumble, TRDP, L2TP and CPHA; a reserved client port
    // for RSH.
    1044, 4341, 4342, 30303, 64738, 17224, 17225, 1701, 8116, 1022,
];

fn gated() -> Vec<(usize, Dissector)> {
    registry()
        .iter()
        .copied()
        .enumerate()
        .filter(|(_, d)| d.first_byte != FirstByte::ANY)
        .collect()
}

fn transports(d: &Dissector) -> impl Iterator<Item = Transport> + '_ {
    [Transport::Tcp, Transport::Udp]
        .into_iter()
        .filter(|&t| d.wants.accepts(t))
}

/// The dissectors that fix fields of their data's first bytes.
fn fixing() -> Vec<Dissector> {
    registry()
        .iter()
        .copied()
        .filter(|d| transports(d).any(|t| !d.prefix.on(t).is_empty()))
        .collect()
}

/// `d`'s verdict on `data` as the first bytes of the client's or the
/// server's direction.
fn ask(d: &Dissector, transport: Transport, side: Side, ports: (u16, u16), data: &[u8], index: (u32, u32)) -> Verdict {
    ask_noting(d, transport, side, ports, data, index).0
}

/// [`ask`], and whether `inspect` noted or announced anything.
fn ask_noting(
    d: &Dissector,
    transport: Transport,
    side: Side,
    ports: (u16, u16),
    data: &[u8],
    index: (u32, u32),
) -> (Verdict, bool) {
    let packet = Packet {
        transport,
        side,
        client: IpAddr::from([10, 0, 0, 1]),
        client_port: ports.0,
        server: IpAddr::from([10, 0, 0, 2]),
        server_port: ports.1,
        data,
        index: index.0,
        other_index: index.1,
    };
    let mut meta = Metadata::default();
    let (mut expect, mut resolved) = (Vec::new(), Vec::new());
    let mut ctx = Context::new(&mut meta, &mut expect, &mut resolved);
    let verdict = (d.inspect)(&packet, &mut ctx);
    let noted = ctx.meta.written() || !expect.is_empty() || !resolved.is_empty();
    (verdict, noted)
}

/// Starts of real messages: with their first byte changed, the rest of a
/// well-formed message reaches the checks after the first byte.
const SEEDS: &[&[u8]] = &[
    b"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"\x16\x03\x01\x00\x45\x01\x00\x00\x41\x03\x03AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\x00\x00\x02\x13\x01\x01\x00",
    b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x02io\x00\x00\x01\x00\x01",
    b"\xc3\x00\x00\x00\x01\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08\x00\x00\x44\x9e\x7b\x9a\xec\x34",
    b"\x00\x01\x00\x08\x21\x12\xa4\x42abcdefghijkl\x80\x22\x00\x04test",
    b"SSH-2.0-OpenSSH_9.6\r\n",
    b"220 mail.example.com ESMTP ready\r\n",
    b"INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP h\r\n\r\n",
    b"\x80\x00\x00\x01\x00\x00\x00\xa0\x12\x34\x56\x78",
    b"\x13BitTorrent protocol\x00\x00\x00\x00\x00\x00\x00\x00",
    b"\x30\x0c\x02\x01\x01\x60\x07\x02\x01\x03\x04\x00\x80\x00",
    b"<34>Oct 11 22:14:15 host su: 'su root' failed\n",
    b"GNUTELLA CONNECT/0.6\r\n",
    b"M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\n\r\n",
    // BGP KEEPALIVE, PPTP Start-Control-Connection-Request, GTP-U G-PDU,
    // VXLAN, CAPWAP Discovery Request, DNP3 link header, S7comm in
    // TPKT/COTP, sFlow v5, BFD, NAT-PMP mapping, OpenFlow HELLO, XDMCP
    // Query, DCE/RPC bind, AJP forward request, SMPP bind, H.323 SETUP,
    // IAX2 NEW, MPEG-TS.
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x13\x04",
    b"\x00\x9c\x00\x01\x1a\x2b\x3c\x4d\x00\x01\x00\x00\x01\x00\x00\x00",
    b"\x30\xff\x00\x04\x00\x00\x12\x34\x45\x00\x00\x04",
    b"\x08\x00\x00\x00\x00\x13\x89\x00\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00",
    b"\x00\x10\x02\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x06\x00\x00\x14\x00\x01\x01",
    b"\x05\x64\x05\xc0\x04\x00\x03\x00\x00\x00",
    b"\x03\x00\x00\x19\x02\xf0\x80\x32\x01\x00\x00\x00\x00\x00\x08\x00\x00\xf0\x00\x00\x01\x00\x01\x01\xe0",
    b"\x00\x00\x00\x05\x00\x00\x00\x01\x0a\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x27\x10\x00\x00\x00\x01",
    b"\x20\x40\x03\x18\x00\x00\x00\x01\x00\x00\x00\x00\x00\x0f\x42\x40\x00\x0f\x42\x40\x00\x00\x00\x00",
    b"\x00\x02\x00\x00\x1f\x90\x1f\x90\x00\x00\x0e\x10",
    b"\x04\x00\x00\x08\x00\x00\x00\x01",
    b"\x00\x01\x00\x02\x00\x01\x00",
    b"\x05\x00\x0b\x03\x10\x00\x00\x00\x48\x00\x00\x00\x01\x00\x00\x00",
    b"\x12\x34\x00\x1e\x02\x02\x00\x08HTTP/1.1\x00",
    b"\x00\x00\x00\x26\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01esme01\x00secret\x00\x00\x34\x01\x01\x00",
    b"\x03\x00\x00\x40\x08\x02\x12\x34\x05\x04\x03\x88\x93\xa5",
    b"\x92\x34\x00\x00\x00\x00\x00\x03\x00\x00\x06\x01\x0b\x02\x00\x02",
    b"\x47\x41\x00\x10\xff\xff\xff\xff",
    b"\x20\x01\x00\x0c\x00\x00\x01\x00\x00\x60\x00\x04\xe7\x5f\x1c\x00",
    b"\x0b\x02\x00\x22\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    b"\x00\x00\x00\x09web1\x00\x00\x02\x00\x08cpu\x00",
    b"<?xml version=\"1.0\"?><s:Envelope xmlns:d=\"http://schemas.xmlsoap.org/ws/2005/04/discovery\"/>",
    b"\x20\x00\x12\x34\xc0\x00\x02\x0aapplication/sdp\x00v=0\r\n",
    b"JRMI\x00\x02\x4b",
    b"GIOP\x01\x02\x01\x00\x40\x00\x00\x00",
    b"ceph v2\n",
    b"RTPS\x02\x03\x01\x10\x01\x10\x2a\x3f\x00\x00\x00\x01\x00\x00\x00\x01\x09\x01\x08\x00",
    b"HELF\x32\x00\x00\x00\x00\x00\x00\x00",
    b"HS\x00\x00\x01\x00ZZ\x00\x00\x00\x00\x00\x00\x00\x07hislip0",
    b"\x01\x00\x00\x00\x00\x5f\x00\x01\x00\x00STORESCP        ECHOSCU         ",
    // PROXY protocol versions 1 and 2.
    b"PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n",
    b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc0\x00\x02\x01\xc6\x33\x64\x07\xdc\x04\x01\xbb",
    // FastCGI's FCGI_BEGIN_REQUEST.
    b"\x01\x01\x00\x01\x00\x08\x00\x00\x00\x01\x01\x00\x00\x00\x00\x00",
    // Thrift strict binary call.
    b"\x80\x01\x00\x01\x00\x00\x00\x07getUser\x00\x00\x00\x01\x08\x00\x01",
    // BFCP FloorRequestStatus.
    b"\x20\x04\x00\x03\x00\x01\xe2\x40\x00\x07\x00\x2a\x1f\x0c\x00\x01\x25\x08\x00\x01\x0b\x04\x03\x00",
    // MELSEC 3E batch read.
    b"\x50\x00\x00\xff\xff\x03\x00\x0c\x00\x10\x00\x01\x04\x00\x00\x64\x00\x00\xa8\x03\x00",
    // netcode's connection request.
    b"\x00NETCODE 1.02\x00\x88\x77\x66\x55\x44\x33\x22\x11",
    // FLUTE FDT packet (LCT with EXT_FDT).
    b"\x10\xa0\x09\x00\x12\x34\x56\x78\x00\x00\x00\x07\x00\x00\x00\x00\xc0\x20\x00\x05\x40\x04\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x40\x00\x00\x00\x00<?xml",
];

fn tail() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600),
        (0..SEEDS.len()).prop_map(|i| SEEDS[i][1..].to_vec()),
    ]
}

fn port() -> impl Strategy<Value = u16> {
    prop_oneof![(0..PORTS.len()).prop_map(|i| PORTS[i]), any::<u16>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Every first byte outside the set, before the same bytes.
    #[test]
    fn a_first_byte_outside_the_set_is_always_refused(
        pick in any::<prop::sample::Index>(),
        rest in tail(),
        up in any::<bool>(),
        ports in (port(), port()),
        index in (0u32..4, 0u32..4),
    ) {
        let gated = gated();
        prop_assume!(!gated.is_empty());
        let (_, d) = gated[pick.index(gated.len())];
        let side = if up { Side::Up } else { Side::Down };
        let mut data = vec![0];
        data.extend_from_slice(&rest);
        for transport in transports(&d) {
            for first in (0..=255).filter(|&b| !d.first_byte.on(transport).contains(b)) {
                data[0] = first;
                let verdict = ask(&d, transport, side, ports, &data, index);
                prop_assert_eq!(verdict, Verdict::No, "{} on {:?} {:?} {:?}", d.name, transport, side, &data[..data.len().min(24)]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Data whose first bytes break a field of a dissector's prefix: a real
    /// message or random bytes, some of the first bytes replaced by random
    /// ones, the first byte one the dissector accepts.
    #[test]
    fn data_a_prefix_rules_out_is_always_refused(
        pick in any::<prop::sample::Index>(),
        first in any::<prop::sample::Index>(),
        rest in tail(),
        changes in proptest::collection::vec((0usize..16, any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
        up in any::<bool>(),
        ports in (port(), port()),
        index in (0u32..4, 0u32..4),
    ) {
        let fixing = fixing();
        prop_assume!(!fixing.is_empty());
        let d = fixing[pick.index(fixing.len())];
        let side = if up { Side::Up } else { Side::Down };
        for transport in transports(&d) {
            let firsts: Vec<u8> = (0..=255).filter(|&b| d.first_byte.on(transport).contains(b)).collect();
            prop_assume!(!firsts.is_empty());
            let mut data = vec![firsts[first.index(firsts.len())]];
            data.extend_from_slice(&rest);
            for &(at, b) in &changes {
                if let Some(byte) = data.get_mut(at) {
                    *byte = b;
                }
            }
            data.truncate(1 + cut.index(data.len()));
            if !d.prefix.admits(transport, &data) {
                let (verdict, noted) = ask_noting(&d, transport, side, ports, &data, index);
                prop_assert_eq!(verdict, Verdict::No, "{} on {:?} {:?} {:?}", d.name, transport, side, &data[..data.len().min(24)]);
                prop_assert!(!noted, "{} noted something about {:?}", d.name, &data[..data.len().min(24)]);
            }
        }
    }
}

#[test]
fn real_payloads_a_prefix_rules_out_are_refused() {
    let Some(paths) = reference_captures() else {
        return;
    };
    let fixing = fixing();
    let (mut checked, mut admitted) = (0u64, 0u64);
    let mut failures = Vec::new();
    for_each_payload(&paths, |path, transport, (src, dst), data| {
        for d in fixing.iter().filter(|d| d.wants.accepts(transport)) {
            if d.prefix.admits(transport, data) {
                admitted += 1;
                continue;
            }
            for (side, ports) in [(Side::Up, (src, dst)), (Side::Down, (dst, src))] {
                for index in [(0, 0), (1, 1), (0, 1)] {
                    checked += 1;
                    let (verdict, noted) = ask_noting(d, transport, side, ports, data, index);
                    if (verdict != Verdict::No || noted) && failures.len() < 20 {
                        failures.push(format!(
                            "{}: {} said {verdict:?} (noting: {noted}) to {:?} {side:?} {:?} at {index:?}",
                            path.display(),
                            d.name,
                            transport,
                            &data[..data.len().min(24)]
                        ));
                    }
                }
            }
        }
    });
    eprintln!(
        "{checked} refusals checked, {admitted} payloads admitted, over {} captures",
        paths.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Calls `f` with each TCP or UDP packet's payload, when it has one, in
/// the captures `paths` (those that do not open as captures skipped),
/// with its transport and its (source, destination) ports.
fn for_each_payload(paths: &[PathBuf], mut f: impl FnMut(&Path, Transport, (u16, u16), &[u8])) {
    for path in paths {
        let Ok(file) = CaptureFile::open(path) else {
            continue;
        };
        let Ok(reader) = file.reader() else {
            continue;
        };
        for raw in reader {
            let Ok(decoded) = sluice_wire::decode(raw.link, raw.data) else {
                continue;
            };
            let transport = match decoded.key.proto {
                6 => Transport::Tcp,
                17 => Transport::Udp,
                _ => continue,
            };
            let start = (decoded.payload_offset as usize).min(raw.data.len());
            let end = (start + decoded.payload_captured as usize).min(raw.data.len());
            let data = &raw.data[start..end];
            if !data.is_empty() {
                f(path, transport, (decoded.key.src_port, decoded.key.dst_port), data);
            }
        }
    }
}

fn reference_captures() -> Option<Vec<PathBuf>> {
    let root = std::env::var_os("NDPI_DEV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ndpi-dev"));
    let dir = root.join("pcap");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipping: no nDPI reference captures at {}", dir.display());
        return None;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    Some(paths)
}

#[test]
fn real_payloads_with_a_first_byte_outside_the_set_are_refused() {
    let Some(paths) = reference_captures() else {
        return;
    };
    let gated = gated();
    let mut checked = 0u64;
    let mut failures = Vec::new();
    for_each_payload(&paths, |path, transport, (src, dst), data| {
        let first = data[0];
        for (_, d) in gated.iter().filter(|(_, d)| d.wants.accepts(transport)) {
            if d.first_byte.on(transport).contains(first) {
                continue;
            }
            for (side, ports) in [(Side::Up, (src, dst)), (Side::Down, (dst, src))] {
                for index in [(0, 0), (1, 1)] {
                    checked += 1;
                    let verdict = ask(d, transport, side, ports, data, index);
                    if verdict != Verdict::No && failures.len() < 20 {
                        failures.push(format!(
                            "{}: {} said {verdict:?} to {:?} {side:?} {:?} at {index:?}",
                            path.display(),
                            d.name,
                            transport,
                            &data[..data.len().min(24)]
                        ));
                    }
                }
            }
        }
    });
    eprintln!("{checked} refusals checked over {} captures", paths.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
