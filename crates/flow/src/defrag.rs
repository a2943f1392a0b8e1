//! IPv4 and IPv6 datagram reassembly (work in progress).
