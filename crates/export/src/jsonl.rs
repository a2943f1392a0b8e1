use std::io::Write;
use std::net::IpAddr;

use sluice_classify::Text;

use crate::schema::{ConstantBlock, FieldSink, Record, write_record};
use crate::text::{needs_json_escape, put, set_len, write_f64, write_u64};

/// One JSON object per line; lists are arrays. A field without a value
/// (`null`, or an empty list of strings) is left out of its line, as Zeek
/// and Suricata's EVE do: a reader asking for it gets nothing either way,
/// and the file is a quarter smaller.
#[derive(Default)]
pub struct JsonlEncoder {
    out: Vec<u8>,
    /// The fields' keys as they appear in a line (`,"name":`), in schema
    /// order, each padded to one fixed-size copy.
    keys: Vec<Key>,
    /// The next field's place in the schema.
    field: usize,
    /// What each constant block was written as, and how many fields it
    /// holds, once written.
    empty_directions: [Option<(Box<[u8]>, usize)>; 2],
}

const KEY_BYTES: usize = 32;

struct Key {
    name: &'static str,
    /// The key's text, padded with zeros, in place: one load less per
    /// field than behind a pointer. Longer keys are in `long`.
    text: [u8; KEY_BYTES],
    len: usize,
    long: Box<[u8]>,
}

impl Key {
    fn new(name: &'static str, first: bool) -> Key {
        let text = format!("{}\"{name}\":", if first { "" } else { "," }).into_bytes();
        let mut key = Key {
            name,
            text: [0; KEY_BYTES],
            len: text.len(),
            long: Box::default(),
        };
        match key.text.get_mut(..text.len()) {
            Some(fits) => fits.copy_from_slice(&text),
            None => key.long = text.into_boxed_slice(),
        }
        key
    }
}

impl JsonlEncoder {
    pub fn encode(&mut self, record: &Record, out: &mut Vec<u8>) {
        std::mem::swap(&mut self.out, out);
        self.out.push(b'{');
        self.field = 0;
        write_record(record, self);
        self.out.extend_from_slice(b"}\n");
        std::mem::swap(&mut self.out, out);
    }

    /// The next field's place in the schema, whose key is known from then on.
    #[inline(always)]
    fn next_field(&mut self, name: &'static str) -> usize {
        let i = self.field;
        self.field += 1;
        // The schema names its fields in the same order every time: the
        // first record builds the keys, the others copy them. The same
        // name can sit at two addresses (a literal in two codegen units).
        if self
            .keys
            .get(i)
            .is_none_or(|k| !std::ptr::eq(k.name, name) && k.name != name)
        {
            self.learn_key(i, name);
        }
        i
    }

    /// Leaves a field without a value out. The first field (`flow_id`)
    /// always has one, so every written key after it starts with a comma.
    #[inline(always)]
    fn skip(&mut self, name: &'static str) {
        debug_assert!(self.field > 0, "the first field has a value");
        self.next_field(name);
    }

    #[inline(always)]
    fn key(&mut self, name: &'static str) {
        let i = self.next_field(name);
        let key = &self.keys[i];
        if key.len <= KEY_BYTES {
            self.out.reserve(KEY_BYTES);
            self.out.spare_capacity_mut()[..KEY_BYTES].write_copy_of_slice(&key.text);
            set_len(&mut self.out, key.len);
        } else {
            self.out.extend_from_slice(&key.long);
        }
    }

    #[cold]
    fn learn_key(&mut self, i: usize, name: &'static str) {
        // A copied block would now skip fields whose keys are not known.
        self.empty_directions = Default::default();
        self.keys.truncate(i);
        self.keys.push(Key::new(name, i == 0));
    }
}

impl FieldSink for JsonlEncoder {
    #[inline(always)]
    fn u64(&mut self, name: &'static str, value: u64) {
        self.key(name);
        write_u64(&mut self.out, value);
    }

    #[inline(always)]
    fn opt_u64(&mut self, name: &'static str, value: Option<u64>) {
        match value {
            Some(v) => self.u64(name, v),
            None => self.skip(name),
        }
    }

    #[inline(always)]
    fn f64(&mut self, name: &'static str, value: f64) {
        self.key(name);
        write_f64(&mut self.out, value);
    }

    fn opt_f64(&mut self, name: &'static str, value: Option<f64>) {
        match value {
            Some(v) => self.f64(name, v),
            None => self.skip(name),
        }
    }

    #[inline(always)]
    fn str(&mut self, name: &'static str, value: &str) {
        self.key(name);
        self.out.push(b'"');
        escape_json(&mut self.out, value);
        self.out.push(b'"');
    }

    fn ip(&mut self, name: &'static str, value: IpAddr) {
        self.key(name);
        self.out.push(b'"');
        put(&mut self.out, sluice_wire::IpText::of(value).as_bytes());
        self.out.push(b'"');
    }

    fn opt_str(&mut self, name: &'static str, value: Option<&str>) {
        match value {
            Some(v) => self.str(name, v),
            None => self.skip(name),
        }
    }

    fn dotted(&mut self, name: &'static str, first: &str, second: Option<&str>) {
        self.key(name);
        self.out.push(b'"');
        escape_json(&mut self.out, first);
        if let Some(second) = second {
            self.out.push(b'.');
            escape_json(&mut self.out, second);
        }
        self.out.push(b'"');
    }

    fn str_list(&mut self, name: &'static str, values: &[Text]) {
        if values.is_empty() {
            self.skip(name);
            return;
        }
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

    fn constant(&mut self, block: ConstantBlock, write: impl FnOnce(&mut Self)) {
        let ConstantBlock::EmptyDirection(i) = block;
        if let Some((bytes, fields)) = &self.empty_directions[i] {
            self.out.extend_from_slice(bytes);
            self.field += fields;
            return;
        }
        let (start, first_field) = (self.out.len(), self.field);
        write(self);
        self.empty_directions[i] = Some((self.out[start..].into(), self.field - first_field));
    }

    fn list(&mut self, name: &'static str, values: &[u64]) {
        self.key(name);
        self.out.push(b'[');
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            write_u64(&mut self.out, *v);
        }
        self.out.push(b']');
    }
}

fn escape_json(out: &mut Vec<u8>, s: &str) {
    if !needs_json_escape(s.as_bytes()) {
        put(out, s.as_bytes());
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

    #[test]
    fn every_line_is_one_object_with_every_valued_field_once_in_order() {
        use crate::schema::{Record, field_names, sample_flow, valued_field_names};
        let mut flow = sample_flow();
        flow.ext.label.app = Some("YouTube");
        let record = Record {
            flow: &flow,
            end: sluice_flow::EndReason::Idle,
            stats: None,
            media: Some("audio"),
        };
        let mut encoder = super::JsonlEncoder::default();
        let mut out = Vec::new();
        // The second record takes the keys the first one built.
        for _ in 0..2 {
            encoder.encode(&record, &mut out);
        }
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], lines[1]);

        let valued = valued_field_names(&record);
        let left_out: Vec<&str> = field_names().into_iter().filter(|n| !valued.contains(n)).collect();
        assert!(
            ["host", "stats_app", "c2s_mss", "dns_answers"]
                .iter()
                .all(|n| left_out.contains(n)),
            "the sample leaves out absent metadata, model verdicts and SYN options: {left_out:?}"
        );
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(lines[0]).unwrap();
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        let mut expected = valued.clone();
        keys.sort_unstable();
        expected.sort_unstable();
        assert_eq!(keys, expected, "each field with a value once, and no other");
        let places: Vec<usize> = valued
            .iter()
            .map(|n| lines[0].find(&format!("\"{n}\":")).unwrap())
            .collect();
        assert!(places.is_sorted(), "fields in schema order");
        assert_eq!(object["app"], "Unknown.YouTube");
        assert_eq!(object["media"], "audio");
        assert_eq!(object["end_reason"], "idle");
    }

    /// Labels come from users' rule files too: each part is escaped, and
    /// one longer than any shipped label is written whole.
    #[test]
    fn labels_are_escaped_and_whole() {
        use crate::schema::{Record, sample_flow};
        let long = "A".repeat(64);
        for (master, app, expected) in [
            ("My\"Proto", Some("Back\\slash"), "My\"Proto.Back\\slash".to_string()),
            ("TLS", None, "TLS".to_string()),
            (long.as_str(), Some(long.as_str()), format!("{long}.{long}")),
        ] {
            let mut flow = sample_flow();
            flow.ext.label.master = master.to_string().leak();
            flow.ext.label.app = app.map(|a| &*a.to_string().leak());
            let mut out = Vec::new();
            super::JsonlEncoder::default().encode(&Record::idle(&flow), &mut out);
            let object: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(object["app"], expected.as_str());
            assert_eq!(object["master"], master);
        }
    }

    /// A direction without packets is copied from its first writing: the
    /// same line as an encoder that writes it afresh, whichever
    /// directions are empty and in whatever order records come.
    #[test]
    fn empty_directions_are_written_as_afresh() {
        use crate::schema::{Record, sample_flow};
        let mut flows = Vec::new();
        for empty in [[false, true], [false, false], [true, false], [true, true]] {
            let mut flow = sample_flow();
            flow.directions[1] = flow.directions[0];
            for (d, empty) in flow.directions.iter_mut().zip(empty) {
                if empty {
                    *d = Default::default();
                }
            }
            flows.push(flow);
        }
        let line = |encoder: &mut super::JsonlEncoder, flow| {
            let mut out = Vec::new();
            encoder.encode(&Record::idle(flow), &mut out);
            String::from_utf8(out).unwrap()
        };
        for order in [[0, 1, 2, 3, 0, 2], [1, 0, 3, 2, 1, 0], [3, 3, 1, 0, 2, 1]] {
            let mut encoder = super::JsonlEncoder::default();
            for i in order {
                let fresh = line(&mut super::JsonlEncoder::default(), &flows[i]);
                assert_eq!(line(&mut encoder, &flows[i]), fresh, "flow {i} in order {order:?}");
            }
        }
    }

    /// Keys longer than the in-place copy take the other path, and read
    /// the same.
    #[test]
    fn long_keys_are_written_whole() {
        use crate::schema::FieldSink;
        const LONG: &str = "a_field_name_longer_than_any_in_the_schema";
        let mut encoder = super::JsonlEncoder::default();
        for _ in 0..2 {
            encoder.out.clear();
            encoder.field = 0;
            encoder.u64("first", 1);
            encoder.u64(LONG, 27);
            encoder.str("last", "x");
            assert_eq!(
                String::from_utf8(encoder.out.clone()).unwrap(),
                format!("\"first\":1,\"{LONG}\":27,\"last\":\"x\"")
            );
        }
    }

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
