//! Flows against an established reference: nDPI 4.11's flows for the 272
//! captures of its regression suite (`../shared/data/ndpi-dev/`, or the
//! folder in `NDPI_DEV_DIR`). Skipped, with a message, when absent.
//!
//! nDPI reports each 5-tuple once per capture, however long it was idle,
//! so the comparison runs Sluice with timeouts longer than any capture;
//! it also prints the figures for the default timeouts.
//!
//! The same run checks labels: on the flows nDPI labelled from their
//! payload, the master protocol must agree (`bench/classify-eval` prints
//! the full breakdown).

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn dataset() -> Option<PathBuf> {
    let dir = std::env::var_os("NDPI_DEV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ndpi-dev"));
    if dir.join("flows.csv").is_file() && dir.join("pcap").is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipping: nDPI reference captures not found at {} (set NDPI_DEV_DIR)",
            dir.display()
        );
        None
    }
}

/// Capture, L4, and the two endpoints in a fixed order.
type FlowId = (String, String, (String, u16), (String, u16));

fn endpoint(ip: &str, port: u16) -> (String, u16) {
    // nDPI writes IPv6 in its own spelling (and once, for a fuzzed packet,
    // an invalid one); parsing makes the two spellings meet.
    let ip = ip.parse::<IpAddr>().map_or_else(|_| ip.to_string(), |a| a.to_string());
    (ip, port)
}

fn flow_id(capture: &str, l4: &str, a: (String, u16), b: (String, u16)) -> FlowId {
    // Sluice names only the protocols the record schema names; nDPI names
    // a few more, which map back to their numbers.
    let l4 = match l4 {
        "ESP" => "50",
        "AH" => "51",
        "PIM" => "103",
        other => other,
    };
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    (capture.to_string(), l4.to_string(), a, b)
}

/// One flow record's figures, from either side.
#[derive(Clone, Debug)]
struct Seen {
    packets: u64,
    bytes: u64,
    /// The protocol part of the label.
    master: String,
    /// nDPI only: labelled from the payload (confidence `DPI...`).
    by_payload: bool,
}

#[derive(Default, Clone, Copy)]
struct Totals {
    flows: u64,
    packets: u64,
    bytes: u64,
}

fn reference(dir: &Path) -> HashMap<FlowId, Vec<Seen>> {
    let mut flows: HashMap<FlowId, Vec<Seen>> = HashMap::new();
    let mut reader = csv::Reader::from_path(dir.join("flows.csv")).expect("flows.csv reads");
    let headers = reader.headers().expect("flows.csv has a header").clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("column {name}"))
    };
    let (label, confidence) = (col("ndpi_label"), col("confidence"));
    let (pcap, l4, src_ip, src_port, dst_ip, dst_port, packets, bytes, available) = (
        col("pcap"),
        col("l4_proto"),
        col("src_ip"),
        col("src_port"),
        col("dst_ip"),
        col("dst_port"),
        col("packets"),
        col("bytes"),
        col("pcap_available"),
    );
    for row in reader.records() {
        let row = row.expect("a valid CSV row");
        if &row[available] != "1" {
            continue;
        }
        let id = flow_id(
            &row[pcap],
            &row[l4],
            endpoint(&row[src_ip], row[src_port].parse().unwrap_or(0)),
            endpoint(&row[dst_ip], row[dst_port].parse().unwrap_or(0)),
        );
        flows.entry(id).or_default().push(Seen {
            packets: row[packets].parse().unwrap(),
            bytes: row[bytes].parse().unwrap(),
            master: row[label].split('.').next().unwrap_or_default().to_string(),
            by_payload: row[confidence].starts_with("DPI"),
        });
    }
    flows
}

/// Runs `sluice analyze` on every capture, two at a time; returns each
/// capture's records and checks that no run crashed or took 10 s.
fn analyze_all(dir: &Path, out: &Path, timeouts: &[&str]) -> HashMap<FlowId, Vec<Seen>> {
    let mut captures: Vec<PathBuf> = std::fs::read_dir(dir.join("pcap"))
        .expect("the pcap folder lists")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    captures.sort();
    let chunks: Vec<Vec<PathBuf>> = captures
        .chunks(captures.len().div_ceil(2))
        .map(<[PathBuf]>::to_vec)
        .collect();
    let results: Vec<Vec<(String, Vec<serde_json::Value>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| scope.spawn(move || chunk.iter().map(|capture| run_one(capture, out, timeouts)).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a runner thread"))
            .collect()
    });
    let mut flows: HashMap<FlowId, Vec<Seen>> = HashMap::new();
    for (capture, records) in results.into_iter().flatten() {
        for r in records {
            let text = |k: &str| r[k].as_str().expect("a string field").to_string();
            let number = |k: &str| r[k].as_u64().expect("a number field");
            let id = flow_id(
                &capture,
                &text("l4"),
                endpoint(&text("src_ip"), number("src_port") as u16),
                endpoint(&text("dst_ip"), number("dst_port") as u16),
            );
            flows.entry(id).or_default().push(Seen {
                packets: number("packets"),
                bytes: number("bytes"),
                master: text("master"),
                by_payload: false,
            });
        }
    }
    flows
}

fn run_one(capture: &Path, out: &Path, timeouts: &[&str]) -> (String, Vec<serde_json::Value>) {
    let name = capture.file_name().unwrap().to_string_lossy().into_owned();
    let out = out.join(&name);
    let started = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("analyze")
        .arg(capture)
        .arg("-o")
        .arg(&out)
        .args(["-q", "--workers", "2"])
        .args(timeouts)
        .status()
        .expect("sluice runs");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "{name} took {took:?}");
    // 0: read completely; 3: partial, with warnings (the fuzzed captures).
    assert!(matches!(status.code(), Some(0 | 3)), "{name}: {status}");
    let text = std::fs::read_to_string(out.join("flows.jsonl")).unwrap_or_default();
    let records = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .collect();
    (name, records)
}

struct Agreement {
    reference: u64,
    ours: u64,
    matched: u64,
    packets_equal: u64,
    bytes_equal: u64,
    /// Flows nDPI labelled from their payload, and how many of those we
    /// gave the same master protocol.
    by_payload: u64,
    master_equal: u64,
}

fn compare(reference: &HashMap<FlowId, Vec<Seen>>, ours: &HashMap<FlowId, Vec<Seen>>) -> Agreement {
    let mut a = Agreement {
        reference: reference.values().map(|v| v.len() as u64).sum(),
        ours: ours.values().map(|v| v.len() as u64).sum(),
        matched: 0,
        packets_equal: 0,
        bytes_equal: 0,
        by_payload: 0,
        master_equal: 0,
    };
    for (id, theirs) in reference {
        let labelled = theirs.iter().filter(|t| t.by_payload).count() as u64;
        a.by_payload += labelled;
        let Some(mine) = ours.get(id) else { continue };
        if mine
            .iter()
            .any(|m| theirs.iter().any(|t| t.by_payload && t.master == m.master))
        {
            a.master_equal += labelled;
        }
        let matched = theirs.len().min(mine.len()) as u64;
        a.matched += matched;
        let sum = |v: &[Seen]| {
            v.iter().fold(Totals::default(), |t, s| Totals {
                flows: t.flows + 1,
                packets: t.packets + s.packets,
                bytes: t.bytes + s.bytes,
            })
        };
        let (t, m) = (sum(theirs), sum(mine));
        if t.packets == m.packets {
            a.packets_equal += matched;
        }
        if t.bytes == m.bytes {
            a.bytes_equal += matched;
        }
    }
    a
}

fn report(label: &str, a: &Agreement) -> (f64, f64, f64, f64, f64) {
    let recall = a.matched as f64 / a.reference as f64;
    let precision = a.matched as f64 / a.ours as f64;
    let packets = a.packets_equal as f64 / a.matched as f64;
    let bytes = a.bytes_equal as f64 / a.matched as f64;
    let masters = a.master_equal as f64 / a.by_payload as f64;
    println!(
        "{label}: nDPI {} flows, Sluice {}, matched {}: recall {recall:.4}, precision {precision:.4}, \
         packets equal {packets:.4}, bytes equal {bytes:.4}; master protocol agrees on {masters:.4} of {} \
         flows nDPI labelled from their payload",
        a.reference, a.ours, a.matched, a.by_payload
    );
    (recall, precision, packets, bytes, masters)
}

#[test]
fn flows_match_ndpi_on_its_regression_captures() {
    let Some(dir) = dataset() else { return };
    let out = tempfile::tempdir().unwrap();
    let reference = reference(&dir);

    let whole_capture = [
        "--idle-timeout",
        "100000000",
        "--tcp-idle-timeout",
        "100000000",
        "--active-timeout",
        "100000000",
    ];
    let ours = analyze_all(&dir, &out.path().join("whole"), &whole_capture);
    let (recall, precision, packets, bytes, masters) = report("timeouts off (as nDPI)", &compare(&reference, &ours));

    let ours = analyze_all(&dir, &out.path().join("default"), &[]);
    report("default timeouts", &compare(&reference, &ours));

    assert!(recall >= 0.98, "flow recall {recall:.4}");
    assert!(precision >= 0.98, "flow precision {precision:.4}");
    assert!(packets >= 0.97, "packets equal on {packets:.4} of matched flows");
    assert!(bytes >= 0.97, "bytes equal on {bytes:.4} of matched flows");
    assert!(
        masters >= 0.90,
        "master protocol agrees on {masters:.4} of nDPI's payload-labelled flows"
    );
}
