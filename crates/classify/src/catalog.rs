//! Every protocol and application Sluice can name, and how: the data file
//! `crates/classify/data/protocols.csv`, one row per id of nDPI's protocol
//! list and one per name Sluice gives that the list does not number,
//! compiled in and parsed once. `sluice protocols` prints it; the crate's
//! tests (`tests/catalog.rs`) hold it to the code, so that a row says what
//! the dissectors, lists, rules and tables really do.

use std::sync::LazyLock;

/// How Sluice names a protocol or application.
pub const DETECTIONS: [&str; 6] = ["dissector", "rule", "host", "address", "port", "ip-protocol"];

/// What a flow's record may carry besides its label.
pub const METADATA: [&str; 9] = [
    "host",
    "http",
    "tls",
    "ja3",
    "ja4",
    "quic_version",
    "dns",
    "banners",
    "commands",
];

const CATALOG: &str = include_str!("../data/protocols.csv");

/// One row of the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protocol {
    /// nDPI's id for it, when nDPI's list numbers it.
    pub ndpi_id: Option<u16>,
    /// The name as Sluice writes it in records.
    pub name: &'static str,
    /// Of [`DETECTIONS`], in that order; empty when Sluice does not name it.
    pub detection: Vec<&'static str>,
    /// Of [`METADATA`], in that order.
    pub metadata: Vec<&'static str>,
    /// Why Sluice does not name it, or a remark.
    pub note: &'static str,
}

static PROTOCOLS: LazyLock<Vec<Protocol>> =
    LazyLock::new(|| parse(CATALOG).unwrap_or_else(|e| panic!("crates/classify/data/protocols.csv: {e}")));

/// The catalog, in the file's order: nDPI's ids first, then Sluice's own
/// names.
pub fn protocols() -> &'static [Protocol] {
    &PROTOCOLS
}

/// The rows of `text`, or the first malformed line's number and problem.
pub fn parse(text: &'static str) -> Result<Vec<Protocol>, String> {
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = |problem: String| format!("line {}: {problem}", n + 1);
        let fields: Vec<&'static str> = line.splitn(5, ',').collect();
        let [id, name, detection, metadata, note] = fields[..] else {
            return Err(at(format!("{line:?} has fewer than five fields")));
        };
        let ndpi_id = match id {
            "" => None,
            id => Some(id.parse().map_err(|_| at(format!("{id:?} is no nDPI id")))?),
        };
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(at(format!("{name:?} is no name")));
        }
        let list = |field: &'static str, known: &[&str]| -> Result<Vec<&'static str>, String> {
            let items: Vec<&'static str> = field.split(';').filter(|s| !s.is_empty()).collect();
            let mut last = None;
            for item in &items {
                let Some(position) = known.iter().position(|k| k == item) else {
                    return Err(at(format!("{item:?} is not one of {known:?}")));
                };
                if last.is_some_and(|l| l >= position) {
                    return Err(at(format!("{field:?} is not in the order of {known:?}")));
                }
                last = Some(position);
            }
            Ok(items)
        };
        let detection = list(detection, &DETECTIONS)?;
        let metadata = list(metadata, &METADATA)?;
        if detection.is_empty() && note.is_empty() {
            return Err(at(format!("{name} is named by nothing, and no note says why")));
        }
        rows.push(Protocol {
            ndpi_id,
            name,
            detection,
            metadata,
            note,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_parses_with_each_name_and_id_once() {
        let rows = protocols();
        assert!(rows.len() > 450, "{}", rows.len());
        let mut names = std::collections::HashSet::new();
        let mut ids = std::collections::HashSet::new();
        for row in rows {
            assert!(names.insert(row.name), "{} is listed twice", row.name);
            if let Some(id) = row.ndpi_id {
                assert!(ids.insert(id), "id {id} is listed twice");
            }
        }
    }

    #[test]
    fn malformed_rows_are_refused_with_their_line() {
        for (text, problem) in [
            ("1,HTTP,dissector\n", "fewer than five fields"),
            ("x,HTTP,dissector,,\n", "no nDPI id"),
            ("1,,dissector,,\n", "no name"),
            ("1,HTTP,guess,,\n", "not one of"),
            ("1,HTTP,port;dissector,,\n", "not in the order"),
            ("1,HTTP,dissector,cookies,\n", "not one of"),
            ("# c\n1,HTTP,,,\n", "no note says why"),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(problem), "{error}");
        }
        assert!(parse("# c\n\n1,HTTP,dissector;port,host;http,a note, with a comma\n").is_ok());
    }
}
