//! SIPp (Debian's sip-tester) calls through a veth pair between two
//! network namespaces, the probe's `voip` listener watching the callee's
//! end: every call SIPp made is found, with SIPp's Call-ID, From and To
//! and INVITE time (within 10 ms), no call that SIPp did not make, and
//! each call's streams carry every RTP packet of the capture SIPp played.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::{Namespaces, SLUICE, run};

const CALLS: u32 = 4;
const SIPP_SHARE: &str = "/usr/share/sip-tester";

fn has(program: &str, arg: &str) -> bool {
    let found = Command::new(program).arg(arg).output().is_ok();
    if !found {
        eprintln!("skipping: {program} is not installed");
    }
    found
}

/// Seconds since the epoch of SIPp's `2026-11-29 03:53:17.858508` (UTC).
fn sipp_time(text: &str) -> f64 {
    let (date, time) = text.trim().split_once(' ').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let days = sluice_units::calendar::days_from_civil(d[0], d[1] as u32, d[2] as u32);
    let t: Vec<f64> = time.split(':').map(|x| x.parse().unwrap()).collect();
    days as f64 * 86_400.0 + t[0] * 3600.0 + t[1] * 60.0 + t[2]
}

/// The INVITEs SIPp sent: Call-ID to time, From URI and To URI.
fn sipp_invites(log: &str) -> BTreeMap<String, (f64, String, String)> {
    let mut invites = BTreeMap::new();
    for block in log.split("----------------------------------------------- ").skip(1) {
        let (stamp, rest) = block.split_once('\n').unwrap();
        if !rest.contains("message sent") || !rest.contains("\nINVITE ") {
            continue;
        }
        let header = |name: &str| {
            rest.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
                .unwrap()
        };
        let uri = |v: String| v[v.find('<').unwrap() + 1..v.find('>').unwrap()].to_string();
        let call_id = header("Call-ID:");
        invites
            .entry(call_id)
            .or_insert((sipp_time(stamp), uri(header("From:")), uri(header("To:"))));
    }
    invites
}

/// RTP packets of a capture SIPp plays, as tshark counts them.
fn rtp_packets(pcap: &str) -> u64 {
    let out = run(
        "tshark",
        &[
            "-r",
            pcap,
            "--enable-heuristic",
            "rtp_udp",
            "-Y",
            "rtp",
            "-T",
            "fields",
            "-e",
            "rtp.seq",
        ],
    );
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn sipp_calls_are_found_with_their_media() {
    if !has("sipp", "-v") || !has("tshark", "--version") || !Path::new(SIPP_SHARE).is_dir() {
        return;
    }
    let Some(ns) = Namespaces::create("voip") else { return };
    for (name, link, addr) in [(&ns.a, "va", "10.77.0.1/24"), (&ns.b, "vb", "10.77.0.2/24")] {
        run("ip", &["-n", name, "addr", "add", addr, "dev", link]);
        run("ip", &["-n", name, "link", "set", "lo", "up"]);
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // The scenario plays pcap/g711a.pcap and pcap/dtmf_2833_1.pcap from
    // its working directory.
    std::fs::create_dir(tmp.path().join("pcap")).unwrap();
    for f in ["g711a.pcap", "dtmf_2833_1.pcap"] {
        std::fs::copy(Path::new(SIPP_SHARE).join(f), tmp.path().join("pcap").join(f)).unwrap();
    }
    let probe = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.b,
            SLUICE,
            "probe",
            "-i",
            "vb",
            "--voip",
            "--no-flows",
            "--no-stats",
        ])
        .args(["--duration", "25s", "-q", "-o", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !out.join("probe.yaml").exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "the probe did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut uas = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.b,
            "sipp",
            "-sn",
            "uas",
            "-i",
            "10.77.0.2",
            "-p",
            "5060",
        ])
        .args(["-mi", "10.77.0.2", "-nostdin"])
        .current_dir(tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let calls = CALLS.to_string();
    let uac = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.a,
            "sipp",
            "-sn",
            "uac_pcap",
            "10.77.0.2:5060",
            "-i",
            "10.77.0.1",
        ])
        .args(["-p", "5060", "-mi", "10.77.0.1", "-m", &calls, "-r", "2", "-l", &calls])
        .args(["-trace_msg", "-message_file", "uac.log", "-nostdin"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    // The UAS serves until it is stopped (`ip netns exec` runs it in its
    // own process).
    let _ = uas.kill();
    let _ = uas.wait();
    assert!(uac.status.success(), "sipp: {}", String::from_utf8_lossy(&uac.stdout));
    let probe = probe.wait_with_output().unwrap();
    assert!(probe.status.success(), "{}", String::from_utf8_lossy(&probe.stderr));

    let sipp = sipp_invites(&std::fs::read_to_string(tmp.path().join("uac.log")).unwrap());
    assert_eq!(sipp.len(), CALLS as usize);
    let calls = jsonl(&out.join("calls.jsonl"));
    let ours: BTreeMap<String, &Value> = calls
        .iter()
        .map(|c| (c["call_id"].as_str().unwrap().to_string(), c))
        .collect();
    assert_eq!(ours.keys().collect::<Vec<_>>(), sipp.keys().collect::<Vec<_>>());
    for (id, (time, from, to)) in &sipp {
        let c = ours[id];
        assert_eq!(c["from"].as_str(), Some(from.as_str()), "{id}");
        assert_eq!(c["to"].as_str(), Some(to.as_str()), "{id}");
        let invite = c["invite_ts_ns"].as_u64().unwrap() as f64 / 1e9;
        assert!(
            (invite - time).abs() < 0.010,
            "{id}: INVITE at {invite}, SIPp says {time}"
        );
        assert_eq!(
            (c["state"].as_str(), c["sip_code"].as_u64()),
            (Some("completed"), Some(200)),
            "{id}"
        );
    }
    // Each call's caller played the two captures: a G.711 A-law stream and
    // an RFC 2833 event stream, every packet of both in the call's record.
    let (voice, events) = (
        rtp_packets(&format!("{SIPP_SHARE}/g711a.pcap")),
        rtp_packets(&format!("{SIPP_SHARE}/dtmf_2833_1.pcap")),
    );
    let streams = jsonl(&out.join("streams.jsonl"));
    for id in sipp.keys() {
        let mine: Vec<&Value> = streams.iter().filter(|s| s["call_id"].as_str() == Some(id)).collect();
        let by_pt = |pt: u64| {
            mine.iter()
                .find(|s| s["payload_type"].as_u64() == Some(pt))
                .unwrap_or_else(|| panic!("{id}: no stream of payload type {pt} in {mine:?}"))
        };
        let pcma = by_pt(8);
        assert_eq!(pcma["packets"].as_u64(), Some(voice), "{id}");
        assert_eq!(pcma["lost"].as_i64(), Some(0), "{id}");
        assert_eq!(pcma["direction"].as_str(), Some("c2s"), "{id}");
        assert_eq!(by_pt(101)["packets"].as_u64(), Some(events), "{id}");
        assert_eq!(ours[id]["c2s_rtp_packets"].as_u64(), Some(voice + events), "{id}");
    }
}
