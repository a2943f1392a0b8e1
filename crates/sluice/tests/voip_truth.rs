//! `sluice voip` scored against what `sluice gen --profile voip` did to
//! each RTP stream (`sluice_gen::StreamTruth`): the packets that reached
//! the capture and the loss between the first and the last of them, which
//! `streams.jsonl` must give exactly, the network jitter's standard
//! deviation, which RFC 3550's interarrival jitter estimates, and the call
//! it belongs to; and against what it did to each call
//! (`sluice_gen::CallTruth`): From, To, transport (SIP over TCP), the
//! times of the INVITE (fragmented or not), the answer and the BYE to the
//! nanosecond, the final code and the re-INVITEs.

mod common;

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use serde_json::Value;
use sluice_gen::{CallTruth, FrameSink, GenOptions, Media, Profile, StreamTruth, TruthRow, TruthSink, VoipOptions};

use common::{jsonl, sluice};

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

/// The truth of the streams, the calls and the RTCP flows.
#[derive(Default)]
struct Streams(Vec<StreamTruth>, Vec<CallTruth>, Vec<TruthRow>);

impl TruthSink for Streams {
    fn flow(&mut self, row: &TruthRow) -> std::io::Result<()> {
        if row.class == "RTCP" {
            self.2.push(*row);
        }
        Ok(())
    }

    fn stream(&mut self, row: &StreamTruth) -> std::io::Result<()> {
        self.0.push(row.clone());
        Ok(())
    }

    fn call(&mut self, row: &CallTruth) -> std::io::Result<()> {
        self.1.push(row.clone());
        Ok(())
    }
}

/// The voip profile with `options` as a pcap file, and its truth.
fn generate_pcap(pcap: &Path, packets: u64, seed: u64, options: VoipOptions) -> Streams {
    let mut file = BufWriter::new(std::fs::File::create(pcap).unwrap());
    // The pcap file header (nanosecond magic, version 2.4, snaplen, link
    // type 1: Ethernet).
    for v in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 262_144, 1] {
        file.write_all(&v.to_le_bytes()).unwrap();
    }
    let mut sink = Pcap(file);
    let mut truth = Streams::default();
    let options = GenOptions {
        voip: options,
        ..GenOptions::default()
    };
    sluice_gen::generate_with(Profile::Voip, packets, seed, &options, &mut sink, &mut truth).unwrap();
    sink.0.flush().unwrap();
    truth
}

/// `sluice voip -r pcap -o out --workers N`: its calls and streams.
/// `sluice voip` with `extra` arguments: the calls and streams it wrote.
fn sluice_voip(pcap: &Path, out: &Path, workers: &str, extra: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let mut args = vec![
        "voip",
        "-q",
        "--workers",
        workers,
        "-r",
        pcap.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    let o = sluice(&args);
    assert!(
        matches!(o.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    (jsonl(&out.join("calls.jsonl")), jsonl(&out.join("streams.jsonl")))
}

/// Every call of the truth found once with its From, To, transport, times
/// to the nanosecond, final code and re-INVITEs, and no other call; every
/// stream of the truth joined to its call. Returns the calls over TCP,
/// with a fragmented INVITE and with a re-INVITE that were found.
fn score_calls(truth: &Streams, calls: &[Value], streams: &[Value]) -> (usize, usize, usize) {
    let ours: HashMap<&str, &Value> = calls.iter().map(|c| (c["call_id"].as_str().unwrap(), c)).collect();
    assert_eq!(ours.len(), calls.len(), "one record per Call-ID");
    let (mut tcp, mut fragmented, mut moved) = (0, 0, 0);
    for t in &truth.1 {
        let c = ours
            .get(t.call_id.as_str())
            .unwrap_or_else(|| panic!("{t:?} not found"));
        let time = |v: &Value| v.as_u64();
        assert_eq!(
            (
                c["from"].as_str(),
                c["to"].as_str(),
                c["transport"].as_str(),
                time(&c["invite_ts_ns"]),
                time(&c["answer_ts_ns"]),
                time(&c["end_ts_ns"]),
                c["sip_code"].as_u64(),
                c["reinvites"].as_u64(),
            ),
            (
                Some(t.from.as_str()),
                Some(t.to.as_str()),
                Some(t.transport),
                Some(t.invite_ns),
                t.answer_ns,
                t.end_ns,
                Some(u64::from(t.final_code)),
                Some(u64::from(t.reinvites)),
            ),
            "{t:?}: {c}"
        );
        tcp += usize::from(t.transport == "tcp");
        fragmented += usize::from(t.fragmented);
        moved += usize::from(t.reinvites > 0);
    }
    assert_eq!(calls.len(), truth.1.len(), "no call the generator did not make");
    let ours = by_stream(streams);
    for t in truth.0.iter().filter(|t| t.packets >= 2) {
        let s = ours[&(u64::from(t.ssrc), u64::from(t.src_port), u64::from(t.dst_port))];
        assert_eq!(s["call_id"].as_str(), Some(t.call_id.as_str()), "{t:?}: {s}");
    }
    (tcp, fragmented, moved)
}

#[test]
fn calls_over_tcp_fragments_and_re_invites_are_found_to_the_nanosecond() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("calls.pcap");
    // A third of the calls each way; the calls alone, so that the run ends
    // with them (the default profile's test has the other traffic).
    let options = VoipOptions {
        call_rate: 2.0,
        calls: Some(90),
        background: false,
        sip_tcp: 0.3,
        sip_fragmented: 0.3,
        reinvite: 0.3,
        ..VoipOptions::default()
    };
    let truth = generate_pcap(&pcap, u64::MAX, 31, options);
    // Two workers too: the later fragments of an INVITE sent last fragment
    // first must reach the worker of its first.
    let mut calls = Vec::new();
    for workers in ["2", "1"] {
        let (found, streams) = sluice_voip(&pcap, &tmp.path().join(format!("out{workers}")), workers, &[]);
        let (tcp, fragmented, moved) = score_calls(&truth, &found, &streams);
        eprintln!(
            "{workers} workers: {} calls found: {tcp} over TCP, {fragmented} fragmented, {moved} re-INVITEd",
            found.len()
        );
        assert!(
            tcp >= 10 && fragmented >= 10 && moved >= 10,
            "{tcp} {fragmented} {moved}"
        );
        calls = found;
    }
    // Each moved call has its streams before and after the move.
    for t in truth.1.iter().filter(|t| t.reinvites > 0) {
        let c = calls.iter().find(|c| c["call_id"] == t.call_id.as_str()).unwrap();
        let n = |k: &str| c[k].as_u64().unwrap();
        let audio = truth
            .0
            .iter()
            .filter(|s| s.call_id == t.call_id && s.media == Media::Audio)
            .count();
        assert!(n("c2s_rtp_streams") + n("s2c_rtp_streams") >= audio as u64, "{c}");
    }
}

/// The streams of streams.jsonl by SSRC and ports.
fn by_stream(streams: &[Value]) -> HashMap<(u64, u64, u64), &Value> {
    streams
        .iter()
        .map(|s| {
            let n = |k: &str| s[k].as_u64().unwrap();
            ((n("ssrc"), n("src_port"), n("dst_port")), s)
        })
        .collect()
}

#[test]
fn streams_have_the_packets_loss_and_jitter_the_generator_gave_them() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("voip.pcap");
    let truth = generate_pcap(&pcap, 200_000, 11, VoipOptions::default());
    let (calls, streams) = sluice_voip(&pcap, &tmp.path().join("out"), "2", &[]);
    // The default profile's calls, a few over TCP, fragmented or moved.
    let (tcp, fragmented, moved) = score_calls(&truth, &calls, &streams);
    eprintln!("default profile: {tcp} calls over TCP, {fragmented} fragmented, {moved} re-INVITEd");
    assert!(tcp + fragmented + moved > 0);
    let ours = by_stream(&streams);
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
fn library_streams(packets: u64, seed: u64) -> Streams {
    struct Nowhere;
    impl FrameSink for Nowhere {
        fn frame(&mut self, _: u64, _: &[u8]) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut truth = Streams::default();
    sluice_gen::generate_at(Profile::Voip, packets, seed, None, &mut Nowhere, &mut truth).unwrap();
    truth
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
        Some(
            "src_ip,src_port,dst_ip,dst_port,ssrc,media,packets,lost,jitter_sd_ms,call_id,\
             rtcp_reports,rtcp_jitter_max,rtcp_cumulative_lost,rtcp_rtt_ms"
        )
    );
    let rows: Vec<StreamTruth> = lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 14, "{line}");
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
                call_id: f[9].to_owned(),
                rtcp_reports: f[10].parse().unwrap(),
                rtcp_jitter_max: f[11].parse().ok(),
                rtcp_cumulative_lost: f[12].parse().ok(),
                rtcp_rtt_ms: f[13].parse().ok(),
            }
        })
        .collect();
    let expected = library_streams(100_000, 5);
    assert!(expected.0.len() > 20, "{} streams", expected.0.len());
    assert!(
        expected.0.iter().any(|s| s.rtcp_rtt_ms.is_some()),
        "RTCP gave round trips"
    );
    assert_eq!(rows, expected.0);
    let text = std::fs::read_to_string(tmp.path().join("calls.calls.csv")).unwrap();
    let calls: Vec<&str> = text.lines().collect();
    assert_eq!(calls[0], CallTruth::HEADER);
    let expected: Vec<String> = expected.1.iter().map(CallTruth::csv).collect();
    assert!(expected.len() > 10);
    assert_eq!(calls[1..], expected[..]);
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
    assert!(!tmp.path().join("mix.calls.csv").exists());
}

/// The UDP frames of a pcap file written by [`generate_pcap`]: source and
/// destination address and port.
fn udp_frames(pcap: &Path) -> Vec<((std::net::IpAddr, u16), (std::net::IpAddr, u16))> {
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};
    let data = std::fs::read(pcap).unwrap();
    let mut at = 24;
    let mut frames = Vec::new();
    while at + 16 <= data.len() {
        let len = u32::from_le_bytes(data[at + 8..at + 12].try_into().unwrap()) as usize;
        let frame = &data[at + 16..at + 16 + len];
        at += 16 + len;
        let Ok(p) = SlicedPacket::from_ethernet(frame) else {
            continue;
        };
        let (Some(net), Some(TransportSlice::Udp(udp))) = (p.net, p.transport) else {
            continue;
        };
        let (src, dst): (std::net::IpAddr, std::net::IpAddr) = match net {
            NetSlice::Ipv4(ip) => (ip.header().source_addr().into(), ip.header().destination_addr().into()),
            NetSlice::Ipv6(ip) => (ip.header().source_addr().into(), ip.header().destination_addr().into()),
            _ => continue,
        };
        frames.push(((src, udp.source_port()), (dst, udp.destination_port())));
    }
    frames
}

/// The flow record of a truth flow, in either direction.
fn record_of<'a>(records: &'a [Value], t: &TruthRow) -> Option<&'a Value> {
    let end = |r: &Value, ip: &str, port: &str| (r[ip].as_str().unwrap().to_string(), r[port].as_u64().unwrap());
    let (a, b) = (
        (t.src_ip.to_string(), u64::from(t.src_port)),
        (t.dst_ip.to_string(), u64::from(t.dst_port)),
    );
    records.iter().find(|r| {
        let (s, d) = (end(r, "src_ip", "src_port"), end(r, "dst_ip", "dst_port"));
        (s == a && d == b) || (s == b && d == a)
    })
}

#[test]
fn rtcp_reports_give_the_jitter_loss_and_round_trip_the_generator_put_in() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("voip.pcap");
    let truth = generate_pcap(&pcap, 200_000, 17, VoipOptions::default());
    // DLSR is in 1/65536 s: the round trip a tracker computes is the
    // call's to that, and streams.jsonl rounds it to the µs.
    let tolerance_ms = 1e3 / 65_536.0 + 0.001;
    for workers in ["2", "1"] {
        let out = tmp.path().join(format!("out{workers}"));
        // With flow records, so classified flows: their labels are checked below.
        let (calls, streams) = sluice_voip(&pcap, &out, workers, &["--format", "jsonl"]);
        let ours = by_stream(&streams);
        let (mut reported, mut round_trips) = (0, 0);
        // Per call and direction, the round trip its streams' RTCP gave.
        let mut legs: HashMap<(String, String), f64> = HashMap::new();
        for t in &truth.0 {
            let Some(s) = ours.get(&(u64::from(t.ssrc), u64::from(t.src_port), u64::from(t.dst_port))) else {
                assert!(t.packets < 2, "{t:?} not found");
                continue;
            };
            assert_eq!(s["rtcp_reports"].as_u64(), Some(t.rtcp_reports), "{t:?}: {s}");
            assert_eq!(
                s["rtcp_jitter_max"].as_u64(),
                t.rtcp_jitter_max.map(u64::from),
                "{t:?}: {s}"
            );
            assert_eq!(
                s["rtcp_cumulative_lost"].as_i64(),
                t.rtcp_cumulative_lost.map(i64::from),
                "{t:?}: {s}"
            );
            let rtt = s["rtcp_rtt_mean_ms"].as_f64();
            assert_eq!(rtt.is_some(), t.rtcp_rtt_ms.is_some(), "{t:?}: {s}");
            if let (Some(ours), Some(true_rtt)) = (rtt, t.rtcp_rtt_ms) {
                assert!((ours - true_rtt).abs() <= tolerance_ms, "{t:?}: {s}");
                let direction = s["direction"].as_str().unwrap().to_string();
                legs.insert((t.call_id.clone(), direction), true_rtt);
                round_trips += 1;
            }
            reported += usize::from(t.rtcp_reports > 0);
        }
        eprintln!(
            "{workers} workers: {reported} streams of {} reported on by RTCP, {round_trips} with a round trip",
            truth.0.len()
        );
        assert!(reported > 50 && round_trips > 30, "{reported} {round_trips}");
        // The calls' round trips are their streams'.
        for c in &calls {
            let id = c["call_id"].as_str().unwrap();
            for direction in ["c2s", "s2c"] {
                let ours = c[format!("{direction}_rtt_ms")].as_f64();
                match legs.get(&(id.to_string(), direction.to_string())) {
                    Some(rtt) => assert!(ours.is_some_and(|r| (r - rtt).abs() <= tolerance_ms), "{rtt}: {c}"),
                    None => assert_eq!(ours, None, "{c}"),
                }
            }
        }
        // Every RTCP flow is labelled RTCP from the description that
        // announced it, also when the INVITE went out in fragments (the
        // classifier reads the datagram put together).
        let records = jsonl(&out.join("flows.jsonl"));
        let fragmented: Vec<&str> = truth
            .1
            .iter()
            .filter(|c| c.fragmented)
            .map(|c| c.call_id.as_str())
            .collect();
        let (mut labelled, mut of_fragmented) = (0, 0);
        for t in &truth.2 {
            let r = record_of(&records, t).unwrap_or_else(|| panic!("{t:?}: no flow record"));
            let rtp = truth
                .0
                .iter()
                .find(|s| {
                    (s.src_port + 1, s.dst_port + 1) == (t.src_port, t.dst_port)
                        || (s.dst_port + 1, s.src_port + 1) == (t.src_port, t.dst_port)
                })
                .unwrap_or_else(|| panic!("{t:?}: no RTP stream"));
            assert_eq!(
                (r["master"].as_str(), r["classifier"].as_str()),
                (Some("RTCP"), Some("dynamic-port")),
                "{t:?}: {r}"
            );
            labelled += 1;
            of_fragmented += usize::from(fragmented.contains(&rtp.call_id.as_str()));
        }
        assert!(of_fragmented > 0, "no RTCP flow of a call with a fragmented INVITE");
        assert!(labelled > 50, "{labelled} RTCP flows labelled");
    }
    // tshark reads every RTCP packet the generator wrote (it knows their
    // ports from the descriptions, as the tracker does), none malformed.
    let rtcp_flows: std::collections::HashSet<_> = truth
        .2
        .iter()
        .flat_map(|t| {
            let (a, b) = ((t.src_ip, t.src_port), (t.dst_ip, t.dst_port));
            [(a, b), (b, a)]
        })
        .collect();
    let written = udp_frames(&pcap).iter().filter(|f| rtcp_flows.contains(f)).count();
    let o = common::run(
        "tshark",
        &[
            "-r",
            pcap.to_str().unwrap(),
            "-Y",
            "rtcp",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-e",
            "rtcp.pt",
            "-e",
            "_ws.malformed",
            "-e",
            "_ws.expert",
        ],
    );
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(written > 500, "{written} RTCP packets");
    assert_eq!(lines.len(), written, "tshark's RTCP packets");
    for line in &lines {
        let f: Vec<&str> = line.split('|').collect();
        assert!(
            f[0] == "200,202" || f[0] == "201,202" || f[0] == "200,202,203" || f[0] == "201,202,203",
            "{line}"
        );
        assert!(f[1..].iter().all(|x| x.is_empty()), "{line}");
    }
}

/// A media trace of the bench's kind (bench/voip.py's "media", shorter):
/// every announced RTCP port is used up by its flow, and no announcement
/// is dropped.
#[test]
fn a_media_trace_uses_up_its_rtcp_announcements() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("media.pcap");
    let o = sluice(&[
        "gen",
        "--profile",
        "voip",
        "--call-rate",
        "2000",
        "--hold",
        "ig:117,19",
        "--media",
        "g711",
        "--no-background",
        "--sip-tcp",
        "0",
        "--sip-fragmented",
        "0",
        "--reinvite",
        "0",
        "--packets",
        "2000000",
        "-w",
        pcap.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = tmp.path().join("out");
    let o = sluice(&[
        "voip",
        "-q",
        "-r",
        pcap.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--format",
        "jsonl",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["drops"]["dropped_port_announcements"].as_u64(),
        Some(0),
        "{summary}"
    );
    // The truth's RTCP flows, each labelled from its announcement.
    let truth = std::fs::read_to_string(tmp.path().join("media.truth.csv")).unwrap();
    let rtcp: Vec<(String, u64, String, u64)> = truth
        .lines()
        .filter(|l| l.contains(",RTCP,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].to_string(),
                f[3].parse().unwrap(),
            )
        })
        .collect();
    let records = jsonl(&out.join("flows.jsonl"));
    let labelled: HashMap<(String, u64, String, u64), (String, String)> = records
        .iter()
        .map(|r| {
            (
                (
                    r["src_ip"].as_str().unwrap().to_string(),
                    r["src_port"].as_u64().unwrap(),
                    r["dst_ip"].as_str().unwrap().to_string(),
                    r["dst_port"].as_u64().unwrap(),
                ),
                (
                    r["master"].as_str().unwrap().to_string(),
                    r["classifier"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    assert!(rtcp.len() > 1_000, "{} RTCP flows", rtcp.len());
    for t in &rtcp {
        let swapped = (t.2.clone(), t.3, t.0.clone(), t.1);
        let label = labelled.get(t).or_else(|| labelled.get(&swapped));
        assert_eq!(
            label.map(|(m, c)| (m.as_str(), c.as_str())),
            Some(("RTCP", "dynamic-port")),
            "{t:?}"
        );
    }
}
