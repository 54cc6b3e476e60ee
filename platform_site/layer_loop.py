"""One background event loop per process for channel-layer sends from synchronous code.

Celery worker threads and request threads publish hints (a delivery for an agent's socket,
a task event for streams). ``async_to_sync(layer.group_send)`` from many threads makes a
new event loop, and with channels_redis a new connection pool, per call. Instead each
process keeps one long-lived loop in a daemon thread: threads hand their sends to it, the
layer keeps one pool, and the sends of one group leave in the order they were handed over
(:meth:`LoopThread.submit`).
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
# Sends in flight at once, across keys: side by side they go about three times as fast as
# one at a time on loopback Redis (a send is several round trips), and unbounded they ran
# the layer's connection pool dry (MaxConnectionsError) at a thousand a second.
CONCURRENCY = 32


class _Turns:
    """The order of a loop's sends: one lock per key in use (sends of a key run one after
    another) and room for :data:`CONCURRENCY` at once. Used on the loop's thread only."""

    def __init__(self) -> None:
        self.locks: dict[str | None, tuple[asyncio.Lock, int]] = {}
        self.room = asyncio.Semaphore(CONCURRENCY)

    def take(self, key: str | None) -> asyncio.Lock:
        lock, users = self.locks.get(key) or (asyncio.Lock(), 0)
        self.locks[key] = (lock, users + 1)
        return lock

    def give_back(self, key: str | None) -> None:
        lock, users = self.locks[key]
        if users <= 1:
            del self.locks[key]  # no send of this key waits: its lock goes
        else:
            self.locks[key] = (lock, users - 1)


class LoopThread:
    """A daemon thread running an event loop; started on first use, restarted after a fork
    (a forked child has the attribute but not the thread)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._turns: _Turns | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        return self._running()[0]

    def _running(self) -> tuple[asyncio.AbstractEventLoop, _Turns]:
        with self._lock:
            if (
                self._loop is None
                or self._turns is None
                or self._pid != os.getpid()
                or not self._loop.is_running()
            ):
                loop = asyncio.new_event_loop()
                started = threading.Event()
                loop.call_soon(started.set)
                threading.Thread(target=loop.run_forever, name=self.name, daemon=True).start()
                started.wait(5)
                # A new loop, new locks: an asyncio lock belongs to one loop.
                self._loop, self._turns, self._pid = loop, _Turns(), os.getpid()
            return self._loop, self._turns

    def submit(self, coro: Coroutine[Any, Any, T], key: str | None = None) -> Future[T]:
        """Run ``coro`` on the loop, after every coroutine submitted before it with the same
        ``key`` has finished; returns at once with a concurrent future.

        In order per key (a group: a stream's events), because a channel-layer send is
        several round trips (channels_redis: a group's members, then a script per
        connection): run side by side, a later send could reach a group before an earlier
        one, and a stream drops an event older than the one it has. The tasks start in
        submission order (``call_soon_threadsafe`` is first in, first out) and an asyncio
        lock serves its waiters in that order too. Different keys run side by side, up to
        :data:`CONCURRENCY` at once."""
        loop, turns = self._running()
        return asyncio.run_coroutine_threadsafe(_in_turn(turns, key, coro), loop)


async def _in_turn(turns: _Turns, key: str | None, coro: Coroutine[Any, Any, T]) -> T:
    lock = turns.take(key)  # before any await: in submission order
    try:
        async with lock, turns.room:
            return await asyncio.wait_for(coro, SEND_TIMEOUT)
    finally:
        turns.give_back(key)
        coro.close()  # never awaited when cancelled while waiting for its turn: no warning


sender = LoopThread("channel-layer-sender")
