//! Flow records as Parquet: [`Columns`] gathers records into plain
//! vectors through the same [`FieldSink`] walk as the text formats and
//! makes Arrow arrays of them once a batch, and
//! [`ParquetFiles`] writes the batches into `flows-NNNNNN.parquet` files,
//! rotated by size or age: every column through pages of Sluice's own
//! (`fixed`), spliced into the row groups of the parquet crate's file
//! writer.
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

pub use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, ListArray, StringArray,
    TimestampNanosecondArray,
};
use arrow_buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnDescPtr;
use rustc_hash::FxHashMap;
use sluice_classify::Text;
use sluice_wire::IpText;

use crate::schema::{ConstantBlock, FieldSink, Record, sample_flow, write_record};

mod fixed;
use fixed::{FixedChunk, Items, LabelChunk, ListChunk, PageEncoder, Ranges};

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

/// Fields with statistics per column chunk, by which a reader skips row
/// groups.
const PORTS: &[&str] = &["src_port", "dst_port"];

/// Lists whose items are delta-encoded (sizes and directions, whose
/// deltas are small). The first gaps stay plain: their deltas vary as
/// much as they do, and ZSTD finds more to shrink in their plain bytes.
const DELTA_LISTS: &[&str] = &["first_sizes", "first_directions"];

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

/// The validity of a column that can be absent, one flag a row; `None`
/// for a column that never is, which gets no null bitmap. An absent value
/// is not written when it comes: a column that can be absent is filled up
/// to the row of its next value (or to the batch's end) with nulls, so
/// that a record touches only the columns it has values in (the protocol
/// metadata is absent from most records).
type Valid = Option<Vec<bool>>;

/// Fills a column that can be absent with nulls up to `row`, before a
/// value is written at `row` (or the batch ends there).
#[inline]
fn fill_nulls<T: Copy + Default>(values: &mut Vec<T>, valid: &mut Valid, row: usize) {
    if let Some(valid) = valid
        && valid.len() < row
    {
        fill_gap(values, valid, row);
    }
}

/// Out of the line of [`fill_nulls`]: the walk calls its caller for
/// each of a record's fields, which then save and restore only the few
/// registers of a push.
#[cold]
#[inline(never)]
fn fill_gap<T: Copy + Default>(values: &mut Vec<T>, valid: &mut Vec<bool>, row: usize) {
    values.resize(row, T::default());
    valid.resize(row, false);
}

/// The same for a column of strings: empty strings up to `row`.
#[inline]
fn fill_null_strings(offsets: &mut Vec<i32>, valid: &mut Valid, row: usize) {
    if let Some(valid) = valid
        && valid.len() < row
    {
        fill_string_gap(offsets, valid, row);
    }
}

#[cold]
#[inline(never)]
fn fill_string_gap(offsets: &mut Vec<i32>, valid: &mut Vec<bool>, row: usize) {
    let end = *offsets.last().expect("offsets start with 0");
    offsets.resize(row + 1, end);
    valid.resize(row, false);
}

/// A column's values as plain vectors, filled one row at a time and made
/// into an Arrow array at the batch's end.
enum Column {
    Int {
        values: Vec<i64>,
        valid: Valid,
        timestamp: bool,
    },
    Float {
        values: Vec<f64>,
        valid: Valid,
    },
    Str {
        offsets: Vec<i32>,
        bytes: Vec<u8>,
        valid: Valid,
    },
    Label {
        keys: Vec<i32>,
        valid: Valid,
        labels: Box<Labels>,
    },
    Ints {
        offsets: Vec<i32>,
        values: Vec<i64>,
    },
    Strs {
        offsets: Vec<i32>,
        item_offsets: Vec<i32>,
        bytes: Vec<u8>,
    },
}

/// An offset into a batch's bytes or items. A batch holds some thousands
/// of records of bounded fields, far from 2 GiB.
fn offset(len: usize) -> i32 {
    i32::try_from(len).expect("a batch's strings stay under 2 GiB")
}

fn nulls(valid: &mut Valid, rows: usize) -> Option<NullBuffer> {
    let valid = valid.as_mut()?;
    let all = valid.iter().all(|&v| v);
    let flags = std::mem::replace(valid, Vec::with_capacity(rows));
    (!all).then(|| NullBuffer::from(flags))
}

/// Most vectors of each type a column keeps for the next batches: those
/// of a few batches.
const SPARES: usize = 4;

/// A column's vectors of batches the writer is done with, by type, for
/// the column of the next batches: so that a batch's columns are memory
/// the process has already touched, of the size the column needs,
/// without asking the allocator for it.
#[derive(Default)]
struct Spares {
    i64s: Vec<Vec<i64>>,
    f64s: Vec<Vec<f64>>,
    i32s: Vec<Vec<i32>>,
    bytes: Vec<Vec<u8>>,
}

/// An empty vector with room for `capacity` values, a spare one if any.
fn spare<T>(spares: &mut Vec<Vec<T>>, capacity: usize) -> Vec<T> {
    match spares.pop() {
        Some(mut values) => {
            values.clear();
            values.reserve(capacity);
            values
        }
        None => Vec::with_capacity(capacity),
    }
}

/// `buffer`'s vector among the spares, if no other array holds it.
fn keep<T: arrow_buffer::ArrowNativeType>(spares: &mut Vec<Vec<T>>, buffer: Buffer) {
    if spares.len() < SPARES
        && let Ok(values) = buffer.into_vec::<T>()
    {
        spares.push(values);
    }
}

impl Spares {
    /// Keeps the vectors of `array`, a column of `kind`, when no other
    /// array holds them.
    fn keep(&mut self, array: ArrayRef, kind: Kind) {
        // The typed array's buffers are the same as `array`'s, which is
        // dropped so that they are held once.
        match kind {
            Kind::Int => {
                let values = array.as_primitive::<Int64Type>().clone();
                drop(array);
                keep(&mut self.i64s, values.into_parts().1.into_inner());
            }
            Kind::Timestamp => {
                let values = array.as_primitive::<TimestampNanosecondType>().clone();
                drop(array);
                keep(&mut self.i64s, values.into_parts().1.into_inner());
            }
            Kind::Float => {
                let values = array.as_primitive::<Float64Type>().clone();
                drop(array);
                keep(&mut self.f64s, values.into_parts().1.into_inner());
            }
            Kind::Str => {
                let strings = array.as_string::<i32>().clone();
                drop(array);
                let (offsets, bytes, _) = strings.into_parts();
                keep(&mut self.i32s, offsets.into_inner().into_inner());
                keep(&mut self.bytes, bytes);
            }
            Kind::Label => {
                let labels = array.as_dictionary::<Int32Type>().clone();
                drop(array);
                keep(&mut self.i32s, labels.into_parts().0.into_parts().1.into_inner());
            }
            Kind::Ints | Kind::Strs => {
                let lists = array.as_list::<i32>().clone();
                drop(array);
                let (_, offsets, items, _) = lists.into_parts();
                keep(&mut self.i32s, offsets.into_inner().into_inner());
                self.keep(items, if kind == Kind::Ints { Kind::Int } else { Kind::Str });
            }
        }
    }
}

fn take<T>(values: &mut Vec<T>, spares: &mut Vec<Vec<T>>, rows: usize) -> ScalarBuffer<T>
where
    T: arrow_buffer::ArrowNativeType,
{
    ScalarBuffer::from(std::mem::replace(values, spare(spares, rows)))
}

fn take_offsets(offsets: &mut Vec<i32>, spares: &mut Spares, rows: usize) -> OffsetBuffer<i32> {
    let mut fresh = spare(&mut spares.i32s, rows + 1);
    fresh.push(0);
    OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(offsets, fresh)))
}

#[allow(unsafe_code)]
fn strings(
    offsets: &mut Vec<i32>,
    bytes: &mut Vec<u8>,
    spares: &mut Spares,
    rows: usize,
    nulls: Option<NullBuffer>,
) -> StringArray {
    let fresh = spare(&mut spares.bytes, bytes.capacity());
    let bytes = std::mem::replace(bytes, fresh);
    let offsets = take_offsets(offsets, spares, rows);
    debug_assert!(std::str::from_utf8(&bytes).is_ok());
    // SAFETY: `bytes` holds only whole `&str`s, one after another (a
    // dotted label's two with a '.' between), and `offsets` starts at 0
    // and ends at its length, rising, at the end of each: the text
    // between two offsets is UTF-8, which the array would check again
    // byte by byte.
    unsafe { StringArray::new_unchecked(offsets, Buffer::from_vec(bytes), nulls) }
}

fn list_field(kind: Kind) -> Arc<Field> {
    match kind.data_type() {
        DataType::List(field) => field,
        _ => unreachable!("a list kind"),
    }
}

impl Column {
    /// Vectors with room for `rows` rows, so that filling them does not
    /// copy them as they grow.
    fn new(kind: Kind, nullable: bool, rows: usize) -> Column {
        let valid = nullable.then(|| Vec::with_capacity(rows));
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        match kind {
            Kind::Int | Kind::Timestamp => Column::Int {
                values: Vec::with_capacity(rows),
                valid,
                timestamp: kind == Kind::Timestamp,
            },
            Kind::Float => Column::Float {
                values: Vec::with_capacity(rows),
                valid,
            },
            Kind::Str => Column::Str {
                offsets,
                bytes: Vec::with_capacity(rows * 16),
                valid,
            },
            Kind::Label => Column::Label {
                keys: Vec::with_capacity(rows),
                valid,
                labels: Box::default(),
            },
            Kind::Ints => Column::Ints {
                offsets,
                values: Vec::with_capacity(rows * 4),
            },
            Kind::Strs => Column::Strs {
                offsets,
                item_offsets: vec![0],
                bytes: Vec::new(),
            },
        }
    }

    /// The column's `filled` rows as an array; the vectors start again
    /// empty, with room for `rows` rows.
    fn finish(&mut self, filled: usize, rows: usize, spares: &mut Spares) -> ArrayRef {
        match self {
            Column::Int { values, valid, .. } => fill_nulls(values, valid, filled),
            Column::Float { values, valid } => fill_nulls(values, valid, filled),
            Column::Str { offsets, valid, .. } => fill_null_strings(offsets, valid, filled),
            Column::Label { keys, valid, .. } => fill_nulls(keys, valid, filled),
            Column::Ints { .. } => {}
            Column::Strs {
                offsets, item_offsets, ..
            } => offsets.resize(filled + 1, offset(item_offsets.len() - 1)),
        }
        match self {
            Column::Int {
                values,
                valid,
                timestamp,
            } => {
                let nulls = nulls(valid, rows);
                let values = take(values, &mut spares.i64s, rows);
                if *timestamp {
                    Arc::new(TimestampNanosecondArray::new(values, nulls).with_timezone("UTC"))
                } else {
                    Arc::new(Int64Array::new(values, nulls))
                }
            }
            Column::Float { values, valid } => {
                let nulls = nulls(valid, rows);
                Arc::new(Float64Array::new(take(values, &mut spares.f64s, rows), nulls))
            }
            Column::Str { offsets, bytes, valid } => {
                let nulls = nulls(valid, rows);
                Arc::new(strings(offsets, bytes, spares, rows, nulls))
            }
            Column::Label { keys, valid, labels } => {
                let nulls = nulls(valid, rows);
                let keys = Int32Array::new(take(keys, &mut spares.i32s, rows), nulls);
                let values = labels.finish();
                Arc::new(DictionaryArray::<Int32Type>::new(keys, Arc::new(values)))
            }
            Column::Ints { offsets, values } => {
                let items = Int64Array::new(take(values, &mut spares.i64s, rows * 4), None);
                Arc::new(ListArray::new(
                    list_field(Kind::Ints),
                    take_offsets(offsets, spares, rows),
                    Arc::new(items),
                    None,
                ))
            }
            Column::Strs {
                offsets,
                item_offsets,
                bytes,
            } => {
                let items = strings(item_offsets, bytes, spares, 0, None);
                Arc::new(ListArray::new(
                    list_field(Kind::Strs),
                    take_offsets(offsets, spares, rows),
                    Arc::new(items),
                    None,
                ))
            }
        }
    }
}

/// Slots in [`Labels`]' cache by address.
const LABEL_SLOTS: usize = 64;

/// A batch's dictionary of one label column. Labels are mostly static
/// strings, so a label is first looked up by where its text lies (one
/// or two parts, for `Master.App`) and the text compared with the entry
/// found there, a few bytes; only a label not seen at that address is
/// hashed by its text.
struct Labels {
    /// The distinct labels, in the order of their keys.
    offsets: Vec<i32>,
    bytes: Vec<u8>,
    by_text: FxHashMap<Box<str>, i32>,
    /// (address and length of each part, key); a key of -1 is empty.
    slots: [(usize, usize, usize, usize, i32); LABEL_SLOTS],
    joined: String,
}

impl Default for Labels {
    fn default() -> Self {
        Labels {
            offsets: vec![0],
            bytes: Vec::new(),
            by_text: FxHashMap::default(),
            slots: [(0, 0, 0, 0, -1); LABEL_SLOTS],
            joined: String::new(),
        }
    }
}

impl Labels {
    fn text(&self, key: i32) -> &[u8] {
        let k = key as usize;
        &self.bytes[self.offsets[k] as usize..self.offsets[k + 1] as usize]
    }

    /// The key of `first` or `first.second`, where both lie in static
    /// memory: its text cannot have changed since a label was last found
    /// at its address, so the address alone finds it.
    fn static_key(&mut self, first: &'static str, second: Option<&'static str>) -> i32 {
        let (a, la) = (first.as_ptr() as usize, first.len());
        let (b, lb) = second.map_or((0, 0), |s| (s.as_ptr() as usize, s.len()));
        let slot = Self::slot(a, b);
        let (sa, sla, sb, slb, key) = self.slots[slot];
        if key >= 0 && (sa, sla, sb, slb) == (a, la, b, lb) {
            return key;
        }
        self.key(first, second)
    }

    fn slot(a: usize, b: usize) -> usize {
        ((a ^ b.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) % LABEL_SLOTS
    }

    /// The key of `first` or `first.second`.
    fn key(&mut self, first: &str, second: Option<&str>) -> i32 {
        let (a, la) = (first.as_ptr() as usize, first.len());
        let (b, lb) = second.map_or((0, 0), |s| (s.as_ptr() as usize, s.len()));
        let slot = Self::slot(a, b);
        let (sa, sla, sb, slb, key) = self.slots[slot];
        if key >= 0 && (sa, sla, sb, slb) == (a, la, b, lb) {
            let text = self.text(key);
            let same = match second {
                None => text == first.as_bytes(),
                Some(second) => {
                    text.len() == la + 1 + lb
                        && &text[..la] == first.as_bytes()
                        && text[la] == b'.'
                        && &text[la + 1..] == second.as_bytes()
                }
            };
            if same {
                return key;
            }
        }
        let mut joined = std::mem::take(&mut self.joined);
        joined.clear();
        joined.push_str(first);
        if let Some(second) = second {
            joined.push('.');
            joined.push_str(second);
        }
        let key = match self.by_text.get(joined.as_str()) {
            Some(&key) => key,
            None => {
                let key = offset(self.by_text.len());
                self.bytes.extend_from_slice(joined.as_bytes());
                self.offsets.push(offset(self.bytes.len()));
                self.by_text.insert(joined.as_str().into(), key);
                key
            }
        };
        self.joined = joined;
        self.slots[slot] = (a, la, b, lb, key);
        key
    }

    /// The labels as the dictionary's values; the table starts again
    /// empty.
    fn finish(&mut self) -> StringArray {
        let count = self.by_text.len();
        self.by_text.clear();
        self.slots = [(0, 0, 0, 0, -1); LABEL_SLOTS];
        strings(&mut self.offsets, &mut self.bytes, &mut Spares::default(), count, None)
    }
}

/// A scalar cell with no value: an integer cell holds at most
/// `i64::MAX` (see [`int`]), and a double whose bits are these is written
/// as the processor's own NaN ([`float_cell`]).
const ABSENT: u64 = u64::MAX;

/// Rows transposed at a time from the cells into the columns: their
/// cells stay in the first-level cache while each column takes its
/// values from them.
const TRANSPOSE_ROWS: usize = 64;

/// Where the walk's fields go, in schema order: the scalars (integers,
/// timestamps, doubles) to a cell of the row, the rest to their column.
struct Layout {
    /// The column of each scalar, in the order of the cells of a row.
    scalars: Vec<usize>,
    /// The column of each other field, in walk order.
    others: Vec<usize>,
}

static LAYOUT: LazyLock<Layout> = LazyLock::new(|| {
    let (scalars, others) =
        (0..KINDS.len()).partition(|&i| matches!(KINDS[i].1, Kind::Int | Kind::Timestamp | Kind::Float));
    Layout { scalars, others }
});

fn float_cell(value: f64) -> u64 {
    match value.to_bits() {
        ABSENT => f64::NAN.to_bits(),
        bits => bits,
    }
}

/// Records gathered into columns, one per field.
///
/// The scalars of a record (70 of its 98 fields) are written one after
/// another into a row of cells, a push each, and moved into their columns
/// a block of rows at a time when the batch is made; the strings, labels
/// and lists go straight to their columns. A push into the column of each
/// scalar, some 70 a record, each with its column's kind and validity to
/// match, cost several times as many instructions.
pub struct Columns {
    columns: Vec<Column>,
    /// Each column's spare vectors.
    spares: Vec<Spares>,
    /// Rows a batch is expected to hold.
    capacity: usize,
    /// The scalars of the rows so far, a row after another.
    cells: Vec<u64>,
    /// The field among the others (`Layout::others`) the walk of the
    /// current record is at.
    at: usize,
    rows: usize,
    /// The cells of each direction when it is empty, once written: an
    /// empty direction (most flows' server side on a mixed link) is
    /// pushed from them, without its figures computed again or a call a
    /// field.
    empty_directions: [Option<Vec<u64>>; 2],
}

impl Default for Columns {
    fn default() -> Self {
        Columns::with_capacity(0)
    }
}

/// Integers above `i64::MAX` cannot occur in a flow's counters or times;
/// should one come, it is written as the largest value, not wrapped.
fn int(value: u64) -> i64 {
    // A clamp, not `try_from`: one comparison and a move, no branch.
    value.min(i64::MAX as u64) as i64
}

fn push_valid(valid: &mut Valid) {
    if let Some(valid) = valid {
        valid.push(true);
    }
}

impl Columns {
    /// Columns with room for batches of `rows` records.
    pub fn with_capacity(rows: usize) -> Columns {
        Columns {
            columns: KINDS
                .iter()
                .map(|&(_, kind, nullable)| Column::new(kind, nullable, rows))
                .collect(),
            spares: KINDS.iter().map(|_| Spares::default()).collect(),
            capacity: rows,
            cells: Vec::with_capacity(rows * LAYOUT.scalars.len()),
            at: 0,
            rows: 0,
            empty_directions: [None, None],
        }
    }

    /// Adds one record as a row.
    pub fn push(&mut self, record: &Record) {
        self.at = 0;
        write_record(record, self);
        debug_assert_eq!(self.at, LAYOUT.others.len(), "the walk visits every column");
        self.rows += 1;
        debug_assert_eq!(self.cells.len(), self.rows * LAYOUT.scalars.len(), "a cell a scalar");
    }

    /// Rows gathered since the last batch.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The rows gathered so far as a batch; the columns start again
    /// empty.
    pub fn batch(&mut self) -> RecordBatch {
        let rows = self.capacity.max(self.rows);
        let filled = self.rows;
        self.transpose();
        let arrays: Vec<ArrayRef> = self
            .columns
            .iter_mut()
            .zip(&mut self.spares)
            .map(|(column, spares)| column.finish(filled, rows, spares))
            .collect();
        self.rows = 0;
        RecordBatch::try_new(SCHEMA.clone(), arrays).expect("the columns follow the schema")
    }

    /// Takes back the vectors of a batch the writer is done with (of
    /// these columns or of others alike), for the next batches.
    pub fn recycle(&mut self, batch: RecordBatch) {
        let (_, arrays, _) = batch.into_parts();
        for ((array, &(_, kind, _)), spares) in arrays.into_iter().zip(KINDS.iter()).zip(&mut self.spares) {
            spares.keep(array, kind);
        }
    }

    /// Moves the cells into the scalars' columns.
    fn transpose(&mut self) {
        let width = LAYOUT.scalars.len();
        for block in self.cells.chunks(TRANSPOSE_ROWS * width) {
            for (at, &column) in LAYOUT.scalars.iter().enumerate() {
                let cells = block.chunks_exact(width).map(|row| row[at]);
                match &mut self.columns[column] {
                    Column::Int {
                        values, valid: None, ..
                    } => values.extend(cells.map(|cell| cell as i64)),
                    Column::Float { values, valid: None } => values.extend(cells.map(f64::from_bits)),
                    Column::Int {
                        values,
                        valid: Some(valid),
                        ..
                    } => {
                        for cell in cells {
                            values.push(if cell == ABSENT { 0 } else { cell as i64 });
                            valid.push(cell != ABSENT);
                        }
                    }
                    Column::Float {
                        values,
                        valid: Some(valid),
                    } => {
                        for cell in cells {
                            values.push(if cell == ABSENT { 0.0 } else { f64::from_bits(cell) });
                            valid.push(cell != ABSENT);
                        }
                    }
                    _ => unreachable!("a scalar's cell for a column of another kind"),
                }
            }
        }
        self.cells.clear();
    }

    fn next(&mut self) -> &mut Column {
        let column = LAYOUT.others[self.at];
        self.at += 1;
        &mut self.columns[column]
    }

    /// A label from static memory: `first`, or `first.second`; none when
    /// `first` is.
    fn static_label(&mut self, first: Option<&'static str>, second: Option<&'static str>) {
        let row = self.rows;
        match (self.next(), first) {
            (Column::Label { keys, valid, labels }, Some(first)) => {
                fill_nulls(keys, valid, row);
                keys.push(labels.static_key(first, second));
                push_valid(valid);
            }
            (Column::Label { valid, .. }, None) => debug_assert!(valid.is_some(), "absent in a column that is never"),
            _ => unreachable!("a label field in another column"),
        }
    }

    /// `first`, or `first.second`; none when `first` is.
    fn string(&mut self, first: Option<&str>, second: Option<&str>) {
        let row = self.rows;
        match (self.next(), first) {
            (Column::Str { offsets, bytes, valid }, Some(first)) => {
                fill_null_strings(offsets, valid, row);
                bytes.extend_from_slice(first.as_bytes());
                if let Some(second) = second {
                    bytes.push(b'.');
                    bytes.extend_from_slice(second.as_bytes());
                }
                offsets.push(offset(bytes.len()));
                push_valid(valid);
            }
            (Column::Label { keys, valid, labels }, Some(first)) => {
                fill_nulls(keys, valid, row);
                keys.push(labels.key(first, second));
                push_valid(valid);
            }
            (Column::Str { valid, .. } | Column::Label { valid, .. }, None) => {
                debug_assert!(valid.is_some(), "absent in a column that is never")
            }
            _ => unreachable!("a string field in another column"),
        }
    }
}

impl FieldSink for Columns {
    fn constant(&mut self, block: ConstantBlock, write: impl FnOnce(&mut Self)) {
        let ConstantBlock::EmptyDirection(i) = block;
        match &self.empty_directions[i] {
            Some(cells) => self.cells.extend_from_slice(cells),
            None => {
                let (start, at) = (self.cells.len(), self.at);
                write(self);
                debug_assert_eq!(self.at, at, "a direction's fields are all scalars");
                self.empty_directions[i] = Some(self.cells[start..].to_vec());
            }
        }
    }
    fn u64(&mut self, _: &'static str, value: u64) {
        self.cells.push(int(value) as u64);
    }
    fn opt_u64(&mut self, _: &'static str, value: Option<u64>) {
        self.cells.push(value.map_or(ABSENT, |value| int(value) as u64));
    }
    fn f64(&mut self, _: &'static str, value: f64) {
        self.cells.push(float_cell(value));
    }
    fn opt_f64(&mut self, _: &'static str, value: Option<f64>) {
        self.cells.push(value.map_or(ABSENT, float_cell));
    }
    fn str(&mut self, _: &'static str, value: &str) {
        self.string(Some(value), None);
    }
    fn ip(&mut self, _: &'static str, value: IpAddr) {
        self.string(Some(IpText::of(value).as_str()), None);
    }
    fn list(&mut self, _: &'static str, items: &[u64]) {
        match self.next() {
            Column::Ints { offsets, values } => {
                values.extend(items.iter().map(|&v| int(v)));
                offsets.push(offset(values.len()));
            }
            _ => unreachable!("a list field in another column"),
        }
    }
    fn opt_str(&mut self, _: &'static str, value: Option<&str>) {
        self.string(value, None);
    }
    fn dotted(&mut self, _: &'static str, first: &str, second: Option<&str>) {
        self.string(Some(first), second);
    }
    fn label(&mut self, _: &'static str, value: &'static str) {
        self.static_label(Some(value), None);
    }
    fn opt_label(&mut self, _: &'static str, value: Option<&'static str>) {
        self.static_label(value, None);
    }
    fn dotted_label(&mut self, _: &'static str, first: &'static str, second: Option<&'static str>) {
        self.static_label(Some(first), second);
    }
    fn str_list(&mut self, _: &'static str, items: &[Text]) {
        let row = self.rows;
        match self.next() {
            // An empty list, the common case, is written when the next
            // list that is not, or the batch's end, fills up to it.
            Column::Strs { .. } if items.is_empty() => {}
            Column::Strs {
                offsets,
                item_offsets,
                bytes,
            } => {
                offsets.resize(row + 1, offset(item_offsets.len() - 1));
                for item in items {
                    bytes.extend_from_slice(item.as_str().as_bytes());
                    item_offsets.push(offset(bytes.len()));
                }
                offsets.push(offset(item_offsets.len() - 1));
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

/// A column of the row group being written, through Sluice's own pages
/// ([`fixed`]).
enum ColumnWriter {
    Fixed(Box<FixedChunk>),
    Labels(Box<LabelChunk>),
    List(Box<ListChunk>),
}

/// The row group being written.
struct Group {
    columns: Vec<ColumnWriter>,
    rows: usize,
}

struct Open {
    file: SerializedFileWriter<File>,
    /// The file's column descriptors, in schema order.
    descriptors: Vec<ColumnDescPtr>,
    group: Option<Group>,
    encoder: PageEncoder,
    temporary: PathBuf,
    path: PathBuf,
    opened: Instant,
    rows: u64,
}

impl Open {
    /// The row group being written, begun if none is.
    fn group(&mut self) -> &mut Group {
        if self.group.is_none() {
            let columns = self
                .descriptors
                .iter()
                .zip(KINDS.iter())
                .map(|(descriptor, &(name, kind, nullable))| {
                    let chunk = match kind {
                        Kind::Int | Kind::Timestamp if !nullable => FixedChunk::new(if TIMESTAMPS.contains(&name) {
                            Ranges::Pages
                        } else if PORTS.contains(&name) {
                            Ranges::Chunk
                        } else {
                            Ranges::None
                        }),
                        Kind::Int | Kind::Timestamp => FixedChunk::new(Ranges::None),
                        Kind::Float => FixedChunk::floats(),
                        Kind::Str => FixedChunk::strings(),
                        Kind::Label => return ColumnWriter::Labels(Box::new(LabelChunk::new(nullable))),
                        Kind::Ints | Kind::Strs => {
                            let items = match kind {
                                Kind::Strs => Items::Strings,
                                _ if DELTA_LISTS.contains(&name) => Items::Delta,
                                _ => Items::Plain,
                            };
                            return ColumnWriter::List(Box::new(ListChunk::new(descriptor, items)));
                        }
                    };
                    ColumnWriter::Fixed(Box::new(if nullable { chunk.nullable() } else { chunk }))
                })
                .collect();
            self.group = Some(Group { columns, rows: 0 });
        }
        self.group.as_mut().expect("just begun")
    }

    /// Adds `batch`'s rows to the row group, which has room for them.
    fn write(&mut self, batch: &RecordBatch) -> parquet::errors::Result<()> {
        let group = self.group.as_mut().expect("a row group is begun");
        for (at, column) in group.columns.iter_mut().enumerate() {
            let array = batch.column(at);
            match column {
                ColumnWriter::Fixed(chunk) => match KINDS[at].1 {
                    Kind::Float => {
                        let values = array.as_primitive::<Float64Type>().values();
                        chunk.write_floats(values, array.nulls(), &mut self.encoder)?
                    }
                    Kind::Timestamp => {
                        let values = array.as_primitive::<TimestampNanosecondType>().values();
                        chunk.write(values, array.nulls(), &mut self.encoder)?
                    }
                    Kind::Int => {
                        let values = array.as_primitive::<Int64Type>().values();
                        chunk.write(values, array.nulls(), &mut self.encoder)?
                    }
                    Kind::Str => chunk.write_strings(array.as_string::<i32>(), &mut self.encoder)?,
                    Kind::Label | Kind::Ints | Kind::Strs => unreachable!("a column of its own kind of chunk"),
                },
                ColumnWriter::Labels(chunk) => {
                    let labels = array.as_dictionary::<Int32Type>();
                    let dictionary = labels.values().as_string::<i32>();
                    let keys = labels.keys();
                    chunk.write(dictionary, keys.values(), keys.nulls(), &mut self.encoder)?;
                }
                ColumnWriter::List(chunk) => {
                    let lists = array.as_list::<i32>();
                    let offsets = lists.value_offsets();
                    match KINDS[at].1 {
                        Kind::Strs => {
                            chunk.write_strings(offsets, lists.values().as_string::<i32>(), &mut self.encoder)?
                        }
                        _ => {
                            let values = lists.values().as_primitive::<Int64Type>().values();
                            chunk.write_ints(offsets, values, &mut self.encoder)?
                        }
                    }
                }
            }
        }
        group.rows += batch.num_rows();
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Writes the row group being written, if any, into the file.
    fn flush(&mut self) -> parquet::errors::Result<()> {
        let Some(group) = self.group.take() else {
            return Ok(());
        };
        let mut writer = self.file.next_row_group()?;
        for (column, descriptor) in group.columns.into_iter().zip(&self.descriptors) {
            match column {
                ColumnWriter::List(chunk) => {
                    let (bytes, close) = chunk.close(descriptor.clone(), &mut self.encoder)?;
                    writer.append_column(&bytes, close)?;
                }
                ColumnWriter::Fixed(chunk) => {
                    let (bytes, close) = chunk.close(descriptor.clone(), &mut self.encoder)?;
                    writer.append_column(&bytes, close)?;
                }
                ColumnWriter::Labels(chunk) => {
                    let (bytes, close) = chunk.close(descriptor.clone(), &mut self.encoder)?;
                    writer.append_column(&bytes, close)?;
                }
            }
        }
        writer.close()?;
        Ok(())
    }

    /// Bytes written and an estimate of those buffered.
    fn size(&self) -> u64 {
        let buffered: usize = self.group.as_ref().map_or(0, |group| {
            group
                .columns
                .iter()
                .map(|column| match column {
                    ColumnWriter::List(chunk) => chunk.estimated_bytes(),
                    ColumnWriter::Fixed(chunk) => chunk.estimated_bytes(),
                    ColumnWriter::Labels(chunk) => chunk.estimated_bytes(),
                })
                .sum()
        });
        (self.file.bytes_written() + buffered) as u64
    }
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
        // Every column is written by `fixed`, which delta-encodes
        // integers and timestamps (a column that hardly changes, a flag
        // counter or a VLAN, shrinks to a few bits a value before ZSTD
        // sees it, where plain encoding would hand ZSTD eight bytes a
        // value), as are the items of the lists in `DELTA_LISTS`, keeps
        // labels as dictionaries and keeps statistics where readers skip
        // by them: a page index on the times (a time range reads only its
        // pages), per column chunk on the ports. The file writer takes
        // only its name from these properties.
        let properties = WriterProperties::builder()
            .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")))
            .build();
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
            // The Arrow writer sets up the file as it would write it (the
            // Parquet schema from the Arrow one, which it stores in the
            // footer for Arrow readers); its row groups are then written
            // here, column by column.
            let (file, _) = ArrowWriter::try_new(file, SCHEMA.clone(), Some(self.properties.clone()))
                .and_then(ArrowWriter::into_serialized_writer)
                .map_err(|e| error(e.to_string()))?;
            let descriptors = file.schema_descr().columns().to_vec();
            let encoder = PageEncoder::new().map_err(|e| error(e.to_string()))?;
            self.next += 1;
            self.open = Some(Open {
                file,
                descriptors,
                group: None,
                encoder,
                temporary,
                path,
                opened: Instant::now(),
                rows: 0,
            });
        }
        Ok(self.open.as_mut().expect("just opened"))
    }

    /// Writes a batch, in slices of at most `SLICE_ROWS` so that a file
    /// closes near its size even when one batch would fill several, and
    /// into row groups of [`ROW_GROUP_ROWS`].
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), ParquetError> {
        let mut at = 0;
        while at < batch.num_rows() {
            let open = self.open()?;
            let failed = |e: parquet::errors::ParquetError, open: &Open| ParquetError {
                path: open.temporary.clone(),
                message: e.to_string(),
            };
            let room = ROW_GROUP_ROWS - open.group().rows;
            let rows = SLICE_ROWS.min(batch.num_rows() - at).min(room);
            open.write(&batch.slice(at, rows)).map_err(|e| failed(e, open))?;
            if rows == room {
                open.flush().map_err(|e| failed(e, open))?;
            }
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
        let due = self.rotation.bytes.is_some_and(|max| open.size() >= max)
            || self.rotation.age.is_some_and(|max| open.opened.elapsed() >= max);
        if due { self.close() } else { Ok(()) }
    }

    /// Completes the open file: its last row group and footer written,
    /// synced and renamed to its name.
    pub fn close(&mut self) -> Result<(), ParquetError> {
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        // A file whose last row group fails stays open, for the drop to
        // remove.
        open.flush().map_err(|e| ParquetError {
            path: open.temporary.clone(),
            message: e.to_string(),
        })?;
        let open = self.open.take().expect("open");
        let error = |message: String| ParquetError {
            path: open.temporary.clone(),
            message,
        };
        let file = open.file.into_inner().map_err(|e| error(e.to_string()))?;
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
    use sluice_classify::Metadata;

    #[test]
    fn integers_past_i64_are_clamped_not_wrapped() {
        assert_eq!(int(0), 0);
        assert_eq!(int(i64::MAX as u64), i64::MAX);
        assert_eq!(int(i64::MAX as u64 + 1), i64::MAX);
        assert_eq!(int(u64::MAX), i64::MAX);
    }

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
    fn a_label_at_a_reused_address_is_compared_by_its_text() {
        let mut labels = Labels::default();
        let tls = labels.key("TLS", None);
        assert_eq!(labels.key("TLS", None), tls);
        // The same text at another address, and joined from two parts,
        // are the same label.
        let joined = String::from("TLS.Google");
        let google = labels.key(&joined, None);
        assert_ne!(google, tls);
        assert_eq!(labels.key("TLS", Some("Google")), google);
        assert_eq!(labels.key("TLS", Some("Google")), google);
        // Another text where the last one lay is another label.
        let mut buffer = String::from("ab");
        let ab = labels.key(&buffer, None);
        buffer.clear();
        buffer.push_str("cd");
        let cd = labels.key(&buffer, None);
        assert_ne!(ab, cd);
        assert_eq!(labels.key("ab", None), ab);
        let values = labels.finish();
        let texts: Vec<&str> = values.iter().map(Option::unwrap).collect();
        assert_eq!(texts, ["TLS", "TLS.Google", "ab", "cd"]);
        assert_eq!(labels.key("cd", None), 0, "a batch's dictionary starts empty");
    }

    #[test]
    fn a_static_label_is_the_same_label_as_its_text() {
        let mut labels = Labels::default();
        let tls = labels.key(&String::from("TLS"), None);
        assert_eq!(labels.static_key("TLS", None), tls);
        assert_eq!(labels.static_key("TLS", None), tls);
        let google = labels.static_key("TLS", Some("Google"));
        assert_eq!(labels.key(&String::from("TLS.Google"), None), google);
        assert_ne!(labels.static_key("DNS", None), tls);
        let values = labels.finish();
        let texts: Vec<&str> = values.iter().map(Option::unwrap).collect();
        assert_eq!(texts, ["TLS", "TLS.Google", "DNS"]);
    }

    /// Every cell of a batch against the JSON line of its record.
    #[test]
    fn columns_hold_what_json_lines_write() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Float64Type, Int64Type, TimestampNanosecondType};
        use arrow_array::{Array, ListArray};
        use serde_json::{Value, json};

        let mut flows = Vec::new();
        for i in 0..6u64 {
            let mut flow = sample_flow();
            flow.first_ns = 1_700_000_000_000_000_000 + i;
            flow.last_ns = flow.first_ns + 1000 * i;
            flow.directions[0].packets = i;
            flow.directions[0].bytes = 100 * i;
            flow.first_count = i.min(3) as _;
            flow.ext.label.master = ["TLS", "DNS", "HTTP"][i as usize % 3];
            flow.ext.label.app = [Some("Google"), None][i as usize % 2];
            flow.ext.confidence = 0.25 * i as f32;
            if i % 2 == 0 {
                flow.ext.meta = Some(Box::new(Metadata {
                    host: Some(format!("host{i}.example").as_str().into()),
                    http_method: Some("GET".into()),
                    http_status: Some(200 + i as u16),
                    dns_answers: (0..i).map(|n| format!("10.0.0.{n}").as_str().into()).collect(),
                    ..Metadata::default()
                }));
            }
            flows.push(flow);
        }
        let medias = [Some("audio"), None, Some("video")];
        let records: Vec<Record> = flows
            .iter()
            .enumerate()
            .map(|(i, flow)| Record {
                flow,
                end: sluice_flow::EndReason::Idle,
                stats: None,
                media: medias[i % 3],
            })
            .collect();
        let mut columns = Columns::with_capacity(4);
        for record in &records {
            columns.push(record);
        }
        let batch = columns.batch();
        assert_eq!(batch.num_rows(), records.len());
        let mut json = crate::jsonl::JsonlEncoder::default();
        for (row, record) in records.iter().enumerate() {
            let mut line = Vec::new();
            json.encode(record, &mut line);
            let line: Value = serde_json::from_slice(&line).unwrap();
            for (at, &(name, kind, _)) in KINDS.iter().enumerate() {
                let column = batch.column(at);
                let cell = if column.is_null(row) {
                    Value::Null
                } else {
                    match kind {
                        Kind::Int => json!(column.as_primitive::<Int64Type>().value(row)),
                        Kind::Timestamp => json!(column.as_primitive::<TimestampNanosecondType>().value(row)),
                        Kind::Float => json!(column.as_primitive::<Float64Type>().value(row)),
                        Kind::Str => json!(column.as_string::<i32>().value(row)),
                        Kind::Label => {
                            let dict = column.as_dictionary::<Int32Type>();
                            let key = dict.keys().value(row) as usize;
                            json!(dict.values().as_string::<i32>().value(key))
                        }
                        Kind::Ints => {
                            let items = column.as_any().downcast_ref::<ListArray>().unwrap().value(row);
                            json!(items.as_primitive::<Int64Type>().values().to_vec())
                        }
                        Kind::Strs => {
                            let items = column.as_any().downcast_ref::<ListArray>().unwrap().value(row);
                            json!(items.as_string::<i32>().iter().map(Option::unwrap).collect::<Vec<_>>())
                        }
                    }
                };
                match line.get(name) {
                    // JSON lines write a whole float as an integer.
                    Some(value) if kind == Kind::Float => {
                        assert_eq!(cell.as_f64(), value.as_f64(), "row {row}, {name}")
                    }
                    // An integer above i64::MAX is written as i64::MAX.
                    Some(value) if value.as_u64().is_some_and(|v| v > i64::MAX as u64) => {
                        assert_eq!(cell, json!(i64::MAX), "row {row}, {name}")
                    }
                    Some(value) => assert_eq!(&cell, value, "row {row}, {name}"),
                    None => assert!(
                        cell.is_null() || cell == json!([]),
                        "row {row}, {name}: {cell} where JSON has none"
                    ),
                }
            }
        }
    }

    /// Absent values are filled in when a later row has one or the batch
    /// ends, and a batch's columns start again empty: a second batch whose
    /// first rows lack what its last has.
    #[test]
    fn absent_values_are_nulls_up_to_the_next_value_and_the_batch_end() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::Int64Type;
        use arrow_array::{Array, ListArray};

        let plain = sample_flow();
        let mut rich = sample_flow();
        rich.ext.meta = Some(Box::new(Metadata {
            host: Some("a.example".into()),
            http_status: Some(404),
            dns_answers: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            ..Metadata::default()
        }));
        let column = |batch: &RecordBatch, name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
        let mut columns = Columns::with_capacity(2);
        columns.push(&Record::idle(&rich));
        columns.push(&Record::idle(&plain));
        let first = columns.batch();
        for order in [[&plain, &plain, &rich], [&plain, &rich, &plain]] {
            for flow in order {
                columns.push(&Record::idle(flow));
            }
            let batch = columns.batch();
            assert_eq!(batch.num_rows(), 3);
            let rich_row = order.iter().position(|f| f.ext.meta.is_some()).unwrap();
            let host = column(&batch, "host");
            let status = column(&batch, "http_status");
            let answers = column(&batch, "dns_answers");
            let answers = answers.as_any().downcast_ref::<ListArray>().unwrap();
            for row in 0..3 {
                let has = row == rich_row;
                assert_eq!(host.is_valid(row), has, "host, row {row}");
                assert_eq!(status.is_valid(row), has, "http_status, row {row}");
                assert_eq!(
                    answers.value(row).len(),
                    if has { 2 } else { 0 },
                    "dns_answers, row {row}"
                );
            }
            assert_eq!(host.as_string::<i32>().value(rich_row), "a.example");
            assert_eq!(status.as_primitive::<Int64Type>().value(rich_row), 404);
            assert_eq!(answers.value(rich_row).as_string::<i32>().value(1), "10.0.0.2");
        }
        let host = column(&first, "host");
        assert_eq!((host.is_valid(0), host.is_valid(1)), (true, false));
        assert_eq!(column(&first, "stats_app").null_count(), 2);
    }

    /// The scalars of rows past one block of the transposition land in
    /// their rows, the absent ones as nulls.
    #[test]
    fn scalars_of_many_rows_land_in_their_rows() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Float64Type, Int64Type};

        let flows: Vec<_> = (0..2 * TRANSPOSE_ROWS as u64 + 7)
            .map(|i| {
                let mut flow = sample_flow();
                flow.first_ns = 1_700_000_000_000_000_000 + i;
                flow.last_ns = flow.first_ns + 3 * i;
                flow.ext.confidence = i as f32 / 1000.0;
                if i % 3 == 0 {
                    flow.ext.meta = Some(Box::new(Metadata {
                        http_status: Some(200 + i as u16),
                        ..Metadata::default()
                    }));
                }
                flow
            })
            .collect();
        let mut columns = Columns::with_capacity(4);
        for flow in &flows {
            columns.push(&Record::idle(flow));
        }
        let batch = columns.batch();
        assert_eq!(batch.num_rows(), flows.len());
        let column = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
        let (durations, status, confidence) = (column("duration_ns"), column("http_status"), column("confidence"));
        for row in 0..flows.len() {
            let i = row as i64;
            assert_eq!(durations.as_primitive::<Int64Type>().value(row), 3 * i, "row {row}");
            assert_eq!(status.is_valid(row), i % 3 == 0, "row {row}");
            if i % 3 == 0 {
                assert_eq!(status.as_primitive::<Int64Type>().value(row), 200 + i, "row {row}");
            }
            assert_eq!(
                confidence.as_primitive::<Float64Type>().value(row),
                i as f64 / 1000.0,
                "row {row}"
            );
        }
    }

    /// The one double whose bits mark an absent cell is written as a NaN,
    /// which it is.
    #[test]
    fn a_double_with_the_absent_cells_bits_is_still_a_nan() {
        let odd = f64::from_bits(ABSENT);
        assert!(odd.is_nan());
        assert_ne!(float_cell(odd), ABSENT);
        assert!(f64::from_bits(float_cell(odd)).is_nan());
        assert_eq!(float_cell(-1.5), (-1.5f64).to_bits());
    }

    /// A batch's vectors, taken back, hold the next batches, which are
    /// the same as batches of fresh vectors.
    #[test]
    fn recycled_vectors_make_the_same_batches() {
        let plain = sample_flow();
        let mut rich = sample_flow();
        rich.ext.meta = Some(Box::new(Metadata {
            host: Some("a.example".into()),
            dns_answers: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            ..Metadata::default()
        }));
        let orders = [[&rich, &plain, &plain], [&plain, &plain, &rich], [&plain, &rich, &rich]];
        let mut recycled = Columns::with_capacity(2);
        let mut fresh = Columns::with_capacity(2);
        let packets = arrow_schema().index_of("packets").unwrap();
        let mut vectors = Vec::new();
        for order in orders {
            for flow in order {
                recycled.push(&Record::idle(flow));
                fresh.push(&Record::idle(flow));
            }
            let batch = recycled.batch();
            assert_eq!(batch, fresh.batch());
            let values = batch.column(packets).as_primitive::<Int64Type>().values().as_ptr();
            // A batch is made of the vectors the columns hold, which are
            // then replaced by spares: those of the batch before the last.
            if vectors.len() >= 2 {
                assert_eq!(values, vectors[vectors.len() - 2], "the column's vector, taken back");
            }
            vectors.push(values);
            recycled.recycle(batch);
        }
        // A batch's vector still held elsewhere is not taken back.
        recycled.push(&Record::idle(&plain));
        let batch = recycled.batch();
        let held = batch.column(0).clone();
        let spare = |columns: &Columns, at: usize| columns.spares[at].bytes.len() + columns.spares[at].i64s.len();
        let before = (spare(&recycled, 0), spare(&recycled, packets));
        recycled.recycle(batch);
        assert_eq!(spare(&recycled, 0), before.0);
        assert_eq!(spare(&recycled, packets), before.1 + 1);
        assert_eq!(held.len(), 1);
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
