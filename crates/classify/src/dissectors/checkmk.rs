//! Checkmk agent output (TCP port 6556): the monitored host's agent speaks first
//! and its output opens with the section header `<<<check_mk>>>`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "CHECKMK",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(&[HEADER[0]])),
    prefix: Prefix::ANY,
    inspect,
}];

const HEADER: &[u8] = b"<<<check_mk>>>";

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    if pkt.side == Side::Up {
        // The server speaks first: a client that sends before it is some other protocol.
        return Verdict::No;
    }
    let data = pkt.data;
    let head = &data[..data.len().min(HEADER.len())];
    match (HEADER.starts_with(head), head.len() == HEADER.len()) {
        (true, true) => Verdict::Yes(Found::new("CHECKMK")),
        (true, false) => Verdict::Maybe,
        (false, _) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, test_packet, verdict_of};
    use super::*;

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Tcp, side, (58998, 6556), data)
    }

    #[test]
    fn agent_output() {
        assert_eq!(
            run(Side::Down, b"<<<check_mk>>>\nVersion: 1.4.0p9\n"),
            Verdict::Yes(Found::new("CHECKMK"))
        );
        assert_eq!(run(Side::Down, b"<<<check"), Verdict::Maybe);
    }

    #[test]
    fn not_checkmk() {
        assert_eq!(run(Side::Down, b"<<<df>>>\n"), Verdict::No);
        assert_eq!(run(Side::Down, b"SSH-2.0-OpenSSH\r\n"), Verdict::No);
        assert_eq!(run(Side::Up, b"GET /"), Verdict::No, "the agent speaks first");
        let mut tc = TestContext::new();
        let mut pkt = test_packet(Transport::Tcp, Side::Up, 58998, 6556, b"GET /");
        pkt.other_index = 1;
        assert_eq!(inspect(&pkt, &mut tc.ctx()), Verdict::No);
    }
}
