//! TLS over TCP and DTLS over UDP, from the record layer (RFC 8446 §5.1, RFC 5246 §6.2,
//! RFC 6347 §4.1, RFC 9147 §4): handshake records (joined across records and segments)
//! holding a ClientHello or ServerHello, checked field by field. The ClientHello gives the
//! SNI, ALPN, JA3 (Salesforce) and JA4 (FoxIO) fingerprints; the ServerHello the chosen
//! version (supported_versions, RFC 8446 §4.2.1). A TCP stream caught mid-session is
//! accepted on whole records whose lengths line up with the stream.

use std::fmt::Write as _;

use md5::Md5;
use sha2::{Digest, Sha256};

use super::{
    ByteSet, Context, Dissector, Fingerprint, FirstByte, Found, MAX_TEXT, Metadata, Packet, Prefix, Side, Text,
    Verdict, Wants, be16,
};

pub const DISSECTORS: &[Dissector] = &[
    Dissector {
        name: "TLS",
        wants: Wants::Tcp,
        first_byte: FirstByte::is(ByteSet::range(CHANGE_CIPHER_SPEC, HEARTBEAT)),
        prefix: Prefix::ANY,
        inspect: inspect_tls,
    },
    Dissector {
        name: "DTLS",
        wants: Wants::Udp,
        first_byte: FirstByte::is(ByteSet::range(CHANGE_CIPHER_SPEC, HEARTBEAT)),
        prefix: Prefix::ANY,
        inspect: inspect_dtls,
    },
];

const CHANGE_CIPHER_SPEC: u8 = 20;
const HEARTBEAT: u8 = 24;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const HELLO_VERIFY_REQUEST: u8 = 3;

/// TLSCiphertext may carry 2^14 bytes of plaintext plus 2048 of expansion.
const MAX_RECORD: usize = (1 << 14) + 2048;
/// A hello is bounded by its own fields (two 16-bit vectors and a few short ones).
const MAX_HELLO: usize = 1 << 17;
/// The chain's default stream head: a hello still cut short at this size will not grow.
const HEAD: usize = 4096;
const DOT_PORT: u16 = 853;
/// Records walked when a stream starts mid-session.
const MAX_RECORDS: usize = 8;
const DTLS_RECORD_HEADER: usize = 13;
const DTLS_HANDSHAKE_HEADER: usize = 12;

const EXT_SERVER_NAME: u16 = 0x0000;
const EXT_SUPPORTED_GROUPS: u16 = 0x000a;
const EXT_EC_POINT_FORMATS: u16 = 0x000b;
const EXT_SIGNATURE_ALGORITHMS: u16 = 0x000d;
const EXT_ALPN: u16 = 0x0010;
const EXT_SUPPORTED_VERSIONS: u16 = 0x002b;

/// Most cipher suites and extensions kept for JA4's sorted lists; a hello with more
/// gets no JA4. Real clients offer under a hundred suites and a few dozen extensions;
/// the arrays are zeroed for every ClientHello, so they are kept small.
const MAX_CIPHERS: usize = 256;
const MAX_EXTENSIONS: usize = 128;

/// How far a hello parse got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hello {
    /// Not a hello: a field is out of range or the lengths disagree.
    Bad,
    /// Consistent as far as the bytes go, but cut short.
    Short,
    /// Complete and well-formed.
    Done,
}

/// Parses a ClientHello handshake message (type, 24-bit length, body: as carried in TLS
/// records and QUIC CRYPTO frames) and fills `meta`: host, ALPN and the client's version
/// from what is there; JA3 and JA4 only from a complete message. `transport` is JA4's
/// first letter: `b't'` (TCP), `b'q'` (QUIC) or `b'd'` (DTLS, whose body has a cookie).
pub(super) fn parse_client_hello(msg: &[u8], transport: u8, meta: &mut Metadata) -> Hello {
    let (state, hello) = client_hello_message(msg, transport == b'd');
    if let Some(hello) = hello {
        record_client_hello(&hello, transport, meta);
    }
    state
}

/// Parses a ClientHello handshake message, its header included.
fn client_hello_message(msg: &[u8], dtls: bool) -> (Hello, Option<ClientHello<'_>>) {
    let Some(len) = be24(msg, 1) else {
        return match msg.first() {
            Some(&CLIENT_HELLO) | None => (Hello::Short, None),
            Some(_) => (Hello::Bad, None),
        };
    };
    if msg.first() != Some(&CLIENT_HELLO) || len > MAX_HELLO {
        return (Hello::Bad, None);
    }
    let end = 4 + len;
    client_hello_body(
        msg.get(4..end.min(msg.len())).unwrap_or_default(),
        msg.len() >= end,
        dtls,
    )
}

fn inspect_tls(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if !plausible_record_start(data) {
        return Verdict::No;
    }
    // Only a whole ClientHello of ours leaves a JA3 behind: later packets are this flow's
    // continuation, where the server's hello is all that is still of interest.
    let continuing = ctx.meta.ja3.is_some();
    let label = mail_label(pkt.server_port);
    let found = |meta: &Metadata| client_found(label, pkt.server_port, meta);
    if continuing && pkt.side == Side::Up {
        return Verdict::Yes(found(&ctx.meta).more());
    }
    if data.first() != Some(&HANDSHAKE) {
        return record_chain(data, found(&ctx.meta));
    }
    let Some(Gathered { len, cut, records }) = gather_handshake(data, None) else {
        return Verdict::No;
    };
    // Nearly always the hello is in one record, and is read where it lies:
    // a copy into a zeroed buffer of the head's size cost more than
    // parsing the hello.
    let mut hs;
    let joined = if records <= 1 {
        data.get(5..5 + len).unwrap_or_default()
    } else {
        hs = [0u8; HEAD];
        if gather_handshake(data, Some(&mut hs)).is_none() {
            return Verdict::No;
        }
        hs.get(..len).unwrap_or_default()
    };
    let msg_end = be24(joined, 1).map(|l| l + 4);
    let complete = msg_end.is_some_and(|end| end <= len);
    let hello = matches!(joined.first(), Some(&CLIENT_HELLO | &SERVER_HELLO));
    // A hello cannot grow once the next record is not a handshake record.
    if hello && !complete && !cut && len < HEAD {
        return Verdict::No;
    }
    let msg = joined.get(..msg_end.unwrap_or(len).min(len)).unwrap_or_default();
    let capped = data.len() >= HEAD;
    match msg.first() {
        Some(&CLIENT_HELLO) => match client_hello_message(msg, false) {
            (Hello::Done, Some(hello)) => {
                record_client_hello(&hello, b't', &mut ctx.meta);
                Verdict::Yes(found(&ctx.meta).more())
            }
            (Hello::Short, Some(hello)) if capped => {
                record_client_hello(&hello, b't', &mut ctx.meta);
                Verdict::Yes(found(&ctx.meta).more())
            }
            (Hello::Short, _) => Verdict::Maybe,
            // Record and handshake framing agree but a field inside does not: a mangled
            // hello is still TLS, with nothing worth recording.
            _ if complete && legacy_version_ok(msg) => Verdict::Yes(found(&ctx.meta).more()),
            _ => Verdict::No,
        },
        Some(&SERVER_HELLO) => match server_hello(msg, false) {
            (Hello::Done, Some(version)) => {
                ctx.meta.tls_version = Some(version_name(version));
                Verdict::Yes(found(&ctx.meta))
            }
            (Hello::Short, _) if continuing || capped => Verdict::Yes(found(&ctx.meta).more()),
            (Hello::Short, _) => Verdict::Maybe,
            _ if continuing || (complete && legacy_version_ok(msg)) => Verdict::Yes(found(&ctx.meta)),
            _ => Verdict::No,
        },
        // A handshake record too short to name its message yet.
        None => Verdict::Maybe,
        // Later handshake messages (or encrypted ones): a stream caught mid-session.
        Some(_) if continuing => Verdict::Yes(found(&ctx.meta)),
        Some(_) => record_chain(data, found(&ctx.meta)),
    }
}

/// The hello's own version field (after the handshake header) is 3.x.
fn legacy_version_ok(msg: &[u8]) -> bool {
    matches!(msg.get(4..6), Some(&[3, minor]) if minor <= 4)
}

/// nDPI names TLS on the implicit-TLS mail ports after the mail protocol.
fn mail_label(server_port: u16) -> &'static str {
    match server_port {
        465 | 587 => "SMTPS",
        993 => "IMAPS",
        995 => "POPS",
        _ => "TLS",
    }
}

/// The finding for a flow whose ClientHello was read: DNS over TLS (RFC 7858) is told by
/// its port or its ALPN (RFC 9461).
fn client_found(label: &'static str, server_port: u16, meta: &Metadata) -> Found {
    let dot = server_port == DOT_PORT
        || meta
            .tls_alpn
            .as_deref()
            .is_some_and(|a| a.split(',').any(|p| p == "dot"));
    if dot && label == "TLS" {
        Found::new(label).app("DoH_DoT")
    } else {
        Found::new(label)
    }
}

/// The TLS record header at the start of `data`, as far as it goes, has a known content
/// type, version 3.x (SSL 3.0 to TLS 1.3) and a length TLS allows.
fn plausible_record_start(data: &[u8]) -> bool {
    data.first()
        .is_some_and(|t| (CHANGE_CIPHER_SPEC..=HEARTBEAT).contains(t))
        && data.get(1).is_none_or(|&major| major == 3)
        && data.get(2).is_none_or(|&minor| minor <= 4)
        && be16(data, 3).is_none_or(|len| len as usize <= MAX_RECORD)
}

/// What the handshake records at the start of a stream hold.
struct Gathered {
    /// Payload bytes, at most `HEAD`.
    len: usize,
    /// The stream ended inside them, so they may grow.
    cut: bool,
    /// Records the bytes come from.
    records: usize,
}

/// Measures the payloads of the handshake records at the start of the stream and, given
/// `out`, copies them there. `None` for a malformed record header.
fn gather_handshake(data: &[u8], mut out: Option<&mut [u8; HEAD]>) -> Option<Gathered> {
    let mut at = 0;
    let mut len = 0;
    let mut records = 0;
    let gathered = |len, cut, records| Some(Gathered { len, cut, records });
    // Each round consumes a whole record of at least one byte, so this ends.
    while at < data.len() && len < HEAD {
        let Some(header) = data.get(at..at + 5) else {
            return if plausible_record_start(data.get(at..).unwrap_or_default()) {
                gathered(len, true, records)
            } else {
                None
            };
        };
        if header.first() != Some(&HANDSHAKE) {
            return gathered(len, false, records);
        }
        let record_len = be16(header, 3)? as usize;
        if !plausible_record_start(header) || record_len == 0 {
            return None;
        }
        let body_end = at + 5 + record_len;
        let body = data.get(at + 5..body_end.min(data.len())).unwrap_or_default();
        let room = (HEAD - len).min(body.len());
        if let Some(out) = out.as_deref_mut() {
            out.get_mut(len..len + room)?.copy_from_slice(body.get(..room)?);
        }
        len += room;
        records += usize::from(room > 0);
        if body_end > data.len() {
            return gathered(len, true, records);
        }
        at = body_end;
    }
    gathered(len, at >= data.len(), records)
}

/// A stream that starts on non-hello records (a capture begun mid-session): `Yes` once
/// a whole record is followed by nothing or by the consistent start of another of the
/// same version, `Maybe` while the first one is incomplete.
fn record_chain(data: &[u8], found: Found) -> Verdict {
    let mut at = 0;
    let mut version = None;
    for _ in 0..MAX_RECORDS {
        let rest = data.get(at..).unwrap_or_default();
        if rest.is_empty() {
            break;
        }
        if !plausible_record_start(rest) {
            return Verdict::No;
        }
        let (Some(v), Some(len)) = (be16(rest, 1), be16(rest, 3)) else {
            break;
        };
        if *version.get_or_insert(v) != v || len == 0 {
            return Verdict::No;
        }
        let end = 5 + len as usize;
        if end > rest.len() {
            break;
        }
        at += end;
    }
    if at > 0 { Verdict::Yes(found) } else { Verdict::Maybe }
}

fn inspect_dtls(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let continuing = ctx.meta.tls_version.is_some();
    let Some(header) = data.get(..DTLS_RECORD_HEADER) else {
        return Verdict::No;
    };
    let (Some(version), Some(len)) = (be16(header, 1), be16(header, 11)) else {
        return Verdict::No;
    };
    let kind = header.first().copied().unwrap_or_default();
    if !(CHANGE_CIPHER_SPEC..=HEARTBEAT).contains(&kind) || !is_dtls_version(version) {
        return Verdict::No;
    }
    let Some(record) = data.get(DTLS_RECORD_HEADER..DTLS_RECORD_HEADER + len as usize) else {
        return Verdict::No;
    };
    let epoch = be16(header, 3).unwrap_or_default();
    if kind != HANDSHAKE || epoch != 0 {
        return dtls_records(data, continuing);
    }
    let (Some(&msg_type), Some(msg_len), Some(frag_off), Some(frag_len)) =
        (record.first(), be24(record, 1), be24(record, 6), be24(record, 9))
    else {
        return Verdict::No;
    };
    let Some(fragment) = record.get(DTLS_HANDSHAKE_HEADER..DTLS_HANDSHAKE_HEADER + frag_len) else {
        return Verdict::No;
    };
    if frag_off + frag_len > msg_len {
        return Verdict::No;
    }
    let whole = frag_off == 0 && frag_len == msg_len;
    match msg_type {
        CLIENT_HELLO if continuing => Verdict::Yes(Found::new("DTLS").more()),
        CLIENT_HELLO if frag_off > 0 => Verdict::Yes(Found::new("DTLS").more()),
        CLIENT_HELLO => match client_hello_body(fragment, whole, true) {
            (_, Some(hello)) => {
                record_client_hello(&hello, b'd', &mut ctx.meta);
                Verdict::Yes(Found::new("DTLS").more())
            }
            (Hello::Short, None) => Verdict::Yes(Found::new("DTLS").more()),
            _ => Verdict::No,
        },
        SERVER_HELLO if frag_off > 0 => Verdict::Yes(Found::new("DTLS").more()),
        SERVER_HELLO => match server_hello_body(fragment, whole, true) {
            (Hello::Done, Some(version)) => {
                ctx.meta.tls_version = Some(version_name(version));
                Verdict::Yes(Found::new("DTLS"))
            }
            (Hello::Short, _) => Verdict::Yes(Found::new("DTLS").more()),
            _ => Verdict::No,
        },
        HELLO_VERIFY_REQUEST => {
            let cookie_fits = be16(fragment, 0).is_some_and(is_dtls_version)
                && fragment.get(2).is_some_and(|&n| n as usize + 3 == fragment.len());
            if whole && cookie_fits {
                Verdict::Yes(Found::new("DTLS").more())
            } else {
                Verdict::No
            }
        }
        // Certificate, key exchange, ...: a flight whose hello was not captured.
        4 | 11..=16 | 21 | 22 => Verdict::Yes(Found::new("DTLS")),
        _ => Verdict::No,
    }
}

/// 0x0100 is the pre-RFC DTLS 1.0 that Cisco AnyConnect still speaks.
fn is_dtls_version(version: u16) -> bool {
    matches!(version, 0xfeff | 0xfefd | 0xfefc | 0x0100)
}

/// A datagram of records past the handshake: every record header well-formed, the
/// records filling the datagram exactly, and application data in an epoch past 0.
fn dtls_records(data: &[u8], continuing: bool) -> Verdict {
    let mut at = 0;
    for _ in 0..MAX_RECORDS {
        let Some(header) = data.get(at..at + DTLS_RECORD_HEADER) else {
            break;
        };
        let kind = header.first().copied().unwrap_or_default();
        let version = be16(header, 1).unwrap_or_default();
        let epoch = be16(header, 3).unwrap_or_default();
        let len = be16(header, 11).unwrap_or_default() as usize;
        // Sequence numbers start at 0 per epoch: the top 16 of their 48 bits stay clear.
        let seq_high = be16(header, 5).unwrap_or_default();
        if !(CHANGE_CIPHER_SPEC..=HEARTBEAT).contains(&kind) || !is_dtls_version(version) || seq_high != 0 {
            return Verdict::No;
        }
        if kind == APPLICATION_DATA && epoch == 0 {
            return Verdict::No;
        }
        at += DTLS_RECORD_HEADER + len;
    }
    if at != data.len() {
        return Verdict::No;
    }
    if continuing {
        Verdict::Yes(Found::new("DTLS"))
    } else {
        Verdict::Maybe
    }
}

/// A big-endian 24-bit length at `at`, as a length.
fn be24(data: &[u8], at: usize) -> Option<usize> {
    super::be24(data, at).map(|n| n as usize)
}

/// A cursor over hello fields. Running out of bytes is `Short` while the message may
/// still be cut, `Bad` once it is known complete.
struct Reader<'a> {
    data: &'a [u8],
    complete: bool,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8], complete: bool) -> Self {
        Reader { data, complete }
    }

    fn out(&self) -> Hello {
        if self.complete { Hello::Bad } else { Hello::Short }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Hello> {
        if n > self.data.len() {
            return Err(self.out());
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Hello> {
        Ok(self.take(1)?.first().copied().unwrap_or_default())
    }

    fn u16(&mut self) -> Result<u16, Hello> {
        let b = self.take(2)?;
        Ok(be16(b, 0).unwrap_or_default())
    }

    fn vec8(&mut self) -> Result<&'a [u8], Hello> {
        let n = self.u8()?;
        self.take(n as usize)
    }

    fn vec16(&mut self) -> Result<&'a [u8], Hello> {
        let n = self.u16()?;
        self.take(n as usize)
    }

    /// A 16-bit-length vector that may be cut short: the bytes present and whether all are.
    fn vec16_partial(&mut self) -> Result<(&'a [u8], bool), Hello> {
        let n = self.u16()? as usize;
        if n <= self.data.len() {
            return Ok((self.take(n)?, true));
        }
        if self.complete {
            return Err(Hello::Bad);
        }
        Ok((self.take(self.data.len())?, false))
    }
}

/// What a ClientHello's extensions said, as slices of the message.
#[derive(Default)]
struct Extensions<'a> {
    sni: bool,
    host: Option<&'a [u8]>,
    /// The protocol name list of the ALPN extension, and its first entry.
    alpn: Option<(&'a [u8], &'a [u8])>,
    groups: &'a [u8],
    point_formats: &'a [u8],
    signature_algorithms: &'a [u8],
    best_version: Option<u16>,
}

/// The parts of a ClientHello the metadata is made of.
struct ClientHello<'a> {
    legacy: u16,
    ciphers: &'a [u8],
    extensions: &'a [u8],
    ext: Extensions<'a>,
    /// The extensions block is all there (the message was not cut short).
    whole: bool,
}

impl ClientHello<'_> {
    /// supported_versions' newest entry, else the legacy field.
    fn version(&self) -> u16 {
        self.ext.best_version.unwrap_or(self.legacy)
    }
}

/// Parses a ClientHello body; `Short` with a hello when only the extensions were cut.
fn client_hello_body(body: &[u8], complete: bool, dtls: bool) -> (Hello, Option<ClientHello<'_>>) {
    let mut r = Reader::new(body, complete);
    match read_client_hello(&mut r, dtls) {
        Ok(hello) if hello.whole => (Hello::Done, Some(hello)),
        Ok(hello) => (Hello::Short, Some(hello)),
        Err(e) => (e, None),
    }
}

fn read_client_hello<'a>(r: &mut Reader<'a>, dtls: bool) -> Result<ClientHello<'a>, Hello> {
    let legacy = r.u16()?;
    let major_ok = if dtls {
        is_dtls_version(legacy)
    } else {
        legacy >> 8 == 3
    };
    if !major_ok {
        return Err(Hello::Bad);
    }
    r.take(32)?;
    if r.vec8()?.len() > 32 {
        return Err(Hello::Bad);
    }
    if dtls {
        r.vec8()?;
    }
    let ciphers = r.vec16()?;
    if ciphers.len() < 2 || ciphers.len() % 2 != 0 {
        return Err(Hello::Bad);
    }
    if r.vec8()?.is_empty() {
        return Err(Hello::Bad);
    }
    // SSL 3.0-era hellos may end here, without an extensions block.
    let (extensions, whole) = if r.data.is_empty() && r.complete {
        (&[][..], true)
    } else {
        r.vec16_partial()?
    };
    if whole && r.complete && !r.data.is_empty() {
        return Err(Hello::Bad);
    }
    let ext = walk_extensions(extensions, whole)?;
    Ok(ClientHello {
        legacy,
        ciphers,
        extensions,
        ext,
        whole,
    })
}

/// Stores what a hello says: host, ALPN and version as far as they were read, the
/// fingerprints only from a whole hello.
fn record_client_hello(hello: &ClientHello, transport: u8, meta: &mut Metadata) {
    if let Some(host) = hello.ext.host {
        Metadata::set_once(&mut meta.host, host);
    }
    if let Some((list, _)) = hello.ext.alpn {
        store_alpn(list, meta);
    }
    if meta.tls_version.is_none() {
        meta.tls_version = Some(version_name(hello.version()));
    }
    if !hello.whole {
        return;
    }
    if meta.ja3.is_none() || meta.ja4.is_none() {
        let (ja3, ja4) = fingerprints(transport, hello);
        if meta.ja3.is_none() {
            meta.ja3 = ja3;
        }
        if meta.ja4.is_none() {
            meta.ja4 = ja4;
        }
    }
}

/// Walks the extensions of a block that is `whole` or cut short at its end; a malformed
/// extension inside a whole block makes the hello `Bad`.
fn walk_extensions(block: &[u8], whole: bool) -> Result<Extensions<'_>, Hello> {
    let mut r = Reader::new(block, whole);
    let mut ext = Extensions::default();
    // Each round consumes at least four bytes.
    while !r.data.is_empty() {
        let kind = r.u16();
        let data = r.vec16();
        let (kind, data) = match (kind, data) {
            (Ok(kind), Ok(data)) => (kind, data),
            (Err(Hello::Bad), _) | (_, Err(Hello::Bad)) => return Err(Hello::Bad),
            _ => break,
        };
        match kind {
            EXT_SERVER_NAME => {
                ext.sni = true;
                ext.host = server_name(data);
            }
            EXT_ALPN => ext.alpn = list16(data).and_then(|list| Some((list, first_alpn(list)?))),
            EXT_SUPPORTED_GROUPS => ext.groups = list16(data).unwrap_or_default(),
            EXT_EC_POINT_FORMATS => {
                ext.point_formats = data.split_first().map(|(_, l)| l).unwrap_or_default();
            }
            EXT_SIGNATURE_ALGORITHMS => ext.signature_algorithms = list16(data).unwrap_or_default(),
            EXT_SUPPORTED_VERSIONS => ext.best_version = best_version(data.get(1..).unwrap_or_default()),
            _ => {}
        }
    }
    Ok(ext)
}

/// The body of a vector with a 16-bit length that fills `data` exactly.
fn list16(data: &[u8]) -> Option<&[u8]> {
    let n = be16(data, 0)? as usize;
    let list = data.get(2..)?;
    (list.len() == n).then_some(list)
}

/// The first host_name in a server_name extension (RFC 6066 §3).
fn server_name(data: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(list16(data)?, true);
    while !r.data.is_empty() {
        let kind = r.u8().ok()?;
        let name = r.vec16().ok()?;
        if kind == 0 && !name.is_empty() {
            return Some(name);
        }
    }
    None
}

/// The first entry of a well-formed protocol name list (RFC 7301 §3.1).
fn first_alpn(list: &[u8]) -> Option<&[u8]> {
    let mut r = Reader::new(list, true);
    let mut first = None;
    while !r.data.is_empty() {
        let proto = r.vec8().ok()?;
        if proto.is_empty() {
            return None;
        }
        first.get_or_insert(proto);
    }
    first
}

/// Stores the offered protocols comma-separated.
fn store_alpn(list: &[u8], meta: &mut Metadata) {
    let mut r = Reader::new(list, true);
    let mut text = [0u8; MAX_TEXT];
    let mut len = 0;
    while let Ok(proto) = r.vec8() {
        let sep = usize::from(len > 0);
        let room = MAX_TEXT.saturating_sub(len + sep).min(proto.len());
        if room == 0 {
            break;
        }
        if let (Some(dst), Some(src)) = (text.get_mut(len..len + sep + room), proto.get(..room)) {
            if let Some((comma, rest)) = dst.split_first_mut().filter(|_| sep == 1) {
                *comma = b',';
                rest.copy_from_slice(src);
            } else {
                dst.copy_from_slice(src);
            }
        }
        len += sep + room;
    }
    Metadata::set_once(&mut meta.tls_alpn, text.get(..len).unwrap_or_default());
}

/// GREASE values (RFC 8701) are 0x?a?a with both bytes equal.
fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

fn u16s(data: &[u8]) -> impl Iterator<Item = u16> + '_ {
    data.chunks_exact(2)
        .filter_map(|c| c.try_into().ok())
        .map(u16::from_be_bytes)
}

/// Orders versions by age, DTLS numbers counting down, so "highest" means newest.
fn version_rank(v: u16) -> u16 {
    match v {
        0xfeff | 0x0100 => 0x0302,
        0xfefd => 0x0303,
        0xfefc => 0x0304,
        _ => v,
    }
}

fn best_version(list: &[u8]) -> Option<u16> {
    u16s(list).filter(|&v| !is_grease(v)).max_by_key(|&v| version_rank(v))
}

fn version_name(v: u16) -> Text {
    let name = match v {
        0x0300 => "SSLv3",
        0x0301 => "TLSv1",
        0x0302 => "TLSv1.1",
        0x0303 => "TLSv1.2",
        0x0304 => "TLSv1.3",
        0xfeff | 0x0100 => "DTLSv1.0",
        0xfefd => "DTLSv1.2",
        0xfefc => "DTLSv1.3",
        // Drafts of TLS 1.3, still offered by early QUIC stacks.
        0x7f00..=0x7fff => "TLSv1.3",
        _ => return compact_str::format_compact!("0x{v:04x}"),
    };
    Text::const_new(name)
}

/// The text a fingerprint hashes is built in one buffer and hashed once:
/// feeding a digest a few bytes at a time through `fmt` cost more than the
/// rest of the ClientHello's parsing.
fn push_decimal(text: &mut Vec<u8>, v: u16) {
    let mut digits = [0u8; 5];
    let mut at = digits.len();
    let mut v = v;
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    text.extend_from_slice(&digits[at..]);
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex4(text: &mut Vec<u8>, v: u16) {
    text.extend_from_slice(&[
        HEX[usize::from(v >> 12)],
        HEX[usize::from(v >> 8 & 0xf)],
        HEX[usize::from(v >> 4 & 0xf)],
        HEX[usize::from(v & 0xf)],
    ]);
}

/// Writes `values` in decimal, dash-separated.
fn dashed(text: &mut Vec<u8>, values: impl Iterator<Item = u16>) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            text.push(b'-');
        }
        push_decimal(text, v);
    }
}

fn extension_types(block: &[u8]) -> impl Iterator<Item = u16> + '_ {
    let mut r = Reader::new(block, true);
    std::iter::from_fn(move || {
        let kind = r.u16().ok()?;
        r.vec16().ok()?;
        Some(kind)
    })
}

/// MD5 of `version,ciphers,extensions,groups,point formats`, GREASE left out.
fn ja3(hello: &ClientHello) -> String {
    let mut out = String::with_capacity(32);
    push_hex(&mut out, &Md5::digest(ja3_text(hello)));
    out
}

/// JA3 and JA4 of the hellos a worker saw lately, by everything they are
/// computed from: a direct-mapped table per thread (so per worker), each
/// entry checked against its whole key. Fingerprints repeat, since every
/// connection a client build opens sends the same lists, and building the
/// texts (decimal for JA3, sorted hex for JA4) and hashing them (MD5, and
/// SHA-256 twice) took more of the classifier chain than the rest of a
/// ClientHello's parsing. The key leaves out what changes from one
/// connection to the next (random, session id, server name, GREASE), so
/// looking a hello up costs a pass over its lists and one FxHash.
struct HelloMemo {
    /// Scratch for the key of the hello being looked up.
    key: Vec<u8>,
    slots: Vec<Option<RememberedHello>>,
}

struct RememberedHello {
    key: Vec<u8>,
    ja3: Option<Fingerprint>,
    ja4: Option<Fingerprint>,
}

const HELLO_SLOTS: usize = 256;
/// Hellos with longer keys (hundreds of ciphers) are fingerprinted every
/// time: the table holds at most 256 x 1 KiB of keys per worker.
const MAX_HELLO_KEY: usize = 1024;

thread_local! {
    static HELLOS: std::cell::RefCell<HelloMemo> = const {
        std::cell::RefCell::new(HelloMemo { key: Vec::new(), slots: Vec::new() })
    };
}

/// JA3 and JA4 of `hello`, computed or remembered.
fn fingerprints(transport: u8, hello: &ClientHello) -> (Option<Fingerprint>, Option<Fingerprint>) {
    let compute = || {
        (
            Fingerprint::new(&ja3(hello)),
            ja4(transport, hello).and_then(|ja4| Fingerprint::new(&ja4)),
        )
    };
    HELLOS.with_borrow_mut(|memo| {
        let HelloMemo { key, slots } = memo;
        fingerprint_key(transport, hello, key);
        if key.len() > MAX_HELLO_KEY {
            return compute();
        }
        let mut hasher = rustc_hash::FxHasher::default();
        std::hash::Hasher::write(&mut hasher, key);
        let slot = std::hash::Hasher::finish(&hasher) as usize % HELLO_SLOTS;
        if slots.is_empty() {
            slots.resize_with(HELLO_SLOTS, || None);
        }
        match &mut slots[slot] {
            Some(known) if known.key == *key => (known.ja3, known.ja4),
            entry => {
                let (ja3, ja4) = compute();
                match entry {
                    Some(old) => {
                        old.key.clone_from(key);
                        (old.ja3, old.ja4) = (ja3, ja4);
                    }
                    None => {
                        *entry = Some(RememberedHello {
                            key: key.clone(),
                            ja3,
                            ja4,
                        })
                    }
                }
                (ja3, ja4)
            }
        }
    })
}

/// Everything JA3 and JA4 are computed from, into `key`: the transport,
/// the versions, whether a server name was sent, the first ALPN value's
/// ends, and the lists (GREASE left out), each after its length, so that
/// two hellos with the same key have the same fingerprints.
fn fingerprint_key(transport: u8, hello: &ClientHello, key: &mut Vec<u8>) {
    let ext = &hello.ext;
    let alpn = ext.alpn.and_then(|(_, first)| first.first().zip(first.last()));
    key.clear();
    key.extend_from_slice(&[transport, u8::from(ext.sni), u8::from(alpn.is_some())]);
    key.extend_from_slice(&alpn.map_or([0, 0], |(&a, &z)| [a, z]));
    key.extend_from_slice(&hello.legacy.to_be_bytes());
    key.extend_from_slice(&hello.version().to_be_bytes());
    let mut list = |values: &mut dyn Iterator<Item = u16>| {
        let at = key.len();
        key.extend_from_slice(&[0; 4]);
        let mut n = 0u32;
        for v in values.filter(|&v| !is_grease(v)) {
            key.extend_from_slice(&v.to_be_bytes());
            n += 1;
        }
        key[at..at + 4].copy_from_slice(&n.to_be_bytes());
    };
    list(&mut u16s(hello.ciphers));
    list(&mut extension_types(hello.extensions));
    list(&mut u16s(ext.groups));
    list(&mut ext.point_formats.iter().map(|&p| u16::from(p)));
    list(&mut u16s(ext.signature_algorithms));
}

fn ja3_text(hello: &ClientHello) -> Vec<u8> {
    let mut text = Vec::with_capacity(512);
    push_decimal(&mut text, hello.legacy);
    text.push(b',');
    dashed(&mut text, u16s(hello.ciphers).filter(|&v| !is_grease(v)));
    text.push(b',');
    dashed(&mut text, extension_types(hello.extensions).filter(|&v| !is_grease(v)));
    text.push(b',');
    dashed(&mut text, u16s(hello.ext.groups).filter(|&v| !is_grease(v)));
    text.push(b',');
    dashed(&mut text, hello.ext.point_formats.iter().map(|&p| u16::from(p)));
    text
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    for &b in bytes {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
}

fn ja4_version(v: u16) -> &'static str {
    match v {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0200 => "s2",
        0x0100 => "s1",
        0xfeff => "d1",
        0xfefd => "d2",
        0xfefc => "d3",
        _ => "00",
    }
}

/// First and last characters of the first ALPN value, or of its hex form when either
/// end is not an ASCII letter or digit.
fn ja4_alpn(first: Option<&[u8]>) -> [char; 2] {
    let nibble = |n: u8| char::from_digit(u32::from(n), 16).unwrap_or('0');
    match first.and_then(|p| p.first().zip(p.last())) {
        None => ['0', '0'],
        Some((&a, &z)) if a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric() => [a as char, z as char],
        Some((&a, &z)) => [nibble(a >> 4), nibble(z & 0x0f)],
    }
}

/// Appends the first 12 hex digits of the SHA-256 of the values in 4-digit hex,
/// comma-separated, then (when given) `_` and the signature algorithms in their order.
fn ja4_hash(out: &mut String, values: &[u16], tail: &[u16]) {
    if values.is_empty() {
        out.push_str("000000000000");
        return;
    }
    let mut text = Vec::with_capacity(5 * (values.len() + tail.len()));
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        push_hex4(&mut text, v);
    }
    for (i, &v) in tail.iter().enumerate() {
        text.push(if i > 0 { b',' } else { b'_' });
        push_hex4(&mut text, v);
    }
    push_hex(out, &Sha256::digest(&text)[..6]);
}

fn ja4(transport: u8, hello: &ClientHello) -> Option<String> {
    let ext = &hello.ext;
    let mut suites = [0u16; MAX_CIPHERS];
    let n_suites = fill(&mut suites, u16s(hello.ciphers).filter(|&v| !is_grease(v)))?;
    let mut types = [0u16; MAX_EXTENSIONS];
    let n_types = fill(&mut types, extension_types(hello.extensions).filter(|&v| !is_grease(v)))?;
    let mut sigs = [0u16; MAX_EXTENSIONS];
    let n_sigs = fill(&mut sigs, u16s(ext.signature_algorithms).filter(|&v| !is_grease(v)))?;
    let suites = suites.get_mut(..n_suites)?;
    suites.sort_unstable();
    let mut hashed = [0u16; MAX_EXTENSIONS];
    let n_hashed = fill(
        &mut hashed,
        types
            .get(..n_types)?
            .iter()
            .copied()
            .filter(|&t| t != EXT_SERVER_NAME && t != EXT_ALPN),
    )?;
    let hashed = hashed.get_mut(..n_hashed)?;
    hashed.sort_unstable();
    let [a, z] = ja4_alpn(ext.alpn.map(|(_, first)| first));
    // Over DTLS, 0x0100 is OpenSSL's pre-standard DTLS 1.0, not SSL 1.0.
    let version = match (transport, hello.version()) {
        (b'd', 0x0100) => 0xfeff,
        (_, v) => v,
    };
    let mut out = String::with_capacity(36);
    let _ = write!(
        out,
        "{}{}{}{:02}{:02}{a}{z}_",
        transport as char,
        ja4_version(version),
        if ext.sni { 'd' } else { 'i' },
        n_suites.min(99),
        n_types.min(99),
    );
    ja4_hash(&mut out, suites, &[]);
    out.push('_');
    ja4_hash(&mut out, hashed, sigs.get(..n_sigs)?);
    Some(out)
}

/// Copies `values` into `out`; `None` if they do not fit.
fn fill(out: &mut [u16], values: impl Iterator<Item = u16>) -> Option<usize> {
    let mut n = 0;
    for v in values {
        *out.get_mut(n)? = v;
        n += 1;
    }
    Some(n)
}

/// Parses a ServerHello handshake message; returns how far it got and, when complete,
/// the version the server chose.
fn server_hello(msg: &[u8], dtls: bool) -> (Hello, Option<u16>) {
    let Some(len) = be24(msg, 1) else {
        return (Hello::Short, None);
    };
    if msg.first() != Some(&SERVER_HELLO) || len > MAX_HELLO {
        return (Hello::Bad, None);
    }
    let end = 4 + len;
    server_hello_body(
        msg.get(4..end.min(msg.len())).unwrap_or_default(),
        msg.len() >= end,
        dtls,
    )
}

fn server_hello_body(body: &[u8], complete: bool, dtls: bool) -> (Hello, Option<u16>) {
    let mut r = Reader::new(body, complete);
    match read_server_hello(&mut r, dtls) {
        Ok(version) => (Hello::Done, Some(version)),
        Err(e) => (e, None),
    }
}

fn read_server_hello(r: &mut Reader, dtls: bool) -> Result<u16, Hello> {
    let legacy = r.u16()?;
    let major_ok = if dtls {
        is_dtls_version(legacy)
    } else {
        legacy >> 8 == 3
    };
    if !major_ok {
        return Err(Hello::Bad);
    }
    r.take(32)?;
    if r.vec8()?.len() > 32 {
        return Err(Hello::Bad);
    }
    r.u16()?;
    r.u8()?;
    if r.data.is_empty() {
        return if r.complete { Ok(legacy) } else { Err(Hello::Short) };
    }
    let block = r.vec16()?;
    if !r.data.is_empty() {
        return Err(Hello::Bad);
    }
    let mut exts = Reader::new(block, true);
    let mut version = legacy;
    while !exts.data.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind == EXT_SUPPORTED_VERSIONS {
            version = be16(data, 0).filter(|_| data.len() == 2).ok_or(Hello::Bad)?;
        }
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::super::hex;
    use super::super::{TestContext, Transport, test_packet};
    use super::*;

    /// A ClientHello with GREASE (wechat.pcap, Chrome to safebrowsing.googleusercontent.com).
    const GREASE_HELLO: &str = "16030100d9010000d5030346c1e0fd35428be4055363260ffa6bbafb26797953f1808f83a58ef31788b5\
        230000204a4acca9cca8cc14cc13c02bc02fc02cc030c013c014009c009d002f0035000a0100008ceaea0000ff01000100000000270025\
        0000227361666562726f7773696e672e676f6f676c6575736572636f6e74656e742e636f6d0017000000230000000d0014001204030804\
        0401050308050501080606010201000500050100000000001200000010000e000c02683208687474702f312e31000b00020100000a000a\
        0008caca001d00170018fafa000100";
    /// A TLS 1.2 ClientHello without ALPN (webex.pcap).
    const WEBEX_HELLO: &str = "16030100be010000ba0303561a660079c2845c704a77d44708ca84efd4ad840d0eb63272b15580fa78ee2400\
        0038cc14cc13cc15c014c00a003900380035c012c00800160013000ac02fc02bc013c00900a2009e00330032009c002fc011c007000500\
        0400ff01000059000000150013000010726164636f6d2e77656265782e636f6d000b00020100000a000800060019001800170023000000\
        0d00220020060106020603050105020503040104020403030103020303020102020203010133740000";
    /// webex.pcap's ServerHello (TLS 1.2, no supported_versions), its record cut to the hello.
    const WEBEX_SERVER_HELLO: &str = "16030300510200004d0303561a6606ad79442fc29c99124299e6f9bed29e6f30751530a1fdcb062e\
        944eb120a2120ad9be91e3cc960d22a073f065796799c4881dbff658b5e9240acf5353480004000005ff01000100";
    /// A TLS 1.3 ServerHello (tls_1.3_unidirectional_server.pcapng): supported_versions 0x0304.
    const TLS13_SERVER_HELLO: &str = "16030300800200007c0303c57417b3a7267c19e1431447bf571918fc463e2a2992c63d2241054efb\
        49195020691ce20136f8bc28a70a33e7ef38c01b821e4bab3b8775d4691789deb9ca7814130100003400290002000000330024001d0020\
        cc4c7a4927e6c3b46de7f9db39ddab59adb5e876213215a1c41bf035b2acca4e002b00020304";
    /// The ClientHello of RFC 9001 Appendix A.2 (TLS 1.3, SNI example.com, ALPN "alpn").
    const RFC9001_HELLO: &str = "010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c0000041301\
        1302010000c000000010000e00000b6578616d706c652e636f6dff01000100000a00080006001d00170018001000070005046\
        16c706e000500050100000000003300260024001d00209370b2c9caa47fbabaf4559fedba753de171fa71f50f1ce15d43e994ec\
        74d748002b0003020304000d0010000e0403050306030203080408050806002d00020101001c00024001003900320408fffffff\
        fffffffff05048000ffff07048000ffff0801100104800075300901100f088394c8f03e51570806048000ffff";
    /// dtls_session_id_and_coockie_both.pcap: ClientHello, HelloVerifyRequest, ServerHello
    /// flight (ServerHello, ChangeCipherSpec, encrypted Finished).
    const DTLS_HELLO: &str = "16fefd000000000000000000560100004a000000000000004afefd3fc15b397b7c6648012efa02ef69e2fac7\
        4534c631c046fe86fb3fb2ff4bd41d203832002f8393c761e3b64aae0df27f5c9b5716b19e1f7e852712a5a45e6d493e000002c02c0100";
    const DTLS_VERIFY: &str = "16feff00000000000000000023030000170000000000000017feff141c0efc217010049e0680531d364ee05e\
        aa42a69e";
    const DTLS_SERVER_FLIGHT: &str = "16fefd00000000000000010052020000460001000000000046fefd87d32576f1aa0f82fb79365ad8\
        d1e1450175be58a4dd65721328f1a5462d10d7203832002f8393c761e3b64aae0df27f5c9b5716b19e1f7e852712a5a45e6d493ec02c00\
        14fefd000000000000000200010116fefd00010000000000000030618aa4f2e94ab0ce109808fb65e5aa146820da2ba7840cb58a603f4f\
        42eccfddf52b338f1ccd0ac65f5826b9bc05c7ae";

    /// Wraps a handshake message into one TLS record.
    fn record(version: u16, body: &[u8]) -> Vec<u8> {
        let mut r = vec![HANDSHAKE];
        r.extend_from_slice(&version.to_be_bytes());
        r.extend_from_slice(&(body.len() as u16).to_be_bytes());
        r.extend_from_slice(body);
        r
    }

    fn tls(side: Side, server_port: u16, data: &[u8], t: &mut TestContext) -> Verdict {
        let pkt = test_packet(Transport::Tcp, side, 50000, server_port, data);
        inspect_tls(&pkt, &mut t.ctx())
    }

    fn dtls(side: Side, data: &[u8], t: &mut TestContext) -> Verdict {
        let pkt = test_packet(Transport::Udp, side, 50000, 4433, data);
        inspect_dtls(&pkt, &mut t.ctx())
    }

    fn yes(master: &'static str) -> Verdict {
        Verdict::Yes(Found::new(master))
    }

    fn yes_more(master: &'static str) -> Verdict {
        Verdict::Yes(Found::new(master).more())
    }

    #[test]
    fn client_hello_with_grease_gives_host_alpn_and_fingerprints() {
        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 443, &hex(GREASE_HELLO), &mut t), yes_more("TLS"));
        assert_eq!(t.meta.host.as_deref(), Some("safebrowsing.googleusercontent.com"));
        assert_eq!(t.meta.tls_alpn.as_deref(), Some("h2,http/1.1"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("TLSv1.2"));
        // Both checked against tshark's JA3 and an independent JA4 computation.
        assert_eq!(t.meta.ja3.as_deref(), Some("d551fafc4f40f1dec2bb45980bfa9492"));
        assert_eq!(t.meta.ja4.as_deref(), Some("t12d1510h2_f0daf39aad75_e69ac49eb88f"));
    }

    #[test]
    fn hello_without_alpn() {
        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 443, &hex(WEBEX_HELLO), &mut t), yes_more("TLS"));
        assert_eq!(t.meta.host.as_deref(), Some("radcom.webex.com"));
        assert_eq!(t.meta.tls_alpn, None);
        assert_eq!(t.meta.ja3.as_deref(), Some("f9010d8c34749bdf7659b52227e6f91b"));
        assert_eq!(t.meta.ja4.as_deref(), Some("t12d280600_519b4837d290_570a46b37db9"));
    }

    #[test]
    fn server_hello_sets_the_chosen_version() {
        let mut t = TestContext::new();
        let hello = record(0x0301, &hex(RFC9001_HELLO));
        assert_eq!(tls(Side::Up, 443, &hello, &mut t), yes_more("TLS"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("TLSv1.3"));
        assert_eq!(t.meta.ja4.as_deref(), Some("t13d0211an_62ed6f6ca7ad_4d634acda6c0"));
        // The client's later segments keep the flow open for the server's reply.
        assert_eq!(tls(Side::Up, 443, &hello, &mut t), yes_more("TLS"));
        // A server that settles on TLS 1.2 (no supported_versions) overrides the offer.
        let reply = hex(WEBEX_SERVER_HELLO);
        assert_eq!(tls(Side::Down, 443, &reply[..40], &mut t), yes_more("TLS"));
        assert_eq!(tls(Side::Down, 443, &reply, &mut t), yes("TLS"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("TLSv1.2"));

        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 443, &hex(WEBEX_HELLO), &mut t), yes_more("TLS"));
        assert_eq!(tls(Side::Down, 443, &hex(TLS13_SERVER_HELLO), &mut t), yes("TLS"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("TLSv1.3"));
    }

    #[test]
    fn server_hello_alone_is_tls() {
        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 443, &hex(TLS13_SERVER_HELLO), &mut t), yes("TLS"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("TLSv1.3"));
        assert_eq!(t.meta.ja3, None);
    }

    #[test]
    fn hello_spanning_records_and_segments() {
        let whole = hex(WEBEX_HELLO);
        let msg = &whole[5..];
        let mut stream = record(0x0301, &msg[..100]);
        stream.extend(record(0x0301, &msg[100..]));
        let mut t = TestContext::new();
        for cut in [1, 4, 5, 60, 105, 110, stream.len() - 1] {
            assert_eq!(
                tls(Side::Up, 443, &stream[..cut], &mut t),
                Verdict::Maybe,
                "cut at {cut}"
            );
        }
        assert_eq!(t.meta.host, None);
        assert_eq!(tls(Side::Up, 443, &stream, &mut t), yes_more("TLS"));
        assert_eq!(t.meta.host.as_deref(), Some("radcom.webex.com"));
        assert_eq!(t.meta.ja3.as_deref(), Some("f9010d8c34749bdf7659b52227e6f91b"));
    }

    #[test]
    fn hello_cut_at_the_stream_head_cap_still_names_the_host() {
        // SNI first, then a padding extension that pushes the hello past the head.
        let mut exts = hex("00000010000e00000b6578616d706c652e6f7267");
        exts.extend_from_slice(&[0x00, 0x15, 0x13, 0x88]);
        exts.extend(std::iter::repeat_n(0u8, 5000));
        let mut body = hex("0303");
        body.extend([7u8; 32]);
        body.extend(hex("00 0002 1301 0100"));
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend(exts);
        let mut msg = vec![CLIENT_HELLO, 0];
        msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
        msg.extend(body);
        let stream = record(0x0301, &msg);
        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 443, &stream[..2000], &mut t), Verdict::Maybe);
        assert_eq!(tls(Side::Up, 443, &stream[..HEAD], &mut t), yes_more("TLS"));
        assert_eq!(t.meta.host.as_deref(), Some("example.org"));
        assert_eq!(t.meta.ja3, None);
    }

    #[test]
    fn mid_session_records() {
        let mut app = hex("170303009a");
        app.extend([0x5a; 154]);
        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 443, &app[..5], &mut t), Verdict::Maybe);
        assert_eq!(tls(Side::Up, 443, &app[..100], &mut t), Verdict::Maybe);
        assert_eq!(tls(Side::Up, 443, &app, &mut t), yes("TLS"));
        let mut two = app.clone();
        two.extend(hex("1703"));
        assert_eq!(tls(Side::Up, 443, &two, &mut t), yes("TLS"));
        // The next record must keep the version and a sane header.
        let mut mixed = app.clone();
        mixed.extend(hex("1703010010"));
        assert_eq!(tls(Side::Up, 443, &mixed, &mut t), Verdict::No);
        let mut junk = app;
        junk.extend(b"GET /");
        assert_eq!(tls(Side::Up, 443, &junk, &mut t), Verdict::No);
        assert_eq!(t.meta, Metadata::default());
    }

    #[test]
    fn other_protocols_are_not_tls() {
        let mut t = TestContext::new();
        for data in [
            &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"SSH-2.0-OpenSSH_9.6\r\n",
            &hex("0000001f0000000000000000"),
            &hex("160309"),
            &hex("16040100"),
            &hex("1603014801"),
            &hex("1603010000"),
            &hex("8a2c5e0f44d1a3b9"),
            // An SSLv2-framed hello is left to the port table.
            &hex("807c01030100630000001000003900003800003500001600001300000a0700c0"),
        ] {
            assert_eq!(tls(Side::Up, 443, data, &mut t), Verdict::No, "{data:02x?}");
        }
        for data in [&hex("16")[..], &hex("1603"), &hex("160301"), &hex("1603010200")] {
            assert_eq!(tls(Side::Up, 443, data, &mut t), Verdict::Maybe, "{data:02x?}");
        }
        assert_eq!(t.meta, Metadata::default());
    }

    #[test]
    fn hostile_hellos() {
        let mut t = TestContext::new();
        // The handshake claims more than the record holds and the next record is not
        // a handshake one.
        let mut short = record(0x0301, &hex("010000ff0303"));
        short.extend(hex("170303000100"));
        assert_eq!(tls(Side::Up, 443, &short, &mut t), Verdict::No);
        // An absurd handshake length.
        assert_eq!(
            tls(Side::Up, 443, &record(0x0301, &hex("01ffffff0303")), &mut t),
            Verdict::No
        );
        // Cipher suite length pointing past the end of a hello whose framing is sound
        // (tls_cipher_lens.pcap): still TLS, nothing recorded.
        let mut mangled = hex(WEBEX_HELLO);
        mangled[5 + 4 + 2 + 32 + 1] = 0xff;
        assert_eq!(tls(Side::Up, 443, &mangled, &mut t), yes_more("TLS"));
        assert_eq!(t.meta, Metadata::default());
        // An SNI list length past the extension's end: the hello is read, the name is not.
        let mut bad_sni = hex(WEBEX_HELLO);
        let at = bad_sni.windows(4).position(|w| w == [0x00, 0x13, 0x00, 0x00]).unwrap();
        bad_sni[at] = 0x7f;
        assert_eq!(tls(Side::Up, 443, &bad_sni, &mut t), yes_more("TLS"));
        assert_eq!(t.meta.host, None);
        assert_eq!(t.meta.ja3.as_deref(), Some("f9010d8c34749bdf7659b52227e6f91b"));
        // An extension length past the block's end.
        let mut bad_ext = hex(WEBEX_HELLO);
        let at = bad_ext.windows(4).position(|w| w == [0x00, 0x23, 0x00, 0x00]).unwrap();
        bad_ext[at + 2] = 0x40;
        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 443, &bad_ext, &mut t), yes_more("TLS"));
        assert_eq!(t.meta, Metadata::default());
    }

    #[test]
    fn mail_ports_and_dns_over_tls() {
        let mut t = TestContext::new();
        assert_eq!(tls(Side::Up, 993, &hex(WEBEX_HELLO), &mut t), yes_more("IMAPS"));
        let mut t = TestContext::new();
        assert_eq!(
            tls(Side::Up, 853, &hex(WEBEX_HELLO), &mut t),
            Verdict::Yes(Found::new("TLS").app("DoH_DoT").more())
        );
    }

    #[test]
    fn shared_client_hello_parser() {
        let hello = hex(RFC9001_HELLO);
        let mut meta = Metadata::default();
        assert_eq!(parse_client_hello(&hello, b'q', &mut meta), Hello::Done);
        assert_eq!(meta.host.as_deref(), Some("example.com"));
        assert_eq!(meta.tls_alpn.as_deref(), Some("alpn"));
        assert_eq!(meta.tls_version.as_deref(), Some("TLSv1.3"));
        assert_eq!(meta.ja3.as_deref(), Some("41bc9ae914d6cb3bd0bd0a5453ab7d7f"));
        assert_eq!(meta.ja4.as_deref(), Some("q13d0211an_62ed6f6ca7ad_4d634acda6c0"));

        let mut meta = Metadata::default();
        assert_eq!(parse_client_hello(&hello[..100], b'q', &mut meta), Hello::Short);
        assert_eq!(meta.host.as_deref(), Some("example.com"));
        assert_eq!((meta.ja3, meta.ja4), (None, None));
        let mut meta = Metadata::default();
        assert_eq!(parse_client_hello(&hello[..40], b'q', &mut meta), Hello::Short);
        assert_eq!(parse_client_hello(&[], b'q', &mut meta), Hello::Short);
        assert_eq!(meta, Metadata::default());
        let mut server = hello.clone();
        server[0] = SERVER_HELLO;
        assert_eq!(parse_client_hello(&server, b'q', &mut meta), Hello::Bad);
        // Trailing bytes after the extensions of a complete hello.
        let mut long = hello;
        long[3] += 1;
        long.push(0);
        assert_eq!(parse_client_hello(&long, b'q', &mut meta), Hello::Bad);
        assert_eq!(meta, Metadata::default());
    }

    /// A ClientHello handshake message with `ciphers`, a server_name
    /// extension for `host` and an ALPN extension for `alpn`.
    fn hello_message(ciphers: &[u16], host: &[u8], alpn: &[u8]) -> Vec<u8> {
        let vec16 = |body: &[u8]| [&(body.len() as u16).to_be_bytes()[..], body].concat();
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[7; 32]);
        body.push(0);
        body.extend(vec16(&ciphers.iter().flat_map(|c| c.to_be_bytes()).collect::<Vec<_>>()));
        body.extend_from_slice(&[1, 0]);
        let server_name = vec16(&[&[0][..], &vec16(host)].concat());
        let protocols = vec16(&[&[alpn.len() as u8][..], alpn].concat());
        let mut extensions = Vec::new();
        for (kind, data) in [(EXT_SERVER_NAME, server_name), (EXT_ALPN, protocols)] {
            extensions.extend_from_slice(&kind.to_be_bytes());
            extensions.extend(vec16(&data));
        }
        body.extend(vec16(&extensions));
        let mut message = vec![CLIENT_HELLO, 0];
        message.extend_from_slice(&(body.len() as u16).to_be_bytes());
        message.extend(body);
        message
    }

    /// Remembered fingerprints are computed ones: for hellos seen again,
    /// hellos that evicted each other, hellos that differ only in what the
    /// key leaves out (GREASE, the server name), and hellos too long to
    /// remember.
    #[test]
    fn remembered_fingerprints_are_computed_ones() {
        let mut messages: Vec<Vec<u8>> = (0..3 * HELLO_SLOTS as u16)
            .map(|i| hello_message(&[0x1301, 0x1302, 0x0100 + i], b"example.com", b"h2"))
            .collect();
        messages.push(hello_message(&[0x0a0a, 0x1301, 0x1302], b"a.example", b"h2"));
        messages.push(hello_message(&[0x1a1a, 0x1301, 0x1302], b"b.example", b"h2"));
        messages.push(hello_message(&[0x1301, 0x1302], b"c.example", b"http/1.1"));
        messages.push(hello_message(&(1..600).collect::<Vec<u16>>(), b"example.com", b"h2"));
        let mut keys = HashSet::new();
        for _ in 0..2 {
            for message in &messages {
                let (Hello::Done, Some(hello)) = client_hello_message(message, false) else {
                    panic!("a hello the test built does not parse");
                };
                let computed = (
                    Fingerprint::new(&ja3(&hello)),
                    ja4(b't', &hello).and_then(|ja4| Fingerprint::new(&ja4)),
                );
                assert_eq!(fingerprints(b't', &hello), computed);
                let mut key = Vec::new();
                fingerprint_key(b't', &hello, &mut key);
                keys.insert(key);
            }
        }
        // Only the two hellos with different GREASE and names share a key.
        assert_eq!(keys.len(), messages.len() - 1);
    }

    #[test]
    fn ja4_pieces_follow_the_spec() {
        // The worked example of the FoxIO JA4 specification.
        let ciphers = [
            0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d,
            0x002f, 0x0035,
        ];
        let mut sorted = ciphers;
        sorted.sort_unstable();
        let hash = |values: &[u16], tail: &[u16]| {
            let mut out = String::new();
            ja4_hash(&mut out, values, tail);
            out
        };
        assert_eq!(hash(&sorted, &[]), "8daaf6152771");
        let exts = [
            0x0005, 0x000a, 0x000b, 0x000d, 0x0012, 0x0015, 0x0017, 0x001b, 0x0023, 0x002b, 0x002d, 0x0033, 0x4469,
            0xff01,
        ];
        let sigs = [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601];
        assert_eq!(hash(&exts, &sigs), "e5627efa2ab1");
        assert_eq!(hash(&exts, &[]), "6d807ffa2a79");
        assert_eq!(hash(&[], &sigs), "000000000000");
        assert_eq!(ja4_alpn(Some(b"h2")), ['h', '2']);
        assert_eq!(ja4_alpn(Some(b"http/1.1")), ['h', '1']);
        assert_eq!(ja4_alpn(Some(b"h")), ['h', 'h']);
        assert_eq!(ja4_alpn(Some(&[0xab])), ['a', 'b']);
        assert_eq!(ja4_alpn(Some(&[0xab, 0xcd])), ['a', 'd']);
        assert_eq!(ja4_alpn(Some(&[0x30, 0xab])), ['3', 'b']);
        assert_eq!(ja4_alpn(None), ['0', '0']);
        assert!(is_grease(0x0a0a) && is_grease(0xfafa) && !is_grease(0x0a1a) && !is_grease(0x1301));
    }

    #[test]
    fn dtls_handshake() {
        let mut t = TestContext::new();
        assert_eq!(dtls(Side::Up, &hex(DTLS_HELLO), &mut t), yes_more("DTLS"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("DTLSv1.2"));
        assert_eq!(t.meta.ja3.as_deref(), Some("e15c510766789ed8f49de0e37951c1da"));
        assert_eq!(t.meta.ja4.as_deref(), Some("dd2i010000_653ffb6f323e_000000000000"));
        assert_eq!(dtls(Side::Down, &hex(DTLS_VERIFY), &mut t), yes_more("DTLS"));
        assert_eq!(dtls(Side::Down, &hex(DTLS_SERVER_FLIGHT), &mut t), yes("DTLS"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("DTLSv1.2"));
        // Each message alone is enough to recognise the protocol.
        for msg in [DTLS_VERIFY, DTLS_SERVER_FLIGHT] {
            let mut t = TestContext::new();
            assert!(matches!(dtls(Side::Up, &hex(msg), &mut t), Verdict::Yes(f) if f.master == "DTLS"));
        }
    }

    #[test]
    fn dtls_records_after_the_handshake() {
        let mut app = hex("17fefd00010000000000010044");
        app.extend([0x33; 0x44]);
        let mut t = TestContext::new();
        assert_eq!(dtls(Side::Up, &app, &mut t), Verdict::Maybe);
        t.meta.tls_version = Some("DTLSv1.2".into());
        assert_eq!(dtls(Side::Up, &app, &mut t), yes("DTLS"));
        // Application data in epoch 0 would be unencrypted: not DTLS.
        let mut clear = app.clone();
        clear[3..5].copy_from_slice(&[0, 0]);
        assert_eq!(dtls(Side::Up, &clear, &mut t), Verdict::No);
        // Records must fill the datagram.
        app.push(0);
        assert_eq!(dtls(Side::Up, &app, &mut t), Verdict::No);
    }

    #[test]
    fn not_dtls() {
        let mut t = TestContext::new();
        let hello = hex(DTLS_HELLO);
        let mut over = hello.clone();
        over[12] += 1;
        let mut fragment_past_record = hello.clone();
        fragment_past_record[24] += 1;
        let mut fragment_past_message = hello.clone();
        fragment_past_message[21] = 1;
        for data in [
            hex(WEBEX_HELLO),
            hex("000100002112a4426b41474e4e7a76484e483539"),
            hex("16fefd0000"),
            hello[..30].to_vec(),
            over,
            fragment_past_record,
            fragment_past_message,
            hex("0123456789abcdef0123456789abcdef"),
        ] {
            assert_eq!(dtls(Side::Up, &data, &mut t), Verdict::No, "{data:02x?}");
        }
        assert_eq!(t.meta, Metadata::default());
    }
}
