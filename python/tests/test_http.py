from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import unittest
from pathlib import Path

from tap_testing import (
    NDPI_PCAPS,
    SLUICE,
    TIMEOUT,
    EventServer,
    Recorder,
    Flow,
    TempDirTestCase,
    cli_command,
    cli_env,
    json_lines,
    run_cli,
    stats_of,
)

from sluice_tap import CREATED, DATA, DESTROYED, EventParser, FlowKey, Injector, connect
from sluice_tap.http import HttpAnalyzer, Stats

REQUESTS = (
    b"GET /a HTTP/1.1\r\nHost: example.com\r\nAccept: text/html\r\nAccept: */*\r\nX-Long: one\r\n two\r\n\r\n"
    b"POST /b?q=1 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello"
)
RESPONSES = (
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nContent-Type: text/plain\r\n\r\n0123456789"
    b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"4;ext=1\r\nwiki\r\n5\r\npedia\r\n0\r\nX-Checksum: abc\r\n\r\n"
)
TLS_HELLO = bytes.fromhex("16030100c4010000c00303") + bytes(range(40))


def keep_alive_exchanges(flow: Flow) -> bytes:
    """Two pipelined requests in one segment; the responses split at awkward places."""
    cut1, cut2 = RESPONSES.index(b"456"), RESPONSES.index(b"\r\nwiki") + 1
    return (
        flow.request(REQUESTS)
        + flow.response(RESPONSES[:cut1])
        + flow.response(RESPONSES[cut1:cut2])
        + flow.response(RESPONSES[cut2:])
        + flow.destroyed()
    )


def keep_alive_flow(flow: Flow) -> bytes:
    return flow.created() + keep_alive_exchanges(flow)


class TunnelRecorder:
    """Takes the calls the analyzer makes on an Injector."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def created(self, flow: FlowKey, ts_ns: int | None = None) -> None:
        self.calls.append(("created",))

    def data(self, flow: FlowKey, from_: int, payload: bytes, ts_ns: int | None = None) -> None:
        self.calls.append(("data", from_, payload))

    def destroyed(self, flow: FlowKey, reason: str = "fin", ts_ns: int | None = None) -> None:
        self.calls.append(("destroyed", reason))


def analyze(stream: bytes, tunnels: TunnelRecorder | None = None) -> tuple[list[dict], Stats]:
    records: list[dict] = []
    analyzer = HttpAnalyzer(records.append, tunnels)
    parser = EventParser()
    for event in parser.feed(stream):
        analyzer.feed(event)
    parser.finish()
    # What the CLI prints must be plain JSON.
    return [json.loads(json.dumps(r)) for r in records], analyzer.stats


def summary(records: list[dict]) -> list[tuple]:
    return [
        (r["client"]["method"]["method"], r["client"]["method"]["uri"], r["server"] and r["server"]["response"]["code"])
        for r in records
    ]


class AnalyzerTest(unittest.TestCase):
    def test_pipelined_keep_alive(self) -> None:
        flow = Flow()
        records, stats = analyze(keep_alive_flow(flow))
        self.assertEqual(summary(records), [("GET", "/a", 200), ("POST", "/b?q=1", 201)])
        first, second = records
        self.assertEqual(
            first["client"],
            {
                "ip": "192.168.0.1",
                "port": 62918,
                "header": {"host": "example.com", "accept": "text/html, */*", "x-long": "one two"},
                "method": {"method": "GET", "uri": "/a", "ver": "HTTP/1.1"},
                "trailer": {},
                "body_len": 0,
            },
        )
        self.assertEqual(
            first["server"],
            {
                "ip": "192.168.0.2",
                "port": 80,
                "header": {"content-length": "10", "content-type": "text/plain"},
                "response": {"ver": "HTTP/1.1", "code": 200, "msg": "OK"},
                "trailer": {},
                "body_len": 10,
            },
        )
        self.assertEqual(second["client"]["body_len"], 5)
        self.assertEqual((second["server"]["body_len"], second["server"]["trailer"]), (9, {"x-checksum": "abc"}))
        # Both requests arrived in the flow's first DATA event, the second event of the flow.
        self.assertEqual([r["ts"] for r in records], [1416138000123458789] * 2)
        self.assertEqual(stats, Stats(flows=1, exchanges=2))

    def test_messages_may_be_split_anywhere(self) -> None:
        expected, _ = analyze(keep_alive_flow(Flow()))
        for stream_is_request, whole in ((True, REQUESTS), (False, RESPONSES)):
            for cut in range(1, len(whole)):
                flow = Flow()
                pieces = [whole[:cut], whole[cut:]]
                if stream_is_request:
                    stream = flow.created() + b"".join(flow.request(p) for p in pieces) + flow.response(RESPONSES)
                else:
                    stream = flow.created() + flow.request(REQUESTS) + b"".join(flow.response(p) for p in pieces)
                records, _ = analyze(stream + flow.destroyed())
                with self.subTest(request=stream_is_request, cut=cut):
                    self.assertEqual(
                        [(r["client"], r["server"]) for r in records], [(r["client"], r["server"]) for r in expected]
                    )

    def test_ts_is_the_event_with_the_first_byte_of_the_request(self) -> None:
        flow = Flow()
        head2 = REQUESTS.index(b"POST")
        stream = flow.created() + flow.request(REQUESTS[: head2 + 3])
        first_ts = flow.ts
        stream += flow.request(REQUESTS[head2 + 3 :]) + flow.response(RESPONSES) + flow.destroyed()
        records, _ = analyze(stream)
        self.assertEqual([r["ts"] for r in records], [first_ts, first_ts])

    def test_head_has_no_body(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.request(b"HEAD /big HTTP/1.1\r\n\r\nGET /small HTTP/1.1\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") + flow.destroyed()
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("HEAD", "/big", 200), ("GET", "/small", 200)])
        self.assertEqual([r["server"]["body_len"] for r in records], [0, 2])
        self.assertEqual(stats.unanswered, 0)

    def test_304_204_and_interim_100(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.request(b'GET /cached HTTP/1.1\r\nIf-None-Match: "x"\r\n\r\n')
        # A 304 may announce the length of the body it does not send.
        stream += flow.response(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n")
        stream += flow.request(b"PUT /up HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 100 Continue\r\n\r\n") + flow.request(b"abc")
        stream += flow.response(b"HTTP/1.1 204 No Content\r\n\r\n") + flow.destroyed()
        records, _ = analyze(stream)
        self.assertEqual(summary(records), [("GET", "/cached", 304), ("PUT", "/up", 204)])
        self.assertEqual(records[1]["client"]["body_len"], 3)

    def test_body_until_close(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.request(b"GET / HTTP/1.0\r\n\r\n")
        stream += flow.response(b"HTTP/1.0 200 OK\r\n\r\nfirst") + flow.response(b" second") + flow.destroyed()
        records, _ = analyze(stream)
        self.assertEqual(records[0]["server"]["body_len"], 12)

    def test_unanswered_request_at_the_end(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.request(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") + flow.destroyed("idle")
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("GET", "/a", 200), ("GET", "/b", None)])
        self.assertIsNone(records[1]["server"])
        self.assertEqual(stats.unanswered, 1)

    def test_gap_in_the_server_direction(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.request(b"GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\npartial") + flow.gap(2, 1448)
        stream += flow.response(b"the rest of the body, unreadable now")
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("GET", "/1", 200), ("GET", "/2", None)])
        # Later requests are reported as they complete, with no response to wait for.
        records, stats = analyze(stream + flow.request(b"GET /3 HTTP/1.1\r\n\r\n"))
        self.assertEqual(summary(records)[-1], ("GET", "/3", None))
        self.assertEqual((stats.gaps, stats.unanswered, stats.parse_errors), (1, 2, 0))

    def test_gap_in_the_client_direction(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.request(
            b"GET /1 HTTP/1.1\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 9\r\n\r\nab"
        )
        stream += flow.gap(1, 7) + flow.request(b"GET /3 HTTP/1.1\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" * 3) + flow.destroyed()
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("GET", "/1", 200)])
        self.assertEqual((stats.gaps, stats.parse_errors), (1, 0))

    def test_not_http_is_skipped_without_harm_to_other_flows(self) -> None:
        tls, web = Flow(port1=40000, port2=443), Flow(port1=40001)
        stream = tls.created() + web.created() + tls.request(TLS_HELLO) + web.request(b"GET / HTTP/1.1\r\n\r\n")
        stream += tls.response(bytes(range(256))) + web.response(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        stream += tls.destroyed() + web.destroyed()
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("GET", "/", 200)])
        self.assertEqual((stats.flows, stats.parse_errors), (2, 1))

    def test_malformed_http_after_good_exchanges(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.request(b"GET /ok HTTP/1.1\r\n\r\nGET /bad HTTP/1.1\r\nno colon here\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") + flow.destroyed()
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("GET", "/ok", 200)])
        self.assertEqual(stats.parse_errors, 1)

    def test_response_without_request(self) -> None:
        flow = Flow()
        stream = flow.created() + flow.response(b"HTTP/1.1 200 OK\r\n\r\n") + flow.destroyed()
        self.assertEqual(analyze(stream)[1].parse_errors, 1)

    def test_connect_tunnel_is_not_parsed(self) -> None:
        flow = Flow(port2=3128)
        stream = flow.created() + flow.request(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        stream += flow.request(TLS_HELLO)  # sent early, before the answer
        stream += flow.response(b"HTTP/1.1 200 Connection established\r\n\r\n" + bytes(range(100)))
        stream += flow.request(TLS_HELLO) + flow.destroyed()
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("CONNECT", "example.com:443", 200)])
        self.assertEqual((stats.tunnels, stats.parse_errors), (1, 0))

    def test_connect_tunnel_inside_goes_to_the_loopback(self) -> None:
        flow = Flow(port2=3128)
        stream = flow.created() + flow.request(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
        stream += flow.request(TLS_HELLO)  # sent early, before the answer
        stream += flow.response(b"HTTP/1.1 200 Connection established\r\n\r\n" + bytes(range(100)))
        stream += flow.request(b"more") + flow.gap(2, 10) + flow.request(b"lost") + flow.destroyed()
        sink = TunnelRecorder()
        records, stats = analyze(stream, sink)
        self.assertEqual(summary(records), [("CONNECT", "example.com:443", 200)])
        self.assertEqual(
            [call[:3] for call in sink.calls],
            [("created",), ("data", 1, TLS_HELLO), ("data", 2, bytes(range(100))), ("data", 1, b"more"), ("destroyed", "gap")],
        )
        self.assertEqual((stats.tunnels, stats.injected), (1, 1))

    def test_refused_connect_injects_nothing(self) -> None:
        flow = Flow(port2=3128)
        stream = flow.created() + flow.request(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n") + flow.destroyed()
        sink = TunnelRecorder()
        self.assertEqual(analyze(stream, sink)[1].injected, 0)
        self.assertEqual(sink.calls, [])

    def test_connect_whose_answer_is_lost(self) -> None:
        flow = Flow(port2=3128)
        stream = flow.created() + flow.request(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n") + flow.gap(2, 39)
        # More than a paused reader would buffer.
        stream += flow.request(TLS_HELLO + bytes(70_000)) + flow.destroyed()
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("CONNECT", "example.com:443", None)])
        self.assertEqual((stats.gaps, stats.parse_errors), (1, 0))

    def test_refused_connect_goes_on_with_http(self) -> None:
        flow = Flow(port2=3128)
        stream = flow.created() + flow.request(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        stream += flow.request(b"GET http://example.com/ HTTP/1.1\r\n\r\n")
        stream += flow.response(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 4\r\n\r\nauth")
        stream += flow.response(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") + flow.destroyed()
        records, stats = analyze(stream)
        self.assertEqual(summary(records), [("CONNECT", "example.com:443", 407), ("GET", "http://example.com/", 200)])
        self.assertEqual(stats.tunnels, 0)

    def test_flush_ends_open_flows(self) -> None:
        flow = Flow()
        records: list[dict] = []
        analyzer = HttpAnalyzer(records.append)
        for event in EventParser().feed(flow.created() + flow.request(b"GET / HTTP/1.1\r\n\r\n")):
            analyzer.feed(event)
        self.assertEqual(records, [])
        analyzer.flush()
        self.assertEqual(summary(records), [("GET", "/", None)])


def read_lines(process: subprocess.Popen, count: int) -> list[dict]:
    """The first ``count`` lines of a running process's stdout."""
    assert process.stdout is not None
    data = b""
    deadline = time.monotonic() + TIMEOUT
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while data.count(b"\n") < count and time.monotonic() < deadline:
            if selector.select(deadline - time.monotonic()):
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    break
                data += chunk
    return json_lines(data)


def mixed_stream() -> bytes:
    """Interleaved flows: keep-alive, HEAD + 304, a gap, and one that is not HTTP."""
    keep, head, gap, tls = Flow(port1=1001), Flow(port1=1002), Flow(port1=1003), Flow(port1=1004, port2=443)
    return (
        keep.created()
        + head.created()
        + head.request(b"HEAD / HTTP/1.1\r\n\r\nGET /img HTTP/1.1\r\n\r\n")
        + tls.created()
        + tls.request(TLS_HELLO)
        + keep_alive_exchanges(keep)
        + head.response(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n")
        + gap.created()
        + gap.request(b"GET /gap HTTP/1.1\r\n\r\n")
        + gap.response(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01")
        + gap.gap(2, 8)
        + head.destroyed()
        + gap.destroyed("rst")
        + tls.destroyed()
    )


def pieces_of(stream: bytes, size: int) -> list[bytes]:
    return [stream[i : i + size] for i in range(0, len(stream), size)]


class CliTest(TempDirTestCase):
    def test_reads_a_socket_until_it_closes(self) -> None:
        server = EventServer(self.sock_path(), pieces_of(mixed_stream(), 7))
        result = run_cli("--stats", server.path)
        self.assertEqual(result.returncode, 0, result.stderr)
        records = json_lines(result.stdout)
        self.assertEqual(
            sorted(summary(records)),
            [
                ("GET", "/a", 200),
                ("GET", "/gap", None),
                ("GET", "/img", 304),
                ("HEAD", "/", 200),
                ("POST", "/b?q=1", 201),
            ],
        )
        self.assertEqual(
            stats_of(result.stderr, server.path),
            {"flows": 4, "exchanges": 5, "unanswered": 1, "gaps": 1, "parse_errors": 1, "tunnels": 0, "injected": 0},
        )

    def test_one_byte_at_a_time(self) -> None:
        flow = Flow()
        server = EventServer(self.sock_path(), pieces_of(keep_alive_flow(flow), 1))
        result = run_cli(server.path)
        self.assertEqual(summary(json_lines(result.stdout)), [("GET", "/a", 200), ("POST", "/b?q=1", 201)])

    def test_balance_merges_the_output_of_each_interface(self) -> None:
        base = self.sock_path("http")
        servers = [
            EventServer(f"{base}0", pieces_of(keep_alive_flow(Flow(port1=2000)), 50)),
            EventServer(f"{base}1", pieces_of(mixed_stream(), 50)),
        ]
        result = run_cli("--balance", "2", "--stats", base)
        self.assertEqual(result.returncode, 0, result.stderr)
        records = json_lines(result.stdout)
        self.assertEqual(sum(r["client"]["port"] == 2000 for r in records), 2)
        self.assertEqual(len(records), 7)
        self.assertEqual(stats_of(result.stderr, servers[0].path)["exchanges"], 2)
        self.assertEqual(stats_of(result.stderr, servers[1].path)["exchanges"], 5)

    def test_missing_socket(self) -> None:
        path = self.sock_path("absent")
        result = run_cli(path)
        self.assertEqual(result.returncode, 1)
        self.assertIn(path, result.stderr.decode())

    def test_a_failing_balanced_child_stops_the_others(self) -> None:
        base = self.sock_path("http")
        server = EventServer(f"{base}0", [Flow().created()], hold=True)
        self.addCleanup(server.release)
        result = run_cli("--balance", "2", base)
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"{base}1", result.stderr.decode())

    def test_reconnect_then_sigterm(self) -> None:
        path = self.sock_path()
        process = subprocess.Popen(
            cli_command("--reconnect", "--retry-interval", "0.05", "--stats", path),
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.addCleanup(process.kill)
        time.sleep(0.2)  # the analyzer is waiting for the socket to appear
        server = EventServer(path, [keep_alive_flow(Flow())], hold=True)
        self.addCleanup(server.release)
        self.assertEqual(len(read_lines(process, 2)), 2)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=TIMEOUT)
        self.assertEqual(process.returncode, 0, stderr)
        self.assertEqual(stats_of(stderr)["exchanges"], 2)

    def test_sigterm_stops_a_balanced_run(self) -> None:
        base = self.sock_path("http")
        servers = [EventServer(f"{base}{i}", [keep_alive_flow(Flow(port1=3000 + i))], hold=True) for i in range(2)]
        for server in servers:
            self.addCleanup(server.release)
        process = subprocess.Popen(
            cli_command("--balance", "2", base), env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.addCleanup(process.kill)
        records = read_lines(process, 4)
        self.assertEqual(sorted(r["client"]["port"] for r in records), [3000, 3000, 3001, 3001])
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=TIMEOUT)
        self.assertEqual(process.returncode, 0, stderr)


class RealTunnelTest(TempDirTestCase):
    """sluice abstract serves a real capture of a CONNECT tunnel; what the
    analyzer injects must be the tunnel's inside, byte for byte as tshark
    reassembles it past the CONNECT request and its answer."""

    def test_inside_of_a_real_connect_tunnel_is_injected_whole(self) -> None:
        capture = http_connect_capture(self)
        taps = self.sock_path("t")
        recorder = Recorder(self.sock_path("loopback7"))
        sluice = subprocess.Popen(
            [str(SLUICE), "abstract", "-r", str(capture), "--dir", taps, "--wait-for", "tcp/http"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        records: list[dict] = []
        with Injector(recorder.path) as injector:
            analyzer = HttpAnalyzer(records.append, injector)
            http = os.path.join(taps, "tcp", "http")
            deadline = time.monotonic() + TIMEOUT
            while not os.path.exists(http) and time.monotonic() < deadline and sluice.poll() is None:
                time.sleep(0.02)
            for event in connect(http):
                analyzer.feed(event)
            analyzer.flush()
        _, stderr = sluice.communicate(timeout=TIMEOUT)
        self.assertEqual(sluice.returncode, 0, stderr.decode())
        self.assertEqual(summary(records), [("CONNECT", "apache.org:443", 200)])

        parser = EventParser()
        injected = list(parser.feed(recorder.wait()))
        parser.finish()
        self.assertEqual((injected[0].kind, injected[-1].kind), (CREATED, DESTROYED))
        sides = {from_: b"".join(e.data or b"" for e in injected if e.kind == DATA and e.from_ == from_) for from_ in (1, 2)}
        client, server = tshark_follow(capture, port=8080)
        self.assertEqual(sides[1], client[client.index(b"\r\n\r\n") + 4 :])
        self.assertEqual(sides[2], server[server.index(b"\r\n\r\n") + 4 :])
        self.assertEqual(sides[1][:1], b"\x16", "a TLS handshake record opens the inside")


class LoopbackThroughSluiceTest(TempDirTestCase):
    """With --linger, `sluice abstract -r` takes back what the HTTP analyzer
    injects into its own loopback about a real CONNECT tunnel, and serves it
    one hop further, classified as TLS, on DIR/tcp/tls."""

    def test_a_tunnels_inside_comes_back_one_hop_further_on_the_tls_interface(self) -> None:
        capture = http_connect_capture(self)
        taps = self.sock_path("t")
        http, tls = os.path.join(taps, "tcp", "http"), os.path.join(taps, "tcp", "tls")
        sluice = subprocess.Popen(
            [str(SLUICE), "abstract", "-r", str(capture), "--dir", taps]
            + ["--wait-for", "tcp/http,tcp/tls", "--linger", "2s"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(tls) and time.monotonic() < deadline and sluice.poll() is None:
            time.sleep(0.02)
        tls_events: list = []
        tls_reader = threading.Thread(target=lambda: tls_events.extend(connect(tls)))
        tls_reader.start()
        records: list[dict] = []
        with Injector(os.path.join(taps, "loopback7")) as injector:
            analyzer = HttpAnalyzer(records.append, injector)
            for event in connect(http):
                analyzer.feed(event)
            analyzer.flush()
        _, stderr = sluice.communicate(timeout=TIMEOUT)
        tls_reader.join(TIMEOUT)
        self.assertEqual(sluice.returncode, 0, stderr.decode())
        self.assertEqual(summary(records), [("CONNECT", "apache.org:443", 200)])

        # The capture's own TLS flow is there too, at hop 0.
        self.assertEqual(sorted({e.hop for e in tls_events}), [0, 1])
        inner = [e for e in tls_events if e.hop == 1]
        self.assertEqual((inner[0].kind, inner[-1].kind), (CREATED, DESTROYED))
        sides = {n: b"".join(e.data or b"" for e in inner if e.kind == DATA and e.from_ == n) for n in (1, 2)}
        client, server = tshark_follow(capture, port=8080)
        self.assertEqual(sides[1], client[client.index(b"\r\n\r\n") + 4 :])
        self.assertEqual(sides[2], server[server.index(b"\r\n\r\n") + 4 :])


def http_connect_capture(test: unittest.TestCase) -> Path:
    """nDPI's capture of a CONNECT tunnel; skips the test without it, without
    a release build of sluice, or without tshark to check against."""
    capture = NDPI_PCAPS / "http_connect.pcap"
    for needed, what in ((capture, "the nDPI capture"), (SLUICE, "a release build of sluice")):
        if not needed.exists():
            test.skipTest(f"{needed} is absent: {what} is needed")
    if subprocess.run(["tshark", "--version"], capture_output=True).returncode != 0:
        test.skipTest("tshark is not installed")
    return capture


def tshark_follow(capture: Path, port: int) -> tuple[bytes, bytes]:
    """Both directions of the TCP stream to `port`, as tshark reassembles them."""
    for stream in range(8):
        out = subprocess.run(
            ["tshark", "-r", str(capture), "-q", "-z", f"follow,tcp,raw,{stream}"],
            capture_output=True,
            check=True,
        ).stdout.decode()
        lines = out.splitlines()
        nodes = [i for i, line in enumerate(lines) if line.startswith("Node ")]
        if len(nodes) == 2 and lines[nodes[1]].endswith(f":{port}"):
            # Unindented hex lines were sent by node 0 (the client), indented ones by node 1.
            data = [line for line in lines[nodes[1] + 1 :] if line and not line.startswith("=")]
            client = bytes.fromhex("".join(line for line in data if not line.startswith("\t")))
            server = bytes.fromhex("".join(line.strip() for line in data if line.startswith("\t")))
            return client, server
    raise AssertionError(f"no TCP stream to port {port} in {capture}")


class BalancedInterfaceNamesTest(unittest.TestCase):
    def test_names_follow_sluices_numbering(self) -> None:
        from sluice_tap.balance import balanced_interfaces

        self.assertEqual(balanced_interfaces("d/tcp/http", 1), ["d/tcp/http"])
        self.assertEqual(balanced_interfaces("d/tcp/http", 3), ["d/tcp/http0", "d/tcp/http1", "d/tcp/http2"])


class MergerStopTest(unittest.TestCase):
    def reap_at_cleanup(self, children: list) -> None:
        def reap() -> None:
            for child in children:
                child.process.kill()
                child.process.wait()
                child.process.stdout.close()

        self.addCleanup(reap)

    def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(self) -> None:
        import io
        import sys

        from sluice_tap.balance import STOP_GRACE, _Merger

        out = io.BytesIO()
        merger = _Merger(out)
        stubborn = (
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)"
        )
        merger.start([[sys.executable, "-c", stubborn]])
        self.reap_at_cleanup(merger._children)

        def stop_once_ready() -> None:
            deadline = time.monotonic() + TIMEOUT
            while b"ready" not in out.getvalue() and time.monotonic() < deadline:
                time.sleep(0.01)
            merger.stop_all()

        threading.Thread(target=stop_once_ready, daemon=True).start()
        started = time.monotonic()
        with self.assertLogs("sluice_tap", "WARNING") as logs:
            merger.run()
        self.assertLess(time.monotonic() - started, STOP_GRACE + TIMEOUT / 2)
        self.assertEqual(out.getvalue(), b"ready\n")
        self.assertFalse(merger.failed)
        self.assertIn("after SIGTERM; killed", logs.output[0])

    def test_a_stop_during_a_childs_start_reaches_that_child(self) -> None:
        import io
        import sys
        from unittest import mock

        from sluice_tap import balance

        merger = balance._Merger(io.BytesIO())
        started = []

        def stopped_while_starting(command: list[str]) -> balance._Child:
            # The stop comes after the fork, before the merger lists the child.
            child = real_child(command)
            started.append(child)
            merger.stop_all()
            return child

        real_child = balance._Child
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        with mock.patch.object(balance, "_Child", stopped_while_starting):
            merger.start([sleeper, sleeper])
        self.reap_at_cleanup(started)
        self.assertEqual(len(started), 1, "no child starts after the stop")
        self.assertEqual(started[0].process.wait(timeout=TIMEOUT), -signal.SIGTERM)


class ShutdownTest(unittest.TestCase):
    def test_a_signal_before_the_watch_begins_stops_it_at_once(self) -> None:
        from sluice_tap.http import _Shutdown

        shutdown = _Shutdown()
        shutdown._handle(signal.SIGTERM, None)
        reached = []
        with shutdown.watching():
            shutdown.begin()
            reached.append("body")
        self.assertEqual(reached, [])

    def test_a_stop_lost_in_a_finalizer_is_raised_again(self) -> None:
        from sluice_tap.http import _Shutdown, _Stop

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            self.addCleanup(signal.signal, signum, signal.getsignal(signum))
        self.addCleanup(signal.setitimer, signal.ITIMER_REAL, 0)
        lost = []
        self.addCleanup(setattr, sys, "unraisablehook", sys.unraisablehook)
        sys.unraisablehook = lambda unraisable: lost.append(unraisable.exc_type)
        shutdown = _Shutdown()
        shutdown.install()

        class Finalized:
            def __del__(self) -> None:
                # As if the SIGTERM came while the collector ran a finalizer.
                shutdown._handle(signal.SIGTERM, None)

        went_on = []
        started = time.monotonic()
        with shutdown.watching():
            shutdown.begin()
            Finalized()  # finalized at once: Python only prints its _Stop
            went_on.append("past the finalizer")
            time.sleep(TIMEOUT)  # as reading a quiet socket
            went_on.append("past the wait")
        self.assertEqual(lost, [_Stop])
        self.assertEqual(went_on, ["past the finalizer"])
        self.assertLess(time.monotonic() - started, TIMEOUT / 2)

    def test_a_signal_while_writing_stops_after_the_line(self) -> None:
        import io

        from sluice_tap.http import _Shutdown

        shutdown = _Shutdown()
        out = io.StringIO()

        class SignalledMidWrite(io.StringIO):
            def write(self, text: str) -> int:
                shutdown._handle(signal.SIGTERM, None)
                return out.write(text)

        written = []
        with shutdown.watching():
            shutdown.begin()
            shutdown.write_line(SignalledMidWrite(), "one line\n")
            written.append("after")
        self.assertEqual(out.getvalue(), "one line\n")
        self.assertEqual(written, [])


if __name__ == "__main__":
    unittest.main()
