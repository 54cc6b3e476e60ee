"""The embedded mode's process-local fan-out of task events (:mod:`a2a.face.sse`).

The in-memory channel layer lives in the daphne process but is not safe to call from the
Celery worker threads, so the streams of this process get their task's snapshots here:
each subscriber registers its queue with the event loop that awaits it, and a publisher on
any thread wakes that loop thread-safely.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any


class _LocalBus:
    """Subscribers of this process by task id, each with the loop that awaits it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Any]]]] = {}

    def add(self, group: str, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        with self._lock:
            self._subs.setdefault(group, set()).add((loop, queue))

    def remove(
        self, group: str, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]
    ) -> None:
        with self._lock:
            subs = self._subs.get(group)
            if subs is not None:
                subs.discard((loop, queue))
                if not subs:
                    del self._subs[group]

    def has(self, group: str) -> bool:
        with self._lock:
            return group in self._subs

    def fan_out(self, group: str, message: dict[str, Any]) -> None:
        with self._lock:
            targets = list(self._subs.get(group, ()))
        for loop, queue in targets:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(queue.put_nowait, message)


local_bus = _LocalBus()
