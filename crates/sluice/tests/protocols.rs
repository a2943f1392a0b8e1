//! `sluice protocols` lists every name the records can carry: checked on
//! the records of a generated mix and, when present, of every capture of
//! nDPI's test suite, including the metadata each label's flows carry.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::Value;

use common::{flow_records, sluice};

/// The `--json` listing: name → (detection, metadata).
fn listing() -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    let run = sluice(&["protocols", "--json"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&run.stdout).unwrap();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let mut listing = BTreeMap::new();
    for row in &rows {
        let name = row["name"].as_str().unwrap().to_string();
        let previous = listing.insert(name.clone(), (strings(&row["detection"]), strings(&row["metadata"])));
        assert!(previous.is_none(), "{name} is listed twice");
    }
    listing
}

#[test]
fn the_table_has_a_line_per_protocol() {
    let listing = listing();
    let run = sluice(&["protocols"]);
    assert!(run.status.success());
    let text = String::from_utf8(run.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{}", lines[0]);
    assert_eq!(lines.len(), listing.len() + 1);
    let http = lines
        .iter()
        .find(|l| l.split_whitespace().next() == Some("HTTP"))
        .unwrap();
    assert_eq!(
        http.split_whitespace().collect::<Vec<_>>(),
        ["HTTP", "7", "dissector,port", "host,http"]
    );
    assert!(listing.len() > 450);
}

/// The metadata groups of `sluice protocols` a record carries.
fn metadata_of(record: &Value) -> BTreeSet<&'static str> {
    let mut groups = BTreeSet::new();
    for (field, group) in [
        ("host", "host"),
        ("http_method", "http"),
        ("http_uri", "http"),
        ("http_user_agent", "http"),
        ("http_status", "http"),
        ("http_content_type", "http"),
        ("tls_version", "tls"),
        ("tls_alpn", "tls"),
        ("ja3", "ja3"),
        ("ja4", "ja4"),
        ("quic_version", "quic_version"),
        ("dns_qtype", "dns"),
        ("dns_rcode", "dns"),
        ("dns_answers", "dns"),
        ("client_banner", "banners"),
        ("server_banner", "banners"),
        ("commands", "commands"),
    ] {
        if !record[field].is_null() {
            groups.insert(group);
        }
    }
    groups
}

fn check(records: &[Value], listing: &BTreeMap<String, (Vec<String>, Vec<String>)>) -> usize {
    let mut failures = BTreeSet::new();
    for r in records {
        let master = r["master"].as_str().unwrap();
        if master == "Unknown" {
            continue;
        }
        let app = r["app"].as_str().unwrap();
        for name in std::iter::once(master).chain(app.split_once('.').map(|(_, a)| a)) {
            match listing.get(name) {
                Some((detection, _)) if !detection.is_empty() => {}
                _ => {
                    failures.insert(format!("{name} (in {app}) is not listed as named"));
                }
            }
        }
        if r["classifier"] == "dissector" {
            let declared = &listing.get(master).map(|l| l.1.clone()).unwrap_or_default();
            for group in metadata_of(r) {
                if !declared.iter().any(|d| d == group) {
                    failures.insert(format!("{master} flows carry {group}, which is not listed"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    records.len()
}

#[test]
fn every_label_and_metadata_of_real_records_is_listed() {
    let listing = listing();
    let dir = tempfile::tempdir().unwrap();
    let mix = dir.path().join("mix.pcap");
    let run = sluice(&[
        "gen",
        "--profile",
        "mix",
        "--packets",
        "40000",
        "--seed",
        "7",
        "-w",
        mix.to_str().unwrap(),
    ]);
    assert!(run.status.success());
    let out = dir.path().join("mix.out");
    assert!(
        sluice(&["analyze", mix.to_str().unwrap(), "-o", out.to_str().unwrap(), "-q"])
            .status
            .success()
    );
    assert!(check(&flow_records(&out), &listing) > 1000);

    let Some(pcaps) = common::ndpi_pcaps() else {
        return;
    };
    let mut captures: Vec<PathBuf> = std::fs::read_dir(&pcaps).unwrap().map(|e| e.unwrap().path()).collect();
    captures.sort();
    let out = dir.path().join("ndpi.out");
    let mut args = vec![
        "analyze".to_string(),
        "-o".into(),
        out.to_str().unwrap().into(),
        "-q".into(),
    ];
    args.extend(captures.iter().map(|c| c.to_str().unwrap().to_string()));
    let run = sluice(&args);
    assert!(
        matches!(run.status.code(), Some(0 | 3)),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let checked = check(&flow_records(&out), &listing);
    eprintln!("{checked} records of {} captures checked", captures.len());
}
