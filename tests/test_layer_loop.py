"""The per-process background loop that carries channel-layer sends from sync code."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest

from platform_site import layer_loop
from platform_site.layer_loop import LoopThread


async def _where() -> tuple[str, asyncio.AbstractEventLoop]:
    return threading.current_thread().name, asyncio.get_running_loop()


def test_it_runs_every_send_on_one_background_loop() -> None:
    loop_thread = LoopThread("test-sender")
    first = loop_thread.submit(_where()).result(5)
    second = loop_thread.submit(_where()).result(5)
    assert first[0] == "test-sender"
    assert first[1] is second[1]
    assert first[0] != threading.current_thread().name


def test_it_starts_a_new_loop_in_a_forked_child(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_thread = LoopThread("test-sender")
    parent_loop = loop_thread.loop()
    pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: pid + 1)  # what a child would see
    child_loop = loop_thread.loop()
    assert child_loop is not parent_loop
    assert child_loop.is_running()


def test_a_failed_send_surfaces_on_its_future() -> None:
    async def boom() -> Any:
        raise RuntimeError("layer down")

    future = LoopThread("test-sender").submit(boom())
    with pytest.raises(RuntimeError, match="layer down"):
        future.result(5)


def test_sends_run_one_after_another_in_the_order_they_were_handed_over() -> None:
    """A later send must not overtake an earlier one: a channel-layer send is several
    round trips, and a stream drops an event older than the one it has. Here the first
    sends are the slowest: run side by side, they would arrive last."""
    loop_thread = LoopThread("test-sender")
    arrived: list[int] = []
    running = 0
    most = 0

    async def send(i: int) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep((20 - i) * 0.002)
        arrived.append(i)
        running -= 1

    futures = [loop_thread.submit(send(i)) for i in range(20)]
    for future in futures:
        future.result(5)
    assert arrived == list(range(20))
    assert most == 1


def test_sends_from_many_threads_keep_each_threads_order() -> None:
    loop_thread = LoopThread("test-sender")
    arrived: list[tuple[int, int]] = []

    async def send(thread: int, i: int) -> None:
        await asyncio.sleep(0.001 if i % 2 else 0)
        arrived.append((thread, i))

    def hand_over(thread: int) -> None:
        for future in [loop_thread.submit(send(thread, i)) for i in range(10)]:
            future.result(5)

    threads = [threading.Thread(target=hand_over, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for t in range(4):
        assert [i for thread, i in arrived if thread == t] == list(range(10))


def test_a_send_that_does_not_finish_holds_up_the_others_for_a_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(layer_loop, "SEND_TIMEOUT", 0.05)
    loop_thread = LoopThread("test-sender")

    async def stuck() -> None:
        await asyncio.sleep(60)

    stuck_future = loop_thread.submit(stuck())
    after = loop_thread.submit(_where())
    assert after.result(5)[0] == "test-sender"
    with pytest.raises(TimeoutError):
        stuck_future.result(5)


def test_sends_of_other_keys_run_side_by_side_and_each_key_keeps_its_order() -> None:
    """A group's sends wait for each other, not for another group's: a slow send to one
    stream's group holds up none of the others (one at a time for all went about a third
    as fast on Redis)."""
    loop_thread = LoopThread("test-sender")
    release = threading.Event()
    order: list[tuple[str, int]] = []

    async def send(key: str, i: int) -> None:
        if (key, i) == ("slow", 0):
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 5)
        order.append((key, i))

    slow = [loop_thread.submit(send("slow", i), key="slow") for i in range(3)]
    quick = [loop_thread.submit(send("quick", i), key="quick") for i in range(3)]
    for future in quick:
        future.result(5)  # while the slow key's first send still waits
    assert order == [("quick", 0), ("quick", 1), ("quick", 2)]
    release.set()
    for future in slow:
        future.result(5)
    assert order[3:] == [("slow", 0), ("slow", 1), ("slow", 2)]
    turns = loop_thread._running()[1]
    assert turns.locks == {}  # a key's lock goes with its last send


@pytest.mark.distributed
def test_group_sends_reach_a_redis_group_member_in_the_order_they_were_handed_over() -> None:
    """On the real Redis layer (channels_redis): 200 publishes of a task's events, as
    :func:`a2a.face.sse.publish_snapshot` hands them over, arrive in sequence order."""
    from channels.layers import channel_layers, get_channel_layer

    channel_layers.backends.clear()  # a layer (and pool) of this test's loops only
    layer = get_channel_layer()
    loop_thread = LoopThread("test-sender")

    async def scenario() -> list[int]:
        channel = await layer.new_channel()
        await layer.group_add("test-layer-loop-order", channel)
        try:
            futures = [
                loop_thread.submit(
                    layer.group_send("test-layer-loop-order", {"type": "a2a.task", "seq": seq})
                )
                for seq in range(1, 201)
            ]
            got = [(await asyncio.wait_for(layer.receive(channel), 10))["seq"] for _ in futures]
            for future in futures:
                await asyncio.wrap_future(future)
            return got
        finally:
            await layer.group_discard("test-layer-loop-order", channel)

    try:
        assert asyncio.run(scenario()) == list(range(1, 201))
    finally:
        channel_layers.backends.clear()
