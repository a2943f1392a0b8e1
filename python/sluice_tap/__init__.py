"""Client SDK for Sluice's flow abstractor.

Read the events of a stream interface with :func:`connect` (or feed bytes to
an :class:`EventParser`), and write decapsulated flows back into the L7
loopback with an :class:`Injector`.
"""

from .client import Injector, connect
from .events import (
    CREATED,
    DATA,
    DESTROYED,
    FROM_CLIENT,
    FROM_SERVER,
    GAP,
    Event,
    EventParser,
    FlowKey,
    ProtocolError,
    TruncatedStreamError,
    parse_header,
)

__all__ = [
    "CREATED",
    "DATA",
    "DESTROYED",
    "FROM_CLIENT",
    "FROM_SERVER",
    "GAP",
    "Event",
    "EventParser",
    "FlowKey",
    "Injector",
    "ProtocolError",
    "TruncatedStreamError",
    "connect",
    "parse_header",
]
