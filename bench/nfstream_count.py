#!/usr/bin/env python3
"""Count the flows NFStream builds from a capture file.

Usage: python3 bench/nfstream_count.py TRACE

Prints "flows=N packets=M": M sums both directions of every flow, so it can be
checked against the trace's packet count (NFStream ignores non-IP frames).
"""

import multiprocessing
import os
import sys
import threading
import time

from nfstream import NFStreamer

if len(sys.argv) != 2:
    sys.exit(__doc__.strip())


def watch_meters():
    """Fails the run if an NFStream worker process dies.

    NFStream meters in child processes and waits on a queue for them; if one
    is killed (out of memory, say), the parent waits forever. Checking the
    children's exit codes turns that hang into an error exit.
    """
    while True:
        time.sleep(1)
        try:
            children = list(multiprocessing.process._children)
        except RuntimeError:  # the set changed while being copied
            continue
        for child in children:
            code = child.exitcode
            if code not in (None, 0):
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                print(f"nfstream_count.py: NFStream worker {child.name} died ({how})",
                      file=sys.stderr, flush=True)
                os._exit(1)


threading.Thread(target=watch_meters, daemon=True).start()

flows = packets = 0
# Library defaults on purpose (nDPI dissection on, statistics off): that is
# what a user gets and what the other tools are run with.
for flow in NFStreamer(source=sys.argv[1]):
    flows += 1
    packets += flow.bidirectional_packets
print(f"flows={flows} packets={packets}")
