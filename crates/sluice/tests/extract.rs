//! `sluice extract` on a directory that the real `sluice record` wrote:
//! two network namespaces joined by a veth pair, `sluice gen -i` sending
//! 20 000 `mix` frames on one end, `sluice record --rotate 2MiB
//! --block-mib 1` on the other, so that there are several files of
//! several blocks. Extraction by filter must equal what tcpdump and tshark
//! select from the same files, by time what the files hold in the range,
//! by flow the packets `sluice analyze` counted in the flow's record. A
//! second recorder, `--format pcapng`, records the same traffic beside the
//! first: filters and time ranges must select from its files what tcpdump
//! and tshark select from them, and the same frames as from the pcap files
//! (each recorder stamps the packets itself, so the times differ by a few
//! microseconds). Skipped, with a message, when not root or when `ip` is
//! missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

mod common;

use common::{Namespaces, SLUICE, succeeded, tshark_frames};

const PACKETS: u64 = 20_000;

/// The recorded directory, made once for all the tests of this file.
struct Recorded {
    dir: PathBuf,
    /// The same traffic, recorded as pcapng.
    dir_ng: PathBuf,
    /// `sluice analyze` of the recordings.
    flows: PathBuf,
}

fn recorded() -> Option<&'static Recorded> {
    static RECORDED: OnceLock<Option<Recorded>> = OnceLock::new();
    RECORDED.get_or_init(record).as_ref()
}

fn record() -> Option<Recorded> {
    let ns = Namespaces::create("ext")?;
    let keep = common::shared_scratch("extract-recorded");
    let (dir, dir_ng) = (keep.join("rec"), keep.join("rec-ng"));
    let recorders = [(&dir, "pcap"), (&dir_ng, "pcapng")].map(|(dir, format)| {
        Command::new("ip")
            .args(["netns", "exec", &ns.b, SLUICE, "record", "-i", "vb", "-w"])
            .arg(dir)
            .args([
                "--duration",
                "4s",
                "--rotate",
                "2MiB",
                "--block-mib",
                "1",
                "--format",
                format,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    });
    std::thread::sleep(Duration::from_millis(1500));
    let sender = ns.send_mix(PACKETS, 9);
    succeeded(sender);
    for recorder in recorders {
        succeeded(recorder);
    }
    drop(ns);
    let out = keep.join("analyzed");
    common::analyze_cleanly(&recordings(&dir), &out);
    Some(Recorded {
        dir,
        dir_ng,
        flows: out.join("flows.jsonl"),
    })
}

fn recordings(dir: &Path) -> Vec<PathBuf> {
    sluice_store::recordings(dir).unwrap()
}

/// Each packet's timestamp, wire length and captured bytes.
type Packet = (u64, u32, Vec<u8>);

fn packets(path: &Path) -> Vec<Packet> {
    let file = sluice_capture::CaptureFile::open(path).unwrap();
    file.reader()
        .unwrap()
        .map(|p| (p.ts_ns, p.wire_len, p.data.to_vec()))
        .collect()
}

fn all_packets(dir: &Path) -> Vec<Packet> {
    recordings(dir).iter().flat_map(|f| packets(f)).collect()
}

/// Runs `sluice extract -r DIR ARGS -w OUT`; returns the report and the
/// packets written.
fn extract(dir: &Path, args: &[&str], out: &Path) -> (String, Vec<Packet>) {
    let output = Command::new(SLUICE)
        .arg("extract")
        .arg("-r")
        .arg(dir)
        .args(args)
        .arg("-w")
        .arg(out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (String::from_utf8(output.stdout).unwrap(), packets(out))
}

/// (blocks read, blocks indexed) from the report.
fn blocks(report: &str) -> (u64, u64) {
    let line = report.lines().find(|l| l.starts_with("blocks: ")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    (words[1].parse().unwrap(), words[4].parse().unwrap())
}

fn flows(recorded: &Recorded) -> Vec<Value> {
    std::fs::read_to_string(&recorded.flows)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_filter_selects_what_tcpdump_and_tshark_select() {
    let Some(recorded) = recorded() else { return };
    // The IPv4 server with the most packets on port 443.
    let mut by_server: HashMap<String, u64> = HashMap::new();
    for flow in flows(recorded) {
        if flow["dst_port"] == 443 && flow["ip_version"] == 4 && flow["tunnel"] == "" {
            *by_server
                .entry(flow["dst_ip"].as_str().unwrap().to_string())
                .or_default() += flow["packets"].as_u64().unwrap();
        }
    }
    let (host, _) = by_server.into_iter().max_by_key(|(h, n)| (*n, h.clone())).unwrap();
    let from_pcap = filters_select_what_tools_select(&recorded.dir, &host);
    let from_pcapng = filters_select_what_tools_select(&recorded.dir_ng, &host);
    assert!(
        frames(&from_pcap) == frames(&from_pcapng),
        "the same frames from the pcap and the pcapng recordings"
    );
}

/// Each extraction's frames (wire length and bytes), without the times.
fn frames(extractions: &[Vec<Packet>]) -> Vec<Vec<(u32, &[u8])>> {
    extractions
        .iter()
        .map(|packets| packets.iter().map(|p| (p.1, &p.2[..])).collect())
        .collect()
}

/// Extracts from `dir` by three filters, and checks each against tcpdump
/// (and the first against tshark) over the same files; returns what each
/// extracted.
fn filters_select_what_tools_select(dir: &Path, host: &str) -> Vec<Vec<Packet>> {
    let expression = format!("host {host} and port 443");
    let scratch = tempfile::tempdir().unwrap();
    let (report, extracted) = extract(dir, &["--filter", &expression], &scratch.path().join("x.pcap"));
    assert!(!extracted.is_empty(), "{report}");

    let mut by_tcpdump = Vec::new();
    let mut by_tshark = Vec::new();
    let display = format!("ip.addr == {host} && (tcp.port == 443 || udp.port == 443 || sctp.port == 443)");
    for (i, file) in recordings(dir).iter().enumerate() {
        let out = scratch.path().join(format!("t{i}.pcap"));
        common::tcpdump_select(file, &out, &expression);
        by_tcpdump.extend(packets(&out));
        for line in tshark_frames(std::slice::from_ref(file), Some(&display)) {
            let mut fields = line.split('\t');
            let (time, len) = (fields.next().unwrap(), fields.next().unwrap());
            let (s, ns) = time.split_once('.').unwrap();
            let ts = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
            by_tshark.push((ts, len.parse::<u32>().unwrap()));
        }
    }
    assert!(
        extracted == by_tcpdump,
        "{} packets extracted, {} by tcpdump",
        extracted.len(),
        by_tcpdump.len()
    );
    let times: Vec<(u64, u32)> = extracted.iter().map(|p| (p.0, p.1)).collect();
    assert_eq!(times, by_tshark);
    let mut all = vec![extracted];

    // A broader expression, and one whose first load is past the end of
    // short frames, against tcpdump alone: tshark's `udp` also matches the
    // UDP headers quoted in ICMP errors.
    for expression in ["udp and not port 53", "tcp[tcpflags] & tcp-syn != 0 or ip[100] = 1"] {
        let (report, extracted) = extract(dir, &["--filter", expression], &scratch.path().join("y.pcap"));
        let mut by_tcpdump = Vec::new();
        for (i, file) in recordings(dir).iter().enumerate() {
            let out = scratch.path().join(format!("u{i}.pcap"));
            common::tcpdump_select(file, &out, expression);
            by_tcpdump.extend(packets(&out));
        }
        assert!(!extracted.is_empty(), "{expression}: {report}");
        assert!(
            extracted == by_tcpdump,
            "{expression}: {} packets extracted, {} by tcpdump",
            extracted.len(),
            by_tcpdump.len()
        );
        all.push(extracted);
    }
    all
}

#[test]
fn a_time_range_reads_fewer_blocks_and_keeps_the_packets_in_it() {
    let Some(recorded) = recorded() else { return };
    let from_pcap = time_range(&recorded.dir);
    let from_pcapng = time_range(&recorded.dir_ng);
    assert!(
        frames(&[from_pcap]) == frames(&[from_pcapng]),
        "the same frames from the pcap and the pcapng recordings"
    );
}

/// Extracts the middle fifth of the packets in `dir` by time, checks it,
/// and returns it; then checks that a file without its index is read whole.
fn time_range(dir: &Path) -> Vec<Packet> {
    let all = all_packets(dir);
    assert_eq!(all.len() as u64, PACKETS);
    let (from, to) = (all[all.len() * 2 / 5].0, all[all.len() * 3 / 5].0);
    // --from as Unix seconds, --to in RFC 3339, built from a recording's
    // name (sluice-YYYYMMDDTHHMMSS.nnnnnnnnnZ-…).
    let from_arg = format!("{}.{:09}", from / 1_000_000_000, from % 1_000_000_000);
    let name = sluice_store::file_name(to, 0, sluice_store::CaptureFormat::Pcap);
    let t = &name["sluice-".len()..];
    let to_arg = format!(
        "{}-{}-{}T{}:{}:{}{}",
        &t[0..4],
        &t[4..6],
        &t[6..8],
        &t[9..11],
        &t[11..13],
        &t[13..15],
        &t[15..26]
    );
    let scratch = tempfile::tempdir().unwrap();
    let (report, extracted) = extract(
        dir,
        &["--from", &from_arg, "--to", &to_arg],
        &scratch.path().join("x.pcap"),
    );
    let expected: Vec<Packet> = all.iter().filter(|p| p.0 >= from && p.0 < to).cloned().collect();
    assert!(
        extracted == expected,
        "{} packets, {} expected",
        extracted.len(),
        expected.len()
    );
    let (read, indexed) = blocks(&report);
    assert!(read < indexed, "{report}");

    // Without an index, a file is read whole, and said to be.
    let copy = scratch.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    let files = recordings(dir);
    for file in &files {
        std::fs::copy(file, copy.join(file.file_name().unwrap())).unwrap();
        let index = sluice_store::index_path(file);
        std::fs::copy(&index, copy.join(index.file_name().unwrap())).unwrap();
    }
    let middle = copy.join(files[files.len() / 2].file_name().unwrap());
    std::fs::remove_file(sluice_store::index_path(&middle)).unwrap();
    let (report, whole) = extract(&copy, &[], &scratch.path().join("all.pcap"));
    assert!(whole == all, "{report}");
    assert!(
        report.contains(&format!("read whole, no index covers it: {}", middle.display())),
        "{report}"
    );
    extracted
}

#[test]
fn a_flow_extract_is_exactly_that_flows_packets() {
    let Some(recorded) = recorded() else { return };
    let flows = flows(recorded);
    let scratch = tempfile::tempdir().unwrap();
    for l4 in ["TCP", "UDP"] {
        let flow = flows
            .iter()
            .filter(|f| f["l4"] == l4 && f["tunnel"] == "")
            .max_by_key(|f| f["packets"].as_u64())
            .unwrap();
        let id = flow["flow_id"].as_str().unwrap();
        let flows_arg = recorded.flows.to_str().unwrap();
        let (report, extracted) = extract(
            &recorded.dir,
            &["--flow", id, "--flows", flows_arg],
            &scratch.path().join("f.pcap"),
        );
        assert_eq!(
            extracted.len() as u64,
            flow["packets"].as_u64().unwrap(),
            "{flow}\n{report}"
        );
        let bytes: u64 = extracted.iter().map(|p| u64::from(p.1)).sum();
        assert_eq!(bytes, flow["bytes"].as_u64().unwrap());
        assert_eq!(extracted.first().unwrap().0, flow["first_ts_ns"].as_u64().unwrap());
        assert_eq!(extracted.last().unwrap().0, flow["last_ts_ns"].as_u64().unwrap());
        let (read, indexed) = blocks(&report);
        assert!(read < indexed, "{report}");
    }

    let output = Command::new(SLUICE)
        .arg("extract")
        .arg("-r")
        .arg(&recorded.dir)
        .args(["--flow", "0123456789abcdef", "-w"])
        .arg(scratch.path().join("none.pcap"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("give --flows FILE"));
}
