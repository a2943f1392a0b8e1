use std::net::IpAddr;

use sluice_classify::Text;

use crate::schema::{FieldSink, Record, field_names, write_record};
use crate::text::{write_f64, write_u64};

/// RFC 4180 CSV with a header line. Absent values are empty; lists are
/// joined with `;` so that every record stays one line.
#[derive(Default)]
pub struct CsvEncoder {
    out: Vec<u8>,
    first: bool,
}

impl CsvEncoder {
    pub fn header() -> Vec<u8> {
        let mut line = field_names().join(",").into_bytes();
        line.push(b'\n');
        line
    }

    pub fn encode(&mut self, record: &Record, out: &mut Vec<u8>) {
        std::mem::swap(&mut self.out, out);
        self.first = true;
        write_record(record, self);
        self.out.push(b'\n');
        std::mem::swap(&mut self.out, out);
    }

    fn sep(&mut self) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
    }
}

impl FieldSink for CsvEncoder {
    fn u64(&mut self, _: &'static str, value: u64) {
        self.sep();
        write_u64(&mut self.out, value);
    }

    fn opt_u64(&mut self, _: &'static str, value: Option<u64>) {
        self.sep();
        if let Some(v) = value {
            write_u64(&mut self.out, v);
        }
    }

    fn f64(&mut self, _: &'static str, value: f64) {
        self.sep();
        if value.is_finite() {
            write_f64(&mut self.out, value);
        }
    }

    fn opt_f64(&mut self, _: &'static str, value: Option<f64>) {
        self.sep();
        if let Some(v) = value.filter(|v| v.is_finite()) {
            write_f64(&mut self.out, v);
        }
    }

    fn str(&mut self, _: &'static str, value: &str) {
        self.sep();
        if needs_quotes(value) {
            self.out.push(b'"');
            for b in value.bytes() {
                if b == b'"' {
                    self.out.push(b'"');
                }
                self.out.push(b);
            }
            self.out.push(b'"');
        } else {
            self.out.extend_from_slice(value.as_bytes());
        }
    }

    fn opt_str(&mut self, name: &'static str, value: Option<&str>) {
        self.str(name, value.unwrap_or_default());
    }

    fn dotted(&mut self, name: &'static str, first: &str, second: Option<&str>) {
        let Some(second) = second else {
            return self.str(name, first);
        };
        if needs_quotes(first) || needs_quotes(second) {
            // A label from a user's rule file; shipped ones need no quotes.
            return self.str(name, &[first, second].join("."));
        }
        self.sep();
        self.out.extend_from_slice(first.as_bytes());
        self.out.push(b'.');
        self.out.extend_from_slice(second.as_bytes());
    }

    fn str_list(&mut self, name: &'static str, values: &[Text]) {
        // Entries are printable ASCII from the dissectors; a `;` inside
        // one would be ambiguous, so it is written as `,`, which quoting
        // keeps intact.
        let joined: String = values.iter().map(|v| v.replace(';', ",")).collect::<Vec<_>>().join(";");
        self.str(name, &joined);
    }

    fn ip(&mut self, _: &'static str, value: IpAddr) {
        self.sep();
        self.out.extend_from_slice(sluice_wire::IpText::of(value).as_bytes());
    }

    fn list(&mut self, _: &'static str, values: &[u64]) {
        self.sep();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.out.push(b';');
            }
            write_u64(&mut self.out, *v);
        }
    }
}

/// A field with any of these is quoted, its quotes doubled (RFC 4180).
fn needs_quotes(value: &str) -> bool {
    value.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r'))
}

#[cfg(test)]
mod tests {
    use crate::schema::{Record, field_names, sample_flow};

    /// The `app` column of one record of a flow labelled `master`/`app`.
    fn app_column(master: &'static str, app: Option<&'static str>) -> String {
        let mut flow = sample_flow();
        flow.ext.label.master = master;
        flow.ext.label.app = app;
        let mut out = Vec::new();
        super::CsvEncoder::default().encode(&Record::idle(&flow), &mut out);
        let line = String::from_utf8(out).unwrap();
        let column = field_names().iter().position(|&n| n == "app").unwrap();
        // The sample's fields before `app` hold no commas.
        let rest = line.trim_end().splitn(column + 1, ',').nth(column).unwrap();
        match rest.strip_prefix('"') {
            Some(quoted) => quoted[..quoted.find("\",").unwrap()].replace("\"\"", "\""),
            None => rest.split(',').next().unwrap().to_string(),
        }
    }

    #[test]
    fn labels_are_dotted_and_quoted_when_they_must_be() {
        assert_eq!(app_column("TLS", Some("YouTube")), "TLS.YouTube");
        assert_eq!(app_column("DNS", None), "DNS");
        assert_eq!(app_column("My,Proto", Some("Say \"hi\"")), "My,Proto.Say \"hi\"");
    }
}
