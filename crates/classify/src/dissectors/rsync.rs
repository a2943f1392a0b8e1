//! The rsync daemon protocol (TCP port 873): both sides open with the greeting
//! `@RSYNCD: ` followed by the protocol version (`30.0`), which is kept as the
//! sender's banner.

use super::{ByteSet, Context, Dissector, FirstByte, Found, Metadata, Packet, Prefix, Side, Verdict, Wants};

pub const DISSECTORS: &[Dissector] = &[Dissector {
    name: "RSYNC",
    wants: Wants::Tcp,
    first_byte: FirstByte::is(ByteSet::of(b"@")),
    prefix: Prefix::ANY,
    inspect,
}];

const GREETING: &[u8] = b"@RSYNCD: ";

fn inspect(pkt: &Packet, ctx: &mut Context) -> Verdict {
    let data = pkt.data;
    let head = &data[..data.len().min(GREETING.len())];
    if !GREETING.starts_with(head) {
        return Verdict::No;
    }
    let version = &data[head.len()..];
    match version.first() {
        None => Verdict::Maybe,
        Some(c) if c.is_ascii_digit() => {
            let line = version.split(|&b| b == b'\n').next().unwrap_or(version);
            let field = match pkt.side {
                Side::Up => &mut ctx.meta.client_banner,
                Side::Down => &mut ctx.meta.server_banner,
            };
            let mut banner = GREETING.to_vec();
            banner.extend_from_slice(line);
            Metadata::set_once(field, &banner);
            Verdict::Yes(Found::new("RSYNC"))
        }
        Some(_) => Verdict::No,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{TestContext, Transport, inspect_fresh};
    use super::*;

    fn run(side: Side, data: &[u8]) -> (Verdict, TestContext) {
        inspect_fresh(inspect, Transport::Tcp, side, (54489, 873), data)
    }

    #[test]
    fn greeting() {
        let (v, tc) = run(Side::Down, b"@RSYNCD: 30.0\n");
        assert_eq!(v, Verdict::Yes(Found::new("RSYNC")));
        assert_eq!(tc.meta.server_banner.as_deref(), Some("@RSYNCD: 30.0"));
        assert_eq!(run(Side::Up, b"@RSYN").0, Verdict::Maybe);
        assert_eq!(run(Side::Up, b"@RSYNCD: ").0, Verdict::Maybe);
    }

    #[test]
    fn not_rsync() {
        assert_eq!(run(Side::Up, b"@RSYNCD: OK\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"@RSYNC: 30\n").0, Verdict::No);
        assert_eq!(run(Side::Up, b"GET / HTTP/1.1").0, Verdict::No);
    }
}
