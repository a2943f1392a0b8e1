//! The catalog of protocols (`data/protocols.csv`, printed by `sluice
//! protocols`) says what the code does: each way of naming a protocol it
//! claims is one the code has, and each name the code can give is in it
//! with that way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sluice_classify::catalog::{Protocol, protocols};
use sluice_classify::dissectors::registry;
use sluice_classify::rules::RuleSet;
use sluice_classify::{Classifier, Services, port_label};
use sluice_wire::FlowKey;

fn by_detection(detection: &str) -> BTreeSet<&'static str> {
    protocols()
        .iter()
        .filter(|p| p.detection.contains(&detection))
        .map(|p| p.name)
        .collect()
}

/// The names the port table and the IP protocol numbers give.
fn table_names() -> (BTreeSet<&'static str>, BTreeSet<&'static str>) {
    let (mut ports, mut protocols) = (BTreeSet::new(), BTreeSet::new());
    for proto in 0..=255u8 {
        let key = FlowKey {
            proto,
            ..FlowKey::default()
        };
        if let Some((label, Classifier::Protocol, _)) = port_label(&key) {
            protocols.insert(label.master);
        }
    }
    for proto in [6u8, 17] {
        for port in 0..=u16::MAX {
            let key = FlowKey {
                proto,
                src_port: 40000,
                dst_port: port,
                ..FlowKey::default()
            };
            if let Some((label, Classifier::Port, _)) = port_label(&key) {
                ports.insert(label.master);
            }
        }
    }
    (ports, protocols)
}

#[test]
fn the_port_table_and_ip_protocols_are_as_the_catalog_says() {
    let (ports, ip) = table_names();
    assert_eq!(ports, by_detection("port"));
    assert_eq!(ip, by_detection("ip-protocol"));
}

#[test]
fn the_host_and_address_lists_are_as_the_catalog_says() {
    let services = Services::builtin();
    let (mut hosts, mut addresses) = (BTreeSet::new(), BTreeSet::new());
    for name in services.names() {
        let (by_host, by_address) = services.names_by(name);
        if by_host {
            hosts.insert(name);
        }
        if by_address {
            addresses.insert(name);
        }
    }
    assert_eq!(hosts, by_detection("host"));
    assert_eq!(addresses, by_detection("address"));
}

#[test]
fn the_built_in_rules_are_as_the_catalog_says() {
    let rules = RuleSet::default_rules();
    let labels: BTreeSet<&str> = rules.rules().iter().map(|r| r.label.master).collect();
    assert_eq!(labels, by_detection("rule"));
}

/// The dissectors' code without its tests: where the names they give are.
fn dissector_sources() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/dissectors");
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        all.push_str(text.split("#[cfg(test)]").next().unwrap_or_default());
    }
    all
}

#[test]
fn every_dissector_is_in_the_catalog_and_every_name_it_claims_is_in_their_code() {
    let claimed = by_detection("dissector");
    eprintln!("{} dissectors", registry().len());
    for d in registry() {
        assert!(
            claimed.contains(d.name),
            "{} has a dissector the catalog does not list",
            d.name
        );
    }
    let code = dissector_sources();
    for name in &claimed {
        assert!(
            code.contains(&format!("\"{name}\"")),
            "the catalog says a dissector names {name}, which no dissector's code does"
        );
    }
}

#[test]
fn rows_without_a_way_to_name_them_say_why_and_nearly_all_have_one() {
    let rows: Vec<&Protocol> = protocols().iter().filter(|p| p.ndpi_id.is_some()).collect();
    let named = rows.iter().filter(|p| !p.detection.is_empty()).count();
    for p in &rows {
        assert!(!p.detection.is_empty() || !p.note.is_empty(), "{}", p.name);
    }
    // The bar: 95 % with a way or a reason (all of them, by the
    // check above); at the time of writing, 92 % with a way.
    assert!(named * 100 >= rows.len() * 90, "{named} of {}", rows.len());
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &rows {
        *kinds.entry(p.detection.first().copied().unwrap_or("none")).or_default() += 1;
    }
    eprintln!("{named} of {} named: {kinds:?}", rows.len());
}

/// docs/classification.md's coverage table is the catalog.
#[test]
fn the_documented_table_is_the_catalog() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/classification.md");
    let docs = std::fs::read_to_string(&path).unwrap();
    let rows: BTreeSet<&str> = docs.lines().filter(|l| l.starts_with("| ")).collect();
    for p in protocols() {
        let id = p.ndpi_id.map_or("–".to_string(), |id| id.to_string());
        let detection = if p.detection.is_empty() {
            "–".to_string()
        } else {
            p.detection.join(", ")
        };
        let row = format!("| {id} | {} | {detection} | {} |", p.name, p.note);
        assert!(
            rows.contains(row.as_str()),
            "docs/classification.md lacks the row {row}"
        );
    }
}
