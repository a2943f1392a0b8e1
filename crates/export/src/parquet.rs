//! Flow records as Parquet: [`Columns`] gathers records into Arrow
//! columns through the same [`FieldSink`] walk as the text formats, and
//! [`ParquetFiles`] writes the batches into `flows-NNNNNN.parquet` files,
//! rotated by size or age.
//!
//! Types: integers are `INT64`, the two timestamps (`first_ts_ns`,
//! `last_ts_ns`) are nanosecond timestamps in UTC, means and deviations
//! `DOUBLE`, lists are lists, addresses strings, and the labels (`l4`,
//! `app`, `end_reason`, ...) dictionary-encoded strings. A field that JSON
//! lines leave out is null. Signed integers because Spark and several
//! other readers have no unsigned 64-bit type; no counter of a flow comes
//! near 2^63.
//!
//! A file is written under a hidden name (`.flows-NNNNNN.parquet.tmp`)
//! and renamed when it is complete, so that a reader that lists
//! `*.parquet` never opens half a file.

use std::fs::File;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use arrow_array::ArrayRef;
pub use arrow_array::RecordBatch;
use arrow_array::builder::{
    Float64Builder, Int64Builder, ListBuilder, StringBuilder, StringDictionaryBuilder, TimestampNanosecondBuilder,
};
use arrow_array::types::Int32Type;
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use sluice_classify::Text;

use crate::schema::{FieldSink, Record, sample_flow, write_record};

/// Fields whose values come from a short list: stored as dictionaries.
const LABELS: &[&str] = &[
    "l4",
    "tunnel",
    "end_reason",
    "app",
    "master",
    "classifier",
    "stats_app",
    "media",
    "http_method",
    "tls_version",
    "tls_alpn",
    "quic_version",
];

/// Fields written as timestamps rather than integers.
const TIMESTAMPS: &[&str] = &["first_ts_ns", "last_ts_ns"];

/// Rows in a row group: readers such as DuckDB and Spark split their work
/// by row group, and a group of this many flows is some megabytes.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Rows written at a time, between looks at the file's size.
const SLICE_ROWS: usize = 1024;

/// What a column holds, as the schema walk calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Int,
    Timestamp,
    Float,
    Str,
    Label,
    Ints,
    Strs,
}

impl Kind {
    fn data_type(self) -> DataType {
        match self {
            Kind::Int => DataType::Int64,
            Kind::Timestamp => DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            Kind::Float => DataType::Float64,
            Kind::Str => DataType::Utf8,
            Kind::Label => DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            Kind::Ints => DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
            Kind::Strs => DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
        }
    }
}

/// Each field's name, kind and whether it may be null, in record order.
struct Kinds(Vec<(&'static str, Kind, bool)>);

impl Kinds {
    fn push(&mut self, name: &'static str, kind: Kind, nullable: bool) {
        let kind = match kind {
            Kind::Str if LABELS.contains(&name) => Kind::Label,
            Kind::Int if TIMESTAMPS.contains(&name) => Kind::Timestamp,
            other => other,
        };
        self.0.push((name, kind, nullable));
    }
}

impl FieldSink for Kinds {
    fn u64(&mut self, name: &'static str, _: u64) {
        self.push(name, Kind::Int, false);
    }
    fn opt_u64(&mut self, name: &'static str, _: Option<u64>) {
        self.push(name, Kind::Int, true);
    }
    fn f64(&mut self, name: &'static str, _: f64) {
        self.push(name, Kind::Float, false);
    }
    fn opt_f64(&mut self, name: &'static str, _: Option<f64>) {
        self.push(name, Kind::Float, true);
    }
    fn str(&mut self, name: &'static str, _: &str) {
        self.push(name, Kind::Str, false);
    }
    fn ip(&mut self, name: &'static str, _: IpAddr) {
        self.push(name, Kind::Str, false);
    }
    fn list(&mut self, name: &'static str, _: &[u64]) {
        self.push(name, Kind::Ints, false);
    }
    fn opt_str(&mut self, name: &'static str, _: Option<&str>) {
        self.push(name, Kind::Str, true);
    }
    fn dotted(&mut self, name: &'static str, _: &str, _: Option<&str>) {
        self.push(name, Kind::Str, false);
    }
    fn str_list(&mut self, name: &'static str, _: &[Text]) {
        // Empty lists are left out of JSON lines; here they are empty.
        self.push(name, Kind::Strs, false);
    }
}

static KINDS: LazyLock<Vec<(&'static str, Kind, bool)>> = LazyLock::new(|| {
    let flow = sample_flow();
    let record = Record {
        flow: &flow,
        end: sluice_flow::EndReason::EndOfInput,
        stats: None,
        media: None,
    };
    let mut kinds = Kinds(Vec::new());
    write_record(&record, &mut kinds);
    kinds.0
});

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let fields: Vec<Field> = KINDS
        .iter()
        .map(|&(name, kind, nullable)| Field::new(name, kind.data_type(), nullable))
        .collect();
    let mut metadata = std::collections::HashMap::new();
    metadata.insert("sluice.schema_version".to_string(), crate::SCHEMA_VERSION.to_string());
    Arc::new(Schema::new_with_metadata(fields, metadata))
});

/// The Arrow schema of a flow record.
pub fn arrow_schema() -> SchemaRef {
    SCHEMA.clone()
}

enum Column {
    Int(Int64Builder),
    Timestamp(TimestampNanosecondBuilder),
    Float(Float64Builder),
    Str(StringBuilder),
    Label(StringDictionaryBuilder<Int32Type>),
    Ints(ListBuilder<Int64Builder>),
    Strs(ListBuilder<StringBuilder>),
}

impl Column {
    /// A builder with room for `rows` rows, so that filling it does not
    /// copy its buffers as they grow.
    fn new(kind: Kind, rows: usize) -> Column {
        match kind {
            Kind::Int => Column::Int(Int64Builder::with_capacity(rows)),
            Kind::Timestamp => Column::Timestamp(TimestampNanosecondBuilder::with_capacity(rows).with_timezone("UTC")),
            Kind::Float => Column::Float(Float64Builder::with_capacity(rows)),
            Kind::Str => Column::Str(StringBuilder::with_capacity(rows, rows * 16)),
            Kind::Label => Column::Label(StringDictionaryBuilder::with_capacity(rows, 64, 1024)),
            Kind::Ints => Column::Ints(ListBuilder::with_capacity(Int64Builder::with_capacity(rows * 4), rows)),
            Kind::Strs => Column::Strs(ListBuilder::with_capacity(
                StringBuilder::with_capacity(rows, rows * 8),
                rows,
            )),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Column::Int(b) => Arc::new(b.finish()),
            Column::Timestamp(b) => Arc::new(b.finish()),
            Column::Float(b) => Arc::new(b.finish()),
            Column::Str(b) => Arc::new(b.finish()),
            Column::Label(b) => Arc::new(b.finish()),
            Column::Ints(b) => Arc::new(b.finish()),
            Column::Strs(b) => Arc::new(b.finish()),
        }
    }
}

/// Records gathered into Arrow columns, one builder per field.
pub struct Columns {
    columns: Vec<Column>,
    /// Rows a batch is expected to hold.
    capacity: usize,
    /// A `Master.App` label being joined, reused from record to record.
    label: String,
    /// The column the walk of the current record is at.
    at: usize,
    rows: usize,
}

impl Default for Columns {
    fn default() -> Self {
        Columns::with_capacity(0)
    }
}

/// Integers above `i64::MAX` cannot occur in a flow's counters or times;
/// should one come, it is written as the largest value, not wrapped.
fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Columns {
    /// Columns with room for batches of `rows` records.
    pub fn with_capacity(rows: usize) -> Columns {
        Columns {
            columns: KINDS.iter().map(|&(_, kind, _)| Column::new(kind, rows)).collect(),
            capacity: rows,
            label: String::new(),
            at: 0,
            rows: 0,
        }
    }

    /// Adds one record as a row.
    pub fn push(&mut self, record: &Record) {
        self.at = 0;
        write_record(record, self);
        debug_assert_eq!(self.at, self.columns.len(), "the walk visits every column");
        self.rows += 1;
    }

    /// Rows gathered since the last batch.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The rows gathered so far as a batch; the builders start again
    /// empty.
    pub fn batch(&mut self) -> RecordBatch {
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .zip(KINDS.iter())
            .map(|(column, &(_, kind, _))| {
                let array = column.finish();
                *column = Column::new(kind, self.capacity);
                array
            })
            .collect();
        self.rows = 0;
        RecordBatch::try_new(SCHEMA.clone(), arrays).expect("the columns follow the schema")
    }

    fn next(&mut self) -> &mut Column {
        let column = &mut self.columns[self.at];
        self.at += 1;
        column
    }

    fn int(&mut self, value: Option<u64>) {
        match self.next() {
            Column::Int(b) => b.append_option(value.map(int)),
            Column::Timestamp(b) => b.append_option(value.map(int)),
            _ => unreachable!("an integer field in another column"),
        }
    }

    fn float(&mut self, value: Option<f64>) {
        match self.next() {
            Column::Float(b) => b.append_option(value),
            _ => unreachable!("a float field in another column"),
        }
    }

    fn string(&mut self, value: Option<&str>) {
        match self.next() {
            Column::Str(b) => b.append_option(value),
            Column::Label(b) => match value {
                Some(v) => {
                    b.append_value(v);
                }
                None => b.append_null(),
            },
            _ => unreachable!("a string field in another column"),
        }
    }
}

impl FieldSink for Columns {
    fn u64(&mut self, _: &'static str, value: u64) {
        self.int(Some(value));
    }
    fn opt_u64(&mut self, _: &'static str, value: Option<u64>) {
        self.int(value);
    }
    fn f64(&mut self, _: &'static str, value: f64) {
        self.float(Some(value));
    }
    fn opt_f64(&mut self, _: &'static str, value: Option<f64>) {
        self.float(value);
    }
    fn str(&mut self, _: &'static str, value: &str) {
        self.string(Some(value));
    }
    fn ip(&mut self, _: &'static str, value: IpAddr) {
        let mut buf = [0u8; 64];
        let mut cursor = std::io::Cursor::new(&mut buf[..]);
        std::io::Write::write_fmt(&mut cursor, format_args!("{value}")).expect("an address fits");
        let n = cursor.position() as usize;
        self.string(Some(std::str::from_utf8(&buf[..n]).expect("an address is ASCII")));
    }
    fn list(&mut self, _: &'static str, values: &[u64]) {
        match self.next() {
            Column::Ints(b) => {
                for &v in values {
                    b.values().append_value(int(v));
                }
                b.append(true);
            }
            _ => unreachable!("a list field in another column"),
        }
    }
    fn opt_str(&mut self, _: &'static str, value: Option<&str>) {
        self.string(value);
    }
    fn dotted(&mut self, _: &'static str, first: &str, second: Option<&str>) {
        match second {
            None => self.string(Some(first)),
            Some(second) => {
                let mut label = std::mem::take(&mut self.label);
                label.clear();
                label.push_str(first);
                label.push('.');
                label.push_str(second);
                self.string(Some(&label));
                self.label = label;
            }
        }
    }
    fn str_list(&mut self, _: &'static str, values: &[Text]) {
        match self.next() {
            Column::Strs(b) => {
                for v in values {
                    b.values().append_value(v.as_str());
                }
                b.append(true);
            }
            _ => unreachable!("a list field in another column"),
        }
    }
}

/// When a file is closed and the next begun.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rotation {
    /// Past this many bytes (written and buffered).
    pub bytes: Option<u64>,
    /// When the file has been open this long.
    pub age: Option<Duration>,
}

struct Open {
    writer: ArrowWriter<File>,
    temporary: PathBuf,
    path: PathBuf,
    opened: Instant,
    rows: u64,
}

/// `flows-NNNNNN.parquet` files in a directory, numbered from 1.
pub struct ParquetFiles {
    dir: PathBuf,
    rotation: Rotation,
    properties: WriterProperties,
    open: Option<Open>,
    next: u32,
    /// The complete files, in order.
    pub files: Vec<PathBuf>,
    /// Rows written to complete files.
    pub rows: u64,
}

/// A failed write, with the file it was for.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ParquetError {
    pub path: PathBuf,
    pub message: String,
}

impl ParquetFiles {
    pub fn new(dir: &Path, rotation: Rotation) -> ParquetFiles {
        // Parquet's dictionary pages pay a hash per value: worth it for
        // the labels, whose values repeat, not for counters and times,
        // which ZSTD compresses as well. Statistics per column chunk (a
        // reader skips a row group by its times) rather than per page.
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("a valid level")))
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")));
        for label in LABELS {
            properties = properties.set_column_dictionary_enabled(ColumnPath::from(*label), true);
        }
        let properties = properties.build();
        ParquetFiles {
            dir: dir.to_path_buf(),
            rotation,
            properties,
            open: None,
            next: 1,
            files: Vec::new(),
            rows: 0,
        }
    }

    /// The name of the `n`th file.
    pub fn file_name(n: u32) -> String {
        format!("flows-{n:06}.parquet")
    }

    fn open(&mut self) -> Result<&mut Open, ParquetError> {
        if self.open.is_none() {
            let name = Self::file_name(self.next);
            let path = self.dir.join(&name);
            let temporary = self.dir.join(format!(".{name}.tmp"));
            let error = |message: String| ParquetError {
                path: temporary.clone(),
                message,
            };
            let file = File::create(&temporary).map_err(|e| error(e.to_string()))?;
            let writer = ArrowWriter::try_new(file, SCHEMA.clone(), Some(self.properties.clone()))
                .map_err(|e| error(e.to_string()))?;
            self.next += 1;
            self.open = Some(Open {
                writer,
                temporary,
                path,
                opened: Instant::now(),
                rows: 0,
            });
        }
        Ok(self.open.as_mut().expect("just opened"))
    }

    /// Writes a batch, in slices of [`SLICE_ROWS`] so that a file closes
    /// near its size even when one batch would fill several.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), ParquetError> {
        let mut at = 0;
        while at < batch.num_rows() {
            let rows = SLICE_ROWS.min(batch.num_rows() - at);
            let open = self.open()?;
            open.writer.write(&batch.slice(at, rows)).map_err(|e| ParquetError {
                path: open.temporary.clone(),
                message: e.to_string(),
            })?;
            open.rows += rows as u64;
            at += rows;
            self.rotate_if_due()?;
        }
        Ok(())
    }

    /// Closes the open file if it is past its size or age.
    pub fn rotate_if_due(&mut self) -> Result<(), ParquetError> {
        let Some(open) = &self.open else {
            return Ok(());
        };
        let size = (open.writer.bytes_written() + open.writer.in_progress_size()) as u64;
        let due = self.rotation.bytes.is_some_and(|max| size >= max)
            || self.rotation.age.is_some_and(|max| open.opened.elapsed() >= max);
        if due { self.close() } else { Ok(()) }
    }

    /// Completes the open file: its footer written, synced and renamed to
    /// its name.
    pub fn close(&mut self) -> Result<(), ParquetError> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let error = |message: String| ParquetError {
            path: open.temporary.clone(),
            message,
        };
        let file = open.writer.into_inner().map_err(|e| error(e.to_string()))?;
        file.sync_all().map_err(|e| error(e.to_string()))?;
        std::fs::rename(&open.temporary, &open.path).map_err(|e| error(e.to_string()))?;
        self.rows += open.rows;
        self.files.push(open.path);
        Ok(())
    }
}

impl Drop for ParquetFiles {
    /// A file left open by a failed run is removed rather than left half
    /// written under its hidden name.
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            let _ = std::fs::remove_file(&open.temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::field_names;

    #[test]
    fn the_schema_has_every_field_in_order() {
        let schema = arrow_schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, field_names());
    }

    #[test]
    fn labels_are_dictionaries_and_times_timestamps() {
        let schema = arrow_schema();
        for label in LABELS {
            let field = schema.field_with_name(label).unwrap();
            assert!(matches!(field.data_type(), DataType::Dictionary(..)), "{label}");
        }
        for ts in TIMESTAMPS {
            let field = schema.field_with_name(ts).unwrap();
            assert!(
                matches!(field.data_type(), DataType::Timestamp(TimeUnit::Nanosecond, _)),
                "{ts}"
            );
        }
        assert!(schema.field_with_name("host").unwrap().is_nullable());
        assert!(!schema.field_with_name("packets").unwrap().is_nullable());
    }

    #[test]
    fn a_file_is_renamed_only_when_complete_and_rotates_by_size() {
        let dir = tempfile::tempdir().unwrap();
        let flow = sample_flow();
        let record = Record::idle(&flow);
        let mut files = ParquetFiles::new(
            dir.path(),
            Rotation {
                bytes: Some(1),
                age: None,
            },
        );
        let mut columns = Columns::default();
        columns.push(&record);
        columns.push(&record);
        let batch = columns.batch();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(columns.rows(), 0);
        files.write(&batch).unwrap();
        files.write(&batch).unwrap();
        files.close().unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["flows-000001.parquet", "flows-000002.parquet"]);
        assert_eq!(files.rows, 4);
        let reader = parquet::file::reader::SerializedFileReader::new(
            File::open(dir.path().join("flows-000002.parquet")).unwrap(),
        )
        .unwrap();
        use parquet::file::reader::FileReader;
        assert_eq!(reader.metadata().file_metadata().num_rows(), 2);
    }

    #[test]
    fn a_dropped_writer_leaves_no_half_file() {
        let dir = tempfile::tempdir().unwrap();
        let flow = sample_flow();
        let mut columns = Columns::default();
        columns.push(&Record::idle(&flow));
        let mut files = ParquetFiles::new(dir.path(), Rotation::default());
        files.write(&columns.batch()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "the hidden file");
        drop(files);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
