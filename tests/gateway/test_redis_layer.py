"""The distributed mode's channel layer (platform_site/redis_layer.py) keeps nothing for a
channel nobody in the process reads any more.

channels_redis buffers what one reader pops for another local channel under that channel
in ``receive_buffer``, an entry only a receive on that channel removes; ``group_send``
reads the group's members and pushes to them in a later round trip, so a stream (or an
agent socket) that closed in between still got the message, and its entry stayed for the
life of the process, one per such close."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channels.layers import channel_layers, get_channel_layer
from redis.asyncio import Redis

from a2a.face import sse
from platform_site.redis_layer import RedisChannelLayer
from tests.gateway.conftest import open_client

pytestmark = [pytest.mark.distributed, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fresh_layer() -> Iterator[None]:
    channel_layers.backends.clear()  # one bound to each test's event loop
    yield
    channel_layers.backends.clear()


def test_the_distributed_mode_uses_it() -> None:
    assert isinstance(get_channel_layer(), RedisChannelLayer)


def _snapshot(task_id: uuid.UUID) -> dict[str, Any]:
    task = {"id": str(task_id), "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
    return {"seq": 1, "task": task, "pad": "x" * 10_000}


def test_a_snapshot_published_as_its_stream_closes_is_not_kept(monkeypatch: Any) -> None:
    """The publisher (the sender loop's ``group_send``) is held for 20 ms between reading
    the group's members and pushing to them, as a worker on another host or a GC pause
    would be: every stream closes in between."""
    zrange = Redis.zrange
    read = threading.Event()

    async def slow_zrange(self: Any, *args: Any, **kwargs: Any) -> Any:
        members = await zrange(self, *args, **kwargs)
        if threading.current_thread().name == "channel-layer-sender":
            read.set()
            await asyncio.sleep(0.02)
        return members

    monkeypatch.setattr(Redis, "zrange", slow_zrange)

    async def rounds(n: int) -> tuple[set[str], set[str]]:
        layer = get_channel_layer()
        # Another stream of the process stays open: its reader pops every local channel's.
        other = sse.Subscription(uuid.uuid4(), watched=True)
        await other.open()
        closed: set[str] = set()
        try:
            for _ in range(n):
                task_id = uuid.uuid4()
                stream = sse.Subscription(task_id, watched=True)
                await stream.open()
                read.clear()
                sse.publish_snapshot(task_id, _snapshot(task_id))
                await asyncio.to_thread(read.wait, 5)  # it read the group's members
                await stream.close()
                assert stream.channel is not None
                closed.add(stream.channel)
            await asyncio.sleep(1.0)  # the late snapshots are popped by the other reader
            return closed & set(layer.receive_buffer), closed & layer._read
        finally:
            await other.close()

    buffered, still_read = asyncio.run(rounds(30))
    assert buffered == set()
    assert still_read == set()


@pytest.mark.anyio
async def test_a_hint_for_a_closed_agent_socket_is_not_kept(agent: Any) -> None:
    layer = get_channel_layer()
    staying = await open_client(agent.raw_key)
    await staying.send({"type": "ping"})
    assert await staying.recv() == {"type": "pong"}
    before = set(layer._read)
    leaving = await open_client(agent.raw_key)
    await leaving.send({"type": "ping"})
    assert await leaving.recv() == {"type": "pong"}
    (gone,) = layer._read - before  # the leaving socket's channel
    await leaving.close()
    await asyncio.sleep(0.2)
    assert gone not in layer._read
    # A hint that read the agent's group before the socket left comes after it: the other
    # socket's read pops it.
    await layer.send(gone, {"type": "gateway.deliver", "delivery_id": str(uuid.uuid4())})
    await staying.send({"type": "ping"})
    assert await staying.recv() == {"type": "pong"}
    await asyncio.sleep(0.5)
    assert gone not in layer.receive_buffer
    await staying.close()


@pytest.mark.anyio
async def test_a_channel_is_read_from_its_making_until_it_is_forgotten() -> None:
    layer = get_channel_layer()
    made = await layer.new_channel()
    await layer.send(made, {"type": "early"})  # before its first receive: kept
    assert (await layer.receive(made))["type"] == "early"
    layer.forget_channel(made)
    reader = await layer.new_channel()
    receiving = asyncio.ensure_future(layer.receive(reader))
    await layer.send(made, {"type": "late"})  # popped by the other reader: dropped
    await layer.send(reader, {"type": "mine"})
    assert (await asyncio.wait_for(receiving, 5))["type"] == "mine"
    assert made not in layer.receive_buffer
    layer.forget_channel(reader)


@pytest.mark.anyio
async def test_a_stream_whose_group_join_failed_leaves_its_channel_unread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Degraded (Redis refused or stalled the join), the stream re-reads its task; a join
    that lands later would bring the task's events to a channel nobody reads."""
    layer = get_channel_layer()

    async def refused(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("Redis is away")

    monkeypatch.setattr(layer, "group_add", refused)
    before = set(layer._read)
    stream = sse.Subscription(uuid.uuid4(), watched=True)
    await stream.open()
    assert stream.degraded
    assert layer._read == before
    await stream.close()
