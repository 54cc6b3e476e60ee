"""platform_site.request_limits on a real ``runplatform`` with one-second deadlines
(``slow``: it boots the platform): a huge body is not stored and its route answers its own
413, trickled requests are closed, keep-alive connections and WebSockets are not."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

UPGRADE = b"GET /ws/agent-gateway/ HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
SEND = b"POST /v1/a2a/message:send HTTP/1.1\r\nHost: x\r\n"

# --- A real runplatform -------------------------------------------------------------------

LIVE_ENV = {
    "LOG_LEVEL": "WARNING",
    "REQUEST_HEADER_TIMEOUT": 1,
    "REQUEST_BODY_TIMEOUT": 1,
    "REQUEST_BODY_MIN_RATE": 1000,
    "MAX_BODY_BYTES": 20_000,
    "AGENT_PUSH_MAX_BYTES": 30_000,
    "GATEWAY_AUTH_TIMEOUT": 30,
}


@pytest.fixture(scope="module")
def live(django_db_setup: None, django_db_blocker: Any) -> Iterator[Any]:
    from tests.support.processes import embedded_platform

    with django_db_blocker.unblock(), embedded_platform(**LIVE_ENV) as proc:
        yield proc


def _socket(live: Any) -> socket.socket:
    host, port = live.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _closed_within(sock: socket.socket, seconds: float, drip: bytes = b"") -> float | None:
    """Seconds until the server closed ``sock`` (sending ``drip`` every 0.25 s meanwhile), or
    None if it stayed open for ``seconds``."""
    start = time.monotonic()
    sock.settimeout(0.25)
    while time.monotonic() - start < seconds:
        try:
            if drip:
                sock.sendall(drip)
            if sock.recv(65536) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except OSError:  # reset: aborted
            return time.monotonic() - start
    return None


def _tmp_file_bytes(pid: int) -> int:
    """Bytes of deleted (temporary) files the process holds open: Twisted's bodies."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if "(deleted)" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
        except OSError:
            continue
    return total


def _recv(sock: socket.socket) -> bytes:
    data = sock.recv(65536)
    if not data:  # else the loops below would read nothing forever
        raise ConnectionError("the server closed the connection before its answer")
    return data


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the next response on ``sock`` (sized or chunked)."""
    sock.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        data += _recv(sock)
    head, _, rest = data.partition(b"\r\n\r\n")
    headers = dict(_headers(head))
    if headers.get("transfer-encoding") == "chunked":
        while not rest.endswith(b"0\r\n\r\n"):
            rest += _recv(sock)
        body = b""
        while True:
            size, _, rest = rest.partition(b"\r\n")
            if int(size, 16) == 0:
                break
            body, rest = body + rest[: int(size, 16)], rest[int(size, 16) + 2 :]
    else:
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            rest += _recv(sock)
        body = rest
    return int(head.split()[1]), body


def _headers(head: bytes) -> list[tuple[str, str]]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return [(k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines)]


@pytest.mark.slow
@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/api/tasks", "platform"),
        ("/v1/a2a/message:send", "a2a"),
    ],
)
def test_a_huge_body_is_not_stored_and_the_route_answers_its_own_413(
    live: Any, chunked: bool, path: str, shape: str
) -> None:
    """2 MB of a 4 MB body sent, then a pause: before, Twisted held them in a temporary
    file (400 MB, 4 GB for four clients); now nothing is stored past the cap."""
    sock = _socket(live)
    host = live.url.removeprefix("http://")
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {4 << 20}"
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\n{framing}\r\n\r\n".encode())
    block = b" " * (1 << 20)
    chunk = b"%x\r\n%s\r\n" % (len(block), block) if chunked else block
    for _ in range(2):
        sock.sendall(chunk)
    time.sleep(0.5)  # loopback: the server has read it all by now
    assert _tmp_file_bytes(live.pid) < 1 << 20
    for _ in range(2):
        sock.sendall(chunk)
    if chunked:
        sock.sendall(b"0\r\n\r\n")
    status, raw = _answer(sock)
    sock.close()
    body = json.loads(raw)
    assert status == 413
    if shape == "a2a":  # the A2A error shape (docs/a2a-face.md)
        assert (body["error"]["code"], body["error"]["status"]) == (413, "INVALID_ARGUMENT")
    else:
        assert body["error"]["code"] == "payload_too_large", body


@pytest.mark.slow
@pytest.mark.parametrize(
    ("head", "drip"),
    [
        (b"", b""),  # says nothing
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", b"X-a: b\r\n"),
        (UPGRADE, b"X-a: b\r\n"),  # a WebSocket never upgraded
        (SEND + b"Content-Length: 9000\r\n\r\n{", b" "),
        (SEND + b"Transfer-Encoding: chunked\r\n\r\n", b"1\r\n \r\n"),  # never ends
    ],
)
def test_a_trickled_request_is_closed(live: Any, head: bytes, drip: bytes) -> None:
    """Each byte within Twisted's idle timeout kept these open forever (2,000 of them, and
    one client made /healthz fail under systemd's 1,024 descriptors)."""
    sock = _socket(live)
    sock.sendall(head)
    # 1 s allowed, checked every second, a few bytes earned: closed within ~3 s.
    took = _closed_within(sock, 8, drip)
    sock.close()
    assert took is not None, "still open after 8 s"


@pytest.mark.slow
def test_keep_alive_and_websockets_outlive_the_deadlines(live: Any) -> None:
    from websockets.sync.client import connect

    host = live.url.removeprefix("http://")
    with connect(f"ws://{host}/ws/agent-gateway/", open_timeout=10) as ws:
        sock = _socket(live)
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert _answer(sock)[0] == 200
        time.sleep(3)  # idle between requests, past both deadlines
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert _answer(sock)[0] == 200
        sock.close()
        assert ws.ping().wait(5)  # the WebSocket is still open (unauthenticated for 30 s)
