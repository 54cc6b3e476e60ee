"""One background event loop per process for channel-layer sends from synchronous code.

Celery worker threads and request threads publish hints (a delivery for an agent's socket,
a task event for streams). ``async_to_sync(layer.group_send)`` from many threads makes a
new event loop, and with channels_redis a new connection pool, per call. Instead each
process keeps one long-lived loop in a daemon thread: threads hand their sends to it, the
layer keeps one pool, and sends leave in the order they were handed over.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A daemon thread running an event loop; started on first use, restarted after a fork
    (a forked child inherits the loop object but not the thread running it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or not self._loop.is_running():
                loop = asyncio.new_event_loop()
                started = threading.Event()
                loop.call_soon(started.set)
                threading.Thread(target=loop.run_forever, name=self.name, daemon=True).start()
                started.wait(5)
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run ``coro`` on the loop; returns at once with a concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop())


sender = LoopThread("channel-layer-sender")
