//! `sluice voip` scored against what `sluice gen --profile voip` did to
//! each RTP stream (`sluice_gen::StreamTruth`): the packets that reached
//! the capture and the loss between the first and the last of them, which
//! `streams.jsonl` must give exactly, and the network jitter's standard
//! deviation, which RFC 3550's interarrival jitter estimates.

mod common;

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::Value;
use sluice_gen::{FrameSink, Media, Profile, StreamTruth, TruthRow, TruthSink};

use common::sluice;

/// A pcap file (nanosecond timestamps, Ethernet) of the frames.
struct Pcap(BufWriter<std::fs::File>);

impl FrameSink for Pcap {
    fn frame(&mut self, ts_ns: u64, frame: &[u8]) -> std::io::Result<()> {
        let len = frame.len() as u32;
        for v in [(ts_ns / 1_000_000_000) as u32, (ts_ns % 1_000_000_000) as u32, len, len] {
            self.0.write_all(&v.to_le_bytes())?;
        }
        self.0.write_all(frame)
    }
}

#[derive(Default)]
struct Streams(Vec<StreamTruth>);

impl TruthSink for Streams {
    fn flow(&mut self, _: &TruthRow) -> std::io::Result<()> {
        Ok(())
    }

    fn stream(&mut self, row: &StreamTruth) -> std::io::Result<()> {
        self.0.push(*row);
        Ok(())
    }
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn streams_have_the_packets_loss_and_jitter_the_generator_gave_them() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("voip.pcap");
    let mut file = BufWriter::new(std::fs::File::create(&pcap).unwrap());
    // The pcap file header (nanosecond magic, version 2.4, snaplen, link
    // type 1: Ethernet).
    for v in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 262_144, 1] {
        file.write_all(&v.to_le_bytes()).unwrap();
    }
    let mut sink = Pcap(file);
    let mut truth = Streams::default();
    sluice_gen::generate_at(Profile::Voip, 200_000, 11, None, &mut sink, &mut truth).unwrap();
    sink.0.flush().unwrap();
    drop(sink);
    let out = tmp.path().join("out");
    let o = sluice(&["voip", "-q", "-r", pcap.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let streams = jsonl(&out.join("streams.jsonl"));
    let calls = jsonl(&out.join("calls.jsonl"));
    let ours: HashMap<(u64, u64, u64), &Value> = streams
        .iter()
        .map(|s| {
            let n = |k: &str| s[k].as_u64().unwrap();
            ((n("ssrc"), n("src_port"), n("dst_port")), s)
        })
        .collect();
    let (mut found, mut lossy, mut jitter_checked) = (0, 0, 0);
    let mut by_call: HashMap<String, u64> = HashMap::new();
    for t in &truth.0 {
        let key = (u64::from(t.ssrc), u64::from(t.src_port), u64::from(t.dst_port));
        let Some(s) = ours.get(&key) else {
            // A stream needs two packets in sequence to be told from
            // noise; the run's end may cut one to a packet.
            assert!(t.packets < 2, "{t:?} not found");
            continue;
        };
        found += 1;
        assert_eq!(s["src_ip"].as_str(), Some(t.src_ip.to_string().as_str()), "{t:?}");
        assert_eq!(s["packets"].as_u64(), Some(t.packets), "{t:?}: {s}");
        assert_eq!(s["lost"].as_i64(), Some(t.lost as i64), "{t:?}: {s}");
        assert_eq!(s["expected"].as_u64(), Some(t.packets + t.lost), "{t:?}: {s}");
        lossy += u64::from(t.lost > 0);
        *by_call
            .entry(
                s["call_id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{s}: no call"))
                    .to_string(),
            )
            .or_default() += t.packets;
        // Audio's packets leave on a 20 ms grid, each delayed by the
        // network's normal jitter of standard deviation σ around a fixed
        // delay: two packets' transit times differ by N(0, 2σ²), whose
        // mean absolute value, 2σ/√π, is what the RFC 3550 estimator
        // averages.
        if t.media == Media::Audio && t.packets >= 500 {
            let expected = 2.0 * t.jitter_sd_ms / std::f64::consts::PI.sqrt();
            let mean = s["jitter_mean_ms"].as_f64().unwrap();
            assert!(
                (mean - expected).abs() < 0.15 * expected + 0.05,
                "{t:?}: jitter mean {mean} ms, expected {expected} ms"
            );
            jitter_checked += 1;
        }
    }
    eprintln!(
        "{found} streams of {} found, {lossy} with loss; jitter checked on {jitter_checked}",
        truth.0.len()
    );
    assert!(
        found > 50 && lossy > 10 && jitter_checked > 20,
        "{found} {lossy} {jitter_checked}"
    );
    // Each call carries its streams' packets.
    for c in &calls {
        let id = c["call_id"].as_str().unwrap();
        let packets = c["c2s_rtp_packets"].as_u64().unwrap() + c["s2c_rtp_packets"].as_u64().unwrap();
        assert_eq!(packets, by_call.get(id).copied().unwrap_or(0), "{id}");
    }
}

/// A voip profile's run as a library caller sees it: frames dropped, the
/// stream truth kept.
fn library_streams(packets: u64, seed: u64) -> Vec<StreamTruth> {
    struct Nowhere;
    impl FrameSink for Nowhere {
        fn frame(&mut self, _: u64, _: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut truth = Streams::default();
    sluice_gen::generate_at(Profile::Voip, packets, seed, None, &mut Nowhere, &mut truth).unwrap();
    truth.0
}

#[test]
fn sluice_gen_writes_each_streams_truth_beside_the_capture() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("calls.pcap");
    let o = sluice(&[
        "gen",
        "--profile",
        "voip",
        "--packets",
        "100000",
        "--seed",
        "5",
        "-w",
        pcap.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let path = tmp.path().join("calls.streams.csv");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("each RTP stream to {}", path.display())),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("src_ip,src_port,dst_ip,dst_port,ssrc,media,packets,lost,jitter_sd_ms")
    );
    let rows: Vec<StreamTruth> = lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 9, "{line}");
            StreamTruth {
                src_ip: f[0].parse().unwrap(),
                src_port: f[1].parse().unwrap(),
                dst_ip: f[2].parse().unwrap(),
                dst_port: f[3].parse().unwrap(),
                ssrc: f[4].parse().unwrap(),
                media: match f[5] {
                    "audio" => Media::Audio,
                    "video" => Media::Video,
                    other => panic!("media {other}"),
                },
                packets: f[6].parse().unwrap(),
                lost: f[7].parse().unwrap(),
                jitter_sd_ms: f[8].parse().unwrap(),
            }
        })
        .collect();
    let expected = library_streams(100_000, 5);
    assert!(expected.len() > 20, "{} streams", expected.len());
    assert_eq!(rows, expected);
    // Other profiles have no streams to tell.
    let mix = tmp.path().join("mix.pcap");
    let o = sluice(&[
        "gen",
        "--profile",
        "mix",
        "--packets",
        "1000",
        "-w",
        mix.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(!tmp.path().join("mix.streams.csv").exists());
}
