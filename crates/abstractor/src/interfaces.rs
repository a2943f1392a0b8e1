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

use std::io::{self, ErrorKind, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::InterfaceSpec;

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

/// Queued bytes are written once a consumer has this many.
const WRITE_AT: usize = 256 << 10;

/// A consumer a flow was given to; events of that flow go there only.
pub type ConsumerId = u64;

struct Consumer {
    id: ConsumerId,
    stream: UnixStream,
    /// A write failed: the consumer left. Removed at the next flush.
    broken: bool,
    /// Events not yet written, from `sent` on.
    out: Vec<u8>,
    sent: usize,
}

impl Consumer {
    fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Writes what the socket takes without blocking. `Err` means the
    /// consumer is gone.
    fn flush(&mut self) -> io::Result<()> {
        while self.sent < self.out.len() {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        } else if self.sent > self.out.len() / 2 {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
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
        Ok(Interfaces {
            list,
            buffer_bytes,
            delivery,
            next_id: 1,
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
                        iface.consumers.push(Consumer {
                            id: self.next_id,
                            stream,
                            broken: false,
                            out: Vec::new(),
                            sent: 0,
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
        self.queue(iface, consumer, header, body, 1)
    }

    /// Queues `events` whole events held while the flow was unrouted.
    pub fn send_held(&mut self, iface: u16, consumer: ConsumerId, held: &[u8], events: u64) -> bool {
        self.queue(iface, consumer, &[], held, events)
    }

    /// Counts events dropped without being offered to a consumer.
    pub fn count_dropped(&mut self, iface: u16, events: u64, bytes: usize) {
        let counters = &mut self.list[iface as usize].counters;
        counters.dropped_events += events;
        counters.dropped_bytes += bytes as u64;
    }

    fn queue(&mut self, iface: u16, consumer: ConsumerId, header: &[u8], body: &[u8], events: u64) -> bool {
        let len = header.len() + body.len();
        let limit = self.buffer_bytes;
        let full = |s: &Interfaces| {
            s.list[iface as usize]
                .consumers
                .iter()
                .find(|c| c.id == consumer)
                .is_some_and(|c| !c.broken && c.pending() + len > limit)
        };
        if full(self) {
            match self.delivery {
                Delivery::Drop => {
                    if let Some(c) = self.consumer(iface, consumer) {
                        c.broken |= c.flush().is_err();
                    }
                }
                Delivery::Wait(stall) => self.write_until(stall, |s| !full(s)),
            }
            // Only a write can find a consumer gone: not worth a look at
            // every consumer on every event otherwise.
            self.forget_broken();
        }
        let i = &mut self.list[iface as usize];
        let Some(c) = i.consumers.iter_mut().find(|c| c.id == consumer) else {
            i.counters.dropped_events += events;
            i.counters.dropped_bytes += len as u64;
            return false;
        };
        if c.pending() + len > limit {
            i.counters.dropped_events += events;
            i.counters.dropped_bytes += len as u64;
            return false;
        }
        c.out.extend_from_slice(header);
        c.out.extend_from_slice(body);
        i.counters.events += events;
        i.counters.bytes += len as u64;
        // Large writes, but not so late that the consumer idles.
        if c.pending() >= WRITE_AT {
            c.broken |= c.flush().is_err();
            if c.broken {
                self.forget_broken();
            }
        }
        true
    }

    fn consumer(&mut self, iface: u16, consumer: ConsumerId) -> Option<&mut Consumer> {
        self.list[iface as usize]
            .consumers
            .iter_mut()
            .find(|c| c.id == consumer)
    }

    /// Drops the consumers a write found gone, counting them.
    fn forget_broken(&mut self) {
        for iface in &mut self.list {
            let before = iface.consumers.len();
            iface.consumers.retain(|c| !c.broken);
            iface.counters.disconnects += (before - iface.consumers.len()) as u64;
        }
    }

    /// Writes to every consumer that can take bytes until `done` holds, or
    /// until no consumer has taken anything for `stall`. It waits on all
    /// of them at once (poll), not on the one it needs room in, so that a
    /// consumer that is behind never leaves the others idle.
    fn write_until(&mut self, stall: Duration, mut done: impl FnMut(&Interfaces) -> bool) {
        let mut deadline = Instant::now() + stall;
        let mut waiting = Vec::new();
        loop {
            let mut wrote = false;
            waiting.clear();
            for c in self.list.iter_mut().flat_map(|i| i.consumers.iter_mut()) {
                if c.broken || c.pending() == 0 {
                    continue;
                }
                let before = c.pending();
                c.broken |= c.flush().is_err();
                wrote |= c.pending() < before;
                if !c.broken && c.pending() > 0 {
                    waiting.push(c.stream.as_raw_fd());
                }
            }
            if done(self) || waiting.is_empty() {
                return;
            }
            let now = Instant::now();
            if wrote {
                deadline = now + stall;
            } else if now >= deadline {
                return;
            }
            wait_writable(&waiting, deadline - now);
        }
    }

    /// Writes what the consumers take now; forgets those that left.
    pub fn flush(&mut self) {
        for c in self.list.iter_mut().flat_map(|i| i.consumers.iter_mut()) {
            c.broken |= c.flush().is_err();
        }
        self.forget_broken();
    }

    /// Writes everything still queued, waiting for the consumers up to
    /// `stall` without progress, then hangs up, so that consumers see the
    /// end. Consumers left with bytes unwritten count as disconnects.
    pub fn finish(&mut self, stall: Duration) {
        self.write_until(stall, |s| {
            s.list
                .iter()
                .flat_map(|i| i.consumers.iter())
                .all(|c| c.broken || c.pending() == 0)
        });
        for iface in &mut self.list {
            for c in iface.consumers.drain(..) {
                if c.broken || c.pending() > 0 {
                    iface.counters.disconnects += 1;
                }
            }
        }
    }

    /// Whether an interface of this name (`tcp/http0`) exists.
    pub fn has(&self, name: &str) -> bool {
        self.list.iter().any(|i| i.name == name)
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

/// Sleeps until one of `fds` can be written to, or `timeout` passes.
#[allow(unsafe_code)]
fn wait_writable(fds: &[RawFd], timeout: Duration) {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: `polled` is a live, exclusively borrowed array of `len`
    // pollfd structures for the whole call, as poll(2) requires; the
    // descriptors belong to streams that outlive the call.
    unsafe {
        libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms);
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
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            reading.read_to_end(&mut got).unwrap();
            got.len()
        });
        ifaces.accept();
        let (stuck, fast) = (ifaces.assign(0).unwrap(), ifaces.assign(1).unwrap());
        let chunk = vec![1u8; 64 << 10];
        // Fill the stuck consumer's queue (and its socket), and queue for
        // the other less than a write's worth, which waits in the queue.
        while ifaces.send(0, stuck, b"", &chunk) {}
        for _ in 0..3 {
            assert!(ifaces.send(1, fast, b"", &chunk));
        }
        let started = Instant::now();
        assert!(
            !ifaces.send(0, stuck, b"", &chunk),
            "the stuck consumer never makes room"
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
        // While it waited, the reading consumer got everything queued for it.
        ifaces.list[0].consumers.clear();
        ifaces.list[1].consumers.clear();
        assert_eq!(reader.join().unwrap(), 3 * chunk.len());
    }
}
