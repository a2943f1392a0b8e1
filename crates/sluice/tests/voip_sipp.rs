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

use common::{Namespaces, SLUICE, jsonl, run};

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

/// The scenarios of `tests/sipp/`: SIPp's own XML, one UAS and one UAC
/// each.
const SCENARIOS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sipp");

/// What SIPp's message log says of each call: the final responses it
/// received to INVITEs, in order, and the media ports the 200s to them
/// named.
fn sipp_finals(log: &str) -> BTreeMap<String, (Vec<u64>, Vec<u64>)> {
    let mut calls: BTreeMap<String, (Vec<u64>, Vec<u64>)> = BTreeMap::new();
    for block in log.split("----------------------------------------------- ").skip(1) {
        let Some((_, rest)) = block.split_once('\n') else {
            continue;
        };
        if !rest.contains("message received") {
            continue;
        }
        let Some(status) = rest.lines().find_map(|l| l.strip_prefix("SIP/2.0 ")) else {
            continue;
        };
        let code: u64 = status[..3].parse().unwrap();
        let header = |name: &str| rest.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
        if code < 200 || !header("CSeq:").unwrap().ends_with("INVITE") {
            continue;
        }
        let call = calls.entry(header("Call-ID:").unwrap().to_string()).or_default();
        call.0.push(code);
        if let Some(m) = rest.lines().find_map(|l| l.strip_prefix("m=audio ")) {
            call.1.push(m.split(' ').next().unwrap().parse().unwrap());
        }
    }
    calls
}

/// The last line of SIPp's `-trace_stat` file, by column.
fn sipp_stats(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let names: Vec<&str> = lines.next().unwrap().split(';').collect();
    let last: Vec<&str> = lines.next_back().unwrap().split(';').collect();
    names
        .iter()
        .zip(last)
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Calls SIPp's scenarios refuse (486 Busy Here, 503 Service
/// Unavailable), cancel after ringing (487) and move mid-call (a
/// re-INVITE whose answer names another port of the callee): each call
/// SIPp made is found, in the state and with the SIP code SIPp's own logs
/// give, no other call, and the moved call's media to both ports is its.
#[test]
fn sipp_refused_cancelled_and_moved_calls_end_as_sipp_ended_them() {
    if !has("sipp", "-v") || !has("tshark", "--version") || !Path::new(SIPP_SHARE).is_dir() {
        return;
    }
    let Some(ns) = Namespaces::create("voipend") else {
        return;
    };
    for (name, link, addr) in [(&ns.a, "va", "10.78.0.1/24"), (&ns.b, "vb", "10.78.0.2/24")] {
        run("ip", &["-n", name, "addr", "add", addr, "dev", link]);
        run("ip", &["-n", name, "link", "set", "lo", "up"]);
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    // The re-INVITE scenario plays pcap/dtmf_2833_1.pcap from its working
    // directory, to the callee's port before and after the move.
    std::fs::create_dir(tmp.path().join("pcap")).unwrap();
    std::fs::copy(
        Path::new(SIPP_SHARE).join("dtmf_2833_1.pcap"),
        tmp.path().join("pcap/dtmf_2833_1.pcap"),
    )
    .unwrap();
    let probe = Command::new("ip")
        .args(["netns", "exec", &ns.b, SLUICE, "probe", "-i", "vb", "--voip"])
        .args([
            "--no-flows",
            "--no-stats",
            "--duration",
            "300s",
            "-q",
            "-o",
            out.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !out.join("probe.yaml").exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "the probe did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Scenario pairs, the To user naming what the UAC does, and calls.
    let runs = [
        ("uas_486.xml", "uac_fail.xml", "busy", 2),
        ("uas_503.xml", "uac_fail.xml", "unavailable", 2),
        ("uas_cancel.xml", "uac_cancel.xml", "cancel", 2),
        // One call: SIPp gives every call the same media ports, and two
        // calls' media at once would be one flow.
        ("uas_reinvite.xml", "uac_reinvite.xml", "move", 1),
    ];
    for (uas, uac, service, calls) in runs {
        let mut server = Command::new("ip")
            .args(["netns", "exec", &ns.b, "sipp", "-sf", &format!("{SCENARIOS}/{uas}")])
            .args(["-i", "10.78.0.2", "-p", "5060", "-mi", "10.78.0.2", "-nostdin"])
            .current_dir(tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let calls = calls.to_string();
        let client = Command::new("ip")
            .args(["netns", "exec", &ns.a, "sipp", "-sf", &format!("{SCENARIOS}/{uac}")])
            .args([
                "10.78.0.2:5060",
                "-i",
                "10.78.0.1",
                "-p",
                "5060",
                "-mi",
                "10.78.0.1",
                "-s",
                service,
            ])
            .args([
                "-m",
                &calls,
                "-l",
                &calls,
                "-r",
                "2",
                "-timeout",
                "60",
                "-timeout_error",
                "-nostdin",
            ])
            .args(["-trace_msg", "-message_file", &format!("{service}.log")])
            .args(["-trace_stat", "-stf", &format!("{service}.csv")])
            .current_dir(tmp.path())
            .output()
            .unwrap();
        let _ = server.kill();
        let _ = server.wait();
        assert!(
            client.status.success(),
            "sipp {uac}: {}",
            String::from_utf8_lossy(&client.stdout)
        );
        // SIPp's statistics: every call placed went through the scenario.
        let stats = sipp_stats(&tmp.path().join(format!("{service}.csv")));
        assert_eq!(stats["TotalCallCreated"], calls, "{service}: {stats:?}");
        assert_eq!(stats["SuccessfulCall(C)"], calls, "{service}: {stats:?}");
        assert_eq!(stats["FailedCall(C)"], "0", "{service}: {stats:?}");
    }
    // The last messages reach the probe's rings before it is stopped.
    std::thread::sleep(Duration::from_secs(1));
    run("kill", &["-INT", &probe.id().to_string()]);
    let probe = probe.wait_with_output().unwrap();
    assert!(probe.status.success(), "{}", String::from_utf8_lossy(&probe.stderr));

    let calls = jsonl(&out.join("calls.jsonl"));
    let streams = jsonl(&out.join("streams.jsonl"));
    let ours: BTreeMap<String, &Value> = calls
        .iter()
        .map(|c| (c["call_id"].as_str().unwrap().to_string(), c))
        .collect();
    let mut placed = BTreeMap::new();
    for (_, _, service, calls) in runs {
        let log = std::fs::read_to_string(tmp.path().join(format!("{service}.log"))).unwrap();
        let invites = sipp_invites(&log);
        assert_eq!(invites.len(), calls, "{service}");
        let finals = sipp_finals(&log);
        for (id, (time, from, to)) in invites {
            let c = ours
                .get(&id)
                .unwrap_or_else(|| panic!("{service}: {id} not found in {calls:?}"));
            assert_eq!(c["from"].as_str(), Some(from.as_str()), "{id}");
            assert_eq!(c["to"].as_str(), Some(to.as_str()), "{id}");
            let invite = c["invite_ts_ns"].as_u64().unwrap() as f64 / 1e9;
            assert!(
                (invite - time).abs() < 0.010,
                "{id}: INVITE at {invite}, SIPp says {time}"
            );
            // The code of the call's outcome is the first final response
            // SIPp received to an INVITE.
            let (codes, ports) = &finals[&id];
            let state = match (service, codes[0]) {
                ("busy", 486) | ("unavailable", 503) => "failed",
                ("cancel", 487) => "cancelled",
                ("move", 200) => "completed",
                other => panic!("{id}: SIPp received {other:?}"),
            };
            assert_eq!(
                (c["state"].as_str(), c["sip_code"].as_u64()),
                (Some(state), Some(codes[0])),
                "{id}: {c}"
            );
            assert!(c["end_ts_ns"].as_u64().is_some(), "{id}: {c}");
            let answered = c["answer_ts_ns"].as_u64().is_some();
            assert_eq!(answered, state == "completed", "{id}: {c}");
            if state == "cancelled" {
                assert!(c["ringing_ts_ns"].as_u64().is_some(), "{id}: {c}");
            }
            let mine: Vec<&Value> = streams.iter().filter(|s| s["call_id"].as_str() == Some(&id)).collect();
            if service == "move" {
                // Answered on one port, moved to another by the 200 to
                // the re-INVITE: a stream to each, both the call's,
                // each every RTP packet SIPp played.
                assert_eq!(c["reinvites"].as_u64(), Some(1), "{id}: {c}");
                assert_eq!(codes, &[200, 200], "{id}");
                assert_eq!(ports.len(), 2, "{id}: {ports:?}");
                assert_ne!(ports[0], ports[1]);
                let events = rtp_packets(&format!("{SIPP_SHARE}/dtmf_2833_1.pcap"));
                for port in ports {
                    let s = mine
                        .iter()
                        .find(|s| s["dst_port"].as_u64() == Some(*port))
                        .unwrap_or_else(|| panic!("{id}: no stream to port {port} in {mine:?}"));
                    assert_eq!(s["direction"].as_str(), Some("c2s"), "{id}: {s}");
                    assert_eq!(s["packets"].as_u64(), Some(events), "{id}: {s}");
                }
                assert_eq!(mine.len(), 2, "{id}: {mine:?}");
                assert_eq!(c["c2s_rtp_streams"].as_u64(), Some(2), "{id}: {c}");
                assert_eq!(c["c2s_rtp_packets"].as_u64(), Some(2 * events), "{id}: {c}");
            } else {
                assert!(mine.is_empty(), "{id}: {mine:?}");
            }
            placed.insert(id, state);
        }
    }
    // No call SIPp did not place, and no media without its call.
    assert_eq!(ours.keys().collect::<Vec<_>>(), placed.keys().collect::<Vec<_>>());
    assert!(streams.iter().all(|s| s["call_id"].is_string()), "{streams:?}");
}
