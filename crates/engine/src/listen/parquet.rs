//! The `flows` listener's records as Parquet (`--format parquet`): each
//! worker gathers the records of its flows into columns and hands a
//! batch to the writer thread every [`BATCH_ROWS`] records (and when it
//! idles); the writer compresses them into `flows-NNNNNN.parquet` files
//! (`sluice_export::parquet`) and hands each batch back, whose vectors
//! a worker fills again. No record is lost: a worker whose batch finds
//! the writer's queue full waits for it, and the wait is counted with the
//! others.

use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use sluice_export::parquet::{Columns, ParquetFiles, RecordBatch, Rotation};
use sluice_export::schema::Record;
use sluice_flow::FlowTable;

use crate::listen::FlowListener;
use crate::probe::RunError;
use crate::threads::{ThreadTime, Waits};

/// Records in a worker's batch: few enough that the columns a record is
/// spread over stay in the core's cache while the batch fills.
const BATCH_ROWS: usize = 2 * 1024;

/// Batches queued to the writer from each worker.
const QUEUED_BATCHES: usize = 16;

/// How often the writer looks at the age of its file when no batch comes.
const AGE_POLL: Duration = Duration::from_millis(500);

/// What the writer did, for the summary.
pub(crate) struct ParquetReport {
    pub files: Vec<PathBuf>,
    pub time: ThreadTime,
}

/// The writer thread and the queue to it.
pub(crate) struct ParquetRecords {
    batches: Sender<RecordBatch>,
    /// Batches the writer is done with.
    spent: Receiver<RecordBatch>,
    writer: thread::JoinHandle<Result<ParquetReport, RunError>>,
}

impl ParquetRecords {
    pub(crate) fn start(out_dir: &Path, rotation: Rotation, workers: usize) -> Result<ParquetRecords, RunError> {
        std::fs::create_dir_all(out_dir).map_err(|source| RunError::OutputDir {
            path: out_dir.to_path_buf(),
            source,
        })?;
        let (batches, inbox) = bounded::<RecordBatch>(workers.max(1) * QUEUED_BATCHES);
        let (done, spent) = bounded::<RecordBatch>(workers.max(1) * QUEUED_BATCHES);
        let files = ParquetFiles::new(out_dir, rotation);
        let writer = thread::Builder::new()
            .name("sluice-parquet".into())
            .spawn(move || write(files, inbox, done))
            .map_err(|source| RunError::Threads { source })?;
        Ok(ParquetRecords { batches, spent, writer })
    }

    pub(crate) fn worker_part(&self) -> ParquetWorker {
        ParquetWorker {
            columns: Columns::with_capacity(BATCH_ROWS),
            batches: self.batches.clone(),
            spent: self.spent.clone(),
        }
    }

    /// Waits for the writer, once every worker has dropped its part.
    pub(crate) fn finish(self) -> Result<ParquetReport, RunError> {
        drop(self.batches);
        self.writer.join().expect("the Parquet writer panicked")
    }
}

pub(crate) struct ParquetWorker {
    columns: Columns,
    batches: Sender<RecordBatch>,
    spent: Receiver<RecordBatch>,
}

impl ParquetWorker {
    fn flush(&mut self, waits: &mut Waits) {
        if self.columns.rows() == 0 {
            return;
        }
        if let Ok(spent) = self.spent.try_recv() {
            self.columns.recycle(spent);
        }
        let batch = self.columns.batch();
        // The writer only goes away after a failed write, which the run
        // reports as an error of its own.
        if let Err(TrySendError::Full(batch)) = self.batches.try_send(batch) {
            let _ = waits.time(|| self.batches.send(batch));
        }
    }
}

impl FlowListener for ParquetWorker {
    fn record(&mut self, record: &Record, waits: &mut Waits) {
        self.columns.push(record);
        if self.columns.rows() >= BATCH_ROWS {
            self.flush(waits);
        }
    }

    fn idle(&mut self, waits: &mut Waits) {
        self.flush(waits);
    }

    fn finish(&mut self, _table: &mut FlowTable<sluice_classify::FlowClass>, waits: &mut Waits) {
        self.flush(waits);
    }
}

fn write(
    mut files: ParquetFiles,
    inbox: Receiver<RecordBatch>,
    done: Sender<RecordBatch>,
) -> Result<ParquetReport, RunError> {
    let failed = |e: sluice_export::parquet::ParquetError| RunError::Write {
        path: e.path,
        source: std::io::Error::other(e.message),
    };
    let mut waits = Waits::default();
    loop {
        match waits.time(|| inbox.recv_timeout(AGE_POLL)) {
            Ok(batch) => {
                files.write(&batch).map_err(failed)?;
                // Back to the workers, unless they have enough.
                let _ = done.try_send(batch);
            }
            Err(RecvTimeoutError::Timeout) => files.rotate_if_due().map_err(failed)?,
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    files.close().map_err(failed)?;
    Ok(ParquetReport {
        files: std::mem::take(&mut files.files),
        time: waits.report(0.0),
    })
}
