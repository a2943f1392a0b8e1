#!/usr/bin/env python3
"""Count the flows NFStream builds from a capture file.

Usage: python3 bench/nfstream_count.py TRACE

Prints "flows=N packets=M": M sums both directions of every flow, so it can be
checked against the trace's packet count (NFStream ignores non-IP frames).
"""

import sys

from nfstream import NFStreamer

if len(sys.argv) != 2:
    sys.exit(__doc__.strip())

flows = packets = 0
# Library defaults on purpose (nDPI dissection on, statistics off): that is
# what a user gets and what the other tools are run with.
for flow in NFStreamer(source=sys.argv[1]):
    flows += 1
    packets += flow.bidirectional_packets
print(f"flows={flows} packets={packets}")
