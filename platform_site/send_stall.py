"""A send timeout for daphne: a connection whose client has read nothing for
``SEND_STALL_TIMEOUT`` seconds is closed.

Daphne gives an ASGI app no backpressure: every ``http.response.body`` and every WebSocket
frame goes straight into Twisted's buffer for the socket, however slowly the client reads.
A client that opens a stream and never reads (an A2A subscription, a task stream, a large
``GetTask``, a gateway agent that stops reading its socket) therefore holds everything sent
to it in the server's memory for as long as it keeps the socket open, which TCP allows
forever: the kernel keeps probing a zero window. Each subscriber of a task with a 9 MB
artifact held 9.4 MB; a hundred of them, 1 GB.

Reverse proxies bound this with a send timeout (nginx's ``send_timeout``: the time between
two successive writes the client took). This module gives daphne the same rule, checked
every 2 s on every connection daphne accepted (while its response is written, after it
finished, and after a WebSocket upgrade: the checks follow the socket, not the request).
A connection is *stalled* while Twisted holds more than its buffer size (64 KiB) unsent
and the socket has taken none of it since the stall began (bytes handed to the kernel,
which takes them only as the client reads); stalled for longer than the timeout, it is
aborted. The application then gets its disconnect (a stream ends; a gateway connection's
unacknowledged deliveries go back to the agent's outbox), and the buffer is freed. A slow
reader stays, even one that takes less than is written to it.

Remove it when daphne applies backpressure itself.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

# Twisted pauses its producer past this many unsent bytes (FileDescriptor.bufferSize).
BUFFER_SIZE = 2**16
PASS_SECONDS = 2.0  # between two checks of every connection


def unsent(transport: Any) -> int | None:
    """Bytes Twisted holds for ``transport`` that the client has not taken yet, or None for
    a transport that does not say (not one of Twisted's socket descriptors)."""
    try:
        held = len(transport.dataBuffer) - int(transport.offset)
        return held + int(transport._tempDataLen)
    except (AttributeError, TypeError):
        return None


class Stall:
    """Whether one connection's client has stopped reading: fed, at each check, how many
    bytes Twisted holds unsent and how many it has handed to the socket so far,
    :meth:`seconds` says how long the client has taken nothing while more waited."""

    def __init__(self) -> None:
        self.since: float | None = None
        self.sent = 0

    def seconds(self, held: int | None, sent: int, now: float) -> float:
        """Seconds without progress (0 while the buffer is within Twisted's size, or the
        socket took bytes since the last check: a slow reader is still a reader, even if
        more is written than it takes)."""
        if held is None or held <= BUFFER_SIZE:
            self.since = None
            return 0.0
        if self.since is None or sent > self.sent:
            self.since, self.sent = now, sent
            return 0.0
        return now - self.since


class Meter:
    """Bytes a transport has handed to its socket (counted around Twisted's
    ``writeSomeData``, which the kernel takes only as fast as the client reads)."""

    def __init__(self, transport: Any) -> None:
        self.sent = 0
        write_some = transport.writeSomeData

        def counted(data: Any) -> Any:
            written = write_some(data)
            if isinstance(written, int) and written > 0:
                self.sent += written
            return written

        transport.writeSomeData = counted


def check(transport: Any, now: float) -> bool:
    """Abort ``transport``'s connection if its client has read nothing for longer than
    ``SEND_STALL_TIMEOUT``; whether it did."""
    limit = float(settings.SEND_STALL_TIMEOUT)
    if limit <= 0 or not getattr(transport, "connected", False):
        return False
    stall = _stalls.get(transport)
    if stall is None:
        stall = _stalls[transport] = Stall()
    held = unsent(transport)
    meter = _meters.get(transport)
    if stall.seconds(held, meter.sent if meter is not None else 0, now) <= limit:
        return False
    log.warning(
        "closed a connection from %s that read nothing for %.0f s (%d bytes unsent)",
        getattr(transport.getPeer(), "host", "?"),
        limit,
        held or 0,
    )
    transport.abortConnection()
    # Twisted keeps the unsent bytes on the transport object, which its cycles with the
    # protocol can keep alive long after the socket closed: drop them now (nothing more is
    # written: an aborted transport writes nothing).
    transport.dataBuffer, transport.offset = b"", 0
    transport._tempDataBuffer, transport._tempDataLen = [], 0
    return True


# The server's open connections (Twisted transports), each forgotten with its socket.
_transports: weakref.WeakSet[Any] = weakref.WeakSet()
_stalls: weakref.WeakKeyDictionary[Any, Stall] = weakref.WeakKeyDictionary()
_meters: weakref.WeakKeyDictionary[Any, Meter] = weakref.WeakKeyDictionary()
_checking: list[Any] = []  # the LoopingCall, once the reactor runs


def check_all() -> None:
    """One pass over every open connection (Twisted's reactor calls it every
    :data:`PASS_SECONDS`)."""
    now = time.monotonic()
    for transport in list(_transports):
        try:
            check(transport, now)
        except Exception:  # one odd transport must not end the checks of the others
            log.exception("the send-stall check failed for a connection")


def _watch(protocol: Any) -> None:
    """Note a new connection's transport (set once its protocol is connected); start the
    periodic pass with the first connection, inside the running reactor."""
    # Twisted's HTTP protocol is a wrapper (HTTP/1.1 or HTTP/2 chosen on connect) around
    # the channel that holds the transport.
    channel = getattr(protocol, "_channel", protocol)
    transport = getattr(channel, "transport", None)
    if transport is not None and transport not in _meters:
        _transports.add(transport)
        if hasattr(transport, "writeSomeData"):
            _meters[transport] = Meter(transport)
    if not _checking:
        from twisted.internet import task

        loop = task.LoopingCall(check_all)
        _checking.append(loop)
        loop.start(PASS_SECONDS, now=False)


def install() -> None:
    """Watch every connection daphne accepts (HTTP, and WebSocket after its upgrade: the
    transport stays the same) for a client that stopped reading (idempotent)."""
    from daphne.http_protocol import HTTPFactory

    if getattr(HTTPFactory.buildProtocol, "_platform_send_stall", False):
        return
    build = HTTPFactory.buildProtocol

    def buildProtocol(self: Any, addr: Any) -> Any:
        from twisted.internet import reactor

        protocol = build(self, addr)
        # The transport is attached right after this returns, in the same reactor turn.
        reactor.callLater(0, _watch, protocol)
        return protocol

    buildProtocol._platform_send_stall = True  # type: ignore[attr-defined]
    HTTPFactory.buildProtocol = buildProtocol  # type: ignore[method-assign]
