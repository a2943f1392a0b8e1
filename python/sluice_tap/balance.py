"""Running one analyzer process per balanced interface, with their output merged.

Sluice's ``balance: N`` splits a rule's flows over the sockets ``NAME0`` ..
``NAME{N-1}``; one process per socket analyzes them in parallel.
"""

from __future__ import annotations

import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import BinaryIO

log = logging.getLogger("sluice_tap")


def balanced_interfaces(base: str, count: int) -> list[str]:
    """The sockets of a rule with ``balance: count``; sluice numbers them
    only when there are several, so ``balance: 1`` is the plain name."""
    if count == 1:
        return [base]
    return [f"{base}{i}" for i in range(count)]


class _Child:
    def __init__(self, command: Sequence[str]) -> None:
        self.command = command
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, bufsize=0)
        self.partial = b""

    def complete_lines(self, chunk: bytes) -> bytes:
        """The complete lines received so far; keeps the unfinished one."""
        data = self.partial + chunk
        cut = data.rfind(b"\n") + 1
        self.partial = data[cut:]
        return data[:cut]


# Seconds the children have to exit once told to stop before they are
# killed: a merger must not hang on shutdown because one child ignores
# SIGTERM or is stuck.
STOP_GRACE = 2.0


class _Merger:
    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._stopping = False
        self._kill_at = float("inf")
        self.failed = False
        self._children: list[_Child] = []
        self._selector = selectors.DefaultSelector()

    def start(self, commands: Sequence[Sequence[str]]) -> None:
        for command in commands:
            if self._stopping:
                return
            child = _Child(command)
            self._children.append(child)
            assert child.process.stdout is not None
            self._selector.register(child.process.stdout.fileno(), selectors.EVENT_READ, child)
            # A stop that came while this child was being started signalled
            # only the children listed then.
            if self._stopping:
                child.process.send_signal(signal.SIGTERM)

    def stop_all(self, signum: int = signal.SIGTERM, frame: FrameType | None = None) -> None:
        if not self._stopping:
            self._kill_at = time.monotonic() + STOP_GRACE
        self._stopping = True
        for child in self._children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)

    def run(self) -> None:
        while self._selector.get_map():
            # Woken once a second at least, to see whether a stop's grace
            # is over: a signal handler cannot shorten a wait under way.
            for key, _ in self._selector.select(timeout=1.0):
                chunk = os.read(key.fd, 256 * 1024)
                if chunk:
                    self._write(key.data.complete_lines(chunk))
                else:
                    self._selector.unregister(key.fd)
                    self._reap(key.data)
            if time.monotonic() >= self._kill_at:
                self._kill_lingering()

    def _kill_lingering(self) -> None:
        self._kill_at = float("inf")
        for child in self._children:
            if child.process.poll() is None:
                log.warning("%s: still running %.0f s after SIGTERM; killed", " ".join(child.command), STOP_GRACE)
                child.process.kill()

    def _write(self, lines: bytes) -> None:
        # Only whole lines are written, from this one thread, so lines of
        # different children never interleave.
        try:
            self._out.write(lines)
            self._out.flush()
        except BrokenPipeError:
            # The reader went away: stop the children, and discard what they
            # still write while they exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._out.fileno())
            self.stop_all()

    def _reap(self, child: _Child) -> None:
        if child.partial:
            log.warning("%s: dropped an unfinished output line", " ".join(child.command))
        status = child.process.wait()
        if status != 0 and not self._stopping:
            log.error("%s: exited with status %d; stopping the others", " ".join(child.command), status)
            self.failed = True
            self.stop_all()


def run_balanced(commands: Sequence[Sequence[str]], out: BinaryIO | None = None) -> int:
    """Run the commands in parallel and merge their standard output, line by line.

    SIGINT and SIGTERM are passed on to the children as SIGTERM. When one
    child fails, the others are stopped. Returns 1 if a child failed, else 0.
    """
    merger = _Merger(out if out is not None else sys.stdout.buffer)
    # Installed before the children start, so that none is left running.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, merger.stop_all)
    merger.start(commands)
    merger.run()
    return 1 if merger.failed else 0
