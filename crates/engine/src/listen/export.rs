//! What the exporting sinks of the `flows` listener share (IPFIX today):
//! each worker encodes the records of its flows as they end into chunks,
//! and a thread of the sink's own sends the chunks on. The queue between
//! them is bounded. A sink that writes a file waits for room in it (no
//! record is lost; the worker's wait is counted); a sink that sends over
//! the network drops a chunk that finds the queue full and counts its
//! records, so that a dead or slow collector never holds the capture
//! back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use serde::Serialize;
use sluice_export::schema::Record;
use sluice_flow::FlowTable;

use crate::listen::FlowListener;
use crate::publish::Published;
use crate::threads::Waits;

/// Records are handed to the sink's thread in chunks of about this size.
const CHUNK: usize = 256 << 10;

/// Chunks that may wait for the sink's thread, per worker.
const CHUNKS_PER_WORKER: usize = 16;

/// Encoded records and how many they are.
pub(crate) struct Chunk {
    pub bytes: Vec<u8>,
    pub records: u64,
}

/// Encodes one record into a chunk, framed as the sink's thread reads it.
pub(crate) trait ChunkEncoder: Send {
    /// False when the record cannot be encoded (too long for the format):
    /// nothing was written, and it is counted as refused.
    fn encode(&mut self, record: &Record, chunk: &mut Vec<u8>) -> bool;
    /// Finishes the chunk before it goes to the sink's thread.
    fn seal(&mut self, _chunk: &mut Vec<u8>) {}
}

/// What a sink counted, shared between its workers' parts and its thread.
#[derive(Default)]
pub(crate) struct Counters {
    /// Records in chunks that found the queue full.
    pub queue_full: AtomicU64,
    /// Records refused before the queue (too long for the format).
    pub refused: AtomicU64,
}

/// The workers' end of a sink's queue.
pub(crate) struct Queue {
    full: Sender<Chunk>,
    empty: Receiver<Vec<u8>>,
    counters: Arc<Counters>,
    /// Wait for room rather than drop.
    lossless: bool,
}

/// The sink thread's end.
pub(crate) struct Inbox {
    pub chunks: Receiver<Chunk>,
    /// Emptied chunk buffers go back to the workers.
    pub empty: Sender<Vec<u8>>,
    pub counters: Arc<Counters>,
}

/// A bounded queue for `workers` workers.
pub(crate) fn queue(workers: usize, lossless: bool) -> (Queue, Inbox) {
    let depth = workers.max(1) * CHUNKS_PER_WORKER;
    let (full, chunks) = bounded(depth);
    let (empty_tx, empty) = bounded(depth);
    let counters = Arc::new(Counters::default());
    (
        Queue {
            full,
            empty,
            counters: counters.clone(),
            lossless,
        },
        Inbox {
            chunks,
            empty: empty_tx,
            counters,
        },
    )
}

impl Queue {
    /// A worker's part: its encoder and its end of the queue.
    pub(crate) fn worker_part<E: ChunkEncoder>(&self, encoder: E) -> ExportWorker<E> {
        ExportWorker {
            encoder,
            chunk: Chunk {
                bytes: Vec::with_capacity(CHUNK + (16 << 10)),
                records: 0,
            },
            full: self.full.clone(),
            empty: self.empty.clone(),
            counters: self.counters.clone(),
            lossless: self.lossless,
        }
    }
}

/// The end of a sink's queue for a thread that is not a worker (the
/// statistics, alarms and calls threads): one chunk per record.
#[derive(Clone)]
pub(crate) struct QueueEnd {
    full: Sender<Chunk>,
    pub counters: Arc<Counters>,
    lossless: bool,
}

impl Queue {
    pub(crate) fn end(&self) -> QueueEnd {
        QueueEnd {
            full: self.full.clone(),
            counters: self.counters.clone(),
            lossless: self.lossless,
        }
    }
}

impl QueueEnd {
    /// Hands a chunk to the sink's thread: waits for room when the sink
    /// is lossless, else drops and counts a chunk that finds the queue full.
    pub(crate) fn send(&self, chunk: Chunk) {
        let records = chunk.records;
        let sent = if self.lossless {
            self.full.send(chunk).is_ok()
        } else {
            self.full.try_send(chunk).is_ok()
        };
        if !sent {
            self.counters.queue_full.fetch_add(records, Ordering::Relaxed);
        }
    }
}

pub(crate) struct ExportWorker<E> {
    encoder: E,
    chunk: Chunk,
    full: Sender<Chunk>,
    empty: Receiver<Vec<u8>>,
    counters: Arc<Counters>,
    lossless: bool,
}

impl<E: ChunkEncoder> ExportWorker<E> {
    fn flush(&mut self, waits: &mut Waits) {
        if self.chunk.records == 0 {
            return;
        }
        self.encoder.seal(&mut self.chunk.bytes);
        let fresh = self
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK + (16 << 10)));
        let chunk = std::mem::replace(
            &mut self.chunk,
            Chunk {
                bytes: fresh,
                records: 0,
            },
        );
        match self.full.try_send(chunk) {
            Ok(()) => {}
            Err(TrySendError::Full(chunk)) if self.lossless => {
                // The thread only goes away after a failure it reports.
                let _ = waits.time(|| self.full.send(chunk));
            }
            Err(TrySendError::Full(mut chunk)) => {
                self.counters.queue_full.fetch_add(chunk.records, Ordering::Relaxed);
                chunk.bytes.clear();
                self.chunk.bytes = chunk.bytes;
            }
            Err(TrySendError::Disconnected(chunk)) => {
                self.counters.queue_full.fetch_add(chunk.records, Ordering::Relaxed);
            }
        }
    }
}

impl<E: ChunkEncoder> FlowListener for ExportWorker<E> {
    fn record(&mut self, record: &Record, waits: &mut Waits) {
        if !self.encoder.encode(record, &mut self.chunk.bytes) {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.chunk.records += 1;
        if self.chunk.bytes.len() >= CHUNK {
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

/// What an exporting sink did, in `summary.json`'s `exports`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExportReport {
    /// `ipfix`.
    pub sink: &'static str,
    /// Where the records went: `udp://HOST:PORT`, `tcp://...`, `file:...`,
    /// or the brokers and topic.
    pub destination: String,
    /// Records sent.
    pub records: u64,
    /// Records dropped because the queue to the sink was full (the sink
    /// fell behind, or its destination did).
    pub dropped_queue_full: u64,
    /// Records that could not be sent or were not acknowledged.
    pub failed: u64,
    /// Messages sent (IPFIX messages), and their bytes.
    pub messages: u64,
    pub bytes: u64,
    /// Sink-specific counters (template messages, back-pressure waits,
    /// reconnections, ...).
    #[serde(flatten)]
    pub counters: BTreeMap<&'static str, u64>,
    /// The last error met, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl ExportReport {
    /// Records lost, by why.
    pub fn lost(&self) -> u64 {
        self.dropped_queue_full + self.failed
    }

    /// Puts the losses where `/metrics` reads them, under `listener`.
    pub(crate) fn publish(&self, listener: &str, published: &Published) {
        let mut p = published.lock();
        p.drops
            .insert((listener.to_string(), "queue_full".into()), self.dropped_queue_full);
        p.drops.insert((listener.to_string(), "failed".into()), self.failed);
    }

    /// The report's line in the printed summary.
    pub fn render(&self) -> String {
        let mut extra = String::new();
        for (name, n) in &self.counters {
            extra.push_str(&format!(", {n} {}", name.replace('_', " ")));
        }
        let mut text = format!(
            "{}: {} records in {} messages ({} bytes) to {}; lost: {} for a full queue, {} failed{extra}\n",
            self.sink, self.records, self.messages, self.bytes, self.destination, self.dropped_queue_full, self.failed
        );
        if let Some(e) = &self.last_error {
            text.push_str(&format!("{}: last error: {e}\n", self.sink));
        }
        text
    }
}
