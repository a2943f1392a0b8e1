//! What the tracker's tests build their packets from.

/// An IPv4 UDP datagram (RFC 791, RFC 768; checksums left 0).
pub fn udp_frame(src: ([u8; 4], u16), dst: ([u8; 4], u16), payload: &[u8]) -> Vec<u8> {
    let total = 28 + payload.len();
    let mut f = vec![0x45, 0, (total >> 8) as u8, total as u8, 0, 1, 0, 0, 64, 17, 0, 0];
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&dst.0);
    let udp = 8 + payload.len();
    f.extend_from_slice(&src.1.to_be_bytes());
    f.extend_from_slice(&dst.1.to_be_bytes());
    f.extend_from_slice(&[(udp >> 8) as u8, udp as u8, 0, 0]);
    f.extend_from_slice(payload);
    f
}

/// RTP (RFC 3550 §5.1): PCMU, 20 ms of payload bytes `fill`, the timestamp
/// 160 samples a sequence number.
// Not every test binary that shares this module sends RTP.
#[allow(dead_code)]
pub fn rtp_pcmu(seq: u16, ssrc: u32, fill: u8) -> Vec<u8> {
    let mut p = vec![0x80, 0];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&(160 * u32::from(seq)).to_be_bytes());
    p.extend_from_slice(&ssrc.to_be_bytes());
    p.extend(std::iter::repeat_n(fill, 160));
    p
}
