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
