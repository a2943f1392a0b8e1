//! Writes the seed corpus of every fuzz target to `fuzz/corpus/TARGET/`:
//! small captures and recordings of `sluice gen` traffic, and frames,
//! payloads, segment and fragment sequences and rule files built by hand
//! from the formats' definitions. Deterministic: run it again and nothing
//! changes.
//!
//! cargo run -p sluice-fuzz-targets --example seeds

use std::path::{Path, PathBuf};

use sluice_gen::{FrameSink, Profile, TruthRow, generate};
use sluice_store::{CaptureFormat, MIN_BLOCK_BYTES, PcapWriter, Recorder, RecorderConfig};
use sluice_wire::LinkType;

const T0: u64 = 1_704_067_200_000_000_000;

struct Frames(Vec<(u64, Vec<u8>)>);

impl FrameSink for Frames {
    fn frame(&mut self, ts_ns: u64, frame: &[u8]) -> std::io::Result<()> {
        self.0.push((ts_ns, frame.to_vec()));
        Ok(())
    }
}

fn generated(profile: Profile, packets: u64) -> Vec<(u64, Vec<u8>)> {
    let mut frames = Frames(Vec::new());
    generate(profile, packets, 7, &mut frames, &mut |_: &TruthRow| Ok(())).expect("generating");
    frames.0
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

fn seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus().join(target);
    std::fs::create_dir_all(&dir).expect("the corpus directory");
    std::fs::write(dir.join(name), bytes).expect("writing a seed");
}

/// A seed of the chain target, and of the records target, which reads the
/// same input.
fn chain_seed(name: &str, bytes: &[u8]) {
    seed("chain", name, bytes);
    seed("records", name, bytes);
}

/// A nanosecond pcap (little-endian unless `big`) of `frames`, `micro`
/// for microseconds.
fn pcap(frames: &[(u64, Vec<u8>)], linktype: u32, micro: bool, big: bool) -> Vec<u8> {
    let word = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
    let half = |v: u16| if big { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut out = Vec::new();
    out.extend(word(if micro { 0xa1b2_c3d4 } else { 0xa1b2_3c4d }));
    out.extend(half(2));
    out.extend(half(4));
    out.extend(word(0));
    out.extend(word(0));
    out.extend(word(65535));
    out.extend(word(linktype));
    for (ts, frame) in frames {
        let fraction = ts % 1_000_000_000;
        out.extend(word((ts / 1_000_000_000) as u32));
        out.extend(word(if micro { fraction / 1000 } else { fraction } as u32));
        out.extend(word(frame.len() as u32));
        out.extend(word(frame.len() as u32));
        out.extend(frame);
    }
    out
}

/// A pcapng file: a section, an Ethernet interface with nanosecond
/// times, the frames as enhanced packet blocks, a simple packet block and
/// a block of an unknown type.
fn pcapng(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
        let padded = body.len().next_multiple_of(4);
        let total = (12 + padded) as u32;
        out.extend(kind.to_le_bytes());
        out.extend(total.to_le_bytes());
        out.extend(body);
        out.resize(out.len() + padded - body.len(), 0);
        out.extend(total.to_le_bytes());
    }
    let mut out = Vec::new();
    let mut shb = vec![0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
    shb.extend([0xff; 8]);
    block(&mut out, 0x0a0d_0d0a, &shb);
    let mut idb = vec![1, 0, 0, 0, 0xff, 0xff, 0, 0];
    idb.extend([9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
    block(&mut out, 1, &idb);
    for (ts, frame) in frames {
        let mut epb = Vec::new();
        epb.extend(0u32.to_le_bytes());
        epb.extend(((ts >> 32) as u32).to_le_bytes());
        epb.extend((*ts as u32).to_le_bytes());
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend((frame.len() as u32).to_le_bytes());
        epb.extend(frame);
        block(&mut out, 6, &epb);
    }
    let mut spb = (60u32).to_le_bytes().to_vec();
    spb.extend([0x11; 60]);
    block(&mut out, 3, &spb);
    block(&mut out, 0xbad, b"skipped");
    out
}

/// A recording of `frames` in `format`, through the recorder: the bytes
/// of the `extract` and `repair` targets' input (flags, index length,
/// index, capture).
fn recording(frames: &[(u64, Vec<u8>)], format: CaptureFormat, with_index: bool) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("sluice-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut c = RecorderConfig::new(&dir, LinkType::Ethernet, 2000);
    c.format = format;
    c.block_bytes = MIN_BLOCK_BYTES;
    c.direct = false;
    let mut r = Recorder::start(c).expect("a recorder");
    for (ts, frame) in frames {
        r.push(*ts, frame.len() as u32, frame).expect("recording");
    }
    let files = r.finish().expect("recording").files;
    let capture = std::fs::read(&files[0]).expect("the recording");
    let index = std::fs::read(sluice_store::index_path(&files[0])).expect("its index");
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = vec![u8::from(format == CaptureFormat::PcapNg) | if with_index { 2 } else { 0 }];
    out.extend((index.len() as u16).to_be_bytes());
    out.extend(index);
    out.extend(capture);
    out
}

/// Payloads of the chain target: a byte for the transport and port, then
/// (side, length, bytes) records.
fn flow(udp: bool, port_index: u8, messages: &[(bool, &[u8])]) -> Vec<u8> {
    let mut out = vec![u8::from(udp) | port_index << 1];
    for (from_server, payload) in messages {
        let payload = &payload[..payload.len().min(255)];
        out.push(u8::from(*from_server));
        out.push(payload.len() as u8);
        out.extend_from_slice(payload);
    }
    out
}

fn main() {
    let _ = std::fs::remove_dir_all(corpus());
    let mix = generated(Profile::Mix, 40);
    let voip = generated(Profile::Voip, 30);
    let worst = generated(Profile::WorstCase, 10);
    let connections = generated(Profile::Connections, 16);

    // capture: the readers.
    seed("capture", "mix-pcap-ns", &pcap(&mix, 1, false, false));
    seed("capture", "mix-pcap-us-big-endian", &pcap(&mix[..10], 1, true, true));
    seed("capture", "voip-pcapng", &pcapng(&voip));
    seed("capture", "worst-case-pcap-us", &pcap(&worst, 1, true, false));
    let raw: Vec<(u64, Vec<u8>)> = mix.iter().take(8).map(|(t, f)| (*t, f[14..].to_vec())).collect();
    seed("capture", "raw-ip-pcap", &pcap(&raw, 101, false, false));
    let mut torn = pcap(&mix[..6], 1, false, false);
    torn.truncate(torn.len() - 9);
    seed("capture", "torn-pcap", &torn);

    // decode: the first byte picks the link type (index in LINKS).
    for (i, (_, frame)) in mix.iter().chain(&voip).step_by(5).take(12).enumerate() {
        seed("decode", &format!("ethernet-{i:02}"), &[&[1u8][..], frame].concat());
    }
    let ip = &mix[3].1[14..];
    let sll = [&[0u8, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00][..], ip].concat();
    let sll2 = [
        &[0x08u8, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0][..],
        ip,
    ]
    .concat();
    for (link, name, frame) in [
        (0u8, "null", [&2u32.to_le_bytes()[..], ip].concat()),
        (2, "ppp", [&[0xffu8, 0x03, 0x00, 0x21][..], ip].concat()),
        (3, "cisco-hdlc", [&[0x0fu8, 0x00, 0x08, 0x00][..], ip].concat()),
        (4, "raw-ip", ip.to_vec()),
        (7, "loop", [&2u32.to_be_bytes()[..], ip].concat()),
        (8, "linux-sll", sll),
        (9, "linux-sll2", sll2),
        (
            12,
            "radiotap",
            [
                &[0u8, 0, 8, 0, 0, 0, 0, 0][..],
                &[0x08, 0x02, 0, 0],
                &[0; 18],
                &[0, 0],
                &[0xaa, 0xaa, 3, 0, 0, 0, 8, 0],
                ip,
            ]
            .concat(),
        ),
    ] {
        seed("decode", name, &[&[link][..], &frame].concat());
    }

    // chain: one flow's payloads. The port index picks from PORTS.
    const GET: &[u8] = b"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: x\r\n\r\n";
    const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nhello";
    const HELLO: &[u8] = b"\x16\x03\x01\x00\x45\x01\x00\x00\x41\x03\x03AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\x00\x00\x02\x13\x01\x01\x00\x00\x16\x00\x00\x00\x09\x00\x07\x00\x00\x04a.io\x00\x10\x00\x05\x00\x03\x02h2";
    const DNS: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x03www\x07example\x03com\x00\x00\x01\x00\x01";
    const DNS_ANSWER: &[u8] = b"\x12\x34\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00\x01a\x02io\x00\x00\x01\x00\x01\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x0a\x00\x00\x01";
    const SIP: &[u8] = b"INVITE sip:bob@example.com SIP/2.0\r\nVia: SIP/2.0/UDP h\r\nContent-Length: 40\r\n\r\nv=0\r\nc=IN IP4 10.0.0.1\r\nm=audio 4000 RTP/AVP 0\r\n";
    const STUN: &[u8] = b"\x00\x01\x00\x08\x21\x12\xa4\x42abcdefghijkl\x80\x22\x00\x04test";
    const QUIC: &[u8] = b"\xc3\x00\x00\x00\x01\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08\x00\x00\x44\x9e\x7b\x9a\xec\x34";
    chain_seed("http", &flow(false, 0, &[(false, GET), (true, OK)]));
    chain_seed("tls", &flow(false, 1, &[(false, HELLO)]));
    chain_seed("dns", &flow(true, 2, &[(false, DNS), (true, DNS_ANSWER)]));
    chain_seed(
        "ssh",
        &flow(
            false,
            3,
            &[(true, b"SSH-2.0-OpenSSH_9.6\r\n"), (false, b"SSH-2.0-x\r\n")],
        ),
    );
    chain_seed(
        "smtp",
        &flow(
            false,
            4,
            &[(true, b"220 mail.example.com ESMTP ready\r\n"), (false, b"EHLO a\r\n")],
        ),
    );
    chain_seed("sip", &flow(true, 5, &[(false, SIP)]));
    chain_seed("stun", &flow(true, 8, &[(false, STUN)]));
    chain_seed("quic", &flow(true, 1, &[(false, QUIC)]));
    chain_seed(
        "ftp",
        &flow(
            false,
            7,
            &[
                (true, b"220 FTP ready\r\n"),
                (false, b"USER a\r\n"),
                (true, b"227 Entering Passive Mode (10,0,0,2,19,137)\r\n"),
            ],
        ),
    );
    chain_seed(
        "rtp",
        &flow(
            true,
            15,
            &[(
                false,
                b"\x80\x00\x00\x01\x00\x00\x00\xa0\x12\x34\x56\x78\xff\xfe\xfd\xfc",
            )],
        ),
    );
    chain_seed(
        "bittorrent",
        &flow(
            false,
            11,
            &[(false, b"\x13BitTorrent protocol\x00\x00\x00\x00\x00\x00\x00\x00")],
        ),
    );
    for (i, (_, frame)) in connections.iter().filter(|(_, f)| f.len() > 200).take(2).enumerate() {
        chain_seed(&format!("connections-{i}"), &flow(false, 0, &[(i == 1, &frame[54..])]));
    }

    // reassembly: bounds, then (flags, step, length, payload) segments.
    let segment = |flags: u8, step: u16, payload: &[u8]| {
        let mut s = vec![flags];
        s.extend(step.to_be_bytes());
        s.push(payload.len() as u8);
        s.extend_from_slice(payload);
        s
    };
    let syn = 0x02;
    let ack = 0x40;
    let fin = 0x01;
    seed(
        "reassembly",
        "in-order",
        &[
            &[255u8, 255][..],
            &segment(syn, 0, b""),
            &segment(ack, 0, b"ab"),
            &segment(ack | 0x80, 3, b"reply"),
            &segment(ack | fin, 1, b"cd"),
        ]
        .concat(),
    );
    seed(
        "reassembly",
        "out-of-order-with-holes",
        &[
            &[4u8, 6][..],
            &segment(syn, 0, b""),
            &segment(ack, 3, b"later bytes"),
            &segment(ack, 9, b"even later"),
            &segment(ack | 0x80, 100, b"window"),
            &segment(ack, 1, b"first"),
            &segment(0x04, 20, b"reset"),
        ]
        .concat(),
    );

    // defrag: (datagram, offset low, offset high | flags, length / 8).
    let op = |which: u8, offset8: u16, more: bool, len8: u8| {
        [
            which,
            offset8 as u8,
            (offset8 >> 8) as u8 & 7 | if more { 0x80 } else { 0 },
            len8,
        ]
    };
    for which in [0u8, 1] {
        let name = if which == 0 { "ipv4" } else { "ipv6" };
        seed(
            "defrag",
            &format!("{name}-in-order"),
            &[op(which, 0, true, 4), op(which, 4, true, 4), op(which, 8, false, 2)].concat(),
        );
        seed(
            "defrag",
            &format!("{name}-reversed-overlapping"),
            &[
                op(which, 8, false, 2),
                op(which, 4, true, 4),
                op(which, 3, true, 4),
                op(which, 0, true, 4),
            ]
            .concat(),
        );
    }
    seed(
        "defrag",
        "interleaved-timeouts",
        &[
            op(0, 0, true, 4),
            op(2, 0, true, 1),
            [3, 0, 0x38, 0],
            op(0, 4, false, 1),
            op(2, 1, false, 1),
        ]
        .concat(),
    );

    // rules: the abstractor's built-in configuration and rule files.
    seed(
        "rules",
        "default",
        include_bytes!("../../abstractor/config/default.yaml"),
    );
    seed(
        "rules",
        "one-rule",
        b"http:\n  up: '^GET '\n  down: '^HTTP/1\\.[01] '\n  proto: TCP\n  if: http\n  nice: 100\n  balance: 2\n",
    );
    seed(
        "rules",
        "app-and-port",
        b"tls:\n  app: TLS\n  proto: TCP\n  if: tls\ndns:\n  proto: UDP\n  port: 53\n  if: dns\n  label: DNS.Custom\n",
    );

    // extract and repair: recordings (flags, index length, index, capture).
    for (name, format) in [("pcap", CaptureFormat::Pcap), ("pcapng", CaptureFormat::PcapNg)] {
        let whole = recording(&mix, format, true);
        seed("extract", &format!("{name}-indexed"), &whole);
        seed(
            "extract",
            &format!("{name}-no-index"),
            &recording(&mix[..12], format, false),
        );
        seed("repair", &format!("{name}-whole"), &whole);
        let mut torn = whole.clone();
        torn.truncate(torn.len() - 37);
        seed("repair", &format!("{name}-torn"), &torn);
        let mut padded = recording(&mix[..12], format, false);
        padded.extend([0; 300]);
        seed("repair", &format!("{name}-zero-padding"), &padded);
        let mut damaged = whole.clone();
        let at = damaged.len() / 2;
        damaged[at..at + 16].fill(0xa5);
        seed("repair", &format!("{name}-damaged"), &damaged);
    }
    let times = &mix[..20];
    let mut ranged = recording(times, CaptureFormat::Pcap, true);
    ranged.extend((times[5].0).to_le_bytes());
    ranged.extend((times[15].0).to_le_bytes());
    ranged.extend(0u64.to_le_bytes());
    seed("extract", "time-range", &ranged);
    // And a nanosecond pcap from the writer analyze's tests use.
    let mut written = Vec::new();
    {
        let mut w = PcapWriter::new(&mut written, 1, 65535).expect("a writer");
        for (ts, frame) in &worst {
            w.write(*ts, frame.len() as u32, frame).expect("writing");
        }
        w.finish().expect("writing");
    }
    seed("capture", "pcap-writer", &written);
    let _ = T0;

    voip_seeds();
}

/// The voip target's input: records of a selector byte (the flow, bit 3
/// from the server, bit 4 the flow ends, bits 5-7 the time step) and a
/// payload.
fn voip_input(records: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (sel, payload) in records {
        assert!(payload.len() <= 255, "a record's payload of {} bytes", payload.len());
        out.push(*sel);
        out.push(payload.len() as u8);
        out.extend_from_slice(payload);
    }
    out
}

/// A SIP message (RFC 3261) of the call `c1`, with a session description
/// (RFC 4566) of audio at `addr`:`port` when `port` is not 0.
fn sip(start: &str, cseq: &str, to_tag: bool, addr: &str, port: u16) -> Vec<u8> {
    let body = if port == 0 {
        String::new()
    } else {
        format!("v=0\r\nc=IN IP4 {addr}\r\nm=audio {port} RTP/AVP 0\r\n")
    };
    let to = if to_tag { ";tag=2" } else { "" };
    let kind = if body.is_empty() {
        ""
    } else {
        "Content-Type: application/sdp\r\n"
    };
    format!(
        "{start}\r\nCall-ID: c1\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:b@x>{to}\r\nCSeq: {cseq}\r\n{kind}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// RTP (RFC 3550 5.1): PCMU, 20 ms of samples.
fn rtp(seq: u16, ssrc: u32) -> Vec<u8> {
    let mut p = vec![0x80, 0];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&(160 * u32::from(seq)).to_be_bytes());
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.extend(std::iter::repeat_n(0xffu8, 160));
    p
}

/// An RTCP sender report (RFC 3550 6.4.1) of `ssrc` with one report
/// block on `about`.
fn rtcp_sr(ssrc: u32, about: u32, packets: u32) -> Vec<u8> {
    let mut p = vec![0x81, 200, 0, 12];
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.extend_from_slice(&0xe9a0_0000_0000_0000u64.to_be_bytes());
    p.extend_from_slice(&(160 * packets).to_be_bytes());
    p.extend_from_slice(&packets.to_be_bytes());
    p.extend_from_slice(&(172 * packets).to_be_bytes());
    p.extend_from_slice(&about.to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0]);
    p.extend_from_slice(&u32::from(packets as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0]);
    p
}

fn voip_seeds() {
    // Flows (VOIP_FLOWS): 0 SIP over UDP, 1 SIP over TCP, 2 and 3 the
    // media and its RTCP. Time steps by bits 5-7: 0 1 ms, 0x20 4 ms, 0x40
    // 16 ms, ... 0xe0 16 s.
    const SERVER: u8 = 8;
    const STEP: u8 = 0x40;
    let call = |signalling: u8| {
        let mut records = vec![
            (
                signalling,
                sip("INVITE sip:b@x SIP/2.0", "1 INVITE", false, "10.0.0.1", 40000),
            ),
            (signalling | SERVER, sip("SIP/2.0 180 Ringing", "1 INVITE", true, "", 0)),
            (
                signalling | SERVER,
                sip("SIP/2.0 200 OK", "1 INVITE", true, "10.0.0.2", 40002),
            ),
            (signalling, sip("ACK sip:b@x SIP/2.0", "1 ACK", true, "", 0)),
        ];
        for seq in 1..=20u16 {
            records.push((2 | STEP, rtp(seq, 0xa)));
            if seq != 7 {
                records.push((2 | SERVER, rtp(seq, 0xb)));
            }
        }
        records.push((3, rtcp_sr(0xa, 0xb, 20)));
        records.push((3 | SERVER, rtcp_sr(0xb, 0xa, 19)));
        records.push((signalling, sip("BYE sip:b@x SIP/2.0", "2 BYE", true, "", 0)));
        records.push((signalling | SERVER | 0x10, sip("SIP/2.0 200 OK", "2 BYE", true, "", 0)));
        records
    };
    seed("voip", "call-udp", &voip_input(&call(0)));
    // Over TCP, the INVITE in two segments.
    let mut tcp = call(1);
    let invite = tcp.remove(0).1;
    tcp.insert(0, (1, invite[40..].to_vec()));
    tcp.insert(0, (1, invite[..40].to_vec()));
    seed("voip", "call-tcp", &voip_input(&tcp));
    // Media no session described, ended and begun again.
    let mut orphan: Vec<(u8, Vec<u8>)> = (1..=10u16).map(|seq| (4 | STEP, rtp(seq, 0xc))).collect();
    orphan.push((4 | 0x10, rtp(11, 0xc)));
    orphan.extend((12..=14u16).map(|seq| (4 | 0xe0, rtp(seq, 0xc))));
    seed("voip", "orphan-rtp", &voip_input(&orphan));
}
