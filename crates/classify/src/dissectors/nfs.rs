//! NFS and its helpers (mount, portmapper/rpcbind) from an ONC RPC call (RFC 5531):
//! xid, message type CALL, RPC version 2, a program among NFS (100003), MOUNT
//! (100005) and PORTMAP (100000), a version 1..=4, and a credential flavour RPC
//! defines. Over TCP the call follows a record mark whose last-fragment bit is
//! set; nDPI files all three programs under "NFS".

use super::{Context, Dissector, Field, FirstByte, Found, Packet, Prefix, Side, Transport, Verdict, Wants, be32};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "NFS",
    wants: Wants::Both,
    first_byte: FirstByte::ANY,
    // Over TCP, a record mark of a last fragment that holds a reply header
    // at least.
    prefix: Prefix {
        tcp: &[Field::u32(0, LAST_FRAGMENT | 24, u32::MAX)],
        udp: &[],
    },
    inspect,
}];

const CALL: u32 = 0;
const RPC_VERSION: u32 = 2;
const PROGRAMS: &[u32] = &[100_000, 100_003, 100_005];
/// AUTH_NONE, AUTH_SYS, AUTH_SHORT, AUTH_DH, RPCSEC_GSS.
const FLAVOURS: &[u32] = &[0, 1, 2, 3, 6];
/// Through the credential's flavour and length.
const CALL_HEADER: usize = 32;
const LAST_FRAGMENT: u32 = 0x8000_0000;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.side == Side::Down {
        // A reply does not name its program: wait for a call, unless its
        // TCP record mark already rules RPC out (a reply's header is 24
        // bytes at least).
        let broken_mark = pkt.transport == Transport::Tcp
            && be32(pkt.data, 0).is_some_and(|mark| mark & LAST_FRAGMENT == 0 || (mark & !LAST_FRAGMENT) < 24);
        return if broken_mark { Verdict::No } else { Verdict::Maybe };
    }
    let data = pkt.data;
    let call = match pkt.transport {
        Transport::Udp => data,
        Transport::Tcp => {
            let Some(mark) = be32(data, 0) else {
                return Verdict::Maybe;
            };
            let len = (mark & !LAST_FRAGMENT) as usize;
            if mark & LAST_FRAGMENT == 0 || len < CALL_HEADER {
                return Verdict::No;
            }
            &data[4..]
        }
    };
    if call.len() < CALL_HEADER {
        return if pkt.transport == Transport::Tcp {
            Verdict::Maybe
        } else {
            Verdict::No
        };
    }
    let word = |i: usize| be32(call, 4 * i).unwrap_or(u32::MAX);
    let ok = word(1) == CALL
        && word(2) == RPC_VERSION
        && PROGRAMS.contains(&word(3))
        && (1..=4).contains(&word(4))
        && FLAVOURS.contains(&word(6))
        && word(7) <= 400;
    if ok {
        Verdict::Yes(Found::new("NFS"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::verdict_of;
    use super::*;

    /// NFSv3 GETATTR call from nfsv3.pcap, AUTH_SYS credential, cut after the flavour.
    const GETATTR: &[u8] = &[
        0x5e, 0x1d, 0x0b, 0xdc, 0, 0, 0, 0, 0, 0, 0, 2, 0x00, 0x01, 0x86, 0xa3, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0,
        0, 0, 0x34, 0x38, 0x47, 0x76, 0x0b,
    ];

    fn run(transport: Transport, side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, transport, side, (1022, 2049), data)
    }

    #[test]
    fn a_reply_without_a_valid_record_mark_is_refused() {
        assert_eq!(run(Transport::Tcp, Side::Down, &[0; 10]), Verdict::No);
        assert_eq!(
            run(Transport::Tcp, Side::Down, &[0x80, 0, 0, 0x1c, 0, 0]),
            Verdict::Maybe
        );
        assert_eq!(run(Transport::Udp, Side::Down, &[0; 10]), Verdict::Maybe);
    }

    #[test]
    fn udp_call() {
        assert_eq!(run(Transport::Udp, Side::Up, GETATTR), Verdict::Yes(Found::new("NFS")));
    }

    #[test]
    fn tcp_call_with_record_mark() {
        let mut d = (LAST_FRAGMENT | GETATTR.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(GETATTR);
        assert_eq!(run(Transport::Tcp, Side::Up, &d), Verdict::Yes(Found::new("NFS")));
        assert_eq!(run(Transport::Tcp, Side::Up, &d[..20]), Verdict::Maybe);
        d[0] = 0;
        assert_eq!(run(Transport::Tcp, Side::Up, &d), Verdict::No);
    }

    #[test]
    fn other_rpc_programs_and_fields() {
        let mut d = GETATTR.to_vec();
        d[15] = 0xa4; // 100004, NIS
        assert_eq!(run(Transport::Udp, Side::Up, &d), Verdict::No);
        let mut d = GETATTR.to_vec();
        d[7] = 1; // a reply
        assert_eq!(run(Transport::Udp, Side::Up, &d), Verdict::No);
        let mut d = GETATTR.to_vec();
        d[19] = 9;
        assert_eq!(run(Transport::Udp, Side::Up, &d), Verdict::No);
        let mut d = GETATTR.to_vec();
        d[27] = 5;
        assert_eq!(run(Transport::Udp, Side::Up, &d), Verdict::No);
        assert_eq!(run(Transport::Udp, Side::Up, &GETATTR[..20]), Verdict::No);
        assert_eq!(run(Transport::Udp, Side::Down, GETATTR), Verdict::Maybe);
        assert_eq!(run(Transport::Udp, Side::Up, &[0u8; 40]), Verdict::No);
    }
}
