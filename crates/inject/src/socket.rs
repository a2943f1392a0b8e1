use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use crate::pacer::{BATCH, Transmit};
use crate::{InjectError, SendStats};

/// How long to wait before trying again when the kernel says its queue
/// for the interface is full (ENOBUFS): at 10 GbE line rate a 4096-frame
/// ring drains in 275 µs, so a short pause loses little and a retry loop
/// without one would only burn the core the kernel needs to drain it.
const BACKPRESSURE_PAUSE: Duration = Duration::from_micros(20);

/// Sends whole Ethernet frames, exactly as given, on one interface: an
/// AF_PACKET raw socket bound to the interface, frames handed to the
/// kernel many at a time with `sendmmsg`, and past the interface's queueing
/// discipline where the kernel allows (PACKET_QDISC_BYPASS), since traffic
/// shaping is not what a generator wants to measure.
pub struct Injector {
    fd: OwnedFd,
    interface: String,
    qdisc_bypass: bool,
    stats: SendStats,
    /// The interface's own count of dropped outgoing frames when it was
    /// opened, to report the drops during the run.
    tx_dropped_at_open: Option<u64>,
}

impl Injector {
    /// Opens a raw socket on `interface`, which must exist in this network
    /// namespace, be up and have a carrier. Needs root or CAP_NET_RAW.
    pub fn open(interface: &str) -> Result<Injector, InjectError> {
        let name = interface_name(interface)?;
        // SAFETY: `name` is a NUL-terminated string that outlives the call.
        #[allow(unsafe_code)]
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(InjectError::NoSuchInterface {
                interface: interface.to_string(),
            });
        }
        // Protocol 0: the socket only sends. With ETH_P_ALL the kernel would
        // also queue a copy of every frame on the interface to it, ours
        // included, for nobody to read.
        // SAFETY: plain system call with integer arguments.
        #[allow(unsafe_code)]
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let source = io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => InjectError::Permission {
                    interface: interface.to_string(),
                },
                _ => io_error(interface, "opening a packet socket", source),
            });
        }
        // SAFETY: `raw` is a socket just opened and owned by nothing else.
        #[allow(unsafe_code)]
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let flags = interface_flags(&fd, &name).map_err(|e| io_error(interface, "reading the state of", e))?;
        if flags & libc::IFF_UP == 0 {
            return Err(InjectError::Down {
                interface: interface.to_string(),
            });
        }
        if flags & libc::IFF_RUNNING == 0 {
            return Err(InjectError::NoCarrier {
                interface: interface.to_string(),
            });
        }
        let address = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: 0,
            sll_ifindex: index as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        // SAFETY: `address` is a valid sockaddr_ll and the length passed is its size.
        #[allow(unsafe_code)]
        let bound = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const address).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if bound != 0 {
            return Err(io_error(interface, "binding to", io::Error::last_os_error()));
        }
        // Kernels before 3.14 know no bypass; sending works without it.
        let qdisc_bypass = set_int_option(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1).is_ok();
        Ok(Injector {
            fd,
            interface: interface.to_string(),
            qdisc_bypass,
            stats: SendStats::default(),
            tx_dropped_at_open: tx_dropped(interface),
        })
    }

    /// Whether frames skip the interface's queueing discipline.
    pub fn qdisc_bypass(&self) -> bool {
        self.qdisc_bypass
    }

    /// Sends every frame, in order. When the kernel's queue is full it
    /// pauses and tries again (counted in `backpressure_retries`), so no
    /// frame is lost to back-pressure. A frame the interface cannot take
    /// (larger than its MTU, shorter than an Ethernet header) is counted in
    /// `errors` and skipped; any other failure (the interface went down or
    /// away) ends the call with an error, the frames before it sent.
    pub fn send_batch<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> Result<(), InjectError> {
        for chunk in frames.chunks(BATCH) {
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; BATCH];
            for (iov, frame) in iov.iter_mut().zip(chunk) {
                let frame = frame.as_ref();
                // sendmmsg only reads through the pointer: the cast to *mut
                // is what the C type asks for, not a licence to write.
                iov.iov_base = frame.as_ptr().cast_mut().cast();
                iov.iov_len = frame.len();
            }
            // SAFETY: mmsghdr is plain data (pointers, lengths, flags); all
            // zeros is a valid value, an empty message.
            #[allow(unsafe_code)]
            let mut messages: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for (message, iov) in messages.iter_mut().zip(&mut iov) {
                message.msg_hdr.msg_iov = iov;
                message.msg_hdr.msg_iovlen = 1;
            }
            let mut next = 0;
            while next < chunk.len() {
                let pending = &mut messages[next..chunk.len()];
                // SAFETY: each message points to one iovec of `iov`, which
                // points into a frame of `chunk`; all outlive the call, and
                // the count is the length of `pending`.
                #[allow(unsafe_code)]
                let sent =
                    unsafe { libc::sendmmsg(self.fd.as_raw_fd(), pending.as_mut_ptr(), pending.len() as u32, 0) };
                if sent >= 0 {
                    for frame in &chunk[next..next + sent as usize] {
                        self.stats.frames += 1;
                        self.stats.bytes += frame.as_ref().len() as u64;
                    }
                    next += sent as usize;
                    continue;
                }
                // sendmmsg reports an error only when the first message of
                // the call fails, so `next` is the frame it concerns.
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(libc::ENOBUFS | libc::EAGAIN) => {
                        self.stats.backpressure_retries += 1;
                        std::thread::sleep(BACKPRESSURE_PAUSE);
                    }
                    Some(libc::EMSGSIZE | libc::EINVAL) => {
                        let len = chunk[next].as_ref().len();
                        let attempted = self.stats.frames + self.stats.errors;
                        self.stats.first_error.get_or_insert_with(|| {
                            let why = if error.raw_os_error() == Some(libc::EMSGSIZE) {
                                format!(
                                    "longer than the MTU of {0} allows (`ip link set {0} mtu N` raises it)",
                                    self.interface
                                )
                            } else {
                                error.to_string()
                            };
                            format!("frame {} ({len} bytes): {why}", attempted + 1)
                        });
                        self.stats.errors += 1;
                        next += 1;
                    }
                    _ => return Err(io_error(&self.interface, "sending on", error)),
                }
            }
        }
        Ok(())
    }

    /// What was sent so far. `interface_tx_dropped` is read now.
    pub fn stats(&self) -> SendStats {
        let dropped = self
            .tx_dropped_at_open
            .zip(tx_dropped(&self.interface))
            .map(|(before, now)| now.saturating_sub(before));
        SendStats {
            interface_tx_dropped: dropped,
            ..self.stats.clone()
        }
    }
}

impl Transmit for Injector {
    fn send_batch(&mut self, frames: &[&[u8]]) -> Result<(), InjectError> {
        Injector::send_batch(self, frames)
    }

    fn stats(&self) -> SendStats {
        Injector::stats(self)
    }
}

/// Sets the calling thread's timer slack to 1 ns, so that its sleeps end
/// when asked rather than up to 50 µs later (Linux's default slack).
pub(crate) fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and touches only the
    // calling thread's timer slack. A failure leaves the default slack,
    // which only makes waits spin longer.
    #[allow(unsafe_code)]
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

fn interface_name(interface: &str) -> Result<CString, InjectError> {
    let invalid = || InjectError::NoSuchInterface {
        interface: interface.to_string(),
    };
    if interface.is_empty() || interface.len() >= libc::IFNAMSIZ {
        return Err(invalid());
    }
    CString::new(interface).map_err(|_| invalid())
}

fn interface_flags(fd: &OwnedFd, name: &CString) -> io::Result<i32> {
    // SAFETY: ifreq is plain data (a name and a union of plain data); all
    // zeros is a valid value.
    #[allow(unsafe_code)]
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in request.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name (the name is
    // shorter than IFNAMSIZ, checked by `interface_name`, and the rest is
    // zero) and writes the flags into `request`, which outlives the call.
    #[allow(unsafe_code)]
    let result = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut request) };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: after SIOCGIFFLAGS the union holds the flags.
    #[allow(unsafe_code)]
    let flags = unsafe { request.ifr_ifru.ifru_flags };
    Ok(i32::from(flags as u16))
}

fn set_int_option(fd: &OwnedFd, level: i32, option: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option value is an int that outlives the call, and the
    // length passed is its size.
    #[allow(unsafe_code)]
    let result = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (&raw const value).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if result == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The interface's count of outgoing frames it dropped itself (a full
/// queue, a veth whose peer's backlog is full), from /proc/net/dev, which
/// shows the calling thread's network namespace.
fn tx_dropped(interface: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/dev").ok()?;
    parse_tx_dropped(&text, interface)
}

fn parse_tx_dropped(proc_net_dev: &str, interface: &str) -> Option<u64> {
    // Receive: bytes packets errs drop fifo frame compressed multicast,
    // then transmit: bytes packets errs drop ...
    const TX_DROP: usize = 11;
    proc_net_dev.lines().find_map(|line| {
        let (name, counters) = line.split_once(':')?;
        (name.trim() == interface).then(|| counters.split_whitespace().nth(TX_DROP)?.parse().ok())?
    })
}

fn io_error(interface: &str, action: &'static str, source: io::Error) -> InjectError {
    InjectError::Io {
        interface: interface.to_string(),
        action,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_drops_are_read_from_proc_net_dev() {
        let text = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:  123456     789    0    0    0     0          0         0   123456     789    0    0    0     0       0          0
 vethA:       0       0    0    0    0     0          0         0 14123456   20000    0   17    0     0       0          0
eth0:1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16
";
        assert_eq!(parse_tx_dropped(text, "vethA"), Some(17));
        assert_eq!(parse_tx_dropped(text, "lo"), Some(0));
        assert_eq!(parse_tx_dropped(text, "eth0"), Some(12));
        assert_eq!(parse_tx_dropped(text, "veth"), None);
    }

    #[test]
    fn impossible_names_are_no_interface() {
        for name in ["", "a-name-longer-than-15", "nul\0name"] {
            assert!(matches!(Injector::open(name), Err(InjectError::NoSuchInterface { .. })));
        }
        let error = Injector::open("sluice-none0").err().expect("no such interface");
        assert!(error.to_string().contains("sluice-none0"), "{error}");
    }
}
