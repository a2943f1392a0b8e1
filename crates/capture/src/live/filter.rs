//! Capture filters in tcpdump's syntax, compiled to classic BPF by libpcap.
//!
//! libpcap's compiler is the syntax's definition: tcpdump, Wireshark's
//! capture filters and every pcap-based tool accept exactly what
//! `pcap_compile` accepts, with its error messages, and it knows each link
//! type's header layout. A compiler of our own would be a second, subtly
//! different dialect of the same language. Only the compiler is used
//! (through `pcap_open_dead`, which opens no device); capture stays on our
//! own rings. The five functions needed are looked up in the shared
//! library when the first filter is compiled (`libloading`), not linked:
//! building Sluice then needs no libpcap at all, and only a run that asks
//! for a filter needs the library (Debian's `libpcap0.8`, which tcpdump
//! depends on). The `pcap` crate would link it at build time and bring a
//! capture API we do not use.
//!
//! The unsafe code of the FFI stays in this file, next to the declarations
//! it relies on, each function allowing it for itself.

use std::ffi::{CStr, CString, c_char, c_int, c_uint};
use std::sync::Mutex;

use sluice_wire::LinkType;

/// The kernel refuses socket filters longer than this (`BPF_MAXINSNS`).
const MAX_INSTRUCTIONS: usize = 4096;

/// `PCAP_NETMASK_UNKNOWN`: only `ip broadcast` needs the netmask, and it
/// then says so.
const NETMASK_UNKNOWN: c_uint = 0xffff_ffff;

/// An opaque `pcap_t`.
#[repr(C)]
struct Pcap {
    _private: [u8; 0],
}

/// `struct bpf_insn`; laid out as the kernel's `struct sock_filter`.
#[repr(C)]
#[derive(Clone, Copy)]
struct BpfInsn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `struct bpf_program`.
#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut BpfInsn,
}

type OpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut Pcap;
type Compile = unsafe extern "C" fn(*mut Pcap, *mut BpfProgram, *const c_char, c_int, c_uint) -> c_int;
type GetErr = unsafe extern "C" fn(*mut Pcap) -> *mut c_char;
type FreeCode = unsafe extern "C" fn(*mut BpfProgram);
type Close = unsafe extern "C" fn(*mut Pcap);
type OfflineFilter = unsafe extern "C" fn(*const BpfProgram, *const PktHdr, *const u8) -> c_int;

/// `struct pcap_pkthdr`: the filter reads only the two lengths.
#[repr(C)]
struct PktHdr {
    ts: libc::timeval,
    caplen: u32,
    len: u32,
}

/// The functions of pcap/pcap.h that compiling needs (libpcap 1.0 and
/// later), resolved once per process.
struct Libpcap {
    open_dead: OpenDead,
    compile: Compile,
    geterr: GetErr,
    freecode: FreeCode,
    close: Close,
    /// Only matching frames in user space needs it, so a library without
    /// it still compiles socket filters.
    offline_filter: Option<OfflineFilter>,
    /// Keeps the library mapped while the pointers above are used.
    _library: libloading::Library,
}

/// Sonames in the order distributions ship them.
const SONAMES: [&str; 3] = ["libpcap.so.0.8", "libpcap.so.1", "libpcap.so"];

fn libpcap() -> Result<&'static Libpcap, String> {
    static LIBPCAP: std::sync::OnceLock<Result<Libpcap, String>> = std::sync::OnceLock::new();
    LIBPCAP.get_or_init(load_libpcap).as_ref().map_err(Clone::clone)
}

#[allow(unsafe_code)]
fn load_libpcap() -> Result<Libpcap, String> {
    // SAFETY: loading libpcap runs only its (side-effect free) initialisers.
    let library = SONAMES
        .iter()
        .find_map(|name| unsafe { libloading::Library::new(name) }.ok())
        .ok_or_else(|| {
            "capture filters need libpcap, which is not installed (Debian and Ubuntu: apt-get install libpcap0.8)"
                .to_string()
        })?;
    // SAFETY: each symbol is looked up with the signature pcap/pcap.h
    // declares for it, and copied out as a plain function pointer that
    // stays valid while `library` (kept in the struct) is loaded.
    unsafe {
        let symbol = |name: &[u8]| -> Result<*const (), String> {
            library
                .get::<*const ()>(name)
                .map(|s| *s)
                .map_err(|e| format!("libpcap lacks {}: {e}", String::from_utf8_lossy(name)))
        };
        Ok(Libpcap {
            open_dead: std::mem::transmute::<*const (), OpenDead>(symbol(b"pcap_open_dead")?),
            compile: std::mem::transmute::<*const (), Compile>(symbol(b"pcap_compile")?),
            geterr: std::mem::transmute::<*const (), GetErr>(symbol(b"pcap_geterr")?),
            freecode: std::mem::transmute::<*const (), FreeCode>(symbol(b"pcap_freecode")?),
            close: std::mem::transmute::<*const (), Close>(symbol(b"pcap_close")?),
            offline_filter: symbol(b"pcap_offline_filter")
                .ok()
                .map(|f| std::mem::transmute::<*const (), OfflineFilter>(f)),
            _library: library,
        })
    }
}

/// libpcap's `DLT_*` number for the frames a packet socket of this link
/// type delivers (what the kernel's filter sees: the same bytes).
fn dlt(link: LinkType) -> c_int {
    match link {
        LinkType::Ethernet => 1,
        // DLT_RAW as Linux's libpcap numbers it (LINKTYPE_RAW in files).
        LinkType::RawIp => 12,
        other => other.to_linktype() as c_int,
    }
}

/// Compiles `expression` for frames of `link` into a socket filter that
/// keeps at most `snaplen` bytes of each frame it accepts, or returns
/// libpcap's message.
///
/// libpcap's accepting instructions return the snap length given to
/// `pcap_open_dead`, which it caps at 262144; every non-zero `ret #k` is set
/// to `snaplen` here, so the cut is exactly the configured one either way.
/// The kernel keeps `min(k, frame length)` bytes of a frame when the
/// program returns `k`, and none when it returns 0.
pub(super) fn compile(expression: &str, link: LinkType, snaplen: u32) -> Result<Vec<libc::sock_filter>, String> {
    let text = CString::new(expression).map_err(|_| "the expression contains a NUL byte".to_string())?;
    let mut program = pcap_compile_locked(&text, dlt(link), snaplen)?;
    for insn in &mut program {
        if insn.code == (libc::BPF_RET | libc::BPF_K) as u16 && insn.k != 0 {
            insn.k = snaplen;
        }
    }
    if program.len() > MAX_INSTRUCTIONS {
        return Err(format!(
            "the expression compiles to {} BPF instructions; the kernel accepts at most {MAX_INSTRUCTIONS}",
            program.len()
        ));
    }
    Ok(program)
}

/// A filter expression compiled for matching frames in user space, as
/// tcpdump and Wireshark match the packets of a capture file.
///
/// Frames are run through libpcap's own BPF interpreter
/// (`pcap_offline_filter`, what `tcpdump -r FILE EXPR` uses) rather than one
/// of ours: the results are then libpcap's by construction, down to frames
/// cut short by a snap length, and the cost is one call per frame.
pub struct CompiledFilter {
    insns: Vec<BpfInsn>,
    offline_filter: OfflineFilter,
}

impl super::LiveConfig {
    /// Compiles `expression` for frames of `link` to match frames in user
    /// space (reading capture files), or returns libpcap's message.
    pub fn compile_user_filter(expression: &str, link: LinkType) -> Result<CompiledFilter, String> {
        let offline_filter = libpcap()?
            .offline_filter
            .ok_or("this libpcap lacks pcap_offline_filter (libpcap 1.0 and later have it)")?;
        let text = CString::new(expression).map_err(|_| "the expression contains a NUL byte".to_string())?;
        // The largest snap length libpcap knows: a non-zero return only
        // means "matches" here.
        let insns = pcap_compile_locked(&text, dlt(link), 262_144)?
            .into_iter()
            .map(|i| BpfInsn {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect();
        Ok(CompiledFilter { insns, offline_filter })
    }
}

impl CompiledFilter {
    /// Whether the filter accepts `frame`, the captured bytes of a frame
    /// that was `wire_len` bytes long on the wire.
    #[allow(unsafe_code)]
    pub fn matches(&self, frame: &[u8], wire_len: u32) -> bool {
        let program = BpfProgram {
            bf_len: self.insns.len() as c_uint,
            bf_insns: self.insns.as_ptr().cast_mut(),
        };
        let header = PktHdr {
            ts: libc::timeval { tv_sec: 0, tv_usec: 0 },
            caplen: u32::try_from(frame.len()).unwrap_or(u32::MAX),
            len: wire_len.max(u32::try_from(frame.len()).unwrap_or(u32::MAX)),
        };
        // SAFETY: `program` points at `insns`, a program libpcap's compiler
        // produced (so every jump stays inside it), which the interpreter
        // only reads; it bounds-checks every load against `caplen`, the
        // length of `frame`. All three outlive the call.
        unsafe { (self.offline_filter)(&program, &header, frame.as_ptr()) != 0 }
    }
}

/// libpcap before 1.8 kept the compiler's state in globals, and the
/// documentation still asks callers to serialise `pcap_compile`; compiling
/// happens once per socket, so a lock costs nothing.
static COMPILER: Mutex<()> = Mutex::new(());

#[allow(unsafe_code)]
fn pcap_compile_locked(expression: &CStr, linktype: c_int, snaplen: u32) -> Result<Vec<libc::sock_filter>, String> {
    let lib = libpcap()?;
    let _guard = COMPILER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let snaplen = c_int::try_from(snaplen).unwrap_or(c_int::MAX);
    // SAFETY: plain call; it returns a new handle or null.
    let pcap = unsafe { (lib.open_dead)(linktype, snaplen) };
    if pcap.is_null() {
        return Err("libpcap could not allocate a compiler handle (pcap_open_dead)".into());
    }
    let mut program = BpfProgram {
        bf_len: 0,
        bf_insns: std::ptr::null_mut(),
    };
    // SAFETY: `pcap` is the live handle opened above, `program` a valid
    // bpf_program to fill and `expression` NUL-terminated; all outlive the
    // call.
    let rc = unsafe { (lib.compile)(pcap, &mut program, expression.as_ptr(), 1, NETMASK_UNKNOWN) };
    let result = if rc != 0 {
        // SAFETY: after a failure pcap_geterr returns the handle's
        // NUL-terminated message buffer, valid until the handle closes; it
        // is copied before that.
        let message = unsafe { CStr::from_ptr((lib.geterr)(pcap)) };
        Err(message.to_string_lossy().into_owned())
    } else {
        let insns: &[BpfInsn] = if program.bf_insns.is_null() {
            &[]
        } else {
            // SAFETY: on success libpcap allocated `bf_len` instructions at
            // `bf_insns`; they are copied out before pcap_freecode.
            unsafe { std::slice::from_raw_parts(program.bf_insns, program.bf_len as usize) }
        };
        let copied = insns
            .iter()
            .map(|i| libc::sock_filter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect();
        // SAFETY: `program` was filled by a successful pcap_compile and is
        // freed once; no reference into it remains.
        unsafe { (lib.freecode)(&mut program) };
        Ok(copied)
    };
    // SAFETY: the handle is closed once, after its last use.
    unsafe { (lib.close)(pcap) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

    fn returns(program: &[libc::sock_filter]) -> Vec<u32> {
        program.iter().filter(|i| i.code == RET_K).map(|i| i.k).collect()
    }

    #[test]
    fn accepting_returns_are_the_snap_length_and_rejecting_ones_zero() {
        for snaplen in [96, 2048, 262_144, 1 << 20] {
            let program = compile("udp and port 53", LinkType::Ethernet, snaplen).unwrap();
            let mut rets = returns(&program);
            rets.sort_unstable();
            rets.dedup();
            assert_eq!(rets, [0, snaplen], "snaplen {snaplen}");
        }
    }

    #[test]
    fn an_empty_expression_accepts_everything() {
        let program = compile("", LinkType::Ethernet, 128).unwrap();
        assert_eq!(returns(&program), [128]);
        assert_eq!(program.len(), 1);
    }

    #[test]
    fn the_link_type_decides_where_headers_are() {
        // IPv4's protocol byte: 14 + 9 behind Ethernet, 9 in a raw IP frame.
        let loads = |link| {
            compile("ip proto 17", link, 100)
                .unwrap()
                .iter()
                .filter(|i| i.code == (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16)
                .map(|i| i.k)
                .collect::<Vec<_>>()
        };
        assert_eq!(loads(LinkType::Ethernet), [23]);
        assert!(loads(LinkType::RawIp).contains(&9));
        assert!(compile("ether host 02:00:00:00:00:01", LinkType::RawIp, 100).is_err());
    }

    #[test]
    fn user_space_filters_match_as_libpcap_compiled_them() {
        let filter = super::super::LiveConfig::compile_user_filter("udp and port 53", LinkType::Ethernet).unwrap();
        let mut frame = [0u8; 42];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[23] = 17;
        frame[36..38].copy_from_slice(&53u16.to_be_bytes());
        assert!(filter.matches(&frame, 42));
        frame[36..38].copy_from_slice(&54u16.to_be_bytes());
        assert!(!filter.matches(&frame, 42));
        // Cut before the port: libpcap's loads past the captured bytes reject.
        assert!(!filter.matches(&frame[..30], 42));
        assert!(super::super::LiveConfig::compile_user_filter("udp and prot 53", LinkType::Ethernet).is_err());
    }

    #[test]
    fn errors_are_libpcaps() {
        let e = compile("udp and prot 53", LinkType::Ethernet, 100).unwrap_err();
        assert!(e.contains("syntax error") || e.contains("prot"), "{e}");
        assert!(compile("a\0b", LinkType::Ethernet, 100).unwrap_err().contains("NUL"));
    }
}
