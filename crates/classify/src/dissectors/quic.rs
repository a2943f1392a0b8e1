//! QUIC, from long-header Initial packets: v1 (RFC 9000/9001), v2 (RFC 9369), the IETF
//! drafts, Facebook's mvfst and Google's Q050/T050/T051. The client's Initial is opened
//! (HKDF-SHA256 initial secrets from the version's salt and the Destination Connection ID,
//! AES-128-ECB header protection, AES-128-GCM payload), its CRYPTO frames are put back in
//! order and the ClientHello (or gQUIC CHLO) is read for the host. Older Google QUIC (Q046
//! and before) carries its CHLO in plaintext; its SNI tag names the host.

use std::ops::Range;

use aes::Aes128;
use aes::cipher::BlockEncrypt;
use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, KeyInit, Nonce, Tag};
use hkdf::Hkdf;
use sha2::Sha256;

use super::tls::{Hello, parse_client_hello};
use super::{
    ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Text, Verdict, Wants, be16, be32,
};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "QUIC",
    wants: Wants::Udp,
    first_byte: FirstByte::is(GQUIC_PUBLIC_FLAGS.union(ByteSet::range(0xc0, 0xff))),
    prefix: Prefix::ANY,
    inspect,
}];

const V1: u32 = 0x0000_0001;
const V2: u32 = 0x6b33_43cf;

const SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f,
    0x0a,
];
const SALT_V2: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb, 0xf9, 0xbd, 0x2e,
    0xd9,
];
/// Drafts 29 to 32.
const SALT_DRAFT_29: [u8; 20] = [
    0xaf, 0xbf, 0xec, 0x28, 0x99, 0x93, 0xd2, 0x4c, 0x9e, 0x97, 0x86, 0xf1, 0x9c, 0x61, 0x11, 0xe0, 0x43, 0x90, 0xa8,
    0x99,
];
/// Drafts 23 to 28.
const SALT_DRAFT_23: [u8; 20] = [
    0xc3, 0xee, 0xf7, 0x12, 0xc7, 0x2e, 0xbb, 0x5a, 0x11, 0xa7, 0xd2, 0x43, 0x2b, 0xb4, 0x63, 0x65, 0xbe, 0xf9, 0xf5,
    0x02,
];
/// Drafts up to 22.
const SALT_DRAFT_22: [u8; 20] = [
    0x7f, 0xbc, 0xdb, 0x0e, 0x7c, 0x66, 0xbb, 0xe9, 0x19, 0x3a, 0x96, 0xcd, 0x21, 0x51, 0x9e, 0xbd, 0x7a, 0x02, 0x64,
    0x4a,
];
const SALT_Q050: [u8; 20] = [
    0x50, 0x45, 0x74, 0xef, 0xd0, 0x66, 0xfe, 0x2f, 0x9d, 0x94, 0x5c, 0xfc, 0xdb, 0xd3, 0xa7, 0xf0, 0xd3, 0xb5, 0x6b,
    0x45,
];
const SALT_T050: [u8; 20] = [
    0x7f, 0xf5, 0x79, 0xe5, 0xac, 0xd0, 0x72, 0x91, 0x55, 0x80, 0x30, 0x4c, 0x43, 0xa2, 0x36, 0x7c, 0x60, 0x48, 0x83,
    0x10,
];
const SALT_T051: [u8; 20] = [
    0x7a, 0x4e, 0xde, 0xf4, 0xe7, 0xcc, 0xee, 0x5f, 0xa4, 0x50, 0x6c, 0x19, 0x12, 0x4f, 0xc8, 0xcc, 0xda, 0x6e, 0x03,
    0x3d,
];

const MAX_CID: usize = 20;
/// RFC 9000 §14.1: a client's datagram carrying an Initial is padded to 1200 bytes.
const MIN_CLIENT_INITIAL: usize = 1200;
/// Largest protected packet opened (a jumbo-frame datagram); larger ones are only named.
const MAX_PACKET: usize = 4096;
/// Room for the ClientHello put back together from CRYPTO frames.
const MAX_CRYPTO: usize = 4096;
/// CRYPTO frames kept per packet; Chrome scatters its hello over a few dozen at most.
const MAX_FRAGMENTS: usize = 64;
const TAG_LEN: usize = 16;
const SAMPLE_LEN: usize = 16;

const FRAME_PADDING: u8 = 0x00;
const FRAME_PING: u8 = 0x01;
const FRAME_ACK: u8 = 0x02;
const FRAME_ACK_ECN: u8 = 0x03;
const FRAME_CRYPTO: u8 = 0x06;
/// gQUIC Q050 and T05x number their CRYPTO frame 0x08.
const FRAME_GQUIC_CRYPTO: u8 = 0x08;

/// How a version protects and frames its Initial packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    /// RFC 9001 protection, with the candidate salts in the order to try them.
    Protected {
        salts: &'static [&'static [u8; 20]],
        v2: bool,
        gquic: bool,
    },
    /// Q046: Google QUIC's long header over a plaintext CHLO.
    Plain,
}

fn flavour(version: u32) -> Option<Flavour> {
    let ietf = |salts| {
        Some(Flavour::Protected {
            salts,
            v2: false,
            gquic: false,
        })
    };
    let google = |salt| {
        Some(Flavour::Protected {
            salts: salt,
            v2: false,
            gquic: true,
        })
    };
    match version {
        V1 => ietf(&[&SALT_V1]),
        V2 => Some(Flavour::Protected {
            salts: &[&SALT_V2],
            v2: true,
            gquic: false,
        }),
        0xff00_0001..=0xff00_0016 => ietf(&[&SALT_DRAFT_22]),
        0xff00_0017..=0xff00_001c => ietf(&[&SALT_DRAFT_23]),
        0xff00_001d..=0xff00_0020 => ietf(&[&SALT_DRAFT_29]),
        0xff00_0021..=0xff00_0022 => ietf(&[&SALT_V1]),
        0xfaceb001 => ietf(&[&SALT_DRAFT_22]),
        0xfaceb002 | 0xfaceb00e => ietf(&[&SALT_DRAFT_23]),
        0xfaceb003..=0xfaceb00d | 0xfaceb00f => ietf(&[&SALT_V1, &SALT_DRAFT_29]),
        // "Q050", "T050", "T051".
        0x5130_3530 => google(&[&SALT_Q050]),
        0x5430_3530 => google(&[&SALT_T050]),
        0x5430_3531 => google(&[&SALT_T051]),
        // "Q046".
        0x5130_3436 => Some(Flavour::Plain),
        // Versions of the 0x?a?a?a?a pattern force version negotiation (RFC 9000 §15);
        // the client still protects the packet as it would for the version it hopes for.
        v if v & 0x0f0f_0f0f == 0x0a0a_0a0a => ietf(&[&SALT_V1, &SALT_DRAFT_29]),
        _ => None,
    }
}

fn version_name(version: u32) -> Text {
    match version {
        V1 => Text::const_new("v1"),
        V2 => Text::const_new("v2"),
        0xff00_0000..=0xff00_00ff => compact_str::format_compact!("draft-{}", version & 0xff),
        v if gquic_tag(v) => v.to_be_bytes().iter().map(|&b| b as char).collect(),
        v => compact_str::format_compact!("{v:08x}"),
    }
}

/// Google's versions are spelled `Q043`, `T051`, ...
fn gquic_tag(version: u32) -> bool {
    let [kind, a, b, c] = version.to_be_bytes();
    matches!(kind, b'Q' | b'T') && [a, b, c].iter().all(u8::is_ascii_digit)
}

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let Some(&first) = data.first() else {
        return Verdict::No;
    };
    // Once this flow is ours, the packets after the Initials (short headers, Handshake
    // packets) end the inspection without taking the label back. So does the server's
    // Initial: it is sealed with the server's keys, and trying the client's on it (for
    // every salt of the version) only to fail cost as much as opening the client's.
    if ctx.meta.quic_version.is_some() && (!is_initial(data) || pkt.side == Side::Down) {
        return Verdict::Yes(found(&ctx.meta));
    }
    if first & 0x80 == 0 {
        return gquic_public(data, pkt.side, &mut ctx.meta);
    }
    let Some(version) = be32(data, 1) else {
        return Verdict::No;
    };
    let Some(flavour) = flavour(version) else {
        return Verdict::No;
    };
    if first & 0x40 == 0 {
        return Verdict::No;
    }
    let Flavour::Protected { salts, v2, gquic } = flavour else {
        return gquic_q046(data, pkt.side, &mut ctx.meta);
    };
    let Some(header) = long_header(data) else {
        return Verdict::No;
    };
    if !is_initial(data) {
        return Verdict::Maybe;
    }
    let mut buf = [0u8; MAX_PACKET];
    let opened = salts
        .iter()
        .find_map(|salt| open(data, &header, &salt[..], v2, &mut buf))
        .map(|plain| read_frames(buf.get(plain).unwrap_or_default(), gquic, &mut ctx.meta));
    let verdict = match opened {
        Some(Crypto::Partial) => Verdict::Yes(found(&ctx.meta).more()),
        Some(_) => Verdict::Yes(found(&ctx.meta)),
        // An Initial that does not open (a server's, an unknown salt, a damaged packet)
        // still has the shape: the version, the connection IDs and lengths and, from a
        // client, the 1200-byte floor.
        None if ctx.meta.quic_version.is_some() || pkt.side == Side::Down || data.len() >= MIN_CLIENT_INITIAL => {
            Verdict::Yes(found(&ctx.meta))
        }
        None => Verdict::Maybe,
    };
    if matches!(verdict, Verdict::Yes(_)) {
        ctx.meta.quic_version.get_or_insert_with(|| version_name(version));
    }
    verdict
}

/// A long-header Initial of a version this module knows (type 0, or 1 in v2 per
/// RFC 9369 §3.2; Q046 included).
fn is_initial(data: &[u8]) -> bool {
    let (Some(&first), Some(version)) = (data.first(), be32(data, 1)) else {
        return false;
    };
    let initial_type = match flavour(version) {
        Some(Flavour::Protected { v2: true, .. }) => 1,
        Some(_) => 0,
        None => return false,
    };
    first & 0xc0 == 0xc0 && (first >> 4) & 0x03 == initial_type
}

/// DNS over QUIC (RFC 9250) is told apart by its ALPN.
fn found(meta: &Metadata) -> Found {
    match &meta.tls_alpn {
        Some(alpn) if alpn.starts_with("doq") => Found::new("QUIC").app("DoH_DoT"),
        _ => Found::new("QUIC"),
    }
}

/// Where a long-header packet's fields are.
struct LongHeader {
    dcid: Range<usize>,
    /// Offset of the (protected) packet number.
    pn_offset: usize,
    /// End of this packet within the datagram (the Length field counts from `pn_offset`).
    end: usize,
}

/// Reads a QUIC variable-length integer (RFC 9000 §16) at `at`; returns it and its size.
fn varint(data: &[u8], at: usize) -> Option<(u64, usize)> {
    let first = *data.get(at)?;
    let size = 1usize << (first >> 6);
    let bytes = data.get(at..at + size)?;
    let value = bytes
        .iter()
        .skip(1)
        .fold(u64::from(first & 0x3f), |v, &b| (v << 8) | u64::from(b));
    Some((value, size))
}

/// Parses an Initial's long header (RFC 9000 §17.2.2).
fn long_header(data: &[u8]) -> Option<LongHeader> {
    let dcid_len = *data.get(5)? as usize;
    let dcid = 6..6 + dcid_len;
    let scid_len = *data.get(dcid.end)? as usize;
    if dcid_len > MAX_CID || scid_len > MAX_CID {
        return None;
    }
    let mut at = dcid.end + 1 + scid_len;
    let (token_len, size) = varint(data, at)?;
    at = at.checked_add(size)?.checked_add(usize::try_from(token_len).ok()?)?;
    let (length, size) = varint(data, at)?;
    let pn_offset = at + size;
    let end = pn_offset.checked_add(usize::try_from(length).ok()?)?;
    // The packet number (up to 4 bytes), a 16-byte sample after it, and the AEAD tag.
    if end > data.len() || length < (4 + SAMPLE_LEN) as u64 {
        return None;
    }
    Some(LongHeader { dcid, pn_offset, end })
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
fn expand_label(prk: &Hkdf<Sha256>, label: &[u8], out: &mut [u8]) -> Option<()> {
    const PREFIX: &[u8] = b"tls13 ";
    let mut info = [0u8; 64];
    let label_len = PREFIX.len() + label.len();
    let info_len = 2 + 1 + label_len + 1;
    let out_len = u16::try_from(out.len()).ok()?;
    let info = info.get_mut(..info_len)?;
    info.get_mut(..2)?.copy_from_slice(&out_len.to_be_bytes());
    *info.get_mut(2)? = u8::try_from(label_len).ok()?;
    info.get_mut(3..3 + PREFIX.len())?.copy_from_slice(PREFIX);
    info.get_mut(3 + PREFIX.len()..3 + label_len)?.copy_from_slice(label);
    prk.expand(info, out).ok()
}

/// The client's Initial key, IV and header-protection key for a DCID (RFC 9001 §5.2).
struct Keys {
    key: [u8; 16],
    iv: [u8; 12],
    hp: [u8; 16],
}

fn client_keys(salt: &[u8], dcid: &[u8], v2: bool) -> Option<Keys> {
    let initial = Hkdf::<Sha256>::new(Some(salt), dcid);
    let mut secret = [0u8; 32];
    expand_label(&initial, b"client in", &mut secret)?;
    let client = Hkdf::<Sha256>::from_prk(&secret).ok()?;
    let (key_label, iv_label, hp_label): (&[u8], &[u8], &[u8]) = if v2 {
        (b"quicv2 key", b"quicv2 iv", b"quicv2 hp")
    } else {
        (b"quic key", b"quic iv", b"quic hp")
    };
    let mut keys = Keys {
        key: [0; 16],
        iv: [0; 12],
        hp: [0; 16],
    };
    expand_label(&client, key_label, &mut keys.key)?;
    expand_label(&client, iv_label, &mut keys.iv)?;
    expand_label(&client, hp_label, &mut keys.hp)?;
    Some(keys)
}

/// Removes header protection and opens the payload of the Initial at the start of `data`
/// into `buf`; returns where the plaintext frames are, or `None` when the tag does not
/// verify.
fn open(data: &[u8], header: &LongHeader, salt: &[u8], v2: bool, buf: &mut [u8; MAX_PACKET]) -> Option<Range<usize>> {
    let keys = client_keys(salt, data.get(header.dcid.clone())?, v2)?;
    let packet = data.get(..header.end)?;
    let sample = packet.get(header.pn_offset + 4..header.pn_offset + 4 + SAMPLE_LEN)?;
    let mut mask = aes::Block::clone_from_slice(sample);
    Aes128::new(&keys.hp.into()).encrypt_block(&mut mask);
    let buf = buf.get_mut(..packet.len())?;
    buf.copy_from_slice(packet);
    let first = buf.first_mut()?;
    // Long headers protect the low four bits of the first byte (RFC 9001 §5.4.1).
    *first ^= mask.first()? & 0x0f;
    let pn_len = usize::from(*first & 0x03) + 1;
    let mut pn = 0u64;
    for (i, m) in mask.iter().skip(1).take(pn_len).enumerate() {
        let byte = buf.get_mut(header.pn_offset + i)?;
        *byte ^= m;
        pn = (pn << 8) | u64::from(*byte);
    }
    let mut nonce = keys.iv;
    for (n, p) in nonce.iter_mut().rev().zip(pn.to_be_bytes().iter().rev()) {
        *n ^= p;
    }
    let payload_start = header.pn_offset + pn_len;
    let tag_start = buf.len().checked_sub(TAG_LEN)?;
    if tag_start < payload_start {
        return None;
    }
    let (head, rest) = buf.split_at_mut(payload_start);
    let (payload, tag) = rest.split_at_mut(tag_start - payload_start);
    let tag = Tag::clone_from_slice(tag);
    Aes128Gcm::new(&keys.key.into())
        .decrypt_in_place_detached(Nonce::from_slice(&nonce), head, payload, &tag)
        .ok()?;
    Some(payload_start..tag_start)
}

/// What the CRYPTO frames of one packet held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crypto {
    /// No hello from offset 0 (another packet has it), or nothing readable.
    None,
    /// A hello cut short: its rest travels in the next Initial.
    Partial,
    Complete,
}

/// One CRYPTO frame: its stream offset and where its bytes are in the plaintext.
#[derive(Clone, Copy, Default)]
struct Fragment {
    offset: usize,
    start: usize,
    len: usize,
}

/// Walks an Initial's frames (RFC 9000 §19), joins the CRYPTO data and reads the hello.
fn read_frames(plain: &[u8], gquic: bool, meta: &mut Metadata) -> Crypto {
    let mut fragments = [Fragment::default(); MAX_FRAGMENTS];
    let mut count = 0;
    let mut at = 0;
    // Every frame consumes at least one byte.
    while let Some(&kind) = plain.get(at) {
        at += 1;
        match kind {
            FRAME_PADDING => at += padding_run(plain.get(at..).unwrap_or_default()),
            FRAME_PING => {}
            FRAME_ACK | FRAME_ACK_ECN if !gquic => {
                let Some(next) = skip_ack(plain, at, kind == FRAME_ACK_ECN) else {
                    break;
                };
                at = next;
            }
            FRAME_CRYPTO | FRAME_GQUIC_CRYPTO if (kind == FRAME_GQUIC_CRYPTO) == gquic => {
                let Some((offset, a)) = varint(plain, at) else {
                    break;
                };
                let Some((len, b)) = varint(plain, at + a) else {
                    break;
                };
                let start = at + a + b;
                let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else {
                    break;
                };
                if start.checked_add(len).is_none_or(|end| end > plain.len()) {
                    break;
                }
                if let Some(slot) = fragments.get_mut(count) {
                    *slot = Fragment { offset, start, len };
                    count += 1;
                }
                at = start + len;
            }
            // CONNECTION_CLOSE and anything else: no hello follows.
            _ => break,
        }
    }
    let fragments = fragments.get(..count).unwrap_or_default();
    let mut joined = [0u8; MAX_CRYPTO];
    let len = join(plain, fragments, &mut joined);
    let hello = joined.get(..len).unwrap_or_default();
    if hello.is_empty() {
        // A later part of the hello, whose start went in an earlier packet: only its SNI
        // and ALPN can be found, by their shape.
        for f in fragments {
            scan_fragment(plain.get(f.start..f.start + f.len).unwrap_or_default(), meta);
        }
        return Crypto::None;
    }
    if gquic && hello.starts_with(b"CHLO") {
        chlo(hello, meta);
        return Crypto::Complete;
    }
    match parse_client_hello(hello, b'q', meta) {
        Hello::Done => Crypto::Complete,
        Hello::Short => {
            for f in fragments.iter().filter(|f| f.offset > len) {
                scan_fragment(plain.get(f.start..f.start + f.len).unwrap_or_default(), meta);
            }
            Crypto::Partial
        }
        Hello::Bad => Crypto::None,
    }
}

/// How many PADDING frames (zero bytes) `data` starts with. A client's
/// Initial is padded to 1,200 bytes, most of it zeros after the hello (and,
/// from some clients, between its pieces): looked at 16 bytes at a time,
/// not frame by frame.
fn padding_run(data: &[u8]) -> usize {
    let mut run = 0;
    for chunk in data.chunks_exact(16) {
        if chunk.iter().any(|&b| b != 0) {
            break;
        }
        run += 16;
    }
    run + data[run..].iter().take_while(|&&b| b == 0).count()
}

/// Skips an ACK frame's fields after its type; returns where the next frame starts.
fn skip_ack(plain: &[u8], mut at: usize, ecn: bool) -> Option<usize> {
    let field = |at: &mut usize| -> Option<u64> {
        let (v, size) = varint(plain, *at)?;
        *at += size;
        Some(v)
    };
    field(&mut at)?;
    field(&mut at)?;
    let ranges = field(&mut at)?;
    field(&mut at)?;
    // Each range is two varints of at least a byte: more than the packet holds is a lie.
    if ranges > plain.len() as u64 {
        return None;
    }
    for _ in 0..ranges * 2 {
        field(&mut at)?;
    }
    if ecn {
        for _ in 0..3 {
            field(&mut at)?;
        }
    }
    Some(at)
}

/// Copies the CRYPTO stream from offset 0 as far as it runs without a gap into `out`;
/// returns its length.
fn join(plain: &[u8], fragments: &[Fragment], out: &mut [u8; MAX_CRYPTO]) -> usize {
    let mut len = 0;
    // Each pass extends the stream by at least one fragment or stops.
    for _ in 0..fragments.len() {
        let Some(f) = fragments.iter().find(|f| f.offset <= len && f.offset + f.len > len) else {
            break;
        };
        let skip = len - f.offset;
        let take = (f.len - skip).min(MAX_CRYPTO - len);
        let (Some(dst), Some(src)) = (
            out.get_mut(len..len + take),
            plain.get(f.start + skip..f.start + skip + take),
        ) else {
            break;
        };
        dst.copy_from_slice(src);
        len += take;
        if len == MAX_CRYPTO {
            break;
        }
    }
    len
}

/// Looks for a server_name or ALPN extension in a piece of a ClientHello whose start is
/// in another packet: an extension header whose nested lengths all agree.
fn scan_fragment(piece: &[u8], meta: &mut Metadata) {
    for at in 0..piece.len().saturating_sub(5) {
        let Some(window) = piece.get(at..) else {
            break;
        };
        let (Some(kind), Some(ext_len), Some(list_len)) = (
            be16(window, 0),
            be16(window, 2).map(usize::from),
            be16(window, 4).map(usize::from),
        ) else {
            break;
        };
        if list_len + 2 != ext_len || window.len() < 4 + ext_len {
            continue;
        }
        let list = window.get(6..6 + list_len).unwrap_or_default();
        match kind {
            // host_name entry: type 0, 16-bit length, a DNS name.
            0x0000 if meta.host.is_none() => {
                let name_len = be16(list, 1).map_or(0, usize::from);
                let name = list.get(3..).unwrap_or_default();
                let dns = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
                if list.first() == Some(&0) && name_len == name.len() && name_len > 0 && name.iter().all(dns) {
                    Metadata::set_once(&mut meta.host, name);
                }
            }
            0x0010 if meta.tls_alpn.is_none() && alpn_list_ok(list) => {
                let mut text = [0u8; 64];
                let mut n = 0;
                let mut rest = list;
                while let Some((&len, tail)) = rest.split_first() {
                    let (proto, tail) = tail.split_at(usize::from(len).min(tail.len()));
                    let comma: &[u8] = if n > 0 { b"," } else { b"" };
                    for &b in comma.iter().chain(proto) {
                        if let Some(slot) = text.get_mut(n) {
                            *slot = b;
                            n += 1;
                        }
                    }
                    rest = tail;
                }
                Metadata::set_once(&mut meta.tls_alpn, text.get(..n).unwrap_or_default());
            }
            _ => {}
        }
    }
}

/// A protocol name list of printable, non-empty names that fills `list` exactly.
fn alpn_list_ok(list: &[u8]) -> bool {
    let mut rest = list;
    while let Some((&len, tail)) = rest.split_first() {
        let Some(proto) = tail.get(..usize::from(len)) else {
            return false;
        };
        if proto.is_empty() || !proto.iter().all(|b| b.is_ascii_graphic()) {
            return false;
        }
        rest = tail.get(usize::from(len)..).unwrap_or_default();
    }
    !list.is_empty()
}

/// gQUIC's public header (Q043 and older): flags, 8-byte connection ID, version, packet
/// number, a 12-byte hash, then a STREAM frame on stream 1 holding the CHLO.
/// The public flags `gquic_public` takes: version and 8-byte connection ID
/// present, the two high bits clear.
const GQUIC_PUBLIC_FLAGS: ByteSet = ByteSet::of(&[
    0x09, 0x0b, 0x0d, 0x0f, 0x19, 0x1b, 0x1d, 0x1f, 0x29, 0x2b, 0x2d, 0x2f, 0x39, 0x3b, 0x3d, 0x3f,
]);

fn gquic_public(data: &[u8], side: Side, meta: &mut Metadata) -> Verdict {
    const FLAG_VERSION: u8 = 0x01;
    const FLAG_CID: u8 = 0x08;
    let Some(&flags) = data.first() else {
        return Verdict::No;
    };
    // Only a client's first packets carry the version; the two high bits are unused.
    if side != Side::Up || flags & (FLAG_VERSION | FLAG_CID) != FLAG_VERSION | FLAG_CID || flags & 0xc0 != 0 {
        return Verdict::No;
    }
    let Some(version) = be32(data, 9) else {
        return Verdict::No;
    };
    if !gquic_tag(version) || version >> 24 != u32::from(b'Q') || data.len() < MIN_CLIENT_INITIAL {
        return Verdict::No;
    }
    let pn_len = match (flags >> 4) & 0x03 {
        0 => 1,
        1 => 2,
        2 => 4,
        _ => 6,
    };
    // Versions before Q039 wrote integers little-endian; before Q034 a private flags
    // byte followed the hash.
    let big_endian = version >= u32::from_be_bytes(*b"Q039");
    let private_flags = usize::from(version < u32::from_be_bytes(*b"Q034"));
    meta.quic_version.get_or_insert_with(|| version_name(version));
    let frames = data.get(13 + pn_len + 12 + private_flags..).unwrap_or_default();
    if let Some(stream) = stream_frame(frames, big_endian) {
        chlo(stream, meta);
    }
    Verdict::Yes(Found::new("QUIC"))
}

/// Q046: a long header (`0xc3`, version, connection ID lengths `0x50`, 8-byte ID, 4-byte
/// packet number) before the same hash and STREAM frame as the public header.
fn gquic_q046(data: &[u8], side: Side, meta: &mut Metadata) -> Verdict {
    if side != Side::Up || data.first() != Some(&0xc3) || data.get(5) != Some(&0x50) || data.len() < MIN_CLIENT_INITIAL
    {
        return Verdict::No;
    }
    Metadata::set_once(&mut meta.quic_version, b"Q046");
    if let Some(stream) = stream_frame(data.get(30..).unwrap_or_default(), true) {
        chlo(stream, meta);
    }
    Verdict::Yes(Found::new("QUIC"))
}

/// The data of a gQUIC STREAM frame on the crypto stream (1) at the start of `frames`.
fn stream_frame(frames: &[u8], big_endian: bool) -> Option<&[u8]> {
    let kind = *frames.first()?;
    // 1fdooossB: STREAM, FIN, data length present, offset size, stream ID size.
    if kind & 0x80 == 0 || kind & 0x20 == 0 {
        return None;
    }
    let offset_len = match (kind >> 2) & 0x07 {
        0 => 0,
        n => usize::from(n) + 1,
    };
    let id_len = usize::from(kind & 0x03) + 1;
    let id = frames.get(1..1 + id_len)?;
    let fold = |v: u32, &b: &u8| (v << 8) | u32::from(b);
    let stream = if big_endian {
        id.iter().fold(0, fold)
    } else {
        id.iter().rev().fold(0, fold)
    };
    if stream != 1 {
        return None;
    }
    let at = 1 + id_len + offset_len;
    let len_bytes: [u8; 2] = frames.get(at..at + 2)?.try_into().ok()?;
    let len = usize::from(if big_endian {
        u16::from_be_bytes(len_bytes)
    } else {
        u16::from_le_bytes(len_bytes)
    });
    frames.get(at + 2..at + 2 + len)
}

/// Reads the SNI tag of a gQUIC CHLO: `CHLO`, a tag count, then (tag, end offset) pairs
/// in little-endian, then the values back to back.
fn chlo(msg: &[u8], meta: &mut Metadata) {
    const MAX_TAGS: usize = 128;
    if !msg.starts_with(b"CHLO") {
        return;
    }
    let Some(count) = msg.get(4..6).and_then(|b| b.try_into().ok()).map(u16::from_le_bytes) else {
        return;
    };
    let count = usize::from(count);
    let values = 8 + 8 * count.min(MAX_TAGS);
    let mut previous = 0usize;
    for i in 0..count.min(MAX_TAGS) {
        let Some(entry) = msg.get(8 + 8 * i..16 + 8 * i) else {
            return;
        };
        let (tag, end) = entry.split_at(4);
        let end = end.try_into().map(u32::from_le_bytes).unwrap_or_default() as usize;
        if end < previous {
            return;
        }
        if tag == b"SNI\0" {
            if let Some(name) = msg.get(values + previous..values + end).filter(|n| !n.is_empty()) {
                Metadata::set_once(&mut meta.host, name);
            }
            return;
        }
        previous = end;
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{TestContext, Transport, test_packet};
    use super::*;

    const DCID: &str = "8394c8f03e515708";
    /// RFC 9001 Appendix A.2: the client's Initial (1200 bytes).
    const RFC9001_INITIAL: &str = "c000000001088394c8f03e5157080000449e7b9aec34d1b1c98dd7689fb8ec11d242b123dc9bd8bab936b4\
        7d92ec356c0bab7df5976d27cd449f63300099f3991c260ec4c60d17b31f8429157bb35a1282a643a8d2262cad67500cadb8e7378c8eb7\
        539ec4d4905fed1bee1fc8aafba17c750e2c7ace01e6005f80fcb7df621230c83711b39343fa028cea7f7fb5ff89eac2308249a0225215\
        5e2347b63d58c5457afd84d05dfffdb20392844ae812154682e9cf012f9021a6f0be17ddd0c2084dce25ff9b06cde535d0f920a2db1bf3\
        62c23e596d11a4f5a6cf3948838a3aec4e15daf8500a6ef69ec4e3feb6b1d98e610ac8b7ec3faf6ad760b7bad1db4ba3485e8a94dc250a\
        e3fdb41ed15fb6a8e5eba0fc3dd60bc8e30c5c4287e53805db059ae0648db2f64264ed5e39be2e20d82df566da8dd5998ccabdae053060\
        ae6c7b4378e846d29f37ed7b4ea9ec5d82e7961b7f25a9323851f681d582363aa5f89937f5a67258bf63ad6f1a0b1d96dbd4faddfcefc5\
        266ba6611722395c906556be52afe3f565636ad1b17d508b73d8743eeb524be22b3dcbc2c7468d54119c7468449a13d8e3b95811a198f3\
        491de3e7fe942b330407abf82a4ed7c1b311663ac69890f4157015853d91e923037c227a33cdd5ec281ca3f79c44546b9d90ca00f064c9\
        9e3dd97911d39fe9c5d0b23a229a234cb36186c4819e8b9c5927726632291d6a418211cc2962e20fe47feb3edf330f2c603a9d48c0fcb5\
        699dbfe5896425c5bac4aee82e57a85aaf4e2513e4f05796b07ba2ee47d80506f8d2c25e50fd14de71e6c418559302f939b0e1abd576f2\
        79c4b2e0feb85c1f28ff18f58891ffef132eef2fa09346aee33c28eb130ff28f5b766953334113211996d20011a198e3fc433f9f254101\
        0ae17c1bf202580f6047472fb36857fe843b19f5984009ddc324044e847a4f4a0ab34f719595de37252d6235365e9b84392b061085349d\
        73203a4a13e96f5432ec0fd4a1ee65accdd5e3904df54c1da510b0ff20dcc0c77fcb2c0e0eb605cb0504db87632cf3d8b4dae6e705769d\
        1de354270123cb11450efc60ac47683d7b8d0f811365565fd98c4c8eb936bcab8d069fc33bd801b03adea2e1fbc5aa463d08ca19896d2b\
        f59a071b851e6c239052172f296bfb5e72404790a2181014f3b94a4e97d117b438130368cc39dbb2d198065ae3986547926cd2162f40a2\
        9f0c3c8745c0f50fba3852e566d44575c29d39a03f0cda721984b6f440591f355e12d439ff150aab7613499dbd49adabc8676eef023b15\
        b65bfc5ca06948109f23f350db82123535eb8a7433bdabcb909271a6ecbcb58b936a88cd4e8f2e6ff5800175f113253d8fa9ca8885c2f5\
        52e657dc603f252e1a8e308f76f0be79e2fb8f5d5fbbe2e30ecadd220723c8c0aea8078cdfcb3868263ff8f0940054da48781893a7e49a\
        d5aff4af300cd804a6b6279ab3ff3afb64491c85194aab760d58a606654f9f4400e8b38591356fbf6425aca26dc85244259ff2b19c41b9\
        f96f3ca9ec1dde434da7d2d392b905ddf3d1f9af93d1af5950bd493f5aa731b4056df31bd267b6b90a079831aaf579be0a39013137aac6\
        d404f518cfd46840647e78bfe706ca4cf5e9c5453e9f7cfd2b8b4c8d169a44e55c88d4a9a7f9474241e221af44860018ab0856972e194c\
        d934";
    /// RFC 9369 Appendix A.2: the same ClientHello in a QUIC v2 Initial.
    const RFC9369_INITIAL: &str = "d76b3343cf088394c8f03e5157080000449ea0c95e82ffe67b6abcdb4298b485dd04de806071bf03dcee\
        bfa162e75d6c96058bdbfb127cdfcbf903388e99ad049f9a3dd4425ae4d0992cfff18ecf0fdb5a842d09747052f17ac2053d21f57c5d25\
        0f2c4f0e0202b70785b7946e992e58a59ac52dea6774d4f03b55545243cf1a12834e3f249a78d395e0d18f4d766004f1a2674802a747ea\
        a901c3f10cda5500cb9122faa9f1df66c392079a1b40f0de1c6054196a11cbea40afb6ef5253cd6818f6625efce3b6def6ba7e4b37a40f\
        7732e093daa7d52190935b8da58976ff3312ae50b187c1433c0f028edcc4c2838b6a9bfc226ca4b4530e7a4ccee1bfa2a3d396ae5a3fb5\
        12384b2fdd851f784a65e03f2c4fbe11a53c7777c023462239dd6f7521a3f6c7d5dd3ec9b3f233773d4b46d23cc375eb198c63301c2180\
        1f6520bcfb7966fc49b393f0061d974a2706df8c4a9449f11d7f3d2dcbb90c6b877045636e7c0c0fe4eb0f697545460c806910d2c355f1\
        d253bc9d2452aaa549e27a1fac7cf4ed77f322e8fa894b6a83810a34b361901751a6f5eb65a0326e07de7c1216ccce2d0193f958bb3850\
        a833f7ae432b65bc5a53975c155aa4bcb4f7b2c4e54df16efaf6ddea94e2c50b4cd1dfe06017e0e9d02900cffe1935e0491d77ffb4fdf8\
        5290fdd893d577b1131a610ef6a5c32b2ee0293617a37cbb08b847741c3b8017c25ca9052ca1079d8b78aebd47876d330a30f6a8c6d61d\
        d1ab5589329de714d19d61370f8149748c72f132f0fc99f34d766c6938597040d8f9e2bb522ff99c63a344d6a2ae8aa8e51b7b90a4a806\
        105fcbca31506c446151adfeceb51b91abfe43960977c87471cf9ad4074d30e10d6a7f03c63bd5d4317f68ff325ba3bd80bf4dc8b52a0b\
        a031758022eb025cdd770b44d6d6cf0670f4e990b22347a7db848265e3e5eb72dfe8299ad7481a408322cac55786e52f633b2fb6b614ea\
        ed18d703dd84045a274ae8bfa73379661388d6991fe39b0d93debb41700b41f90a15c4d526250235ddcd6776fc77bc97e7a417ebcb3160\
        0d01e57f32162a8560cacc7e27a096d37a1a86952ec71bd89a3e9a30a2a26162984d7740f81193e8238e61f6b5b984d4d3dfa033c1bb7e\
        4f0037febf406d91c0dccf32acf423cfa1e7071010d3f270121b493ce85054ef58bada42310138fe081adb04e2bd901f2f13458b3d6758\
        158197107c14ebb193230cd1157380aa79cae1374a7c1e5bbcb80ee23e06ebfde206bfb0fcbc0edc4ebec309661bdd908d532eb0c6adc3\
        8b7ca7331dce8dfce39ab71e7c32d318d136b6100671a1ae6a6600e3899f31f0eed19e3417d134b90c9058f8632c798d4490da4987307c\
        ba922d61c39805d072b589bd52fdf1e86215c2d54e6670e07383a27bbffb5addf47d66aa85a0c6f9f32e59d85a44dd5d3b22dc2be80919\
        b490437ae4f36a0ae55edf1d0b5cb4e9a3ecabee93dfc6e38d209d0fa6536d27a5d6fbb17641cde27525d61093f1b28072d111b2b4ae5f\
        89d5974ee12e5cf7d5da4d6a31123041f33e61407e76cffcdcfd7e19ba58cf4b536f4c4938ae79324dc402894b44faf8afbab35282ab65\
        9d13c93f70412e85cb199a37ddec600545473cfb5a05e08d0b209973b2172b4d21fb69745a262ccde96ba18b2faa745b6fe189cf772a9f\
        84cbfc";
    /// RFC 9001 Appendix A.3: the server's Initial (ACK and ServerHello).
    const RFC9001_SERVER_INITIAL: &str = "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a5816b6394100f37a\
        1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb\
        84022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc42158407dd074ee";
    /// The ClientHello inside RFC 9001's sample Initial.
    const RFC9001_HELLO: &str = "010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c0000041301\
        1302010000c000000010000e00000b6578616d706c652e636f6dff01000100000a00080006001d00170018001000070005046\
        16c706e000500050100000000003300260024001d00209370b2c9caa47fbabaf4559fedba753de171fa71f50f1ce15d43e994ec\
        74d748002b0003020304000d0010000e0403050306030203080408050806002d00020101001c00024001003900320408fffffff\
        fffffffff05048000ffff07048000ffff0801100104800075300901100f088394c8f03e51570806048000ffff";
    /// quic_q46.pcap: the Q046 client packet up to the end of its CHLO tag table; the
    /// values start with 438 bytes of PAD then the SNI.
    const Q046_HEAD: &str = "c35130343650eacfe6e706df272d0000000460da58929f6839d0860efc58a4010400040043484c4f1a00000050\
        414400b6010000534e4900c501000053544b00fd010000534e4f0031020000564552003502000043435300450200004e4f4e4365020000\
        4145414469020000554149449402000053434944a402000054434944a802000050444d44ac020000534d484cb00200004943534cb40200\
        004e4f4e50d402000050554253f40200004d494453f802000053434c53fc0200004b45585300030000584c4354080300004353435408\
        030000434f50540c030000434352541c030000495254542003000043464357240300005346435728030000";
    /// quic.pcap: a Q024 client packet (public header, little-endian) up to the tag table;
    /// 391 bytes of PAD then the SNI.
    const Q024_HEAD: &str = "0db2de5df14f5545eb51303234013b6e8986f83cf3b7a6ab5d0501a001000443484c4f180000005041440087\
        010000534e49009601000053544b00d001000056455200d401000043435300e40100004e4f4e43040200004d53504308020000414541\
        440c02000055414944240200005343494434020000544349443802000050444d443c02000053524246400200004943534c4402000050\
        5542536402000053434c53680200004b4558536c020000434f50546c02000043435254840200004347535488020000495254548c0200\
        00434554563003000043464357340300005346435738030000";

    fn run(side: Side, data: &[u8], t: &mut TestContext) -> Verdict {
        let pkt = test_packet(Transport::Udp, side, 50000, 443, data);
        inspect(&pkt, &mut t.ctx())
    }

    fn quic() -> Verdict {
        Verdict::Yes(Found::new("QUIC"))
    }

    /// A CRYPTO frame with two-byte varints for its offset and length.
    fn crypto_frame(offset: usize, data: &[u8]) -> Vec<u8> {
        let mut f = vec![FRAME_CRYPTO];
        f.extend_from_slice(&(0x4000 | offset as u16).to_be_bytes());
        f.extend_from_slice(&(0x4000 | data.len() as u16).to_be_bytes());
        f.extend_from_slice(data);
        f
    }

    /// Protects `frames` as a client Initial (RFC 9001 §5), padded to `size` bytes.
    fn seal(version: u32, salt: &[u8], v2: bool, dcid: &[u8], pn: u32, frames: &[u8], size: usize) -> Vec<u8> {
        let keys = client_keys(salt, dcid, v2).unwrap();
        // An Initial with a four-byte packet number.
        let mut header = vec![if v2 { 0xd3 } else { 0xc3 }];
        header.extend_from_slice(&version.to_be_bytes());
        header.push(dcid.len() as u8);
        header.extend_from_slice(dcid);
        header.extend_from_slice(&[0, 0]);
        let payload_len = size - header.len() - 2 - 4 - TAG_LEN;
        header.extend_from_slice(&(0x4000 | (4 + payload_len + TAG_LEN) as u16).to_be_bytes());
        let pn_offset = header.len();
        header.extend_from_slice(&pn.to_be_bytes());
        let mut payload = frames.to_vec();
        payload.resize(payload_len, 0);
        let mut nonce = keys.iv;
        for (n, p) in nonce.iter_mut().rev().zip(u64::from(pn).to_be_bytes().iter().rev()) {
            *n ^= p;
        }
        let tag = Aes128Gcm::new(&keys.key.into())
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), &header, &mut payload)
            .unwrap();
        let mut packet = header;
        packet.extend_from_slice(&payload);
        packet.extend_from_slice(&tag);
        let mut mask = aes::Block::clone_from_slice(&packet[pn_offset + 4..pn_offset + 4 + SAMPLE_LEN]);
        Aes128::new(&keys.hp.into()).encrypt_block(&mut mask);
        packet[0] ^= mask[0] & 0x0f;
        for i in 0..4 {
            packet[pn_offset + i] ^= mask[1 + i];
        }
        packet
    }

    fn seal_v1(frames: &[u8]) -> Vec<u8> {
        seal(V1, &SALT_V1, false, &hex(DCID), 2, frames, 1200)
    }

    /// A ClientHello with the given extensions (cipher TLS_AES_128_GCM_SHA256).
    fn client_hello(extensions: &[u8]) -> Vec<u8> {
        let mut body = hex("0303");
        body.extend([9u8; 32]);
        body.extend(hex("00 0002 1301 0100"));
        body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
        body.extend_from_slice(extensions);
        let mut msg = vec![1, 0];
        msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
        msg.extend(body);
        msg
    }

    const SNI_EXAMPLE_ORG: &str = "00000010000e00000b6578616d706c652e6f7267";
    const ALPN_H3: &str = "001000050003026833";

    #[test]
    fn initial_keys_match_the_rfcs() {
        let keys = client_keys(&SALT_V1, &hex(DCID), false).unwrap();
        assert_eq!(keys.key.to_vec(), hex("1f369613dd76d5467730efcbe3b1a22d"));
        assert_eq!(keys.iv.to_vec(), hex("fa044b2f42a3fd3b46fb255c"));
        assert_eq!(keys.hp.to_vec(), hex("9f50449e04a0e810283a1e9933adedd2"));
        let keys = client_keys(&SALT_V2, &hex(DCID), true).unwrap();
        assert_eq!(keys.key.to_vec(), hex("8b1a0bc121284290a29e0971b5cd045d"));
        assert_eq!(keys.iv.to_vec(), hex("91f73e2351d8fa91660e909f"));
        assert_eq!(keys.hp.to_vec(), hex("45b95e15235d6f45a6b19cbcb0294ba9"));
    }

    #[test]
    fn rfc9001_client_initial() {
        let mut t = TestContext::new();
        assert_eq!(run(Side::Up, &hex(RFC9001_INITIAL), &mut t), quic());
        assert_eq!(t.meta.quic_version.as_deref(), Some("v1"));
        assert_eq!(t.meta.host.as_deref(), Some("example.com"));
        assert_eq!(t.meta.tls_alpn.as_deref(), Some("alpn"));
        assert_eq!(t.meta.tls_version.as_deref(), Some("TLSv1.3"));
        assert_eq!(t.meta.ja4.as_deref(), Some("q13d0211an_62ed6f6ca7ad_4d634acda6c0"));
    }

    #[test]
    fn rfc9369_v2_client_initial() {
        let mut t = TestContext::new();
        assert_eq!(run(Side::Up, &hex(RFC9369_INITIAL), &mut t), quic());
        assert_eq!(t.meta.quic_version.as_deref(), Some("v2"));
        assert_eq!(t.meta.host.as_deref(), Some("example.com"));
        assert_eq!(t.meta.ja4.as_deref(), Some("q13d0211an_62ed6f6ca7ad_4d634acda6c0"));
    }

    #[test]
    fn test_sealer_reproduces_the_rfc_packet() {
        let mut frames = hex("060040f1");
        frames.extend(hex(RFC9001_HELLO));
        assert_eq!(seal_v1(&frames), hex(RFC9001_INITIAL));
    }

    #[test]
    fn server_initial_is_quic_without_metadata() {
        let mut t = TestContext::new();
        assert_eq!(run(Side::Down, &hex(RFC9001_SERVER_INITIAL), &mut t), quic());
        assert_eq!(t.meta.host, None);
        assert_eq!(t.meta.quic_version.as_deref(), Some("v1"));
    }

    #[test]
    fn damaged_initial_is_still_quic() {
        let mut packet = hex(RFC9001_INITIAL);
        packet[600] ^= 0x01;
        let mut t = TestContext::new();
        assert_eq!(run(Side::Up, &packet, &mut t), quic());
        assert_eq!(t.meta.host, None);
        // Below the client's 1200-byte floor an unopened Initial proves little.
        let mut t = TestContext::new();
        let mut small = hex(RFC9001_INITIAL);
        small.truncate(1100);
        small[17] = 0x3a;
        small[16] = 0x44;
        assert_eq!(run(Side::Up, &small, &mut t), Verdict::Maybe);
        assert_eq!(t.meta.quic_version, None);
    }

    #[test]
    fn crypto_frames_out_of_order() {
        let hello = hex(RFC9001_HELLO);
        let mut frames = vec![FRAME_PING];
        frames.extend(crypto_frame(150, &hello[150..]));
        frames.extend([FRAME_PADDING; 3]);
        frames.extend(crypto_frame(0, &hello[..70]));
        frames.extend(hex("0200000000"));
        frames.extend(crypto_frame(60, &hello[60..160]));
        let mut t = TestContext::new();
        assert_eq!(run(Side::Up, &seal_v1(&frames), &mut t), quic());
        assert_eq!(t.meta.host.as_deref(), Some("example.com"));
        assert_eq!(t.meta.ja4.as_deref(), Some("q13d0211an_62ed6f6ca7ad_4d634acda6c0"));
    }

    #[test]
    fn padding_runs_of_every_length_and_place() {
        for len in 0..70 {
            for tail in [&[][..], &[1], &[0x06, 0]] {
                let mut data = vec![0; len];
                data.extend_from_slice(tail);
                let expected = data.iter().take_while(|&&b| b == 0).count();
                assert_eq!(padding_run(&data), expected, "{len} zeros then {tail:?}");
            }
        }
    }

    #[test]
    fn long_padding_between_crypto_frames() {
        let hello = hex(RFC9001_HELLO);
        let mut frames = crypto_frame(0, &hello[..100]);
        frames.extend([FRAME_PADDING; 37]);
        frames.extend(crypto_frame(100, &hello[100..]));
        frames.extend([FRAME_PADDING; 600]);
        let mut t = TestContext::new();
        assert_eq!(run(Side::Up, &seal_v1(&frames), &mut t), quic());
        assert_eq!(t.meta.host.as_deref(), Some("example.com"));
    }

    #[test]
    fn hello_over_two_initials() {
        // A padding extension first pushes the SNI and ALPN into the second packet.
        let mut exts = hex("00150578");
        exts.extend([0u8; 0x578]);
        exts.extend(hex(SNI_EXAMPLE_ORG));
        exts.extend(hex(ALPN_H3));
        let hello = client_hello(&exts);
        let cut = 1000;
        let mut t = TestContext::new();
        let first = seal_v1(&crypto_frame(0, &hello[..cut]));
        assert_eq!(run(Side::Up, &first, &mut t), Verdict::Yes(Found::new("QUIC").more()));
        assert_eq!((t.meta.host.as_deref(), t.meta.ja4.as_deref()), (None, None));
        let second = seal(
            V1,
            &SALT_V1,
            false,
            &hex(DCID),
            3,
            &crypto_frame(cut, &hello[cut..]),
            1200,
        );
        assert_eq!(run(Side::Up, &second, &mut t), quic());
        assert_eq!(t.meta.host.as_deref(), Some("example.org"));
        assert_eq!(t.meta.tls_alpn.as_deref(), Some("h3"));
    }

    #[test]
    fn google_versions() {
        // Q050: gQUIC's own CRYPTO frame type holding a CHLO.
        let mut chlo = b"CHLO".to_vec();
        chlo.extend(hex("0200 0000 50414400 03000000 534e4900 12000000"));
        chlo.extend(b"---www.gstatic.com");
        let mut frames = vec![FRAME_GQUIC_CRYPTO, 0];
        frames.push(chlo.len() as u8);
        frames.extend(chlo);
        let mut t = TestContext::new();
        let q050 = seal(0x5130_3530, &SALT_Q050, false, &hex(DCID), 1, &frames, 1350);
        assert_eq!(run(Side::Up, &q050, &mut t), quic());
        assert_eq!(t.meta.host.as_deref(), Some("www.gstatic.com"));
        assert_eq!(t.meta.quic_version.as_deref(), Some("Q050"));
        // T051: a TLS ClientHello in the same frame type.
        let hello = client_hello(&hex(SNI_EXAMPLE_ORG));
        let mut frames = vec![FRAME_GQUIC_CRYPTO, 0, 0x40];
        frames.push(hello.len() as u8);
        frames.extend(hello);
        let mut t = TestContext::new();
        let t051 = seal(0x5430_3531, &SALT_T051, false, &hex(DCID), 1, &frames, 1350);
        assert_eq!(run(Side::Up, &t051, &mut t), quic());
        assert_eq!(t.meta.host.as_deref(), Some("example.org"));
        assert_eq!(t.meta.quic_version.as_deref(), Some("T051"));
    }

    #[test]
    fn plaintext_gquic() {
        let packet = |head: &str, pad: usize, sni: &[u8]| {
            let mut p = hex(head);
            p.extend(std::iter::repeat_n(b'-', pad));
            p.extend_from_slice(sni);
            p.resize(1350, 0);
            p
        };
        let mut t = TestContext::new();
        assert_eq!(
            run(Side::Up, &packet(Q046_HEAD, 438, b"play.google.com"), &mut t),
            quic()
        );
        assert_eq!(t.meta.host.as_deref(), Some("play.google.com"));
        assert_eq!(t.meta.quic_version.as_deref(), Some("Q046"));
        let mut t = TestContext::new();
        assert_eq!(
            run(Side::Up, &packet(Q024_HEAD, 391, b"mail.google.com"), &mut t),
            quic()
        );
        assert_eq!(t.meta.host.as_deref(), Some("mail.google.com"));
        assert_eq!(t.meta.quic_version.as_deref(), Some("Q024"));
        // A tag table whose offsets run backwards or past the end yields no name.
        let mut t = TestContext::new();
        let mut bad = packet(Q024_HEAD, 391, b"mail.google.com");
        bad[31 + 8 + 12..31 + 8 + 16].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert_eq!(run(Side::Up, &bad, &mut t), quic());
        assert_eq!(t.meta.host, None);
        // The server's packets carry no version.
        let mut t = TestContext::new();
        assert_eq!(run(Side::Down, &packet(Q024_HEAD, 391, b"x"), &mut t), Verdict::No);
    }

    #[test]
    fn forced_version_negotiation_and_dns_over_quic() {
        let mut exts = hex(SNI_EXAMPLE_ORG);
        exts.extend(hex("00100006000403646f71"));
        let hello = client_hello(&exts);
        let packet = seal(
            0x1a2a_3a4a,
            &SALT_V1,
            false,
            &hex(DCID),
            0,
            &crypto_frame(0, &hello),
            1200,
        );
        let mut t = TestContext::new();
        assert_eq!(
            run(Side::Up, &packet, &mut t),
            Verdict::Yes(Found::new("QUIC").app("DoH_DoT"))
        );
        assert_eq!(t.meta.host.as_deref(), Some("example.org"));
        assert_eq!(t.meta.quic_version.as_deref(), Some("1a2a3a4a"));
    }

    #[test]
    fn later_packets_of_a_quic_flow() {
        let mut t = TestContext::new();
        assert_eq!(run(Side::Up, &hex(RFC9001_INITIAL), &mut t), quic());
        assert_eq!(run(Side::Down, &hex("40f067a5502a4262b5aabbccddeeff"), &mut t), quic());
        // A Handshake packet.
        let mut handshake = hex(RFC9001_INITIAL);
        handshake[0] = 0xe0;
        assert_eq!(run(Side::Up, &handshake, &mut t), quic());
        let mut t = TestContext::new();
        assert_eq!(run(Side::Up, &handshake, &mut t), Verdict::Maybe);
    }

    #[test]
    fn not_quic() {
        let mut t = TestContext::new();
        let initial = hex(RFC9001_INITIAL);
        let mut unknown_version = initial.clone();
        unknown_version[1..5].copy_from_slice(&[0x12, 0x34, 0x56, 0x78]);
        let mut long_dcid = initial.clone();
        long_dcid[5] = 21;
        let mut no_fixed_bit = initial.clone();
        no_fixed_bit[0] = 0x80;
        let mut length_past_end = initial.clone();
        length_past_end[16] = 0x44;
        length_past_end[17] = 0xa0;
        let mut huge_token = initial.clone();
        huge_token[15] = 0xff;
        for data in [
            unknown_version,
            long_dcid,
            no_fixed_bit,
            length_past_end,
            huge_token,
            initial[..5].to_vec(),
            initial[..30].to_vec(),
            hex("c0"),
            hex("000100002112a4426b41474e4e7a76484e483539"),
            hex("12340100000100000000000003777777076578616d706c6503636f6d0000010001"),
            hex("16030100be010000ba0303"),
            hex("4001020304050607"),
            vec![0xff; 1300],
        ] {
            assert_eq!(
                run(Side::Up, &data, &mut t),
                Verdict::No,
                "{:02x?}",
                &data[..data.len().min(24)]
            );
        }
        assert_eq!(t.meta, Metadata::default());
    }

    #[test]
    fn hostile_plaintext() {
        let mut meta = Metadata::default();
        // An ACK claiming more ranges than bytes, a CRYPTO frame longer than the packet,
        // a CRYPTO offset far beyond the buffer.
        for frames in [
            hex("02 00 00 bfffffffffffffff 00"),
            hex("06 00 44ff 0100"),
            hex("06 bfffffffffffffff 05 0102030405"),
            hex("1c 00"),
            vec![],
        ] {
            assert_eq!(read_frames(&frames, false, &mut meta), Crypto::None);
        }
        assert_eq!(meta, Metadata::default());
        assert_eq!(varint(&hex("c0"), 0), None);
        assert_eq!(varint(&hex("4001"), 0), Some((1, 2)));
        assert!(long_header(&hex("c0000000010800")).is_none());
    }
}
