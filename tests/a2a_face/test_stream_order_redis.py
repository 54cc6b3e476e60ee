"""Streams on the Redis channel layer (channels_redis) lose nothing to their neighbours:
a task's quick updates all reach its stream, in order, and closing one stream does not
take an event meant for another stream of the same process. The layer receives for all
of a process's channels through one blocking pop: a reader cancelled between that pop
and its hand-over lost what it popped, whichever stream it was for."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers, get_channel_layer
from django.db import connections

from a2a.face import sse
from a2a.face.db import close_pool
from a2a.models import Task
from tests.support.asgi_calls import http_scope
from tests.support.face_streams import FaceStream

pytestmark = [pytest.mark.distributed, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _fresh_channel_layer(settings: Any) -> Iterator[None]:
    """A new channel layer per test: the Redis layer keeps its receive state per loop."""
    settings.A2A_STREAM_RECHECK = 0.2
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
    close_pool()


def _subscribe(task: Task, token: str) -> FaceStream:
    headers = [(b"a2a-version", b"1.0"), (b"authorization", f"Bearer {token}".encode())]
    return FaceStream(http_scope(f"/v1/a2a/tasks/{task.id}:subscribe", headers=headers))


def _report(task_id: Any, steps: int) -> threading.Thread:
    """What an agent's worker thread does: ``steps`` quick WORKING updates, then done."""

    def work() -> None:
        try:
            task = Task.objects.get(pk=task_id)
            for i in range(steps):
                message = {"messageId": f"s{i}", "role": "ROLE_AGENT", "parts": [{"text": f"{i}"}]}
                task.start_work(f"step {i}", status_message=message)
            task.complete({"ok": True}, [])
        finally:
            connections.close_all()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def _steps(stream: FaceStream) -> list[str]:
    """The texts of the stream's WORKING updates, then the final state."""
    seen = []
    for _name, event in stream.events():
        status = event.get("statusUpdate", {}).get("status")
        if status is not None:
            message = status.get("message")
            seen.append(message["parts"][0]["text"] if message else status["state"])
    return seen


def test_quick_updates_of_one_worker_all_reach_the_stream_in_order(
    alice: Any, make_task: Callable[..., Task]
) -> None:
    """40 updates back to back from one thread: each a send of its own on the process's
    sender loop, none overtaking the one before (the stream would drop the older one)."""
    tasks = [make_task(alice) for _ in range(2)]

    async def scenario() -> list[list[str]]:
        seen = []
        for task in tasks:
            stream = await _subscribe(task, alice.raw_token).open()
            worker = _report(task.id, 40)
            assert stream.handler is not None
            await asyncio.wait_for(asyncio.shield(stream.handler), 20)
            await asyncio.to_thread(worker.join, 10)
            seen.append(_steps(stream))
        await sync_to_async(connections.close_all)()  # the face's request thread's
        return seen

    for seen in asyncio.run(scenario()):
        assert seen == [str(i) for i in range(40)] + ["TASK_STATE_COMPLETED"]


def _subscription(task_id: uuid.UUID) -> sse.Subscription:
    """A subscription of a task with no row: the face's marks are not this test's matter."""
    return sse.Subscription(task_id, watched=True)


def test_closing_a_subscription_ends_its_reader_without_cancelling_it() -> None:
    async def scenario() -> asyncio.Task[None]:
        with mock.patch.object(sse.listeners, "mark"):
            subscription = _subscription(uuid.uuid4())
            await subscription.open()
            reader = subscription._reader
            assert reader is not None
            await subscription.close()
        return reader

    reader = asyncio.run(scenario())
    assert reader.done()
    assert not reader.cancelled()


def test_closing_a_subscription_loses_no_event_of_another_one() -> None:
    """Subscription ``steady`` and, beside it, one of another task that then closes. The
    other's reader is made the one in the blocking pop (it waits for the pop while
    ``steady`` takes a first event), and it closes right after the next event for
    ``steady`` went out: that event must reach ``steady`` all the same."""
    rounds = 15

    async def scenario() -> list[int]:
        layer = get_channel_layer()
        got: list[int] = []
        with mock.patch.object(sse.listeners, "mark"):
            steady = _subscription(uuid.uuid4())
            await steady.open()
            try:
                for k in range(rounds):
                    other = _subscription(uuid.uuid4())
                    await other.open()
                    await asyncio.sleep(0.01)
                    await layer.group_send(steady.group, {"type": sse.MESSAGE_TYPE, "seq": -k})
                    assert await steady.next(5) is not None
                    await asyncio.sleep(0.01)  # the other's reader is in the pop now
                    await layer.group_send(steady.group, {"type": sse.MESSAGE_TYPE, "seq": k})
                    await other.close()
                    message = await steady.next(2)
                    if message is not None:
                        got.append(message["seq"])
            finally:
                await steady.close()
        return got

    assert asyncio.run(scenario()) == list(range(rounds))
