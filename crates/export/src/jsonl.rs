use std::io::Write;
use std::net::IpAddr;

use crate::schema::{FieldSink, Record, write_record};

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
        // first record builds the keys, the others copy them.
        if self.keys.get(i).is_none_or(|k| !std::ptr::eq(k.name, name)) {
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
        self.keys.truncate(i);
        self.keys.push(Key::new(name, i == 0));
    }
}

/// Takes `n` more bytes of the spare capacity, which the caller wrote.
#[inline(always)]
#[allow(unsafe_code)]
fn set_len(out: &mut Vec<u8>, n: usize) {
    debug_assert!(n <= out.capacity() - out.len());
    // SAFETY: the caller initialised the first `n` bytes of the spare
    // capacity (`put`, `JsonlEncoder::key`).
    unsafe { out.set_len(out.len() + n) };
}

/// Appends a short slice without calling `memcpy`: a record is some 200
/// copies of 2 to 20 bytes (keys, numbers), and the call into libc for
/// each cost more than the JSON encoding itself (it was 11 % of a
/// worker's time). Up to 32 bytes go as two overlapping fixed-size moves.
#[inline(always)]
fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    if n > 32 {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(32);
    let spare = &mut out.spare_capacity_mut()[..32];
    if n >= 16 {
        spare[..16].write_copy_of_slice(&bytes[..16]);
        spare[n - 16..][..16].write_copy_of_slice(&bytes[n - 16..][..16]);
    } else if n >= 8 {
        spare[..8].write_copy_of_slice(&bytes[..8]);
        spare[n - 8..][..8].write_copy_of_slice(&bytes[n - 8..][..8]);
    } else if n >= 4 {
        spare[..4].write_copy_of_slice(&bytes[..4]);
        spare[n - 4..][..4].write_copy_of_slice(&bytes[n - 4..][..4]);
    } else {
        for (to, &b) in spare.iter_mut().zip(bytes) {
            to.write(b);
        }
    }
    set_len(out, n);
}

impl FieldSink for JsonlEncoder {
    fn u64(&mut self, name: &'static str, value: u64) {
        self.key(name);
        write_u64(&mut self.out, value);
    }

    fn opt_u64(&mut self, name: &'static str, value: Option<u64>) {
        match value {
            Some(v) => self.u64(name, v),
            None => self.skip(name),
        }
    }

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
            None => self.skip(name),
        }
    }

    fn str_list(&mut self, name: &'static str, values: &[String]) {
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

/// A number in decimal. Single digits, most of a record's counters (TCP
/// flags, retransmissions, directions), skip the general formatter.
#[inline(always)]
pub(crate) fn write_u64(out: &mut Vec<u8>, value: u64) {
    if value < 10 {
        out.push(b'0' + value as u8);
    } else {
        put(out, itoa::Buffer::new().format(value).as_bytes());
    }
}

/// Shortest round-trip decimal, with non-finite values (never produced,
/// but never allowed to corrupt a line either) as `null`.
pub(crate) fn write_f64(out: &mut Vec<u8>, value: f64) {
    // Whole numbers (a mean of equal sizes, a direction without packets)
    // are common and cheaper in integer code; ryu writes them as `N.0`
    // too, below 10^16. Whole is tested by a round trip through an
    // integer, two instructions, where `fract` calls a software `trunc`
    // on the baseline x86-64 target.
    if (0.0..1e15).contains(&value) && value.is_sign_positive() && (value as u64) as f64 == value {
        write_u64(out, value as u64);
        put(out, b".0");
    } else if value.is_finite() {
        put(out, ryu::Buffer::new().format_finite(value).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

fn escape_json(out: &mut Vec<u8>, s: &str) {
    // Host names, fingerprints and labels almost never need escaping: copy
    // them whole rather than byte by byte.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
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
    use super::{escape_json, put};

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

    #[test]
    fn numbers_read_as_ryu_writes_them() {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            9.0,
            10.0,
            175.0,
            0.5,
            1e15 - 1.0,
            1e15,
            1e16,
            1e17,
            -3.0,
            2.5e-7,
        ];
        values.extend((0..2000).map(|i| f64::from(i) * 37.0));
        values.extend((0..2000).map(|i| f64::from(i) / 7.0));
        for v in values {
            let mut out = Vec::new();
            super::write_f64(&mut out, v);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                ryu::Buffer::new().format_finite(v),
                "{v}"
            );
        }
    }

    #[test]
    fn put_appends_every_length_exactly() {
        let source: Vec<u8> = (0..48u8).map(|b| b'a' + b % 26).collect();
        for n in 0..=source.len() {
            let mut out = b"head".to_vec();
            put(&mut out, &source[..n]);
            put(&mut out, b"|");
            assert_eq!(&out[..4], b"head");
            assert_eq!(&out[4..4 + n], &source[..n], "length {n}");
            assert_eq!(out.len(), 5 + n);
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
