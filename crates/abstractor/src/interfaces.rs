//! The stream interfaces: one listening UNIX stream socket per interface
//! of the configuration, under `DIR/tcp/` and `DIR/udp/`.
//!
//! Each interface may have several consumers at once; each flow routed to
//! it goes, whole, to one of them (round robin), so an analyzer can also
//! scale by connecting more processes to one interface. A consumer gets
//! the flows routed after it connected, never the middle of an older one.
//!
//! Every consumer has a bounded buffer. What does not fit is dropped and
//! counted, so that a slow consumer never stalls capture: this is the
//! policy for live interfaces. Capture files can wait instead
//! ([`Delivery::Wait`]): the reader blocks until the consumer takes the
//! bytes, so a batch job loses nothing, unless the consumer stops reading
//! for longer than the stall timeout, which disconnects it.

use std::io::{self, ErrorKind};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use sluice_capture::FileBytes;

use crate::config::InterfaceSpec;
use crate::queued::{Lenders, Queued};
use crate::writer::{self, Job, Shared};

/// What to do when a consumer's buffer is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Drop the event and count it (live capture).
    Drop,
    /// Wait for the consumer, up to this long per write (capture files).
    Wait(Duration),
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InterfaceCounters {
    /// Consumers that connected over the run.
    pub connections: u64,
    pub flows: u64,
    /// Flows routed here while no consumer was connected: not delivered.
    pub flows_without_consumer: u64,
    /// Events queued for consumers, less those lost with a consumer that
    /// left or was cut off (which count as dropped).
    pub events: u64,
    pub bytes: u64,
    /// Events (with their bodies) a full buffer or a lost consumer dropped.
    pub dropped_events: u64,
    pub dropped_bytes: u64,
    /// Consumers that left, or were cut off for not reading, with flows
    /// still in progress.
    pub disconnects: u64,
}

/// One interface's final state, for the summary.
#[derive(Clone, Debug, Serialize)]
pub struct InterfaceReport {
    pub interface: String,
    pub consumers: usize,
    #[serde(flatten)]
    pub counters: InterfaceCounters,
}

/// Queued bytes go to the writer thread once a consumer has this many:
/// each hand-over may cost a wake-up of the writer.
const WRITE_AT: usize = 1 << 20;
/// Emptied buffers kept for reuse: fresh memory is slow to fault in.
const SPARE_BUFFERS: usize = 16;

/// A consumer a flow was given to; events of that flow go there only.
pub type ConsumerId = u64;

struct Consumer {
    id: ConsumerId,
    /// Events not yet handed to the writer, and how many.
    out: Queued,
    out_events: u64,
    shared: Arc<Shared>,
}

impl Consumer {
    /// Bytes queued and not yet written.
    fn pending(&self) -> usize {
        self.out.len() + self.shared.in_flight.load(Ordering::Acquire)
    }

    /// The writer found it gone, or cut it off for not reading.
    fn broken(&self) -> bool {
        self.shared.broken.load(Ordering::Acquire)
    }
}

/// Capture's end of the writer thread.
struct ToWriter {
    jobs: Sender<Job>,
    spare: Receiver<Queued>,
    thread: Option<JoinHandle<()>>,
}

impl ToWriter {
    /// Hands what the consumer has queued to the writer.
    fn hand(&self, c: &mut Consumer) {
        if c.out.is_empty() {
            return;
        }
        let fresh = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Queued::with_capacity(2 * WRITE_AT));
        let full = std::mem::replace(&mut c.out, fresh);
        let events = std::mem::take(&mut c.out_events);
        c.shared.in_flight.fetch_add(full.len(), Ordering::Release);
        c.shared.in_flight_events.fetch_add(events, Ordering::Release);
        // The writer goes away only by panicking, which the join reports.
        let _ = self.jobs.send(Job::Write(c.id, full, events));
    }
}

/// The kernel's send buffer asked for each consumer's socket.
const SEND_BUFFER: libc::c_int = 4 << 20;

/// Asks for a send buffer far above the usual 208 KiB, so that each write of
/// `WRITE_AT` bytes goes through whole rather than in pieces, each piece a
/// system call and a wake-up of the consumer. The kernel caps it at
/// net.core.wmem_max; a refusal leaves the default, which works, only slower.
#[allow(unsafe_code)]
fn widen_send_buffer(stream: &UnixStream) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live local,
    // on a descriptor the stream owns for the whole call.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&SEND_BUFFER as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

struct Interface {
    path: PathBuf,
    name: String,
    /// A rule's interface, which `--wait` waits for; the default ones are not.
    awaited: bool,
    listener: UnixListener,
    consumers: Vec<Consumer>,
    next: usize,
    counters: InterfaceCounters,
}

pub struct Interfaces {
    list: Vec<Interface>,
    buffer_bytes: usize,
    delivery: Delivery,
    next_id: ConsumerId,
    writer: ToWriter,
    /// A header that found its consumer's buffer full.
    scratch: Vec<u8>,
    lenders: Lenders,
}

/// An event's body, or the whole events a flow held.
enum Body<'a> {
    Bytes(&'a [u8]),
    Held(&'a Queued),
}

impl Body<'_> {
    fn len(&self) -> usize {
        match self {
            Body::Bytes(b) => b.len(),
            Body::Held(q) => q.len(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InterfaceError {
    #[error("{path}: cannot create the interface directory: {source}")]
    Directory { path: PathBuf, source: io::Error },
    #[error(
        "{path}: the socket path is {len} bytes, over the {max} a UNIX socket address holds; choose a shorter --dir"
    )]
    PathTooLong { path: PathBuf, len: usize, max: usize },
    #[error("{path}: exists and is not a socket; remove it or choose another --dir")]
    NotASocket { path: PathBuf },
    #[error("{path}: cannot listen: {source}")]
    Listen { path: PathBuf, source: io::Error },
    #[error(
        "cannot start the socket writer thread: {source}; raise the limit on threads (ulimit -u, a cgroup's pids.max)"
    )]
    Thread { source: io::Error },
}

/// `sun_path` is 108 bytes on Linux, with a terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;

/// Creates a listening socket, replacing a stale socket file left by an
/// earlier run (but never a file of another kind).
pub fn listen(path: &Path) -> Result<UnixListener, InterfaceError> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(InterfaceError::PathTooLong {
            path: path.to_owned(),
            len,
            max: MAX_SOCKET_PATH,
        });
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(InterfaceError::NotASocket { path: path.to_owned() });
        }
        let _ = std::fs::remove_file(path);
    }
    let listener = UnixListener::bind(path).map_err(|source| InterfaceError::Listen {
        path: path.to_owned(),
        source,
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| InterfaceError::Listen {
            path: path.to_owned(),
            source,
        })?;
    Ok(listener)
}

impl Interfaces {
    pub fn open(
        dir: &Path,
        specs: &[InterfaceSpec],
        buffer_bytes: usize,
        delivery: Delivery,
    ) -> Result<Interfaces, InterfaceError> {
        let mut list = Vec::with_capacity(specs.len());
        for spec in specs {
            let path = dir.join(&spec.path);
            let parent = path.parent().expect("interfaces live in a directory");
            std::fs::create_dir_all(parent).map_err(|source| InterfaceError::Directory {
                path: parent.to_owned(),
                source,
            })?;
            list.push(Interface {
                listener: listen(&path)?,
                path,
                name: spec.path.clone(),
                awaited: spec.rule.is_some(),
                consumers: Vec::new(),
                next: 0,
                counters: InterfaceCounters::default(),
            });
        }
        let (jobs, todo) = mpsc::channel();
        let (recycle, spare) = mpsc::sync_channel(SPARE_BUFFERS);
        let stall = match delivery {
            Delivery::Wait(stall) => Some(stall),
            Delivery::Drop => None,
        };
        let thread = std::thread::Builder::new()
            .name("sluice-writer".into())
            .spawn(move || writer::run(todo, recycle, stall))
            .map_err(|source| InterfaceError::Thread { source })?;
        Ok(Interfaces {
            list,
            buffer_bytes,
            delivery,
            next_id: 1,
            scratch: Vec::new(),
            lenders: Lenders::default(),
            writer: ToWriter {
                jobs,
                spare,
                thread: Some(thread),
            },
        })
    }

    /// Takes the consumers that connected since the last call.
    pub fn accept(&mut self) {
        for iface in &mut self.list {
            loop {
                match iface.listener.accept() {
                    Ok((stream, _)) => {
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        widen_send_buffer(&stream);
                        iface.counters.connections += 1;
                        let shared = Arc::new(Shared::default());
                        let _ = self.writer.jobs.send(Job::Attach(self.next_id, stream, shared.clone()));
                        iface.consumers.push(Consumer {
                            id: self.next_id,
                            out: Queued::default(),
                            out_events: 0,
                            shared,
                        });
                        self.next_id += 1;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
    }

    /// The interfaces still without a consumer among `names`, or among
    /// the rules' interfaces when `names` is empty, for `--wait`.
    pub fn unconnected(&self, names: &[String]) -> Vec<&str> {
        self.list
            .iter()
            .filter(|i| {
                if names.is_empty() {
                    i.awaited
                } else {
                    names.contains(&i.name)
                }
            })
            .filter(|i| i.consumers.is_empty())
            .map(|i| i.name.as_str())
            .collect()
    }

    /// Gives a new flow to one of the interface's consumers; `None` (and
    /// counted) when it has none.
    pub fn assign(&mut self, iface: u16) -> Option<ConsumerId> {
        let i = &mut self.list[iface as usize];
        i.counters.flows += 1;
        if i.consumers.is_empty() {
            i.counters.flows_without_consumer += 1;
            return None;
        }
        i.next = (i.next + 1) % i.consumers.len();
        Some(i.consumers[i.next].id)
    }

    /// Queues one event (its header and body) for a flow's consumer.
    /// Returns whether it was queued; a dropped event is counted.
    pub fn send(&mut self, iface: u16, consumer: ConsumerId, header: &[u8], body: &[u8]) -> bool {
        self.send_with(iface, consumer, |out| out.extend_from_slice(header), body)
    }

    /// [`Interfaces::send`] for a header that `write_header` appends to
    /// the consumer's queue itself, so that it is written once, in place.
    pub fn send_with(
        &mut self,
        iface: u16,
        consumer: ConsumerId,
        write_header: impl FnOnce(&mut Vec<u8>),
        body: &[u8],
    ) -> bool {
        let i = &mut self.list[iface as usize];
        if let Some(c) = i.consumers.iter_mut().find(|c| c.id == consumer)
            && !c.broken()
        {
            let start = c.out.own_len();
            write_header(c.out.own_mut());
            if c.pending() + body.len() <= self.buffer_bytes {
                let len = c.out.own_len() - start + body.len();
                c.out.push_body(body, &self.lenders);
                c.out_events += 1;
                i.counters.events += 1;
                i.counters.bytes += len as u64;
                // Large writes, but not so late that the consumer idles.
                if c.out.len() >= WRITE_AT {
                    self.writer.hand(c);
                }
                return true;
            }
            // No room: the header waits aside while the slow path makes
            // room or drops the event.
            self.scratch.clear();
            self.scratch.extend_from_slice(&c.out.own_mut()[start..]);
            c.out.truncate_own(start);
        } else {
            // Gone: written aside only to count its bytes as dropped.
            self.scratch.clear();
            write_header(&mut self.scratch);
        }
        let header = std::mem::take(&mut self.scratch);
        let queued = self.queue(iface, consumer, &header, Body::Bytes(body), 1);
        self.scratch = header;
        queued
    }

    /// Queues `events` whole events held while the flow was unrouted.
    pub fn send_held(&mut self, iface: u16, consumer: ConsumerId, held: &Queued, events: u64) -> bool {
        self.queue(iface, consumer, &[], Body::Held(held), events)
    }

    /// Lets bodies that lie in `bytes` be queued by reference rather than
    /// copied: the writer keeps the mapping until it has written them.
    pub fn lend(&mut self, bytes: &FileBytes) {
        self.lenders.add(bytes);
        let _ = self.writer.jobs.send(Job::Lend(bytes.clone()));
    }

    /// The lenders, for a flow's held events.
    pub fn lenders(&self) -> &Lenders {
        &self.lenders
    }

    /// Counts events dropped without being offered to a consumer.
    pub fn count_dropped(&mut self, iface: u16, events: u64, bytes: usize) {
        let counters = &mut self.list[iface as usize].counters;
        counters.dropped_events += events;
        counters.dropped_bytes += bytes as u64;
    }

    /// Queues an event, or `events` held ones in `body`, making room first
    /// if the consumer's buffer is full.
    fn queue(&mut self, iface: u16, consumer: ConsumerId, header: &[u8], body: Body, events: u64) -> bool {
        let len = header.len() + body.len();
        let limit = self.buffer_bytes;
        // The consumer is looked up once: this runs for every event.
        let mut at = self.list[iface as usize]
            .consumers
            .iter()
            .position(|c| c.id == consumer);
        if let Some(ci) = at
            && self.list[iface as usize].consumers[ci].pending() + len > limit
        {
            // Everything queued goes to the writer, for every consumer: one
            // that is behind must not leave the others idle while capture
            // waits for it.
            for c in self.list.iter_mut().flat_map(|i| i.consumers.iter_mut()) {
                self.writer.hand(c);
            }
            if let Delivery::Wait(stall) = self.delivery {
                wait_for_room(&self.list[iface as usize].consumers[ci], len, limit, stall);
            }
        }
        // Only the writer finds a consumer gone: not worth a look at every
        // consumer on every event otherwise.
        if let Some(ci) = at
            && self.list[iface as usize].consumers[ci].broken()
        {
            self.forget_broken();
            at = None;
        }
        let i = &mut self.list[iface as usize];
        let Some(c) = at.map(|ci| &mut i.consumers[ci]).filter(|c| c.pending() + len <= limit) else {
            i.counters.dropped_events += events;
            i.counters.dropped_bytes += len as u64;
            return false;
        };
        c.out.own_mut().extend_from_slice(header);
        match body {
            Body::Bytes(bytes) => c.out.push_body(bytes, &self.lenders),
            Body::Held(held) => c.out.append(held),
        }
        c.out_events += events;
        i.counters.events += events;
        i.counters.bytes += len as u64;
        // Large writes, but not so late that the consumer idles.
        if c.out.len() >= WRITE_AT {
            self.writer.hand(c);
        }
        true
    }

    /// Drops the consumers the writer found gone, counting them and what
    /// they did not take.
    fn forget_broken(&mut self) {
        for iface in &mut self.list {
            let counters = &mut iface.counters;
            iface.consumers.retain(|c| {
                if c.broken() {
                    count_lost(counters, c);
                }
                !c.broken()
            });
        }
    }

    /// Hands what the consumers have queued to the writer; forgets those
    /// that left.
    pub fn flush(&mut self) {
        for c in self.list.iter_mut().flat_map(|i| i.consumers.iter_mut()) {
            self.writer.hand(c);
        }
        self.forget_broken();
    }

    /// Writes everything still queued, waiting for the consumers up to
    /// `stall` without progress, then hangs up, so that consumers see the
    /// end. Consumers left with bytes unwritten count as disconnects.
    pub fn finish(&mut self, stall: Duration) {
        for c in self.list.iter_mut().flat_map(|i| i.consumers.iter_mut()) {
            self.writer.hand(c);
        }
        let _ = self.writer.jobs.send(Job::Finish(stall));
        if let Some(thread) = self.writer.thread.take() {
            thread.join().expect("the socket writer panicked");
        }
        for iface in &mut self.list {
            for c in iface.consumers.drain(..) {
                if c.broken() {
                    count_lost(&mut iface.counters, &c);
                }
            }
        }
    }

    /// Whether an interface of this name (`tcp/http0`) exists.
    pub fn has(&self, name: &str) -> bool {
        self.list.iter().any(|i| i.name == name)
    }

    /// Every interface's name (`tcp/http0`, `udp/default`, ...).
    pub fn names(&self) -> Vec<&str> {
        self.list.iter().map(|i| i.name.as_str()).collect()
    }

    pub fn report(&self) -> Vec<InterfaceReport> {
        self.list
            .iter()
            .map(|i| InterfaceReport {
                interface: i.name.clone(),
                consumers: i.consumers.len(),
                counters: i.counters.clone(),
            })
            .collect()
    }
}

/// A consumer gone: a disconnect, and the events it had not taken move
/// from the delivered counts to the dropped ones.
fn count_lost(counters: &mut InterfaceCounters, c: &Consumer) {
    counters.disconnects += 1;
    // Once `broken` is set the writer no longer changes the counts: what is
    // still in flight, or queued here, never reached the consumer.
    let events = c.out_events + c.shared.in_flight_events.load(Ordering::Acquire);
    let bytes = c.pending() as u64;
    counters.events = counters.events.saturating_sub(events);
    counters.bytes = counters.bytes.saturating_sub(bytes);
    counters.dropped_events += events;
    counters.dropped_bytes += bytes;
}

/// Waits until the consumer has room for `len` more bytes or is gone: the
/// writer cuts it off once it has taken nothing for `stall`. The writer
/// keeps writing to every consumer meanwhile, not only to this one.
fn wait_for_room(c: &Consumer, len: usize, limit: usize, stall: Duration) {
    // Only if the writer itself were stuck would this be reached.
    let give_up = Instant::now() + 2 * stall + Duration::from_secs(1);
    while !c.broken() && c.pending() + len > limit && Instant::now() < give_up {
        std::thread::sleep(Duration::from_micros(100));
    }
}

impl Drop for Interfaces {
    fn drop(&mut self) {
        for iface in &self.list {
            let _ = std::fs::remove_file(&iface.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn specs() -> Vec<InterfaceSpec> {
        vec![InterfaceSpec {
            path: "tcp/x".into(),
            rule: None,
        }]
    }

    #[test]
    fn a_flow_goes_to_a_consumer_connected_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut ifaces = Interfaces::open(dir.path(), &specs(), 1 << 20, Delivery::Drop).unwrap();
        assert_eq!(ifaces.assign(0), None);
        let mut reader = UnixStream::connect(dir.path().join("tcp/x")).unwrap();
        ifaces.accept();
        let c = ifaces.assign(0).unwrap();
        assert!(ifaces.send(0, c, b"head\n", b"body"));
        ifaces.finish(Duration::from_secs(1));
        let mut got = Vec::new();
        reader.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"head\nbody");
        let r = &ifaces.report()[0];
        assert_eq!(
            (r.counters.flows, r.counters.flows_without_consumer, r.counters.events),
            (2, 1, 1)
        );
    }

    /// Bodies written from the mapped file, not copied, reach a slow
    /// consumer whole and in order among copied ones and held events, after
    /// capture has let go of the file: with a queue larger than the
    /// socket's buffer, writes stop part-way through pieces.
    #[test]
    fn lent_bodies_arrive_whole_and_in_order_through_partial_writes() {
        lent_bodies_arrive_whole_and_in_order(16 << 20);
    }

    /// ... and with a queue smaller than what is sent, capture waits for
    /// room before queueing more.
    #[test]
    fn lent_bodies_arrive_whole_and_in_order_when_capture_waits_for_room() {
        lent_bodies_arrive_whole_and_in_order(64 << 10);
    }

    fn lent_bodies_arrive_whole_and_in_order(buffer_bytes: usize) {
        let text: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let (file, mapped) = crate::queued::mapped_capture(&text);
        let dir = tempfile::tempdir().unwrap();
        let wait = Delivery::Wait(Duration::from_secs(10));
        let mut ifaces = Interfaces::open(dir.path(), &specs(), buffer_bytes, wait).unwrap();
        ifaces.lend(&mapped);
        let mut reader = UnixStream::connect(dir.path().join("tcp/x")).unwrap();
        ifaces.accept();
        let c = ifaces.assign(0).unwrap();
        let consumer = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut chunk = [0u8; 1000];
            for reads in 0.. {
                // Slower than the writer, so that its socket fills and
                // writes stop in the middle of pieces.
                if reads % 64 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                match reader.read(&mut chunk).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&chunk[..n]),
                }
            }
            got
        });
        let body = |i: usize| {
            let start = 24 + (i * 7919) % (text.len() - 3000);
            &mapped[start..start + 100 + (i * 31) % 2900]
        };
        let mut expected = Vec::new();
        for i in 0..8000 {
            let header = format!("h{i}\n");
            if i % 10 == 9 {
                // Held events: owned headers, lent bodies.
                let mut held = Queued::default();
                held.own_mut().extend_from_slice(header.as_bytes());
                held.push_body(body(i), &ifaces.lenders);
                held.push_body(body(i + 1), &ifaces.lenders);
                assert!(ifaces.send_held(0, c, &held, 2));
                expected.extend_from_slice(&held.to_vec());
            } else {
                assert!(ifaces.send(0, c, header.as_bytes(), body(i)));
                expected.extend_from_slice(header.as_bytes());
                expected.extend_from_slice(body(i));
            }
        }
        drop((mapped, file));
        ifaces.finish(Duration::from_secs(10));
        let got = consumer.join().unwrap();
        assert_eq!(got.len(), expected.len());
        assert!(got == expected, "the bytes differ");
        let r = &ifaces.report()[0].counters;
        assert_eq!((r.events, r.dropped_events, r.bytes), (8800, 0, expected.len() as u64));
    }

    #[test]
    fn a_consumer_that_does_not_read_loses_events_not_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let mut ifaces = Interfaces::open(dir.path(), &specs(), 4096, Delivery::Drop).unwrap();
        let _idle = UnixStream::connect(dir.path().join("tcp/x")).unwrap();
        ifaces.accept();
        let c = ifaces.assign(0).unwrap();
        let body = vec![7u8; 1000];
        let sent = (0..10_000).filter(|_| ifaces.send(0, c, b"h\n", &body)).count();
        let r = &ifaces.report()[0].counters;
        assert!(sent < 10_000 && r.dropped_events > 0);
        assert_eq!(r.events + r.dropped_events, 10_000);
    }

    /// A consumer that hangs up mid-flow: what capture still hands over for
    /// it, before it learns that it left, is counted as dropped, once.
    #[test]
    fn a_consumer_that_leaves_loses_its_events_counted_and_capture_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut ifaces = Interfaces::open(dir.path(), &specs(), 64 << 20, Delivery::Drop).unwrap();
        let leaving = UnixStream::connect(dir.path().join("tcp/x")).unwrap();
        ifaces.accept();
        let c = ifaces.assign(0).unwrap();
        drop(leaving);
        let body = vec![7u8; 64 << 10];
        let mut offered = 0;
        let started = Instant::now();
        while ifaces.report()[0].counters.disconnects == 0 && started.elapsed() < Duration::from_secs(10) {
            ifaces.send(0, c, b"h\n", &body);
            offered += 1;
        }
        ifaces.finish(Duration::from_millis(100));
        let r = &ifaces.report()[0].counters;
        assert_eq!(r.disconnects, 1);
        assert_eq!(r.events + r.dropped_events, offered);
        assert_eq!(r.bytes + r.dropped_bytes, offered * (body.len() as u64 + 2));
    }

    #[test]
    fn stale_sockets_are_replaced_but_other_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        drop(Interfaces::open(dir.path(), &specs(), 4096, Delivery::Drop).unwrap());
        let path = dir.path().join("tcp/x");
        let _stale = UnixListener::bind(&path).unwrap();
        Interfaces::open(dir.path(), &specs(), 4096, Delivery::Drop).unwrap();
        std::fs::write(&path, b"data").unwrap();
        let e = Interfaces::open(dir.path(), &specs(), 4096, Delivery::Drop)
            .err()
            .unwrap();
        assert!(e.to_string().contains("not a socket"), "{e}");
    }

    /// With capture files the reader waits for a consumer that is behind;
    /// meanwhile the other consumers must keep getting their bytes, or
    /// balanced analyzers would take turns instead of working at once.
    #[test]
    fn waiting_for_one_consumer_keeps_writing_to_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let two = vec![
            InterfaceSpec {
                path: "tcp/x0".into(),
                rule: Some("x".into()),
            },
            InterfaceSpec {
                path: "tcp/x1".into(),
                rule: Some("x".into()),
            },
        ];
        let limit = 1 << 20;
        let mut ifaces = Interfaces::open(dir.path(), &two, limit, Delivery::Wait(Duration::from_millis(300))).unwrap();
        let _stuck = UnixStream::connect(dir.path().join("tcp/x0")).unwrap();
        let mut reading = UnixStream::connect(dir.path().join("tcp/x1")).unwrap();
        let chunk = vec![1u8; 64 << 10];
        let expected = 3 * chunk.len();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0; expected];
            reading.read_exact(&mut got).map(|_| got.len())
        });
        ifaces.accept();
        let (stuck, fast) = (ifaces.assign(0).unwrap(), ifaces.assign(1).unwrap());
        // Less than a write's worth for the reading consumer, which waits
        // in its queue; then more than the stuck one will ever take.
        for _ in 0..3 {
            assert!(ifaces.send(1, fast, b"", &chunk));
        }
        let started = Instant::now();
        let mut offered = 1;
        while ifaces.send(0, stuck, b"", &chunk) {
            offered += 1;
        }
        assert!(started.elapsed() >= Duration::from_millis(300));
        // While capture waited, the reading consumer got all that was
        // queued for it; the stuck one was cut off for taking nothing.
        assert_eq!(reader.join().unwrap().unwrap(), expected);
        let r = &ifaces.report()[0];
        assert_eq!((r.consumers, r.counters.disconnects), (0, 1));
        // What the socket took before it filled counts as delivered; the
        // rest, queued or refused, as dropped.
        assert!(r.counters.dropped_events > 1);
        assert_eq!(r.counters.events + r.counters.dropped_events, offered);
        assert_eq!(
            r.counters.bytes + r.counters.dropped_bytes,
            offered * chunk.len() as u64
        );
        ifaces.finish(Duration::from_millis(100));
    }
}
