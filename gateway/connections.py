"""The gateway connections held by THIS process, and the one loop that watches them.

Every ``GATEWAY_HEARTBEAT_TIMEOUT / 3`` seconds one task per process:

* closes connections that sent nothing (not even a ``ping``) for a whole timeout
  (close code 4408): the server notices dead or silent agents by itself;
* refreshes the presence rows of the live ones in a single UPDATE, so 5,000 sockets cost
  one query per interval, and a crashed process's rows go stale on their own; a live
  connection whose row the sweep deleted meanwhile (a database outage longer than the
  timeout) gets it back and is sent what it is owed, as on a fresh connect;
* re-joins hour-old connections to their agent's group (group memberships expire);
* re-joins every live connection to its group, and sends it what it is owed, when Redis
  lost the memberships (a restart: it keeps nothing) or a receive from it failed.

It also remembers the event loop the consumers run on: in the embedded mode the Celery
worker threads push through the in-memory channel layer, whose queues belong to that loop
and must be written from it (``run_coroutine_threadsafe``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
from typing import Protocol

from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from gateway import presence
from gateway.db import db

log = logging.getLogger(__name__)

CLOSE_HEARTBEAT_TIMEOUT = 4408


# Channel-layer group memberships expire (channels_redis ``group_expiry``); long-lived
# sockets re-join their agent's group this often.
GROUP_REJOIN_SECONDS = 3600.0

# Redis runs without persistence (the channel layer needs none), so a restart empties every
# group while the sockets stay open. channels_redis lets one consumer per process read
# Redis at a time (one receive lock): only that one sees the error and closes with 1013,
# the others never notice and sat in no group, so pushes and the sweep's re-hints reached
# nobody and their tasks timed out unsent. Each process keeps a key of its own in each
# Redis of the layer; a tick that finds it gone re-joins every live connection and sends
# it what it is owed. (Closing them all with 1013 would cost each agent a reconnect, a key
# check and a session start, a storm queued behind START_CONCURRENCY, for what one ZADD
# and one outbox read per connection repair.) The key outlives this many ticks, so a tick
# late because the event loop stalled does not pass for a lost Redis.
MARKER_TTL_TICKS = 20
# At most this long (and half a tick) of each tick goes to the channel layer, after the
# presence refresh; what is left waits for the next tick.
LAYER_BUDGET_SECONDS = 5.0


def marker_key(layer: RedisChannelLayer) -> str:
    """This process's key in each Redis of ``layer`` (under the layer's prefix)."""
    return f"{layer.prefix}:gateway:server:{presence.SERVER_ID}"


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
        # Connections whose group membership may be gone (see MARKER_TTL_TICKS), and when
        # it was last found so: one that started its session before then and registered
        # after may have joined the lost group.
        self._unjoined: set[str] = set()
        self._lost_at = -math.inf
        self._marked: set[int] = set()  # the layer's Redis shards holding this process's key

    def __len__(self) -> int:
        return len(self._consumers)

    def add(self, consumer: Watched) -> None:
        self._consumers[consumer.channel_name] = consumer
        loop = asyncio.get_running_loop()
        if consumer.joined_at <= self._lost_at:
            self._unjoined.add(consumer.channel_name)
        self.loop = loop
        task = self._task
        if task is None or task.done() or task.get_loop() is not loop:
            # A new watcher sets the key first, and does not take it missing for a lost
            # Redis (idle, it may have expired: its connections joined their groups now).
            self._marked.clear()
            self._task = loop.create_task(self._watch(), name="gateway-heartbeat")

    def discard(self, consumer: Watched) -> None:
        self._consumers.pop(consumer.channel_name, None)
        self._unjoined.discard(consumer.channel_name)

    def layer_failed(self) -> None:
        """A consumer's channel-layer receive failed: Redis may have lost every membership
        of this process, though the others' receives saw nothing (one receive lock)."""
        self._unjoined.update(self._consumers)
        self._lost_at = asyncio.get_running_loop().time()

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
        """Close silent connections and refresh the presence of the others; then the
        channel layer's part (group re-joins), bounded: a Redis that does not answer (its
        socket timeout is 30 s) must not hold the presence refresh back, or the rows of
        live connections would go stale and their agents count as offline."""
        loop = asyncio.get_running_loop()
        cutoff = loop.time() - settings.GATEWAY_HEARTBEAT_TIMEOUT
        alive: dict[str, tuple[str, str]] = {}
        hourly: list[Watched] = []
        for name, consumer in list(self._consumers.items()):
            if consumer.last_frame_at < cutoff:
                self.discard(consumer)
                with contextlib.suppress(Exception):
                    await consumer.close(code=CLOSE_HEARTBEAT_TIMEOUT)
            else:
                alive[name] = (consumer.agent_id, consumer.remote_addr)
                if loop.time() - consumer.joined_at > GROUP_REJOIN_SECONDS:
                    consumer.joined_at = loop.time()
                    hourly.append(consumer)
        if alive:
            recreated = await db(presence.refresh)(alive)
            if recreated:
                await self._resume(recreated)
        rejoined: list[str] = []  # filled as they re-join: kept if the budget runs out
        budget = min(LAYER_BUDGET_SECONDS, self.interval() / 2)
        try:
            await asyncio.wait_for(self._layer_part(hourly, rejoined), budget)
        except TimeoutError:
            log.warning("gateway: the channel layer did not answer in %.1f s", budget)
        # Group first, outbox second, as at a session start: a push committed after the
        # outbox read finds the connection in the group (a second read sends nothing twice).
        await self._send_owed(rejoined)

    async def _layer_part(self, hourly: list[Watched], rejoined: list[str]) -> None:
        """The tick's channel-layer work: the hourly re-joins, then those of connections
        whose membership may be gone (appended to ``rejoined``)."""
        for consumer in hourly:
            try:
                await consumer.rejoin_group()
            except Exception:  # Redis down: the next hour's tick, or a lost-key re-join
                log.warning(
                    "gateway: %s did not rejoin its group", consumer.channel_name, exc_info=True
                )
        await self._rejoin_lost(rejoined)

    async def _layer_lost(self) -> bool:
        """Whether Redis lost this process's key since the last tick (it restarted empty);
        sets the key again. Raises when Redis is down."""
        layer = get_channel_layer()
        if not isinstance(layer, RedisChannelLayer):
            return False  # the in-memory layer lives and dies with this process
        key = marker_key(layer)
        ttl = max(math.ceil(self.interval() * MARKER_TTL_TICKS), 60)
        lost = False
        for index in range(layer.ring_size):
            redis = layer.connection(index)
            if await redis.set(key, 1, ex=ttl, nx=True):
                # Missing: lost if this watcher had seen it before (its first look sets it).
                lost = lost or index in self._marked
            else:
                await redis.expire(key, ttl)
            self._marked.add(index)
        return lost

    async def _rejoin_lost(self, rejoined: list[str]) -> None:
        """Re-join the groups of the connections whose membership may be gone, adding the
        channel names re-joined to ``rejoined`` (their outbox is read next: a hint sent to
        the empty group is lost)."""
        try:
            if await self._layer_lost():
                log.warning("gateway: Redis lost this process's group memberships")
                self.layer_failed()
        except Exception:  # Redis still down: the next tick looks again
            log.warning("gateway: channel layer unavailable", exc_info=True)
            return
        for name in list(self._unjoined):
            consumer = self._consumers.get(name)
            if consumer is None:
                self._unjoined.discard(name)
                continue
            try:
                await consumer.rejoin_group()
            except Exception:  # Redis failed again: the rest wait for the next tick
                log.warning("gateway: %s did not rejoin its group", name, exc_info=True)
                break
            self._unjoined.discard(name)
            rejoined.append(name)
        if rejoined:
            log.warning("gateway: %d live connections re-joined their groups", len(rejoined))

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
        await self._send_owed(recreated)

    async def _send_owed(self, names: list[str]) -> None:
        """Have each of these live connections look at its outbox, as on a fresh connect."""
        for name in names:
            consumer = self._consumers.get(name)
            if consumer is None:
                continue
            try:
                # While its row was gone the agent counted as offline, and while its group
                # was gone every hint missed it: what was queued meanwhile waits for it.
                await consumer.resume()
            except Exception:  # the sweep's renotify hints pending deliveries in time
                log.warning("gateway: %s not resumed", name, exc_info=True)

    async def _watch(self) -> None:
        with contextlib.suppress(Exception):  # Redis down: the first tick looks again
            await self._layer_lost()
        while self._consumers:
            await asyncio.sleep(self.interval())
            try:
                await self.sweep_once()
            except Exception:  # a DB hiccup must not stop the watcher
                log.exception("gateway heartbeat sweep failed")
        self._task = None


local = LocalConnections()
