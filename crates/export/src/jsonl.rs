use std::io::Write;
use std::net::IpAddr;

use crate::schema::{FieldSink, Record, write_record};

/// One JSON object per line. Absent values are `null`; lists are arrays.
#[derive(Default)]
pub struct JsonlEncoder {
    out: Vec<u8>,
    first: bool,
}

impl JsonlEncoder {
    pub fn encode(&mut self, record: &Record, out: &mut Vec<u8>) {
        std::mem::swap(&mut self.out, out);
        self.out.push(b'{');
        self.first = true;
        write_record(record, self);
        self.out.extend_from_slice(b"}\n");
        std::mem::swap(&mut self.out, out);
    }

    fn key(&mut self, name: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
    }
}

impl FieldSink for JsonlEncoder {
    fn u64(&mut self, name: &'static str, value: u64) {
        self.key(name);
        self.out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    }

    fn opt_u64(&mut self, name: &'static str, value: Option<u64>) {
        match value {
            Some(v) => self.u64(name, v),
            None => {
                self.key(name);
                self.out.extend_from_slice(b"null");
            }
        }
    }

    fn f64(&mut self, name: &'static str, value: f64) {
        self.key(name);
        write_f64(&mut self.out, value);
    }

    fn opt_f64(&mut self, name: &'static str, value: Option<f64>) {
        match value {
            Some(v) => self.f64(name, v),
            None => {
                self.key(name);
                self.out.extend_from_slice(b"null");
            }
        }
    }

    fn str(&mut self, name: &'static str, value: &str) {
        self.key(name);
        self.out.push(b'"');
        escape_json(&mut self.out, value);
        self.out.push(b'"');
    }

    fn ip(&mut self, name: &'static str, value: IpAddr) {
        self.key(name);
        self.out.push(b'"');
        let _ = sluice_wire::write_ip(&mut self.out, value);
        self.out.push(b'"');
    }

    fn opt_str(&mut self, name: &'static str, value: Option<&str>) {
        match value {
            Some(v) => self.str(name, v),
            None => {
                self.key(name);
                self.out.extend_from_slice(b"null");
            }
        }
    }

    fn str_list(&mut self, name: &'static str, values: &[String]) {
        self.key(name);
        self.out.push(b'[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out.push(b'"');
            escape_json(&mut self.out, v);
            self.out.push(b'"');
        }
        self.out.push(b']');
    }

    fn list(&mut self, name: &'static str, values: &[u64]) {
        self.key(name);
        self.out.push(b'[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            self.out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes());
        }
        self.out.push(b']');
    }
}

/// Shortest round-trip decimal, with non-finite values (never produced,
/// but never allowed to corrupt a line either) as `null`.
pub(crate) fn write_f64(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

fn escape_json(out: &mut Vec<u8>, s: &str) {
    // Host names, fingerprints and labels almost never need escaping: copy
    // them whole rather than byte by byte.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => {
                let _ = write!(out, "\\u{b:04x}");
            }
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::escape_json;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        escape_json(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_come_out_as_valid_json_string_bodies() {
        for s in [
            "www.example.com",
            "",
            "a\"b\\c",
            "line\r\n\tend",
            "\u{1}\u{1f}",
            "ünïcödé \"q\"",
        ] {
            let json = format!("\"{}\"", escaped(s));
            let back: String = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(back, s);
        }
        assert_eq!(escaped("t13d1516h2_8daaf6152771"), "t13d1516h2_8daaf6152771");
    }
}
