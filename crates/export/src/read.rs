//! Flow records read back: the fields that `sluice train` and `sluice
//! evaluate` learn from, out of either format this crate writes.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

/// The part of a flow record a learner needs: who talked, the opening
/// packets, and the labels the classifier chain gave.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct RecordFeatures {
    pub src_ip: String,
    pub src_port: u16,
    pub dst_ip: String,
    pub dst_port: u16,
    pub l4: String,
    pub first_sizes: Vec<u64>,
    /// As written: 0 client to server, 1 server to client.
    pub first_directions: Vec<u64>,
    pub first_iat_ns: Vec<u64>,
    pub app: String,
    pub master: String,
    pub classifier: String,
}

impl RecordFeatures {
    /// The directions as a bit set, bit i for packet i (server to client).
    pub fn server_to_client_bits(&self) -> u32 {
        self.first_directions
            .iter()
            .take(32)
            .enumerate()
            .fold(0, |bits, (i, &d)| bits | ((d != 0) as u32) << i)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(
        "{path}, line {line}: not a Sluice flow record ({detail}); give flows.jsonl or flows.csv written by `sluice analyze`"
    )]
    Record { path: String, line: u64, detail: String },
}

/// Calls `each` for every record of a `flows.jsonl` or `flows.csv`, told
/// apart by their first byte rather than by name. Returns how many
/// records were read.
pub fn read_records(path: &Path, mut each: impl FnMut(RecordFeatures)) -> Result<u64, ReadError> {
    let name = path.display().to_string();
    let io = |source| ReadError::Io {
        path: name.clone(),
        source,
    };
    let mut reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let first = reader.fill_buf().map_err(io)?.first().copied();
    match first {
        None => Ok(0),
        Some(b'{') => read_jsonl(reader, &name, &mut each),
        Some(_) => read_csv(reader, &name, &mut each),
    }
}

fn read_jsonl(reader: impl BufRead, name: &str, each: &mut impl FnMut(RecordFeatures)) -> Result<u64, ReadError> {
    let mut records = 0;
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| ReadError::Io {
            path: name.to_string(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(&line).map_err(|e| ReadError::Record {
            path: name.to_string(),
            line: i as u64 + 1,
            detail: e.to_string(),
        })?;
        each(record);
        records += 1;
    }
    Ok(records)
}

fn read_csv(reader: impl std::io::Read, name: &str, each: &mut impl FnMut(RecordFeatures)) -> Result<u64, ReadError> {
    let mut csv = csv::Reader::from_reader(reader);
    let error = |line: u64, detail: String| ReadError::Record {
        path: name.to_string(),
        line,
        detail,
    };
    let headers = csv.headers().map_err(|e| error(1, e.to_string()))?.clone();
    let column = |field: &str| {
        headers
            .iter()
            .position(|h| h == field)
            .ok_or_else(|| error(1, format!("the header has no column `{field}`")))
    };
    let columns = [
        column("src_ip")?,
        column("src_port")?,
        column("dst_ip")?,
        column("dst_port")?,
        column("l4")?,
        column("first_sizes")?,
        column("first_directions")?,
        column("first_iat_ns")?,
        column("app")?,
        column("master")?,
        column("classifier")?,
    ];
    let mut row = csv::StringRecord::new();
    let mut records = 0;
    loop {
        let line = csv.position().line();
        match csv.read_record(&mut row) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(error(line, e.to_string())),
        }
        let field = |i: usize| row.get(columns[i]).unwrap_or("");
        let number = |i: usize, what: &str| -> Result<u16, ReadError> {
            field(i)
                .parse()
                .map_err(|_| error(line, format!("`{what}` is `{}`, not a port number", field(i))))
        };
        let list = |i: usize, what: &str| -> Result<Vec<u64>, ReadError> {
            field(i)
                .split(';')
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse()
                        .map_err(|_| error(line, format!("`{what}` holds `{s}`, not a number")))
                })
                .collect()
        };
        each(RecordFeatures {
            src_ip: field(0).to_string(),
            src_port: number(1, "src_port")?,
            dst_ip: field(2).to_string(),
            dst_port: number(3, "dst_port")?,
            l4: field(4).to_string(),
            first_sizes: list(5, "first_sizes")?,
            first_directions: list(6, "first_directions")?,
            first_iat_ns: list(7, "first_iat_ns")?,
            app: field(8).to_string(),
            master: field(9).to_string(),
            classifier: field(10).to_string(),
        });
        records += 1;
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Record, sample_flow};
    use crate::{CsvEncoder, JsonlEncoder};
    use sluice_flow::EndReason;

    fn written(csv: bool) -> (tempfile::NamedTempFile, RecordFeatures) {
        let mut flow = sample_flow();
        flow.first_count = 3;
        flow.first_sizes[..3].copy_from_slice(&[74, 66, 583]);
        flow.first_directions = 0b010;
        flow.first_inter_arrivals[..3].copy_from_slice(&[0, 1500, 20]);
        let record = Record {
            flow: &flow,
            end: EndReason::Fin,
            stats: None,
            media: None,
        };
        let mut bytes = Vec::new();
        if csv {
            bytes.extend(CsvEncoder::header());
            CsvEncoder::default().encode(&record, &mut bytes);
        } else {
            JsonlEncoder::default().encode(&record, &mut bytes);
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &bytes).unwrap();
        let expected = RecordFeatures {
            src_ip: flow.key.src_ip().to_string(),
            src_port: flow.key.src_port,
            dst_ip: flow.key.dst_ip().to_string(),
            dst_port: flow.key.dst_port,
            l4: String::new(),
            first_sizes: vec![74, 66, 583],
            first_directions: vec![0, 1, 0],
            first_iat_ns: vec![0, 1500, 20],
            app: "Unknown".into(),
            master: "Unknown".into(),
            classifier: "none".into(),
        };
        (file, expected)
    }

    #[test]
    fn both_formats_read_back_to_the_same_fields() {
        for csv in [false, true] {
            let (file, expected) = written(csv);
            let mut got = Vec::new();
            assert_eq!(read_records(file.path(), |r| got.push(r)).unwrap(), 1);
            let mut got = got.pop().unwrap();
            got.l4.clear();
            assert_eq!(got, expected, "csv: {csv}");
            assert_eq!(got.server_to_client_bits(), 0b010);
        }
    }

    #[test]
    fn a_file_that_is_not_records_is_named_with_its_line() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "{\"flow_id\":\"1\"}\n").unwrap();
        let e = read_records(file.path(), |_| {}).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("missing field"), "{e}");
        std::fs::write(file.path(), "a,b\n1,2\n").unwrap();
        let e = read_records(file.path(), |_| {}).unwrap_err().to_string();
        assert!(e.contains("no column `src_ip`"), "{e}");
    }
}
