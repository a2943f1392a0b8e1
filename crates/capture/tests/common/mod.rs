//! What the tests on real interfaces share: running `ip`, two network
//! namespaces joined by a veth pair, entering a namespace on a thread, and
//! a raw packet socket that injects frames.

#![allow(dead_code)] // Each test file uses its own part of this module.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two network namespaces, `a` holding one end of a veth pair and `b` the
/// other, both ends up. Dropping it deletes both namespaces, and with them
/// the pair, also when a test panics.
pub struct VethLab {
    pub a: String,
    pub b: String,
}

impl VethLab {
    /// The lab, its namespaces named after `tag` and its ends `a_end` and
    /// `b_end`; or `None` (after saying why) where this machine cannot
    /// build one.
    pub fn new(tag: &str, a_end: &str, b_end: &str) -> Option<VethLab> {
        if !is_root() {
            eprintln!("skipped: needs root (it creates network namespaces)");
            return None;
        }
        if ip(&["-V"]).is_err() {
            eprintln!("skipped: needs the `ip` command (iproute2)");
            return None;
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let a = format!("sluice-{tag}-{pid}-{n}-a");
        if let Err(e) = ip(&["netns", "add", &a]) {
            eprintln!("skipped: cannot create a network namespace here: {e}");
            return None;
        }
        let mut lab = VethLab { a, b: String::new() };
        let b = format!("sluice-{tag}-{pid}-{n}-b");
        ip(&["netns", "add", &b]).expect("second namespace");
        lab.b = b;
        // A link that comes up with IPv6 sends router solicitations and
        // MLD reports; they would spoil exact counts.
        for ns in [&lab.a, &lab.b] {
            in_netns(ns, || {
                for conf in ["default", "all"] {
                    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1");
                }
            });
        }
        ip(&[
            "link", "add", a_end, "netns", &lab.a, "type", "veth", "peer", "name", b_end, "netns", &lab.b,
        ])
        .expect("veth pair");
        ip(&["-n", &lab.a, "link", "set", a_end, "up"]).expect("first end up");
        ip(&["-n", &lab.b, "link", "set", b_end, "up"]).expect("second end up");
        Some(lab)
    }

    pub fn in_a<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.a, f)
    }

    pub fn in_b<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.b, f)
    }
}

impl Drop for VethLab {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            if !ns.is_empty() {
                let _ = ip(&["netns", "del", ns]);
            }
        }
    }
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
            .unwrap_or(false)
    })
}

/// Runs `f` on a thread that has entered network namespace `ns`; sockets
/// it opens stay in that namespace wherever they are used afterwards.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let handle = File::open(format!("/run/netns/{ns}")).expect("namespace handle");
    thread::scope(|s| {
        s.spawn(|| {
            enter_netns(&handle).expect("setns");
            f()
        })
        .join()
        .expect("namespace thread")
    })
}

#[allow(unsafe_code)]
fn enter_netns(handle: &File) -> io::Result<()> {
    // SAFETY: a plain system call on a descriptor that lives for the call;
    // CLONE_NEWNET moves only the calling thread.
    let rc = unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A raw packet socket that sends frames as they are, and receives none.
pub struct Injector {
    fd: OwnedFd,
    ifindex: i32,
}

impl Injector {
    #[allow(unsafe_code)]
    pub fn open(interface: &str) -> Injector {
        let name = std::ffi::CString::new(interface).unwrap();
        // SAFETY: valid NUL-terminated string; plain system calls.
        let (fd, ifindex) = unsafe {
            (
                libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0),
                libc::if_nametoindex(name.as_ptr()),
            )
        };
        assert!(fd >= 0, "injector socket: {}", io::Error::last_os_error());
        assert!(ifindex != 0, "no interface {interface}");
        Injector {
            // SAFETY: a descriptor we just opened and own alone.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            ifindex: ifindex as i32,
        }
    }

    #[allow(unsafe_code)]
    pub fn send(&self, frame: &[u8]) {
        let addr = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: u16::from_be_bytes([frame[12], frame[13]]).to_be(),
            sll_ifindex: self.ifindex,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 6,
            sll_addr: [frame[0], frame[1], frame[2], frame[3], frame[4], frame[5], 0, 0],
        };
        loop {
            // SAFETY: `frame` and `addr` are valid for the lengths given and
            // live for the call.
            let sent = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&addr as *const libc::sockaddr_ll).cast(),
                    size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if sent >= 0 {
                assert_eq!(sent, frame.len() as isize, "a frame went out cut short");
                return;
            }
            // A full device queue is back-pressure: wait, never drop.
            let e = io::Error::last_os_error();
            assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS), "send: {e}");
            thread::sleep(Duration::from_micros(50));
        }
    }

    /// Sends at a moderate pace: a veth delivers through a backlog of
    /// 1000 frames, and a burst beyond it would be lost before any packet
    /// socket sees it.
    pub fn send_all<'f>(&self, frames: impl IntoIterator<Item = &'f Vec<u8>>) {
        for (i, frame) in frames.into_iter().enumerate() {
            self.send(frame);
            if i % 100 == 99 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
}
