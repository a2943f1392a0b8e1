#!/usr/bin/env python3
"""A consumer for `sluice abstract` that takes events as fast as it can and
throws them away, so that the abstractor, not its analyzer, sets the rate.

    python3 bench/tap_drain.py [--parse] [--skip NAME]... [--out FILE] DIR

Waits for the abstractor to create its interfaces under DIR (DIR/loopback7
is created last), connects to every socket under DIR/tcp and DIR/udp (the
rules' interfaces and the defaults) but those named by --skip (e.g.
tcp/http, read by another consumer), reads them all until the abstractor
hangs up, and prints one JSON object: bytes read per interface and in all.

Counting bytes costs nothing per event; with --parse it also walks the
events (header lines and DATA bodies) and counts them by kind and the DATA
body bytes, which makes it much slower than the abstractor: use it for a
check, not for a rate. Standard library only.
"""

import argparse
import json
import os
import selectors
import socket
import stat
import sys
import time

CHUNK = 8 << 20
RCVBUF = 32 << 20


class Walker:
    """Follows the event stream of one socket across reads."""

    def __init__(self, name):
        self.name = name
        self.rest = b""
        self.body_left = 0
        self.events = {}
        self.data_bytes = 0

    def feed(self, chunk):
        buf = self.rest + chunk if self.rest else chunk
        pos, end = 0, len(buf)
        while pos < end:
            if self.body_left:
                take = min(self.body_left, end - pos)
                self.body_left -= take
                self.data_bytes += take
                pos += take
                continue
            nl = buf.find(b"\n", pos)
            if nl < 0:
                break
            line = buf[pos:nl]
            pos = nl + 1
            at = line.find(b",event=")
            if at < 0:
                sys.exit(f"tap_drain: {self.name}: not an event header: {line[:200]!r}")
            kind = line[at + 7 : line.find(b",", at + 7)].decode()
            self.events[kind] = self.events.get(kind, 0) + 1
            if kind == "DATA":
                self.body_left = int(line[line.rfind(b",len=") + 5 :])
        self.rest = bytes(buf[pos:]) if pos < end else b""

    def finish(self):
        if self.rest or self.body_left:
            sys.exit(f"tap_drain: {self.name}: the stream ended inside an event")


def interfaces(root, skip):
    paths = []
    for sub in ("tcp", "udp"):
        d = os.path.join(root, sub)
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if f"{sub}/{name}" not in skip and stat.S_ISSOCK(os.stat(path).st_mode):
                paths.append((f"{sub}/{name}", path))
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--parse", action="store_true", help="walk the events and count DATA bytes")
    ap.add_argument(
        "--skip", action="append", default=[], metavar="NAME", help="an interface not to read, e.g. tcp/http"
    )
    ap.add_argument("--out", help="write the JSON here instead of stdout")
    ap.add_argument("--timeout", type=float, default=60, help="seconds to wait for the interfaces")
    args = ap.parse_args()

    deadline = time.monotonic() + args.timeout
    while not os.path.exists(os.path.join(args.dir, "loopback7")):
        if time.monotonic() > deadline:
            sys.exit(f"tap_drain: no interfaces under {args.dir} after {args.timeout} s")
        time.sleep(0.005)

    sel = selectors.DefaultSelector()
    read = {}
    walkers = {}
    for name, path in interfaces(args.dir, set(args.skip)):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        s.connect(path)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, name)
        read[name] = 0
        if args.parse:
            walkers[name] = Walker(name)

    buf = bytearray(CHUNK)
    view = memoryview(buf)
    open_sockets = len(read)
    while open_sockets:
        for key, _ in sel.select():
            s, name = key.fileobj, key.data
            try:
                n = s.recv_into(buf)
            except BlockingIOError:
                continue
            if n == 0:
                sel.unregister(s)
                s.close()
                open_sockets -= 1
                continue
            read[name] += n
            if args.parse:
                walkers[name].feed(view[:n].tobytes())

    result = {"bytes": sum(read.values()), "interfaces": read}
    if args.parse:
        for w in walkers.values():
            w.finish()
        events = {}
        for w in walkers.values():
            for kind, count in w.events.items():
                events[kind] = events.get(kind, 0) + count
        result["events"] = events
        result["data_bytes"] = sum(w.data_bytes for w in walkers.values())
    text = json.dumps(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
