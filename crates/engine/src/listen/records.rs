//! The `flows` listener's records: each worker encodes the records of its
//! flows as they end into 1 MiB chunks, and one writer thread puts the
//! chunks in `flows.jsonl` (or `flows.csv`). Records never drop: a worker
//! whose chunk finds the writer's queue full waits for it (counted).
//!
//! Sorted by their flows' start (`--order start`), the writer puts the
//! chunks in a hidden file beside the output, notes where each record lies,
//! and when the input ends copies them into the output in the order of
//! their flows' first packets: a position the reader gives, so the file is
//! the same for any number of workers. Records could only be sorted as
//! they come by holding every one until all flows that began before it
//! had ended, which on a long flow is all of them.

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
/// beside the output, removed when done (or when the run fails), and where
/// each record lies in it.
struct Unsorted {
    path: PathBuf,
    file: File,
    len: u64,
    /// First position of the record's flow, offset, length.
    records: Vec<(u64, u64, u32)>,
}

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
            file,
            len: 0,
            records: Vec::new(),
        })
    }

    fn error(&self, source: std::io::Error) -> RunError {
        RunError::Write {
            path: self.path.clone(),
            source,
        }
    }

    fn add(&mut self, chunk: &Chunk) -> Result<(), RunError> {
        self.file.write_all(&chunk.bytes).map_err(|e| self.error(e))?;
        let mut offset = self.len;
        for &(start, len) in &chunk.starts {
            self.records.push((start, offset, len));
            offset += u64::from(len);
        }
        debug_assert_eq!(offset, self.len + chunk.bytes.len() as u64);
        self.len += chunk.bytes.len() as u64;
        Ok(())
    }

    /// Writes every record into `output` in the order of its flow's first
    /// position. Records that lie one after the other in the hidden file
    /// (a worker's flows that ended in the order they began) are read in
    /// one go.
    fn copy_sorted(mut self, output: &mut Output) -> Result<(), RunError> {
        self.records.sort_unstable_by_key(|r| r.0);
        let mut buffer = Vec::with_capacity(RECORD_CHUNK);
        let mut i = 0;
        while i < self.records.len() {
            let (_, offset, len) = self.records[i];
            let mut end = offset + u64::from(len);
            let mut j = i + 1;
            while j < self.records.len() && self.records[j].1 == end && (end - offset) < RECORD_CHUNK as u64 {
                end += u64::from(self.records[j].2);
                j += 1;
            }
            buffer.resize((end - offset) as usize, 0);
            self.file
                .read_exact_at(&mut buffer, offset)
                .map_err(|e| self.error(e))?;
            output.write(&buffer)?;
            i = j;
        }
        Ok(())
    }
}

impl Drop for Unsorted {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
