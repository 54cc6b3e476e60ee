"""A Redis that stalls, and an SSE reader that notes when each event came.

A stalled Redis (a frozen host, a partition, ``SIGSTOP``) keeps its connections open and
answers nothing, unlike a killed one, which refuses at once: a client waits its socket
timeout (30 s on the channel layer) instead of failing. Tests stop a private
:class:`~tests.support.processes.RedisServer` (never the session's) with :func:`stalled`.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.support.processes import RedisServer


@contextmanager
def stalled(server: RedisServer) -> Iterator[float]:
    """Redis stopped (``SIGSTOP``) for the block, continued however it ends; yields the
    ``time.monotonic()`` of the stop."""
    assert server.proc is not None, "start the server first"
    pid = server.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield time.monotonic()
    finally:
        os.kill(pid, signal.SIGCONT)


class SSEReader(threading.Thread):
    """Reads one SSE answer in a thread: the status, each event's data with the
    ``time.monotonic()`` it came at, and when the answer ended."""

    def __init__(self, method: str, url: str, token: str, body: Any = None) -> None:
        super().__init__(daemon=True)
        self.method, self.url, self.token, self.body = method, url, token, body
        self.status: int | None = None
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.ended_at: float | None = None
        self.error: str | None = None

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}", "A2A-Version": "1.0"}
        timeout = httpx.Timeout(60, connect=5)
        try:
            with httpx.stream(
                self.method, self.url, json=self.body, headers=headers, timeout=timeout
            ) as response:
                self.status = response.status_code
                buffer = ""
                for chunk in response.iter_text():
                    buffer += chunk
                    while "\n\n" in buffer:
                        frame, buffer = buffer.split("\n\n", 1)
                        for line in frame.splitlines():
                            if line.startswith("data: "):
                                self.events.append((time.monotonic(), json.loads(line[6:])))
        except Exception as exc:  # the test asserts on what came, this says why not more
            self.error = repr(exc)
        self.ended_at = time.monotonic()

    def states(self) -> list[str]:
        """The task state each event carried (a Task or a status update), in order."""
        states = []
        for _, data in self.events:
            if "task" in data:
                states.append(data["task"]["status"]["state"])
            elif "statusUpdate" in data:
                states.append(data["statusUpdate"]["status"]["state"])
        return states

    def wait(self, check: Any, seconds: float) -> bool:
        """Whether ``check()`` became true within ``seconds`` (polled)."""
        deadline = time.monotonic() + seconds
        while not check():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True
