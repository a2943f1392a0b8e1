//! IKE, which nDPI labels IPSec, over UDP: the 28-byte ISAKMP header of IKEv1 (RFC 2408) or
//! IKEv2 (RFC 7296) — a non-zero initiator SPI, version 1.0 or 2.0, a known exchange type and
//! first payload (else `Maybe`), and a length equal to the message — directly on the datagram
//! (port 500) or after the four zero bytes of the non-ESP marker (RFC 3948, port 4500).

use super::{Context, Dissector, FirstByte, Found, Packet, Prefix, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "IPSec",
    wants: Wants::Udp,
    first_byte: FirstByte::ANY,
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: usize = 28;
const NON_ESP_MARKER: [u8; 4] = [0; 4];

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let message = match data.strip_prefix(&NON_ESP_MARKER) {
        Some(rest) => rest,
        None => data,
    };
    ike(message)
}

/// `Yes` for a consistent header; `Maybe` when only its first payload type is unknown (private
/// use, or a newer registration): the peer's answer may settle it.
fn ike(m: &[u8]) -> Verdict {
    let (Some(spi), Some(&next), Some(&version), Some(&exchange), Some(len)) =
        (m.get(..8), m.get(16), m.get(17), m.get(18), be32(m, 24))
    else {
        return Verdict::No;
    };
    let (exchange_ok, next_ok) = match version {
        // Base, identity protection, authentication only, aggressive, informational; quick
        // mode and new group. Payloads up to 20 (NAT-D) and 21 (NAT-OA) of RFC 3947.
        0x10 => (matches!(exchange, 1..=5 | 32 | 33), matches!(next, 0..=13 | 20 | 21)),
        // IKE_SA_INIT, IKE_AUTH, CREATE_CHILD_SA, INFORMATIONAL, IKE_SESSION_RESUME (RFC 5723),
        // IKE_INTERMEDIATE (RFC 9242) and IKE_FOLLOWUP_KE (RFC 9370); payloads 33 to 54.
        0x20 => (matches!(exchange, 34..=38 | 43 | 44), matches!(next, 0 | 33..=54)),
        _ => (false, false),
    };
    let len_ok = usize::try_from(len).is_ok_and(|len| len == m.len() && len >= HEADER);
    match (exchange_ok && spi.iter().any(|&b| b != 0) && len_ok, next_ok) {
        (true, true) => Verdict::Yes(Found::new("IPSec")),
        (true, false) => Verdict::Maybe,
        (false, _) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::hex;
    use super::super::{Side, TestContext, Transport, test_packet};
    use super::*;

    fn run(data: &[u8]) -> Verdict {
        let pkt = test_packet(Transport::Udp, Side::Up, 10500, 500, data);
        inspect(&pkt, &mut TestContext::new().ctx())
    }

    /// A header from a real packet, its length field set to `len`, padded to `len` bytes.
    fn message(header: &str, len: usize) -> Vec<u8> {
        let mut m = hex(header);
        m.resize(len, 0x5a);
        m[24..28].copy_from_slice(&(len as u32).to_be_bytes());
        m
    }

    // ipsec_isakmp_esp.pcap: IKEv2 IKE_SA_INIT request and response on port 500, IKE_AUTH (SK
    // payload) on port 4500.
    const INIT: &str = "b64ef32131a489520000000000000000212022080000000000000308";
    const INIT_REPLY: &str = "b64ef32131a489520000000000000000292022200000000000000034";
    const AUTH: &str = "b64ef32131a4895286babd39048869552e202308000000010000032c";

    #[test]
    fn ikev2() {
        let yes = Verdict::Yes(Found::new("IPSec"));
        assert_eq!(run(&message(INIT, 776)), yes);
        assert_eq!(run(&message(INIT_REPLY, 52)), yes);
        let mut natt = NON_ESP_MARKER.to_vec();
        natt.extend_from_slice(&message(AUTH, 812));
        assert_eq!(run(&natt), yes);
    }

    #[test]
    fn ikev1() {
        // The first message of an IKEv1 identity protection (main mode) exchange: SA payload,
        // responder cookie still zero.
        let main_mode = message("4a2bb6cbf6ac03a0000000000000000001100200000000000000009c", 156);
        assert_eq!(run(&main_mode), Verdict::Yes(Found::new("IPSec")));
    }

    #[test]
    fn altered_headers_are_not_ike() {
        let good = message(INIT, 776);
        // A zero SPI, version 3.0, an IKEv1 exchange under version 2, length off by one.
        for (at, value) in [(0usize, None), (17, Some(0x30u8)), (18, Some(2)), (27, Some(9))] {
            let mut bad = good.clone();
            match value {
                Some(v) => bad[at] = v,
                None => bad[..8].fill(0),
            }
            assert_eq!(run(&bad), Verdict::No, "byte {at}");
        }
        // Trailing bytes, or the marker on a message that is not IKE (ESP in UDP).
        // ipsec_isakmp_esp.pcap: an IKE_AUTH whose first payload is 127, not registered.
        let mut odd = NON_ESP_MARKER.to_vec();
        odd.extend_from_slice(&message(AUTH, 812));
        odd[20] = 0x7f;
        assert_eq!(run(&odd), Verdict::Maybe);
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(run(&longer), Verdict::No);
        assert_eq!(
            run(&hex("00000000cafe0001000000015a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a")),
            Verdict::No
        );
    }

    #[test]
    fn other_protocols_are_not_ike() {
        assert_eq!(run(&hex("000100002112a4425343644b3631746a5657366b")), Verdict::No);
        assert_eq!(run(&[0xff]), Verdict::No);
        for len in 0..HEADER {
            assert_eq!(run(&message(INIT, 776)[..len]), Verdict::No);
        }
        // The header of a message that claims more than 4 GiB.
        let mut huge = message(INIT, 776);
        huge[24..28].fill(0xff);
        assert_eq!(run(&huge), Verdict::No);
    }
}
