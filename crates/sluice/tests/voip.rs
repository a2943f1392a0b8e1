//! `sluice voip` against tshark on nDPI's SIP and RTP captures: every RTP
//! stream's packets and loss equal `tshark -z rtp,streams`'s and its jitter
//! is within 1 % (or 0.01 ms), and every call's Call-ID, From, To and
//! INVITE time are those of the SIP tshark reads, with no call that is not.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use common::{jsonl, ndpi_pcaps, run, sluice};

fn has(program: &str) -> bool {
    let found = Command::new(program).arg("--version").output().is_ok();
    if !found {
        eprintln!("skipping: {program} is not installed");
    }
    found
}

/// The captures of calls and media among nDPI's, by name.
fn voip_captures(dir: &Path) -> Vec<PathBuf> {
    const NAMES: [&str; 13] = [
        "sip", "rtp", "skinny", "fax", "wa_", "whatsapp", "stun", "meet", "signal", "telegram", "zoom", "mgcp", "h323",
    ];
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_lowercase();
            NAMES.iter().any(|n| name.contains(n))
        })
        .collect();
    files.sort();
    files
}

fn voip(input: &Path, out: &Path) -> (Vec<Value>, Vec<Value>) {
    let output = sluice(&["voip", "-q", "-r", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(
        matches!(output.status.code(), Some(0 | 3)),
        "{}: {}",
        input.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    (jsonl(&out.join("calls.jsonl")), jsonl(&out.join("streams.jsonl")))
}

type StreamKey = (String, u16, String, u16, u32);

/// tshark's RTP streams: packets, lost, mean and max jitter (ms).
fn tshark_streams(input: &Path) -> BTreeMap<StreamKey, (u64, i64, f64, f64)> {
    let out = run(
        "tshark",
        &[
            "-r",
            input.to_str().unwrap(),
            "-q",
            "--enable-heuristic",
            "rtp_udp",
            "-z",
            "rtp,streams",
        ],
    );
    let mut streams = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 17 || !f[6].starts_with("0x") {
            continue;
        }
        // The payload column may hold several names: count from the
        // loss's "(N%)".
        let pct = f
            .iter()
            .position(|x| x.starts_with('(') && x.ends_with("%)"))
            .expect("a loss percentage");
        let key = (
            f[2].to_string(),
            f[3].parse().unwrap(),
            f[4].to_string(),
            f[5].parse().unwrap(),
            u32::from_str_radix(&f[6][2..], 16).unwrap(),
        );
        let num = |i: usize| f[i].parse::<f64>().unwrap();
        streams.insert(
            key,
            (
                f[pct - 2].parse().unwrap(),
                f[pct - 1].parse().unwrap(),
                num(pct + 5),
                num(pct + 6),
            ),
        );
    }
    streams
}

/// UDP conversations on which tshark decodes T.38: a session description
/// moved them from RTP to UDPTL, and tshark reads their later packets as
/// fax whatever they carry.
fn t38_ports(input: &Path) -> BTreeSet<(String, u16)> {
    let out = run(
        "tshark",
        &[
            "-r",
            input.to_str().unwrap(),
            "-Y",
            "t38",
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "udp.srcport",
        ],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (ip, port) = l.split_once('\t')?;
            Some((ip.to_string(), port.parse().ok()?))
        })
        .collect()
}

fn close(ours: f64, theirs: f64) -> bool {
    (ours - theirs).abs() <= (0.01 * theirs.abs()).max(0.01)
}

#[test]
fn streams_equal_tsharks_rtp_streams() {
    let Some(dir) = ndpi_pcaps() else { return };
    if !has("tshark") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (mut compared, mut missed, mut t38) = (0, Vec::new(), 0);
    let mut wrong = Vec::new();
    for input in voip_captures(&dir) {
        let out = tmp.path().join(input.file_name().unwrap());
        let (calls, streams) = voip(&input, &out);
        let ours: BTreeMap<StreamKey, &Value> = streams
            .iter()
            .map(|s| {
                let key = (
                    s["src_ip"].as_str().unwrap().to_string(),
                    s["src_port"].as_u64().unwrap() as u16,
                    s["dst_ip"].as_str().unwrap().to_string(),
                    s["dst_port"].as_u64().unwrap() as u16,
                    s["ssrc"].as_u64().unwrap() as u32,
                );
                (key, s)
            })
            .collect();
        let fax = t38_ports(&input);
        for (key, (packets, lost, mean, max)) in tshark_streams(&input) {
            let Some(s) = ours.get(&key) else {
                // Where SIP set the media up, every stream is found.
                assert!(calls.is_empty(), "{}: {key:?} not found", input.display());
                missed.push(format!("{}: {key:?}, {packets} packets", input.display()));
                continue;
            };
            if fax.contains(&(key.0.clone(), key.1)) || fax.contains(&(key.2.clone(), key.3)) {
                // Packets tshark takes for T.38 are RTP to the tracker,
                // which does not follow the switch (docs/voip.md).
                t38 += 1;
                continue;
            }
            compared += 1;
            let got = (
                s["packets"].as_u64().unwrap(),
                s["lost"].as_i64().unwrap(),
                s["jitter_mean_ms"].as_f64().unwrap(),
                s["jitter_max_ms"].as_f64().unwrap(),
            );
            if got.0 != packets || got.1 != lost || !close(got.2, mean) || !close(got.3, max) {
                wrong.push(format!(
                    "{}: {key:?}: tshark {:?}, sluice {got:?}",
                    input.display(),
                    (packets, lost, mean, max)
                ));
            }
        }
    }
    eprintln!(
        "{compared} streams compared, {t38} on T.38 conversations skipped, {} missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
    assert!(
        wrong.is_empty(),
        "streams that differ from tshark's:\n{}",
        wrong.join("\n")
    );
    assert!(compared >= 40, "only {compared} streams compared");
    // The misses are flows that open with something else than RTP, STUN
    // or DTLS for longer than the tracker looks (WhatsApp's keep-alives),
    // and single packets tshark's heuristic takes for RTP in encrypted
    // flows.
    assert!(
        missed.len() * 3 <= compared,
        "{} of {} streams missed",
        missed.len(),
        compared
    );
}

#[test]
fn calls_are_the_invites_tshark_reads() {
    let Some(dir) = ndpi_pcaps() else { return };
    if !has("tshark") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for input in voip_captures(&dir) {
        let out = tmp.path().join(input.file_name().unwrap());
        let (calls, _) = voip(&input, &out);
        let sip = run(
            "tshark",
            &[
                "-r",
                input.to_str().unwrap(),
                "-Y",
                "sip.Method == \"INVITE\"",
                "-T",
                "fields",
                "-E",
                "separator=|",
                "-e",
                "frame.time_epoch",
                "-e",
                "sip.Call-ID",
                "-e",
                "sip.from.addr",
                "-e",
                "sip.to.addr",
            ],
        );
        // The first INVITE of each Call-ID opens its call.
        let mut invites: BTreeMap<String, (f64, String, String)> = BTreeMap::new();
        for line in String::from_utf8_lossy(&sip.stdout).lines() {
            let f: Vec<&str> = line.split('|').collect();
            let time: f64 = f[0].parse().unwrap();
            invites
                .entry(f[1].to_string())
                .and_modify(|e| {
                    if time < e.0 {
                        *e = (time, f[2].to_string(), f[3].to_string());
                    }
                })
                .or_insert((time, f[2].to_string(), f[3].to_string()));
        }
        let ours: BTreeMap<String, &Value> = calls
            .iter()
            .map(|c| (c["call_id"].as_str().unwrap().to_string(), c))
            .collect();
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            invites.keys().collect::<Vec<_>>(),
            "{}: calls",
            input.display()
        );
        for (id, (time, from, to)) in &invites {
            let c = ours[id];
            assert_eq!(c["from"].as_str(), Some(from.as_str()), "{}: {id}", input.display());
            assert_eq!(c["to"].as_str(), Some(to.as_str()), "{}: {id}", input.display());
            let invite = c["invite_ts_ns"].as_u64().unwrap() as f64 / 1e9;
            assert!(
                (invite - time).abs() < 0.01,
                "{}: {id}: {invite} vs {time}",
                input.display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "only {checked} calls checked");
}

/// Encrypted and binary UDP (ESP over UDP, AFS RX, QUIC, BACnet, RakNet,
/// Alexa, Dropbox) often has a first byte that reads as RTP version 2:
/// none of it is taken for a stream that tshark does not see.
#[test]
fn no_stream_where_tshark_sees_none() {
    let Some(dir) = ndpi_pcaps() else { return };
    if !has("tshark") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut false_streams = Vec::new();
    for name in [
        "ipsec_isakmp_esp.pcap",
        "rx.pcap",
        "quic_interop_V.pcapng",
        "bacnet.pcap",
        "raknet.pcap",
        "alexa-app.pcapng",
        "dropbox.pcap",
    ] {
        let input = dir.join(name);
        if !input.exists() {
            eprintln!("skipping {name}: not found");
            continue;
        }
        let (calls, streams) = voip(&input, &tmp.path().join(name));
        assert!(calls.is_empty(), "{name}: {calls:?}");
        let theirs = tshark_streams(&input);
        for s in &streams {
            let key = (
                s["src_ip"].as_str().unwrap().to_string(),
                s["src_port"].as_u64().unwrap() as u16,
                s["dst_ip"].as_str().unwrap().to_string(),
                s["dst_port"].as_u64().unwrap() as u16,
                s["ssrc"].as_u64().unwrap() as u32,
            );
            if !theirs.contains_key(&key) {
                false_streams.push(format!("{name}: {key:?}, {} packets", s["packets"]));
            }
        }
    }
    assert!(
        false_streams.is_empty(),
        "streams tshark does not see:\n{}",
        false_streams.join("\n")
    );
}

/// `sluice gen --profile voip`: every SIP flow of the truth file is one
/// call, every RTP flow (audio and video) carries streams, and no other
/// flow (DNS, NTP, QUIC, a game, syslog, SNMP) does.
#[test]
fn the_generated_calls_and_media_are_the_truths() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("voip.pcap");
    run(
        common::SLUICE,
        &[
            "gen",
            "--profile",
            "voip",
            "--packets",
            "300000",
            "-w",
            pcap.to_str().unwrap(),
        ],
    );
    let (calls, streams) = voip(&pcap, &tmp.path().join("out"));
    let truth = std::fs::read_to_string(tmp.path().join("voip.truth.csv")).unwrap();
    let mut lines = truth.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (src, sport, dst, dport, class) = (
        col("src_ip"),
        col("src_port"),
        col("dst_ip"),
        col("dst_port"),
        col("class"),
    );
    // A flow by its endpoints, whichever way round.
    let flow = |a: (String, u64), b: (String, u64)| if a < b { (a, b) } else { (b, a) };
    let (mut sip, mut rtp) = (0, BTreeSet::new());
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        match f[class] {
            "SIP" => sip += 1,
            "RTP" => {
                rtp.insert(flow(
                    (f[src].to_string(), f[sport].parse().unwrap()),
                    (f[dst].to_string(), f[dport].parse().unwrap()),
                ));
            }
            _ => {}
        }
    }
    assert!(sip > 10 && rtp.len() > 10, "{sip} SIP flows, {} RTP flows", rtp.len());
    assert_eq!(calls.len(), sip);
    let ours: BTreeSet<_> = streams
        .iter()
        .map(|s| {
            flow(
                (
                    s["src_ip"].as_str().unwrap().to_string(),
                    s["src_port"].as_u64().unwrap(),
                ),
                (
                    s["dst_ip"].as_str().unwrap().to_string(),
                    s["dst_port"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(ours, rtp);
    // The generator's calls describe their media: every stream is joined.
    assert!(streams.iter().all(|s| !s["call_id"].is_null()), "an orphan stream");
}

/// `sluice voip` writes calls and streams, and flow records only when
/// asked (`--format`): then its flows are classified, which changes none
/// of its calls or streams (the tracker finds SIP and RTP itself).
#[test]
fn flow_records_only_when_asked_and_calls_the_same_either_way() {
    let Some(dir) = ndpi_pcaps() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for input in voip_captures(&dir) {
        let name = input.file_name().unwrap().to_string_lossy().to_string();
        let (bare, with) = (
            tmp.path().join(format!("{name}-bare")),
            tmp.path().join(format!("{name}-with")),
        );
        let (calls, streams) = voip(&input, &bare);
        assert!(!bare.join("flows.jsonl").exists(), "{name}: flow records not asked for");
        let config = std::fs::read_to_string(bare.join("probe.yaml")).unwrap();
        assert!(config.contains("mode: off"), "{name}: flows not classified:\n{config}");
        let output = sluice(&[
            "voip",
            "-q",
            "-r",
            input.to_str().unwrap(),
            "-o",
            with.to_str().unwrap(),
            "--format",
            "jsonl",
        ]);
        assert!(matches!(output.status.code(), Some(0 | 3)), "{name}");
        let sorted = |mut v: Vec<Value>| {
            v.sort_by_key(|x| x.to_string());
            v
        };
        assert_eq!(sorted(calls), sorted(jsonl(&with.join("calls.jsonl"))), "{name}: calls");
        assert_eq!(
            sorted(streams),
            sorted(jsonl(&with.join("streams.jsonl"))),
            "{name}: streams"
        );
        let summary: Value =
            serde_json::from_str(&std::fs::read_to_string(with.join("summary.json")).unwrap()).unwrap();
        let records = jsonl(&with.join("flows.jsonl"));
        assert_eq!(
            records.len() as u64,
            summary["flows"].as_u64().unwrap(),
            "{name}: a record per flow"
        );
        if name == "sip.pcap" {
            assert!(
                records.iter().any(|r| r["master"] == "SIP"),
                "{name}: the SIP flows are classified"
            );
        }
    }
}
