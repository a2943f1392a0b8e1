//! Valve's Source Engine server queries (A2S, developer.valvesoftware.com "Server
//! queries"): connectionless datagrams that start with 0xFFFFFFFF and a type byte.
//! Requests: A2S_INFO `T` with "Source Engine Query", A2S_PLAYER `U` and A2S_RULES
//! `V` with a 4-byte challenge. Replies: challenge `A`, info `I`, players `D`, rules `E`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "Source_Engine",
    wants: Wants::Udp,
    // The connectionless header, four 0xff.
    first_byte: FirstByte::is(ByteSet::of(&[0xff])),
    prefix: Prefix::ANY,
    inspect,
}];

const CONNECTIONLESS: &[u8] = &[0xff, 0xff, 0xff, 0xff];
const INFO_QUERY: &[u8] = b"Source Engine Query\0";
/// Replies shorter than this are not worth believing (an info reply carries names).
const MIN_REPLY: usize = 31;

fn inspect(pkt: &Packet, _ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let (Some(CONNECTIONLESS), Some(&kind)) = (data.get(..4), data.get(4)) else {
        return Verdict::No;
    };
    let body = &data[5..];
    let found = match (pkt.side, kind) {
        // The info request may carry a trailing challenge since the 2020 change.
        (Side::Up, b'T') => body.starts_with(INFO_QUERY) && matches!(body.len() - INFO_QUERY.len(), 0 | 4),
        (Side::Up, b'U' | b'V') => body.len() == 4,
        (Side::Down, b'A') => body.len() == 4,
        (Side::Down, b'I' | b'D' | b'E') => data.len() >= MIN_REPLY,
        _ => false,
    };
    if found {
        Verdict::Yes(Found::new("Source_Engine"))
    } else {
        Verdict::No
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Transport, verdict_of};
    use super::*;

    const INFO: &[u8] = b"\xff\xff\xff\xffTSource Engine Query\0";

    fn run(side: Side, data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, side, (21285, 27015), data)
    }

    #[test]
    fn info_request() {
        assert_eq!(run(Side::Up, INFO), Verdict::Yes(Found::new("Source_Engine")));
        let mut with_challenge = INFO.to_vec();
        with_challenge.extend_from_slice(&[1, 2, 3, 4]);
        assert_eq!(
            run(Side::Up, &with_challenge),
            Verdict::Yes(Found::new("Source_Engine"))
        );
    }

    #[test]
    fn player_request_and_challenge() {
        assert_eq!(
            run(Side::Up, b"\xff\xff\xff\xffU\xff\xff\xff\xff"),
            Verdict::Yes(Found::new("Source_Engine"))
        );
        assert_eq!(
            run(Side::Down, b"\xff\xff\xff\xffA\x12\x34\x56\x78"),
            Verdict::Yes(Found::new("Source_Engine"))
        );
    }

    #[test]
    fn info_reply() {
        let mut reply = b"\xff\xff\xff\xffI\x11My Server\0de_dust2\0csgo\0Counter-Strike\0".to_vec();
        reply.extend_from_slice(&[0xda, 0x02, 5, 10, 0]);
        assert_eq!(run(Side::Down, &reply), Verdict::Yes(Found::new("Source_Engine")));
        assert_eq!(run(Side::Down, &reply[..20]), Verdict::No);
    }

    #[test]
    fn other_connectionless_games_and_noise() {
        assert_eq!(run(Side::Up, b"\xff\xff\xff\xffgetstatus\n"), Verdict::No);
        assert_eq!(run(Side::Up, b"\xff\xff\xff\xffTSomething else\0"), Verdict::No);
        assert_eq!(run(Side::Up, b"\xff\xff\xff\xffU\x01"), Verdict::No);
        assert_eq!(run(Side::Down, INFO), Verdict::No);
        assert_eq!(run(Side::Up, &[0xff, 0xff, 0xff]), Verdict::No);
        assert_eq!(run(Side::Up, &[0u8; 25]), Verdict::No);
    }
}
