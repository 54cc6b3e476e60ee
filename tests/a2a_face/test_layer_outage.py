"""Streams and blocking sends while the shared channel layer (Redis) is away.

A blocking ``message:send`` or a ``message:stream`` creates the task, then subscribes to
its events. With Redis away the subscribe failed and the face answered 503 UNAVAILABLE
("try again") for a task it had created and was sending: the client's retry made a second
task, and the agent got the work twice. The row is the truth: without the layer the task
is re-read instead, and the caller gets its task.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.layers import channel_layers
from channels_redis.core import RedisChannelLayer
from django.db import connections

from a2a.face.db import close_pool
from a2a.models import Task
from a2a.states import TaskState
from tests.support.asgi_calls import http_scope
from tests.support.face_streams import FaceStream

pytestmark = [pytest.mark.distributed, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def redis_away(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The channel layer cannot reach Redis (a fresh layer: it keeps state per loop)."""

    async def refused(self: RedisChannelLayer, *args: Any, **kwargs: Any) -> None:
        raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379.")

    monkeypatch.setattr(RedisChannelLayer, "group_add", refused)
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()
    close_pool()


def _request(path: str, token: str, body: dict[str, Any]) -> FaceStream:
    raw = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"a2a-version", b"1.0"),
        (b"content-length", str(len(raw)).encode()),
        (b"authorization", f"Bearer {token}".encode()),
    ]
    return FaceStream(http_scope(path, method="POST", headers=headers), raw)


def _send_body() -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    return {"message": message, "metadata": {"skillId": "ce-review"}}


def test_a_stream_starts_without_the_layer(alice: Any, agent: Any) -> None:
    async def scenario() -> Any:
        try:
            stream = _request("/v1/a2a/message:stream", alice.raw_token, _send_body())
            await stream.open()
            await stream.wait_events(1)
            await stream.leave()
            return stream
        finally:
            await sync_to_async(connections.close_all)()

    stream = asyncio.run(scenario())
    assert stream.status == 200, stream.sent
    first = stream.events()[0][1]
    assert first["task"]["id"] == str(Task.objects.get().id)  # one task, the one streamed


def test_a_blocking_send_follows_its_task_without_the_layer(alice: Any, agent: Any) -> None:
    """The task is re-read while the send waits: its end is answered."""

    def cancel_soon() -> None:
        try:
            for _ in range(100):
                task = Task.objects.first()
                if task is not None:
                    task.cancel("canceled elsewhere")
                    return
                threading.Event().wait(0.1)
        finally:
            connections.close_all()

    async def scenario() -> Any:
        try:
            stream = _request("/v1/a2a/message:send", alice.raw_token, _send_body())
            canceler = threading.Thread(target=cancel_soon)
            canceler.start()
            await stream.open()
            await asyncio.to_thread(canceler.join)
            return stream
        finally:
            await sync_to_async(connections.close_all)()

    stream = asyncio.run(scenario())
    assert stream.status == 200, stream.sent
    assert stream.json()["task"]["status"]["state"] == TaskState.CANCELED
    assert Task.objects.count() == 1
