"""Incremental HTTP/1.x message framing for one direction of a connection.

Only what an observer needs: start lines, header fields, trailers and body
lengths. Bodies are counted, never kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

# Generous for real traffic, small enough that a non-HTTP stream is given
# up on after a few kilobytes instead of being buffered.
MAX_LINE = 8 * 1024
MAX_HEAD = 64 * 1024

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") ([^ ]+) (HTTP/1\.[0-9])")
_STATUS_LINE = re.compile(rb"(HTTP/1\.[0-9]) ([0-9]{3})(?: (.*))?")
_FIELD_NAME = re.compile(_TOKEN)
_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_CHUNK_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;.*)?")


class HttpParseError(ValueError):
    """The stream is not (or is no longer) HTTP/1.x."""


@dataclass
class Message:
    """A request (method, uri set) or a response (code, reason set)."""

    version: str
    headers: dict[str, str]
    ts_ns: int | None
    method: str | None = None
    uri: str | None = None
    code: int | None = None
    reason: str | None = None
    trailer: dict[str, str] = field(default_factory=dict)
    body_len: int = 0
    complete: bool = False


class Framing(NamedTuple):
    """How a message's body is delimited (RFC 9112 §6)."""

    kind: str
    length: int = 0


NONE, LENGTH, CHUNKED, UNTIL_CLOSE = "none", "length", "chunked", "until-close"
NO_BODY = Framing(NONE)


def request_framing(headers: dict[str, str]) -> Framing:
    coding = _final_transfer_coding(headers)
    if coding == "chunked":
        return Framing(CHUNKED)
    if coding is not None:
        # A server cannot find the end of such a request either (RFC 9112 §6.3).
        raise HttpParseError(f"request with transfer-encoding {coding!r}")
    length = _content_length(headers)
    return NO_BODY if length is None else Framing(LENGTH, length)


def response_framing(response: Message, request_method: str) -> Framing:
    code = response.code or 0
    if request_method == "HEAD" or code < 200 or code in (204, 304):
        return NO_BODY
    if request_method == "CONNECT" and code < 300:
        return NO_BODY
    coding = _final_transfer_coding(response.headers)
    if coding == "chunked":
        return Framing(CHUNKED)
    if coding is not None:
        return Framing(UNTIL_CLOSE)
    length = _content_length(response.headers)
    return Framing(UNTIL_CLOSE) if length is None else Framing(LENGTH, length)


def _final_transfer_coding(headers: dict[str, str]) -> str | None:
    value = headers.get("transfer-encoding")
    if value is None:
        return None
    return value.rsplit(",", 1)[-1].strip().lower()


def _content_length(headers: dict[str, str]) -> int | None:
    value = headers.get("content-length")
    if value is None:
        return None
    # Repeated fields were joined with ", "; identical repeats are allowed.
    values = {v.strip() for v in value.split(",")}
    if len(values) != 1 or not all(v.isdigit() and v.isascii() for v in values):
        raise HttpParseError(f"bad content-length {value!r}")
    return int(values.pop())


def parse_head(raw: bytes, is_request: bool, ts_ns: int | None) -> Message:
    """A start line and header fields, without the blank line that ends them."""
    lines = _lines(raw)
    if is_request:
        m = _REQUEST_LINE.fullmatch(lines[0])
        if m is None:
            raise HttpParseError(f"not a request line: {lines[0][:80]!r}")
        method, uri, version = (part.decode("latin-1") for part in m.groups())
        return Message(version, parse_fields(lines[1:]), ts_ns, method=method, uri=uri)
    m = _STATUS_LINE.fullmatch(lines[0])
    if m is None:
        raise HttpParseError(f"not a status line: {lines[0][:80]!r}")
    version, code, reason = m.groups()
    return Message(
        version.decode(), parse_fields(lines[1:]), ts_ns, code=int(code), reason=(reason or b"").decode("latin-1")
    )


def _lines(raw: bytes) -> list[bytes]:
    return [line[:-1] if line.endswith(b"\r") else line for line in raw.split(b"\n")]


def parse_fields(lines: list[bytes]) -> dict[str, str]:
    """Header or trailer fields; names lowercased, repeats joined with ", "."""
    fields: dict[str, str] = {}
    last = None
    for line in lines:
        if line[:1] in (b" ", b"\t") and last is not None:
            # obs-fold: a continuation of the previous field's value.
            fields[last] += " " + line.strip().decode("latin-1")
            continue
        name, colon, value = line.partition(b":")
        if not colon or _FIELD_NAME.fullmatch(name) is None:
            raise HttpParseError(f"not a header field: {line[:80]!r}")
        last = name.decode("ascii").lower()
        text = value.strip(b" \t").decode("latin-1")
        fields[last] = f"{fields[last]}, {text}" if last in fields else text
    return fields


# Reader states.
_HEAD, _BODY, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _DONE = range(8)


class MessageReader:
    """Splits one direction's byte stream into messages, as the bytes arrive.

    ``on_head`` gets each message once its head is parsed and returns how its
    body is framed; ``on_complete`` gets it when its body has ended. Both may
    raise HttpParseError, which ends the reader like a parse error would.
    Once ended (``stop``, an error), the reader ignores further bytes.
    """

    def __init__(
        self,
        is_request: bool,
        on_head: Callable[[Message], Framing],
        on_complete: Callable[[Message], None],
    ) -> None:
        self.is_request = is_request
        self._on_head = on_head
        self._on_complete = on_complete
        self._buf = bytearray()
        self._state = _HEAD
        self._message: Message | None = None
        self._remaining = 0
        self._blank_scan = 0
        self._last_ts: int | None = None
        # The ts of the event that carried the first byte of the next message.
        self._next_ts: int | None = None
        self.paused = False

    @property
    def alive(self) -> bool:
        return self._state != _DONE

    def feed(self, data: bytes, ts_ns: int | None) -> None:
        if not self.alive:
            return
        if self._state == _HEAD and not self._buf:
            self._next_ts = ts_ns
        self._last_ts = ts_ns
        self._buf += data
        if self.paused and len(self._buf) > MAX_HEAD:
            self.stop()
            raise HttpParseError(f"{MAX_HEAD} bytes sent without waiting for the answer to a protocol switch")
        self._run()

    def pause(self) -> None:
        """Stop parsing (keep buffering) until ``resume``: what follows may not be HTTP."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._run()

    def end_of_stream(self) -> None:
        """The connection closed: a body delimited by the close is complete."""
        if self._state == _UNTIL_CLOSE:
            self._complete()
        self.stop()

    def stop(self) -> None:
        self._state = _DONE
        self._buf = bytearray()
        self._message = None

    def detach(self) -> bytes:
        """Stop, and return the bytes received past the last message: the
        start of whatever protocol the connection switched to."""
        rest = bytes(self._buf)
        self.stop()
        return rest

    def _run(self) -> None:
        try:
            while self.alive and not self.paused and self._step():
                pass
        except HttpParseError:
            self.stop()
            raise

    def _step(self) -> bool:
        """Make progress on the buffer; False when more bytes are needed."""
        if self._state == _HEAD:
            return self._read_head()
        if self._state in (_BODY, _CHUNK_DATA, _UNTIL_CLOSE):
            return self._read_body()
        if self._state == _CHUNK_SIZE:
            return self._read_chunk_size()
        if self._state == _CHUNK_END:
            return self._read_chunk_end()
        return self._read_trailer()

    def _read_head(self) -> bool:
        # RFC 9112 §2.2: empty lines before a request line are to be ignored.
        while self._buf[:1] == b"\n" or self._buf[:2] == b"\r\n":
            del self._buf[: 1 if self._buf[:1] == b"\n" else 2]
        if not self._buf:
            return False
        self._check_start_plausible()
        end = self._find_blank_line()
        if end is None:
            return False
        blank_start, blank_end = end
        message = parse_head(bytes(self._buf[:blank_start]), self.is_request, self._next_ts)
        del self._buf[:blank_end]
        self._blank_scan = 0
        self._message = message
        self._start_body(self._on_head(message))
        return True

    def _check_start_plausible(self) -> None:
        # Rejecting on the first bytes keeps a binary flow from being
        # buffered up to MAX_HEAD before it is recognised as not HTTP.
        if self.is_request:
            first_word = bytes(self._buf[:32]).split(b" ", 1)[0]
            plausible = _FIELD_NAME.fullmatch(first_word) is not None
        else:
            plausible = b"HTTP/".startswith(bytes(self._buf[:5]))
        if not plausible:
            raise HttpParseError(f"not HTTP: {bytes(self._buf[:16])!r}")
        first_newline = self._buf.find(b"\n", 0, MAX_LINE)
        if first_newline < 0 and len(self._buf) >= MAX_LINE:
            raise HttpParseError(f"start line longer than {MAX_LINE} bytes")

    def _find_blank_line(self) -> tuple[int, int] | None:
        """Where the blank line that ends a head or a trailer section starts and ends."""
        if self._buf[:1] == b"\n" or self._buf[:2] == b"\r\n":
            return 0, 1 if self._buf[:1] == b"\n" else 2
        # The match starts at the line ending of the last line before the blank one.
        m = _BLANK_LINE.search(self._buf, max(0, self._blank_scan - 3))
        if m is None:
            self._blank_scan = len(self._buf)
            if len(self._buf) > MAX_HEAD:
                raise HttpParseError(f"head longer than {MAX_HEAD} bytes")
            return None
        return m.start(), m.end()

    def _start_body(self, framing: Framing) -> None:
        if framing.kind == NONE or (framing.kind == LENGTH and framing.length == 0):
            self._complete()
        elif framing.kind == LENGTH:
            self._state, self._remaining = _BODY, framing.length
        elif framing.kind == CHUNKED:
            self._state = _CHUNK_SIZE
        else:
            self._state = _UNTIL_CLOSE

    def _read_body(self) -> bool:
        if not self._buf:
            return False
        assert self._message is not None
        if self._state == _UNTIL_CLOSE:
            taken = len(self._buf)
        else:
            taken = min(self._remaining, len(self._buf))
            self._remaining -= taken
        del self._buf[:taken]
        self._message.body_len += taken
        if self._remaining == 0 and self._state == _BODY:
            self._complete()
        elif self._remaining == 0 and self._state == _CHUNK_DATA:
            self._state = _CHUNK_END
        return True

    def _read_chunk_size(self) -> bool:
        line = self._take_line()
        if line is None:
            return False
        m = _CHUNK_SIZE_LINE.fullmatch(line.strip(b" \t"))
        if m is None:
            raise HttpParseError(f"bad chunk size line {line[:80]!r}")
        self._remaining = int(m.group(1), 16)
        self._state = _CHUNK_DATA if self._remaining else _TRAILER
        return True

    def _read_chunk_end(self) -> bool:
        line = self._take_line()
        if line is None:
            return False
        if line:
            raise HttpParseError("chunk data longer than its size")
        self._state = _CHUNK_SIZE
        return True

    def _read_trailer(self) -> bool:
        end = self._find_blank_line()
        if end is None:
            return False
        blank_start, blank_end = end
        assert self._message is not None
        if blank_start:
            self._message.trailer = parse_fields(_lines(bytes(self._buf[:blank_start])))
        del self._buf[:blank_end]
        self._blank_scan = 0
        self._complete()
        return True

    def _take_line(self) -> bytes | None:
        """The next line without its line ending, or None until it is complete."""
        newline = self._buf.find(b"\n")
        if newline < 0:
            if len(self._buf) > MAX_LINE:
                raise HttpParseError(f"line longer than {MAX_LINE} bytes")
            return None
        line = bytes(self._buf[:newline])
        del self._buf[: newline + 1]
        return line[:-1] if line.endswith(b"\r") else line

    def _complete(self) -> None:
        message = self._message
        assert message is not None
        message.complete = True
        self._message = None
        self._state = _HEAD
        # Bytes left over belong to the next message; they arrived with the latest event.
        self._next_ts = self._last_ts
        self._on_complete(message)
