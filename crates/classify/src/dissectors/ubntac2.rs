//! Ubiquiti device discovery (UBNTAC2, UDP port 10001): a 4-byte header, version
//! 1 or 2, a command, and a 16-bit length of the rest, which is a list of TLVs
//! (type byte, 16-bit length, value: MAC/IP, firmware, hostname, model, ...) that
//! must end exactly at the end. The bare 4-byte v1 query counts only on port 10001.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be16};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "UBNTAC2",
    wants: Wants::Udp,
    // The version, 1 or 2.
    first_byte: FirstByte::is(ByteSet::of(&[1, 2])),
    prefix: Prefix::ANY,
    inspect,
}];

const PORT: u16 = 10001;
const QUERY: &[u8] = &[0x01, 0x00, 0x00, 0x00];
const MAX_TLVS: usize = 64;
/// The highest TLV type Ubiquiti firmware is known to send.
const MAX_TYPE: u8 = 0x30;
/// Announcements carry at least a MAC/IP pair and a name or model.
const MIN_TLVS: usize = 2;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    if data == QUERY {
        return if pkt.dst_port() == PORT {
            Verdict::Yes(Found::new("UBNTAC2"))
        } else {
            Verdict::No
        };
    }
    let (Some(&version), Some(&command), Some(len)) = (data.first(), data.get(1), be16(data, 2)) else {
        return Verdict::No;
    };
    if !matches!(version, 1 | 2) || command > 0x0f || usize::from(len) + 4 != data.len() {
        return Verdict::No;
    }
    let mut at = 4;
    for count in 0..MAX_TLVS {
        if at == data.len() {
            return if count >= MIN_TLVS {
                Verdict::Yes(Found::new("UBNTAC2"))
            } else {
                Verdict::No
            };
        }
        let (Some(&kind), Some(tlv_len)) = (data.get(at), be16(data, at + 1)) else {
            return Verdict::No;
        };
        if kind == 0 || kind > MAX_TYPE {
            return Verdict::No;
        }
        at += 3 + usize::from(tlv_len);
        if at > data.len() {
            return Verdict::No;
        }
    }
    Verdict::No
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, verdict_of};
    use super::*;

    fn announce() -> Vec<u8> {
        let mut body = vec![
            0x02, 0x00, 0x0a, 0x80, 0x2a, 0xa8, 0x8d, 0x69, 0x2b, 0xc0, 0xa8, 0x02, 0x15,
        ];
        body.extend_from_slice(&[0x01, 0x00, 0x06, 0x80, 0x2a, 0xa8, 0x8d, 0x69, 0x2b]);
        body.extend_from_slice(&[0x0b, 0x00, 0x04]);
        body.extend_from_slice(b"ubnt");
        body.extend_from_slice(&[0x0c, 0x00, 0x04]);
        body.extend_from_slice(b"UGW3");
        let mut d = vec![0x02, 0x06];
        d.extend_from_slice(&(body.len() as u16).to_be_bytes());
        d.extend_from_slice(&body);
        d
    }

    fn run(server_port: u16, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (34085, server_port), data)
    }

    #[test]
    fn announcement() {
        assert_eq!(run(PORT, &announce()), Verdict::Yes(Found::new("UBNTAC2")));
        assert_eq!(run(5000, &announce()), Verdict::Yes(Found::new("UBNTAC2")));
    }

    #[test]
    fn query_needs_the_port() {
        assert_eq!(run(PORT, QUERY), Verdict::Yes(Found::new("UBNTAC2")));
        assert_eq!(run(5000, QUERY), Verdict::No);
    }

    #[test]
    fn tlvs_must_tile() {
        let mut d = announce();
        d.push(0);
        assert_eq!(run(PORT, &d), Verdict::No);
        let mut d = announce();
        d[6] = 0xff;
        assert_eq!(run(PORT, &d), Verdict::No);
        let mut d = announce();
        d[4] = 0x7f;
        assert_eq!(run(PORT, &d), Verdict::No);
        assert_eq!(run(PORT, &[0x02, 0x06, 0x00, 0x03, 0x01, 0x00, 0x00]), Verdict::No);
        assert_eq!(run(PORT, &[0x02, 0x06, 0x00]), Verdict::No);
        assert_eq!(run(PORT, &[0x01, 0x00, 0x00, 0x03, 0x01, 0x00, 0x05]), Verdict::No);
    }
}
