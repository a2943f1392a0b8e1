//! The web console in a real browser (headless Chromium driven by
//! Playwright for Python, `tests/browser/console.py`) over a finished run
//! with a SYN flood in it: the page loads with no console error and draws
//! its charts, the flood is in the alarm list, its evidence pcap downloads
//! through the page's link holding the flood's packets, and a flow search
//! shows the rows the records hold. Skipped (with a message) where Chromium
//! or Playwright is missing; `.ci/run` installs both.

mod common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{SLUICE, flood_syns, run, shared_scratch, sluice};
use serde_json::Value;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Whether Chromium and Playwright for Python are here.
fn browser_available() -> bool {
    let chromium = Path::new("/usr/bin/chromium").exists();
    let playwright = Command::new("python3")
        .args(["-c", "import playwright.sync_api"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !chromium || !playwright {
        eprintln!(
            "skipping: needs /usr/bin/chromium and Playwright for Python (apt-get install chromium; pip install playwright)"
        );
    }
    chromium && playwright
}

#[test]
fn the_console_in_a_browser_shows_the_flood_its_evidence_and_flows() {
    if !browser_available() {
        return;
    }
    let dir = shared_scratch("console-browser");
    let pcap = dir.join("flood.pcap");
    run(
        SLUICE,
        &[
            "gen",
            "--profile",
            "mix",
            "--packet-rate",
            "2000pps",
            "--packets",
            "240000",
            "--seed",
            "9",
            "--snaplen",
            "128",
            "-w",
            s(&pcap),
            "--anomaly",
            "syn_flood@60s+20s:20%",
        ],
    );
    let (out, rec) = (dir.join("out"), dir.join("rec"));
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&rec);
    let output = sluice(&[
        "probe",
        "-q",
        "-r",
        s(&pcap),
        "-o",
        s(&out),
        "--record-dir",
        s(&rec),
        "--alarms",
        "--alarm",
        "warmup=30s",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut server = Command::new(SLUICE)
        .args(["serve", s(&out), "--web", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(server.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    let download = dir.join("downloaded.pcap");
    let _ = std::fs::remove_file(&download);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/console.py");
    let host = "198.51.100.80";
    let browser = Command::new("python3")
        .arg(&script)
        .args([
            "--url",
            &url,
            "--detector",
            "syn_flood",
            "--host",
            host,
            "--download",
            s(&download),
        ])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(browser.status.success(), "{}", String::from_utf8_lossy(&browser.stderr));
    let seen: Value = serde_json::from_slice(&browser.stdout).unwrap();
    assert_eq!(seen["console_errors"], serde_json::json!([]), "{seen}");
    assert_eq!(seen["state"], "finished run", "{seen}");
    assert_eq!(seen["charts"], 4, "{seen}");
    let intervals = std::fs::read_to_string(out.join("stats.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert_eq!(seen["points"].as_u64().unwrap() as usize, intervals, "{seen}");
    assert_eq!(seen["alarm_hosts"], host, "{seen}");
    // The flood: 20 % of 2000 packets a second for 20 s.
    let syns = flood_syns(&download);
    assert!(syns * 100 >= 8000 * 99, "{syns} SYNs in the downloaded evidence");
    // The rows the records hold for the host (the first 200, as the
    // search answers by default).
    let records = std::fs::read_to_string(out.join("flows.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!("\"src_ip\":\"{host}\"")) || l.contains(&format!("\"dst_ip\":\"{host}\"")))
        .count();
    assert_eq!(seen["flow_rows"].as_u64().unwrap() as usize, records.min(200), "{seen}");
}
