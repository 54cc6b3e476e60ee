"""Channel-layer sends from synchronous code (Celery workers, request threads).

``async_to_sync(layer.group_send)`` from many threads at once makes a new event loop (and
a new Redis pool) per call and, with channels_redis, serialises badly under concurrency.
Instead every process keeps ONE background event loop for its outgoing hints; threads hand
their sends to it. In the embedded mode the in-memory layer's queues belong to the loop the
consumers run on, so sends go to that loop instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from gateway.connections import local

log = logging.getLogger(__name__)


class _LoopThread:
    """A daemon thread running an event loop, restarted after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or not self._loop.is_running():
                loop = asyncio.new_event_loop()
                started = threading.Event()
                loop.call_soon(started.set)
                threading.Thread(
                    target=loop.run_forever, name="gateway-notify", daemon=True
                ).start()
                started.wait(5)
                self._loop, self._pid = loop, os.getpid()
            return self._loop


_notifier = _LoopThread()


def group_send(group: str, event: dict[str, Any], timeout: float = 5.0) -> bool:
    """Send ``event`` to ``group`` from synchronous code; False if it could not be sent."""
    layer = get_channel_layer()
    if layer is None:
        return False
    consumers_loop = local.loop
    if isinstance(layer, InMemoryChannelLayer):
        if consumers_loop is None or not consumers_loop.is_running():
            return False  # no consumer in this process: nobody could receive it
        loop = consumers_loop
    else:
        loop = _notifier.loop()
    try:
        asyncio.run_coroutine_threadsafe(layer.group_send(group, event), loop).result(timeout)
    except Exception:
        log.warning("gateway: group_send to %s failed", group, exc_info=True)
        return False
    return True
