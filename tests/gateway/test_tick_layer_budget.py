"""The heartbeat tick and a Redis that does not answer (a partition, a stalled server).

The tick's channel-layer part (the re-joins of gateway.connections) came before the
presence refresh and waited on Redis up to its socket timeout (30 s): every tick a
refresh that late, and with a GATEWAY_HEARTBEAT_TIMEOUT of 45 s or less the rows of live
connections went stale and their agents counted as offline. The refresh now comes first
and the layer's part has a bounded share of the tick.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer

from gateway import connections, presence


@pytest.fixture
def silent_redis() -> Iterator[int]:
    """A TCP port that takes connections and never answers: its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(50)
    kept: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                kept.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in kept:
        conn.close()


class Consumer:
    """A live connection as the tick sees it; its re-join waits on the layer."""

    agent_id = "agent-1"
    remote_addr = "127.0.0.1"

    def __init__(self, name: str, now: float, layer: RedisChannelLayer) -> None:
        self.channel_name = name
        self.last_frame_at = now
        self.joined_at = now
        self.layer = layer
        self.resumed = 0

    async def rejoin_group(self) -> None:
        await self.layer.group_add("gw.agent-1", self.channel_name)

    async def resume(self) -> None:
        self.resumed += 1

    async def close(self, code: Any = None, reason: Any = None) -> None:
        return None


def test_a_silent_redis_neither_delays_the_presence_refresh_nor_holds_the_tick(
    silent_redis: int, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.GATEWAY_HEARTBEAT_TIMEOUT = 90
    monkeypatch.setattr(connections, "LAYER_BUDGET_SECONDS", 0.5, raising=False)
    # Production's socket timeout is 30 s (settings.CHANNEL_LAYERS): here 5 s, far more
    # than the tick's budget.
    address = f"redis://127.0.0.1:{silent_redis}/0"
    layer = RedisChannelLayer(hosts=[{"address": address, "socket_timeout": 5}])
    monkeypatch.setattr(connections, "get_channel_layer", lambda: layer)
    refreshed: list[float] = []
    monkeypatch.setattr(presence, "refresh", lambda alive: refreshed.append(time.monotonic()) or [])

    async def tick() -> tuple[float, float]:
        local = connections.LocalConnections()
        consumer = Consumer("specific.x!1", asyncio.get_running_loop().time(), layer)
        local._consumers[consumer.channel_name] = consumer  # one tick by hand, no watcher
        local._marked.add(0)  # the key was seen: a tick looks for it
        local.layer_failed()  # and the connection is due to re-join its group
        began = time.monotonic()
        await local.sweep_once()
        return began, time.monotonic()

    began, ended = asyncio.run(tick())
    assert refreshed, "the presence was not refreshed"
    assert refreshed[0] - began < 0.5  # before any Redis call
    assert ended - began < 3  # the layer's share of the tick is bounded
