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

# How long one submitted coroutine may hold up the ones behind it (a send to a layer that
# does not answer); then it is cancelled and its future says so.
SEND_TIMEOUT = 10.0


class LoopThread:
    """A daemon thread running an event loop; started on first use, restarted after a fork
    (a forked child inherits the loop object but not the thread running it)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turn: asyncio.Lock | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        return self._running()[0]

    def _running(self) -> tuple[asyncio.AbstractEventLoop, asyncio.Lock]:
        with self._lock:
            if (
                self._loop is None
                or self._turn is None
                or self._pid != os.getpid()
                or not self._loop.is_running()
            ):
                loop = asyncio.new_event_loop()
                started = threading.Event()
                loop.call_soon(started.set)
                threading.Thread(target=loop.run_forever, name=self.name, daemon=True).start()
                started.wait(5)
                # A new loop, a new turn lock: an asyncio lock belongs to one loop.
                self._loop, self._turn, self._pid = loop, asyncio.Lock(), os.getpid()
            return self._loop, self._turn

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Run ``coro`` on the loop, after every coroutine submitted before it has finished;
        returns at once with a concurrent future.

        One at a time, because a channel-layer send is several round trips (channels_redis:
        a group's members, then a script per connection): run side by side, a later send
        could reach a group before an earlier one, and a stream drops an event older than
        the one it has. The tasks start in submission order (``call_soon_threadsafe`` is
        first in, first out) and an asyncio lock serves its waiters in that order too."""
        loop, turn = self._running()
        return asyncio.run_coroutine_threadsafe(_in_turn(turn, coro), loop)


async def _in_turn(turn: asyncio.Lock, coro: Coroutine[Any, Any, T]) -> T:
    try:
        async with turn:
            return await asyncio.wait_for(coro, SEND_TIMEOUT)
    finally:
        coro.close()  # never awaited when cancelled while waiting for its turn: no warning


sender = LoopThread("channel-layer-sender")
