"""platform_site.request_limits: daphne keeps no more of a body than any route accepts (in
memory, never a temporary file), and closes a connection whose request headers or body
take too long to arrive, never one whose response takes long (a stream, a WebSocket).

Daphne's own HTTP classes over an in-memory transport (each check given its time); a real
``runplatform`` in test_request_limits_live.py.
"""

from __future__ import annotations

import time
from io import BytesIO
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from platform_site import daphne_fix, request_limits
from platform_site.request_limits import Receipt, body_cap, check

CAP = 2000  # the largest of the body caps set below
LIMITS = (30.0, 30.0, 1000, CAP)  # header s, body s, body bytes/s, cap: the defaults' shape
BIG = 300_000  # past Twisted's 100 kB: it wrote a body this size to a temporary file
UPGRADE = b"GET /ws/agent-gateway/ HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
SEND = b"POST /v1/a2a/message:send HTTP/1.1\r\nHost: x\r\n"


@pytest.fixture(autouse=True)
def caps(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.MAX_BODY_BYTES = 1000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    settings.AGENT_PUSH_MAX_BYTES = CAP
    daphne_fix.install()  # as platform_site.asgi does (request_limits with it)
    # No periodic pass on the test process's reactor: each test calls check() itself.
    monkeypatch.setattr(request_limits, "_checking", [None])


class Queue:
    """The application's queue: what daphne hands the app."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def put_nowait(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if m["type"] == "http.request")


class WebSocketProtocol:
    """Stands in for daphne's WebSocket protocol after an upgrade."""

    def makeConnection(self, transport: Any) -> None:
        self.transport = transport

    def dataReceived(self, data: bytes) -> None:
        pass


def _server() -> Any:
    queue = Queue()
    return SimpleNamespace(
        queue=queue,
        verbosity=1,
        request_buffer_size=8192,
        proxy_forwarded_address_header=None,
        root_path="",
        server_name="daphne",
        protocol_connected=lambda request: None,
        protocol_disconnected=lambda request: None,
        create_application=lambda request, scope: queue,
        ws_factory=SimpleNamespace(buildProtocol=lambda addr: WebSocketProtocol()),
    )


def _connection() -> tuple[Any, Any, StringTransport, Queue]:
    """A daphne HTTP connection over an in-memory transport: (protocol, channel,
    transport, the application's queue)."""
    from daphne.http_protocol import HTTPFactory

    server = _server()
    factory = HTTPFactory(server)
    factory.reactor = Clock()  # Twisted's idle timeout, kept off the real reactor
    protocol = factory.buildProtocol(None)
    transport = StringTransport()
    protocol.makeConnection(transport)
    return protocol, protocol._channel, transport, server.queue


def _post(path: bytes, body: bytes, chunked: bool = False) -> bytes:
    if chunked:
        framed = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + 65536]), body[i : i + 65536])
            for i in range(0, len(body), 65536)
        )
        return b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n" % (
            path,
            framed,
        )
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (
        path,
        len(body),
        body,
    )


def test_the_cap_is_the_largest_body_a_route_accepts(settings: Any) -> None:
    assert body_cap() == CAP
    settings.MAX_BODY_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 5000
    assert body_cap() == 5000


@pytest.mark.parametrize("chunked", [False, True])
def test_a_huge_body_is_kept_in_memory_and_cut_one_byte_past_the_cap(chunked: bool) -> None:
    """Before: a temporary file holding all 300 kB (or 400 MB), all of it put on the app's
    queue. Now the app gets CAP + 1 bytes, enough for its own size check to refuse it."""
    protocol, channel, _, queue = _connection()
    protocol.dataReceived(_post(b"/v1/a2a/message:send", b"x" * BIG, chunked))
    request = channel.requests[-1]
    assert isinstance(request.content, BytesIO)
    assert len(request.content.getvalue()) == CAP + 1
    assert queue.body() == b"x" * (CAP + 1)
    assert request.body_dropped == BIG - CAP - 1
    # With a Content-Length the app sees the length it was told (its 413 goes by it).
    headers = dict(request.requestHeaders.getAllRawHeaders())
    assert headers.get(b"Content-Length") == (None if chunked else [str(BIG).encode()])


@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_within_the_cap_is_handed_on_whole(chunked: bool) -> None:
    protocol, channel, _, queue = _connection()
    body = bytes(range(256)) * 7 + b"end"  # 1,795 bytes
    protocol.dataReceived(_post(b"/api/tasks", body, chunked))
    assert isinstance(channel.requests[-1].content, BytesIO)
    assert queue.body() == body
    assert queue.messages[-1]["more_body"] is False


def test_a_websocket_upgrade_request_keeps_no_more_body_than_the_cap() -> None:
    protocol, channel, transport, _ = _connection()
    protocol.dataReceived(UPGRADE + b"Content-Length: %d\r\n\r\n" % BIG + b"x" * BIG)
    assert isinstance(transport.protocol, WebSocketProtocol)
    assert len(channel.requests[-1].content.getvalue()) == CAP + 1


def test_headers_that_trickle_past_the_header_timeout_close_the_connection() -> None:
    protocol, channel, transport, _ = _connection()
    start = time.monotonic()
    protocol.dataReceived(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    for _ in range(5):
        protocol.dataReceived(b"X-a: b\r\n")  # each byte in time: Twisted's idle timeout
    assert not check(channel, start + 29, LIMITS)
    assert not transport.disconnecting
    assert check(channel, start + 31, LIMITS)
    assert transport.disconnected  # aborted, not a polite close the client can hold open


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout() -> None:
    _, channel, transport, _ = _connection()
    start = time.monotonic()
    assert not check(channel, start + 29, LIMITS)
    assert check(channel, start + 31, LIMITS)
    assert transport.disconnected


def test_a_trickled_body_is_closed_after_the_body_timeout_plus_what_its_bytes_earned() -> None:
    protocol, channel, transport, queue = _connection()
    protocol.dataReceived(b"POST /api/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 9000\r\n\r\n")
    headers_done = channel.platform_receipt.headers_done
    protocol.dataReceived(b"x" * 500)  # half a second earned at 1,000 bytes/s
    assert not check(channel, headers_done + 30.4, LIMITS)
    assert check(channel, headers_done + 30.6, LIMITS)
    assert transport.disconnected
    assert queue.messages == []  # the app never saw the request


def test_bytes_past_the_cap_earn_no_more_time() -> None:
    """A huge body is read and dropped; it must still end within the cap's time."""
    protocol, channel, _, _ = _connection()
    protocol.dataReceived(b"POST /api/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 9000000\r\n\r\n")
    headers_done = channel.platform_receipt.headers_done
    protocol.dataReceived(b"x" * 1_000_000)
    assert not check(channel, headers_done + 30 + CAP / 1000 - 0.1, LIMITS)
    assert check(channel, headers_done + 30 + CAP / 1000 + 0.1, LIMITS)


def test_a_request_being_answered_is_never_limited_and_the_next_starts_its_own_clock() -> None:
    """An SSE stream lasts as long as it lasts; a keep-alive connection waiting between two
    requests is Twisted's idle timeout's business; the next request has its own 30 s."""
    protocol, channel, transport, queue = _connection()
    start = time.monotonic()
    protocol.dataReceived(b"GET /v1/a2a/tasks/t:subscribe HTTP/1.1\r\nHost: x\r\n\r\n")
    assert queue.messages  # handed to the app
    assert not check(channel, start + 86_400, LIMITS)
    protocol.dataReceived(b"GET /healthz HTTP/1.1\r\n")  # pipelined: waits, unparsed
    assert not check(channel, start + 86_400, LIMITS)
    request = channel.requests[-1]
    request.handle_reply({"type": "http.response.start", "status": 200, "headers": []})
    request.handle_reply({"type": "http.response.body", "body": b"data: {}\n\n"})
    # The pipelined request's clock started when Twisted replayed it after the response.
    later = time.monotonic()
    assert channel.platform_receipt is not None
    assert not check(channel, later + 29, LIMITS)
    assert check(channel, later + 31, LIMITS)
    assert transport.disconnected


def test_an_idle_keep_alive_connection_is_closed_after_the_keepalive_timeout(
    settings: Any,
) -> None:
    # Twisted's idle timeout was 12 hours: one client could hold thousands of connections
    # open after one request each. It runs only between requests (not our clock's part).
    settings.HTTP_KEEPALIVE_TIMEOUT = 75.0
    protocol, channel, transport, _ = _connection()
    clock = protocol.callLater.__self__  # the factory's Clock
    protocol.dataReceived(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    request = channel.requests[-1]
    request.handle_reply({"type": "http.response.start", "status": 200, "headers": []})
    request.handle_reply({"type": "http.response.body", "body": b"ok"})
    assert channel.platform_receipt is None
    assert not check(channel, time.monotonic() + 3600, LIMITS)
    clock.advance(74)
    assert not transport.disconnecting
    clock.advance(2)
    assert transport.disconnecting


def test_a_body_pausing_within_its_deadline_is_not_cut_by_the_keepalive_timeout(
    settings: Any,
) -> None:
    # Twisted restarts its idle timer at every byte of a request as well: a 75 s pause in
    # a 1 MB upload allowed 17 minutes cut it. Its own deadline bounds a request arriving.
    settings.HTTP_KEEPALIVE_TIMEOUT = 3.0
    protocol, _, transport, _ = _connection()
    clock = protocol.callLater.__self__
    protocol.dataReceived(SEND + b"Content-Length: 900\r\n\r\n" + b"x" * 500)
    clock.advance(10)
    assert not transport.disconnecting
    settings.REQUEST_BODY_TIMEOUT = 0  # no deadline for the body: the idle timeout holds
    clock.advance(4)
    assert transport.disconnecting


def test_a_response_that_streams_for_hours_is_not_an_idle_connection(settings: Any) -> None:
    settings.HTTP_KEEPALIVE_TIMEOUT = 75.0
    protocol, channel, transport, _ = _connection()
    clock = protocol.callLater.__self__
    protocol.dataReceived(b"GET /v1/a2a/tasks/x:subscribe HTTP/1.1\r\nHost: x\r\n\r\n")
    request = channel.requests[-1]
    request.handle_reply({"type": "http.response.start", "status": 200, "headers": []})
    request.handle_reply({"type": "http.response.body", "body": b"data: {}\n\n", "more_body": True})
    clock.advance(3 * 3600)
    assert not transport.disconnecting


def test_a_websocket_after_its_upgrade_is_never_limited() -> None:
    protocol, channel, transport, _ = _connection()
    start = time.monotonic()
    protocol.dataReceived(UPGRADE + b"\r\n")
    assert isinstance(transport.protocol, WebSocketProtocol)
    assert not check(channel, start + 86_400, LIMITS)
    assert not transport.disconnecting


def test_a_limit_of_zero_is_no_limit() -> None:
    receipt = Receipt(0.0)
    assert receipt.overdue(10**6, 0, 30, 1000, CAP) is None
    receipt.headers_done = 1.0
    assert receipt.overdue(10**6, 30, 0, 1000, CAP) is None
    assert receipt.overdue(31.5, 30, 30, 0, CAP) == "body"  # no rate: a total deadline


def test_every_systemd_unit_lifts_the_descriptor_limit() -> None:
    """systemd's default soft limit is 1,024: one client's connections took them all."""
    from django.conf import settings

    units = sorted((settings.BASE_DIR / "deploy" / "systemd").glob("*.service"))
    assert units
    for unit in units:
        assert "\nLimitNOFILE=65536\n" in unit.read_text(), unit.name
