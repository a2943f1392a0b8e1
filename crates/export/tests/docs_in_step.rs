//! `docs/flow-record.md` documents every field of the flow record, in
//! record order, and states the schema version: this test fails as soon as
//! the schema and the page drift apart.

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/flow-record.md");

fn doc() -> String {
    std::fs::read_to_string(DOC).unwrap_or_else(|e| panic!("{DOC}: {e}"))
}

/// The field names of the page's table rows (`| \`name\` | type | meaning |`).
fn documented_fields(doc: &str) -> Vec<&str> {
    doc.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once("` |"))
        .map(|(name, _)| name)
        .collect()
}

#[test]
fn every_field_has_a_table_row() {
    let doc = doc();
    let missing: Vec<_> = sluice_export::field_names()
        .into_iter()
        .filter(|name| !doc.lines().any(|line| line.starts_with(&format!("| `{name}` |"))))
        .collect();
    assert!(
        missing.is_empty(),
        "fields without a row in docs/flow-record.md: {missing:?}"
    );
}

#[test]
fn rows_are_the_fields_in_record_order() {
    let doc = doc();
    let documented = documented_fields(&doc);
    assert_eq!(
        documented,
        sluice_export::field_names(),
        "docs/flow-record.md must list exactly the record's fields, in record order"
    );
}

#[test]
fn rows_have_a_type_and_a_meaning() {
    let doc = doc();
    for line in doc.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<_> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 3, "not `| name | type | meaning |`: {line}");
        assert!(cells.iter().all(|c| !c.is_empty()), "empty cell: {line}");
    }
}

#[test]
fn the_schema_version_is_stated() {
    let doc = doc();
    let version = sluice_export::SCHEMA_VERSION;
    let stated = doc.lines().any(|line| {
        line.to_lowercase().contains("schema version")
            && line.match_indices(version).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + version.len()..].chars().next();
                !before.is_some_and(|c| c.is_ascii_digit() || c == '.')
                    && !after.is_some_and(|c| c.is_ascii_digit() || c == '.')
            })
    });
    assert!(
        stated,
        "docs/flow-record.md does not state \"Schema version: {version}\""
    );
}
