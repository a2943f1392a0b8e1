//! The `abstract` listener: SF-TAP's flow abstractor (`sluice-abstractor`)
//! on a thread of its own, fed the frames the source decoded. Reading a
//! file, the frames go to it by their place in the mapped file, uncopied,
//! and the reader waits for it when its queue is full; live, each ring's
//! thread copies its frames into batches, and a batch the abstractor has
//! no room for is dropped and counted, so that a slow analyzer never stalls
//! the capture's other listeners.
//!
//! The abstractor keeps a connection table of its own: its flows are TCP
//! connections and UDP flows that end at their DESTROYED event, hold
//! reassembly state and are classified by the SF-TAP rules first, which
//! the workers' flow records are not.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use sluice_abstractor::{Abstractor, Config, Delivery, Report, Settings};
use sluice_capture::FileBytes;
use sluice_wire::{DecodeError, Decoded};

use crate::config::AbstractConfig;
use crate::control::Control;
use crate::listen::{ListenerFailed, PacketListener, SourcePacket};

/// Frames per hand-over to the abstractor's thread.
const BATCH: usize = 4096;
/// Bytes of copied frames per hand-over, live.
const BATCH_BYTES: usize = 4 << 20;
/// Batches queued for the abstractor.
const QUEUE: usize = 4;
/// How far behind the abstractor the file is released: more than the
/// bodies its consumers' queues hold by reference at most times.
/// Reassembly and defragmentation copy what they hold; bodies queued for
/// the consumers are written from the file itself, some time after
/// capture has passed them. Released pages the writer still needs are
/// faulted back in (slower, never wrong).
const LENT_SLACK: usize = 64 << 20;
/// How often the abstractor looks at its sockets when no packet comes.
const POLL: Duration = Duration::from_millis(10);

struct Item {
    ts_ns: u64,
    wire_len: u32,
    /// Offset and length of the frame in the batch's file, or in its
    /// copied bytes.
    offset: usize,
    len: u32,
    decoded: Result<Decoded, DecodeError>,
}

struct Batch {
    file: Option<FileBytes>,
    bytes: Vec<u8>,
    items: Vec<Item>,
}

impl Batch {
    fn new(file: Option<FileBytes>) -> Batch {
        Batch {
            file,
            bytes: Vec::new(),
            items: Vec::with_capacity(BATCH),
        }
    }
}

/// The abstractor's thread and what it reports.
pub(crate) struct Abstracting {
    name: String,
    queue: Sender<Batch>,
    thread: thread::JoinHandle<Report>,
    /// Events dropped for slow or absent consumers so far.
    dropped_events: Arc<AtomicU64>,
    /// File, and offset in it, up to which the abstractor is done.
    done: Arc<AtomicU64>,
    /// Batches the feeders dropped, for a full queue (live).
    dropped: Arc<Mutex<u64>>,
    wait: bool,
}

impl Abstracting {
    /// Opens the interfaces (the sockets under `dir`), waits for the
    /// consumers asked for, and starts the thread. `live` sets the
    /// default loss policy: drop live, wait for files.
    pub(crate) fn start(config: &AbstractConfig, live: bool, control: &Control) -> Result<Abstracting, String> {
        let name = config.name.clone().unwrap_or_else(|| "abstract".into());
        let rules = match &config.config {
            Some(path) => Config::read(path).map_err(|e| e.to_string())?,
            None => Config::builtin(),
        };
        let wait = match config.policy.as_deref() {
            None => !live,
            Some("wait") => true,
            Some("drop") => false,
            Some(other) => return Err(format!("abstract.policy: {other:?}: one of wait, drop")),
        };
        let mut settings = Settings {
            hop_limit: config.hop_limit,
            buffer_bytes: (config.buffer as usize).max(1 << 16),
            delivery: if wait {
                Delivery::Wait(config.stall)
            } else {
                Delivery::Drop
            },
            ..Settings::default()
        };
        settings.flows.capacity = config.flows.max(1);
        settings.reassembly.max_buffered_per_stream = config.reorder as usize;
        settings.held_total = config.held as usize;
        let mut abstractor = Abstractor::new(Arc::new(rules), settings, &config.dir)
            .map_err(|e| format!("{}: {e}", config.dir.display()))?;
        let (unknown, known) = abstractor.unknown_interfaces(&config.wait_for);
        if !unknown.is_empty() {
            return Err(format!(
                "--wait-for: no interface {} in the configuration; its interfaces are {}",
                unknown.join(", "),
                known.join(", ")
            ));
        }
        if config.wait.is_some() || !config.wait_for.is_empty() {
            let timeout = config.wait.unwrap_or(Duration::from_secs(30));
            let missing = abstractor.wait_for_consumers(&config.wait_for, timeout);
            if !missing.is_empty() {
                return Err(format!(
                    "--wait: no consumer connected to {} (under {}) within {timeout:?}",
                    missing.join(", "),
                    config.dir.display()
                ));
            }
        }
        let (queue, batches) = bounded::<Batch>(QUEUE);
        let dropped_events = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let (stall, linger, told, finished) = (
            config.stall,
            config.linger,
            Arc::clone(&dropped_events),
            Arc::clone(&done),
        );
        let control = control.clone();
        let thread = thread::Builder::new()
            .name("sluice-abstract".into())
            .spawn(move || run(abstractor, batches, stall, linger, &told, &finished, &control))
            .map_err(|e| format!("starting the abstractor's thread: {e}"))?;
        Ok(Abstracting {
            name,
            queue,
            thread,
            dropped_events,
            done,
            dropped: Arc::default(),
            wait,
        })
    }

    /// A source thread's feeder.
    pub(crate) fn feeder(&self) -> Feeder {
        Feeder {
            name: self.name.clone(),
            queue: self.queue.clone(),
            batch: Batch::new(None),
            file_seq: 0,
            wait: self.wait,
            dropped_events: Arc::clone(&self.dropped_events),
            done: Arc::clone(&self.done),
            dropped: Arc::clone(&self.dropped),
            dropped_here: 0,
            first: Arc::strong_count(&self.dropped) == 1,
        }
    }

    /// Once every feeder has finished: the abstractor ends its flows,
    /// delivers what is queued and reports.
    pub(crate) fn finish(self) -> (Report, u64) {
        drop(self.queue);
        let report = self.thread.join().expect("the abstractor's thread panicked");
        let dropped = *self.dropped.lock().expect("not poisoned");
        (report, dropped)
    }
}

fn run(
    mut abstractor: Abstractor,
    batches: Receiver<Batch>,
    stall: Duration,
    linger: Option<Duration>,
    dropped_events: &AtomicU64,
    done: &AtomicU64,
    control: &Control,
) -> Report {
    let mut lent: Option<FileBytes> = None;
    let mut file_seq = 0u64;
    loop {
        let batch = match batches.recv_timeout(POLL) {
            Ok(batch) => batch,
            Err(RecvTimeoutError::Timeout) => {
                abstractor.poll();
                dropped_events.store(abstractor.dropped_events(), Ordering::Relaxed);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let bytes: &[u8] = match &batch.file {
            Some(file) => {
                if lent.as_ref().is_none_or(|l| l.as_ptr() != file.as_ptr()) {
                    abstractor.lend(file);
                    lent = Some(file.clone());
                    file_seq += 1;
                }
                file
            }
            None => &batch.bytes,
        };
        let mut last = 0;
        for item in &batch.items {
            let frame = &bytes[item.offset..item.offset + item.len as usize];
            abstractor.decoded_packet(item.ts_ns, item.wire_len, frame, &item.decoded);
            last = item.offset;
        }
        if batch.file.is_some() {
            done.store(file_seq << 48 | last as u64, Ordering::Relaxed);
        }
        dropped_events.store(abstractor.dropped_events(), Ordering::Relaxed);
    }
    if let Some(quiet) = linger {
        abstractor.linger(quiet, || !control.stopped());
    }
    abstractor.finish(stall)
}

/// A source thread's end of the queue to the abstractor.
pub(crate) struct Feeder {
    name: String,
    queue: Sender<Batch>,
    batch: Batch,
    /// Files this feeder has seen, as the abstractor numbers them.
    file_seq: u64,
    wait: bool,
    dropped_events: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
    dropped: Arc<Mutex<u64>>,
    /// Frames dropped by this feeder for a full queue.
    dropped_here: u64,
    /// The first feeder also reports the abstractor's own drops, which are
    /// every feeder's.
    first: bool,
}

impl Feeder {
    fn send(&mut self) {
        if self.batch.items.is_empty() {
            return;
        }
        let next = Batch::new(self.batch.file.clone());
        let batch = std::mem::replace(&mut self.batch, next);
        if self.wait {
            // The abstractor only hangs up by panicking, which the run reports.
            let _ = self.queue.send(batch);
        } else if let Err(TrySendError::Full(batch)) = self.queue.try_send(batch) {
            self.dropped_here += batch.items.len() as u64;
        }
    }
}

impl PacketListener for Feeder {
    fn packet(&mut self, p: &SourcePacket<'_>) -> Result<(), ListenerFailed> {
        let offset = match p.file {
            Some((file, offset)) => {
                if self.batch.file.as_ref().is_none_or(|f| f.as_ptr() != file.as_ptr()) {
                    self.send();
                    self.batch.file = Some(file.clone());
                    self.file_seq += 1;
                }
                offset
            }
            None => {
                let offset = self.batch.bytes.len();
                self.batch.bytes.extend_from_slice(p.frame);
                offset
            }
        };
        self.batch.items.push(Item {
            ts_ns: p.ts_ns,
            wire_len: p.wire_len,
            offset,
            len: p.frame.len() as u32,
            decoded: p.decoded.map(|(d, _)| *d),
        });
        if self.batch.items.len() == BATCH || self.batch.bytes.len() >= BATCH_BYTES {
            self.send();
        }
        Ok(())
    }

    fn idle(&mut self) {
        self.send();
    }

    fn needs_file_from(&self) -> Option<usize> {
        let done = self.done.load(Ordering::Relaxed);
        let (seq, offset) = (done >> 48, (done & ((1 << 48) - 1)) as usize);
        // Until the abstractor has finished a batch of this file, it needs
        // all of it.
        Some(if seq == self.file_seq {
            offset.saturating_sub(LENT_SLACK)
        } else {
            0
        })
    }

    fn lost(&self, into: &mut BTreeMap<(String, String), u64>) {
        *into.entry((self.name.clone(), "dropped_packets".into())).or_default() += self.dropped_here;
        if self.first {
            *into.entry((self.name.clone(), "dropped_events".into())).or_default() +=
                self.dropped_events.load(Ordering::Relaxed);
        }
    }

    fn finish(mut self: Box<Self>) -> Result<(), ListenerFailed> {
        self.send();
        *self.dropped.lock().expect("not poisoned") += self.dropped_here;
        Ok(())
    }
}
