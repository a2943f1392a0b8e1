from __future__ import annotations

import socket
import threading
import time
import unittest

from tap_testing import TIMEOUT, EventServer, Flow, Recorder, TempDirTestCase, one_byte_at_a_time

from sluice_tap import (
    CREATED,
    DATA,
    DESTROYED,
    Event,
    EventParser,
    FlowKey,
    Injector,
    ProtocolError,
    TruncatedStreamError,
    connect,
)

BODY = b"HTTP/1.1 200 OK\r\n\r\nip1=1.2.3.4,event=CREATED\n\n"


def flow_stream(flow: Flow) -> bytes:
    return flow.created() + flow.response(BODY) + flow.destroyed()


class ConnectTest(TempDirTestCase):
    def check_events(self, events: list[Event]) -> None:
        self.assertEqual([e.kind for e in events], [CREATED, DATA, DESTROYED])
        self.assertEqual(events[1].data, BODY)
        self.assertEqual(len({e.flow for e in events}), 1)

    def test_one_byte_at_a_time(self) -> None:
        server = EventServer(self.sock_path(), one_byte_at_a_time(flow_stream(Flow())))
        self.check_events(list(connect(server.path)))

    def test_awkward_boundaries(self) -> None:
        stream = flow_stream(Flow())
        body_at = stream.index(BODY)
        cuts = [
            3,  # inside "ip1="
            stream.index(b"\n"),  # just before a header's newline
            stream.index(b"\n") + 1,  # just after it
            body_at - 1,  # between "len=N" and its newline
            body_at + 1,  # one byte into the body
            body_at + BODY.index(b"ip1="),  # at the body's fake header
            body_at + len(BODY),  # exactly at the body's end
        ]
        pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]
        server = EventServer(self.sock_path(), pieces, pause=0.005)
        self.check_events(list(connect(server.path)))

    def test_missing_socket_is_named(self) -> None:
        path = self.sock_path("absent")
        with self.assertRaises(FileNotFoundError) as caught:
            next(connect(path))
        self.assertIn(path, str(caught.exception))

    def test_malformed_stream_names_socket_and_offset(self) -> None:
        first = Flow().created()
        server = EventServer(self.sock_path(), [first, b"hello\n"])
        events = connect(server.path)
        self.assertEqual(next(events).kind, CREATED)
        with self.assertRaises(ProtocolError) as caught:
            next(events)
        self.assertIn(server.path, str(caught.exception))
        self.assertIn(f"at byte {len(first)}", str(caught.exception))

    def test_truncated_stream_is_an_error_without_reconnect(self) -> None:
        stream = flow_stream(Flow())
        server = EventServer(self.sock_path(), [stream[:-5]])
        with self.assertRaises(TruncatedStreamError):
            list(connect(server.path))

    def test_reconnect_waits_for_the_socket_and_survives_restarts(self) -> None:
        path = self.sock_path()
        first, second = Flow(port1=1000), Flow(port1=2000)
        servers: list[EventServer] = []
        # The first server appears only after the client has started waiting for it.
        appear = threading.Timer(0.2, lambda: servers.append(EventServer(path, [flow_stream(first)])))
        appear.start()
        disconnects = []
        received: list[Event] = []
        events = connect(path, reconnect=True, retry_interval=0.02, on_disconnect=lambda: disconnects.append(1))
        deadline = time.monotonic() + TIMEOUT
        for event in events:
            received.append(event)
            if len(received) == 3:
                # Restarted: the old socket is gone until the new server binds it.
                appear.join()
                servers[0].join()
                time.sleep(0.1)
                servers.append(EventServer(path, one_byte_at_a_time(flow_stream(second))))
            if len(received) == 6 or time.monotonic() > deadline:
                break
        events.close()
        self.assertEqual([e.port1 for e in received], [1000] * 3 + [2000] * 3)
        self.check_events(received[3:])
        self.assertEqual(disconnects, [1])

    def test_reconnect_drops_a_truncated_event(self) -> None:
        path = self.sock_path()
        stream = flow_stream(Flow())
        server = EventServer(path, [stream[:-5]])
        received = []
        events = connect(path, reconnect=True, retry_interval=0.02)
        with self.assertLogs("sluice_tap", "WARNING") as logs:
            for event in events:
                received.append(event)
                if len(received) == 2:
                    server.join()
                    server = EventServer(path, [stream])
                if len(received) == 5:
                    break
        events.close()
        self.assertEqual([e.kind for e in received], [CREATED, DATA, CREATED, DATA, DESTROYED])
        self.assertIn("inside an event", logs.output[0])


class InjectorTest(TempDirTestCase):
    def test_written_events_parse_back(self) -> None:
        recorder = Recorder(self.sock_path("loopback7"))
        inner = FlowKey.make(("10.1.0.1", 50000), ("10.1.0.2", 443), hop=1)
        with Injector(recorder.path) as injector:
            injector.created(inner, ts_ns=5)
            injector.data(inner, 1, b"\x16\x03\x01\nip1=\n")
            injector.data(inner, 2, b"", ts_ns=7)
            injector.send(Event.for_flow(inner, "GAP", from_=2, length=10))
            injector.destroyed(inner, "rst")
        parser = EventParser()
        events = list(parser.feed(recorder.wait()))
        parser.finish()
        self.assertEqual([e.kind for e in events], [CREATED, DATA, DATA, "GAP", DESTROYED])
        self.assertTrue(all(e.flow == inner for e in events))
        self.assertEqual([e.ts_ns for e in events], [5, None, 7, None, None])
        self.assertEqual((events[1].from_, events[1].match, events[1].data), (1, "up", b"\x16\x03\x01\nip1=\n"))
        self.assertEqual((events[2].match, events[2].data), ("down", b""))
        self.assertEqual((events[3].length, events[4].reason), (10, "rst"))

    def test_missing_loopback_is_named(self) -> None:
        path = self.sock_path("loopback7")
        with self.assertRaises(FileNotFoundError) as caught:
            Injector(path)
        self.assertIn(path, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
