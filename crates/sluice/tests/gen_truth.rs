//! `sluice gen` writes beside each capture the truth about its flows
//! (NAME.truth.csv). Every row must be a flow that `sluice analyze` finds,
//! and the calls of the voip profile must come out as SIP, with the RTP
//! streams their SDP announced labelled RTP from the announcement, and
//! their RTCP flows RTCP.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::net::IpAddr;
use std::path::Path;

use serde_json::Value;

mod common;

use common::{analyze_cleanly, flow_records, sluice};

/// Runs `sluice gen` and returns the number of flows it reports writing.
fn generate(profile: &str, packets: u64, pcap: &Path) -> u64 {
    let packets = packets.to_string();
    let args: Vec<&OsStr> = ["gen", "--profile", profile, "--packets", &packets, "--seed", "1", "-w"]
        .into_iter()
        .map(OsStr::new)
        .chain([pcap.as_os_str()])
        .collect();
    let out = sluice(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sluice gen: {stderr}");
    let truth = pcap.with_extension("truth.csv");
    assert!(
        stderr.contains(&truth.display().to_string()),
        "the wrote line names the truth file: {stderr}"
    );
    let flows = stderr.split(" flows)").next().and_then(|s| s.rsplit(' ').next());
    flows
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no flow count in {stderr}"))
}

/// The records of a generated trace, which reads without a warning.
fn records(pcap: &Path, out: &Path) -> Vec<Value> {
    analyze_cleanly(&[pcap], out);
    flow_records(out)
}

type Endpoint = (IpAddr, u16);

struct Row {
    src: Endpoint,
    dst: Endpoint,
    l4: String,
    class: String,
    media: String,
}

fn truth(pcap: &Path) -> Vec<Row> {
    let mut reader = csv::Reader::from_path(pcap.with_extension("truth.csv")).expect("the truth file");
    let header = reader.headers().unwrap().clone();
    assert_eq!(
        header.iter().collect::<Vec<_>>(),
        ["src_ip", "src_port", "dst_ip", "dst_port", "l4", "class", "media"]
    );
    reader
        .records()
        .map(|record| {
            let r = record.unwrap();
            Row {
                src: (r[0].parse().unwrap(), r[1].parse().unwrap()),
                dst: (r[2].parse().unwrap(), r[3].parse().unwrap()),
                l4: r[4].to_owned(),
                class: r[5].to_owned(),
                media: r[6].to_owned(),
            }
        })
        .collect()
}

/// A flow's endpoints in either order, and its transport.
fn key(a: Endpoint, b: Endpoint, l4: &str) -> (Endpoint, Endpoint, String) {
    (a.min(b), a.max(b), l4.to_owned())
}

fn endpoint(record: &Value, side: &str) -> Endpoint {
    let ip = record[format!("{side}_ip")].as_str().unwrap().parse().unwrap();
    let port = record[format!("{side}_port")].as_u64().unwrap() as u16;
    (ip, port)
}

/// The record of each truth row's flow; panics if one has none.
fn match_records<'a>(rows: &[Row], records: &'a [Value]) -> Vec<&'a Value> {
    let by_key: HashMap<_, &Value> = records
        .iter()
        .map(|r| {
            (
                key(endpoint(r, "src"), endpoint(r, "dst"), r["l4"].as_str().unwrap()),
                r,
            )
        })
        .collect();
    rows.iter()
        .map(|row| {
            let record = by_key.get(&key(row.src, row.dst, &row.l4));
            let record = record.unwrap_or_else(|| panic!("no flow {:?} -> {:?} {}", row.src, row.dst, row.l4));
            assert_eq!(endpoint(record, "src"), row.src, "src is the first packet's sender");
            *record
        })
        .collect()
}

#[test]
fn voip_truth_matches_the_analysed_flows() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("calls.pcap");
    let flows = generate("voip", 20_000, &pcap);
    let rows = truth(&pcap);
    assert_eq!(rows.len() as u64, flows);
    let records = records(&pcap, &dir.path().join("out"));
    assert_eq!(records.len(), rows.len(), "one record per generated flow");
    let matched = match_records(&rows, &records);
    let mut counts = HashMap::<(&str, &str), usize>::new();
    for (row, record) in rows.iter().zip(matched) {
        *counts.entry((&row.class, &row.media)).or_default() += 1;
        let label = (
            record["master"].as_str().unwrap(),
            record["classifier"].as_str().unwrap(),
        );
        match (row.class.as_str(), row.media.as_str()) {
            ("SIP", "") => assert_eq!(label.0, "SIP", "{record}"),
            ("RTP", "audio" | "video") => assert_eq!(label, ("RTP", "dynamic-port"), "{record}"),
            ("RTP", media) => panic!("an RTP flow of media {media:?}"),
            ("RTCP", "") => assert_eq!(label, ("RTCP", "dynamic-port"), "{record}"),
            (_, media) => assert_eq!(media, "", "only RTP streams are media"),
        }
    }
    for class in [("SIP", ""), ("RTP", "audio"), ("RTP", "video"), ("RTCP", "")] {
        assert!(counts.get(&class).is_some_and(|&n| n > 0), "{class:?} in {counts:?}");
    }
    let not_media = rows
        .iter()
        .filter(|r| !["SIP", "RTP", "RTCP"].contains(&r.class.as_str()))
        .count();
    assert!(not_media > 0, "{counts:?}");
}

#[test]
fn mix_truth_has_a_row_per_generated_flow() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("mix.pcap");
    let flows = generate("mix", 20_000, &pcap);
    let rows = truth(&pcap);
    assert_eq!(rows.len() as u64, flows);
    let records = records(&pcap, &dir.path().join("out"));
    match_records(&rows, &records);
    assert!(rows.iter().any(|r| r.l4 == "TCP") && rows.iter().any(|r| r.l4 == "ICMP"));
    // mDNS stays on the link (RFC 6762): its queries go to a neighbour on
    // the client's subnet, or link-local over IPv6, never to the internet.
    let mdns: Vec<&Row> = rows.iter().filter(|r| r.class == "MDNS").collect();
    assert!(!mdns.is_empty());
    for r in mdns {
        let on_link = match (r.src.0, r.dst.0) {
            (IpAddr::V4(a), IpAddr::V4(b)) => a.octets()[..3] == b.octets()[..3] && a.is_private(),
            (IpAddr::V6(a), IpAddr::V6(b)) => a.segments()[0] == 0xfe80 && b.segments()[0] == 0xfe80,
            _ => false,
        };
        assert!(on_link && r.dst.1 == 5353, "{:?} -> {:?}", r.src, r.dst);
    }
}
