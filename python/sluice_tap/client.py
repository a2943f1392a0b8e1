"""Reading a stream interface and writing to the L7 loopback, over UNIX sockets."""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections.abc import Generator, Iterator
from types import TracebackType
from typing import Callable

from .events import CREATED, DATA, DESTROYED, Event, EventParser, FlowKey

log = logging.getLogger("sluice_tap")

RECV_SIZE = 256 * 1024

# Only these mean "sluice is not serving yet, or is restarting"; anything
# else (a permission problem, a path that is not a socket) will not heal
# by waiting.
_TRANSIENT = (errno.ENOENT, errno.ECONNREFUSED)


def _open_socket(path: str) -> socket.socket:
    """A connected UNIX stream socket; a failure names the path."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as e:
        sock.close()
        # OSError(errno, ...) builds the matching subclass, e.g. FileNotFoundError.
        raise OSError(e.errno, f"cannot connect to sluice interface: {e.strerror}", path) from None
    return sock


def connect(
    path: str,
    reconnect: bool = False,
    retry_interval: float = 1.0,
    on_disconnect: Callable[[], None] | None = None,
) -> Generator[Event, None, None]:
    """The events of the interface socket at ``path``, as they arrive.

    Without ``reconnect`` the generator ends when sluice closes the socket.
    With it, it waits (polling every ``retry_interval`` seconds) for the
    socket to appear, and reconnects after the socket closes, so it runs
    until the consumer stops iterating. ``on_disconnect`` is called each time
    a connection ends without a ProtocolError: flows still open then will get
    no more events, since a new connection only receives flows created after
    it.
    """
    while True:
        sock = _open_when_ready(path, reconnect, retry_interval)
        parser = EventParser(source=path)
        with sock:
            yield from _read(sock, parser, reconnect)
        if not reconnect:
            parser.finish()
        elif parser.pending:
            log.warning("%s: connection ended inside an event at byte %d; dropped it", path, parser.offset)
        if on_disconnect is not None:
            on_disconnect()
        if not reconnect:
            return
        log.info("%s: connection closed; reconnecting", path)
        if parser.offset == 0:
            # A server that accepts and closes at once must not make this spin.
            time.sleep(retry_interval)


def _open_when_ready(path: str, wait: bool, retry_interval: float) -> socket.socket:
    while True:
        try:
            return _open_socket(path)
        except OSError as e:
            if not wait or e.errno not in _TRANSIENT:
                raise
        time.sleep(retry_interval)


def _read(sock: socket.socket, parser: EventParser, tolerate_reset: bool) -> Iterator[Event]:
    while True:
        try:
            chunk = sock.recv(RECV_SIZE)
        except ConnectionResetError:
            if not tolerate_reset:
                raise
            chunk = b""
        if not chunk:
            return
        yield from parser.feed(chunk)


class Injector:
    """Writes events into sluice's L7 loopback socket (``DIR/loopback7``).

    An analyzer that decapsulates a stream re-injects its inner flow here.
    ``hop`` in the flow key is the hop of the flow the inner one came from;
    sluice adds one, and drops flows above its hop limit. Not thread-safe:
    events from two threads could interleave mid-event.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._sock = _open_socket(path)

    def send(self, event: Event) -> None:
        self._sock.sendall(event.to_bytes())

    def created(self, flow: FlowKey, ts_ns: int | None = None) -> None:
        self.send(Event.for_flow(flow, CREATED, ts_ns=ts_ns))

    def data(self, flow: FlowKey, from_: int, payload: bytes, ts_ns: int | None = None) -> None:
        self.send(Event.for_flow(flow, DATA, ts_ns=ts_ns, from_=from_, data=payload))

    def destroyed(self, flow: FlowKey, reason: str = "fin", ts_ns: int | None = None) -> None:
        self.send(Event.for_flow(flow, DESTROYED, ts_ns=ts_ns, reason=reason))

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Injector:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
