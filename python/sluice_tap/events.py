"""The event format of Sluice's stream interfaces, parsed and formatted.

One event is a header line of comma-separated ``key=value`` pairs ending in
``\\n``; a DATA event is followed by exactly ``len`` bytes of body. The full
format is in ``docs/abstractor.md`` at the root of the Sluice repository.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

CREATED = "CREATED"
DATA = "DATA"
GAP = "GAP"
DESTROYED = "DESTROYED"

FROM_CLIENT = 1
FROM_SERVER = 2

# A header is a few hundred bytes; the cap only stops a desynchronised or
# hostile stream from growing the buffer without end.
MAX_HEADER_LEN = 64 * 1024

_FLOW_KEYS = ("ip1", "ip2", "port1", "port2", "hop", "l3", "l4", "event")
_KNOWN_KEYS = frozenset((*_FLOW_KEYS, "ts", "from", "match", "len", "reason"))
_MATCH_FOR = {FROM_CLIENT: "up", FROM_SERVER: "down"}


class ProtocolError(ValueError):
    """The byte stream does not follow the event format.

    ``source`` names the stream (the socket path) and ``offset`` is the byte
    offset, from the start of the connection, of the offending event.
    """

    def __init__(self, source: str, offset: int, problem: str, header: bytes = b"") -> None:
        self.source = source
        self.offset = offset
        self.problem = problem
        excerpt = f": {header[:200]!r}" if header else ""
        super().__init__(f"{source}: malformed event at byte {offset}: {problem}{excerpt}")


class TruncatedStreamError(ProtocolError):
    """The stream ended in the middle of an event."""


class FlowKey(NamedTuple):
    """Identifies one flow on an interface; every event of the flow has it."""

    ip1: str
    ip2: str
    port1: int
    port2: int
    hop: int
    l3: str
    l4: str

    @classmethod
    def make(cls, client: tuple[str, int], server: tuple[str, int], l4: str = "tcp", hop: int = 0) -> FlowKey:
        """A key from (address, port) pairs, with ``l3`` taken from the address family."""
        version = ipaddress.ip_address(client[0]).version
        if ipaddress.ip_address(server[0]).version != version:
            raise ValueError(f"client {client[0]} and server {server[0]} are of different IP versions")
        return cls(client[0], server[0], client[1], server[1], hop, f"ipv{version}", l4)


@dataclass
class Event:
    """One event of a stream interface.

    ``kind`` is the ``event`` key (CREATED, DATA, GAP, DESTROYED, or a kind
    this version does not know, which consumers should ignore). ``from_`` is
    1 for the client (ip1) and 2 for the server (ip2). ``extra`` keeps, in
    order, the keys this version does not know.
    """

    ip1: str
    ip2: str
    port1: int
    port2: int
    hop: int
    l3: str
    l4: str
    kind: str
    ts_ns: int | None = None
    from_: int | None = None
    match: str | None = None
    length: int | None = None
    reason: str | None = None
    data: bytes | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def for_flow(cls, flow: FlowKey, kind: str, **fields: object) -> Event:
        """An event of ``flow``; the other fields by keyword."""
        return cls(*flow, kind=kind, **fields)  # type: ignore[arg-type]

    @property
    def flow(self) -> FlowKey:
        """The key shared by all events of this event's flow."""
        return FlowKey(self.ip1, self.ip2, self.port1, self.port2, self.hop, self.l3, self.l4)

    def to_bytes(self) -> bytes:
        """The event in wire form: the header line, then the body of a DATA event."""
        body = self._body()
        pairs: list[tuple[str, object]] = [
            ("ip1", self.ip1),
            ("ip2", self.ip2),
            ("port1", self.port1),
            ("port2", self.port2),
            ("hop", self.hop),
            ("l3", self.l3),
            ("l4", self.l4),
            ("event", self.kind),
            ("ts", self.ts_ns),
            ("from", self.from_),
            ("match", self._wire_match()),
            ("len", len(body) if self.kind == DATA else self.length),
            ("reason", self.reason),
        ]
        for key, value in self.extra.items():
            if key in _KNOWN_KEYS:
                raise ValueError(f"extra key {key!r} is a known key; set the field instead")
            pairs.append((key, value))
        header = ",".join(_format_pair(key, value) for key, value in pairs if value is not None)
        return header.encode("ascii") + b"\n" + body

    def _body(self) -> bytes:
        if self.kind != DATA:
            return b""
        if self.data is None or self.from_ not in _MATCH_FOR:
            raise ValueError("a DATA event needs data and from_ (1 or 2)")
        if self.length is not None and self.length != len(self.data):
            raise ValueError(f"length {self.length} differs from the {len(self.data)} bytes of data")
        return self.data

    def _wire_match(self) -> str | None:
        # match is implied by the direction, so writers of DATA need not spell it out.
        if self.match is None and self.kind == DATA:
            return _MATCH_FOR.get(self.from_ or 0)
        return self.match


def _format_pair(key: str, value: object) -> str:
    text = str(value)
    if not key or any(c in key for c in ",=\n") or any(c in text for c in ",\n") or not (key + text).isascii():
        raise ValueError(f"{key}={text!r} cannot be written in an event header")
    return f"{key}={text}"


class EventParser:
    """Incremental parser: feed it bytes as they arrive, in chunks of any size.

    A header or a body may be split across any number of ``feed`` calls.
    """

    def __init__(self, source: str = "<stream>", max_header_len: int = MAX_HEADER_LEN) -> None:
        self.source = source
        self._max_header_len = max_header_len
        self._buf = bytearray()
        self._pos = 0
        # The stream offset of _buf[0], so errors can point into the whole stream.
        self._base = 0
        # Where to resume looking for the header's newline, so that a header
        # arriving a byte at a time is not rescanned from its start each time.
        self._scan = 0
        # A DATA header waiting for its body, and the header's length: _pos
        # stays at the event's start until the event is complete.
        self._awaiting_body: tuple[Event, int] | None = None

    @property
    def offset(self) -> int:
        """Bytes of the stream consumed by complete events."""
        return self._base + self._pos

    @property
    def pending(self) -> bool:
        """Whether part of an event has been fed but not yet completed."""
        return self._pos < len(self._buf)

    def feed(self, chunk: bytes) -> Iterator[Event]:
        """Add bytes; the returned iterator yields the events now complete, in order.

        At a malformed header it raises ProtocolError, after the events
        before it. Events not taken from the iterator stay buffered for the
        next call.
        """
        self._buf += chunk
        return self._drain()

    def _drain(self) -> Iterator[Event]:
        while (event := self._next_event()) is not None:
            yield event
        self._compact()

    def finish(self) -> None:
        """Declare the end of the stream; raise if it ended inside an event."""
        if self.pending:
            where = "body" if self._awaiting_body is not None else "header"
            raise TruncatedStreamError(self.source, self.offset, f"the stream ended inside an event {where}")

    def _next_event(self) -> Event | None:
        if self._awaiting_body is None:
            header = self._next_header()
            if header is None:
                return None
            event, header_len = header
            if event.kind != DATA:
                self._pos += header_len
                return event
            self._awaiting_body = header
        return self._take_body()

    def _next_header(self) -> tuple[Event, int] | None:
        newline = self._buf.find(b"\n", max(self._pos, self._scan))
        if newline < 0:
            self._scan = len(self._buf)
            if len(self._buf) - self._pos > self._max_header_len:
                start = bytes(self._buf[self._pos : self._pos + 200])
                raise ProtocolError(self.source, self.offset, f"no newline in {self._max_header_len} bytes", start)
            return None
        line = bytes(self._buf[self._pos : newline])
        return parse_header(line, self.source, self.offset), len(line) + 1

    def _take_body(self) -> Event | None:
        assert self._awaiting_body is not None
        event, header_len = self._awaiting_body
        start = self._pos + header_len
        end = start + (event.length or 0)
        if end > len(self._buf):
            return None
        event.data = bytes(self._buf[start:end])
        self._pos = end
        self._awaiting_body = None
        return event

    def _compact(self) -> None:
        del self._buf[: self._pos]
        self._base += self._pos
        self._scan = max(0, self._scan - self._pos)
        self._pos = 0


def parse_header(line: bytes, source: str = "<stream>", offset: int = 0) -> Event:
    """Parse one header line (without its newline); a DATA event's ``data`` is left None."""

    def fail(problem: str) -> ProtocolError:
        return ProtocolError(source, offset, problem, line)

    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise fail("the header is not ASCII") from None
    fields: dict[str, str] = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if not sep:
            raise fail(f"{pair!r} is not key=value")
        if key in fields:
            raise fail(f"key {key!r} appears twice")
        fields[key] = value
    missing = [key for key in _FLOW_KEYS if key not in fields]
    if missing:
        raise fail(f"missing key {missing[0]!r}")

    def number(key: str, bits: int) -> int:
        value = fields[key]
        if not value.isdigit() or int(value) >= 1 << bits:
            raise fail(f"{key}={value!r} is not an unsigned {bits}-bit integer")
        return int(value)

    def optional_number(key: str, bits: int) -> int | None:
        return number(key, bits) if key in fields else None

    event = Event(
        ip1=fields["ip1"],
        ip2=fields["ip2"],
        port1=number("port1", 16),
        port2=number("port2", 16),
        hop=number("hop", 8),
        l3=fields["l3"],
        l4=fields["l4"],
        kind=fields["event"],
        ts_ns=optional_number("ts", 64),
        from_=optional_number("from", 8),
        match=fields.get("match"),
        length=optional_number("len", 64),
        reason=fields.get("reason"),
        extra={key: value for key, value in fields.items() if key not in _KNOWN_KEYS},
    )
    if event.kind in (DATA, GAP):
        if event.from_ not in _MATCH_FOR:
            raise fail(f"a {event.kind} event needs from=1 or from=2")
        if event.length is None:
            raise fail(f"a {event.kind} event needs len")
    return event
