"""Shared test fixtures: events written by hand, and a real UNIX socket server.

Events are formatted here independently of ``Event.to_bytes``, so that the
parser is checked against the documented format rather than against itself.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from collections.abc import Sequence
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))

TIMEOUT = 10.0

REPO = PYTHON_DIR.parent
# The release build the workspace's tests make, unless SLUICE names another.
SLUICE = Path(
    os.environ.get("SLUICE")
    or Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / "release" / "sluice"
)
NDPI_PCAPS = Path(os.environ.get("NDPI_DEV_DIR") or REPO.parent / "shared" / "data" / "ndpi-dev") / "pcap"


class Flow:
    """Writes the events of one flow; ts grows by 1000 ns per event."""

    def __init__(
        self,
        ip1: str = "192.168.0.1",
        ip2: str = "192.168.0.2",
        port1: int = 62918,
        port2: int = 80,
        hop: int = 0,
        ts: int = 1416138000123456789,
    ) -> None:
        l3 = "ipv6" if ":" in ip1 else "ipv4"
        self.prefix = f"ip1={ip1},ip2={ip2},port1={port1},port2={port2},hop={hop},l3={l3},l4=tcp"
        self.ts = ts

    def _header(self, kind: str, rest: str = "") -> bytes:
        self.ts += 1000
        return f"{self.prefix},event={kind},ts={self.ts}{rest}\n".encode()

    def created(self) -> bytes:
        return self._header("CREATED")

    def data(self, from_: int, body: bytes) -> bytes:
        match = "up" if from_ == 1 else "down"
        return self._header("DATA", f",from={from_},match={match},len={len(body)}") + body

    def request(self, body: bytes) -> bytes:
        return self.data(1, body)

    def response(self, body: bytes) -> bytes:
        return self.data(2, body)

    def gap(self, from_: int, length: int) -> bytes:
        return self._header("GAP", f",from={from_},len={length}")

    def destroyed(self, reason: str = "fin") -> bytes:
        return self._header("DESTROYED", f",reason={reason}")


class EventServer:
    """Listens on a UNIX socket; a thread serves one connection with ``pieces``, then closes.

    Each piece is one ``sendall``; ``pause`` seconds between pieces make the
    reader see them as separate reads. With ``hold``, the connection stays
    open after the last piece until ``release()``.
    """

    def __init__(self, path: str, pieces: Sequence[bytes], pause: float = 0.0, hold: bool = False) -> None:
        self.path = path
        self._pieces = pieces
        self._pause = pause
        self._released = threading.Event()
        if not hold:
            self._released.set()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._listener.settimeout(TIMEOUT)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        finally:
            self._listener.close()
            os.unlink(self.path)
        with conn:
            try:
                for piece in self._pieces:
                    conn.sendall(piece)
                    if self._pause:
                        time.sleep(self._pause)
                self._released.wait(TIMEOUT)
            except BrokenPipeError:
                pass

    def release(self) -> None:
        self._released.set()

    def join(self) -> None:
        self._thread.join(TIMEOUT)


class Recorder:
    """A stand-in for sluice's loopback socket: records everything written to it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.received = b""
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(1)
        self._listener.settimeout(TIMEOUT)
        self._thread = threading.Thread(target=self._record, daemon=True)
        self._thread.start()

    def _record(self) -> None:
        with self._listener:
            conn, _ = self._listener.accept()
        with conn:
            while chunk := conn.recv(4096):
                self.received += chunk

    def wait(self) -> bytes:
        self._thread.join(TIMEOUT)
        return self.received


def one_byte_at_a_time(stream: bytes) -> list[bytes]:
    return [stream[i : i + 1] for i in range(len(stream))]


class TempDirTestCase(unittest.TestCase):
    def setUp(self) -> None:
        # AF_UNIX paths are limited to ~108 bytes, so keep the directory short.
        self._tmp = tempfile.TemporaryDirectory(prefix="tap", dir="/tmp")
        self.dir = self._tmp.name
        self.addCleanup(self._tmp.cleanup)

    def sock_path(self, name: str = "s") -> str:
        return os.path.join(self.dir, name)


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_DIR), env.get("PYTHONPATH")]))
    return env


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "sluice_tap.http", *args]


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(cli_command(*args), env=cli_env(), capture_output=True, timeout=timeout)


def json_lines(output: bytes) -> list[dict]:
    return [json.loads(line) for line in output.decode().splitlines()]


def stats_of(stderr: bytes, socket_path: str | None = None) -> dict[str, int]:
    """The counts from a ``--stats`` line (of the given socket's process)."""
    for line in stderr.decode().splitlines():
        if socket_path is None or f" {socket_path}: " in line:
            fields = line.rsplit(": ", 1)[-1].split()
            if fields and all("=" in f for f in fields):
                return {k: int(v) for k, v in (f.split("=") for f in fields)}
    raise AssertionError(f"no stats line in {stderr!r}")
