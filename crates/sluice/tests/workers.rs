//! The set of flow records does not depend on the number of workers.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn sluice(args: &[&str]) {
    let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .status()
        .expect("sluice runs");
    assert!(status.success(), "sluice {args:?}: {status}");
}

fn records(dir: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(dir.join("flows.jsonl"))
        .expect("flows.jsonl")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn one_two_and_three_workers_write_identical_records() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = common::shared_mix("workers-mix", 150_000, 42);
    let trace = trace.to_str().unwrap();
    let mut sets = Vec::new();
    for workers in ["1", "2", "3"] {
        let out = tmp.path().join(format!("out{workers}"));
        sluice(&[
            "analyze",
            trace,
            "-o",
            out.to_str().unwrap(),
            "-q",
            "--workers",
            workers,
        ]);
        sets.push(records(&out));
        // The mix answers the same server addresses over and over: every
        // answer a flow may still ask about must be kept, not dropped.
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["drops"]["dropped_dns_names"], 0, "{workers} workers");
        // Each thread's CPU time, in seconds: some, and no more than the
        // run's wall time (with a margin: the clocks are read at slightly
        // different moments); so for the time it waited.
        let wall = summary["wall_seconds"].as_f64().unwrap();
        let times = &summary["threads"];
        // A thread that only reads runs when the workers leave a core free.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spare_core = workers.parse::<usize>().unwrap() < cores;
        assert_eq!(times["reader"].is_object(), spare_core, "{times} on {cores} cores");
        let threads: Vec<&serde_json::Value> = [&times["record_writer"]]
            .into_iter()
            .chain(spare_core.then_some(&times["reader"]))
            .chain(times["workers"].as_array().unwrap())
            .collect();
        assert_eq!(
            threads.len(),
            1 + usize::from(spare_core) + workers.parse::<usize>().unwrap(),
            "{times}"
        );
        for thread in &threads {
            let cpu = thread["cpu_seconds"].as_f64().unwrap();
            let waited = thread["wait_seconds"].as_f64().unwrap();
            assert!(cpu > 0.0 && cpu <= wall + 0.05, "{times} in {wall} s");
            assert!((0.0..=wall + 0.05).contains(&waited), "{times} in {wall} s");
        }
        // The workers read the input in turns (with the reader thread if
        // there is one): between them, for part of the run; the writer
        // never.
        assert!(times["record_writer"].get("reading_seconds").is_none(), "{times}");
        let worker_times = times["workers"].as_array().unwrap();
        let reading: Vec<f64> = threads
            .iter()
            .filter_map(|t| t.get("reading_seconds").map(|r| r.as_f64().unwrap()))
            .collect();
        assert!(!reading.is_empty(), "{times}");
        assert!(
            reading.iter().all(|r| (0.0..=wall + 0.05).contains(r)),
            "{times} in {wall} s"
        );
        assert!(reading.iter().sum::<f64>() > 0.0, "{times}");
        // Every worker waits at least once: for its first packets, or at
        // the end for the others.
        assert!(worker_times.iter().all(|w| w["waits"].as_u64().unwrap() > 0), "{times}");
    }
    assert!(sets[0].len() > 5_000, "only {} flows", sets[0].len());
    assert_eq!(sets[0], sets[1], "1 vs 2 workers");
    assert_eq!(sets[0], sets[2], "1 vs 3 workers");
}

/// `--order start`: the file itself, not only its set of lines, is the same
/// for any number of workers, in the order the flows began.
#[test]
fn records_sorted_by_start_are_one_file_for_any_number_of_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = common::shared_mix("workers-sorted", 60_000, 9);
    let trace = trace.to_str().unwrap();
    let run = |workers: &str, format: &str, order: &str| {
        let out = tmp.path().join(format!("{format}-{order}-{workers}"));
        let mut args = vec![
            "analyze",
            trace,
            "-o",
            out.to_str().unwrap(),
            "-q",
            "--workers",
            workers,
            "--format",
            format,
        ];
        if !order.is_empty() {
            args.extend(["--order", order]);
        }
        sluice(&args);
        let name = format!("flows.{format}");
        let names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        // The hidden file the records were sorted from is gone.
        assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
        std::fs::read_to_string(out.join(name)).unwrap()
    };
    let one = run("1", "jsonl", "start");
    for workers in ["2", "3"] {
        assert!(one == run(workers, "jsonl", "start"), "1 vs {workers} workers differ");
    }
    // The same records as written as flows end, now in the order their
    // first packets came: in a capture in time order, by first time.
    let mut as_they_end: Vec<&str> = Vec::new();
    let ended = run("2", "jsonl", "");
    as_they_end.extend(ended.lines());
    as_they_end.sort_unstable();
    let mut sorted: Vec<&str> = one.lines().collect();
    assert!(sorted.len() > 2_000, "only {} flows", sorted.len());
    let firsts: Vec<u64> = sorted
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["first_ts_ns"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(firsts.windows(2).all(|w| w[0] <= w[1]), "not in the order flows began");
    sorted.sort_unstable();
    assert_eq!(sorted, as_they_end);
    // CSV: the header first, then the same order.
    let csv = run("1", "csv", "start");
    assert!(csv == run("3", "csv", "start"), "CSV: 1 vs 3 workers differ");
    assert!(csv.starts_with("flow_id,"), "{}", &csv[..80.min(csv.len())]);
    assert_eq!(csv.lines().count(), firsts.len() + 1);
}

/// Real traffic teaches across workers: a DNS answer names the service of
/// a TLS flow on another worker, an FTP or SIP session announces the port
/// of a flow that hashes elsewhere. And the captures, read one after the
/// other, move the clock back and forth. None of it may depend on which
/// worker happened to run ahead.
#[test]
fn every_ndpi_capture_read_at_once_gives_the_same_records_for_one_two_and_three_workers() {
    let Some(pcaps) = common::ndpi_pcaps() else {
        return;
    };
    let mut inputs: Vec<String> = std::fs::read_dir(&pcaps)
        .unwrap()
        .map(|e| e.unwrap().path().to_str().unwrap().to_string())
        .collect();
    inputs.sort();
    let tmp = tempfile::tempdir().unwrap();
    let mut sets = Vec::new();
    for workers in ["1", "2", "3"] {
        let out = tmp.path().join(format!("out{workers}"));
        let mut args = vec!["analyze", "-o", out.to_str().unwrap(), "-q", "--workers", workers];
        args.extend(inputs.iter().map(String::as_str));
        // Some captures are broken on purpose: a partial result (status 3).
        let status = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(&args)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(3), "{status}");
        sets.push(records(&out));
    }
    let count = |what: &str| sets[0].iter().filter(|r| r.contains(what)).count();
    assert!(count(r#""classifier":"dynamic-port""#) > 0, "no announced flow");
    assert!(count(r#""end_reason":"idle""#) > 0, "no flow went idle");
    // The application of WhatsApp's peer-to-peer media comes from the STUN
    // its endpoint exchanged with WhatsApp's servers, on another flow.
    assert!(
        count(r#""app":"SRTP.WhatsAppCall""#) > 0,
        "no media named from its endpoint"
    );
    for (i, set) in sets.iter().enumerate().skip(1) {
        let differ: Vec<_> = sets[0].symmetric_difference(set).take(4).collect();
        assert!(differ.is_empty(), "1 vs {} workers: {differ:#?}", i + 1);
    }
}

#[test]
fn generated_flows_are_all_found_with_exact_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("wc.pcap");
    let trace = trace.to_str().unwrap();
    sluice(&["gen", "--profile", "worst-case", "--packets", "50000", "-w", trace]);
    let out = tmp.path().join("out");
    sluice(&["analyze", trace, "-o", out.to_str().unwrap(), "-q"]);
    let lines = records(&out);
    assert_eq!(lines.len(), 10_000);
    for line in &lines {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["packets"], 5, "{line}");
        assert_eq!(r["bytes"], 5 * 64);
        assert_eq!(r["c2s_packets"], 3);
        assert_eq!(r["s2c_packets"], 2);
        // 67.2 ns apart at line rate: the whole handshake is measured.
        assert!(r["handshake_rtt_ns"].as_u64().unwrap() > 0);
        assert_eq!(r["first_sizes"].as_array().unwrap().len(), 5);
        assert_eq!(r["l4"], "TCP");
    }
}

/// A capture's clock steps back where rotated files are read out of
/// order: flows idle by the latest time seen come back with earlier
/// packets. The flows the records describe must be the same however many
/// workers share the input, though which worker hears of the clock when
/// differs with their number.
#[test]
fn a_clock_that_steps_back_gives_the_same_records_for_one_two_and_four_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let mut split = 0;
    for seed in 1..=3u64 {
        let parts = stepping_back_capture(seed, 6000);
        let paths: Vec<String> = ["b", "c", "a"]
            .iter()
            .map(|name| {
                tmp.path()
                    .join(format!("{seed}{name}.pcap"))
                    .to_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        // Read as b, c, a: back to the start after c, which runs to the end.
        for (path, part) in paths.iter().zip([&parts[1], &parts[2], &parts[0]]) {
            std::fs::write(path, part).unwrap();
        }
        let mut sets = Vec::new();
        let mut files = Vec::new();
        for workers in ["1", "2", "4"] {
            let out = tmp.path().join(format!("out{seed}-{workers}"));
            let mut args = vec!["analyze", "-o", out.to_str().unwrap(), "-q", "--workers", workers];
            args.extend(paths.iter().map(String::as_str));
            sluice(&args);
            sets.push(records(&out));
            // Sorted by start, the file is the same byte for byte.
            let sorted = tmp.path().join(format!("sorted{seed}-{workers}"));
            args[2] = sorted.to_str().unwrap();
            args.extend(["--order", "start"]);
            sluice(&args);
            files.push(std::fs::read(sorted.join("flows.jsonl")).unwrap());
        }
        assert!(
            files[0] == files[1] && files[0] == files[2],
            "seed {seed}: sorted files differ"
        );
        split += sets[0].iter().filter(|r| r.contains(r#""end_reason":"idle""#)).count();
        for (set, workers) in sets.iter().zip(["1", "2", "4"]).skip(1) {
            let differ: Vec<_> = sets[0].symmetric_difference(set).take(4).collect();
            assert!(differ.is_empty(), "seed {seed}, 1 vs {workers} workers: {differ:#?}");
        }
    }
    assert!(split > 1000, "only {split} flows ended idle");
}

/// Three pcap files, in time order, of `flows` UDP flows of 2 to 11
/// datagrams each, with gaps shorter and longer than the idle timeout,
/// starting anywhere in the first 3000 s.
fn stepping_back_capture(seed: u64, flows: u32) -> [Vec<u8>; 3] {
    // SplitMix64: a fixed sequence for a seed.
    let mut state = seed;
    let mut next = move |below: u64| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % below
    };
    const S: u64 = 1_000_000_000;
    const GAPS: [u64; 9] = [1, 5, 30, 100, 115, 125, 130, 200, 400];
    let mut packets: Vec<(u64, Vec<u8>)> = Vec::new();
    for f in 0..flows {
        let mut ts = next(3000) * S;
        let datagram = udp_frame([10, 0, (f >> 8) as u8, f as u8], 1000 + f as u16);
        for _ in 0..2 + next(10) {
            packets.push((ts, datagram.clone()));
            ts += GAPS[next(GAPS.len() as u64) as usize] * S + next(S);
        }
    }
    packets.sort_by_key(|p| p.0);
    let third = packets.len() / 3;
    let file = |part: &[(u64, Vec<u8>)]| {
        let mut pcap = Vec::new();
        for word in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 65_535, 1] {
            pcap.extend_from_slice(&word.to_le_bytes());
        }
        for (ts, frame) in part {
            for word in [(ts / S) as u32, (ts % S) as u32, frame.len() as u32, frame.len() as u32] {
                pcap.extend_from_slice(&word.to_le_bytes());
            }
            pcap.extend_from_slice(frame);
        }
        pcap
    };
    [
        file(&packets[..third]),
        file(&packets[third..2 * third]),
        file(&packets[2 * third..]),
    ]
}

/// Ethernet, IPv4 and UDP from `src`:`port` to 10.1.0.1:53, 20 bytes of data.
fn udp_frame(src: [u8; 4], port: u16) -> Vec<u8> {
    let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    frame.extend_from_slice(&[0x45, 0, 0, 48, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    frame.extend_from_slice(&src);
    frame.extend_from_slice(&[10, 1, 0, 1]);
    frame.extend_from_slice(&port.to_be_bytes());
    frame.extend_from_slice(&[0, 53, 0, 28, 0, 0]);
    frame.extend_from_slice(&[b'x'; 20]);
    frame
}

/// An announced port is for one flow, which uses it up (docs/classification.md,
/// "Announced ports"): at a call rate whose announcements outrun the table
/// if they all stay their 120 s, the table keeps only those still waiting
/// for their flow, drops none, and the records do not depend on the number
/// of workers.
#[test]
fn announcements_used_up_by_their_flows_leave_room_and_identical_records_for_one_and_two_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let trace = tmp.path().join("calls.pcap");
    let calls = 2_000;
    // 2,000 calls at 2,000 a second, held under a second each: every call
    // announces four endpoints (the caller's RTP and RTCP in the INVITE's
    // SDP, the callee's in the 200 OK's), 8,000 in all, all within their
    // 120 s; the table has room for 7,000. The RTP flow uses two of them
    // up, the RTCP flow (each side's BYE at the latest) the other two.
    sluice(&[
        "gen",
        "--profile",
        "voip",
        "--call-rate",
        "2000",
        "--calls",
        &calls.to_string(),
        "--hold",
        "log-uniform:0.5,1",
        "--media",
        "g711",
        "--no-background",
        "--sip-tcp",
        "0",
        "--sip-fragmented",
        "0",
        "--reinvite",
        "0",
        "--seed",
        "7",
        "-w",
        trace.to_str().unwrap(),
    ]);
    let truth = std::fs::read_to_string(tmp.path().join("calls.truth.csv")).unwrap();
    let media_flows = truth.lines().filter(|l| l.ends_with(",audio")).count();
    assert_eq!(media_flows, calls, "one RTP flow per call");
    let rtcp_flows = truth.lines().filter(|l| l.contains(",RTCP,")).count();
    assert_eq!(rtcp_flows, calls, "one RTCP flow per call");
    let mut sets = Vec::new();
    for workers in ["1", "2"] {
        let out = tmp.path().join(format!("out{workers}"));
        sluice(&[
            "analyze",
            trace.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "-q",
            "--workers",
            workers,
            "--announced-ports",
            "7000",
        ]);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["drops"]["dropped_port_announcements"], 0, "{workers} workers");
        assert_eq!(
            summary["classifiers"]["dynamic-port"]["flows"],
            media_flows + rtcp_flows,
            "{workers} workers: every RTP and RTCP flow is labelled from its call's announcements"
        );
        sets.push(records(&out));
    }
    assert_eq!(sets[0].len(), 3 * calls, "a SIP, an RTP and an RTCP flow per call");
    assert!(sets[0] == sets[1], "one and two workers wrote different records");
}
