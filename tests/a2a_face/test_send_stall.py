"""A client that stops reading is closed: daphne buffers whatever the platform sends a
socket, so a subscriber that never reads would hold its task's whole stream in the
server's memory for as long as it kept the socket open (platform_site/send_stall.py).
Slow: boots the platform."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from a2a.models import Task
from a2a.states import TaskState
from tests.a2a_face.conftest import PLATFORM_ENV
from tests.support.processes import LivePlatform, live_platform_for_mode

pytestmark = pytest.mark.slow

ARTIFACT_BYTES = 8_000_000  # more than the kernel's socket buffers on both sides hold


@pytest.fixture
def stalling_platform(transactional_db: None) -> Iterator[LivePlatform]:
    with live_platform_for_mode(**PLATFORM_ENV, SEND_STALL_TIMEOUT=2) as live:
        yield live


def _subscribe_without_reading(url: str, token: str, task: Task) -> socket.socket:
    """A raw subscription whose client takes the headers and then reads no more; a small
    receive window, so the server's side fills quickly."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(
        f"GET /v1/a2a/tasks/{task.id}:subscribe HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    sock.settimeout(20)
    head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    return sock


def _drain(sock: socket.socket, seconds: float) -> tuple[int, str]:
    """Read what is left until the server ends the connection or ``seconds`` pass: bytes
    read, and how it ended."""
    sock.settimeout(1)
    total, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return total, "reset"
        if not chunk:
            return total, "closed"
        total += len(chunk)
    return total, "open"


def test_a_subscriber_that_stops_reading_is_closed_and_the_task_is_untouched(
    stalling_platform: LivePlatform,
    make_task: Callable[..., Task],
    make_user: Callable[..., Any],
) -> None:
    user = make_user("carol")
    task = make_task(user, state="WORKING")
    sock = _subscribe_without_reading(stalling_platform.url, user.raw_token, task)
    try:
        artifact = {"artifactId": "big", "parts": [{"text": "x" * ARTIFACT_BYTES}]}
        assert task.complete({"verdict": "pass"}, [artifact])
        # The stream re-reads the quiet task every A2A_STREAM_RECHECK (1 s) and writes the
        # artifact; the client reads none of it. Past the 2 s stall (checked every 2 s) the
        # server closes the socket instead of holding the 8 MB.
        time.sleep(9)
        received, ended = _drain(sock, 10)
    finally:
        sock.close()
    assert ended in ("reset", "closed"), (received, ended)
    assert received < ARTIFACT_BYTES
    task.refresh_from_db()
    assert task.state == TaskState.COMPLETED
    assert task.artifacts[0]["artifactId"] == "big"
    server = stalling_platform.procs.get("daphne") or stalling_platform.procs["platform"]
    assert "read nothing for 2 s" in server.log_text()
