"""The gateway connections held by THIS process, and the one loop that watches them.

Every ``GATEWAY_HEARTBEAT_TIMEOUT / 3`` seconds one task per process:

* closes connections that sent nothing (not even a ``ping``) for a whole timeout
  (close code 4408): the server notices dead or silent agents by itself;
* refreshes the presence rows of the live ones in a single UPDATE, so 5,000 sockets cost
  one query per interval, and a crashed process's rows go stale on their own; a live
  connection whose row the sweep deleted meanwhile (a database outage longer than the
  timeout) gets it back and is sent what it is owed, as on a fresh connect;
* re-joins hour-old connections to their agent's group (group memberships expire).

It also remembers the event loop the consumers run on: in the embedded mode the Celery
worker threads push through the in-memory channel layer, whose queues belong to that loop
and must be written from it (``run_coroutine_threadsafe``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from typing import Protocol

from django.conf import settings

from gateway import presence
from gateway.db import db

log = logging.getLogger(__name__)

CLOSE_HEARTBEAT_TIMEOUT = 4408


# Channel-layer group memberships expire (channels_redis ``group_expiry``); long-lived
# sockets re-join their agent's group this often.
GROUP_REJOIN_SECONDS = 3600.0


class Watched(Protocol):
    channel_name: str
    last_frame_at: float
    joined_at: float

    @property
    def agent_id(self) -> str: ...

    @property
    def remote_addr(self) -> str: ...

    async def rejoin_group(self) -> None: ...

    async def resume(self) -> None: ...

    async def close(self, code: int | bool | None = None, reason: str | None = None) -> None: ...


class LocalConnections:
    """The authenticated gateway consumers of this process."""

    def __init__(self) -> None:
        self._consumers: dict[str, Watched] = {}
        # Connections per agent, counted from authentication (before the session starts).
        self._per_agent: collections.Counter[str] = collections.Counter()
        self._task: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._consumers)

    def add(self, consumer: Watched) -> None:
        self._consumers[consumer.channel_name] = consumer
        loop = asyncio.get_running_loop()
        self.loop = loop
        task = self._task
        if task is None or task.done() or task.get_loop() is not loop:
            self._task = loop.create_task(self._watch(), name="gateway-heartbeat")

    def discard(self, consumer: Watched) -> None:
        self._consumers.pop(consumer.channel_name, None)

    def take_slot(self, agent_id: str, limit: int) -> bool:
        """One more connection of ``agent_id`` in this process, unless it has ``limit``
        already: each new one is sent all the agent's owed deliveries, so 500 sockets of
        one agent owed 60 made every other agent's connect wait 17 s."""
        if self._per_agent[agent_id] >= limit:
            return False
        self._per_agent[agent_id] += 1
        return True

    def release_slot(self, agent_id: str) -> None:
        self._per_agent[agent_id] -= 1
        if self._per_agent[agent_id] <= 0:
            del self._per_agent[agent_id]

    def interval(self) -> float:
        return max(settings.GATEWAY_HEARTBEAT_TIMEOUT / 3, 0.05)

    async def sweep_once(self) -> None:
        """Close silent connections and refresh the presence of the others."""
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - settings.GATEWAY_HEARTBEAT_TIMEOUT
        alive: dict[str, tuple[str, str]] = {}
        for name, consumer in list(self._consumers.items()):
            if consumer.last_frame_at < cutoff:
                self.discard(consumer)
                with contextlib.suppress(Exception):
                    await consumer.close(code=CLOSE_HEARTBEAT_TIMEOUT)
            else:
                alive[name] = (consumer.agent_id, consumer.remote_addr)
                if loop.time() - consumer.joined_at > GROUP_REJOIN_SECONDS:
                    consumer.joined_at = loop.time()
                    try:
                        await consumer.rejoin_group()
                    except Exception:  # Redis down: the others' presence is still refreshed
                        log.warning("gateway: %s did not rejoin its group", name, exc_info=True)
        if alive:
            recreated = await db(presence.refresh)(alive)
            if recreated:
                await self._resume(recreated)

    async def _resume(self, recreated: list[str]) -> None:
        """After :func:`presence.refresh` re-registered connections whose row was gone."""
        # A connection that closed while the refresh ran had its row deleted by its
        # end_session, possibly just before the refresh put it back: delete it again, or a
        # closed socket would count as online until the sweep found it stale. (Its _forget
        # left this set before end_session was queued, so it is missing here by now.)
        gone = [name for name in recreated if name not in self._consumers]
        if gone:
            await db(presence.unregister_many)(gone)
        log.warning("gateway: presence of %d live connections re-registered", len(recreated))
        for name in recreated:
            consumer = self._consumers.get(name)
            if consumer is None:
                continue
            try:
                # While the row was gone the agent counted as offline: what was queued
                # meanwhile waits for it, as on a fresh connect.
                await consumer.resume()
            except Exception:  # the sweep's renotify hints pending deliveries in time
                log.warning("gateway: %s not resumed", name, exc_info=True)

    async def _watch(self) -> None:
        while self._consumers:
            await asyncio.sleep(self.interval())
            try:
                await self.sweep_once()
            except Exception:  # a DB hiccup must not stop the watcher
                log.exception("gateway heartbeat sweep failed")
        self._task = None


local = LocalConnections()
