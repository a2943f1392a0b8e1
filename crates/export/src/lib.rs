//! Flow records as files and messages: JSON lines, CSV, Parquet and IPFIX.
//!
//! [`schema::write_record`] is the one place that names and orders the
//! fields of a flow record; the JSON-lines and CSV encoders only decide how
//! a value is spelled, so the two formats cannot drift apart.

mod csv;
pub mod ipfix;
pub mod ipfix_lines;
#[cfg(test)]
mod ipfix_reference;
mod jsonl;
pub mod parquet;
pub mod read;
pub mod schema;
mod text;

pub use csv::CsvEncoder;
pub use jsonl::JsonlEncoder;
pub use schema::{FieldSink, SCHEMA_VERSION, field_names, write_record};

/// Output formats of `sluice analyze`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Jsonl,
    Csv,
    /// `flows-NNNNNN.parquet` files ([`parquet::ParquetFiles`]).
    Parquet,
    /// Summary only, no per-flow records.
    None,
}

impl Format {
    pub fn file_name(self) -> Option<&'static str> {
        match self {
            Format::Jsonl => Some("flows.jsonl"),
            Format::Csv => Some("flows.csv"),
            Format::Parquet | Format::None => None,
        }
    }
}

/// Encodes finished flows into a byte buffer in one of the formats.
pub enum Encoder {
    Jsonl(JsonlEncoder),
    Csv(CsvEncoder),
}

impl Encoder {
    pub fn new(format: Format) -> Option<Encoder> {
        match format {
            Format::Jsonl => Some(Encoder::Jsonl(JsonlEncoder::default())),
            Format::Csv => Some(Encoder::Csv(CsvEncoder::default())),
            Format::Parquet | Format::None => None,
        }
    }

    /// What goes at the top of the file (the CSV header line).
    pub fn preamble(&self) -> Vec<u8> {
        match self {
            Encoder::Jsonl(_) => Vec::new(),
            Encoder::Csv(_) => CsvEncoder::header(),
        }
    }

    pub fn encode(&mut self, record: &schema::Record, out: &mut Vec<u8>) {
        match self {
            Encoder::Jsonl(e) => e.encode(record, out),
            Encoder::Csv(e) => e.encode(record, out),
        }
    }
}
