//! RX, the remote-procedure-call transport of AFS (web.mit.edu/kolya/afs/rx/rx-spec)
//! over UDP: a 28-byte header of epoch, connection id, call, sequence and serial
//! numbers, then a packet type 1..=13, flags valid for that type and a security
//! index 0..=3. The header alone is loose, so an AFS port (7000..=7009) is required.

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RX",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 28;
const DATA: u8 = 1;
const ACK: u8 = 2;
const CHALLENGE: u8 = 6;
const RESPONSE: u8 = 7;
const MAX_TYPE: u8 = 13;
/// Client-initiated, request-ack, last-packet, more-packets, slow-start, jumbo.
const FLAG_BITS: u8 = 0x01 | 0x02 | 0x04 | 0x08 | 0x20;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if !(7000..=7009).contains(&pkt.client_port) && !(7000..=7009).contains(&pkt.server_port) {
        return Verdict::No;
    }
    let data = pkt.data;
    if data.len() < HEADER || be32(data, 0) == Some(0) {
        return Verdict::No;
    }
    let (kind, flags, security) = (data[20], data[21], data[23]);
    if !(1..=MAX_TYPE).contains(&kind) || flags & !FLAG_BITS != 0 || security > 3 {
        return Verdict::No;
    }
    // Data packets count from sequence 1; the others carry none or their own.
    if kind == DATA && be32(data, 12) == Some(0) {
        return Verdict::No;
    }
    if matches!(kind, ACK | CHALLENGE | RESPONSE) && data.len() == HEADER {
        return Verdict::No;
    }
    Verdict::Yes(Found::new("RX"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, TestContext, Transport, test_packet, verdict_of};
    use super::*;

    /// A DATA packet from rx.pcap: epoch, cid, call 1, seq 1, serial 1, type 1, flags 5.
    fn data_packet() -> Vec<u8> {
        let mut d = vec![
            0xd7, 0x0f, 0xb3, 0x30, 0x5c, 0x22, 0x4f, 0xb0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1,
        ];
        d.extend_from_slice(&[0x01, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x04]);
        d
    }

    fn run(port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (port, 7000), data)
    }

    fn run_off_port(data: &[u8]) -> Verdict {
        let mut tc = TestContext::new();
        inspect(
            &test_packet(Transport::Udp, Side::Up, 40000, 40001, data),
            &mut tc.ctx(),
        )
    }

    #[test]
    fn data_packet_on_afs_port() {
        assert_eq!(run(7001, &data_packet()), Verdict::Yes(Found::new("RX")));
        assert_eq!(run_off_port(&data_packet()), Verdict::No);
    }

    #[test]
    fn bad_header_fields() {
        let mut d = data_packet();
        d[20] = 14;
        assert_eq!(run(7001, &d), Verdict::No);
        let mut d = data_packet();
        d[21] = 0x40;
        assert_eq!(run(7001, &d), Verdict::No);
        let mut d = data_packet();
        d[23] = 4;
        assert_eq!(run(7001, &d), Verdict::No);
        let mut d = data_packet();
        d[15] = 0;
        assert_eq!(run(7001, &d), Verdict::No);
        assert_eq!(run(7001, &data_packet()[..27]), Verdict::No);
        assert_eq!(run(7001, &[0u8; 40]), Verdict::No);
    }
}
