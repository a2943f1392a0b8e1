//! The `flows` listener's records: each worker encodes the records of its
//! flows as they end into 1 MiB chunks, and one writer thread puts the
//! chunks in `flows.jsonl` (or `flows.csv`). Records never drop: a worker
//! whose chunk finds the writer's queue full waits for it (counted).
//!
//! Sorted by their flows' start (`--order start`), the writer sorts each
//! chunk by the position of its flows' first packets (the reader's number,
//! so the file is the same for any number of workers) into a run of a
//! hidden file beside the output, and when the input ends merges the runs
//! into the output. Records could only be sorted as they come by holding
//! every one until all flows that began before it had ended, which on a
//! long flow is all of them.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError, bounded};
use sluice_export::schema::Record;
use sluice_export::{Encoder, Format};
use sluice_flow::FlowTable;

use crate::control::Control;
use crate::listen::FlowListener;
use crate::probe::RunError;
use crate::threads::{ThreadTime, Waits};

/// Encoded records are handed to the writer in chunks of about this size.
const RECORD_CHUNK: usize = 1 << 20;

/// How often a writer waiting for records looks whether it is asked to
/// reopen its file.
const REOPEN_POLL: Duration = Duration::from_millis(200);

/// A worker's encoded records, and where each begins when they are to be
/// sorted: its flow's first position and its length.
struct Chunk {
    bytes: Vec<u8>,
    starts: Vec<(u64, u32)>,
}

impl Chunk {
    fn new() -> Chunk {
        Chunk {
            bytes: Vec::with_capacity(RECORD_CHUNK + 4096),
            starts: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.starts.clear();
    }
}

/// How the record file is written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordWrites {
    /// With `O_DIRECT`, 4 MiB at a time (`DirectWriter`): for a run over
    /// files, where only the whole file matters and the page cache's fresh
    /// pages cost more than the disk.
    Direct,
    /// Through the page cache, each chunk as it comes (`WriteThrough`): on
    /// a live link, where records should be readable soon after their flows
    /// end.
    AsTheyCome,
}

/// Where workers' encoded records go: a writer thread and the queues to
/// it, or nothing with `--format none`.
pub(crate) struct Records {
    format: Format,
    path: Option<PathBuf>,
    sorted: bool,
    full: Sender<Chunk>,
    empty: Receiver<Chunk>,
    /// Returns how it spent its time.
    writer: Option<thread::JoinHandle<Result<ThreadTime, RunError>>>,
}

impl Records {
    pub(crate) fn start(
        out_dir: &Path,
        format: Format,
        sorted: bool,
        workers: usize,
        writes: RecordWrites,
        control: &Control,
    ) -> Result<Records, RunError> {
        std::fs::create_dir_all(out_dir).map_err(|source| RunError::OutputDir {
            path: out_dir.to_path_buf(),
            source,
        })?;
        let path = format.file_name().map(|name| out_dir.join(name));
        let (full, full_rx) = bounded::<Chunk>(workers * 4);
        let (empty_tx, empty) = bounded::<Chunk>(workers * 4);
        let writer = match &path {
            Some(path) => {
                let mut output = Output {
                    path: path.clone(),
                    writes,
                    preamble: Encoder::new(format).map(|e| e.preamble()).unwrap_or_default(),
                    file: None,
                    control: control.clone(),
                    reopens: control.reopens(),
                };
                output.open()?;
                let unsorted = if sorted { Some(Unsorted::create(path)?) } else { None };
                Some(
                    thread::Builder::new()
                        .name("sluice-writer".into())
                        .spawn(move || write_records(output, unsorted, full_rx, empty_tx))
                        .map_err(|source| RunError::Threads { source })?,
                )
            }
            None => None,
        };
        Ok(Records {
            format,
            sorted,
            path,
            full,
            empty,
            writer,
        })
    }

    /// A worker's part: its encoder and its end of the queues.
    pub(crate) fn worker_part(&self) -> RecordsWorker {
        RecordsWorker {
            encoder: Encoder::new(self.format),
            sorted: self.sorted,
            chunk: Chunk::new(),
            full: self.full.clone(),
            empty: self.empty.clone(),
        }
    }

    /// Waits for the writer, once every worker has dropped its part, and
    /// returns the records' path and how the writer spent its time.
    pub(crate) fn finish(self) -> Result<(Option<PathBuf>, Option<ThreadTime>), RunError> {
        drop(self.full);
        let time = match self.writer {
            Some(writer) => Some(writer.join().expect("the record writer panicked")?),
            None => None,
        };
        Ok((self.path, time))
    }
}

/// A worker's encoder. A chunk is a fresh mapping of 1 MiB, and allocating
/// one per flush cost more system time than writing the file: the writer
/// returns them emptied.
pub(crate) struct RecordsWorker {
    encoder: Option<Encoder>,
    sorted: bool,
    chunk: Chunk,
    full: Sender<Chunk>,
    empty: Receiver<Chunk>,
}

impl RecordsWorker {
    fn flush(&mut self, waits: &mut Waits) {
        if self.chunk.is_empty() || self.encoder.is_none() {
            return;
        }
        let fresh = self.empty.try_recv().unwrap_or_else(|_| Chunk::new());
        let chunk = std::mem::replace(&mut self.chunk, fresh);
        // The writer only goes away after a failed write, which the run
        // reports as an error of its own.
        if let Err(TrySendError::Full(chunk)) = self.full.try_send(chunk) {
            let _ = waits.time(|| self.full.send(chunk));
        }
    }
}

impl FlowListener for RecordsWorker {
    fn record(&mut self, record: &Record, waits: &mut Waits) {
        if let Some(encoder) = &mut self.encoder {
            let before = self.chunk.bytes.len();
            encoder.encode(record, &mut self.chunk.bytes);
            if self.sorted {
                let len = (self.chunk.bytes.len() - before) as u32;
                self.chunk.starts.push((record.flow.order, len));
            }
            if self.chunk.bytes.len() >= RECORD_CHUNK {
                self.flush(waits);
            }
        }
    }

    fn idle(&mut self, waits: &mut Waits) {
        self.flush(waits);
    }

    fn finish(&mut self, _table: &mut FlowTable<sluice_classify::FlowClass>, waits: &mut Waits) {
        self.flush(waits);
    }
}

/// The record file, reopened under its name when the run is asked to
/// (SIGHUP, after a log rotation moved it away).
struct Output {
    path: PathBuf,
    writes: RecordWrites,
    preamble: Vec<u8>,
    file: Option<Box<dyn Write + Send>>,
    control: Control,
    reopens: u64,
}

impl Output {
    fn error(&self, source: std::io::Error) -> RunError {
        RunError::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// Creates the file and writes the preamble (CSV's header line).
    fn open(&mut self) -> Result<(), RunError> {
        let file: Box<dyn Write + Send> = match self.writes {
            RecordWrites::Direct => {
                Box::new(sluice_store::DirectWriter::create(&self.path).map_err(|e| self.error(e))?)
            }
            RecordWrites::AsTheyCome => Box::new(sluice_store::WriteThrough::new(
                std::fs::File::create(&self.path).map_err(|e| self.error(e))?,
            )),
        };
        self.file = Some(file);
        let preamble = std::mem::take(&mut self.preamble);
        let written = self.write(&preamble);
        self.preamble = preamble;
        written
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), RunError> {
        let file = self.file.as_mut().expect("opened");
        file.write_all(bytes).map_err(|e| RunError::Write {
            path: self.path.clone(),
            source: e,
        })
    }

    fn close(&mut self) -> Result<(), RunError> {
        match self.file.take() {
            Some(mut file) => file.flush().map_err(|e| self.error(e)),
            None => Ok(()),
        }
    }

    /// Closes the file and opens a new one under the same name if a reopen
    /// was asked for since the last look: every record written before is
    /// in the old file, every one after in the new.
    fn reopen_if_asked(&mut self) -> Result<(), RunError> {
        let asked = self.control.reopens();
        if asked != self.reopens {
            self.reopens = asked;
            self.close()?;
            self.open()?;
        }
        Ok(())
    }
}

fn write_records(
    mut output: Output,
    mut unsorted: Option<Unsorted>,
    chunks: Receiver<Chunk>,
    empty: Sender<Chunk>,
) -> Result<ThreadTime, RunError> {
    let mut waits = Waits::default();
    loop {
        output.reopen_if_asked()?;
        let mut chunk = match chunks.try_recv() {
            Ok(chunk) => chunk,
            Err(TryRecvError::Empty) => match waits.time(|| chunks.recv_timeout(REOPEN_POLL)) {
                Ok(chunk) => chunk,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            Err(TryRecvError::Disconnected) => break,
        };
        match &mut unsorted {
            Some(unsorted) => unsorted.add(&chunk)?,
            None => output.write(&chunk.bytes)?,
        }
        chunk.clear();
        // Back to the workers for reuse; dropped when they have enough.
        let _ = empty.try_send(chunk);
    }
    if let Some(unsorted) = unsorted {
        unsorted.copy_sorted(&mut output)?;
    }
    output.close()?;
    Ok(waits.report(0.0))
}

/// The records of a run to be sorted by their flows' start: a hidden file
/// beside the output, removed when done (or when the run fails), of sorted
/// runs, one a chunk, merged when the input ends.
struct Unsorted {
    path: PathBuf,
    file: std::io::BufWriter<File>,
    len: u64,
    /// Each run's place in the file and its records' starts and lengths,
    /// in order.
    runs: Vec<Run>,
    /// Where the record i of the chunk at hand begins in it.
    offsets: Vec<usize>,
    /// The chunk's records by start.
    by_start: Vec<u32>,
}

struct Run {
    offset: u64,
    records: Vec<(u64, u32)>,
}

/// How much memory the merge reads the runs through, shared between them.
const MERGE_BUFFERS: usize = 64 << 20;

impl Unsorted {
    fn create(output: &Path) -> Result<Unsorted, RunError> {
        let name = output.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        let path = output.with_file_name(format!(".{name}.unsorted"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|source| RunError::Write {
                path: path.clone(),
                source,
            })?;
        Ok(Unsorted {
            path,
            file: std::io::BufWriter::with_capacity(RECORD_CHUNK, file),
            len: 0,
            runs: Vec::new(),
            offsets: Vec::new(),
            by_start: Vec::new(),
        })
    }

    fn error(&self, source: std::io::Error) -> RunError {
        RunError::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// Writes a chunk's records, sorted by start, as one run.
    fn add(&mut self, chunk: &Chunk) -> Result<(), RunError> {
        self.offsets.clear();
        let mut offset = 0;
        for &(_, len) in &chunk.starts {
            self.offsets.push(offset);
            offset += len as usize;
        }
        debug_assert_eq!(offset, chunk.bytes.len());
        self.by_start.clear();
        self.by_start.extend(0..chunk.starts.len() as u32);
        self.by_start.sort_unstable_by_key(|&i| chunk.starts[i as usize].0);
        let mut run = Run {
            offset: self.len,
            records: Vec::with_capacity(chunk.starts.len()),
        };
        for &i in &self.by_start {
            let (start, len) = chunk.starts[i as usize];
            let at = self.offsets[i as usize];
            let record = &chunk.bytes[at..at + len as usize];
            if let Err(e) = self.file.write_all(record) {
                return Err(self.error(e));
            }
            run.records.push((start, len));
        }
        self.len += chunk.bytes.len() as u64;
        self.runs.push(run);
        Ok(())
    }

    /// Merges the runs into `output`, each read in order through a buffer
    /// of its own: every record in the order of its flow's first position.
    fn copy_sorted(mut self, output: &mut Output) -> Result<(), RunError> {
        if let Err(e) = self.file.flush() {
            return Err(self.error(e));
        }
        let buffer = (MERGE_BUFFERS / self.runs.len().max(1)).clamp(4096, RECORD_CHUNK);
        let mut cursors: Vec<Cursor> = self
            .runs
            .iter()
            .map(|run| Cursor {
                next: 0,
                position: run.offset,
                buffered_at: run.offset,
                buffer: Vec::new(),
            })
            .collect();
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> = self
            .runs
            .iter()
            .enumerate()
            .filter_map(|(i, run)| run.records.first().map(|r| std::cmp::Reverse((r.0, i))))
            .collect();
        let file = self.file.get_ref();
        while let Some(std::cmp::Reverse((_, i))) = heap.pop() {
            let run = &self.runs[i];
            let cursor = &mut cursors[i];
            let len = run.records[cursor.next].1 as usize;
            let record = cursor.take(file, len, buffer).map_err(|e| RunError::Write {
                path: self.path.clone(),
                source: e,
            })?;
            output.write(record)?;
            cursor.next += 1;
            if let Some(next) = run.records.get(cursor.next) {
                heap.push(std::cmp::Reverse((next.0, i)));
            }
        }
        Ok(())
    }
}

/// Where the merge stands in one run.
struct Cursor {
    /// The run's next record.
    next: usize,
    /// Where that record begins in the file.
    position: u64,
    /// The file offset of `buffer`'s first byte.
    buffered_at: u64,
    buffer: Vec<u8>,
}

impl Cursor {
    /// The next `len` bytes of the run, reading ahead `size` bytes (or the
    /// record, if longer) when the buffer does not hold them.
    fn take(&mut self, file: &File, len: usize, size: usize) -> std::io::Result<&[u8]> {
        let from = (self.position - self.buffered_at) as usize;
        if from + len > self.buffer.len() {
            // The file ends with the last run, so a read ahead past a short
            // run's end only reads the next run's bytes, unused.
            self.buffered_at = self.position;
            self.buffer.resize(size.max(len), 0);
            let mut filled = 0;
            while filled < len {
                match file.read_at(&mut self.buffer[filled..], self.buffered_at + filled as u64)? {
                    0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    n => filled += n,
                }
            }
            self.buffer.truncate(filled);
        }
        let from = (self.position - self.buffered_at) as usize;
        self.position += len as u64;
        Ok(&self.buffer[from..from + len])
    }
}

impl Drop for Unsorted {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
