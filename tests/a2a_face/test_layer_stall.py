"""Streams while the channel layer's Redis is stalled: connections open, nothing answered.

A Redis that refuses fails the group join at once and the stream re-reads its task every
second instead (test_layer_outage.py). A stalled one (a frozen host, a partition; here a
private ``redis-server`` under ``SIGSTOP``) held the join for as long as the stall lasted,
up to the layer's 30 s socket timeout: a subscribe or a streaming send opened meanwhile
had no status line and no event, though its task was made (and even finished) in the
database, and a client that gave up and sent again made a second task. A stream that had
sent its final event stayed open the same way, on its group leave. Each layer call is now
time-limited (``platform_site.layer_calls``): every answer here comes well inside the
stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from django.db import connections

from a2a.face.db import close_pool
from a2a.models import InvalidTransition, Task
from a2a.states import TaskState
from tests.support.asgi_calls import http_scope
from tests.support.face_streams import FaceStream
from tests.support.processes import LivePlatform, RedisServer, daphne_process, redis_server
from tests.support.redis_stall import SSEReader, stalled

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ENV = {"A2A_STREAM_RECHECK": 1.0, "LOG_LEVEL": "WARNING"}
# What a caller may wait for a stream's first event, or for its end after the task's:
# the 2 s limit on a layer call and the 1 s re-read, with room for a loaded machine, and
# far inside the stall the old code waited out (it lasts as long as the test body).
PROMPT = 6.0


@pytest.fixture(scope="module")
def live(
    django_db_setup: None, django_db_blocker: Any
) -> Iterator[tuple[LivePlatform, RedisServer]]:
    """One daphne whose channel layer (and broker) is a private Redis the tests stall."""
    redis = RedisServer()
    redis.start()
    try:
        with django_db_blocker.unblock(), daphne_process(REDIS_URL=redis.url, **ENV) as proc:
            yield LivePlatform(proc.url, {"daphne": proc}), redis  # type: ignore[attr-defined]
    finally:
        redis.close()


def _subscribe(live: LivePlatform, task: Task, token: str) -> SSEReader:
    url = f"{live.url}/v1/a2a/tasks/{task.pk}:subscribe"
    reader = SSEReader("GET", url, token)
    reader.start()
    return reader


def _ended(task: Task, reader: SSEReader) -> None:
    """However the test went: the task ended and its stream closed (Redis is back), so
    nothing holds the database when the test's rows are flushed."""
    with contextlib.suppress(InvalidTransition):  # ended by the test already
        task.cancel("the test ended")
    reader.join(timeout=35)


def _ends_with(reader: SSEReader, state: str) -> None:
    """The stream ended within :data:`PROMPT` with ``state`` as its last event."""
    assert reader.wait(lambda: reader.ended_at is not None, PROMPT), (
        f"still open {PROMPT} s after the task ended: {reader.states()}"
    )
    assert reader.error is None, reader.error
    assert reader.states()[-1] == state


def test_a_subscribe_opened_during_a_stall_follows_the_task(
    transactional_db: None,
    live: tuple[LivePlatform, RedisServer],
    alice: Any,
    make_task: Callable[..., Task],
) -> None:
    platform, redis = live
    task = make_task(user=alice, state=TaskState.WORKING)
    try:
        with stalled(redis):
            reader = _subscribe(platform, task, alice.raw_token)
            assert reader.wait(lambda: reader.events, PROMPT), (
                f"no event {PROMPT} s into the stall (status {reader.status})"
            )
            assert reader.status == 200
            assert reader.states() == [TaskState.WORKING]
            task.cancel("canceled elsewhere")  # this process publishes to another Redis
            _ends_with(reader, TaskState.CANCELED)
    finally:
        _ended(task, reader)


@pytest.fixture
def layer_redis(settings: Any) -> Iterator[RedisServer]:
    """This process's channel layer on a private Redis (the Celery broker, the hint queue
    and the listener marks stay on the session's)."""
    with redis_server() as server:
        layers = copy.deepcopy(settings.CHANNEL_LAYERS)
        layers["default"]["CONFIG"]["hosts"][0]["address"] = server.url
        settings.CHANNEL_LAYERS = layers
        channel_layers.backends.clear()
        try:
            yield server
        finally:
            channel_layers.backends.clear()
            close_pool()


@pytest.mark.django_db(transaction=True)
def test_a_streaming_send_during_a_stall_answers_its_task(
    layer_redis: RedisServer, alice: Any, agent: Any
) -> None:
    """The task is made and streamed at once: no reason for the client to send again.

    In this process (the face's ASGI handler): with the whole of Redis stalled a daphne's
    send also waits on the Celery broker, for the task's dispatch hint."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    raw = json.dumps({"message": message, "metadata": {"skillId": "ce-review"}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"a2a-version", b"1.0"),
        (b"content-length", str(len(raw)).encode()),
        (b"authorization", f"Bearer {alice.raw_token}".encode()),
    ]
    stream = FaceStream(http_scope("/v1/a2a/message:stream", method="POST", headers=headers), raw)

    async def scenario() -> tuple[float, bool] | None:
        try:
            with stalled(layer_redis) as stall:
                try:
                    async with asyncio.timeout(PROMPT):
                        await stream.open()
                        await stream.wait_events(1)
                except TimeoutError:
                    return None  # failed below, once Redis is back and the caller gone
                first = time.monotonic() - stall
                task = await sync_to_async(Task.objects.get)()
                await sync_to_async(task.cancel)("canceled elsewhere")
                ended = await stream.ended()  # within 5 s
                return first, ended
        finally:
            if stream.handler is not None:
                stream.gone.set()
                await asyncio.wait({stream.handler}, timeout=35)
            await sync_to_async(connections.close_all)()

    outcome = asyncio.run(scenario())
    assert outcome is not None, f"no event {PROMPT} s into the stall: {stream.sent}"
    first, ended = outcome
    assert stream.status == 200, stream.sent
    events = [data for _, data in stream.events()]
    task = Task.objects.get()  # one task, the one streamed
    assert events[0]["task"]["id"] == str(task.pk), f"first event after {first:.1f} s"
    assert ended, f"still open after the task ended: {events}"
    assert events[-1]["statusUpdate"]["status"]["state"] == task.state == TaskState.CANCELED


def test_a_stream_open_before_a_stall_ends_with_its_task(
    transactional_db: None,
    live: tuple[LivePlatform, RedisServer],
    alice: Any,
    make_task: Callable[..., Task],
) -> None:
    """Subscribed with the layer up (its reader waits on Redis), then Redis stalls and the
    task ends: the stream re-reads it, sends the end and closes, without Redis's answer to
    its group leave or to the message that ends its reader."""
    platform, redis = live
    task = make_task(user=alice, state=TaskState.WORKING)
    reader = _subscribe(platform, task, alice.raw_token)
    assert reader.wait(lambda: reader.events, PROMPT), reader.status
    time.sleep(0.5)  # its reader is waiting on Redis
    try:
        with stalled(redis):
            task.cancel("canceled elsewhere")
            _ends_with(reader, TaskState.CANCELED)
    finally:
        _ended(task, reader)
