"""HTTP/1.x analyzer for Sluice's stream interfaces.

Pairs each request of a flow with its response and writes one JSON object
per exchange, in the spirit of SF-TAP's HTTP analyzer::

    {"ts": 1416138000123456789,
     "client": {"ip": ..., "port": ..., "header": {...}, "method": {"method": "GET", "uri": "/", "ver": "HTTP/1.1"},
                "trailer": {}, "body_len": 0},
     "server": {"ip": ..., "port": ..., "header": {...}, "response": {"ver": "HTTP/1.1", "code": 200, "msg": "OK"},
                "trailer": {}, "body_len": 1234}}

``ts`` is the packet time of the request's first byte. ``server`` is null
when no complete response was seen: the flow ended first, or a capture gap
or unparseable data made the server's side unreadable. A request cut off by
the end of the flow, a gap or unparseable data is not reported.

With ``--loopback DIR/loopback7`` the inside of each CONNECT tunnel (what
follows a 2xx answer, in both directions) is written back into sluice's L7
loopback, which classifies it and serves it one hop further (a TLS session
through a proxy appears on ``tcp/tls``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from types import FrameType
from typing import Any, Callable, Protocol, TextIO

from .balance import balanced_interfaces, run_balanced
from .client import Injector, connect
from .events import CREATED, DATA, DESTROYED, FROM_CLIENT, FROM_SERVER, GAP, Event, FlowKey, ProtocolError
from .http1 import NO_BODY, Framing, HttpParseError, Message, MessageReader, request_framing, response_framing

log = logging.getLogger("sluice_tap")

Record = dict[str, Any]


@dataclass
class Stats:
    flows: int = 0
    exchanges: int = 0
    # Exchanges reported with "server": null.
    unanswered: int = 0
    # Flow directions given up at a capture gap.
    gaps: int = 0
    # Flows with data that is not HTTP/1.x (counted once per flow).
    parse_errors: int = 0
    # Flows that switched protocols (CONNECT, Upgrade) and were no longer followed.
    tunnels: int = 0
    # CONNECT tunnels whose inside was written to sluice's L7 loopback.
    injected: int = 0

    def __str__(self) -> str:
        return " ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))


@dataclass
class _Exchange:
    request: Message
    response: Message | None = None


def _is_interim(response: Message) -> bool:
    # 1xx answers precede the final response; 101 is final (the protocol switches).
    return response.code is not None and 100 <= response.code < 200 and response.code != 101


class TunnelSink(Protocol):
    """Where the inside of a CONNECT tunnel goes: an :class:`Injector`."""

    def created(self, flow: FlowKey, ts_ns: int | None = None) -> None: ...

    def data(self, flow: FlowKey, from_: int, payload: bytes, ts_ns: int | None = None) -> None: ...

    def destroyed(self, flow: FlowKey, reason: str = "fin", ts_ns: int | None = None) -> None: ...


class _Flow:
    """One TCP connection: a reader per direction, and the exchanges in order."""

    def __init__(
        self, key: FlowKey, emit: Callable[[Record], None], stats: Stats, tunnels: TunnelSink | None = None
    ) -> None:
        self.key = key
        self._emit = emit
        self._stats = stats
        self._tunnels = tunnels
        # The tunnel's inside is being passed to `tunnels`.
        self._tunnelling = False
        self._exchanges: deque[_Exchange] = deque()
        self._answering: _Exchange | None = None
        self._saw_parse_error = False
        self.client = MessageReader(True, self._request_head, self._request_complete)
        self.server = MessageReader(False, self._response_head, self._response_complete)

    def data(self, event: Event) -> None:
        if self._tunnelling:
            assert self._tunnels is not None
            self._tunnels.data(self.key, event.from_, event.data or b"", event.ts_ns)
            return
        reader = self._reader(event)
        self._guarded(reader, lambda: reader.feed(event.data or b"", event.ts_ns))

    def gap(self, event: Event) -> None:
        if self._tunnelling:
            # The inner stream has a hole sluice cannot be told of: end it.
            self._end_tunnel("gap")
            return
        reader = self._reader(event)
        if reader.alive:
            # Past a hole there is no telling where the next message starts.
            self._stats.gaps += 1
            reader.stop()
            self._emit_ready()

    def end(self) -> None:
        if self._tunnelling:
            self._end_tunnel("fin")
        self._guarded(self.server, self.server.end_of_stream)
        self.client.stop()
        self._emit_ready()

    def _reader(self, event: Event) -> MessageReader:
        return self.client if event.from_ == FROM_CLIENT else self.server

    def _guarded(self, reader: MessageReader, action: Callable[[], None]) -> None:
        try:
            action()
        except HttpParseError as e:
            reader.stop()
            log.debug("%s: %s side: %s", self.key, "client" if reader is self.client else "server", e)
            if not self._saw_parse_error:
                self._saw_parse_error = True
                self._stats.parse_errors += 1
        self._emit_ready()

    def _request_head(self, request: Message) -> Framing:
        framing = request_framing(request.headers)
        self._exchanges.append(_Exchange(request))
        return framing

    def _request_complete(self, request: Message) -> None:
        if request.method == "CONNECT" or "upgrade" in request.headers:
            # Whether a tunnel or the next request follows depends on the answer.
            self.client.pause()
        self._emit_ready()

    def _response_head(self, response: Message) -> Framing:
        if _is_interim(response):
            return NO_BODY
        exchange = next((x for x in self._exchanges if x.response is None), None)
        if exchange is None:
            raise HttpParseError("a response without a request")
        exchange.response = response
        self._answering = exchange
        return response_framing(response, exchange.request.method or "")

    def _response_complete(self, response: Message) -> None:
        exchange, self._answering = self._answering, None
        if exchange is None:
            return
        code = response.code or 0
        if code == 101 or (exchange.request.method == "CONNECT" and 200 <= code < 300):
            self._stats.tunnels += 1
            if exchange.request.method == "CONNECT" and self._tunnels is not None:
                self._start_tunnel()
            self.client.stop()
            self.server.stop()
        elif self.client.paused and exchange is self._exchanges[-1]:
            self._guarded(self.client, self.client.resume)
        self._emit_ready()

    def _start_tunnel(self) -> None:
        """Write the tunnel's inside to `tunnels` from here on, beginning with
        what each side sent past the CONNECT request and its answer (a client
        may send its TLS ClientHello before the answer comes)."""
        assert self._tunnels is not None
        early = self.client.detach(), self.server.detach()
        self._tunnels.created(self.key)
        self._tunnelling = True
        self._stats.injected += 1
        for from_, data in zip((FROM_CLIENT, FROM_SERVER), early):
            if data:
                self._tunnels.data(self.key, from_, data)

    def _end_tunnel(self, reason: str) -> None:
        assert self._tunnels is not None
        self._tunnelling = False
        self._tunnels.destroyed(self.key, reason)

    def _emit_ready(self) -> None:
        """Report, in order, the exchanges that can no longer change."""
        while self._exchanges:
            head = self._exchanges[0]
            if not head.request.complete:
                if self.client.alive:
                    return
                self._exchanges.popleft()
                continue
            answered = head.response is not None and head.response.complete
            if not answered and self.server.alive:
                return
            self._exchanges.popleft()
            self._report(head.request, head.response if answered else None)
        if not self.client.alive:
            # No request is left to answer.
            self.server.stop()
        elif self.client.paused and not self.server.alive:
            # Only the lost answer could tell whether HTTP goes on.
            self.client.stop()

    def _report(self, request: Message, response: Message | None) -> None:
        self._stats.exchanges += 1
        if response is None:
            self._stats.unanswered += 1
        self._emit(exchange_record(self.key, request, response))


def exchange_record(key: FlowKey, request: Message, response: Message | None) -> Record:
    client = {
        "ip": key.ip1,
        "port": key.port1,
        "header": request.headers,
        "method": {"method": request.method, "uri": request.uri, "ver": request.version},
        "trailer": request.trailer,
        "body_len": request.body_len,
    }
    server = None
    if response is not None:
        server = {
            "ip": key.ip2,
            "port": key.port2,
            "header": response.headers,
            "response": {"ver": response.version, "code": response.code, "msg": response.reason},
            "trailer": response.trailer,
            "body_len": response.body_len,
        }
    return {"ts": request.ts_ns, "client": client, "server": server}


class HttpAnalyzer:
    """Feed it the events of an interface; it calls ``emit`` with one record per exchange."""

    def __init__(self, emit: Callable[[Record], None], tunnels: TunnelSink | None = None) -> None:
        self.stats = Stats()
        self._emit = emit
        self._tunnels = tunnels
        self._flows: dict[FlowKey, _Flow] = {}

    def feed(self, event: Event) -> None:
        key = event.flow
        if event.kind == CREATED:
            # A key seen again without DESTROYED: the old flow is over.
            self._end(key)
            self._flows[key] = _Flow(key, self._emit, self.stats, self._tunnels)
            self.stats.flows += 1
            return
        flow = self._flows.get(key)
        if flow is None:
            return
        if event.kind == DATA:
            flow.data(event)
        elif event.kind == GAP:
            flow.gap(event)
        elif event.kind == DESTROYED:
            self._end(key)

    def flush(self) -> None:
        """End every open flow, e.g. when the connection to sluice is lost."""
        for key in list(self._flows):
            self._end(key)

    def _end(self, key: FlowKey) -> None:
        flow = self._flows.pop(key, None)
        if flow is not None:
            flow.end()


class _Stop(BaseException):
    """Not an Exception, so that no ``except Exception`` on the way swallows
    it, as KeyboardInterrupt is not."""


# Seconds after which a stop is raised again while the watched block is
# still running: Python only prints an exception raised in a finalizer (a
# generator or socket closed by the garbage collector, which may run
# anywhere), and a SIGTERM handled there was lost, the analyzer reading on
# until its socket closed.
STOP_RETRY = 0.1


class _Shutdown:
    """Turns the first SIGINT or SIGTERM into _Stop, inside ``watching()`` once
    ``begin()`` has run, and never halfway through writing a line. A signal
    that comes earlier stops the watch at its ``begin()``. Once installed, a
    stop is raised again every ``STOP_RETRY`` seconds (SIGALRM) until the
    watched block has ended."""

    def __init__(self) -> None:
        self._watching = False
        self._writing = False
        self._requested = False
        self._installed = False

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)
        signal.signal(signal.SIGALRM, self._retry)
        self._installed = True

    @contextmanager
    def watching(self) -> Iterator[None]:
        try:
            try:
                yield
            finally:
                # From here no handler raises; one that raised just before
                # is caught below like any other stop.
                self._watching = False
        except _Stop:
            pass
        finally:
            if self._installed:
                signal.setitimer(signal.ITIMER_REAL, 0)

    def begin(self) -> None:
        """The first statement of a ``watching()`` block: from here a signal
        stops the block, and one that came before stops it now. (Set before
        the block's ``yield``, the flag would let a signal raise where the
        block cannot catch it; a signal before it was only noted, and the
        analyzer went on reading until its socket closed.)"""
        self._watching = True
        if self._requested:
            self._stop()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self._requested = True
        if not self._writing:
            self._stop()

    def _retry(self, signum: int, frame: FrameType | None) -> None:
        if self._requested and not self._writing:
            self._stop()

    def _stop(self) -> None:
        if self._watching:
            if self._installed:
                signal.setitimer(signal.ITIMER_REAL, STOP_RETRY, STOP_RETRY)
            raise _Stop

    def write_line(self, out: TextIO, line: str) -> None:
        self._writing = True
        try:
            out.write(line)
            out.flush()
        except BrokenPipeError:
            # Whoever read the output is gone; later writes must not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
            self._requested = True
        finally:
            self._writing = False
        if self._requested:
            self._stop()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sluice-http",
        description="Read HTTP/1.x flows from a sluice stream interface and print one JSON line per exchange.",
    )
    parser.add_argument(
        "socket", help="the interface socket, e.g. DIR/tcp/http (with --balance, the name without the number)"
    )
    parser.add_argument(
        "--balance",
        type=int,
        metavar="N",
        help="read the N sockets SOCKET0..SOCKET{N-1} in N processes and merge their output",
    )
    parser.add_argument("--reconnect", action="store_true", help="wait for the socket, and reconnect when it closes")
    parser.add_argument(
        "--retry-interval", type=float, default=1.0, metavar="SECONDS", help="how often to retry (default 1)"
    )
    parser.add_argument(
        "--loopback",
        metavar="PATH",
        help="write the inside of CONNECT tunnels into sluice's L7 loopback socket (DIR/loopback7)",
    )
    parser.add_argument("--stats", action="store_true", help="print counts to stderr at exit")
    args = parser.parse_args(argv)
    if args.balance is not None and args.balance < 1:
        parser.error("--balance needs at least 1")
    if args.retry_interval <= 0:
        parser.error("--retry-interval must be positive")
    return args


def _child_command(args: argparse.Namespace, socket: str) -> list[str]:
    command = [sys.executable, "-m", "sluice_tap.http", "--retry-interval", str(args.retry_interval)]
    if args.reconnect:
        command.append("--reconnect")
    if args.stats:
        command.append("--stats")
    if args.loopback:
        command += ["--loopback", args.loopback]
    return [*command, socket]


def _analyze(args: argparse.Namespace) -> int:
    shutdown = _Shutdown()
    shutdown.install()
    try:
        tunnels = Injector(args.loopback) if args.loopback else None
    except OSError as e:
        _say(f"--loopback: {e}")
        return 1
    analyzer = HttpAnalyzer(lambda record: shutdown.write_line(sys.stdout, json.dumps(record) + "\n"), tunnels)
    status = 0
    with shutdown.watching():
        shutdown.begin()
        try:
            for event in connect(args.socket, args.reconnect, args.retry_interval, on_disconnect=analyzer.flush):
                analyzer.feed(event)
        except (OSError, ProtocolError) as e:
            _say(str(e))
            status = 1
    if tunnels is not None:
        tunnels.close()
    if args.stats:
        _say(f"{args.socket}: {analyzer.stats}")
    return status


def _say(message: str) -> None:
    # One write per line: balanced children share stderr, and print() would
    # write the newline separately, letting their lines interleave.
    sys.stderr.write(f"sluice-http: {message}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(format="sluice-http: %(message)s", level=logging.WARNING)
    if args.balance is not None:
        return run_balanced([_child_command(args, s) for s in balanced_interfaces(args.socket, args.balance)])
    return _analyze(args)


if __name__ == "__main__":
    sys.exit(main())
