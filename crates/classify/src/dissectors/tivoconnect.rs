//! TiVo Connect's discovery beacon (TiVo's "TiVo Connect Automatic Machine
//! Discovery Protocol", UDP broadcasts and TCP on port 2190): lines of
//! `key=value`, the first always `tivoconnect=` and the protocol's version
//! number, then `swversion`, `method`, `identity`, `machine`, `platform` and
//! `services`. The beacon's `machine`, the name its owner gave the device,
//! goes into `client_banner` with its `platform`.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "TiVoConnect",
    wants: Wants::Both,
    first_byte: FirstByte::is(ByteSet::of(b"tT")),
    prefix: Prefix::ANY,
    inspect,
}];

const KEY: &[u8] = b"tivoconnect=";

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let head = &data[..data.len().min(KEY.len())];
    if !head.eq_ignore_ascii_case(&KEY[..head.len()]) {
        return Verdict::No;
    }
    let rest = &data[head.len()..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    match rest.get(digits) {
        None if digits < 4 => return Verdict::Maybe,
        Some(b'\n' | b'\r') if (1..=3).contains(&digits) => {}
        _ => return Verdict::No,
    }
    let mut platform = None;
    for line in rest.split(|&b| b == b'\n').take(16) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(value) = line.strip_prefix(b"machine=") {
            Metadata::set_once(&mut ctx.meta.client_banner, value);
        } else if let Some(value) = line.strip_prefix(b"platform=") {
            platform = Some(value);
        }
    }
    if ctx.meta.client_banner.is_none()
        && let Some(value) = platform
    {
        Metadata::set_once(&mut ctx.meta.client_banner, value);
    }
    Verdict::Yes(Found::new("TiVoConnect"))
}

#[cfg(test)]
mod tests {
    use super::super::{Side, Transport, inspect_fresh, verdict_of};
    use super::*;

    const BEACON: &[u8] = b"tivoconnect=1\nswversion=20.7.4.RC1-746-2-746\nmethod=broadcast\nidentity=7460001907F2C15\nmachine=Living Room\nplatform=tcd/Series4\nservices=TiVoMediaServer:80/http\n";

    fn run(data: &[u8]) -> Verdict {
        verdict_of(inspect, Transport::Udp, Side::Up, (2190, 2190), data)
    }

    #[test]
    fn a_beacon_names_its_machine() {
        let (verdict, tc) = inspect_fresh(inspect, Transport::Udp, Side::Up, (2190, 2190), BEACON);
        assert_eq!(verdict, Verdict::Yes(Found::new("TiVoConnect")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("Living Room"));
        let unnamed = b"TiVoConnect=1\r\nplatform=pc/WinNT:10.0\r\n";
        let (verdict, tc) = inspect_fresh(inspect, Transport::Tcp, Side::Up, (50000, 2190), unnamed);
        assert_eq!(verdict, Verdict::Yes(Found::new("TiVoConnect")));
        assert_eq!(tc.meta.client_banner.as_deref(), Some("pc/WinNT:10.0"));
        assert_eq!(run(b"tivocon"), Verdict::Maybe);
        assert_eq!(run(b"tivoconnect=1"), Verdict::Maybe);
    }

    #[test]
    fn near_misses_are_refused() {
        assert_eq!(run(b"tivoconnect=\n"), Verdict::No);
        assert_eq!(run(b"tivoconnect=yes\n"), Verdict::No);
        assert_eq!(run(b"tivoconnect=123456\n"), Verdict::No);
        assert_eq!(run(b"tivoconnect: 1\n"), Verdict::No);
        assert_eq!(run(b"time=1\n"), Verdict::No);
    }
}
