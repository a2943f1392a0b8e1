//! The classifier chain end to end: real captures from nDPI's regression
//! suite through `sluice analyze`, checking the stage that decided each
//! flow and the metadata it found. Skipped, with a message, when the
//! captures are absent.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::{analyze, flow_records, sluice};

fn capture(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("NDPI_DEV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ndpi-dev"));
    let path = dir.join("pcap").join(name);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("skipping: {} not found (set NDPI_DEV_DIR)", path.display());
        None
    }
}

/// The records of one capture, analysed with `extra` arguments.
fn records(path: &Path, extra: &[&str]) -> Vec<Value> {
    let out = tempfile::tempdir().unwrap();
    analyze(path, out.path(), extra);
    flow_records(out.path())
}

fn by_port(records: &[Value], port: u64) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["dst_port"] == port || r["src_port"] == port)
        .collect()
}

#[test]
fn http_requests_and_responses_fill_the_http_fields() {
    let Some(path) = capture("http.pcapng") else { return };
    let records = records(&path, &[]);
    let google = records
        .iter()
        .find(|r| r["host"] == "google.com")
        .expect("the request to google.com");
    assert_eq!(google["app"], "HTTP.Google");
    assert_eq!(google["classifier"], "dissector");
    assert_eq!(google["http_method"], "GET");
    assert!(google["http_uri"].as_str().unwrap().starts_with('/'));
    assert!(google["http_user_agent"].is_string());
    assert!(google["http_status"].as_u64().is_some_and(|s| (100..600).contains(&s)));
}

#[test]
fn tls_and_quic_client_hellos_give_names_and_fingerprints() {
    if let Some(path) = capture("dns_doh.pcap") {
        let records = records(&path, &[]);
        let doh = records
            .iter()
            .find(|r| r["host"] == "mozilla.cloudflare-dns.com")
            .expect("the DoH flow");
        assert_eq!(doh["master"], "TLS");
        assert_eq!(doh["ja3"].as_str().map(str::len), Some(32));
        assert!(doh["ja4"].as_str().is_some_and(|j| j.starts_with('t')));
        assert!(doh["tls_version"].as_str().is_some_and(|v| v.starts_with("TLSv1.")));
    }
    if let Some(path) = capture("quic.pcap") {
        let records = records(&path, &[]);
        let youtube = records
            .iter()
            .find(|r| r["host"] == "www.youtube.com")
            .expect("the QUIC flow to www.youtube.com");
        assert_eq!(youtube["app"], "QUIC.YouTube");
        // Google's own QUIC carries no TLS ClientHello to fingerprint.
        assert!(youtube["quic_version"].as_str().is_some_and(|v| v.starts_with('Q')));
    }
    if let Some(path) = capture("quic-28.pcap") {
        let records = records(&path, &[]);
        let ietf = records
            .iter()
            .find(|r| r["host"] == "www.wireshark.org")
            .expect("the IETF QUIC flow to www.wireshark.org");
        assert_eq!(ietf["master"], "QUIC");
        assert_eq!(ietf["quic_version"], "draft-28");
        assert!(ietf["ja4"].as_str().is_some_and(|j| j.starts_with("q13d")));
        assert!(
            ietf["tls_alpn"]
                .as_str()
                .is_some_and(|a| a.split(',').any(|p| p == "h3-28"))
        );
    }
}

#[test]
fn ssh_banners_and_sip_media_ports() {
    if let Some(path) = capture("ssh.pcap") {
        let records = records(&path, &[]);
        // The second session runs on port 8000: the payload decides it, not the port.
        let odd_port = by_port(&records, 8000);
        assert_eq!(odd_port[0]["master"], "SSH");
        assert!(
            odd_port[0]["server_banner"]
                .as_str()
                .is_some_and(|b| b.starts_with("SSH-"))
        );
    }
    if let Some(path) = capture("sip.pcap") {
        let records = records(&path, &[]);
        let rtp = by_port(&records, 30000);
        assert_eq!(rtp[0]["master"], "RTP", "{}", rtp[0]);
        assert_eq!(rtp[0]["classifier"], "dynamic-port", "the SDP of the call announced it");
    }
}

#[test]
fn user_rules_decide_before_the_dissectors() {
    let Some(path) = capture("ssh.pcap") else { return };
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(
        &rules,
        "openssh:\n  up: '^SSH-2\\.0-'\n  down: '^SSH-2\\.0-OpenSSH_'\n  proto: TCP\n  label: SSH.OpenSSH\n  nice: 10\n",
    )
    .unwrap();
    let records = records(&path, &["--rules", rules.to_str().unwrap()]);
    let ssh = by_port(&records, 22);
    assert_eq!(ssh[0]["app"], "SSH.OpenSSH");
    assert_eq!(ssh[0]["classifier"], "rule");

    std::fs::write(&rules, "broken:\n  up: '^(SSH'\n").unwrap();
    let out = tempfile::tempdir().unwrap();
    let output = sluice(&[
        "analyze".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        out.path().as_os_str(),
        "--rules".as_ref(),
        rules.as_os_str(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("{}: rule `broken`, field `up`", rules.display())),
        "{stderr}"
    );
}

#[test]
fn classification_can_be_narrowed_or_switched_off() {
    let Some(path) = capture("ssh.pcap") else { return };
    let ports = records(&path, &["--classify", "ports"]);
    assert_eq!(by_port(&ports, 22)[0]["classifier"], "port");
    assert_eq!(by_port(&ports, 8000)[0]["master"], "HTTP", "port 8000 guesses HTTP");
    let off = records(&path, &["--classify", "off"]);
    assert!(off.iter().all(|r| r["app"] == "Unknown" && r["classifier"] == "none"));
}

/// One side of a TCP conversation for a handmade capture.
struct TcpSide {
    ip: [u8; 4],
    port: u16,
    seq: u32,
}

fn segment(from: &mut TcpSide, to: &TcpSide, flags: &str, payload: &[u8]) -> Vec<u8> {
    let mut builder = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(from.ip, to.ip, 64)
        .tcp(from.port, to.port, from.seq, 65535);
    if flags.contains('S') {
        builder = builder.syn();
    }
    if flags.contains('A') {
        builder = builder.ack(to.seq);
    }
    if flags.contains('P') {
        builder = builder.psh();
    }
    let mut frame = Vec::new();
    builder.write(&mut frame, payload).unwrap();
    from.seq = from
        .seq
        .wrapping_add(payload.len() as u32 + u32::from(flags.contains('S')));
    frame
}

/// Writes Ethernet frames 1 ms apart.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut writer = sluice_store::PcapWriter::create(path, 1, 65535).unwrap();
    for (i, frame) in frames.iter().enumerate() {
        writer
            .write(
                1_700_000_000_000_000_000 + i as u64 * 1_000_000,
                frame.len() as u32,
                frame,
            )
            .unwrap();
    }
    writer.finish().unwrap();
}

/// A passive FTP session: the 227 reply announces the data connection's
/// port, which is nowhere near 20 or 21, and the data flow that follows
/// must be labelled from the announcement.
#[test]
fn an_ftp_passive_reply_labels_the_data_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ftp-passive.pcap");
    let mut client = TcpSide {
        ip: [10, 1, 0, 1],
        port: 40000,
        seq: 1000,
    };
    let mut server = TcpSide {
        ip: [10, 1, 0, 2],
        port: 21,
        seq: 5000,
    };
    let mut frames = vec![
        segment(&mut client, &server, "S", b""),
        segment(&mut server, &client, "SA", b""),
        segment(&mut client, &server, "A", b""),
    ];
    for (from_server, line) in [
        (true, &b"220 ProFTPD Server ready.\r\n"[..]),
        (false, b"USER anonymous\r\n"),
        (true, b"331 Anonymous login ok, send your email as password.\r\n"),
        (false, b"PASS guest@example.com\r\n"),
        (true, b"230 Anonymous access granted.\r\n"),
        (false, b"PASV\r\n"),
        (true, b"227 Entering Passive Mode (10,1,0,2,195,80).\r\n"),
        (false, b"RETR file.bin\r\n"),
    ] {
        let frame = if from_server {
            segment(&mut server, &client, "AP", line)
        } else {
            segment(&mut client, &server, "AP", line)
        };
        frames.push(frame);
    }
    let mut data_client = TcpSide {
        ip: [10, 1, 0, 1],
        port: 40001,
        seq: 77,
    };
    let mut data_server = TcpSide {
        ip: [10, 1, 0, 2],
        port: 195 * 256 + 80,
        seq: 99,
    };
    frames.push(segment(&mut data_client, &data_server, "S", b""));
    frames.push(segment(&mut data_server, &data_client, "SA", b""));
    frames.push(segment(&mut data_client, &data_server, "A", b""));
    frames.push(segment(&mut data_server, &data_client, "AP", &[0x5a; 700]));
    write_pcap(&path, &frames);

    for workers in ["1", "2"] {
        let records = records(&path, &["--workers", workers]);
        let control = by_port(&records, 21);
        assert_eq!(control[0]["master"], "FTP_CONTROL");
        assert_eq!(control[0]["classifier"], "dissector");
        let commands = control[0]["commands"].as_array().unwrap();
        assert!(commands.iter().any(|c| c == "USER anonymous"), "{commands:?}");
        assert!(
            commands.iter().all(|c| !c.as_str().unwrap().contains("guest@")),
            "passwords never reach the record: {commands:?}"
        );
        let data = by_port(&records, 50000);
        assert_eq!(data[0]["master"], "FTP_DATA", "{}", data[0]);
        assert_eq!(data[0]["classifier"], "dynamic-port");
    }
}

fn udp(from: ([u8; 4], u16), to: ([u8; 4], u16), payload: &[u8]) -> Vec<u8> {
    let mut frame = Vec::new();
    etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(from.0, to.0, 64)
        .udp(from.1, to.1)
        .write(&mut frame, payload)
        .unwrap();
    frame
}

/// A DNS answer for www.youtube.com names the address of a later flow that
/// shows no name itself (its payload was never seen): the flow's label
/// gets the service.
#[test]
fn a_dns_answer_names_the_service_of_a_later_flow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dns-then-tls.pcap");
    let client = [10, 2, 0, 1];
    let resolver = [10, 2, 0, 53];
    let server = [10, 2, 0, 80];
    let question = b"\x03www\x07youtube\x03com\x00\x00\x01\x00\x01";
    let query = [&b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"[..], question].concat();
    let answer = [
        &b"\x12\x34\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00"[..],
        question,
        b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x01\x2c\x00\x04",
        &server,
    ]
    .concat();
    let mut tls_client = TcpSide {
        ip: client,
        port: 40100,
        seq: 1,
    };
    let mut tls_server = TcpSide {
        ip: server,
        port: 443,
        seq: 7,
    };
    let mut other_client = TcpSide {
        ip: client,
        port: 40101,
        seq: 1,
    };
    let mut other_server = TcpSide {
        ip: [10, 2, 0, 81],
        port: 443,
        seq: 7,
    };
    let frames = vec![
        udp((client, 50000), (resolver, 53), &query),
        udp((resolver, 53), (client, 50000), &answer),
        segment(&mut tls_client, &tls_server, "S", b""),
        segment(&mut tls_server, &tls_client, "SA", b""),
        segment(&mut tls_client, &tls_server, "A", b""),
        segment(&mut other_client, &other_server, "S", b""),
        segment(&mut other_server, &other_client, "SA", b""),
    ];
    write_pcap(&path, &frames);
    for workers in ["1", "2"] {
        let records = records(&path, &["--workers", workers]);
        let dns = by_port(&records, 53);
        assert_eq!(dns[0]["app"], "DNS.YouTube");
        assert_eq!(dns[0]["dns_answers"][0], "10.2.0.80");
        let flows = by_port(&records, 443);
        let named = flows.iter().find(|r| r["dst_ip"] == "10.2.0.80").unwrap();
        assert_eq!(named["app"], "TLS.YouTube", "{named}");
        assert_eq!(named["classifier"], "port");
        let unnamed = flows.iter().find(|r| r["dst_ip"] == "10.2.0.81").unwrap();
        assert_eq!(unnamed["app"], "TLS", "no answer named this address");
    }
}

/// A user's services file names the service of flows that show none: by
/// the server's address range (a flow whose payload was never seen, which
/// the range names better than its port) and by host name (an HTTP Host),
/// on top of the built-in lists, which still name Telegram's addresses. A
/// malformed file stops the run with its line.
#[test]
fn a_users_services_file_names_flows_by_address_and_host() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("services.pcap");
    let client = [10, 3, 0, 1];
    let mut frames = Vec::new();
    for (port, server, payload) in [
        (40200, [10, 9, 1, 7], &b""[..]),
        (40201, [149, 154, 167, 51], b""),
        (
            40202,
            [10, 3, 0, 80],
            b"GET / HTTP/1.1\r\nHost: wiki.intranet.example\r\n\r\n",
        ),
    ] {
        let mut c = TcpSide {
            ip: client,
            port,
            seq: 1,
        };
        let mut s = TcpSide {
            ip: server,
            port: if payload.is_empty() { 443 } else { 80 },
            seq: 7,
        };
        frames.push(segment(&mut c, &s, "S", b""));
        frames.push(segment(&mut s, &c, "SA", b""));
        frames.push(segment(&mut c, &s, "A", b""));
        if !payload.is_empty() {
            frames.push(segment(&mut c, &s, "AP", payload));
        }
    }
    write_pcap(&path, &frames);
    let list = dir.path().join("mine.csv");
    std::fs::write(&list, "# our own\n10.9.0.0/16,Lab\nintranet.example,Intranet\n").unwrap();
    let app = |records: &[Value], port: u64| by_port(records, port)[0]["app"].clone();
    let plain = records(&path, &[]);
    assert_eq!(app(&plain, 40200), "TLS");
    assert_eq!(app(&plain, 40201), "Telegram");
    assert_eq!(app(&plain, 40202), "HTTP");
    let ours = records(&path, &["--services", list.to_str().unwrap()]);
    assert_eq!(app(&ours, 40200), "Lab");
    assert_eq!(app(&ours, 40201), "Telegram");
    assert_eq!(app(&ours, 40202), "HTTP.Intranet");

    std::fs::write(&list, "10.9.0.0/16,Lab\n10.9.0.0/40,Lab\n").unwrap();
    let out = dir.path().join("out");
    let run = sluice(&[
        "analyze",
        path.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--services",
        list.to_str().unwrap(),
    ]);
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("mine.csv:2:") && stderr.contains("prefix length"),
        "{stderr}"
    );
}

/// An RTSP SETUP and its reply announce the stream's RTP and RTCP ports:
/// the UDP flows that follow are labelled from the announcement.
#[test]
fn an_rtsp_setup_labels_the_media_flows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rtsp-setup.pcap");
    let mut client = TcpSide {
        ip: [10, 3, 0, 1],
        port: 40200,
        seq: 1,
    };
    let mut server = TcpSide {
        ip: [10, 3, 0, 2],
        port: 554,
        seq: 9,
    };
    let setup = b"SETUP rtsp://10.3.0.2/stream/track1 RTSP/1.0\r\nCSeq: 2\r\n\
        Transport: RTP/AVP;unicast;client_port=5000-5001\r\n\r\n";
    let reply = b"RTSP/1.0 200 OK\r\nCSeq: 2\r\nSession: 4711\r\n\
        Transport: RTP/AVP;unicast;client_port=5000-5001;server_port=6970-6971\r\n\r\n";
    let mut frames = vec![
        segment(&mut client, &server, "S", b""),
        segment(&mut server, &client, "SA", b""),
        segment(&mut client, &server, "A", b""),
        segment(
            &mut client,
            &server,
            "AP",
            b"OPTIONS rtsp://10.3.0.2/stream RTSP/1.0\r\nCSeq: 1\r\n\r\n",
        ),
        segment(
            &mut server,
            &client,
            "AP",
            b"RTSP/1.0 200 OK\r\nCSeq: 1\r\nPublic: SETUP, PLAY\r\n\r\n",
        ),
        segment(&mut client, &server, "AP", setup),
        segment(&mut server, &client, "AP", reply),
    ];
    // Media that no dissector would know by its bytes.
    for _ in 0..3 {
        frames.push(udp(([10, 3, 0, 2], 6970), ([10, 3, 0, 1], 5000), &[0xa5; 172]));
    }
    frames.push(udp(([10, 3, 0, 1], 5001), ([10, 3, 0, 2], 6971), &[0x5a; 52]));
    write_pcap(&path, &frames);
    for workers in ["1", "2"] {
        let records = records(&path, &["--workers", workers]);
        let control = by_port(&records, 554);
        assert_eq!(control[0]["master"], "RTSP");
        let rtp = by_port(&records, 6970);
        assert_eq!(rtp[0]["master"], "RTP", "{}", rtp[0]);
        assert_eq!(rtp[0]["classifier"], "dynamic-port");
        let rtcp = by_port(&records, 6971);
        assert_eq!(rtcp[0]["master"], "RTCP", "{}", rtcp[0]);
    }
}

/// The generated mix opens its flows with real first messages: the chain
/// must read them (TLS SNI, HTTP hosts, DNS names, SSH banners), not fall
/// back on ports.
#[test]
fn the_generated_mix_is_classified_from_its_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mix.pcap");
    let args: Vec<&std::ffi::OsStr> = ["gen", "--profile", "mix", "--packets", "20000", "--seed", "3", "-w"]
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([path.as_os_str()])
        .collect();
    assert!(sluice(&args).status.success());
    let records = records(&path, &[]);
    let by_dissector = records.iter().filter(|r| r["classifier"] == "dissector").count();
    assert!(
        by_dissector * 2 > records.len(),
        "{by_dissector} of {} flows",
        records.len()
    );
    let has = |master: &str, field: &str| {
        records
            .iter()
            .any(|r| r["master"] == master && r[field].is_string() && r["app"] != master)
    };
    assert!(has("TLS", "ja4"), "a TLS flow with its service and fingerprint");
    assert!(has("HTTP", "http_user_agent"), "an HTTP flow with its service");
    assert!(has("DNS", "host"), "a DNS flow with its service");
    assert!(
        records
            .iter()
            .any(|r| r["master"] == "SSH" && r["server_banner"].is_string())
    );
}
