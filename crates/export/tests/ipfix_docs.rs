//! `docs/ipfix.md` lists every information element of the templates, in
//! template order, with its id, enterprise number, length and the record
//! field it carries: this test fails as soon as the two drift apart.

use sluice_export::ipfix::{ELEMENTS, ENTERPRISE_NUMBER, Element, VARIABLE};

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ipfix.md");

/// The row `docs/ipfix.md` has for an element.
fn row(e: &Element) -> String {
    let field = if e.field.is_empty() {
        "(derived)".to_string()
    } else {
        format!("`{}`", e.field)
    };
    let id = if e.id == e.id_v6 {
        e.id.to_string()
    } else {
        format!("{} / {}", e.id, e.id_v6)
    };
    let length = match (e.length(false), e.length(true)) {
        (VARIABLE, _) => "variable".to_string(),
        (a, b) if a == b => a.to_string(),
        (a, b) => format!("{a} / {b}"),
    };
    let enterprise = if e.enterprise == 0 {
        "IANA".to_string()
    } else {
        e.enterprise.to_string()
    };
    format!("| {field} | {} | {id} | {enterprise} | {length} |", e.name)
}

#[test]
fn every_element_has_its_row_in_template_order() {
    let doc = std::fs::read_to_string(DOC).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    // The flow template's table is the section "Elements"; the statistics',
    // alarms' and calls' templates have tables of their own before it.
    let flows = doc
        .split_once("\n## Elements\n")
        .unwrap_or_else(|| panic!("{DOC} has no section \"## Elements\""))
        .1;
    let rows: Vec<&str> = flows
        .lines()
        .filter(|l| l.starts_with("| `") || l.starts_with("| (derived)"))
        .collect();
    let expected: Vec<String> = ELEMENTS.iter().map(row).collect();
    if rows != expected {
        panic!(
            "docs/ipfix.md's element table must be, in this order:\n{}",
            expected.join("\n")
        );
    }
    assert!(doc.contains(&ENTERPRISE_NUMBER.to_string()));
}
