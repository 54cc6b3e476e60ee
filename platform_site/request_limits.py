"""Bounds on what daphne takes from a client before the application sees a request: how
much of a body it keeps, and how long the headers and the body may take to arrive.

**Bodies.** Twisted writes a body of 100 kB or more, or one sent chunked, to a temporary
file, and daphne reads that file whole into the application's queue: only then could the
platform answer its 413. One anonymous client sending 400 MB grew the server by 400 MB;
four sending 800 MB each filled 4 GB of disk. Here a request keeps its body in memory and
at most one byte more than the largest body any route accepts (:func:`body_cap`); the rest
is read and dropped. A route still answers its own 413 in its own error shape: it sees a
``Content-Length`` over its limit, or a chunked body one byte past it. A WebSocket upgrade
request's body is the same request's, kept the same way.

**Time.** Twisted's idle timeout starts again with every byte, and runplatform gives
daphne no response timeout (streams last as long as they last), so a client trickling a
byte every 10 s held its connection forever: 2,000 such connections all stayed, and with
systemd's default of 1,024 descriptors one client made ``/healthz`` fail for 50 s. Here a
request's headers must have arrived within ``REQUEST_HEADER_TIMEOUT`` seconds of its first
byte (a new connection's first request: of the connection's opening, so a connection that
sends nothing is closed too), and its body within ``REQUEST_BODY_TIMEOUT`` seconds of the
headers plus one second per ``REQUEST_BODY_MIN_RATE`` bytes received (up to the body cap:
bytes past it are dropped and earn no time). Past either the connection is aborted. The
clock stops once the request is whole: a response that streams for hours (SSE) and a
WebSocket after its upgrade are not limited here (``SEND_STALL_TIMEOUT`` covers a client
that stops reading them). Every connection is checked each :data:`PASS_SECONDS`. A
keep-alive connection waiting for its next request is closed after
``HTTP_KEEPALIVE_TIMEOUT`` seconds (Twisted's idle timeout, 12 hours unless set: one
client could hold thousands of idle connections after one request each).

HTTP/2 (only over TLS, with ALPN) is not covered; the platform serves HTTP/1.1 behind its
proxy. Remove a part when daphne bounds it itself.
"""

from __future__ import annotations

import logging
import time
import weakref
from io import BytesIO
from typing import Any

from django.conf import settings
from twisted.web import http

log = logging.getLogger(__name__)

PASS_SECONDS = 1.0  # between two checks of every connection

# The server's HTTP/1.1 channels, each forgotten with its connection.
_channels: weakref.WeakSet[Any] = weakref.WeakSet()
_checking: list[Any] = []  # the LoopingCall, once the reactor runs

# The settings that cap a body some route accepts: the largest is the most kept.
BODY_CAP_SETTINGS = ("MAX_BODY_BYTES", "DATA_UPLOAD_MAX_MEMORY_SIZE", "AGENT_PUSH_MAX_BYTES")


def body_cap() -> int:
    """The largest request body any route accepts (bytes): the most a request keeps, plus
    the one byte that makes a route's own size check refuse a body cut there."""
    return max(int(getattr(settings, name, 0) or 0) for name in BODY_CAP_SETTINGS)


class Receipt:
    """One request on its way in: when its first byte came, when its headers were whole,
    and how many body bytes arrived (the rate earns the body more time)."""

    __slots__ = ("body_bytes", "headers_done", "started")

    def __init__(self, started: float) -> None:
        self.started = started
        self.headers_done: float | None = None
        self.body_bytes = 0

    def overdue(
        self, now: float, header_limit: float, body_limit: float, min_rate: int, cap: int
    ) -> str | None:
        """Which part (``"headers"``, ``"body"``) took longer than it may, or None. A limit
        of 0 is no limit."""
        if self.headers_done is None:
            if header_limit > 0 and now - self.started > header_limit:
                return "headers"
            return None
        if body_limit <= 0:
            return None
        earned = min(self.body_bytes, cap) / min_rate if min_rate > 0 else 0.0
        if now - self.headers_done > body_limit + earned:
            return "body"
        return None


# --- The body: in memory, and no more of it than any route accepts ------------------------


def _got_length(request: Any, length: int | None) -> None:
    """Twisted's ``gotLength``: a temporary file for 100 kB or more; here always memory."""
    request.content = BytesIO()
    request.body_room = body_cap() + 1
    request.body_dropped = 0


def _handle_content_chunk(request: Any, data: bytes) -> None:
    """Keep ``data`` while there is room, count the rest, and tell the connection's clock."""
    room = request.body_room
    if len(data) <= room:
        request.content.write(data)
        request.body_room = room - len(data)
    else:
        if room:
            request.content.write(data[:room])
            request.body_room = 0
        request.body_dropped += len(data) - room
    receipt = getattr(request.channel, "platform_receipt", None)
    if receipt is not None:
        receipt.body_bytes += len(data)


# --- The clock: per connection, from the request's first byte until it is whole -----------


class LimitedChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 channel with a clock for the request it is receiving. Daphne's
    connections are switched to it as they are built (no other Twisted server in the
    process is); a class rather than wrappers on each connection: nothing more to build
    per connection, and no cycle through closures."""

    platform_receipt: Receipt | None = None

    def timeoutConnection(self) -> None:
        """Twisted's idle timeout (``HTTP_KEEPALIVE_TIMEOUT``), which it restarts at every
        byte of a request too: a request arriving is bounded by its own deadlines instead
        (:func:`check`), which a client pausing within them keeps to. Without a deadline
        for the part that is arriving (set to 0), the idle timeout still applies."""
        receipt = self.platform_receipt
        if receipt is not None:
            part = (
                "REQUEST_HEADER_TIMEOUT" if receipt.headers_done is None else "REQUEST_BODY_TIMEOUT"
            )
            if float(getattr(settings, part)) > 0:
                self.setTimeout(self.timeOut)  # armed again (the call that fired is spent)
                return
        super().timeoutConnection()

    def dataReceived(self, data: bytes) -> None:
        # Bytes that come while a request is handled wait in Twisted's buffer, unparsed:
        # their clock starts when Twisted replays them (through here) after the response.
        if self.platform_receipt is None and not self._handlingRequest:
            self.platform_receipt = Receipt(time.monotonic())
        super().dataReceived(data)

    def allHeadersReceived(self) -> None:
        now = time.monotonic()
        if self.platform_receipt is None:
            self.platform_receipt = Receipt(now)
        self.platform_receipt.headers_done = now
        super().allHeadersReceived()

    def allContentReceived(self) -> None:
        # Cleared first: the request may upgrade to a WebSocket inside the call.
        self.platform_receipt = None
        dropped = getattr(self.requests[-1], "body_dropped", 0) if self.requests else 0
        if dropped:
            log.info(
                "dropped %d bytes of a request body over %d bytes from %s (the route refuses it)",
                dropped,
                body_cap(),
                _peer(self),
            )
        super().allContentReceived()


def _watch_channel(channel: Any) -> None:
    """Start the clock of a new connection's first request (from the connection's opening),
    and check the connection with the others from now on."""
    channel.__class__ = LimitedChannel
    channel.platform_receipt = Receipt(time.monotonic())
    _channels.add(channel)
    if not _checking:
        from twisted.internet import task

        loop = task.LoopingCall(check_all)
        _checking.append(loop)
        loop.start(PASS_SECONDS, now=False)


def _peer(channel: Any) -> str:
    try:
        return str(channel.transport.getPeer().host)
    except AttributeError:
        return "?"


def check(channel: Any, now: float, limits: tuple[float, float, int, int]) -> bool:
    """Abort ``channel``'s connection if its request is taking longer than ``limits``
    (header, body seconds, body bytes per second, body cap) allow; whether it did."""
    receipt = getattr(channel, "platform_receipt", None)
    if receipt is None:
        return False
    transport = channel.transport
    # A connection lost mid-request (its channel not collected yet) is nothing to close.
    if transport is None or not getattr(transport, "connected", True):
        channel.platform_receipt = None
        return False
    part = receipt.overdue(now, *limits)
    if part is None:
        return False
    log.warning(
        "closed a connection from %s whose request %s took longer than allowed (%.0f s)",
        _peer(channel),
        part,
        now - receipt.started,
    )
    channel.platform_receipt = None
    transport.abortConnection()
    return True


def current_limits() -> tuple[float, float, int, int]:
    """The settings :func:`check` applies, read once per pass."""
    return (
        float(settings.REQUEST_HEADER_TIMEOUT),
        float(settings.REQUEST_BODY_TIMEOUT),
        int(settings.REQUEST_BODY_MIN_RATE),
        body_cap(),
    )


def check_all() -> None:
    """One pass over every open connection (Twisted's reactor calls it every
    :data:`PASS_SECONDS`)."""
    try:
        now, limits = time.monotonic(), current_limits()
    except Exception:  # the LoopingCall would stop for good
        log.exception("the request deadline check could not read its settings")
        return
    for channel in list(_channels):
        try:
            check(channel, now, limits)
        except Exception:  # one odd connection must not end the checks of the others
            log.exception("the request deadline check failed for a connection")


def install() -> None:
    """Bound every daphne request's body and the time it takes to arrive (idempotent)."""
    from daphne.http_protocol import HTTPFactory, WebRequest

    WebRequest.gotLength = _got_length  # type: ignore[method-assign]
    WebRequest.handleContentChunk = _handle_content_chunk  # type: ignore[method-assign]
    if getattr(HTTPFactory.buildProtocol, "_platform_request_limits", False):
        return
    build = HTTPFactory.buildProtocol

    def buildProtocol(self: Any, addr: Any) -> Any:
        protocol = build(self, addr)
        # Twisted's wrapper picks HTTP/1.1 or HTTP/2 on connect; the channel it starts with
        # is HTTP/1.1's, the one a plain-TCP daphne keeps.
        channel = getattr(protocol, "_channel", None)
        if type(channel) is http.HTTPChannel:
            _watch_channel(channel)
        keepalive = float(settings.HTTP_KEEPALIVE_TIMEOUT)
        if keepalive > 0 and protocol is not None:
            # Twisted's idle timeout (12 hours): off while a request is handled, and while
            # one arrives it gives way to the request's own deadlines (timeoutConnection),
            # so it is the wait between two requests of a keep-alive connection.
            protocol.timeOut = keepalive
        return protocol

    buildProtocol._platform_request_limits = True  # type: ignore[attr-defined]
    HTTPFactory.buildProtocol = buildProtocol  # type: ignore[method-assign]
