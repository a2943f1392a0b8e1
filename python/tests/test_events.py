from __future__ import annotations

import unittest

from tap_testing import Flow

from sluice_tap import (
    CREATED,
    DATA,
    DESTROYED,
    GAP,
    Event,
    EventParser,
    FlowKey,
    ProtocolError,
    TruncatedStreamError,
)

# A body that looks like headers, so that a parser reading it as one would fail.
TRICKY_BODY = b"x\nip1=10.0.0.1,ip2=10.0.0.2\n\n,event=CREATED\n"


def sample_stream() -> tuple[bytes, Flow]:
    flow = Flow()
    stream = (
        flow.created()
        + flow.request(b"GET / HTTP/1.1\r\n\r\n")
        + flow.response(TRICKY_BODY)
        + flow.data(1, b"")
        + flow.gap(2, 1400)
        + flow.destroyed("rst")
    )
    return stream, flow


def parse_all(pieces: list[bytes]) -> list[Event]:
    parser = EventParser()
    events = [event for piece in pieces for event in parser.feed(piece)]
    parser.finish()
    return events


class ParserTest(unittest.TestCase):
    def test_figure_5_example(self) -> None:
        body = bytes(range(256)) * 5 + b"\n" * 118
        stream = (
            b"ip1=192.168.0.1,ip2=192.168.0.2,port1=62918,port2=80,hop=0,l3=ipv4,l4=tcp,"
            b"event=CREATED,ts=1416138000123456789\n"
            b"ip1=192.168.0.1,ip2=192.168.0.2,port1=62918,port2=80,hop=0,l3=ipv4,l4=tcp,"
            b"event=DATA,ts=1416138000123999999,from=2,match=down,len=1398\n"
            + body
            + b"ip1=192.168.0.1,ip2=192.168.0.2,port1=62918,port2=80,hop=0,l3=ipv4,l4=tcp,"
            b"event=DESTROYED,ts=1416138001000000000,reason=fin\n"
        )
        created, data, destroyed = parse_all([stream])
        self.assertEqual(
            created,
            Event("192.168.0.1", "192.168.0.2", 62918, 80, 0, "ipv4", "tcp", CREATED, ts_ns=1416138000123456789),
        )
        self.assertEqual((data.kind, data.from_, data.match, data.length), (DATA, 2, "down", 1398))
        self.assertEqual(data.data, body)
        self.assertEqual((destroyed.kind, destroyed.reason, destroyed.ts_ns), (DESTROYED, "fin", 1416138001000000000))
        self.assertEqual(created.flow, destroyed.flow)

    def test_every_split_point_gives_the_same_events(self) -> None:
        stream, _ = sample_stream()
        expected = parse_all([stream])
        self.assertEqual([e.kind for e in expected], [CREATED, DATA, DATA, DATA, GAP, DESTROYED])
        self.assertEqual(expected[2].data, TRICKY_BODY)
        self.assertEqual(expected[3].data, b"")
        self.assertIsNone(expected[4].data)
        for cut in range(1, len(stream)):
            with self.subTest(cut=cut):
                self.assertEqual(parse_all([stream[:cut], stream[cut:]]), expected)

    def test_one_byte_at_a_time(self) -> None:
        stream, _ = sample_stream()
        self.assertEqual(parse_all([stream[i : i + 1] for i in range(len(stream))]), parse_all([stream]))

    def test_ipv6_and_unknown_keys_and_events(self) -> None:
        stream = (
            b"ip1=2001:db8::1,ip2=fe80::1%eth0,port1=1,port2=2,hop=3,l3=ipv6,l4=udp,event=CREATED,ts=5,vlan=7,x=a=b\n"
            # Only DATA carries a body, whatever the keys of an unknown event.
            b"ip1=2001:db8::1,ip2=fe80::1%eth0,port1=1,port2=2,hop=3,l3=ipv6,l4=udp,event=SPLICED,ts=6,len=4\n"
            b"ip1=2001:db8::1,ip2=fe80::1%eth0,port1=1,port2=2,hop=3,l3=ipv6,l4=udp,event=DESTROYED,ts=7,reason=idle\n"
        )
        created, unknown, destroyed = parse_all([stream])
        self.assertEqual(created.flow, FlowKey("2001:db8::1", "fe80::1%eth0", 1, 2, 3, "ipv6", "udp"))
        self.assertEqual(created.extra, {"vlan": "7", "x": "a=b"})
        self.assertEqual((unknown.kind, unknown.length, unknown.data), ("SPLICED", 4, None))
        self.assertEqual(destroyed.reason, "idle")

    def test_ts_is_optional(self) -> None:
        (event,) = parse_all([b"ip1=a,ip2=b,port1=1,port2=2,hop=0,l3=ipv4,l4=tcp,event=CREATED\n"])
        self.assertIsNone(event.ts_ns)


class ParserErrorTest(unittest.TestCase):
    def assert_error_at(self, stream: bytes, offset: int, words: str) -> ProtocolError:
        parser = EventParser(source="/run/sluice/tcp/http")
        with self.assertRaises(ProtocolError) as caught:
            list(parser.feed(stream))
            parser.finish()
        message = str(caught.exception)
        self.assertIn("/run/sluice/tcp/http", message)
        self.assertIn(f"at byte {offset}", message)
        self.assertIn(words, message)
        self.assertEqual(caught.exception.offset, offset)
        return caught.exception

    def test_malformed_headers_name_their_offset(self) -> None:
        good, flow = sample_stream()
        prefix = flow.prefix
        cases = {
            "missing key 'l4'": b"ip1=a,ip2=b,port1=1,port2=2,hop=0,l3=ipv4,event=CREATED\n",
            "is not key=value": prefix.encode() + b",event=CREATED,junk\n",
            "port1='65536'": b"ip1=a,ip2=b,port1=65536,port2=2,hop=0,l3=ipv4,l4=tcp,event=CREATED\n",
            "hop='-1'": b"ip1=a,ip2=b,port1=1,port2=2,hop=-1,l3=ipv4,l4=tcp,event=CREATED\n",
            "appears twice": prefix.encode() + b",event=CREATED,ts=1,ts=2\n",
            "needs len": prefix.encode() + b",event=DATA,from=1\nabc",
            "needs from=1 or from=2": prefix.encode() + b",event=GAP,from=3,len=1\n",
            "not ASCII": prefix.encode() + b",event=CREATED,host=\xc3\xa9\n",
        }
        for words, bad in cases.items():
            with self.subTest(words):
                self.assert_error_at(good + bad, len(good), words)

    def test_events_before_a_malformed_header_are_delivered(self) -> None:
        good, _ = sample_stream()
        events = EventParser().feed(good + b"garbage\n")
        self.assertEqual(len([next(events) for _ in range(6)]), 6)
        with self.assertRaises(ProtocolError):
            next(events)

    def test_endless_header_is_an_error(self) -> None:
        parser = EventParser(source="s", max_header_len=100)
        self.assertEqual(list(parser.feed(b"x" * 100)), [])
        with self.assertRaisesRegex(ProtocolError, "no newline in 100 bytes"):
            list(parser.feed(b"x"))

    def test_truncated_stream(self) -> None:
        stream, _ = sample_stream()
        body_end = stream.index(TRICKY_BODY) + len(TRICKY_BODY)
        header_start = stream.rindex(b"\n", 0, stream.index(TRICKY_BODY) - 1) + 1
        error = self.assert_error_at(stream[: body_end - 1], header_start, "inside an event body")
        self.assertIsInstance(error, TruncatedStreamError)
        self.assert_error_at(stream[:-1], stream.rindex(b"ip1="), "inside an event header")


class FormatTest(unittest.TestCase):
    flow = FlowKey.make(("2001:db8::1", 443), ("2001:db8::2", 8443), hop=1)

    def test_round_trip(self) -> None:
        events = [
            Event.for_flow(self.flow, CREATED, ts_ns=10, extra={"vlan": "7"}),
            Event.for_flow(self.flow, DATA, ts_ns=11, from_=1, data=TRICKY_BODY),
            Event.for_flow(self.flow, DATA, from_=2, data=b""),
            Event.for_flow(self.flow, GAP, ts_ns=12, from_=2, length=99),
            Event.for_flow(self.flow, DESTROYED, ts_ns=13, reason="active_timeout"),
        ]
        parsed = parse_all([b"".join(e.to_bytes() for e in events)])
        # Parsing fills in what the writer may leave implied.
        events[1].match, events[1].length = "up", len(TRICKY_BODY)
        events[2].match, events[2].length = "down", 0
        self.assertEqual(parsed, events)

    def test_key_order_follows_the_format(self) -> None:
        event = Event("10.0.0.1", "10.0.0.2", 1, 2, 0, "ipv4", "tcp", DATA, ts_ns=3, from_=1, data=b"ab")
        self.assertEqual(
            event.to_bytes(),
            b"ip1=10.0.0.1,ip2=10.0.0.2,port1=1,port2=2,hop=0,l3=ipv4,l4=tcp,event=DATA,ts=3,from=1,match=up,len=2\nab",
        )

    def test_unwritable_events_are_refused(self) -> None:
        cases = [
            Event.for_flow(self.flow, DATA, from_=1),
            Event.for_flow(self.flow, DATA, from_=3, data=b"x"),
            Event.for_flow(self.flow, DATA, from_=1, data=b"x", length=2),
            Event.for_flow(self.flow, CREATED, extra={"a,b": "1"}),
            Event.for_flow(self.flow, CREATED, extra={"note": "a\nb"}),
            Event.for_flow(self.flow, CREATED, extra={"len": "1"}),
        ]
        for event in cases:
            with self.subTest(event=event), self.assertRaises(ValueError):
                event.to_bytes()

    def test_flow_key_takes_l3_from_the_addresses(self) -> None:
        self.assertEqual(FlowKey.make(("10.0.0.1", 1), ("10.0.0.2", 2)).l3, "ipv4")
        self.assertEqual(self.flow.l3, "ipv6")
        with self.assertRaises(ValueError):
            FlowKey.make(("10.0.0.1", 1), ("::1", 2))


if __name__ == "__main__":
    unittest.main()
