//! The alarms listener on generated traffic: every kind of anomaly that
//! `sluice gen --anomaly` injects is found by its detector within two
//! statistics intervals, naming the injected host; each alarm's evidence
//! pcap, cut from the probe's own recording, holds the injected packets;
//! `sluice alarms DIR` lists them and `--replay` over `stats.jsonl` finds
//! the same; a clean trace raises nothing.

mod common;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use common::{SLUICE, run, shared_scratch, sluice};
use serde_json::Value;

/// Packets a second of packet time of the background.
const RATE: &str = "2000pps";
/// Ten minutes of it.
const PACKETS: &str = "1200000";

/// One anomaly of each kind, 30 s each, a minute apart, after the
/// detectors' default minute of warm-up.
const ANOMALIES: [&str; 7] = [
    "syn_flood@120s+30s:20%",
    "port_scan@180s+30s:20%",
    "host_sweep@240s+30s:20%",
    "amplification@300s+30s:20%",
    "volume_surge@360s+30s:20%",
    "traffic_drop@420s+30s:50%",
    "new_service@480s+30s:20%",
];

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The generated trace with its anomalies, and the probe's output over it
/// (with a recording and flow records), made once.
static RUN: LazyLock<(PathBuf, PathBuf)> = LazyLock::new(|| {
    let dir = shared_scratch("alarms-injected");
    let pcap = dir.join("mix.pcap");
    let mut args = vec!["gen", "--profile", "mix", "--packet-rate", RATE, "--packets", PACKETS];
    args.extend(["--seed", "3", "--snaplen", "128", "-w", s(&pcap)]);
    for a in ANOMALIES {
        args.extend(["--anomaly", a]);
    }
    run(SLUICE, &args);
    let out = dir.join("out");
    let rec = dir.join("rec");
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&rec);
    let output = sluice(&[
        "probe",
        "-q",
        "-r",
        s(&pcap),
        "-o",
        s(&out),
        "--record-dir",
        s(&rec),
        "--alarms",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (dir, out)
});

/// Each alarm's latest line, in the order they opened.
fn latest(out: &Path) -> Vec<Value> {
    let mut order = Vec::new();
    let mut by_id = BTreeMap::new();
    for line in lines(&out.join("alarms.jsonl")) {
        let id = line["alarm_id"].as_str().unwrap().to_string();
        if !by_id.contains_key(&id) {
            order.push(id.clone());
        }
        by_id.insert(id, line);
    }
    order.into_iter().map(|id| by_id.remove(&id).unwrap()).collect()
}

struct Injected {
    kind: String,
    start_ns: u64,
    end_ns: u64,
    packets: u64,
    host: Option<IpAddr>,
}

fn injected(dir: &Path) -> Vec<Injected> {
    let mut reader = csv::Reader::from_path(dir.join("mix.anomalies.csv")).unwrap();
    let headers = reader.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let (kind, start, end, packets, host) = (col("kind"), col("start_ns"), col("end_ns"), col("packets"), col("host"));
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            Injected {
                kind: r[kind].to_string(),
                start_ns: r[start].parse().unwrap(),
                end_ns: r[end].parse().unwrap(),
                packets: r[packets].parse().unwrap(),
                host: (!r[host].is_empty()).then(|| r[host].parse().unwrap()),
            }
        })
        .collect()
}

/// The frames of a pcap file (either timestamp resolution) with their
/// times in nanoseconds.
fn pcap_frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
    let scale = match magic {
        0xa1b2_3c4d => 1,
        0xa1b2_c3d4 => 1000,
        other => panic!("{}: not a little-endian pcap file (magic {other:#x})", path.display()),
    };
    let word = |at: usize| u64::from(u32::from_le_bytes(data[at..at + 4].try_into().unwrap()));
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= data.len() {
        let ts = word(at) * 1_000_000_000 + word(at + 4) * scale;
        let len = word(at + 8) as usize;
        frames.push((ts, data[at + 16..at + 16 + len].to_vec()));
        at += 16 + len;
    }
    frames
}

/// Whether an Ethernet frame (VLAN tags allowed) is to or from `host`,
/// read from its IP header alone: the frames are cut short.
fn touches(frame: &[u8], host: IpAddr) -> bool {
    let mut at = 12;
    while at + 2 <= frame.len() {
        let ethertype = u16::from_be_bytes([frame[at], frame[at + 1]]);
        let ip = &frame[at + 2..];
        match ethertype {
            0x8100 | 0x88a8 => at += 4,
            0x0800 if ip.len() >= 20 => {
                let addr = |o: usize| IpAddr::from(<[u8; 4]>::try_from(&ip[o..o + 4]).unwrap());
                return addr(12) == host || addr(16) == host;
            }
            0x86dd if ip.len() >= 40 => {
                let addr = |o: usize| IpAddr::from(<[u8; 16]>::try_from(&ip[o..o + 16]).unwrap());
                return addr(8) == host || addr(24) == host;
            }
            _ => return false,
        }
    }
    false
}

/// The alarm of `a`'s detector naming its host, opened within two
/// intervals of its start.
fn found<'a>(alarms: &'a [Value], a: &Injected) -> Option<&'a Value> {
    alarms.iter().find(|alarm| {
        let detected = alarm["detected_ts_ns"].as_u64().unwrap();
        let hosts: Vec<&str> = alarm["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        alarm["detector"] == a.kind.as_str()
            && detected > a.start_ns
            && detected <= a.start_ns + 2_000_000_000
            && a.host.is_none_or(|h| hosts.contains(&h.to_string().as_str()))
    })
}

#[test]
fn every_injected_anomaly_is_found_in_time_with_its_packets_as_evidence() {
    let (dir, out) = &*RUN;
    let alarms = latest(out);
    let injected = injected(dir);
    assert_eq!(injected.len(), ANOMALIES.len());
    for a in &injected {
        let alarm = found(&alarms, a).unwrap_or_else(|| {
            panic!(
                "{} at {}..{} (host {:?}) not found within two intervals in {alarms:#?}",
                a.kind, a.start_ns, a.end_ns, a.host
            )
        });
        // The fields other tools read.
        for field in [
            "alarm_id",
            "detector",
            "severity",
            "start_ts_ns",
            "end_ts_ns",
            "counter",
            "expected",
            "observed",
            "hosts",
            "ports",
            "applications",
            "evidence",
        ] {
            assert!(alarm.get(field).is_some(), "{field} missing from {alarm}");
        }
        assert_eq!(alarm["state"], "closed", "{alarm}");
        if a.kind == "syn_flood" {
            // The generator's flood aims at port 80.
            assert_eq!(alarm["ports"][0], 80, "{alarm}");
        }
        let evidence = alarm["evidence"].as_str().unwrap();
        assert!(
            evidence.starts_with("evidence/") && evidence.ends_with(".pcap"),
            "{evidence}"
        );
        let frames = pcap_frames(&out.join(evidence));
        assert_eq!(
            frames.len() as u64,
            alarm["evidence_packets"].as_u64().unwrap(),
            "{alarm}"
        );
        let Some(host) = a.host else {
            // A drop's evidence is the traffic that remained around it.
            assert!(!frames.is_empty());
            continue;
        };
        let held = frames
            .iter()
            .filter(|(ts, f)| (a.start_ns..a.end_ns).contains(ts) && touches(f, host))
            .count() as u64;
        assert!(
            held * 100 >= a.packets * 99,
            "{}: {held} of the {} injected packets in {evidence}",
            a.kind,
            a.packets
        );
        // Nothing in it is about other hosts.
        assert!(frames.iter().all(|(_, f)| {
            alarm["hosts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| touches(f, h.as_str().unwrap().parse().unwrap()))
        }));
    }
}

#[test]
fn sluice_alarms_lists_each_alarm_with_its_evidence() {
    let (_, out) = &*RUN;
    let alarms = latest(out);
    assert!(!alarms.is_empty());
    let output = sluice(&["alarms", s(out)]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    for alarm in &alarms {
        let id = alarm["alarm_id"].as_str().unwrap();
        let row = text
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} not listed:\n{text}"));
        assert!(row.contains(alarm["detector"].as_str().unwrap()), "{row}");
        assert!(row.contains(alarm["evidence"].as_str().unwrap()), "{row}");
    }
    let output = sluice(&["alarms", s(out), "--json"]);
    let listed: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed, alarms);
}

#[test]
fn replaying_the_statistics_raises_the_same_alarms() {
    let (dir, out) = &*RUN;
    let again = dir.join("replayed");
    let output = sluice(&["alarms", s(out), "--replay", "-o", s(&again)]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let key = |a: &Value| {
        (
            a["alarm_id"].as_str().unwrap().to_string(),
            a["detector"].as_str().unwrap().to_string(),
            a["start_ts_ns"].as_u64().unwrap(),
            a["end_ts_ns"].as_u64().unwrap(),
        )
    };
    let live: Vec<_> = latest(out).iter().map(key).collect();
    let replayed: Vec<_> = latest(&again).iter().map(key).collect();
    assert_eq!(live, replayed);
}

#[test]
fn a_clean_trace_raises_nothing() {
    let dir = shared_scratch("alarms-clean");
    let pcap = dir.join("clean.pcap");
    run(
        SLUICE,
        &[
            "gen",
            "--profile",
            "mix",
            "--packet-rate",
            RATE,
            "--packets",
            PACKETS,
            "--seed",
            "5",
            "--snaplen",
            "128",
            "-w",
            s(&pcap),
        ],
    );
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    let output = sluice(&["probe", "-q", "-r", s(&pcap), "-o", s(&out), "--alarms", "--no-flows"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stats = lines(&out.join("stats.jsonl"));
    assert!(stats.len() >= 590, "{} intervals", stats.len());
    assert_eq!(lines(&out.join("alarms.jsonl")), Vec::<Value>::new());
}

/// `sluice serve` over a finished run, on a port of its choosing; killed
/// when dropped.
struct Served {
    child: std::process::Child,
    addr: String,
}

impl Served {
    fn start(out: &Path, extra: &[&str]) -> Served {
        use std::io::BufRead;
        let mut child = std::process::Command::new(SLUICE)
            .args(["serve", s(out)])
            .args(extra)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Served { child, addr }
    }

    /// GET `target` with `headers`: the status and the body.
    fn get(&self, target: &str, headers: &[&str]) -> (u16, Vec<u8>) {
        use std::io::{Read, Write};
        let mut port = self.addr.rsplit(':').next().unwrap().to_string();
        port.retain(|c| c.is_ascii_digit());
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).unwrap();
        let mut request = format!("GET {target} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.addr);
        for h in headers {
            request.push_str(h);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        let end = response.windows(4).position(|w| w == b"\r\n\r\n").expect("a header") + 4;
        let head = String::from_utf8_lossy(&response[..end]).to_string();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let mut body = response[end..].to_vec();
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
            body = unchunk(&body);
        }
        (status, body)
    }

    fn json(&self, target: &str) -> Value {
        let (status, body) = self.get(target, &[]);
        assert_eq!(status, 200, "{target}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&body[..eol]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[eol + 2..eol + 2 + size]);
        body = &body[eol + 2 + size + 2..];
    }
}

#[test]
fn the_console_serves_the_runs_alarms_evidence_flows_and_packets() {
    let (_, out) = &*RUN;
    let web = Served::start(out, &["--web", "127.0.0.1:0"]);
    let (status, page) = web.get("/", &[]);
    assert_eq!(status, 200);
    let page = String::from_utf8_lossy(&page);
    assert!(page.contains("uPlot") && !page.contains("https://"), "{page}");
    let (status, uplot) = web.get("/assets/uPlot.iife.min.js", &[]);
    assert_eq!(status, 200);
    assert!(uplot.starts_with(b"/*! https://github.com/leeoniya/uPlot"));
    // The alarms as the file holds them, each evidence pcap as written.
    let alarms = latest(out);
    let served = web.json("/api/alarms");
    let ids = |v: &[Value]| {
        v.iter()
            .map(|a| a["alarm_id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(served.as_array().unwrap()), ids(&alarms));
    let flood = alarms.iter().find(|a| a["detector"] == "syn_flood").unwrap();
    let evidence = flood["evidence"].as_str().unwrap();
    let (status, pcap) = web.get(&format!("/api/{evidence}"), &[]);
    assert_eq!(status, 200);
    assert_eq!(pcap, std::fs::read(out.join(evidence)).unwrap());
    // The charts' points, one per interval.
    let series = web.json("/api/series");
    assert_eq!(series.as_array().unwrap().len(), lines(&out.join("stats.jsonl")).len());
    // A flow search returns what the records hold: the new server's flows.
    let host = "198.51.100.89";
    let records: Vec<Value> = lines(&out.join("flows.jsonl"))
        .into_iter()
        .filter(|r| r["src_ip"] == host || r["dst_ip"] == host)
        .collect();
    assert!(!records.is_empty());
    let found = web.json(&format!("/api/flows?host={host}"));
    assert_eq!(found["flows"].as_array().unwrap(), &records);
    // And any flow's packets, cut from the recording.
    let flow = &records[0];
    let (status, pcap) = web.get(&format!("/api/flow/{}.pcap", flow["flow_id"].as_str().unwrap()), &[]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&pcap));
    let path = out.join("flow-from-console.pcap");
    std::fs::write(&path, &pcap).unwrap();
    assert_eq!(pcap_frames(&path).len() as u64, flow["packets"].as_u64().unwrap());
    // Nothing the user did not configure is read.
    for target in [
        "/api/evidence/..%2Fprobe.yaml",
        "/api/evidence/../probe.yaml",
        "/api/evidence/%2E%2E%2Fprobe.yaml",
        "/assets/..%2F..%2FCargo.toml",
        "/api/flows?host=/etc/passwd",
        "/api/flows?q=..%2F..%2Fetc",
        "/api/top?what=/etc/passwd",
    ] {
        let (status, body) = web.get(target, &[]);
        assert_eq!(status, 404, "{target}: {}", String::from_utf8_lossy(&body));
    }
}

#[test]
fn a_console_bound_beyond_loopback_needs_its_token() {
    let (_, out) = &*RUN;
    let refused = sluice(&["serve", s(out), "--web", "0.0.0.0:0"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--web-token"));
    let web = Served::start(out, &["--web", "0.0.0.0:0", "--web-token", "s3cret"]);
    for target in ["/", "/api/alarms", "/metrics", "/api/evidence/x.pcap"] {
        assert_eq!(web.get(target, &[]).0, 401, "{target}");
        assert_eq!(web.get(target, &["Authorization: Bearer wrong"]).0, 401, "{target}");
    }
    assert_eq!(web.get("/api/alarms", &["Authorization: Bearer s3cret"]).0, 200);
    assert_eq!(web.get("/?token=s3cret", &[]).0, 200);
    assert_eq!(web.get("/metrics", &["Cookie: sluice_token=s3cret"]).0, 200);
}
