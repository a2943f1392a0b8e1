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
    let trace = tmp.path().join("mix.pcap");
    let trace = trace.to_str().unwrap();
    sluice(&[
        "gen",
        "--profile",
        "mix",
        "--packets",
        "150000",
        "--seed",
        "42",
        "-w",
        trace,
    ]);
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
