//! The system calls of live capture, each wrapped once so that the unsafe
//! code stays in this file (each function allows it for itself) and
//! everything above works with `io::Result`.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Opens a packet socket that receives nothing yet: protocol 0 keeps the
/// kernel from queueing frames of every interface before `bind` narrows
/// the socket to one.
#[allow(unsafe_code)]
pub(super) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor we just opened and nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The interface's index, or `None` when no interface of that name exists
/// in this network namespace.
#[allow(unsafe_code)]
pub(super) fn interface_index(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string for the whole call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

#[allow(unsafe_code)]
pub(super) fn set_option<T>(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: the kernel reads `size_of::<T>()` bytes from a live reference;
    // each caller passes the structure the option is defined with.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Types that `getsockopt` may fill: plain integers and structures of
/// integers, for which every bit pattern (and all zeros) is valid.
pub(super) trait Plain: Copy {
    fn zeroed() -> Self;
}

impl Plain for libc::c_int {
    fn zeroed() -> Self {
        0
    }
}

impl Plain for libc::tpacket_stats_v3 {
    fn zeroed() -> Self {
        libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        }
    }
}

#[allow(unsafe_code)]
pub(super) fn get_option<T: Plain>(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
    let mut value = T::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, and any
    // bytes it writes form a valid `T` (see `Plain`).
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&mut value as *mut T).cast(), &mut len) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value)
    }
}

/// Binds the socket to one interface and starts delivery of `protocol`
/// (in host byte order).
#[allow(unsafe_code)]
pub(super) fn bind(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    let addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `addr` is a valid sockaddr_ll that lives for the call.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The ARPHRD type of the interface a bound packet socket listens on.
#[allow(unsafe_code)]
pub(super) fn hardware_type(fd: BorrowedFd<'_>) -> io::Result<u16> {
    let mut addr = libc::sockaddr_ll {
        sll_family: 0,
        sll_protocol: 0,
        sll_ifindex: 0,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes of a sockaddr_ll into
    // `addr`, which is exactly that large.
    let rc = unsafe { libc::getsockname(fd.as_raw_fd(), (&mut addr as *mut libc::sockaddr_ll).cast(), &mut len) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(addr.sll_hatype)
    }
}

/// Attaches a one-instruction classic BPF filter, `ret #bytes`: the kernel
/// stores at most `bytes` bytes of each frame, and none at all when `bytes`
/// is 0. This is how a packet socket implements a snap length.
pub(super) fn keep_bytes(fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
    attach_filter(fd, &[keep(bytes)])
}

/// `ret #bytes`: accept every frame, keeping at most `bytes` of it.
pub(super) fn keep(bytes: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: bytes,
    }
}

/// Attaches a classic BPF program, replacing the one attached before in one
/// step: each frame meets either the old program or the new one. The
/// value a program returns is how many bytes of the frame to keep.
pub(super) fn attach_filter(fd: BorrowedFd<'_>, program: &[libc::sock_filter]) -> io::Result<()> {
    let len = u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fprog = libc::sock_fprog {
        len,
        // The kernel only reads the program (and copies it), whatever the
        // pointer's mutability says.
        filter: program.as_ptr().cast_mut(),
    };
    set_option(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

/// Waits up to `timeout_ms` for the socket to become readable or to report
/// an error, and returns the events seen (0 on time-out).
#[allow(unsafe_code)]
pub(super) fn poll(fd: BorrowedFd<'_>, timeout_ms: libc::c_int) -> io::Result<libc::c_short> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    // SAFETY: one valid pollfd, which lives for the call.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(pfd.revents)
    }
}

/// Waits up to `timeout_ms` for any of the sockets to become readable or
/// to report an error.
#[allow(unsafe_code)]
pub(super) fn poll_any(fds: &[BorrowedFd<'_>], timeout_ms: libc::c_int) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` holds `len` valid pollfds and lives for the call.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[allow(unsafe_code)]
pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
