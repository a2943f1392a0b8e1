//! The thread that writes the interfaces' queued events into the
//! consumers' sockets.
//!
//! Copying the bytes into a UNIX socket is the kernel's work, on the
//! writing thread: it was nearly half the abstractor's time with SF-TAP's
//! workload. Here it runs beside capture, which hands over whole buffers
//! (`interfaces.rs`) and gets them back empty.
//!
//! One thread writes to every consumer, without blocking on any: a
//! consumer that is behind must not leave the others idle. What a consumer
//! has not taken yet is accounted in its [`Shared`] state, which capture
//! reads to apply the buffer limit.

use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use sluice_capture::FileBytes;

use crate::interfaces::ConsumerId;
use crate::queued::Queued;

/// What capture and the writer both know of a consumer.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Bytes handed to the writer and not yet written.
    pub in_flight: AtomicUsize,
    /// Events of the buffers handed to the writer and not wholly written.
    pub in_flight_events: AtomicU64,
    /// The consumer left, or was cut off for taking nothing for the stall
    /// time: the writer writes nothing more to it and throws away what it
    /// gets for it, leaving both counts above as they were, and capture
    /// counts them as lost when it forgets the consumer.
    pub broken: AtomicBool,
}

pub(crate) enum Job {
    Attach(ConsumerId, UnixStream, Arc<Shared>),
    /// A buffer, and how many events it holds.
    Write(ConsumerId, Queued, u64),
    /// A file whose bodies may come queued by reference: kept mapped until
    /// the writer exits.
    Lend(FileBytes),
    /// Write what is left, waiting up to this long without progress (then
    /// cutting the consumer off), and hang up on every consumer.
    Finish(Duration),
}

struct Consumer {
    id: ConsumerId,
    stream: UnixStream,
    shared: Arc<Shared>,
    queue: VecDeque<(Queued, u64)>,
    /// The front buffer's pieces, from the first not wholly written; the
    /// first of them has `written` bytes written.
    pieces: Vec<libc::iovec>,
    next_piece: usize,
    written: usize,
    /// When it last took a byte, or got some to take after having none.
    progress: Instant,
}

impl Consumer {
    fn pending(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Writes what the socket takes without blocking. `Err` means the
    /// consumer is gone.
    fn write(&mut self, recycle: &SyncSender<Queued>) -> io::Result<bool> {
        let mut wrote = false;
        while let Some((front, _)) = self.queue.front() {
            if self.next_piece == self.pieces.len() {
                self.pieces.clear();
                self.next_piece = 0;
                self.written = 0;
                front.pieces(&mut |ptr, len| {
                    self.pieces.push(libc::iovec {
                        iov_base: ptr as *mut libc::c_void,
                        iov_len: len,
                    })
                });
                if self.pieces.is_empty() {
                    let (done, _) = self.queue.pop_front().expect("the front buffer");
                    let _ = recycle.try_send(done);
                    continue;
                }
            }
            match writev(
                self.stream.as_raw_fd(),
                &mut self.pieces[self.next_piece..],
                self.written,
            ) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    wrote = true;
                    self.shared.in_flight.fetch_sub(n, Ordering::Release);
                    self.advance(n);
                    if self.next_piece == self.pieces.len() {
                        let (mut done, events) = self.queue.pop_front().expect("the front buffer");
                        self.shared.in_flight_events.fetch_sub(events, Ordering::Release);
                        done.clear();
                        // Back to capture for reuse; dropped when it has enough.
                        let _ = recycle.try_send(done);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if wrote {
            self.progress = Instant::now();
        }
        Ok(wrote)
    }

    /// Moves past `n` more bytes of the front buffer's pieces.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let left = self.pieces[self.next_piece].iov_len - self.written;
            if n < left {
                self.written += n;
                return;
            }
            n -= left;
            self.next_piece += 1;
            self.written = 0;
        }
    }

    /// Throws the queue away: the consumer will not take it.
    fn cut_off(&mut self) {
        self.queue.clear();
        self.pieces.clear();
        self.next_piece = 0;
        self.written = 0;
        self.shared.broken.store(true, Ordering::Release);
    }
}

/// The writer thread's loop. With `stall`, a consumer with bytes pending
/// that takes none for that long is cut off (capture files, for which
/// capture waits on consumers rather than drop).
pub(crate) fn run(jobs: Receiver<Job>, recycle: SyncSender<Queued>, stall: Option<Duration>) {
    let mut consumers: Vec<Consumer> = Vec::new();
    // Dropped when this thread exits: no lent body is written after that.
    let mut lent_files: Vec<FileBytes> = Vec::new();
    let mut stall = stall;
    let mut finishing = false;
    let mut fds: Vec<RawFd> = Vec::new();
    loop {
        let any_pending = consumers.iter().any(Consumer::pending);
        if finishing && !any_pending {
            break;
        }
        // Nothing to write: sleep until capture hands something over.
        let first = if any_pending || finishing {
            match jobs.try_recv() {
                Ok(job) => Some(job),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) if finishing => None,
                Err(TryRecvError::Disconnected) => return,
            }
        } else {
            match jobs.recv_timeout(Duration::from_millis(100)) {
                Ok(job) => Some(job),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        for job in first.into_iter().chain(std::iter::from_fn(|| jobs.try_recv().ok())) {
            match job {
                Job::Attach(id, stream, shared) => consumers.push(Consumer {
                    id,
                    stream,
                    shared,
                    queue: VecDeque::new(),
                    pieces: Vec::new(),
                    next_piece: 0,
                    written: 0,
                    progress: Instant::now(),
                }),
                Job::Write(id, bytes, events) => match consumers.iter_mut().find(|c| c.id == id) {
                    Some(c) => {
                        if !c.pending() {
                            c.progress = Instant::now();
                        }
                        c.queue.push_back((bytes, events));
                    }
                    // Cut off (or gone) since capture handed this over: it
                    // counts the bytes as lost when it sees `broken`.
                    None => {
                        let mut spare = bytes;
                        spare.clear();
                        let _ = recycle.try_send(spare);
                    }
                },
                Job::Lend(file) => lent_files.push(file),
                Job::Finish(patience) => {
                    finishing = true;
                    stall = Some(patience);
                }
            }
        }
        let mut wrote = false;
        let now = Instant::now();
        fds.clear();
        for c in &mut consumers {
            if !c.pending() {
                continue;
            }
            match c.write(&recycle) {
                Ok(w) => wrote |= w,
                Err(_) => c.cut_off(),
            }
            if c.pending() && stall.is_some_and(|stall| now.duration_since(c.progress) >= stall) {
                c.cut_off();
            }
            if c.pending() {
                fds.push(c.stream.as_raw_fd());
            }
        }
        consumers.retain(|c| !c.shared.broken.load(Ordering::Relaxed));
        if !wrote && !fds.is_empty() {
            wait_writable(&fds, Duration::from_millis(1));
        }
    }
    // Consumers see the end of the stream as their sockets close here.
}

/// At most this many pieces per `writev` (Linux's UIO_MAXIOV).
const MAX_PIECES: usize = 1024;

/// Writes `pieces` (the first with `skip` bytes already written) to `fd`
/// in one `writev`, restoring the first piece afterwards.
#[allow(unsafe_code)]
fn writev(fd: RawFd, pieces: &mut [libc::iovec], skip: usize) -> io::Result<usize> {
    let count = pieces.len().min(MAX_PIECES);
    let first = pieces[0];
    pieces[0] = libc::iovec {
        // SAFETY: `skip` is below the first piece's length (`advance`).
        iov_base: unsafe { first.iov_base.cast::<u8>().add(skip) }.cast(),
        iov_len: first.iov_len - skip,
    };
    // SAFETY: every piece is readable memory for its length: the owned
    // bytes of a buffer the writer holds at the front of the queue, or a
    // body in a file mapping the writer keeps (`Job::Lend`).
    let n = unsafe { libc::writev(fd, pieces.as_ptr(), count as libc::c_int) };
    pieces[0] = first;
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
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
