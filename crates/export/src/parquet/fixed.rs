//! Every column of a flow record, written by Sluice itself: each page's
//! integers delta-encoded
//! (`DELTA_BINARY_PACKED`, as the format defines it), doubles and strings
//! in the plain encoding and labels as keys into the chunk's dictionary
//! (`RLE_DICTIONARY`), straight from the batch's vectors, compressed with
//! ZSTD and laid out as a column chunk that the parquet crate's row group
//! writer splices into the file (`append_column`), with the chunk's
//! metadata and offset index built here as the crate builds them. A
//! column that can be null has a definition level a row (1 where the row
//! has a value) ahead of its page's values, which are those of the rows
//! that have one; a list column ([`ListChunk`]) a repetition and a
//! definition level for each item or empty list ahead of its items.
//!
//! Why: the crate's column writer takes such a column through its
//! general path (levels computed from the array, a mini batch at a time,
//! statistics checks, a bit-packing call per value, buffers grown as
//! each page fills and a compressor made for each page), which was the
//! largest part of the Parquet writer's time; here the levels are the
//! batch's validity as it is, the values are packed a miniblock at a
//! time, and the buffers and the compressor are kept from page to page.
//! For a label, the crate hashes each row's text into its dictionary
//! again, where the batch's keys need only be translated.

use arrow_array::{Array, StringArray};
use arrow_buffer::bit_iterator::BitIndexIterator;
use arrow_buffer::{BooleanBufferBuilder, NullBuffer};
use bytes::Bytes;
use parquet::basic::{BoundaryOrder, Compression, Encoding, PageType, Type, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ColumnChunkMetaData, ColumnIndexBuilder, OffsetIndexBuilder, PageEncodingStats};
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;
use rustc_hash::FxHashMap;

/// Values in a block of the delta encoding, and miniblocks in a block:
/// the parquet crate's own choice, which readers are tested with.
const BLOCK: usize = 128;
const MINIBLOCKS: usize = 4;
const MINIBLOCK: usize = BLOCK / MINIBLOCKS;

/// Rows in a data page: the parquet crate's default limit.
pub(super) const PAGE_ROWS: usize = 20_000;

/// The ZSTD level of every column.
pub(super) const ZSTD_LEVEL: i32 = 1;

fn uleb(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// A miniblock's `deltas` above `min` bit-packed at `width` bits each,
/// least significant bit first, as the format packs them, the unused
/// tail of a last miniblock packing zeros: `MINIBLOCK * width / 8`
/// bytes.
fn pack(out: &mut Vec<u8>, deltas: &[i64], min: i64, width: u32) {
    if width == 0 {
        return;
    }
    let bytes = MINIBLOCK * width as usize / 8;
    let start = out.len();
    out.reserve(bytes + 8);
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &d in deltas {
        let v = d.wrapping_sub(min) as u64;
        acc |= v << bits;
        bits += width;
        if bits >= 64 {
            out.extend_from_slice(&acc.to_le_bytes());
            bits -= 64;
            // The bits of `v` that did not fit.
            acc = if bits == 0 { 0 } else { v >> (width - bits) };
        }
    }
    if bits > 0 {
        out.extend_from_slice(&acc.to_le_bytes());
    }
    // Zeros for the values a last miniblock lacks; the last word's bytes
    // beyond the miniblock's cut.
    out.resize(start + bytes, 0);
}

/// One block's deltas (at most 128): the smallest, then each miniblock
/// of 32 packed at the width of its largest delta above that.
fn block(deltas: &[i64], out: &mut Vec<u8>) {
    let min = if deltas.is_empty() {
        0
    } else {
        deltas.iter().fold(i64::MAX, |min, &d| min.min(d))
    };
    uleb(out, zigzag(min));
    let mut widths = [0u8; MINIBLOCKS];
    for (width, miniblock) in widths.iter_mut().zip(deltas.chunks(MINIBLOCK)) {
        let all = miniblock.iter().fold(0u64, |all, &d| all | d.wrapping_sub(min) as u64);
        *width = (64 - all.leading_zeros()) as u8;
    }
    out.extend_from_slice(&widths);
    for (miniblock, &width) in deltas.chunks(MINIBLOCK).zip(&widths) {
        pack(out, miniblock, min, width as u32);
    }
}

/// A page's values in the `DELTA_BINARY_PACKED` encoding, encoded as
/// they come rather than gathered first: a header (block size,
/// miniblocks a block, value count, first value), then the blocks of 128
/// deltas.
#[derive(Default)]
pub(super) struct DeltaPage {
    first: i64,
    previous: i64,
    count: usize,
    deltas: Vec<i64>,
    /// The blocks so far.
    blocks: Vec<u8>,
}

impl DeltaPage {
    pub(super) fn push(&mut self, values: &[i64]) {
        let mut values = match (self.count, values.split_first()) {
            (_, None) => return,
            (0, Some((&head, rest))) => {
                self.first = head;
                self.previous = head;
                self.count = 1;
                rest
            }
            _ => values,
        };
        self.count += values.len();
        let mut previous = self.previous;
        while !values.is_empty() {
            let room = BLOCK - self.deltas.len();
            let (now, later) = values.split_at(room.min(values.len()));
            self.deltas.extend(now.iter().map(|&v| {
                let d = v.wrapping_sub(previous);
                previous = v;
                d
            }));
            values = later;
            if self.deltas.len() == BLOCK {
                block(&self.deltas, &mut self.blocks);
                self.deltas.clear();
            }
        }
        self.previous = previous;
    }

    /// The page's encoded values into `out`; the page starts again empty.
    pub(super) fn finish(&mut self, out: &mut Vec<u8>) {
        uleb(out, BLOCK as u64);
        uleb(out, MINIBLOCKS as u64);
        uleb(out, self.count as u64);
        uleb(out, zigzag(self.first));
        if !self.deltas.is_empty() {
            block(&self.deltas, &mut self.blocks);
            self.deltas.clear();
        }
        out.extend_from_slice(&self.blocks);
        self.blocks.clear();
        self.count = 0;
        self.first = 0;
    }
}

/// What the pages of all the columns share: the scratch buffer a page is
/// encoded in and the compressor.
pub(super) struct PageEncoder {
    encoded: Vec<u8>,
    zstd: zstd::bulk::Compressor<'static>,
}

impl PageEncoder {
    pub(super) fn new() -> Result<PageEncoder> {
        Ok(PageEncoder {
            encoded: Vec::new(),
            zstd: zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| ParquetError::External(Box::new(e)))?,
        })
    }
}

/// The page being filled: integers delta-encoded as they come, doubles
/// and strings in the plain encoding (their bytes, strings each after
/// its length, which ZSTD then compresses).
enum Filling {
    Ints(DeltaPage),
    Floats(Vec<u8>),
    Strings(Vec<u8>),
}

impl Filling {
    fn encoding(&self) -> Encoding {
        match self {
            Filling::Ints(_) => Encoding::DELTA_BINARY_PACKED,
            Filling::Floats(_) | Filling::Strings(_) => Encoding::PLAIN,
        }
    }
}

/// Definition levels of the rows `rows` of a column that can be null:
/// 1 where a row has a value. They are the bits of the batch's validity
/// as they lie, which is how the format packs levels of one bit.
fn push_levels(levels: &mut BooleanBufferBuilder, nulls: Option<&NullBuffer>, rows: std::ops::Range<usize>) {
    match nulls {
        None => levels.append_n(rows.len(), true),
        Some(nulls) => levels.append_buffer(&nulls.inner().slice(rows.start, rows.len())),
    }
}

/// A page's definition levels, ahead of its values as the format puts
/// them in a data page: their length in 4 bytes, then one bit-packed run
/// of 1-bit levels, a byte for each 8 (the last padded with zeros).
fn write_levels(out: &mut Vec<u8>, levels: &BooleanBufferBuilder) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    uleb(out, ((levels.len().div_ceil(8) as u64) << 1) | 1);
    out.extend_from_slice(levels.as_slice());
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// The rows of `rows` that have a value, by `nulls`.
fn present(nulls: &NullBuffer, rows: std::ops::Range<usize>) -> impl Iterator<Item = usize> + '_ {
    let bits = nulls.inner();
    BitIndexIterator::new(bits.values(), bits.offset() + rows.start, rows.len()).map(move |i| rows.start + i)
}

/// Whether `nulls` leaves any of the rows `rows` without a value.
fn has_nulls(nulls: Option<&NullBuffer>) -> Option<&NullBuffer> {
    nulls.filter(|nulls| nulls.null_count() > 0)
}

/// The min and max statistics an integer column has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ranges {
    None,
    /// The column chunk's, by which a reader skips row groups.
    Chunk,
    /// The chunk's and each page's (a column index), by which a reader
    /// also skips pages.
    Pages,
}

/// The smallest and largest of `values` and `range`.
fn widen(range: Option<(i64, i64)>, values: &[i64]) -> Option<(i64, i64)> {
    if values.is_empty() {
        return range;
    }
    let (lo, hi) = values
        .iter()
        .fold(range.unwrap_or((i64::MAX, i64::MIN)), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    Some((lo, hi))
}

/// One column's chunk of a row group, being written: integers, doubles
/// or strings.
pub(super) struct FixedChunk {
    page: Filling,
    /// Rows in the page being filled.
    page_rows: usize,
    /// The definition levels of the page being filled, for a column that
    /// can be null.
    levels: Option<BooleanBufferBuilder>,
    /// The values of a slice's rows that have one.
    present: Vec<i64>,
    written: Written,
    ranges: Ranges,
    /// Smallest and largest value of the page being filled and of the
    /// pages written, for a column with statistics.
    page_range: Option<(i64, i64)>,
    range: Option<(i64, i64)>,
    /// The pages' ranges, and whether they rise or fall from page to
    /// page, for a column with a column index.
    index: Option<ColumnIndexBuilder>,
    previous_page: Option<(i64, i64)>,
    ascending: bool,
    descending: bool,
}

impl FixedChunk {
    /// An integer column's, with the min and max statistics `ranges`
    /// says (of a column that is never null).
    pub(super) fn new(ranges: Ranges) -> FixedChunk {
        FixedChunk {
            page: Filling::Ints(DeltaPage::default()),
            page_rows: 0,
            levels: None,
            present: Vec::new(),
            written: Written::new(),
            ranges,
            page_range: None,
            range: None,
            index: (ranges == Ranges::Pages).then(|| ColumnIndexBuilder::new(Type::INT64)),
            previous_page: None,
            ascending: true,
            descending: true,
        }
    }

    /// A column of doubles'.
    pub(super) fn floats() -> FixedChunk {
        FixedChunk {
            page: Filling::Floats(Vec::with_capacity(PAGE_ROWS * 8)),
            ..FixedChunk::new(Ranges::None)
        }
    }

    /// A column of strings'.
    pub(super) fn strings() -> FixedChunk {
        FixedChunk {
            page: Filling::Strings(Vec::new()),
            ..FixedChunk::new(Ranges::None)
        }
    }

    /// The same chunk, of a column that can be null.
    pub(super) fn nullable(self) -> FixedChunk {
        FixedChunk {
            levels: Some(BooleanBufferBuilder::new(PAGE_ROWS)),
            ..self
        }
    }

    /// Adds `rows` rows, `put` adding the values of those of them that
    /// have one (all, in a column that is never null) to the page, which
    /// is written as it fills.
    fn add_rows(
        &mut self,
        rows: usize,
        nulls: Option<&NullBuffer>,
        encoder: &mut PageEncoder,
        mut put: impl FnMut(&mut Self, std::ops::Range<usize>),
    ) -> Result<()> {
        let mut at = 0;
        while at < rows {
            let now = at..rows.min(at + PAGE_ROWS - self.page_rows);
            if let Some(levels) = &mut self.levels {
                push_levels(levels, nulls, now.clone());
            }
            self.page_rows += now.len();
            at = now.end;
            put(self, now);
            if self.page_rows == PAGE_ROWS {
                self.page(encoder)?;
            }
        }
        Ok(())
    }

    /// Adds `values` to a column of doubles; where `nulls` has no value,
    /// the slot's value is not written.
    pub(super) fn write_floats(
        &mut self,
        values: &[f64],
        nulls: Option<&NullBuffer>,
        encoder: &mut PageEncoder,
    ) -> Result<()> {
        let nulls = has_nulls(nulls);
        self.add_rows(values.len(), nulls, encoder, |chunk, now| {
            let Filling::Floats(bytes) = &mut chunk.page else {
                unreachable!("doubles into another column")
            };
            match nulls {
                None => bytes.extend(values[now].iter().flat_map(|v| v.to_le_bytes())),
                Some(nulls) => bytes.extend(present(nulls, now).flat_map(|row| values[row].to_le_bytes())),
            }
        })
    }

    /// Adds `values` to an integer column; where `nulls` has no value,
    /// the slot's value is not written.
    pub(super) fn write(
        &mut self,
        values: &[i64],
        nulls: Option<&NullBuffer>,
        encoder: &mut PageEncoder,
    ) -> Result<()> {
        let nulls = has_nulls(nulls);
        self.add_rows(values.len(), nulls, encoder, |chunk, rows| {
            let Filling::Ints(page) = &mut chunk.page else {
                unreachable!("integers into another column")
            };
            match nulls {
                None => {
                    let now = &values[rows];
                    if chunk.ranges != Ranges::None {
                        chunk.page_range = widen(chunk.page_range, now);
                    }
                    page.push(now);
                }
                Some(nulls) => {
                    chunk.present.clear();
                    chunk.present.extend(present(nulls, rows).map(|row| values[row]));
                    page.push(&chunk.present);
                }
            }
        })
    }

    /// Adds a batch's column of strings.
    pub(super) fn write_strings(&mut self, strings: &StringArray, encoder: &mut PageEncoder) -> Result<()> {
        let nulls = has_nulls(strings.nulls());
        let offsets = strings.value_offsets();
        let data = strings.value_data();
        self.add_rows(strings.len(), nulls, encoder, |chunk, now| {
            let Filling::Strings(bytes) = &mut chunk.page else {
                unreachable!("strings into another column")
            };
            let mut put = |row: usize| {
                let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
                bytes.extend_from_slice(&((end - start) as u32).to_le_bytes());
                bytes.extend_from_slice(&data[start..end]);
            };
            match nulls {
                None => now.for_each(&mut put),
                Some(nulls) => present(nulls, now).for_each(&mut put),
            }
        })
    }

    /// Bytes written so far and a bound on those of the page being
    /// filled, for the file's rotation by size.
    pub(super) fn estimated_bytes(&self) -> usize {
        self.written.bytes_written()
            + match &self.page {
                Filling::Ints(page) => page.blocks.len() + page.deltas.len(),
                Filling::Floats(bytes) | Filling::Strings(bytes) => bytes.len(),
            }
    }

    fn page(&mut self, encoder: &mut PageEncoder) -> Result<()> {
        let rows = self.page_rows;
        if rows == 0 {
            return Ok(());
        }
        let encoding = self.page.encoding();
        let encoded = &mut encoder.encoded;
        encoded.clear();
        if let Some(levels) = &mut self.levels {
            write_levels(encoded, levels);
            levels.truncate(0);
        }
        match &mut self.page {
            Filling::Ints(page) => page.finish(encoded),
            Filling::Floats(bytes) | Filling::Strings(bytes) => {
                encoded.extend_from_slice(bytes);
                bytes.clear();
            }
        }
        self.written.page(&mut encoder.zstd, encoded, rows, rows, encoding)?;
        self.page_rows = 0;
        if let Some((lo, hi)) = self.page_range.take() {
            self.range = widen(self.range, &[lo, hi]);
            if let Some(index) = &mut self.index {
                index.append(false, lo.to_le_bytes().to_vec(), hi.to_le_bytes().to_vec(), 0, None);
                if let Some((last_lo, last_hi)) = self.previous_page {
                    self.ascending &= last_lo <= lo && last_hi <= hi;
                    self.descending &= last_lo >= lo && last_hi >= hi;
                }
                self.previous_page = Some((lo, hi));
            }
        }
        Ok(())
    }

    /// The chunk's bytes and what the row group writer needs to splice
    /// them into the file.
    pub(super) fn close(
        mut self,
        descr: ColumnDescPtr,
        encoder: &mut PageEncoder,
    ) -> Result<(Bytes, ColumnCloseResult)> {
        self.page(encoder)?;
        let rows = self.written.rows;
        let (chunk, mut metadata) = self
            .written
            .finish_data(descr, self.page.encoding(), rows, &mut encoder.zstd)?;
        if let Some((lo, hi)) = self.range {
            let statistics =
                ValueStatistics::new(Some(lo), Some(hi), None, Some(0), false).with_backwards_compatible_min_max(true);
            metadata = metadata.set_statistics(Statistics::Int64(statistics));
        }
        // The order the parquet crate's column writer finds: pages whose
        // ranges neither fall nor rise are ascending.
        let column_index = match self.index {
            Some(mut index) => {
                index.set_boundary_order(match (self.ascending, self.descending) {
                    (true, _) => BoundaryOrder::ASCENDING,
                    (false, true) => BoundaryOrder::DESCENDING,
                    (false, false) => BoundaryOrder::UNORDERED,
                });
                Some(index.build()?)
            }
            None => None,
        };
        closed(chunk, rows, metadata, column_index)
    }
}

/// The data pages a chunk has written: their headers and compressed
/// values, where each lies and the rows they hold.
struct Written {
    sink: TrackedWrite<Vec<u8>>,
    /// Each data page's offset in `sink`, size and rows.
    pages: Vec<(i64, i32, i64)>,
    rows: u64,
    uncompressed: u64,
}

/// A chunk's bytes and what its metadata takes of them.
struct Finished {
    bytes: Vec<u8>,
    offsets: OffsetIndexBuilder,
    /// Where the data pages start, after the dictionary page.
    data_start: i64,
    uncompressed: u64,
}

impl Written {
    fn new() -> Written {
        Written {
            sink: TrackedWrite::new(Vec::new()),
            pages: Vec::new(),
            rows: 0,
            uncompressed: 0,
        }
    }

    /// `encoded` compressed and written as a data page of `rows` rows and
    /// `values` values (levels, in a list).
    fn page(
        &mut self,
        zstd: &mut zstd::bulk::Compressor<'static>,
        encoded: &[u8],
        rows: usize,
        values: usize,
        encoding: Encoding,
    ) -> Result<()> {
        let compressed = zstd
            .compress(encoded)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        let page = Page::DataPage {
            buf: Bytes::from(compressed),
            num_values: values as u32,
            encoding,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        let spec = SerializedPageWriter::new(&mut self.sink).write_page(CompressedPage::new(page, encoded.len()))?;
        self.pages
            .push((spec.offset as i64, spec.compressed_size as i32, rows as i64));
        self.uncompressed += spec.uncompressed_size as u64;
        self.rows += rows as u64;
        Ok(())
    }

    fn bytes_written(&self) -> usize {
        self.sink.bytes_written()
    }

    /// A chunk of data pages only, all in `encoding` (with RLE levels), of
    /// `values` values: its bytes, and its metadata, starting at its first
    /// byte.
    fn finish_data(
        self,
        descr: ColumnDescPtr,
        encoding: Encoding,
        values: u64,
        zstd: &mut zstd::bulk::Compressor<'static>,
    ) -> Result<(Finished, parquet::file::metadata::ColumnChunkMetaDataBuilder)> {
        let stats = PageEncodingStats {
            page_type: PageType::DATA_PAGE,
            encoding,
            count: self.pages.len() as i32,
        };
        let chunk = self.finish(None, zstd)?;
        let metadata = chunk_metadata(descr, vec![Encoding::RLE, encoding], vec![stats], &chunk, values)?
            .set_data_page_offset(0)
            .set_dictionary_page_offset(None);
        Ok((chunk, metadata))
    }

    /// The chunk's bytes, `dictionary` (its `count` values in the plain
    /// encoding) as a dictionary page ahead of the data pages if there is
    /// one; the data pages' offset index; where they start; the chunk's
    /// uncompressed size.
    fn finish(self, dictionary: Option<(&[u8], u32)>, zstd: &mut zstd::bulk::Compressor<'static>) -> Result<Finished> {
        let mut uncompressed = self.uncompressed;
        let data_bytes = self.sink.bytes_written();
        let bytes = match dictionary {
            None => self.sink.into_inner()?,
            Some((values, count)) => {
                let mut chunk = TrackedWrite::new(Vec::new());
                let compressed = zstd.compress(values).map_err(|e| ParquetError::External(Box::new(e)))?;
                let page = Page::DictionaryPage {
                    buf: Bytes::from(compressed),
                    num_values: count,
                    encoding: Encoding::PLAIN,
                    is_sorted: false,
                };
                let spec = SerializedPageWriter::new(&mut chunk).write_page(CompressedPage::new(page, values.len()))?;
                uncompressed += spec.uncompressed_size as u64;
                let mut bytes = chunk.into_inner()?;
                bytes.extend_from_slice(&self.sink.into_inner()?);
                bytes
            }
        };
        let data_start = (bytes.len() - data_bytes) as i64;
        let mut offsets = OffsetIndexBuilder::new();
        for &(offset, size, rows) in &self.pages {
            offsets.append_offset_and_size(data_start + offset, size);
            offsets.append_row_count(rows);
        }
        Ok(Finished {
            bytes,
            offsets,
            data_start,
            uncompressed,
        })
    }
}

/// What the metadata of both kinds of chunk have alike: the column, its
/// compression, encodings and sizes (compressed and not) and its count
/// of values (rows, nulls included; a list's items and empty lists).
fn chunk_metadata(
    descr: ColumnDescPtr,
    encodings: Vec<Encoding>,
    pages: Vec<PageEncodingStats>,
    chunk: &Finished,
    rows: u64,
) -> Result<parquet::file::metadata::ColumnChunkMetaDataBuilder> {
    let (compressed, uncompressed) = (chunk.bytes.len(), chunk.uncompressed);
    Ok(ColumnChunkMetaData::builder(descr)
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL)?))
        .set_encodings(encodings)
        .set_page_encoding_stats(pages)
        .set_total_compressed_size(compressed as i64)
        .set_total_uncompressed_size(uncompressed as i64)
        .set_num_values(rows as i64))
}

/// A closed chunk: its bytes and what the row group writer splices in.
fn closed(
    Finished { bytes, offsets, .. }: Finished,
    rows: u64,
    metadata: parquet::file::metadata::ColumnChunkMetaDataBuilder,
    column_index: Option<parquet::file::page_index::column_index::ColumnIndexMetaData>,
) -> Result<(Bytes, ColumnCloseResult)> {
    let close = ColumnCloseResult {
        bytes_written: bytes.len() as u64,
        rows_written: rows,
        metadata: metadata.build()?,
        bloom_filter: None,
        column_index,
        offset_index: Some(offsets.build()),
    };
    Ok((Bytes::from(bytes), close))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::page_index::column_index::ColumnIndexMetaData;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    use super::*;

    /// `groups` written as row groups of one required INT64 column by
    /// [`FixedChunk`], then read back by the parquet crate's own reader.
    fn round_trip(groups: &[Vec<i64>], ranges: Ranges) -> (Vec<i64>, Bytes) {
        let schema = Arc::new(parse_message_type("message m { required int64 v; }").unwrap());
        let mut file = SerializedFileWriter::new(Vec::new(), schema, Arc::new(WriterProperties::default())).unwrap();
        let mut encoder = PageEncoder::new().unwrap();
        for values in groups {
            let mut chunk = FixedChunk::new(ranges);
            // In uneven slices, as batches come.
            for slice in values.chunks(777) {
                chunk.write(slice, None, &mut encoder).unwrap();
            }
            let descr = file.schema_descr().column(0);
            let (bytes, close) = chunk.close(descr, &mut encoder).unwrap();
            let mut group = file.next_row_group().unwrap();
            group.append_column(&bytes, close).unwrap();
            group.close().unwrap();
        }
        let bytes = Bytes::from(file.into_inner().unwrap());
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .unwrap()
            .build()
            .unwrap();
        let mut read = Vec::new();
        for batch in reader {
            read.extend_from_slice(batch.unwrap().column(0).as_primitive::<Int64Type>().values());
        }
        (read, bytes)
    }

    #[test]
    fn the_parquet_crate_reads_back_every_value() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut groups: Vec<Vec<i64>> = vec![
            vec![7],
            vec![-3, 5],
            vec![0; 129],
            (0..PAGE_ROWS as i64 + 33).collect(),
            vec![i64::MIN, i64::MAX, i64::MIN, 0, -1, i64::MAX, 1],
            (0..5000)
                .map(|i| 1_700_000_000_000_000_000 + i * 1_000 + (i % 7) * 13)
                .collect(),
        ];
        // Every width from 0 to 64 bits, and lengths across block ends.
        for bits in 0..=64u32 {
            let len = 1 + (bits as usize * 37) % 300;
            let mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
            groups.push((0..len).map(|_| (random() & mask) as i64).collect());
        }
        let (read, _) = round_trip(&groups, Ranges::None);
        assert_eq!(read, groups.concat());
    }

    /// Columns that can be null, of each kind, in slices of larger
    /// arrays as the writer takes a batch's: nulls in the first page
    /// every third row, a page of nulls only, then none; read back by
    /// the parquet crate's reader.
    #[test]
    fn columns_that_can_be_null_read_back_with_their_nulls() {
        use arrow_array::{Float64Array, Int32Array, Int64Array};
        let schema = parse_message_type(
            "message m { optional int64 i; optional double d; optional binary s (STRING); optional binary l (STRING); }",
        )
        .unwrap();
        let mut file =
            SerializedFileWriter::new(Vec::new(), Arc::new(schema), Arc::new(WriterProperties::default())).unwrap();
        let mut encoder = PageEncoder::new().unwrap();
        let rows = 2 * PAGE_ROWS + 300;
        let valid = |r: usize| {
            if r < PAGE_ROWS {
                !r.is_multiple_of(3)
            } else {
                r >= 2 * PAGE_ROWS
            }
        };
        let ints = Int64Array::from_iter((0..rows).map(|r| valid(r).then_some(r as i64 * 7 - 1000)));
        let doubles = Float64Array::from_iter((0..rows).map(|r| valid(r).then_some(r as f64 / 3.0)));
        let strings = StringArray::from_iter((0..rows).map(|r| valid(r).then(|| format!("s{r}"))));
        let keys = Int32Array::from_iter((0..rows).map(|r| valid(r).then_some((r % 2) as i32)));
        let dictionary = StringArray::from(vec!["DNS", "TLS"]);
        let mut i = FixedChunk::new(Ranges::None).nullable();
        let mut d = FixedChunk::floats().nullable();
        let mut s = FixedChunk::strings().nullable();
        let mut l = LabelChunk::new(true);
        for start in (0..rows).step_by(1000) {
            let len = 1000.min(rows - start);
            let part = ints.slice(start, len);
            i.write(part.values(), part.nulls(), &mut encoder).unwrap();
            let part = doubles.slice(start, len);
            d.write_floats(part.values(), part.nulls(), &mut encoder).unwrap();
            s.write_strings(&strings.slice(start, len), &mut encoder).unwrap();
            let part = keys.slice(start, len);
            l.write(&dictionary, part.values(), part.nulls(), &mut encoder).unwrap();
        }
        let descr = |c| file.schema_descr().column(c);
        let chunks = [
            i.close(descr(0), &mut encoder).unwrap(),
            d.close(descr(1), &mut encoder).unwrap(),
            s.close(descr(2), &mut encoder).unwrap(),
            l.close(descr(3), &mut encoder).unwrap(),
        ];
        let mut group = file.next_row_group().unwrap();
        for (bytes, close) in chunks {
            group.append_column(&bytes, close).unwrap();
        }
        group.close().unwrap();
        let bytes = Bytes::from(file.into_inner().unwrap());
        let mut reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .with_batch_size(rows)
            .build()
            .unwrap();
        let batch = reader.next().unwrap().unwrap();
        assert_eq!(batch.num_rows(), rows);
        assert_eq!(batch.column(0).as_primitive::<Int64Type>(), &ints);
        assert_eq!(batch.column(1).as_primitive::<Float64Type>(), &doubles);
        assert_eq!(batch.column(2).as_string::<i32>(), &strings);
        let labels: Vec<Option<&str>> = batch.column(3).as_string::<i32>().iter().collect();
        let expected: Vec<Option<&str>> = keys.iter().map(|k| k.map(|k| dictionary.value(k as usize))).collect();
        assert_eq!(labels, expected);
    }

    #[test]
    fn doubles_read_back_bit_for_bit() {
        let schema = Arc::new(parse_message_type("message m { required double v; }").unwrap());
        let mut file = SerializedFileWriter::new(Vec::new(), schema, Arc::new(WriterProperties::default())).unwrap();
        let mut encoder = PageEncoder::new().unwrap();
        let mut values: Vec<f64> = vec![0.0, -0.0, 1.5, f64::MIN_POSITIVE, f64::MAX, f64::NEG_INFINITY, f64::NAN];
        values.extend((0..PAGE_ROWS + 100).map(|i| i as f64 / 7.0));
        let mut chunk = FixedChunk::floats();
        for slice in values.chunks(1000) {
            chunk.write_floats(slice, None, &mut encoder).unwrap();
        }
        let (bytes, close) = chunk.close(file.schema_descr().column(0), &mut encoder).unwrap();
        let mut group = file.next_row_group().unwrap();
        group.append_column(&bytes, close).unwrap();
        group.close().unwrap();
        let bytes = Bytes::from(file.into_inner().unwrap());
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        let mut read = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            read.extend(
                batch
                    .column(0)
                    .as_primitive::<Float64Type>()
                    .values()
                    .iter()
                    .map(|v| v.to_bits()),
            );
        }
        let expected: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        assert_eq!(read, expected);
    }

    #[test]
    fn pages_statistics_and_offsets_are_those_of_the_values() {
        let values: Vec<i64> = (0..2 * PAGE_ROWS as i64 + 5).map(|i| (i * 7919) % 65_536).collect();
        let (read, bytes) = round_trip(std::slice::from_ref(&values), Ranges::Pages);
        assert_eq!(read, values);
        let reader = SerializedFileReader::new(bytes.clone()).unwrap();
        let column = reader.metadata().row_group(0).column(0);
        assert_eq!(column.num_values(), values.len() as i64);
        assert_eq!(
            column.compression(),
            Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL).unwrap())
        );
        let Some(Statistics::Int64(stats)) = column.statistics() else {
            panic!("no statistics: {:?}", column.statistics());
        };
        let (min, max) = (values.iter().min().unwrap(), values.iter().max().unwrap());
        assert_eq!((stats.min_opt(), stats.max_opt()), (Some(min), Some(max)));
        assert_eq!(stats.null_count_opt(), Some(0));
        // Three pages, each found where the offset index says, starting
        // at the rows it says.
        let pages = reader.get_row_group(0).unwrap().get_column_page_reader(0).unwrap();
        let mut first_rows = Vec::new();
        let mut row = 0;
        for page in pages {
            let page = page.unwrap();
            assert_eq!(page.encoding(), Encoding::DELTA_BINARY_PACKED);
            first_rows.push(row);
            row += page.num_values() as i64;
        }
        assert_eq!(first_rows, [0, PAGE_ROWS as i64, 2 * PAGE_ROWS as i64]);
        let options = parquet::file::serialized_reader::ReadOptionsBuilder::new()
            .with_page_index()
            .build();
        let reader = SerializedFileReader::new_with_options(bytes, options).unwrap();
        let index = reader.metadata().page_index_for_row_group(0);
        let locations = index.offset_index(0).expect("an offset index").page_locations();
        let starts: Vec<i64> = locations.iter().map(|l| l.first_row_index).collect();
        assert_eq!(starts, first_rows);
        assert_eq!(locations[0].offset, column.data_page_offset());
        // Each page's min and max, as the column index has them.
        let Some(ColumnIndexMetaData::INT64(pages)) = index.column_index(0) else {
            panic!("no column index of INT64");
        };
        for (page, values) in values.chunks(PAGE_ROWS).enumerate() {
            let (min, max) = (values.iter().min().unwrap(), values.iter().max().unwrap());
            assert_eq!((pages.min_value(page), pages.max_value(page)), (Some(min), Some(max)));
        }
        assert_eq!(pages.min_values().len(), 3);
    }

    #[test]
    fn rising_pages_are_an_ascending_column_index_and_only_ranges_asked_for_are_kept() {
        let values: Vec<i64> = (0..2 * PAGE_ROWS as i64 + 5)
            .map(|i| 1_700_000_000_000_000_000 + i * 3)
            .collect();
        let options = || {
            parquet::file::serialized_reader::ReadOptionsBuilder::new()
                .with_page_index()
                .build()
        };
        let (_, bytes) = round_trip(std::slice::from_ref(&values), Ranges::Pages);
        let reader = SerializedFileReader::new_with_options(bytes, options()).unwrap();
        let index = reader.metadata().page_index_for_row_group(0);
        let column_index = index.column_index(0).expect("a column index");
        assert_eq!(column_index.get_boundary_order(), Some(BoundaryOrder::ASCENDING));
        for (ranges, chunk, pages) in [(Ranges::Chunk, true, false), (Ranges::None, false, false)] {
            let (read, bytes) = round_trip(std::slice::from_ref(&values), ranges);
            assert_eq!(read, values);
            let reader = SerializedFileReader::new_with_options(bytes, options()).unwrap();
            let column = reader.metadata().row_group(0).column(0);
            assert_eq!(column.statistics().is_some(), chunk, "{ranges:?}");
            let index = reader.metadata().page_index_for_row_group(0);
            assert_eq!(index.column_index(0).is_some(), pages, "{ranges:?}");
        }
    }
}

/// `keys` (each below `1 << width`) in the RLE / bit-packing hybrid
/// encoding, as one bit-packed run: groups of eight values, the last
/// padded with zeros (a reader takes only the page's count of values).
fn bit_packed(out: &mut Vec<u8>, keys: &[u32], width: u32) {
    let groups = keys.len().div_ceil(8);
    uleb(out, ((groups as u64) << 1) | 1);
    let mut acc: u64 = 0;
    let mut bits = 0;
    for &key in keys {
        acc |= (key as u64) << bits;
        bits += width;
        while bits >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            bits -= 8;
        }
    }
    // Eight values of any width fill whole bytes: the padding's.
    let padded = (groups * 8 - keys.len()) as u32 * width + bits;
    for _ in 0..padded.div_ceil(8) {
        out.push(acc as u8);
        acc >>= 8;
    }
}

/// One label column's chunk of a row group, being written
/// dictionary-encoded (`RLE_DICTIONARY`): the chunk's dictionary is the
/// distinct labels of its batches, each batch's own dictionary mapped
/// into it once (a few labels), its keys then translated a row at a
/// time; a data page holds the definition levels (of a column that can
/// be null), then the keys of the rows that have one bit-packed at the
/// width of the page's largest, and the dictionary page (`PLAIN`) goes
/// first in the chunk.
pub(super) struct LabelChunk {
    by_text: FxHashMap<Box<[u8]>, u32>,
    /// The dictionary's values in the plain encoding: each a 4-byte
    /// length and its bytes.
    dictionary: Vec<u8>,
    /// The chunk's key of each key of the batch being written.
    mapped: Vec<u32>,
    /// The page being filled: its rows, their definition levels (of a
    /// column that can be null) and the keys of those that have one.
    page_rows: usize,
    levels: Option<BooleanBufferBuilder>,
    keys: Vec<u32>,
    /// The data pages written.
    written: Written,
}

impl LabelChunk {
    /// A chunk of a label column, which can be null if `nullable`.
    pub(super) fn new(nullable: bool) -> LabelChunk {
        LabelChunk {
            by_text: FxHashMap::default(),
            dictionary: Vec::new(),
            mapped: Vec::new(),
            page_rows: 0,
            levels: nullable.then(|| BooleanBufferBuilder::new(PAGE_ROWS)),
            keys: Vec::with_capacity(PAGE_ROWS),
            written: Written::new(),
        }
    }

    /// Adds the rows of a batch's label column: `keys` into its
    /// dictionary `labels` (none where `nulls` has no value), writing
    /// each page as it fills.
    pub(super) fn write(
        &mut self,
        labels: &StringArray,
        keys: &[i32],
        nulls: Option<&NullBuffer>,
        encoder: &mut PageEncoder,
    ) -> Result<()> {
        self.mapped.clear();
        for label in labels.iter() {
            let label = label.unwrap_or_default().as_bytes();
            let key = match self.by_text.get(label) {
                Some(&key) => key,
                None => {
                    let key = self.by_text.len() as u32;
                    self.dictionary.extend_from_slice(&(label.len() as u32).to_le_bytes());
                    self.dictionary.extend_from_slice(label);
                    self.by_text.insert(label.into(), key);
                    key
                }
            };
            self.mapped.push(key);
        }
        let nulls = has_nulls(nulls);
        let mut at = 0;
        while at < keys.len() {
            let now = at..keys.len().min(at + PAGE_ROWS - self.page_rows);
            if let Some(levels) = &mut self.levels {
                push_levels(levels, nulls, now.clone());
            }
            let mapped = &self.mapped;
            match nulls {
                None => self.keys.extend(keys[now.clone()].iter().map(|&k| mapped[k as usize])),
                Some(nulls) => self
                    .keys
                    .extend(present(nulls, now.clone()).map(|row| mapped[keys[row] as usize])),
            }
            self.page_rows += now.len();
            at = now.end;
            if self.page_rows == PAGE_ROWS {
                self.page(encoder)?;
            }
        }
        Ok(())
    }

    /// Bytes written so far and a bound on those of the page being
    /// filled and the dictionary, for the file's rotation by size.
    pub(super) fn estimated_bytes(&self) -> usize {
        self.written.bytes_written() + self.keys.len() + self.dictionary.len()
    }

    fn page(&mut self, encoder: &mut PageEncoder) -> Result<()> {
        let rows = self.page_rows;
        if rows == 0 {
            return Ok(());
        }
        let encoded = &mut encoder.encoded;
        encoded.clear();
        if let Some(levels) = &mut self.levels {
            write_levels(encoded, levels);
            levels.truncate(0);
        }
        let largest = self.keys.iter().copied().max().unwrap_or(0);
        // At least one bit: some readers take a width of 0 badly.
        let width = (32 - largest.leading_zeros()).max(1);
        encoded.push(width as u8);
        // A page of nulls only has no keys, and no run of them.
        if !self.keys.is_empty() {
            bit_packed(encoded, &self.keys, width);
        }
        self.keys.clear();
        self.page_rows = 0;
        self.written
            .page(&mut encoder.zstd, encoded, rows, rows, Encoding::RLE_DICTIONARY)
    }

    /// The chunk's bytes, the dictionary page first, and what the row
    /// group writer needs to splice them into the file.
    pub(super) fn close(
        mut self,
        descr: ColumnDescPtr,
        encoder: &mut PageEncoder,
    ) -> Result<(Bytes, ColumnCloseResult)> {
        self.page(encoder)?;
        let (pages, rows) = (self.written.pages.len() as i32, self.written.rows);
        let dictionary = (&self.dictionary[..], self.by_text.len() as u32);
        let chunk = self.written.finish(Some(dictionary), &mut encoder.zstd)?;
        let metadata = chunk_metadata(
            descr,
            vec![Encoding::PLAIN, Encoding::RLE, Encoding::RLE_DICTIONARY],
            vec![
                PageEncodingStats {
                    page_type: PageType::DICTIONARY_PAGE,
                    encoding: Encoding::PLAIN,
                    count: 1,
                },
                PageEncodingStats {
                    page_type: PageType::DATA_PAGE,
                    encoding: Encoding::RLE_DICTIONARY,
                    count: pages,
                },
            ],
            &chunk,
            rows,
        )?
        .set_dictionary_page_offset(Some(0))
        .set_data_page_offset(chunk.data_start);
        closed(chunk, rows, metadata, None)
    }
}

#[cfg(test)]
mod label_tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    use super::*;

    /// Batches of (dictionary, keys) written as row groups of one label
    /// column, and the labels each row reads back as.
    #[test]
    fn labels_read_back_through_the_chunks_dictionary() {
        let schema = Arc::new(parse_message_type("message m { required binary v (STRING); }").unwrap());
        let mut file = SerializedFileWriter::new(Vec::new(), schema, Arc::new(WriterProperties::default())).unwrap();
        let mut encoder = PageEncoder::new().unwrap();
        // Each batch has its own dictionary, in another order; some
        // labels in none but one batch; a group of one label only; and
        // enough rows for several pages and every key width up to 9 bits.
        let many: Vec<String> = (0..300).map(|i| format!("label{i}")).collect();
        let groups: Vec<Vec<(Vec<&str>, Vec<i32>)>> = vec![
            vec![
                (vec!["TLS", "DNS"], vec![0, 1, 1, 0]),
                (vec!["DNS", "", "TLS"], vec![2, 0, 1, 1, 2]),
            ],
            vec![(vec!["only"], vec![0; 3 * PAGE_ROWS / 2])],
            vec![
                (
                    many.iter().map(String::as_str).collect(),
                    (0..PAGE_ROWS as i32 + 7).map(|i| (i * 7) % 300).collect(),
                ),
                (vec!["label5", "new"], (0..1001).map(|i| i % 2).collect()),
            ],
        ];
        let mut expected: Vec<String> = Vec::new();
        for group in &groups {
            let mut chunk = LabelChunk::new(false);
            for (labels, keys) in group {
                let labels = StringArray::from(labels.clone());
                chunk.write(&labels, keys, None, &mut encoder).unwrap();
                expected.extend(keys.iter().map(|&k| labels.value(k as usize).to_string()));
            }
            let (bytes, close) = chunk.close(file.schema_descr().column(0), &mut encoder).unwrap();
            let mut group = file.next_row_group().unwrap();
            group.append_column(&bytes, close).unwrap();
            group.close().unwrap();
        }
        let bytes = Bytes::from(file.into_inner().unwrap());
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes.clone())
            .unwrap()
            .build()
            .unwrap();
        let mut read: Vec<String> = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            read.extend(
                batch
                    .column(0)
                    .as_string::<i32>()
                    .iter()
                    .map(|v| v.unwrap().to_string()),
            );
        }
        assert_eq!(read.len(), expected.len());
        assert!(read == expected, "the labels read back differ");
        let reader = SerializedFileReader::new(bytes).unwrap();
        let column = reader.metadata().row_group(2).column(0);
        assert_eq!(column.dictionary_page_offset(), Some(column.byte_range().0 as i64));
        let pages: Vec<_> = reader
            .get_row_group(2)
            .unwrap()
            .get_column_page_reader(0)
            .unwrap()
            .map(|p| p.unwrap())
            .collect();
        assert_eq!(pages[0].page_type(), PageType::DICTIONARY_PAGE);
        assert_eq!(pages[0].num_values(), 301);
        assert!(pages[1..].iter().all(|p| p.encoding() == Encoding::RLE_DICTIONARY));
        assert_eq!(pages.len(), 3);
    }
}

/// How a list column's items are encoded in its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Items {
    /// Integers, delta-encoded.
    Delta,
    /// Integers, plain: eight bytes each.
    Plain,
    /// Strings, plain: each after its length.
    Strings,
}

/// Flags, one bit each, least significant first, appended some at a
/// time.
#[derive(Default)]
struct Flags {
    bytes: Vec<u8>,
    /// Flags not yet in `bytes`: fewer than 32.
    pending: u64,
    pending_bits: u32,
    len: usize,
}

impl Flags {
    /// Appends the `n` low bits of `bits` (`n` at most 32).
    #[inline]
    fn push(&mut self, bits: u64, n: u32) {
        debug_assert!(n <= 32 && bits >> n == 0);
        self.pending |= bits << self.pending_bits;
        self.pending_bits += n;
        self.len += n as usize;
        if self.pending_bits >= 32 {
            self.bytes.extend_from_slice(&(self.pending as u32).to_le_bytes());
            self.pending >>= 32;
            self.pending_bits -= 32;
        }
    }

    /// Appends `n` flags, all set or none.
    fn push_n(&mut self, set: bool, mut n: usize) {
        while n > 0 {
            let now = n.min(32) as u32;
            self.push(if set { (1 << now) - 1 } else { 0 }, now);
            n -= now as usize;
        }
    }

    /// The flags, a byte for each 8, the last padded with zeros; none
    /// is appended after them until they are cleared.
    fn as_slice(&mut self) -> &[u8] {
        let tail = self.pending_bits.div_ceil(8) as usize;
        self.bytes.extend_from_slice(&self.pending.to_le_bytes()[..tail]);
        self.pending = 0;
        self.pending_bits = 0;
        &self.bytes
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.pending = 0;
        self.pending_bits = 0;
        self.len = 0;
    }
}

/// A level a flag, set or not, packed at `width` bits (1 or 2) in the
/// RLE / bit-packing hybrid encoding, after their length in 4 bytes as
/// a data page has them: one run of `value` or of 0 when every flag is
/// the same (`set` of them are), else one bit-packed run, a byte of
/// flags becoming `width` bytes.
fn write_flag_levels(out: &mut Vec<u8>, flags: &mut Flags, set: usize, width: u32, value: u8) {
    debug_assert!((1..=2).contains(&width) && u32::from(value) < 1 << width);
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    let count = flags.len;
    if set == 0 || set == count {
        uleb(out, (count as u64) << 1);
        out.push(if set == 0 { 0 } else { value });
    } else {
        let bytes = &flags.as_slice()[..count.div_ceil(8)];
        uleb(out, ((count.div_ceil(8) as u64) << 1) | 1);
        if width == 1 {
            out.extend_from_slice(bytes);
        } else {
            // A flag's bit spread to the low bit of its 2-bit slot,
            // times the level: 8 flags, 16 bits.
            for &b in bytes {
                let mut x = u16::from(b);
                x = (x | x << 4) & 0x0f0f;
                x = (x | x << 2) & 0x3333;
                x = (x | x << 1) & 0x5555;
                out.extend_from_slice(&(x * u16::from(value)).to_le_bytes());
            }
        }
    }
    let len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// One list column's chunk of a row group (the first packets' sizes,
/// directions and gaps, the DNS answers, the commands), being written.
/// A row is a list of items, none of them null, an empty list where the
/// record has none. A data page holds, for each item (or empty list),
/// its repetition level (1 where it continues its row's list) and its
/// definition level (the column's deepest where it is an item, 0 for an
/// empty list), then the items; pages begin at a row.
pub(super) struct ListChunk {
    items: Items,
    /// The definition level of an item, and the bits it is written in.
    item_level: u8,
    level_width: u32,
    /// The page being filled: its rows, its levels as flags (whether a
    /// level continues a list; whether it is an item), and its items.
    page_rows: usize,
    repeats: Flags,
    defined: Flags,
    page_items: usize,
    delta: DeltaPage,
    plain: Vec<u8>,
    /// The pages written, and their levels.
    written: Written,
    levels: u64,
}

impl ListChunk {
    /// A chunk of the list column `descr` (a required list of optional
    /// items, as the Arrow schema's lists are), its items encoded as
    /// `items` says.
    pub(super) fn new(descr: &ColumnDescPtr, items: Items) -> ListChunk {
        assert_eq!(descr.max_rep_level(), 1, "{}: a list of items", descr.path());
        let item_level = u8::try_from(descr.max_def_level()).expect("a shallow list");
        assert!((1..=3).contains(&item_level), "{}: a list of items", descr.path());
        ListChunk {
            items,
            item_level,
            level_width: 8 - item_level.leading_zeros(),
            page_rows: 0,
            repeats: Flags::default(),
            defined: Flags::default(),
            page_items: 0,
            delta: DeltaPage::default(),
            plain: Vec::new(),
            written: Written::new(),
            levels: 0,
        }
    }

    fn encoding(&self) -> Encoding {
        match self.items {
            Items::Delta => Encoding::DELTA_BINARY_PACKED,
            Items::Plain | Items::Strings => Encoding::PLAIN,
        }
    }

    /// Adds the rows whose lists' items lie between consecutive
    /// `offsets` (absolute, into the items `put` adds by their range),
    /// writing each page as it fills.
    fn add_rows(
        &mut self,
        offsets: &[i32],
        encoder: &mut PageEncoder,
        mut put: impl FnMut(&mut Self, std::ops::Range<usize>),
    ) -> Result<()> {
        let rows = offsets.len().saturating_sub(1);
        let mut at = 0;
        while at < rows {
            let end = rows.min(at + PAGE_ROWS - self.page_rows);
            for row in at..end {
                // An empty list is one level, 0 and 0; a list of n items
                // n levels, repeated but the first, all defined.
                match (offsets[row + 1] - offsets[row]) as usize {
                    0 => {
                        self.repeats.push(0, 1);
                        self.defined.push(0, 1);
                    }
                    n @ 1..=32 => {
                        let all = u64::MAX >> (64 - n);
                        self.repeats.push(all & !1, n as u32);
                        self.defined.push(all, n as u32);
                    }
                    n => {
                        self.repeats.push_n(false, 1);
                        self.repeats.push_n(true, n - 1);
                        self.defined.push_n(true, n);
                    }
                }
            }
            let items = offsets[at] as usize..offsets[end] as usize;
            self.page_items += items.len();
            put(self, items);
            self.page_rows += end - at;
            at = end;
            if self.page_rows == PAGE_ROWS {
                self.page(encoder)?;
            }
        }
        Ok(())
    }

    /// Adds a batch's list column of integers: `offsets` into `values`.
    pub(super) fn write_ints(&mut self, offsets: &[i32], values: &[i64], encoder: &mut PageEncoder) -> Result<()> {
        self.add_rows(offsets, encoder, |chunk, items| match chunk.items {
            Items::Delta => chunk.delta.push(&values[items]),
            Items::Plain => chunk.plain.extend(values[items].iter().flat_map(|v| v.to_le_bytes())),
            Items::Strings => unreachable!("integers into a list of strings"),
        })
    }

    /// Adds a batch's list column of strings: `offsets` into `strings`.
    pub(super) fn write_strings(
        &mut self,
        offsets: &[i32],
        strings: &StringArray,
        encoder: &mut PageEncoder,
    ) -> Result<()> {
        debug_assert_eq!(self.items, Items::Strings);
        let bounds = strings.value_offsets();
        let data = strings.value_data();
        self.add_rows(offsets, encoder, |chunk, items| {
            for item in items {
                let (start, end) = (bounds[item] as usize, bounds[item + 1] as usize);
                chunk.plain.extend_from_slice(&((end - start) as u32).to_le_bytes());
                chunk.plain.extend_from_slice(&data[start..end]);
            }
        })
    }

    /// Bytes written so far and a bound on those of the page being
    /// filled, for the file's rotation by size.
    pub(super) fn estimated_bytes(&self) -> usize {
        self.written.bytes_written()
            + self.delta.blocks.len()
            + self.delta.deltas.len()
            + self.plain.len()
            + self.repeats.len / 4
    }

    fn page(&mut self, encoder: &mut PageEncoder) -> Result<()> {
        let rows = self.page_rows;
        if rows == 0 {
            return Ok(());
        }
        let levels = self.repeats.len;
        let encoding = self.encoding();
        let encoded = &mut encoder.encoded;
        encoded.clear();
        write_flag_levels(encoded, &mut self.repeats, levels - rows, 1, 1);
        write_flag_levels(
            encoded,
            &mut self.defined,
            self.page_items,
            self.level_width,
            self.item_level,
        );
        match self.items {
            Items::Delta => self.delta.finish(encoded),
            Items::Plain | Items::Strings => {
                encoded.extend_from_slice(&self.plain);
                self.plain.clear();
            }
        }
        self.written.page(&mut encoder.zstd, encoded, rows, levels, encoding)?;
        self.repeats.clear();
        self.defined.clear();
        self.page_items = 0;
        self.page_rows = 0;
        self.levels += levels as u64;
        Ok(())
    }

    /// The chunk's bytes and what the row group writer needs to splice
    /// them into the file.
    pub(super) fn close(
        mut self,
        descr: ColumnDescPtr,
        encoder: &mut PageEncoder,
    ) -> Result<(Bytes, ColumnCloseResult)> {
        self.page(encoder)?;
        let (encoding, rows) = (self.encoding(), self.written.rows);
        let (chunk, metadata) = self
            .written
            .finish_data(descr, encoding, self.levels, &mut encoder.zstd)?;
        closed(chunk, rows, metadata, None)
    }
}

#[cfg(test)]
mod list_tests {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowSchemaConverter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::writer::SerializedFileWriter;

    use super::*;

    /// Lists of every length from none to many, in row groups of a few
    /// rows to several pages, each group's rows in uneven batches; and a
    /// group of empty lists only, and one with no empty list.
    fn groups() -> Vec<Vec<Vec<i64>>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut many: Vec<Vec<i64>> = Vec::new();
        for _ in 0..2 * PAGE_ROWS + 77 {
            let n = match random() % 4 {
                0 => 0,
                1 => 10,
                _ => (random() % 12) as usize,
            };
            many.push((0..n).map(|_| (random() >> (random() % 64)) as i64 - 1000).collect());
        }
        vec![
            vec![vec![], vec![1, 2, 3], vec![], vec![-5]],
            many,
            vec![vec![]; 3000],
            (0..1500).map(|i| vec![i; 1 + i as usize % 10]).collect(),
        ]
    }

    /// `groups` written as row groups of one list column by
    /// [`ListChunk`], then read back by the parquet crate's Arrow reader.
    fn round_trip(item: DataType, items: Items, groups: &[Vec<Vec<i64>>]) -> Vec<Vec<String>> {
        let field = Field::new(
            "v",
            DataType::List(Arc::new(Field::new("item", item.clone(), true))),
            false,
        );
        let schema = Schema::new(vec![field]);
        let descr = ArrowSchemaConverter::new().convert(&schema).unwrap();
        let mut file = SerializedFileWriter::new(
            Vec::new(),
            descr.root_schema_ptr(),
            Arc::new(WriterProperties::default()),
        )
        .unwrap();
        let mut encoder = PageEncoder::new().unwrap();
        for group in groups {
            let mut chunk = ListChunk::new(&file.schema_descr().column(0), items);
            for batch in group.chunks(777) {
                let mut offsets = vec![0i32];
                let mut values = Vec::new();
                for list in batch {
                    values.extend_from_slice(list);
                    offsets.push(values.len() as i32);
                }
                // The batch's items after some of another batch, as a
                // slice of a batch's list array has them.
                let skipped = 3;
                let offsets: Vec<i32> = offsets.iter().map(|o| o + skipped).collect();
                let values: Vec<i64> = [vec![7; skipped as usize], values].concat();
                if item == DataType::Utf8 {
                    let strings = StringArray::from_iter_values(values.iter().map(|v| v.to_string()));
                    chunk.write_strings(&offsets, &strings, &mut encoder).unwrap();
                } else {
                    chunk.write_ints(&offsets, &values, &mut encoder).unwrap();
                }
            }
            let (bytes, close) = chunk.close(file.schema_descr().column(0), &mut encoder).unwrap();
            let mut writer = file.next_row_group().unwrap();
            writer.append_column(&bytes, close).unwrap();
            writer.close().unwrap();
        }
        let bytes = Bytes::from(file.into_inner().unwrap());
        let reader = SerializedFileReader::new(bytes.clone()).unwrap();
        for (g, group) in groups.iter().enumerate() {
            assert_eq!(reader.metadata().row_group(g).num_rows(), group.len() as i64);
        }
        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
            .unwrap()
            .build()
            .unwrap();
        let mut read = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            let lists = batch.column(0).as_list::<i32>();
            assert_eq!(lists.null_count(), 0);
            for row in 0..lists.len() {
                let list = lists.value(row);
                assert_eq!(list.null_count(), 0);
                read.push(match list.data_type() {
                    DataType::Utf8 => list.as_string::<i32>().iter().map(|s| s.unwrap().to_string()).collect(),
                    _ => list
                        .as_primitive::<Int64Type>()
                        .values()
                        .iter()
                        .map(i64::to_string)
                        .collect(),
                });
            }
        }
        read
    }

    #[test]
    fn lists_read_back_as_written() {
        let groups = groups();
        let expected: Vec<Vec<String>> = groups
            .iter()
            .flatten()
            .map(|list| list.iter().map(i64::to_string).collect())
            .collect();
        for (item, items) in [
            (DataType::Int64, Items::Delta),
            (DataType::Int64, Items::Plain),
            (DataType::Utf8, Items::Strings),
        ] {
            let read = round_trip(item, items, &groups);
            assert_eq!(read.len(), expected.len(), "{items:?}");
            for (row, (read, expected)) in read.iter().zip(&expected).enumerate() {
                assert_eq!(read, expected, "{items:?}, row {row}");
            }
        }
    }

    #[test]
    fn levels_of_one_value_are_one_run_and_others_bit_packed() {
        let mut flags = Flags::default();
        flags.push_n(true, 11);
        let mut out = Vec::new();
        write_flag_levels(&mut out, &mut flags, 11, 2, 2);
        assert_eq!(out, [2, 0, 0, 0, 11 << 1, 2]);
        flags.clear();
        flags.push(0b111_1111, 7);
        flags.push(0b1111, 5);
        out.clear();
        write_flag_levels(&mut out, &mut flags, 11, 2, 2);
        // Two groups of eight 2-bit levels: 2 (0b10) eleven times, then 0.
        assert_eq!(out, [5, 0, 0, 0, (2 << 1) | 1, 0xaa, 0xaa, 0x2a, 0]);
        out.clear();
        write_flag_levels(&mut out, &mut flags, 11, 1, 1);
        assert_eq!(out, [3, 0, 0, 0, (2 << 1) | 1, 0xff, 0x07]);
        // Flags across 32-bit words, and runs longer than a word.
        let mut flags = Flags::default();
        let mut expected = Vec::new();
        for (i, n) in [3usize, 31, 0, 40, 1, 32, 77].into_iter().enumerate() {
            flags.push_n(i % 2 == 0, n);
            expected.extend(std::iter::repeat_n(i % 2 == 0, n));
        }
        assert_eq!(flags.len, expected.len());
        let bytes = flags.as_slice().to_vec();
        assert_eq!(bytes.len(), expected.len().div_ceil(8));
        for (i, &flag) in expected.iter().enumerate() {
            assert_eq!(bytes[i / 8] >> (i % 8) & 1 == 1, flag, "flag {i}");
        }
    }
}
