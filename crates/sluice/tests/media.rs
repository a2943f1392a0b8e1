//! The real-time media detector end to end: `sluice gen --profile voip`
//! traces, whose truth file says which flows are voice, video or neither,
//! through `sluice analyze`. The figures it checks, and the bounds, are
//! those of docs/media-detection.md (`bash bench/media-eval` measures them
//! on longer traces). One test reads a capture of nDPI's regression suite
//! and is skipped, with a message, when it is absent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::{analyze, flow_records, sluice};

/// Enough for about 65 voice flows of more than 30 packets: with fewer, one
/// missed short call moves the detection rate by several points.
const PACKETS: &str = "200000";
const SEED: &str = "3";

/// An unordered flow key: L4 and the two endpoints, sorted.
type Key = (String, (String, u64), (String, u64));

fn key(l4: &str, a: (String, u64), b: (String, u64)) -> Key {
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    (l4.to_owned(), a, b)
}

/// Writes a voip trace into `dir`; returns it with its truth: flow key to
/// (class, media), media empty for flows that are not media.
fn generate(dir: &Path, packets: &str) -> (PathBuf, HashMap<Key, (String, String)>) {
    let pcap = dir.join("calls.pcap");
    let output = sluice(&[
        "gen".as_ref(),
        "--profile".as_ref(),
        "voip".as_ref(),
        "--packets".as_ref(),
        packets.as_ref(),
        "--seed".as_ref(),
        SEED.as_ref(),
        "-w".as_ref(),
        pcap.as_os_str(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = std::fs::read_to_string(dir.join("calls.truth.csv")).unwrap();
    let mut truth = HashMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let [src, sport, dst, dport, l4, class, media] = f[..] else {
            panic!("truth row {line}")
        };
        let endpoint = |ip: &str, port: &str| (ip.to_owned(), port.parse().unwrap());
        truth.insert(
            key(l4, endpoint(src, sport), endpoint(dst, dport)),
            (class.to_owned(), media.to_owned()),
        );
    }
    (pcap, truth)
}

/// The records of `input` analysed with `extra` arguments.
fn records(input: &Path, extra: &[&str]) -> Vec<Value> {
    let out = tempfile::tempdir().unwrap();
    analyze(input, out.path(), extra);
    let records = flow_records(out.path());
    // The summary counts each kind's flows as the records show them, and
    // says when packets were sampled out.
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    for kind in ["audio", "video", "file-transfer"] {
        let flows = records.iter().filter(|r| r["media"] == kind).count() as u64;
        assert_eq!(summary["media"][kind]["flows"].as_u64().unwrap_or(0), flows, "{kind}");
    }
    let sampled = summary["sampling"]["sampled_out_packets"].as_u64().unwrap_or(0);
    assert_eq!(sampled > 0, extra.contains(&"--sample"), "{}", summary["sampling"]);
    records
}

fn record_key(r: &Value) -> Key {
    let endpoint = |ip: &str, port: &str| (r[ip].as_str().unwrap().to_owned(), r[port].as_u64().unwrap());
    key(
        r["l4"].as_str().unwrap(),
        endpoint("src_ip", "src_port"),
        endpoint("dst_ip", "dst_port"),
    )
}

/// Hits and totals of one kind of flow.
#[derive(Debug, Default)]
struct Score {
    voice: usize,
    voice_audio: usize,
    voice_v6: usize,
    voice_v6_audio: usize,
    video: usize,
    video_video: usize,
    other: usize,
    /// Flows that are not media with an audio or video verdict.
    other_flagged: Vec<String>,
}

/// Scores the UDP records of more than 30 packets against the truth.
fn score(records: &[Value], truth: &HashMap<Key, (String, String)>) -> Score {
    let mut s = Score::default();
    for r in records {
        if r["l4"] != "UDP" || r["packets"].as_u64().unwrap() <= 30 {
            continue;
        }
        let (class, media) = truth.get(&record_key(r)).unwrap_or_else(|| panic!("no truth for {r}"));
        let verdict = r["media"].as_str().unwrap_or("");
        match media.as_str() {
            "audio" => {
                s.voice += 1;
                s.voice_audio += usize::from(verdict == "audio");
                if r["ip_version"] == 6 {
                    s.voice_v6 += 1;
                    s.voice_v6_audio += usize::from(verdict == "audio");
                }
            }
            "video" => {
                s.video += 1;
                s.video_video += usize::from(verdict == "video");
            }
            _ => {
                s.other += 1;
                if matches!(verdict, "audio" | "video") {
                    s.other_flagged.push(format!("{class}: {r}"));
                }
            }
        }
    }
    s
}

fn share(hits: usize, total: usize) -> f64 {
    hits as f64 / total as f64
}

#[test]
fn generated_voice_is_detected_and_nothing_else_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, truth) = generate(dir.path(), PACKETS);
    let s = score(&records(&pcap, &[]), &truth);
    assert!(s.voice >= 40 && s.other >= 30, "too few flows to judge: {s:?}");
    // Measured: 0.97 to 1.00 over seeds 1 to 8.
    assert!(share(s.voice_audio, s.voice) >= 0.95, "{s:?}");
    assert!(share(s.video_video, s.video) >= 0.85, "{s:?}");
    // Over IPv6 a G.711 packet is 20 bytes longer than the 200 of Table
    // 6.2's audio interval: the chain measures the IPv4 packet instead.
    // Measured: 0.89 to 1.00.
    assert!(s.voice_v6_audio * 10 >= s.voice_v6 * 8, "{s:?}");
    // The documented bound: at most 1 % of the flows that are not media
    // flagged audio or video (measured: none).
    assert!(
        s.other_flagged.len() * 100 <= s.other,
        "{} of {}: {:#?}",
        s.other_flagged.len(),
        s.other,
        s.other_flagged
    );
}

#[test]
fn sampled_voice_is_detected_only_with_rescaled_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, truth) = generate(dir.path(), PACKETS);
    let rescaled = score(&records(&pcap, &["--sample", "systematic:8"]), &truth);
    let observed = score(&records(&pcap, &["--sample", "systematic:8", "--no-rescale"]), &truth);
    assert_eq!(rescaled.voice, observed.voice, "sampling is seeded: the same packets");
    assert!(
        rescaled.voice >= 30,
        "too few voice flows keep 31 packets: {rescaled:?}"
    );
    // Measured over seeds 1 to 8: 0.77 to 0.90 rescaled (calls whose
    // speaker pauses vary more from window to window once sampled), 0
    // as observed (windows then average 8 gaps of 20 ms, beyond the 50 ms
    // audio bound).
    let (r, o) = (
        share(rescaled.voice_audio, rescaled.voice),
        share(observed.voice_audio, observed.voice),
    );
    assert!(r >= 0.65, "rescaled {r}: {rescaled:?}");
    assert!(o <= 0.2, "as observed {o}: {observed:?}");
    assert!(r - o >= 0.5, "rescaled {r}, as observed {o}");
}

#[test]
fn a_bad_media_config_names_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, _) = generate(dir.path(), "1000");
    let out = dir.path().join("out");
    let run = |config: &Path| {
        let output = sluice(&[
            "analyze".as_ref(),
            pcap.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
            "--media-config".as_ref(),
            config.as_os_str(),
        ]);
        assert_eq!(output.status.code(), Some(1), "{config:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let config = dir.path().join("media.yaml");
    std::fs::write(&config, "audio:\n  mean_iat_ms: {within: [[50, 0]], share: 0.6}\n").unwrap();
    let stderr = run(&config);
    assert!(
        stderr.contains(&format!("{}: field `audio.mean_iat_ms.within[0]`", config.display())),
        "{stderr}"
    );
    std::fs::write(&config, "video: {size_byte: {within: [[1, 2]], share: 1}}\n").unwrap();
    let stderr = run(&config);
    assert!(
        stderr.contains(&format!("{}: not a valid media configuration", config.display()))
            && stderr.contains("size_byte"),
        "{stderr}"
    );
    let missing = dir.path().join("missing.yaml");
    let stderr = run(&missing);
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    // The built-in file parses, and gives what no file gives (records in
    // any order: workers write them as their flows end).
    let builtin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../classify/media/default.yaml");
    let sorted = |records: Vec<Value>| {
        let mut lines: Vec<String> = records.iter().map(Value::to_string).collect();
        lines.sort();
        lines
    };
    let with_file = sorted(records(&pcap, &["--media-config", builtin.to_str().unwrap()]));
    assert_eq!(with_file, sorted(records(&pcap, &[])));
}

#[test]
fn no_media_leaves_every_record_without_media() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, _) = generate(dir.path(), "30000");
    let with = records(&pcap, &[]);
    assert!(with.iter().any(|r| r["media"] == "audio"), "the trace has calls");
    let without = records(&pcap, &["--no-media"]);
    assert_eq!(with.len(), without.len());
    assert!(without.iter().all(|r| r["media"].is_null()));
    assert!(without.iter().all(|r| r["classifier"] != "behaviour"));
}

#[test]
fn a_payload_label_outranks_the_rhythm() {
    let dir = std::env::var_os("NDPI_DEV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/ndpi-dev"));
    let path = dir.join("pcap/ieee_c37118.pcap");
    if !path.is_file() {
        eprintln!("skipping: {} not found (set NDPI_DEV_DIR)", path.display());
        return;
    }
    // A phasor measurement unit's 50 Hz data frames, 4712 to 4713: small
    // packets every 20 ms, G.729's rhythm exactly.
    let pmu = |records: Vec<Value>| {
        records
            .into_iter()
            .find(|r| r["src_port"] == 4712 && r["dst_port"] == 4713)
            .expect("the PMU's data flow")
    };
    let alone = pmu(records(&path, &["--classify", "ports"]));
    assert_eq!(alone["media"], "audio", "{alone}");
    assert_eq!(alone["classifier"], "behaviour");
    let full = pmu(records(&path, &[]));
    assert_eq!(full["app"], "IEEE-C37118", "{full}");
    assert_eq!(full["classifier"], "dissector");
    assert!(full["media"].is_null(), "{full}");
}
