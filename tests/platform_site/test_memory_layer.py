"""The embedded channel layer: Channels' in-memory layer with its expiry sweep throttled."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer

from platform_site import memory_layer
from platform_site.memory_layer import CLEAN_EVERY, ThrottledInMemoryChannelLayer


class Clocks:
    """Both clocks the layer reads, moved by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset = 0.0
        real_time, real_monotonic = memory_layer.time.time, memory_layer.time.monotonic
        # channels.layers and platform_site.memory_layer share the ``time`` module
        monkeypatch.setattr(memory_layer.time, "time", lambda: real_time() + self.offset)
        monkeypatch.setattr(memory_layer.time, "monotonic", lambda: real_monotonic() + self.offset)


@pytest.fixture
def sweeps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the runs of Channels' own (full) sweep."""
    runs: list[int] = []
    original = InMemoryChannelLayer._clean_expired

    def counted(self: Any) -> None:
        runs.append(1)
        original(self)

    monkeypatch.setattr(InMemoryChannelLayer, "_clean_expired", counted)
    return runs


def test_the_embedded_mode_uses_it(settings: Any) -> None:
    if not settings.EMBEDDED:
        pytest.skip("the distributed mode's layer is Redis")
    assert isinstance(get_channel_layer(), ThrottledInMemoryChannelLayer)


def test_messages_within_one_interval_sweep_once(
    sweeps: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    clocks = Clocks(monkeypatch)
    layer = ThrottledInMemoryChannelLayer()

    async def traffic() -> None:
        for n in range(50):
            await layer.group_add("agent-x", f"c.inmemory!{n}")
            await layer.group_send("agent-x", {"type": "hint"})
            await layer.send(f"c.inmemory!{n}", {"type": "direct"})
            assert await layer.receive(f"c.inmemory!{n}") == {"type": "hint"}

    asyncio.run(traffic())
    assert len(sweeps) == 1  # not one per group_send and receive (100)
    clocks.offset += CLEAN_EVERY
    asyncio.run(layer.group_send("agent-x", {"type": "later"}))
    assert len(sweeps) == 2


def test_expired_messages_and_memberships_still_go(
    sweeps: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    clocks = Clocks(monkeypatch)
    layer = ThrottledInMemoryChannelLayer(expiry=60, group_expiry=3600)

    async def run() -> None:
        await layer.group_add("agent-x", "stale.inmemory!a")
        await layer.send("stale.inmemory!a", {"type": "unread"})
        clocks.offset += 61  # the unread message expired
        await layer.group_send("agent-z", {"type": "any"})
        # the expired message is dropped, and its channel leaves the group
        assert "stale.inmemory!a" not in layer.channels
        assert "stale.inmemory!a" not in layer.groups.get("agent-x", {})

        await layer.group_add("agent-y", "live.inmemory!c")
        clocks.offset += 3601  # the membership expired
        await layer.group_send("agent-z", {"type": "any"})
        assert "live.inmemory!c" not in layer.groups.get("agent-y", {})

    asyncio.run(run())
