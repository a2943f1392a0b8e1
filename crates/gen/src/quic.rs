//! QUIC v1 Initial packets, protected as RFC 9001 §5 says with the keys every
//! observer can derive from the client's first Destination Connection ID.
//! A classifier that knows QUIC opens them and reads the TLS handshake
//! inside, so a generated flow is only honestly QUIC if they are sealed for
//! real; the packets after them are encrypted with keys no observer has, so
//! random bytes behind a short header are all they can look like.

use aes::Aes128;
use aes::cipher::BlockEncrypt;
use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, KeyInit, Nonce};
use hkdf::Hkdf;
use sha2::Sha256;

const SALT_V1: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad, 0xcc, 0xbb, 0x7f,
    0x0a,
];
const TAG_LEN: usize = 16;
/// RFC 9000 §14.1: datagrams carrying a client's Initial are at least this long.
pub(crate) const MIN_INITIAL: usize = 1200;

/// The packet protection keys of one side's Initial packets.
struct Keys {
    key: [u8; 16],
    iv: [u8; 12],
    hp: [u8; 16],
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Client,
    Server,
}

/// HKDF-Expand-Label (RFC 8446 §7.1) with an empty context.
fn expand_label(prk: &Hkdf<Sha256>, label: &[u8], out: &mut [u8]) {
    const PREFIX: &[u8] = b"tls13 ";
    let mut info = [0u8; 32];
    let label_len = PREFIX.len() + label.len();
    info[..2].copy_from_slice(&(out.len() as u16).to_be_bytes());
    info[2] = label_len as u8;
    info[3..3 + PREFIX.len()].copy_from_slice(PREFIX);
    info[3 + PREFIX.len()..3 + label_len].copy_from_slice(label);
    prk.expand(&info[..4 + label_len], out)
        .expect("QUIC's key lengths are far below HKDF-SHA256's limit");
}

fn initial_keys(original_dcid: &[u8], side: Side) -> Keys {
    let initial = Hkdf::<Sha256>::new(Some(&SALT_V1), original_dcid);
    let mut secret = [0u8; 32];
    let label: &[u8] = match side {
        Side::Client => b"client in",
        Side::Server => b"server in",
    };
    expand_label(&initial, label, &mut secret);
    let prk = Hkdf::<Sha256>::from_prk(&secret).expect("a 32-byte secret is a SHA-256 PRK");
    let mut keys = Keys {
        key: [0; 16],
        iv: [0; 12],
        hp: [0; 16],
    };
    expand_label(&prk, b"quic key", &mut keys.key);
    expand_label(&prk, b"quic iv", &mut keys.iv);
    expand_label(&prk, b"quic hp", &mut keys.hp);
    keys
}

/// The header fields of an Initial packet. Both sides' keys come from the
/// Destination Connection ID of the client's first Initial.
pub(crate) struct Initial<'a> {
    pub(crate) side: Side,
    pub(crate) original_dcid: &'a [u8],
    pub(crate) dcid: &'a [u8],
    pub(crate) scid: &'a [u8],
    pub(crate) pn: u32,
}

impl Initial<'_> {
    /// Seals `frames` into `out`, padded with PADDING frames to `size` bytes.
    pub(crate) fn seal(&self, frames: &[u8], size: usize, out: &mut Vec<u8>) {
        let Initial {
            side,
            original_dcid,
            dcid,
            scid,
            pn,
        } = *self;
        let keys = initial_keys(original_dcid, side);
        out.clear();
        // Long header, type Initial, a four-byte packet number.
        out.push(0xc3);
        out.extend_from_slice(&1u32.to_be_bytes());
        out.push(dcid.len() as u8);
        out.extend_from_slice(dcid);
        out.push(scid.len() as u8);
        out.extend_from_slice(scid);
        out.push(0);
        let length_at = out.len();
        out.extend_from_slice(&[0, 0]);
        let pn_at = out.len();
        out.extend_from_slice(&pn.to_be_bytes());
        let header_len = out.len();
        out.extend_from_slice(frames);
        out.resize(size.max(header_len + frames.len() + TAG_LEN) - TAG_LEN, 0);
        let length = out.len() + TAG_LEN - pn_at;
        out[length_at..pn_at].copy_from_slice(&(0x4000 | length as u16).to_be_bytes());

        let mut nonce = keys.iv;
        for (n, p) in nonce[8..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= p;
        }
        let (header, payload) = out.split_at_mut(header_len);
        let tag = Aes128Gcm::new(&keys.key.into())
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), header, payload)
            .expect("an Initial is far below AES-GCM's length limit");
        out.extend_from_slice(&tag);

        let mut mask = aes::Block::clone_from_slice(&out[pn_at + 4..pn_at + 4 + 16]);
        Aes128::new(&keys.hp.into()).encrypt_block(&mut mask);
        out[0] ^= mask[0] & 0x0f;
        for i in 0..4 {
            out[pn_at + i] ^= mask[1 + i];
        }
    }
}

/// Writes a CRYPTO frame at offset 0 holding a TLS 1.3 ClientHello for
/// `host` as a browser sends it over QUIC: ALPN h3, X25519 key share, and
/// the transport parameters.
pub(crate) fn client_hello_frame(host: &str, random: &[u8; 32], key_share: &[u8; 32], out: &mut Vec<u8>) {
    out.clear();
    let frame = crypto_frame_start(out);
    let message = handshake_start(out, 1);
    out.extend_from_slice(&[0x03, 0x03]);
    out.extend_from_slice(random);
    // No legacy session ID: RFC 9001 §8.4.
    out.push(0);
    out.extend_from_slice(&[0, 6, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03, 1, 0]);
    let extensions = open16(out);
    let name = host.as_bytes();
    out.extend_from_slice(&[0x00, 0x00]);
    push16(out, name.len() + 5);
    push16(out, name.len() + 3);
    out.push(0);
    push16(out, name.len());
    out.extend_from_slice(name);
    // supported_groups (x25519, secp256r1), signature_algorithms, ALPN h3.
    out.extend_from_slice(&[0x00, 0x0a, 0, 6, 0, 4, 0x00, 0x1d, 0x00, 0x17]);
    out.extend_from_slice(&[0x00, 0x0d, 0, 8, 0, 6, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01]);
    out.extend_from_slice(&[0x00, 0x10, 0, 5, 0, 3, 2, b'h', b'3']);
    // supported_versions: TLS 1.3 only; psk_key_exchange_modes: psk_dhe_ke.
    out.extend_from_slice(&[0x00, 0x2b, 0, 3, 2, 0x03, 0x04]);
    out.extend_from_slice(&[0x00, 0x2d, 0, 2, 1, 1]);
    out.extend_from_slice(&[0x00, 0x33, 0, 38, 0, 36, 0x00, 0x1d, 0, 32]);
    out.extend_from_slice(key_share);
    // quic_transport_parameters: max_idle_timeout 30 s, initial_max_data
    // 1 MiB, initial_max_stream_data_bidi_local 1 MiB, initial_max_streams_bidi
    // 100, an empty initial_source_connection_id.
    out.extend_from_slice(&[0x00, 0x39]);
    let parameters = open16(out);
    out.extend_from_slice(&[0x01, 0x04, 0x80, 0x00, 0x75, 0x30]);
    out.extend_from_slice(&[0x04, 0x04, 0x80, 0x10, 0x00, 0x00]);
    out.extend_from_slice(&[0x05, 0x04, 0x80, 0x10, 0x00, 0x00]);
    out.extend_from_slice(&[0x08, 0x02, 0x40, 0x64]);
    out.extend_from_slice(&[0x0f, 0x00]);
    close16(out, parameters);
    close16(out, extensions);
    close_handshake(out, message);
    close_crypto_frame(out, frame);
}

/// Writes an ACK of the client's packet 0, then a CRYPTO frame at offset 0
/// holding a ServerHello choosing TLS 1.3, TLS_AES_128_GCM_SHA256 and X25519.
pub(crate) fn server_hello_frames(random: &[u8; 32], key_share: &[u8; 32], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[0x02, 0, 0, 0, 0]);
    let frame = crypto_frame_start(out);
    let message = handshake_start(out, 2);
    out.extend_from_slice(&[0x03, 0x03]);
    out.extend_from_slice(random);
    out.push(0);
    out.extend_from_slice(&[0x13, 0x01, 0]);
    out.extend_from_slice(&[
        0, 46, 0x00, 0x2b, 0, 2, 0x03, 0x04, 0x00, 0x33, 0, 36, 0x00, 0x1d, 0, 32,
    ]);
    out.extend_from_slice(key_share);
    close_handshake(out, message);
    close_crypto_frame(out, frame);
}

/// A CRYPTO frame at offset 0 with a two-byte length, filled in by
/// `close_crypto_frame`.
fn crypto_frame_start(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(&[0x06, 0x00]);
    open16(out)
}

fn close_crypto_frame(out: &mut [u8], at: usize) {
    let len = out.len() - at - 2;
    out[at..at + 2].copy_from_slice(&(0x4000 | len as u16).to_be_bytes());
}

fn handshake_start(out: &mut Vec<u8>, kind: u8) -> usize {
    out.extend_from_slice(&[kind, 0, 0, 0]);
    out.len()
}

fn close_handshake(out: &mut [u8], body: usize) {
    let len = (out.len() - body) as u32;
    out[body - 3..body].copy_from_slice(&len.to_be_bytes()[1..]);
}

fn open16(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(&[0, 0]);
    out.len() - 2
}

fn close16(out: &mut [u8], at: usize) {
    let len = out.len() - at - 2;
    out[at..at + 2].copy_from_slice(&(len as u16).to_be_bytes());
}

fn push16(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&(v as u16).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    const DCID: &str = "8394c8f03e515708";

    #[test]
    fn initial_keys_match_rfc_9001() {
        let keys = initial_keys(&hex(DCID), Side::Client);
        assert_eq!(keys.key.to_vec(), hex("1f369613dd76d5467730efcbe3b1a22d"));
        assert_eq!(keys.iv.to_vec(), hex("fa044b2f42a3fd3b46fb255c"));
        assert_eq!(keys.hp.to_vec(), hex("9f50449e04a0e810283a1e9933adedd2"));
        let keys = initial_keys(&hex(DCID), Side::Server);
        assert_eq!(keys.key.to_vec(), hex("cf3a5331653c364c88f0f379b6067e37"));
        assert_eq!(keys.iv.to_vec(), hex("0ac1493ca1905853b0bba03e"));
        assert_eq!(keys.hp.to_vec(), hex("c206b8d9b9f0f37644430b490eeaa314"));
    }

    /// RFC 9001 Appendix A.2: the client's Initial, sealed from its
    /// CRYPTO frame; the protected header and the AEAD tag cover every key,
    /// the nonce and the header protection.
    #[test]
    fn sealing_reproduces_the_rfc_9001_client_initial() {
        let mut frames = hex("060040f1");
        frames.extend(hex(
            "010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e86804fe3a47f06a2b69484c00000413011302010000c0000000\
             10000e00000b6578616d706c652e636f6dff01000100000a00080006001d0017001800100007000504616c706e00050005010000\
             0000003300260024001d00209370b2c9caa47fbabaf4559fedba753de171fa71f50f1ce15d43e994ec74d748002b000302030400\
             0d0010000e0403050306030203080408050806002d00020101001c00024001003900320408ffffffffffffffff05048000ffff07\
             048000ffff0801100104800075300901100f088394c8f03e51570806048000ffff",
        ));
        let mut packet = Vec::new();
        let dcid = hex(DCID);
        let initial = Initial {
            side: Side::Client,
            original_dcid: &dcid,
            dcid: &dcid,
            scid: &[],
            pn: 2,
        };
        initial.seal(&frames, MIN_INITIAL, &mut packet);
        assert_eq!(packet.len(), MIN_INITIAL);
        assert_eq!(packet[..22], hex("c000000001088394c8f03e5157080000449e7b9aec34")[..]);
        assert_eq!(packet[MIN_INITIAL - 16..], hex("e221af44860018ab0856972e194cd934")[..]);
    }

    #[test]
    fn client_hello_lengths_are_consistent() {
        let mut frame = Vec::new();
        client_hello_frame("www.youtube.com", &[7; 32], &[9; 32], &mut frame);
        assert_eq!(frame[0], 0x06);
        let crypto_len = usize::from(u16::from_be_bytes([frame[2], frame[3]]) & 0x3fff);
        assert_eq!(crypto_len, frame.len() - 4);
        let hello_len = u32::from_be_bytes([0, frame[5], frame[6], frame[7]]) as usize;
        assert_eq!(hello_len, frame.len() - 8);
        let at = 8 + 2 + 32 + 1 + 8 + 2 + 2;
        let extensions_len = usize::from(u16::from_be_bytes([frame[at - 2], frame[at - 1]]));
        assert_eq!(extensions_len, frame.len() - at);
    }
}
