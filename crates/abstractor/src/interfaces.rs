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
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

    /// Writes everything, waiting for the consumer up to `stall` per write.
    fn flush_waiting(&mut self, stall: Duration) -> io::Result<()> {
        self.stream.set_nonblocking(false)?;
        self.stream.set_write_timeout(Some(stall))?;
        let result = self.stream.write_all(&self.out[self.sent..]);
        self.out.clear();
        self.sent = 0;
        self.stream.set_nonblocking(true)?;
        result
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
                        iface.counters.connections += 1;
                        iface.consumers.push(Consumer {
                            id: self.next_id,
                            stream,
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

    fn queue(&mut self, iface: u16, consumer: ConsumerId, header: &[u8], body: &[u8], events: u64) -> bool {
        let i = &mut self.list[iface as usize];
        let len = header.len() + body.len();
        let Some(at) = i.consumers.iter().position(|c| c.id == consumer) else {
            i.counters.dropped_events += events;
            i.counters.dropped_bytes += len as u64;
            return false;
        };
        let c = &mut i.consumers[at];
        if c.pending() + len > self.buffer_bytes {
            let room = match self.delivery {
                Delivery::Drop => c.flush().is_ok() && c.pending() + len <= self.buffer_bytes,
                Delivery::Wait(stall) => c.flush_waiting(stall).is_ok(),
            };
            if !room {
                if c.flush().is_err() {
                    i.consumers.swap_remove(at);
                    i.counters.disconnects += 1;
                }
                i.counters.dropped_events += events;
                i.counters.dropped_bytes += len as u64;
                return false;
            }
        }
        c.out.extend_from_slice(header);
        c.out.extend_from_slice(body);
        i.counters.events += events;
        i.counters.bytes += len as u64;
        // Large writes, but not so late that the consumer idles.
        if c.pending() >= WRITE_AT && c.flush().is_err() {
            i.consumers.swap_remove(at);
            i.counters.disconnects += 1;
        }
        true
    }

    /// Writes what the consumers take now; forgets those that left.
    pub fn flush(&mut self) {
        for iface in &mut self.list {
            let before = iface.consumers.len();
            iface.consumers.retain_mut(|c| c.flush().is_ok());
            iface.counters.disconnects += (before - iface.consumers.len()) as u64;
        }
    }

    /// Writes everything still queued, waiting for each consumer up to
    /// `stall` per write, then hangs up, so that consumers see the end.
    pub fn finish(&mut self, stall: Duration) {
        for iface in &mut self.list {
            for mut c in iface.consumers.drain(..) {
                if c.flush_waiting(stall).is_err() {
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
}
