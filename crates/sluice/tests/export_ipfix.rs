//! IPFIX export (`--ipfix`) read by real collectors started here: nfdump's
//! `nfcapd` (what `nfdump -o json` then prints of each flow), GoFlow2 (its
//! JSON), tshark's IPFIX dissector reading an IPFIX file, and a TCP
//! collector of the test's own that checks message framing and sequence
//! numbers as RFC 7011 defines them. Each compares with the JSON records
//! of the same run. A tool that is not installed is skipped with a message
//! (`.ci/run` installs them).

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use common::{flow_records, shared_mix, sluice};
use serde_json::Value;
use serde_json::json;
use sluice_export::ipfix::{ELEMENTS, Element, Encoding, VARIABLE, Variant, ntp_to_unix_ns};
use sluice_export::ipfix_lines::{LineElement, LineEncoding, LineKind, TEMPLATE_CALLS_V4, TEMPLATE_CALLS_V6};

/// A generated mix of some 2,600 flows, IPv4 and IPv6, made once.
static MIX: LazyLock<PathBuf> = LazyLock::new(|| shared_mix("ipfix-mix", 20_000, 3));

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A larger mix, some 20,000 flows: more IPFIX than loopback's socket
/// buffers hold.
static BIG_MIX: LazyLock<PathBuf> = LazyLock::new(|| shared_mix("ipfix-big-mix", 150_000, 4));

/// `sluice analyze MIX -q -o OUT EXTRA...`, which must succeed; its summary.
fn analyze(out: &Path, extra: &[&str]) -> Value {
    analyze_file(&MIX, out, extra)
}

fn analyze_file(input: &Path, out: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["analyze", s(input), "-q", "-o", s(out)];
    args.extend_from_slice(extra);
    let output = sluice(&args);
    assert!(
        output.status.success(),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

/// A program on the PATH or where `go install` puts it; `None` with a
/// message when absent.
fn tool(name: &str) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    let go_bin = std::env::var_os("HOME").map(|h| PathBuf::from(h).join("go/bin").join(name));
    match on_path.or(go_bin.filter(|p| p.is_file())) {
        Some(p) => Some(p),
        None => {
            eprintln!("skipping: {name} is not installed (.ci/run installs it)");
            None
        }
    }
}

/// A UDP port free on loopback now.
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child killed when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops a collector with SIGTERM, so that it writes out what it holds.
fn terminate(child: &mut Running) {
    let _ = Command::new("kill").arg(child.0.id().to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.0.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the collector did not stop");
}

/// Waits until the collector listens on the UDP port; when it exits
/// first, or never listens, fails with what it printed (`log`).
fn wait_for_udp(collector: &mut Running, port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while UdpSocket::bind(("127.0.0.1", port)).is_ok() {
        let printed = || std::fs::read_to_string(log).unwrap_or_default();
        if let Some(status) = collector.0.try_wait().unwrap() {
            panic!(
                "the collector exited ({status}) before listening on udp port {port}:\n{}",
                printed()
            );
        }
        assert!(
            Instant::now() < deadline,
            "nothing listens on udp port {port}; the collector printed:\n{}",
            printed()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wireshark decodes templates of at most 60 fields unless told more.
const TSHARK_PREFS: [&str; 2] = ["-o", "cflow.max_template_fields:128"];

/// tshark's full dissection (`-V`) of an IPFIX file, which must read
/// without an Expert Info warning.
fn tshark_verbose(tshark: &Path, file: &Path) -> String {
    let verbose = Command::new(tshark)
        .args(TSHARK_PREFS)
        .arg("-r")
        .arg(file)
        .arg("-V")
        .output()
        .unwrap();
    assert!(verbose.status.success(), "tshark -r {}", file.display());
    let text = String::from_utf8_lossy(&verbose.stdout).into_owned();
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("Expert Info")).take(5).collect();
    assert!(warnings.is_empty(), "{warnings:?}");
    text
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A record's endpoints as collectors print them.
fn endpoints(r: &Value) -> (String, u64, String, u64) {
    (
        r["src_ip"].as_str().unwrap().to_string(),
        u(&r["src_port"]),
        r["dst_ip"].as_str().unwrap().to_string(),
        u(&r["dst_port"]),
    )
}

/// The TCP flags a direction's counts say were seen, as `tcpControlBits`.
fn flags(r: &Value, side: &str) -> u64 {
    ["fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr"]
        .iter()
        .enumerate()
        .filter(|(_, f)| u(&r[format!("{side}_{f}")]) > 0)
        .map(|(i, _)| 1u64 << i)
        .sum()
}

/// Milliseconds since the epoch as nfdump 1.7 prints them in JSON (UTC).
fn nfdump_time(ms: u64) -> String {
    sluice_units::calendar::utc_millis(ms * 1_000_000)
}

/// nfcapd (nfdump 1.7.1) stores every flow with both directions' packets
/// and bytes (from the RFC 5103 reverse elements), the client's TCP flags
/// and the times to the millisecond; its own count of sequence errors
/// (lost messages) is 0, and so are ours.
#[test]
fn nfcapd_stores_the_flows_of_the_records() {
    let (Some(nfcapd), Some(nfdump)) = (tool("nfcapd"), tool("nfdump")) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("nfcapd");
    std::fs::create_dir(&store).unwrap();
    let port = free_udp_port();
    let log_path = dir.path().join("nfcapd.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // A receive buffer that holds a burst of the exporter's messages.
    let mut collector = Running(
        Command::new(nfcapd)
            .args([
                "-B",
                "4194304",
                "-b",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "3600",
                "-w",
            ])
            .arg(&store)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for_udp(&mut collector, port, &log_path);
    let out = dir.path().join("out");
    let destination = format!("udp://127.0.0.1:{port}");
    // Loopback's path MTU: messages of up to 65,507 bytes, which nfcapd
    // takes whole.
    let summary = analyze(&out, &["--ipfix", &destination, "--ipfix-rate", "500pps"]);
    let export = &summary["exports"][0];
    let records = flow_records(&out);
    assert_eq!(u(&export["records"]), records.len() as u64, "{export}");
    assert_eq!(u(&export["failed"]) + u(&export["dropped_queue_full"]), 0, "{export}");
    assert_eq!(u(&export["max_message_bytes"]), 65_507, "{export}");
    assert!(u(&export["bytes"]) > u(&export["messages"]) * 8_000, "{export}");
    std::thread::sleep(Duration::from_millis(300));
    terminate(&mut collector);
    let log = std::fs::read_to_string(dir.path().join("nfcapd.log")).unwrap();
    assert!(log.contains("Sequence Errors: 0"), "{log}");

    let files: Vec<PathBuf> = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("nfcapd.2"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let printed = Command::new(nfdump)
        .env("TZ", "UTC")
        .args(["-o", "json", "-r"])
        .arg(&files[0])
        .output()
        .unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let stored: Vec<Value> = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(stored.len(), records.len());

    let by_endpoints: BTreeMap<_, &Value> = records.iter().map(|r| (endpoints(r), r)).collect();
    assert_eq!(by_endpoints.len(), records.len(), "endpoints name each flow once");
    let mut v6 = 0;
    for f in &stored {
        let src = f.get("src4_addr").or(f.get("src6_addr")).unwrap();
        let dst = f.get("dst4_addr").or(f.get("dst6_addr")).unwrap();
        v6 += usize::from(f.get("src6_addr").is_some());
        // ICMP flows have no ports (0 in the records): nfdump prints the
        // type and code instead, and no TCP flags.
        let port = |name: &str| f.get(name).map_or(0, u);
        let key = (
            src.as_str().unwrap().to_string(),
            port("src_port"),
            dst.as_str().unwrap().to_string(),
            port("dst_port"),
        );
        let r = by_endpoints
            .get(&key)
            .unwrap_or_else(|| panic!("nfdump has a flow Sluice has not: {f}"));
        let what = format!("{f}\n{r}");
        assert_eq!(u(&f["in_packets"]), u(&r["c2s_packets"]), "{what}");
        assert_eq!(u(&f["in_bytes"]), u(&r["c2s_bytes"]), "{what}");
        assert_eq!(u(&f["out_packets"]), u(&r["s2c_packets"]), "{what}");
        assert_eq!(u(&f["out_bytes"]), u(&r["s2c_bytes"]), "{what}");
        assert_eq!(f["first"], nfdump_time(u(&r["first_ts_ns"]) / 1_000_000), "{what}");
        assert_eq!(f["last"], nfdump_time(u(&r["last_ts_ns"]) / 1_000_000), "{what}");
        let l4 = match r["l4"].as_str().unwrap() {
            "TCP" => 6,
            "UDP" => 17,
            "ICMP" => 1,
            "ICMPV6" => 58,
            other => other.parse().unwrap_or(0),
        };
        assert_eq!(u(&f["proto"]), l4, "{what}");
        let Some(nf_flags) = f["tcp_flags"].as_str() else {
            assert!(f.get("icmp_type").is_some(), "{what}");
            continue;
        };
        // nfdump spells the flags as `CEUAPRSF`, a dot for each not set.
        let bits: u64 = nf_flags
            .chars()
            .rev()
            .enumerate()
            .filter(|(_, c)| *c != '.')
            .map(|(i, _)| 1 << i)
            .sum();
        assert_eq!(bits, flags(r, "c2s"), "{what}");
    }
    assert!(v6 > 0, "the mix has IPv6 flows, which use the second template");
}

/// GoFlow2 decodes the same flows: endpoints, the client's packets,
/// bytes and TCP flags (it has no field for the reverse ones, and keeps
/// the last `tcpControlBits`, the forward one) and both times to the
/// nanosecond, from `flowStartNanoseconds` and `flowEndNanoseconds`.
#[test]
fn goflow2_decodes_the_flows_of_the_records() {
    let Some(goflow2) = tool("goflow2") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let metrics_port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let decoded = dir.path().join("goflow2.json");
    let log_path = dir.path().join("goflow2.log");
    let log = std::fs::File::create(&log_path).unwrap();
    // One worker: with several, a data message may be decoded before the
    // template message another worker holds.
    let mut collector = Running(
        Command::new(goflow2)
            .arg("-listen")
            .arg(format!("netflow://127.0.0.1:{port}?workers=1"))
            .args(["-format", "json", "-addr"])
            .arg(format!("127.0.0.1:{metrics_port}"))
            .arg("-transport.file")
            .arg(&decoded)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_for_udp(&mut collector, port, &log_path);
    let out = dir.path().join("out");
    let destination = format!("udp://127.0.0.1:{port}");
    // GoFlow2 reads 9,000 bytes of a datagram at most: longer messages
    // would not decode (docs/ipfix.md). A message of 9,000 bytes holds
    // some 20 of the mix's records, and GoFlow2's one worker writes a few
    // thousand flows a second (docs/benchmarks.md, How fast collectors
    // keep up): paced faster, its socket buffer fills on a busy machine.
    let summary = analyze(
        &out,
        &["--ipfix", &destination, "--ipfix-rate", "100pps", "--ipfix-mtu", "9000"],
    );
    let export = &summary["exports"][0];
    assert_eq!(u(&export["max_message_bytes"]), 9000 - 28, "{export}");
    assert_eq!(u(&export["failed"]) + u(&export["dropped_queue_full"]), 0, "{export}");
    let records = flow_records(&out);
    // It writes each flow as it decodes it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        lines = std::fs::read_to_string(&decoded)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        if lines.len() >= records.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    terminate(&mut collector);
    // Paced to a hundred messages a second, no record is lost, and
    // each decodes to its record exactly.
    assert_eq!(
        lines.len(),
        records.len(),
        "GoFlow2 decoded {} flows of the {} sent",
        lines.len(),
        records.len()
    );
    let by_endpoints: BTreeMap<_, &Value> = records.iter().map(|r| (endpoints(r), r)).collect();
    for line in &lines {
        let g: Value = serde_json::from_str(line).unwrap();
        let key = (
            g["src_addr"].as_str().unwrap().to_string(),
            u(&g["src_port"]),
            g["dst_addr"].as_str().unwrap().to_string(),
            u(&g["dst_port"]),
        );
        let r = by_endpoints
            .get(&key)
            .unwrap_or_else(|| panic!("GoFlow2 has a flow Sluice has not: {g}"));
        let what = format!("{g}\n{r}");
        assert_eq!(g["type"], "IPFIX");
        assert_eq!(u(&g["packets"]), u(&r["c2s_packets"]), "{what}");
        assert_eq!(u(&g["bytes"]), u(&r["c2s_bytes"]), "{what}");
        assert_eq!(u(&g["time_flow_start_ns"]), u(&r["first_ts_ns"]), "{what}");
        assert_eq!(u(&g["time_flow_end_ns"]), u(&r["last_ts_ns"]), "{what}");
        assert_eq!(u(&g["tcp_flags"]), flags(r, "c2s"), "{what}");
    }
}

/// tshark reads an IPFIX file (`file:PATH`) with no warning of any kind,
/// and finds every flow: one source port per record, and the forward and
/// reverse octets and packets adding up to the records' totals. Of the
/// generated mix, and of nDPI's captures, whose records use every flow
/// template, full and shortened.
#[test]
fn tshark_reads_the_ipfix_file_without_a_warning() {
    let Some(tshark) = tool("tshark") else {
        return;
    };
    tshark_reads(&tshark, std::slice::from_ref(&*MIX));
    if let Some(captures) = ndpi_captures() {
        tshark_reads(&tshark, &captures);
    }
}

/// nDPI's reference captures but the fuzzers' (cut short, which fails a
/// run), in name order.
fn ndpi_captures() -> Option<Vec<PathBuf>> {
    let mut captures: Vec<PathBuf> = std::fs::read_dir(common::ndpi_pcaps()?)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.file_name().unwrap().to_str().unwrap().starts_with("fuzz"))
        .collect();
    captures.sort();
    Some(captures)
}

/// `sluice analyze INPUTS -q -o OUT EXTRA...`, which must succeed.
fn analyze_inputs(inputs: &[PathBuf], out: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["analyze", "-q", "-o", s(out)];
    args.extend(inputs.iter().map(|p| s(p)));
    args.extend_from_slice(extra);
    let output = sluice(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

fn tshark_reads(tshark: &Path, inputs: &[PathBuf]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let file = dir.path().join("flows.ipfix");
    let destination = format!("file:{}", file.display());
    let summary = analyze_inputs(inputs, &out, &["--ipfix", &destination]);
    let records = flow_records(&out);
    assert_eq!(u(&summary["exports"][0]["records"]), records.len() as u64);
    let text = tshark_verbose(tshark, &file);
    assert!(text.contains("applicationName") || text.contains("APPLICATION_NAME"));

    let fields = Command::new(tshark)
        .args(TSHARK_PREFS)
        .arg("-r")
        .arg(&file)
        .args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"])
        .args(["-e", "cflow.srcport", "-e", "cflow.octets", "-e", "cflow.packets"])
        .output()
        .unwrap();
    let text = String::from_utf8(fields.stdout).unwrap();
    let (mut ports, mut octets, mut packets) = (0u64, 0u64, 0u64);
    for line in text.lines() {
        let columns: Vec<&str> = line.split('\t').collect();
        let numbers = |c: &str| -> Vec<u64> {
            c.split(',')
                .filter(|n| !n.is_empty())
                .map(|n| n.parse().unwrap())
                .collect()
        };
        ports += numbers(columns[0]).len() as u64;
        octets += numbers(columns[1]).iter().sum::<u64>();
        packets += numbers(columns[2]).iter().sum::<u64>();
    }
    let total = |f: &str| records.iter().map(|r| u(&r[f])).sum::<u64>();
    assert_eq!(ports, records.len() as u64);
    assert_eq!(octets, total("bytes"));
    assert_eq!(packets, total("packets"));
}

/// One IPFIX message as RFC 7011 frames it: its header's fields and sets.
struct Message {
    sequence: u32,
    domain: u32,
    /// Set id and the set's bytes after its header.
    sets: Vec<(u16, Vec<u8>)>,
}

/// Splits a TCP stream into messages, checking each length field.
fn messages(mut stream: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    while !stream.is_empty() {
        assert!(stream.len() >= 16, "a message header cut short");
        assert_eq!(u16::from_be_bytes([stream[0], stream[1]]), 10, "version 10");
        let len = u16::from_be_bytes([stream[2], stream[3]]) as usize;
        let (message, rest) = stream.split_at(len);
        let mut sets = Vec::new();
        let mut body = &message[16..];
        while !body.is_empty() {
            let id = u16::from_be_bytes([body[0], body[1]]);
            let set_len = u16::from_be_bytes([body[2], body[3]]) as usize;
            assert!(set_len >= 4 && set_len <= body.len(), "a set overruns its message");
            sets.push((id, body[4..set_len].to_vec()));
            body = &body[set_len..];
        }
        out.push(Message {
            sequence: u32::from_be_bytes(message[8..12].try_into().unwrap()),
            domain: u32::from_be_bytes(message[12..16].try_into().unwrap()),
            sets,
        });
        stream = rest;
    }
    out
}

/// A template's fields: enterprise number (0 for IANA's), element id and
/// length (65535 for variable-length ones).
type Fields = Vec<(u32, u16, u16)>;

/// The templates of a template set (id 2), by template id.
fn read_templates(set: &[u8], templates: &mut BTreeMap<u16, Fields>) {
    let mut at = 0;
    while at < set.len() {
        let template = u16::from_be_bytes([set[at], set[at + 1]]);
        let count = u16::from_be_bytes([set[at + 2], set[at + 3]]);
        at += 4;
        let mut fields = Vec::new();
        for _ in 0..count {
            let id = u16::from_be_bytes([set[at], set[at + 1]]);
            let len = u16::from_be_bytes([set[at + 2], set[at + 3]]);
            at += 4;
            let enterprise = if id & 0x8000 != 0 {
                at += 4;
                u32::from_be_bytes(set[at - 4..at].try_into().unwrap())
            } else {
                0
            };
            fields.push((enterprise, id & 0x7fff, len));
        }
        templates.insert(template, fields);
    }
}

/// The lengths of a template's fields, as [`data_records`] takes them.
fn lengths(fields: &Fields) -> Vec<u16> {
    fields.iter().map(|f| f.2).collect()
}

/// The data records of a set, given each template's field lengths
/// (65535 for variable-length ones).
fn data_records(set: &[u8], lengths: &[u16]) -> usize {
    let mut at = 0;
    let mut n = 0;
    while at < set.len() {
        for &len in lengths {
            at += match len {
                65535 => match set[at] {
                    255 => 3 + u16::from_be_bytes([set[at + 1], set[at + 2]]) as usize,
                    short => 1 + short as usize,
                },
                fixed => fixed as usize,
            };
        }
        n += 1;
    }
    assert_eq!(at, set.len(), "records fill their set exactly");
    n
}

/// Over TCP, the templates come first; every data set parses with its
/// template to whole records; each message's sequence number counts the
/// data records before it; every record arrives. A collector that stops
/// reading for a while holds the exporter back, which counts it.
#[test]
fn tcp_messages_are_framed_and_numbered_and_backpressure_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let collector = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        // Not reading at first: the exporter's writes wait.
        std::thread::sleep(Duration::from_millis(1500));
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        bytes
    });
    let out = dir.path().join("out");
    let destination = format!("tcp://127.0.0.1:{port}");
    let summary = analyze_file(&BIG_MIX, &out, &["--ipfix", &destination]);
    let bytes = collector.join().unwrap();
    let records = flow_records(&out);
    let export = &summary["exports"][0];
    assert_eq!(u(&export["records"]), records.len() as u64, "{export}");
    assert_eq!(u(&export["bytes"]), bytes.len() as u64);
    assert!(u(&export["backpressure_waits"]) > 0, "{export}");

    let messages = messages(&bytes);
    assert_eq!(u(&export["messages"]), messages.len() as u64);
    let mut templates: BTreeMap<u16, Fields> = BTreeMap::new();
    let mut expected_sequence = 0u32;
    for m in &messages {
        assert_eq!(m.domain, 1);
        assert_eq!(m.sequence, expected_sequence);
        assert!(m.sets.iter().map(|(_, s)| s.len() + 4).sum::<usize>() + 16 <= 1472);
        for (id, set) in &m.sets {
            if *id == 2 {
                read_templates(set, &mut templates);
            } else {
                let lengths = lengths(templates.get(id).expect("data only after its template"));
                expected_sequence += data_records(set, &lengths) as u32;
            }
        }
    }
    let mut flow_templates: Vec<u16> = sluice_export::ipfix::flow_templates().map(|(id, _, _)| id).collect();
    flow_templates.sort_unstable();
    assert_eq!(templates.keys().copied().collect::<Vec<_>>(), flow_templates);
    assert_eq!(expected_sequence as usize, records.len());
}

/// Receives the datagrams sent to `socket` until none came for `quiet`
/// after `done` is set.
fn receive_datagrams(socket: UdpSocket, done: std::sync::Arc<std::sync::atomic::AtomicBool>) -> Vec<Vec<u8>> {
    socket.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut datagrams = Vec::new();
    let mut buf = vec![0u8; 1 << 17];
    let mut quiet_since = None;
    loop {
        match socket.recv(&mut buf) {
            Ok(n) => {
                datagrams.push(buf[..n].to_vec());
                quiet_since = None;
            }
            Err(_) if done.load(std::sync::atomic::Ordering::SeqCst) => {
                let since = *quiet_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(2) {
                    return datagrams;
                }
            }
            Err(_) => {}
        }
    }
}

/// Over UDP to a collector on this host, messages are sized to
/// loopback's MTU (65,536: messages of up to 65,507 bytes, the most an
/// IPv4 datagram holds), or to `--ipfix-mtu` when given; either way each
/// datagram is one whole message, the templates come first, the sequence
/// numbers count the records before each message, and every record
/// arrives.
#[test]
fn udp_messages_are_sized_to_the_paths_mtu() {
    for (mtu, limit) in [(None, 65_507usize), (Some("1500"), 1472)] {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let collector = std::thread::spawn({
            let done = done.clone();
            move || receive_datagrams(socket, done)
        });
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let destination = format!("udp://127.0.0.1:{port}");
        // Paced, so that the test's socket buffer never overflows however
        // loaded the machine.
        let mut args = vec!["--ipfix", &destination, "--ipfix-rate", "200pps"];
        if let Some(mtu) = mtu {
            args.extend(["--ipfix-mtu", mtu]);
        }
        let summary = analyze(&out, &args);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let datagrams = collector.join().unwrap();
        let records = flow_records(&out);
        let export = &summary["exports"][0];
        assert_eq!(u(&export["max_message_bytes"]), limit as u64, "{export}");
        assert_eq!(u(&export["records"]), records.len() as u64, "{export}");
        assert_eq!(datagrams.len() as u64, u(&export["messages"]), "{export}");
        let longest = datagrams.iter().map(Vec::len).max().unwrap();
        assert!(longest <= limit, "{mtu:?}: a message of {longest} bytes");
        assert!(longest * 2 > limit, "{mtu:?}: messages of {longest} bytes at most");
        let mut templates: BTreeMap<u16, Fields> = BTreeMap::new();
        let mut expected_sequence = 0u32;
        for datagram in &datagrams {
            let message = messages(datagram);
            assert_eq!(message.len(), 1, "one message a datagram");
            let m = &message[0];
            assert_eq!(m.sequence, expected_sequence);
            for (id, set) in &m.sets {
                if *id == 2 {
                    read_templates(set, &mut templates);
                } else {
                    let lengths = lengths(templates.get(id).expect("data only after its template"));
                    expected_sequence += data_records(set, &lengths) as u32;
                }
            }
        }
        assert_eq!(
            expected_sequence as usize,
            records.len(),
            "{mtu:?}: every record arrived"
        );
    }
}

/// Over UDP with no collector, the datagrams the destination refuses are
/// counted as failed, in the summary and the printed report: nothing
/// disappears unsaid, and the run goes on.
#[test]
fn udp_records_a_closed_port_refuses_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_udp_port();
    let out = dir.path().join("out");
    let destination = format!("udp://127.0.0.1:{port}");
    let output = sluice(&["analyze", s(&MIX), "-o", s(&out), "--ipfix", &destination]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let export = &summary["exports"][0];
    let flows = u(&summary["flows"]);
    assert!(u(&export["failed"]) > 0, "{export}");
    assert_eq!(u(&export["records"]) + u(&export["failed"]), flows, "{export}");
    assert!(export["last_error"].as_str().unwrap().contains("refused"), "{export}");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.contains(&format!("{} failed", u(&export["failed"]))),
        "{printed}"
    );
}

/// A destination that is not one is refused before anything is read,
/// with what to give instead.
#[test]
fn a_bad_destination_says_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let output = sluice(&[
        "analyze",
        s(&MIX),
        "-q",
        "-o",
        s(dir.path()),
        "--ipfix",
        "collector:4739",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("flows.ipfix") && stderr.contains("udp://HOST:PORT"),
        "{stderr}"
    );
}

/// A value of a line template's element as the bytes of a data record
/// hold it, compared with the value of its key in the line (`None`: the
/// line has no such key). Absent values (all ones, NaN, empty) stand for
/// null or a missing key.
fn same_value(e: &LineElement, v6: bool, bytes: &[u8], expected: Option<&Value>) -> Result<(), String> {
    let expected = expected.filter(|v| !v.is_null());
    let absent = |what: &str| match expected {
        None => Ok(()),
        Some(v) => Err(format!("{what} in IPFIX, {v} in the line")),
    };
    let be = |b: &[u8]| b.iter().fold(0u64, |n, &x| n << 8 | u64::from(x));
    let text = || String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string());
    let got: Value = match e.encoding {
        LineEncoding::Unsigned(n) => {
            let v = be(bytes);
            if n < 8 && v == (1 << (8 * n)) - 1 || n == 8 && v == u64::MAX {
                return absent("all ones");
            }
            v.into()
        }
        LineEncoding::Signed64 => {
            let v = be(bytes) as i64;
            if v == i64::MIN {
                return absent("the smallest integer");
            }
            v.into()
        }
        LineEncoding::Float64 => {
            let f = f64::from_bits(be(bytes));
            if f.is_nan() {
                return absent("NaN");
            }
            let line = expected.and_then(Value::as_f64);
            return if line == Some(f) {
                Ok(())
            } else {
                Err(format!("{f} in IPFIX, {line:?} in the line"))
            };
        }
        LineEncoding::Boolean => match bytes[0] {
            0 => return absent("0"),
            b => (b == 1).into(),
        },
        LineEncoding::Utf8 => match text()?.as_str() {
            "" if expected.is_none_or(|v| v == "") => return Ok(()),
            s => s.into(),
        },
        LineEncoding::Utf8List => match text()?.as_str() {
            "" if expected.is_none_or(|v| v.as_array().is_some_and(Vec::is_empty)) => return Ok(()),
            s => s.split(';').collect::<Vec<_>>().into(),
        },
        LineEncoding::List(n) => {
            if bytes.is_empty() && expected.is_none_or(|v| v.as_array().is_some_and(Vec::is_empty)) {
                return Ok(());
            }
            bytes.chunks(n as usize).map(be).collect::<Vec<_>>().into()
        }
        LineEncoding::Json => match text()?.as_str() {
            "" => return absent("nothing"),
            s => serde_json::from_str(s).map_err(|e| e.to_string())?,
        },
        LineEncoding::Address => {
            let ip: IpAddr = if v6 {
                let a = Ipv6Addr::from(<[u8; 16]>::try_from(bytes).unwrap());
                // An IPv4 end of a call with an IPv6 one is mapped.
                match (a.to_ipv4_mapped(), expected.and_then(Value::as_str)) {
                    (Some(v4), Some(line)) if line.parse::<Ipv4Addr>().is_ok() => v4.into(),
                    _ => a.into(),
                }
            } else {
                Ipv4Addr::from(<[u8; 4]>::try_from(bytes).unwrap()).into()
            };
            let line: Option<IpAddr> = expected.and_then(Value::as_str).and_then(|s| s.parse().ok());
            return if line == Some(ip) {
                Ok(())
            } else {
                Err(format!("{ip} in IPFIX, {expected:?} in the line"))
            };
        }
        LineEncoding::NtpTime => ntp_to_unix_ns(be(bytes)).into(),
        LineEncoding::Milliseconds => {
            let ms = be(bytes);
            let line = expected.and_then(Value::as_u64).map(|ns| ns / 1_000_000);
            return if line == Some(ms) {
                Ok(())
            } else {
                Err(format!("{ms} ms in IPFIX, {expected:?} in the line"))
            };
        }
        LineEncoding::Other => unreachable!("checked as a whole"),
    };
    if Some(&got) == expected {
        Ok(())
    } else {
        Err(format!("{got} in IPFIX, {expected:?} in the line"))
    }
}

/// A field of a data record: its element's enterprise number and id, and
/// its value's bytes.
type Field = (u32, u16, Vec<u8>);

/// Checks one data record of a line template against its line, field by
/// field: every element's value equals its key's, and every key of the
/// line is in an element or in `otherFields`.
fn check_line_record(kind: LineKind, v6: bool, record: &[Field], line: &Value) {
    let elements = kind.elements();
    assert_eq!(record.len(), elements.len());
    let object = line.as_object().unwrap();
    for (e, (enterprise, id, bytes)) in elements.iter().zip(record) {
        assert_eq!((e.enterprise, e.id(v6)), (*enterprise, *id), "{kind:?}: {}", e.name);
        if e.encoding == LineEncoding::Other {
            let other: serde_json::Map<String, Value> = if bytes.is_empty() {
                serde_json::Map::new()
            } else {
                serde_json::from_slice(bytes).unwrap()
            };
            for (key, value) in object {
                if !elements.iter().any(|e| e.key == key) {
                    assert_eq!(other.get(key), Some(value), "{kind:?}: {key} is lost: {line}");
                }
            }
            for (key, value) in &other {
                assert_eq!(object.get(key), Some(value), "{kind:?}: otherFields {key}");
            }
            continue;
        }
        if let Err(e2) = same_value(e, v6, bytes, object.get(e.key)) {
            panic!("{kind:?} {} ({}): {e2}\nline: {line}", e.key, e.name);
        }
    }
}

/// The statistics intervals, alarms and call records of a probe run go
/// on the IPFIX session of its flows, each kind with its template. An
/// IPFIX file of a run over generated VoIP traffic with a SYN flood:
/// tshark reads it with no warning and finds the templates; every
/// `stats.jsonl`, `alarms.jsonl` and `calls.jsonl` line is a data record
/// of its template, in order, equal to it field by field (read here by
/// the templates the file holds).
#[test]
fn stats_alarms_and_calls_go_through_ipfix_as_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("voip.pcap");
    let gen_args = ["gen", "--profile", "voip", "--packets", "40000", "--seed", "2"];
    let output = sluice(&[&gen_args[..], &["--anomaly", "syn_flood@8s+2s:1%", "-w", s(&pcap)]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let out = dir.path().join("out");
    let file = dir.path().join("run.ipfix");
    let destination = format!("file:{}", file.display());
    let args = ["probe", "-q", "-r", s(&pcap), "-o", s(&out), "--voip", "--alarms"];
    let output = sluice(&[&args[..], &["--alarm", "warmup=5s", "--ipfix", &destination]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let summary: Value = serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let lines = |name: &str| -> Vec<Value> {
        std::fs::read_to_string(out.join(name))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let expected = [
        (LineKind::Stats, lines("stats.jsonl")),
        (LineKind::Alarms, lines("alarms.jsonl")),
        (LineKind::Calls, lines("calls.jsonl")),
    ];
    for (kind, l) in &expected {
        assert!(l.len() >= 2, "{kind:?}: {} lines", l.len());
    }
    assert!(expected[1].1.iter().any(|a| a["detector"] == "syn_flood"));
    let export = &summary["exports"][0];
    assert_eq!(u(&export["records"]), flow_records(&out).len() as u64, "{export}");
    assert_eq!(u(&export["failed"]) + u(&export["dropped_queue_full"]), 0, "{export}");
    for (kind, l) in &expected {
        let counter = format!("{}_records", kind.name());
        assert_eq!(u(&export[&counter]), l.len() as u64, "{export}");
    }

    // The file, read with the templates it holds.
    let bytes = std::fs::read(&file).unwrap();
    let mut templates: BTreeMap<u16, Fields> = BTreeMap::new();
    let mut got: BTreeMap<&str, Vec<(bool, Vec<Field>)>> = BTreeMap::new();
    let mut sequence = 0u32;
    for m in messages(&bytes) {
        assert_eq!(m.sequence, sequence, "sequence numbers count every data record");
        for (id, set) in &m.sets {
            if *id == 2 {
                read_templates(set, &mut templates);
                continue;
            }
            let fields = templates
                .get(id)
                .unwrap_or_else(|| panic!("data set {id} before its template"));
            sequence += data_records(set, &lengths(fields)) as u32;
            let Some((kind, v6)) = LineKind::of_template(*id) else {
                continue;
            };
            let mut at = 0;
            while at < set.len() {
                let mut record = Vec::new();
                for &(enterprise, id, len) in fields {
                    let len = match len {
                        65535 => {
                            let (n, prefix) = match set[at] {
                                255 => (u16::from_be_bytes([set[at + 1], set[at + 2]]) as usize, 3),
                                n => (n as usize, 1),
                            };
                            at += prefix;
                            n
                        }
                        n => n as usize,
                    };
                    record.push((enterprise, id, set[at..at + len].to_vec()));
                    at += len;
                }
                got.entry(kind.name()).or_default().push((v6, record));
            }
        }
    }
    for (kind, l) in &expected {
        let records = got.remove(kind.name()).unwrap_or_default();
        assert_eq!(records.len(), l.len(), "{kind:?}");
        for ((v6, record), line) in records.iter().zip(l) {
            check_line_record(*kind, *v6, record, line);
        }
    }
    assert!(templates.contains_key(&TEMPLATE_CALLS_V4) && templates.contains_key(&TEMPLATE_CALLS_V6));

    // tshark reads the whole file with no warning, and the templates.
    let Some(tshark) = tool("tshark") else {
        return;
    };
    tshark_verbose(&tshark, &file);
    let ids = Command::new(&tshark)
        .args(TSHARK_PREFS)
        .arg("-r")
        .arg(&file)
        .args(["-T", "fields", "-e", "cflow.template_id", "-e", "cflow.flowset_id"])
        .output()
        .unwrap();
    let ids = String::from_utf8(ids.stdout).unwrap();
    let seen: std::collections::BTreeSet<&str> = ids.split(['\t', '\n', ',']).collect();
    for id in ["258", "259", "260", "261"] {
        assert!(seen.contains(id), "tshark does not see template {id}: {seen:?}");
    }
}

/// A flow element's value as a data record holds it, `length` bytes
/// (its template's; a list's, each item's), compared with the JSON record's field. Absent values
/// (all ones, NaN, empty) stand for null, which the JSON record leaves
/// out.
fn same_flow_value(e: &Element, length: u16, bytes: &[u8], r: &Value) -> Result<(), String> {
    let be = |b: &[u8]| b.iter().fold(0u64, |n, &x| n << 8 | u64::from(x));
    let field = &r[e.field];
    let got: Value = match e.encoding {
        Encoding::Unsigned(_) => {
            let v = be(bytes);
            let all_ones = if length >= 8 { u64::MAX } else { (1 << (8 * length)) - 1 };
            if v == all_ones && field.is_null() {
                Value::Null
            } else {
                v.into()
            }
        }
        Encoding::Float64 => {
            let f = match length {
                4 => f64::from(f32::from_bits(be(bytes) as u32)),
                _ => f64::from_bits(be(bytes)),
            };
            return match field.as_f64() {
                Some(json) if json == f => Ok(()),
                None if f.is_nan() => Ok(()),
                json => Err(format!("{f} in IPFIX ({length} bytes), {json:?} in JSON")),
            };
        }
        Encoding::Utf8 => {
            let s = String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())?;
            if s.is_empty() && field.is_null() {
                Value::Null
            } else {
                s.into()
            }
        }
        Encoding::Utf8List => {
            let s = String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())?;
            // The items joined by `;`, a `;` inside one written as `,`
            // (SIP request lines hold them); the JSON record leaves out an
            // empty list.
            let items: Vec<String> = field.as_array().map_or(Vec::new(), |a| {
                a.iter().map(|v| v.as_str().unwrap().replace(';', ",")).collect()
            });
            return check(s == items.join(";"), bytes, field);
        }
        Encoding::Address => match bytes.len() {
            4 => Ipv4Addr::from(<[u8; 4]>::try_from(bytes).unwrap()).to_string().into(),
            _ => Ipv6Addr::from(<[u8; 16]>::try_from(bytes).unwrap()).to_string().into(),
        },
        Encoding::NtpTime => ntp_to_unix_ns(be(bytes)).into(),
        Encoding::Milliseconds => return check(be(bytes) == u(field) / 1_000_000, bytes, field),
        Encoding::HexId => format!("{:016x}", be(bytes)).into(),
        Encoding::Protocol => {
            let l4 = match field.as_str().unwrap() {
                "ICMP" => 1,
                "IGMP" => 2,
                "SCTP" => 132,
                "TCP" => 6,
                "UDP" => 17,
                "ICMPV6" => 58,
                other => other.parse().unwrap(),
            };
            return check(be(bytes) == l4, bytes, field);
        }
        Encoding::EndReason => {
            let code = match field.as_str().unwrap() {
                "idle" => 1,
                "active_timeout" => 2,
                "fin" | "rst" => 3,
                "end_of_input" => 4,
                _ => 5,
            };
            return check(be(bytes) == code, bytes, field);
        }
        Encoding::List(_) => bytes.chunks(usize::from(length)).map(be).collect::<Vec<_>>().into(),
        Encoding::Flags(d) => return check(be(bytes) == flags(r, ["c2s", "s2c"][usize::from(d)]), bytes, r),
    };
    check(&got == field, bytes, &got)
}

fn check(same: bool, bytes: &[u8], what: &Value) -> Result<(), String> {
    if same {
        Ok(())
    } else {
        Err(format!("{bytes:02x?} in IPFIX: {what}"))
    }
}

/// Read back from the IPFIX file with the templates the file holds, every
/// element of every flow's data record is the value of its field in the
/// JSON record, to the bit: the counters and times a template shortens to
/// 4 bytes, the means and deviations it sends as float32, the strings and
/// lists; and the elements a template leaves out are the ones whose
/// fields are zero, null or empty. The generated mix and nDPI's captures
/// between them use the full templates and those of every kind of saving.
#[test]
fn every_field_reads_back_from_its_template_as_the_json_record_has_it() {
    let mut variants = std::collections::BTreeSet::new();
    variants.extend(read_back_and_compare(std::slice::from_ref(&*MIX)));
    let Some(captures) = ndpi_captures() else {
        return;
    };
    variants.extend(read_back_and_compare(&captures));
    for bit in Variant::BITS {
        assert!(variants.iter().any(|&v| Variant(v).has(bit)), "{bit}: {variants:?}");
        assert!(variants.iter().any(|&v| !Variant(v).has(bit)), "{bit}: {variants:?}");
    }
}

/// Analyzes `inputs` into JSON records and an IPFIX file, reads every
/// flow's data record back and compares it with its JSON record; the
/// variants the records used.
fn read_back_and_compare(inputs: &[PathBuf]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let file = dir.path().join("flows.ipfix");
    analyze_inputs(inputs, &out, &["--ipfix", &format!("file:{}", file.display())]);
    let records = flow_records(&out);
    let by_id: BTreeMap<&str, &Value> = records.iter().map(|r| (r["flow_id"].as_str().unwrap(), r)).collect();
    let bytes = std::fs::read(&file).unwrap();
    let mut templates: BTreeMap<u16, Fields> = BTreeMap::new();
    let mut seen: BTreeMap<u16, usize> = BTreeMap::new();
    let mut checked = 0;
    for m in messages(&bytes) {
        for (id, set) in &m.sets {
            if *id == 2 {
                read_templates(set, &mut templates);
                continue;
            }
            let (variant, v6) = Variant::of_template(*id).expect("a flow template");
            // The template the file holds is the variant's.
            let fields = &templates[id];
            let elements: Vec<(&Element, u16)> = ELEMENTS
                .iter()
                .filter_map(|e| Some((e, e.length_in(variant, v6)?)))
                .collect();
            let described: Fields = elements.iter().map(|(e, len)| (e.enterprise, e.id(v6), *len)).collect();
            assert_eq!(fields, &described, "template {id}");
            let mut at = 0;
            while at < set.len() {
                let mut values = Vec::new();
                for &(e, len) in &elements {
                    let n = match len {
                        VARIABLE => match set[at] {
                            255 => {
                                at += 3;
                                usize::from(u16::from_be_bytes([set[at - 2], set[at - 1]]))
                            }
                            short => {
                                at += 1;
                                usize::from(short)
                            }
                        },
                        fixed => usize::from(fixed),
                    };
                    // A list's: the length of its items.
                    values.push((e, e.item_len_in(variant).unwrap_or(len), &set[at..at + n]));
                    at += n;
                }
                let id_bytes = values[0].2;
                let flow_id = format!("{:016x}", u64::from_be_bytes(id_bytes.try_into().unwrap()));
                let r = by_id[flow_id.as_str()];
                for (e, len, value) in values {
                    if let Err(why) = same_flow_value(e, len, value, r) {
                        panic!("template {id}, {} ({}): {why}\n{r}", e.field, e.name);
                    }
                }
                // What the template leaves out is zero, null or empty.
                for e in ELEMENTS.iter().filter(|e| e.length_in(variant, v6).is_none()) {
                    let v = if e.field.is_empty() { &json!(0) } else { &r[e.field] };
                    let empty =
                        v.is_null() || v.as_u64() == Some(0) || v.as_array().is_some_and(Vec::is_empty) || v == "";
                    assert!(empty, "template {id} leaves out {} ({v})\n{r}", e.field);
                }
                checked += 1;
                *seen.entry(*id).or_default() += 1;
            }
            assert_eq!(at, set.len(), "records fill their set exactly");
        }
    }
    assert_eq!(checked, records.len());
    eprintln!("{} input(s), records by template: {seen:?}", inputs.len());
    seen.keys().map(|&id| Variant::of_template(id).unwrap().0.0).collect()
}
